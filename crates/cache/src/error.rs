//! The cache's errors.

use zk_recipes_framework::Error as FrameworkError;

/// A `Result` with a [`CacheError`].
///
/// ```
/// use zk_recipes_cache::{Cache, Result};
/// use zk_recipes_framework::Deadline;
///
/// /// The names of the registered services, once the cache has loaded.
/// async fn services(cache: &Cache) -> Result<Vec<String>> {
///     cache.initialized(Deadline::after(std::time::Duration::from_secs(10))).await?;
///     Ok(cache.children(cache.root()))
/// }
/// ```
pub type Result<T, E = CacheError> = std::result::Result<T, E>;

/// What can go wrong starting or waiting on a [`Cache`](crate::Cache).
///
/// Errors while the cache runs (a failed read, a lost session) are not returned to anyone: the
/// cache logs them, waits, and loads again.
///
/// ```
/// use zk_recipes_cache::CacheError;
///
/// let err = CacheError::InvalidArgument("load concurrency must be at least 1".into());
/// assert!(!err.is_retryable());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CacheError {
    /// From the framework: an invalid path, a timeout waiting for the first load.
    #[error(transparent)]
    Framework(#[from] FrameworkError),

    /// A builder setting is out of range; nothing was started.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

impl CacheError {
    /// Whether the deadline passed (waiting for the first load).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Framework(err) if err.is_timeout())
    }

    /// Whether the framework is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Framework(err) if err.is_closed())
    }

    /// Whether trying again may succeed (a timeout, a connection error).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Framework(err) => err.is_retryable(),
            Self::InvalidArgument(_) => false,
        }
    }
}
