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
//! longer be trusted from [`Hold::lost`]: on an error state per the error policy, and under
//! either policy a tenth of the session timeout before the earliest moment the server may expire
//! the session, by the framework's expiry clock ([`hold_deadline`]), whatever the connection
//! says (a server that stops hearing us while its notifications reach us keeps the connection up
//! past the expiry).
//!
//! ## One `Hold` for every guard
//! Every recipe's guard (the mutex's `MutexGuard` and `SingleNodeGuard`, the read-write lock's
//! two, the semaphore's `Lease`) stands for one [`HeldLease`], and what a holder does with it
//! (node path, fencing token, session generation, [`lost`](Hold::lost),
//! [`write_guarded`](Hold::write_guarded), [`revocation_requested`](Hold::revocation_requested))
//! is written and documented once, as the provided methods of the [`Hold`] trait; a guard
//! implements only [`Hold::held_lease`]. A trait rather than an accessor
//! (`guard.lease().fencing_token()`) or a `Deref` to the lease: callers keep writing
//! `guard.fencing_token()`, generic code takes any guard as `&impl Hold`, and a guard does not
//! pretend to be a smart pointer. The price is one import, `use zk_recipes_mutex::Hold;` (every
//! recipe crate re-exports it, and the compiler suggests it). What differs between guards —
//! `release` (for a reentered hold, only the last guard deletes the node), `reenter`, `downgrade`
//! — stays on each guard and needs no import.
//!
//! ## Why some futures are boxed
//! A waiting acquire's future lives as long as it waits, and a process may have thousands of
//! them: its size is the memory each waiter costs, and the locks bench showed these choices
//! matter. [`LockInternals::acquire`] boxes its two halves, so the create's state is freed before
//! the wait's is allocated. Futures that only some acquires need (a second listing, the wait on a
//! predecessor, the revocation watch, giving a node back) are boxed where they start, so an
//! acquire that does not need them does not carry their space. `enqueue`, `wait_queued` (through
//! the private `enqueue_inner` and `wait_queued_inner`) and [`HeldLease::release`] return a
//! future instead of being `async fn`s, which would keep their arguments twice in their state.
//! And the predecessor wait's `select!` makes its branches' futures in place rather than moving
//! them in from locals, so it holds one copy of each. The code carries only pointers to this
//! paragraph.

mod driver;
mod error;
mod expiry;
mod hold;
mod internals;
mod layouts;
mod lease;
mod listing;
mod lost;
mod metrics;
mod multi;
mod revocation;

pub use driver::{
    sort_children, sort_children_by, sort_key, Decision, LockDriver, NextStep, OurNodeMissing, StandardDriver,
};
pub use error::{LockError, Result};
pub use expiry::{hold_deadline, step_down_margin};
pub use hold::SharedHold;
pub use internals::{LockInternals, QueuedNode, Wait};
pub use layouts::{
    trailing_sequence, KazooDriver, LockLayout, ZooKeeperRecipeDriver, KAZOO_LOCK_NAME, KAZOO_READ_LOCK_NAME,
    ZOOKEEPER_RECIPE_DATA, ZOOKEEPER_RECIPE_PREFIX,
};
pub use lease::{HeldLease, Hold, RELEASE_TIMEOUT};
pub use lost::LostReason;
pub use metrics::{HoldTimer, LockMetrics};
/// The framework's transaction ops and results, which [`Hold::write_guarded`] takes and returns.
pub use zk_recipes_framework::{TransactionOp, TransactionResult};
/// The boxed-future type the lock traits use, re-exported so implementors need no `futures`
/// dependency of their own.
pub mod futures_compat {
    pub use futures::future::BoxFuture;
}
pub use multi::{DistributedGuard, DistributedLock, MultiGuard, MultiLock};
pub use revocation::{revoke, REVOKE_MESSAGE};

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
