//! The lock-internals error type.

use zk_recipes_framework::Error as FrameworkError;

/// What can go wrong acquiring, holding or releasing a lock.
///
/// ```
/// use zk_recipes_lock_internals::LockError;
/// assert!(!LockError::ZeroLeases.is_retryable());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LockError {
    /// From the framework: invalid path, timeout, closed framework, connection or server errors.
    /// (The framework's [`FrameworkError::NodeLost`] becomes [`LockError::NodeLost`].)
    #[error(transparent)]
    Framework(FrameworkError),
    /// `max_leases` of zero, or zero leases asked for (a semaphore's `acquire_many(0)`); nothing
    /// was sent.
    #[error("a lock needs at least one lease, and an acquire asks for at least one")]
    ZeroLeases,
    /// Our contender node vanished while we waited or held: the session that owned it was lost, or
    /// somebody deleted it. We do not hold the lock.
    #[error("our lock node {path} is gone (session lost or node deleted)")]
    NodeLost {
        /// The node's path.
        path: String,
    },
    /// One write of a guarded write failed (our lock node was still there); nothing was written.
    #[error("guarded write number {index} failed: {source}")]
    GuardedWriteFailed {
        /// Which write (0 is the first of the caller's).
        index: usize,
        /// What the server said.
        source: zk_recipes_framework::zookeeper_client::Error,
    },
    /// A waiter's revocable node was asked to give up its place (see [`crate::revoke`]); the node
    /// was deleted and the lock is not held.
    #[error("our waiting lock node {path} was revoked")]
    Revoked {
        /// The node's path.
        path: String,
    },
}

impl LockError {
    /// Whether trying again may succeed (a connection loss with unknown outcome).
    pub fn is_retryable(&self) -> bool {
        matches!(self, LockError::Framework(err) if err.is_retryable())
    }

    /// Whether the framework is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, LockError::Framework(err) if err.is_closed())
    }

    /// Whether our node is gone (session lost, or deleted): we do not hold the lock.
    pub fn is_node_lost(&self) -> bool {
        matches!(self, LockError::NodeLost { .. })
    }

    /// Whether the caller's deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, LockError::Framework(FrameworkError::Timeout { .. }))
    }
}

impl From<FrameworkError> for LockError {
    fn from(err: FrameworkError) -> Self {
        match err {
            FrameworkError::NodeLost { path } => LockError::NodeLost { path },
            other => LockError::Framework(other),
        }
    }
}

impl LockError {
    /// The error of a call built on our node at `path`: its session lost is our node lost
    /// ([`LockError::NodeLost`]); any other framework error as it is.
    pub(crate) fn of_call_on_node(path: &str) -> impl FnOnce(FrameworkError) -> LockError + '_ {
        move |err| match err {
            FrameworkError::SessionLost => LockError::NodeLost { path: path.to_owned() },
            other => other.into(),
        }
    }
}

/// The lock-internals result type.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::{LockInternals, Result, Wait};
///
/// async fn try_once(internals: &LockInternals) -> Result<bool> {
///     let held = internals.acquire(b"", Wait::TryOnce(Deadline::after(Duration::from_secs(5)))).await?;
///     Ok(held.is_some())
/// }
/// # let _ = try_once;
/// ```
pub type Result<T, E = LockError> = std::result::Result<T, E>;
