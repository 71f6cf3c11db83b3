//! The leader crate's error type.

use std::time::Duration;

use zk_recipes_framework::{Error as FrameworkError, ReadableDuration};
use zk_recipes_lock_internals::LockError;

/// What can go wrong in a [`crate::LeaderLatch`] or a [`crate::LeaderSelector`].
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_leader::LeaderError;
///
/// let err = LeaderError::Timeout { waited: Duration::from_secs(1) };
/// assert!(err.is_timeout());
/// assert!(!err.is_retryable());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LeaderError {
    /// From the framework: invalid path, closed framework, connection or server errors.
    #[error(transparent)]
    Framework(FrameworkError),
    /// From the lock the selector is built on (for example our node vanished with its session).
    #[error(transparent)]
    Lock(LockError),
    /// The recipe was not started yet.
    #[error("not started")]
    NotStarted,
    /// `start` was called a second time.
    #[error("already started")]
    AlreadyStarted,
    /// The recipe was closed (or closed while the call waited).
    #[error("closed")]
    Closed,
    /// The caller's timeout passed before the awaited event.
    #[error("timed out after {}", ReadableDuration(*.waited))]
    Timeout {
        /// How long the call waited.
        waited: Duration,
    },
}

impl LeaderError {
    /// Whether trying again may succeed: the connection was lost while a request was in flight.
    pub fn is_retryable(&self) -> bool {
        match self {
            LeaderError::Framework(err) => err.is_retryable(),
            LeaderError::Lock(err) => err.is_retryable(),
            _ => false,
        }
    }

    /// Whether the latch or selector is closed (or its framework is).
    pub fn is_closed(&self) -> bool {
        matches!(self, LeaderError::Closed)
    }

    /// Whether our node is gone with its session: we do not lead.
    pub fn is_node_lost(&self) -> bool {
        matches!(self, LeaderError::Lock(err) if err.is_node_lost())
            || matches!(self, LeaderError::Framework(err) if err.is_node_lost())
    }

    /// Whether the caller's timeout (or deadline) passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, LeaderError::Timeout { .. } | LeaderError::Framework(FrameworkError::Timeout { .. }))
    }
}

impl From<FrameworkError> for LeaderError {
    fn from(err: FrameworkError) -> Self {
        match err {
            FrameworkError::Closed => LeaderError::Closed,
            other => LeaderError::Framework(other),
        }
    }
}

impl From<LockError> for LeaderError {
    fn from(err: LockError) -> Self {
        match err {
            LockError::Framework(err) => err.into(),
            other => LeaderError::Lock(other),
        }
    }
}

/// The leader crate's result type.
pub type Result<T, E = LeaderError> = std::result::Result<T, E>;
