//! The counter crate's errors.

use zk_recipes_framework::Error as FrameworkError;
use zk_recipes_mutex::LockError;

/// A `Result` with a [`CounterError`].
///
/// ```
/// use zk_recipes_counter::{DistributedAtomicLong, Result};
/// use zk_recipes_framework::Deadline;
///
/// /// Takes the next ticket number, if the increment went through.
/// async fn next_ticket(counter: &DistributedAtomicLong) -> Result<Option<i64>> {
///     let incremented = counter.increment(Deadline::after(std::time::Duration::from_secs(5))).await?;
///     Ok(incremented.succeeded().then(|| *incremented.post_value()))
/// }
/// ```
pub type Result<T, E = CounterError> = std::result::Result<T, E>;

/// What can go wrong with a shared value or an atomic counter.
///
/// A compare-and-set that loses to another writer is not an error: it reports `false` (or an
/// [`AtomicValue`](crate::AtomicValue) that did not succeed).
///
/// ```
/// use zk_recipes_counter::CounterError;
///
/// let err = CounterError::OutcomeUnknown { path: "/app/count".into(), likely_applied: true };
/// assert!(!err.is_retryable());
/// assert!(err.to_string().contains("may or may not"));
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CounterError {
    /// From the framework: an invalid path or data too large (nothing sent), a timeout, a closed
    /// framework, a server error.
    #[error(transparent)]
    Framework(FrameworkError),

    /// From the mutex a [`PromotedToLock`](crate::PromotedToLock) takes.
    #[error("the promoted lock: {0}")]
    Lock(#[from] LockError),

    /// The connection broke while a write was in flight, and reading the node afterwards could not
    /// tell whether the write was applied: the node changed, but perhaps by someone else. The write
    /// was not repeated (repeating it could apply it twice). `likely_applied` is true when the node
    /// now holds exactly what was written, one version later (it is ours unless another writer
    /// wrote the same bytes at the same moment).
    #[error(
        "the connection broke during a write to {path}; it may or may not have been applied (likely applied: {likely_applied})"
    )]
    OutcomeUnknown {
        /// The node written.
        path: String,
        /// The node holds what was written, one version after the one the write expected.
        likely_applied: bool,
    },

    /// The node's data cannot be decoded as the type asked for (Curator throws on it too).
    #[error("corrupted data for node {path:?}: {data:02x?} is not {expected}")]
    CorruptData {
        /// The node.
        path: String,
        /// Its data.
        data: Vec<u8>,
        /// What it should have been.
        expected: &'static str,
    },

    /// A setting is out of range; nothing was sent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

/// A framework error, except a write sent once whose outcome is unknown: that is the counter's
/// own [`CounterError::OutcomeUnknown`].
impl From<FrameworkError> for CounterError {
    fn from(err: FrameworkError) -> Self {
        match err {
            FrameworkError::OutcomeUnknown { path, likely_applied } => {
                CounterError::OutcomeUnknown { path, likely_applied }
            }
            err => CounterError::Framework(err),
        }
    }
}

impl CounterError {
    /// Whether the framework is closed.
    pub fn is_closed(&self) -> bool {
        match self {
            Self::Framework(err) => err.is_closed(),
            Self::Lock(err) => err.is_closed(),
            _ => false,
        }
    }

    /// Whether trying again may succeed (a timeout, a connection error whose outcome is known not
    /// to matter). [`CounterError::OutcomeUnknown`] is not: read the value first.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Framework(err) => err.is_retryable(),
            Self::Lock(err) => err.is_retryable(),
            Self::OutcomeUnknown { .. } | Self::CorruptData { .. } | Self::InvalidArgument(_) => false,
        }
    }

    /// Whether the caller's deadline passed.
    pub fn is_timeout(&self) -> bool {
        match self {
            Self::Framework(FrameworkError::Timeout { .. }) => true,
            Self::Lock(err) => err.is_timeout(),
            _ => false,
        }
    }
}
