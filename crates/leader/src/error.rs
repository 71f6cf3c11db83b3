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
/// assert_eq!(err.to_string(), "timed out after 1 s");
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
    #[error("{0} is not started: call start() first")]
    NotStarted(Subject),
    /// `start` was called a second time.
    #[error("{0} was already started")]
    AlreadyStarted(Subject),
    /// The recipe was closed (or closed while the call waited).
    #[error("{0} is closed")]
    Closed(Subject),
    /// A call that only a leader may make ([`LeaderLatch::proclaim`](crate::LeaderLatch::proclaim),
    /// [`Leadership::proclaim`](crate::Leadership::proclaim)) was made while not leading. Nothing
    /// was sent.
    #[error("{0} is not leading")]
    NotLeader(Subject),
    /// The node a call built on (our leadership's node) is gone, or its session is: nothing was
    /// written, and nothing was tried on a newer session.
    #[error("our node {path} is gone (its session was lost or it was deleted)")]
    NodeLost {
        /// Our node's path.
        path: String,
    },
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
        matches!(self, LeaderError::Closed(_) | LeaderError::Framework(FrameworkError::Closed))
    }

    /// Whether our node is gone with its session: we do not lead.
    pub fn is_node_lost(&self) -> bool {
        matches!(self, LeaderError::NodeLost { .. })
            || matches!(self, LeaderError::Lock(err) if err.is_node_lost())
            || matches!(self, LeaderError::Framework(err) if err.is_node_lost())
    }

    /// Whether a leader-only call was made while not leading.
    pub fn is_not_leader(&self) -> bool {
        matches!(self, LeaderError::NotLeader(_))
    }

    /// Whether the caller's timeout (or deadline) passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, LeaderError::Timeout { .. } | LeaderError::Framework(FrameworkError::Timeout { .. }))
    }
}

impl From<FrameworkError> for LeaderError {
    fn from(err: FrameworkError) -> Self {
        LeaderError::Framework(err)
    }
}

/// Which election an error is about: its recipe and path, for the message ("the leader latch on
/// /app/leader is closed").
///
/// ```
/// use zk_recipes_leader::{LeaderError, Subject};
///
/// let err = LeaderError::Closed(Subject::new("leader latch", "/app/leader"));
/// assert_eq!(err.to_string(), "the leader latch on /app/leader is closed");
/// assert!(err.is_closed());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Subject {
    /// The recipe: `leader latch`, `leader selector`.
    pub recipe: &'static str,
    /// Its election path.
    pub path: String,
}

impl Subject {
    /// The `recipe` on `path`.
    pub fn new(recipe: &'static str, path: impl Into<String>) -> Self {
        Self { recipe, path: path.into() }
    }
}

impl std::fmt::Display for Subject {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "the {} on {}", self.recipe, self.path)
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
///
/// ```
/// use zk_recipes_leader::{LeaderLatch, Result};
///
/// /// Who leads now, by participant id.
/// async fn leader_id(latch: &LeaderLatch) -> Result<Option<String>> {
///     Ok(latch.leader().await?.map(|participant| participant.id))
/// }
/// ```
pub type Result<T, E = LeaderError> = std::result::Result<T, E>;
