//! [`SemaphoreError`], the crate's one error type, its conversions from and to the lock driver's
//! and the framework's errors, and [`Result`].

use zk_recipes_framework::Error as FrameworkError;
use zk_recipes_lock_internals::LockError;

/// What can go wrong with a semaphore.
///
/// ```
/// use zk_recipes_semaphore::{LockError, SemaphoreError};
///
/// let err = SemaphoreError::TooManyLeases { requested: 5, max_leases: 3 };
/// assert_eq!(err.to_string(), "asked for 5 leases of a semaphore with 3");
/// assert!(!err.is_retryable());
///
/// let lost = SemaphoreError::from(LockError::NodeLost { path: "/app/workers/leases/x".into() });
/// assert!(lost.is_node_lost() && !lost.is_timeout());
///
/// // Zero leases is the lock driver's error, as for every lock.
/// let zero = SemaphoreError::from(LockError::ZeroLeases);
/// assert!(matches!(zero, SemaphoreError::Lock(LockError::ZeroLeases)) && !zero.is_retryable());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SemaphoreError {
    /// From the lock driver or the framework (invalid path, timeout, lost node, closed, ...), and
    /// [`LockError::ZeroLeases`] for `max_leases == 0` or zero leases asked for (nothing was sent).
    #[error(transparent)]
    Lock(#[from] LockError),
    /// More leases asked for than the semaphore has; nothing was sent.
    #[error("asked for {requested} leases of a semaphore with {max_leases}")]
    TooManyLeases {
        /// Asked for.
        requested: u32,
        /// The semaphore's size.
        max_leases: u32,
    },
}

impl SemaphoreError {
    /// Whether the caller's deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, SemaphoreError::Lock(err) if err.is_timeout())
    }

    /// Whether trying again may succeed (a connection loss with unknown outcome).
    pub fn is_retryable(&self) -> bool {
        matches!(self, SemaphoreError::Lock(err) if err.is_retryable())
    }

    /// Whether the framework is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, SemaphoreError::Lock(err) if err.is_closed())
    }

    /// Whether a node of ours is gone with its session: no lease is held.
    pub fn is_node_lost(&self) -> bool {
        matches!(self, SemaphoreError::Lock(err) if err.is_node_lost())
    }
}

impl From<FrameworkError> for SemaphoreError {
    fn from(err: FrameworkError) -> Self {
        SemaphoreError::Lock(LockError::from(err))
    }
}

/// The semaphore's result type.
///
/// ```
/// use zk_recipes_semaphore::{Result, Semaphore};
///
/// /// Runs a job under one of the semaphore's leases, if one is free now.
/// async fn run_if_free(semaphore: &Semaphore) -> Result<bool> {
///     let Some(lease) = semaphore.try_acquire().await? else {
///         return Ok(false);
///     };
///     // ... the job ...
///     lease.release().await?;
///     Ok(true)
/// }
/// ```
pub type Result<T, E = SemaphoreError> = std::result::Result<T, E>;

impl From<SemaphoreError> for LockError {
    fn from(err: SemaphoreError) -> Self {
        match err {
            SemaphoreError::Lock(err) => err,
            other @ SemaphoreError::TooManyLeases { .. } => {
                LockError::Framework(FrameworkError::InvalidArgument(other.to_string()))
            }
        }
    }
}
