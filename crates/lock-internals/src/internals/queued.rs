//! [`QueuedNode`]: our node, queued in the lock directory, between
//! [`LockInternals::enqueue`](crate::LockInternals::enqueue) and
//! [`LockInternals::wait_queued`](crate::LockInternals::wait_queued).

use std::time::Instant;

use zk_recipes_framework::OwnedNode;

use crate::driver::Decision;

/// Our node, queued in the lock directory, with what the listing right after its create said:
/// [`LockInternals::enqueue`] makes one, [`LockInternals::wait_queued`] waits on it. Dropping it
/// deletes the node (in the background).
///
/// ```no_run
/// # async fn demo(internals: zk_recipes_lock_internals::LockInternals) -> zk_recipes_lock_internals::Result<()> {
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::Wait;
///
/// let queued = internals.enqueue(b"", Deadline::never()).await?;
/// println!("{} is number {} in the queue", queued.node_path(), queued.position());
/// let held = internals.wait_queued(queued, Wait::Until(Deadline::never())).await?;
/// # Ok(()) }
/// ```
///
/// [`LockInternals::enqueue`]: crate::LockInternals::enqueue
/// [`LockInternals::wait_queued`]: crate::LockInternals::wait_queued
#[must_use = "dropping a queued node gives up its place (the node is deleted)"]
#[derive(Debug)]
pub struct QueuedNode {
    pub(super) node: OwnedNode,
    pub(super) decision: Decision,
    pub(super) position: usize,
    pub(super) started: Instant,
}

impl QueuedNode {
    /// Whether our node held the lock at the listing after its create.
    pub fn is_owner(&self) -> bool {
        self.decision.holds
    }

    /// Our node's index among the sorted contenders at that listing (0: first in line).
    pub fn position(&self) -> usize {
        self.position
    }

    /// Our node's full path.
    pub fn node_path(&self) -> &str {
        self.node.path()
    }

    /// The node we wait behind, if we do not hold (a name in the lock directory).
    pub fn waits_behind(&self) -> Option<&str> {
        self.decision.path_to_watch.as_deref()
    }
}
