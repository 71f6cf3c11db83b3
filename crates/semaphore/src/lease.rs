//! [`Lease`]: one lease of a semaphore, what its holder does with it, and its release.

use zk_recipes_framework::Deadline;
use zk_recipes_lock_internals::futures_compat::BoxFuture;
use zk_recipes_lock_internals::{DistributedGuard, HeldLease, Hold, LockError, RELEASE_TIMEOUT};

use crate::error::Result;

/// One lease of a [`Semaphore`]. Released by [`release`](Self::release), or in the background
/// when dropped. What a holder does with it (node path, fencing token, `lost()`, guarded writes)
/// is [`Hold`]'s: a lease taken later has a larger fencing token, so a resource that remembers the
/// largest token it has seen can refuse a writer whose lease was lost meanwhile.
///
/// ```no_run
/// # async fn demo(semaphore: zk_recipes_semaphore::Semaphore) -> zk_recipes_semaphore::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_semaphore::Hold;
///
/// let lease = semaphore.acquire_timeout(Duration::from_secs(5)).await?;
/// println!("{} (fencing token {})", lease.node_path(), lease.fencing_token());
/// tokio::select! {
///     reason = lease.lost() => println!("lost ({reason:?}): stop using the resource"),
///     () = tokio::time::sleep(Duration::from_secs(1)) => println!("work done"),
/// }
/// lease.release().await?;
/// # Ok(()) }
/// ```
///
/// [`Semaphore`]: crate::Semaphore
#[must_use = "if unused the lease is immediately released"]
#[derive(Debug)]
pub struct Lease {
    pub(crate) held: HeldLease,
}

impl Lease {
    /// Releases the lease: deletes its node and reports the outcome.
    ///
    /// # Errors
    /// The delete failed within [`RELEASE_TIMEOUT`] (30 s); the cleanup worker goes on in the
    /// background.
    ///
    /// # Cancel safety
    /// Cancel safe: the lease is given up either way. A cancelled release leaves the delete to the
    /// framework's cleanup worker, which deletes the node in the background.
    pub async fn release(self) -> Result<()> {
        Ok(self.held.release(Deadline::after(RELEASE_TIMEOUT)).await?)
    }
}

impl Hold for Lease {
    fn held_lease(&self) -> &HeldLease {
        &self.held
    }
}

impl DistributedGuard for Lease {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), LockError>> {
        Box::pin(async move { Ok(Lease::release(*self).await?) })
    }

    fn node_path(&self) -> &str {
        Hold::node_path(self)
    }
}
