//! # zk-recipes-leader
//!
//! Leader election on ZooKeeper, wire-compatible with Apache Curator: a Rust participant and a
//! Java (Curator) participant on the same path take part in one election.
//!
//! - [`LeaderLatch`] (Curator's `LeaderLatch`): join, learn when you lead
//!   ([`has_leadership`](LeaderLatch::has_leadership), [`await_leadership`](LeaderLatch::await_leadership),
//!   [`subscribe`](LeaderLatch::subscribe)), stay leader until you close or the connection fails.
//!   Nodes `<path>/_c_<uuid>-latch-<sequence>`, data: the participant id.
//! - [`LeaderSelector`] (Curator's `LeaderSelector`): your async `take_leadership` runs while you
//!   lead; leadership ends when it returns, and with auto-requeue you queue again. It is a mutex
//!   ([`zk_recipes_mutex::Mutex`]) on its path: nodes `<path>/_c_<uuid>-lock-<sequence>`, data:
//!   the participant id (else this host's address).
//!
//! Both give the leader a **fencing token** (its node's creation zxid, larger for every later
//! leader) to guard writes to other systems, and list [`Participant`]s with their ids.
//!
//! - [`ElectionObserver`] (etcd's `Observe`): follow who leads either kind of election without
//!   joining it, as a stream of [`LeaderChange`]s read from the server.
//! - A leader **proclaims** (etcd's `Proclaim`): [`LeaderLatch::proclaim`] and
//!   [`Leadership::proclaim`] set the data of its own node, guarded by its hold, so observers and
//!   Curator's `getLeader()` see it.
//!
//! ## Connection loss and session expiry
//! Both end leadership as soon as the connection enters an error state per the framework's
//! [`ErrorPolicy`](zk_recipes_framework::ErrorPolicy): `Suspended` under `Standard` (the default),
//! `Lost` under either. The latch flips [`has_leadership`](LeaderLatch::has_leadership) at once,
//! looks again after `Reconnected`, and joins again with a new node after a new session. The
//! selector cancels the [`Leadership`] token at once and drops the leadership's future no later
//! than the earliest moment the server may expire the session
//! ([`LeaderSelector::grace_after_suspension`]). Neither ever claims leadership with a node whose
//! session is not its current one.
//!
//! Both also end a leadership by the framework's expiry clock
//! ([`Framework::earliest_session_expiry`](zk_recipes_framework::Framework::earliest_session_expiry)),
//! a tenth of the session timeout before the server may expire the session, whatever the
//! connection says: a server that stops hearing us while its replies or watch events still reach
//! us keeps the connection up past the expiry. The latch says why with
//! [`NotLeaderReason::SessionMayExpire`] and leads again with the same node if the server answers
//! again in time.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_framework::Framework;
//! use zk_recipes_leader::{CloseMode, LeaderLatch, LeadershipEvent};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").session_timeout(Duration::from_secs(10)).start()?;
//! let latch = LeaderLatch::new(&framework, "/services/billing/leader", "billing-7")?;
//! let mut events = latch.subscribe();
//! latch.start()?;
//! while let Some(event) = events.next().await {
//!     match event {
//!         LeadershipEvent::IsLeader { fencing_token } => println!("leading ({fencing_token})"),
//!         LeadershipEvent::NotLeader { reason } => println!("not leading: {reason:?}"),
//!         _ => {}
//!     }
//! #   break;
//! }
//! latch.close(CloseMode::NotifyLeader).await?;
//! # Ok(()) }
//! ```

mod error;
mod handle;
mod kazoo;
mod latch;
mod metrics;
mod observer;
mod participant;
mod selector;

pub use error::{LeaderError, Result, Subject};
pub use kazoo::{KazooElection, KazooLeadership};
pub use latch::{
    CloseMode, LatchDropGuard, LeaderLatch, LeadershipEvent, LeadershipEvents, NotLeaderReason, LATCH_NAME,
};
pub use observer::{ElectionLayout, ElectionObserver, LeaderChange};
pub use participant::Participant;
pub use selector::{
    CancelReason, LeaderSelector, LeaderSelectorBuilder, Leadership, SelectorDropGuard, DEFAULT_CLOSE_GRACE,
    SELECTOR_LOCK_NAME,
};

/// The latch's and the selector's step-down decisions as pure functions, without I/O: the code the selector runs
/// and the models in the repository's `crates/model` check. Not part of the stable API.
#[doc(hidden)]
pub mod decisions {
    pub use crate::selector::lead::grace_after_suspension;
    pub use zk_recipes_lock_internals::step_down_margin;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<LeaderLatch>();
        assert_send_sync::<LatchDropGuard>();
        assert_send_sync::<LeadershipEvents>();
        assert_send_sync::<LeadershipEvent>();
        assert_send_sync::<LeaderSelector>();
        assert_send_sync::<LeaderSelectorBuilder>();
        assert_send_sync::<SelectorDropGuard>();
        assert_send_sync::<Leadership>();
        assert_send_sync::<Participant>();
        assert_send_sync::<LeaderError>();
        assert_send_sync::<KazooElection>();
        assert_send_sync::<KazooLeadership>();
        assert_send_sync::<ElectionObserver>();
        assert_send_sync::<ElectionLayout>();
        assert_send_sync::<LeaderChange>();
    }
}
