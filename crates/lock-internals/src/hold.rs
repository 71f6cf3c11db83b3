//! One hold shared by the guards that reentered it.

use std::fmt;
use std::ops::Deref;
use std::sync::Arc;

use zk_recipes_framework::Deadline;

use crate::error::Result;
use crate::lease::{HeldLease, RELEASE_TIMEOUT};

/// A [`HeldLease`] shared by every guard of one hold: the guard a lock handed out and the ones
/// made from it with [`reenter`](Self::reenter) (the explicit form of Curator's per-thread
/// reentrancy). The lock node is deleted when the last of them is released or dropped.
///
/// Derefs to the [`HeldLease`], for the [`Hold`](crate::Hold) methods (node path, fencing token,
/// `lost()`, guarded writes).
///
/// Not `Clone`: another guard of the same hold is made explicitly with `reenter`.
///
/// ```no_run
/// # async fn demo(lease: zk_recipes_lock_internals::HeldLease) -> zk_recipes_lock_internals::Result<()> {
/// use zk_recipes_lock_internals::SharedHold;
///
/// let hold = SharedHold::new(lease);
/// let again = hold.reenter(); // no ZooKeeper traffic
/// assert_eq!(hold.hold_count(), 2);
/// again.release().await?; // not the last: the node stays
/// hold.release().await?; // the last: deletes the node and reports the outcome
/// # Ok(()) }
/// ```
#[must_use = "dropping the last guard of a hold releases it"]
pub struct SharedHold {
    lease: Arc<HeldLease>,
}

impl SharedHold {
    /// The first guard of a hold.
    pub fn new(lease: HeldLease) -> Self {
        Self { lease: Arc::new(lease) }
    }

    /// Another guard of the same hold, with no ZooKeeper traffic.
    pub fn reenter(&self) -> Self {
        Self { lease: self.lease.clone() }
    }

    /// How many guards share this hold now.
    pub fn hold_count(&self) -> usize {
        Arc::strong_count(&self.lease)
    }

    /// Releases this guard. The last guard of the hold deletes the lock node, on the node's own
    /// session, and reports the outcome; when guards are released at once from several threads,
    /// exactly one of them is the last and awaits the delete.
    ///
    /// # Errors
    /// From the last guard only: [`crate::LockError::NodeLost`] if the node's session is gone (the
    /// hold was lost before this release); the delete failed within [`RELEASE_TIMEOUT`] (the
    /// cleanup worker goes on in the background).
    ///
    /// # Cancel safety
    /// Cancel safe: the node is not left behind. A cancelled release of the last guard leaves the
    /// delete to the framework's cleanup worker, which deletes the node in the background; for any
    /// other guard there is nothing to cancel.
    pub async fn release(self) -> Result<()> {
        match self.into_last() {
            Some(lease) => lease.release(Deadline::after(RELEASE_TIMEOUT)).await,
            None => Ok(()),
        }
    }

    /// The lease, if this is the last guard of the hold; `None` (and this guard is gone) otherwise.
    pub fn into_last(self) -> Option<HeldLease> {
        Arc::into_inner(self.lease)
    }
}

impl Deref for SharedHold {
    type Target = HeldLease;

    fn deref(&self) -> &HeldLease {
        &self.lease
    }
}

impl fmt::Debug for SharedHold {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedHold")
            .field("lease", &*self.lease)
            .field("hold_count", &self.hold_count())
            .finish()
    }
}
