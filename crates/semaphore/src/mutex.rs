//! [`SemaphoreMutex`]: the non-reentrant mutex, a semaphore with one lease.

use std::time::Duration;

use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_lock_internals::futures_compat::BoxFuture;
use zk_recipes_lock_internals::{DistributedGuard, DistributedLock, LockError};

use crate::error::Result;
use crate::lease::Lease;
use crate::semaphore::Semaphore;

/// A non-reentrant distributed mutex: a [`Semaphore`] with one lease (Curator's
/// `InterProcessSemaphoreMutex`). Unlike the reentrant mutex, a second
/// `lock` by the same holder waits for the first to be released.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_semaphore::Result<()> {
/// let mutex = zk_recipes_semaphore::SemaphoreMutex::new(&framework, "/app/singleton")?;
/// let guard = mutex.lock_timeout(std::time::Duration::from_secs(5)).await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SemaphoreMutex {
    semaphore: Semaphore,
}

impl SemaphoreMutex {
    /// A semaphore mutex at `path`.
    ///
    /// # Errors
    /// An invalid path; nothing is sent.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        Ok(Self { semaphore: Semaphore::new(framework, path, 1)? })
    }

    /// Waits for the lock as long as it takes.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many_until`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lock` loses its place in line; its nodes, if they were created
    /// (the internal lock's and the lease's), are deleted by the framework's cleanup worker.
    pub async fn lock(&self) -> Result<Lease> {
        self.semaphore.acquire().await
    }

    /// Waits for the lock at most `timeout`.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many_until`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lock_timeout` loses its place in line; its nodes, if they were
    /// created (the internal lock's and the lease's), are deleted by the framework's cleanup
    /// worker.
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<Lease> {
        self.semaphore.acquire_timeout(timeout).await
    }

    /// Waits for the lock until `deadline` (a [`Deadline`], or a `Duration` from now), as
    /// [`Semaphore::acquire_until`] and the other locks' `*_until` calls.
    ///
    /// ```no_run
    /// # async fn demo(mutex: zk_recipes_semaphore::SemaphoreMutex) -> zk_recipes_semaphore::Result<()> {
    /// use zk_recipes_framework::Deadline;
    /// let guard = mutex.lock_until(Deadline::after(std::time::Duration::from_secs(5))).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many_until`]: a timeout at the deadline
    /// ([`SemaphoreError::is_timeout`]), and the call's nodes are deleted.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lock_until` loses its place in line; its nodes, if they were
    /// created (the internal lock's and the lease's), are deleted by the framework's cleanup
    /// worker.
    ///
    /// [`SemaphoreError::is_timeout`]: crate::SemaphoreError::is_timeout
    pub async fn lock_until(&self, deadline: impl Into<Deadline>) -> Result<Lease> {
        self.semaphore.acquire_until(deadline).await
    }

    /// Takes the lock if it is free now.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many_until`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `try_lock` takes nothing; its nodes, if they were created, are
    /// deleted by the framework's cleanup worker.
    pub async fn try_lock(&self) -> Result<Option<Lease>> {
        self.semaphore.try_acquire().await
    }
}

impl DistributedLock for SemaphoreMutex {
    fn acquire_until(
        &self,
        deadline: Deadline,
    ) -> BoxFuture<'_, Result<Box<dyn DistributedGuard>, LockError>> {
        Box::pin(async move {
            let mut leases = self.semaphore.acquire_many_until(1, deadline).await?;
            let lease = leases.pop().ok_or_else(|| LockError::Framework(deadline.timeout_error()))?;
            Ok(Box::new(lease) as Box<dyn DistributedGuard>)
        })
    }
}
