//! A lock over several locks, all or nothing (Curator's `InterProcessMultiLock`).

use std::fmt::Debug;

use futures::future::BoxFuture;
use tracing::debug;
use zk_recipes_framework::Deadline;

use crate::error::{LockError, Result};

/// A lock that can take part in a [`MultiLock`]: the mutex, the semaphore mutex and the halves of
/// the read-write lock implement it.
///
/// ```
/// use std::future::Future;
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::{DistributedLock, Result};
///
/// /// Runs `job` while holding `lock`, whichever lock it is.
/// async fn exclusively(lock: &dyn DistributedLock, job: impl Future<Output = ()>) -> Result<()> {
///     let guard = lock.acquire_until(Deadline::after(Duration::from_secs(5))).await?;
///     job.await;
///     guard.release().await
/// }
/// ```
pub trait DistributedLock: Debug + Send + Sync {
    /// Acquires until `deadline`; the guard releases when released or dropped.
    fn acquire_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn DistributedGuard>>>;
}

/// Proof of holding a [`DistributedLock`]; dropping it releases in the background.
///
/// ```
/// use zk_recipes_lock_internals::{DistributedGuard, Result};
///
/// /// Releases the guards last taken first, and reports the first failure.
/// async fn release_all(guards: Vec<Box<dyn DistributedGuard>>) -> Result<()> {
///     let mut first_failure = Ok(());
///     for guard in guards.into_iter().rev() {
///         let node_path = guard.node_path().to_owned();
///         if let Err(err) = guard.release().await {
///             eprintln!("{node_path}: {err}");
///             first_failure = first_failure.and(Err(err));
///         }
///     }
///     first_failure
/// }
/// ```
pub trait DistributedGuard: Debug + Send + Sync {
    /// Releases and reports the outcome.
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<()>>;

    /// The lock node's full path.
    fn node_path(&self) -> &str;
}

/// Several locks taken together: in the given order, all within one deadline, or none; released
/// in reverse order.
///
/// ```no_run
/// # async fn demo(first: impl zk_recipes_lock_internals::DistributedLock + 'static,
/// #               second: impl zk_recipes_lock_internals::DistributedLock + 'static)
/// #     -> zk_recipes_lock_internals::Result<()> {
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::MultiLock;
///
/// let both = MultiLock::new(vec![Box::new(first), Box::new(second)]);
/// let guard = both.acquire_until(Deadline::after(std::time::Duration::from_secs(5))).await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct MultiLock {
    locks: Vec<Box<dyn DistributedLock>>,
}

impl MultiLock {
    /// The locks, in the order they are taken.
    pub fn new(locks: Vec<Box<dyn DistributedLock>>) -> Self {
        Self { locks }
    }

    /// Takes every lock in order within `deadline`. If one cannot be taken, those already taken
    /// are released (in reverse order) and the error is returned.
    ///
    /// # Errors
    /// The first lock's error (a timeout at the deadline, a lost node, ...).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled call holds none of the locks. The guards it had taken are dropped,
    /// which releases them in the background, and the lock it was waiting for loses its place in
    /// line (the recipes' locks have the framework's cleanup worker delete that node).
    pub async fn acquire_until(&self, deadline: impl Into<Deadline>) -> Result<MultiGuard> {
        let deadline = deadline.into();
        let mut guards = Vec::with_capacity(self.locks.len());
        for lock in &self.locks {
            match lock.acquire_until(deadline).await {
                Ok(guard) => guards.push(guard),
                Err(err) => {
                    release_in_reverse(guards).await;
                    return Err(err);
                }
            }
        }
        Ok(MultiGuard { guards })
    }
}

async fn release_in_reverse(guards: Vec<Box<dyn DistributedGuard>>) -> Vec<LockError> {
    let mut errors = Vec::new();
    for guard in guards.into_iter().rev() {
        let node_path = guard.node_path().to_owned();
        if let Err(err) = guard.release().await {
            debug!(%node_path, %err, "release failed; the cleanup worker deletes it");
            errors.push(err);
        }
    }
    errors
}

/// Proof of holding every lock of a [`MultiLock`].
///
/// ```no_run
/// # async fn demo(both: zk_recipes_lock_internals::MultiLock) -> zk_recipes_lock_internals::Result<()> {
/// use zk_recipes_framework::Deadline;
///
/// let guard = both.acquire_until(Deadline::after(std::time::Duration::from_secs(5))).await?;
/// println!("holding {:?}", guard.node_paths());
/// guard.release().await?; // in reverse order; dropping the guard would release in the background
/// # Ok(()) }
/// ```
#[must_use = "if unused the locks are immediately released"]
#[derive(Debug)]
pub struct MultiGuard {
    guards: Vec<Box<dyn DistributedGuard>>,
}

impl MultiGuard {
    /// The lock nodes, in acquisition order.
    pub fn node_paths(&self) -> Vec<&str> {
        self.guards.iter().map(|guard| guard.node_path()).collect()
    }

    /// Releases every lock in reverse order, all of them even if one fails.
    ///
    /// # Errors
    /// The first failure; the others were released all the same (or handed to the cleanup worker).
    ///
    /// # Cancel safety
    /// Cancel safe: no lock is kept. The guards not yet released are dropped with the call, which
    /// releases them in the background (the framework's cleanup worker deletes their nodes).
    pub async fn release(mut self) -> Result<()> {
        let guards = std::mem::take(&mut self.guards);
        match release_in_reverse(guards).await.into_iter().next() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }
}

impl Drop for MultiGuard {
    fn drop(&mut self) {
        // Reverse order for the background releases too.
        while let Some(guard) = self.guards.pop() {
            drop(guard);
        }
    }
}
