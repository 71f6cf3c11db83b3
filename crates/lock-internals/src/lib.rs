//! # zk-recipes-lock-internals
//!
//! The one driver every zk-recipes lock uses (Curator's `LockInternals`): it creates our contender
//! node with the framework's protected create, lists and sorts the contenders as Curator does,
//! asks a [`LockDriver`] whether we hold and which single node to watch (no herd effect: each
//! release wakes exactly one waiter), waits on exactly that node with a data watch, and honours
//! deadlines and cancellation without leaving nodes behind.
//!
//! Wire format: nodes `<dir>/_c_<uuid>-<lock name><sequence>`, EPHEMERAL_SEQUENTIAL, the same as
//! Curator's, so Rust and Java contenders queue together.
//!
//! ## Connection loss and session expiry
//! While waiting, a `Suspended` connection is waited out (zookeeper-client re-registers the watch
//! on reconnection). If the session is lost, our node is gone with it and the acquire fails with
//! [`LockError::NodeLost`]: it never silently holds nothing. A holder learns that its lock can no
//! longer be trusted from [`HeldLease::lost`].

mod driver;
mod error;
mod hold;
mod internals;
mod layouts;
mod lease;
mod listing;
mod metrics;
mod multi;

pub use driver::{
    sort_children, sort_children_by, sort_key, Decision, LockDriver, OurNodeMissing, StandardDriver,
};
pub use error::{LockError, Result};
pub use hold::SharedHold;
pub use internals::{revoke, LockInternals, QueuedNode, Wait, REVOKE_MESSAGE};
pub use layouts::{
    trailing_sequence, KazooDriver, LockLayout, ZooKeeperRecipeDriver, KAZOO_LOCK_NAME, KAZOO_READ_LOCK_NAME,
    ZOOKEEPER_RECIPE_DATA, ZOOKEEPER_RECIPE_PREFIX,
};
pub use lease::{GuardedOp, HeldLease, LostReason};
pub use metrics::{HoldTimer, LockMetrics};
/// The boxed-future type the lock traits use, re-exported so implementors need no `futures`
/// dependency of their own.
pub mod futures_compat {
    pub use futures::future::BoxFuture;
}
pub use multi::{DistributedGuard, DistributedLock, MultiGuard, MultiLock};

/// How long a recipe's `release().await` (and an explicit give-back of a lease it did not want)
/// tries before it gives up and leaves the delete to the framework's cleanup worker.
pub const RELEASE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(30);

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<LockInternals>();
        assert_send_sync::<HeldLease>();
        assert_send_sync::<SharedHold>();
        assert_send_sync::<LockError>();
        assert_send_sync::<StandardDriver>();
        assert_send_sync::<QueuedNode>();
        assert_send_sync::<KazooDriver>();
    }
}
