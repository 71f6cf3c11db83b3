//! The nodes crate's errors.

use zk_recipes_framework::Error as FrameworkError;

/// A `Result` with a [`NodeError`].
///
/// ```
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_nodes::{PersistentNode, Result};
///
/// /// Publishes a new address once the node exists.
/// async fn publish(node: &PersistentNode, address: &str) -> Result<()> {
///     node.wait_for_initial_create(Deadline::after(std::time::Duration::from_secs(10))).await?;
///     node.set_data(address.as_bytes().to_vec()).await
/// }
/// ```
pub type Result<T, E = NodeError> = std::result::Result<T, E>;

/// What can go wrong with a kept node.
///
/// ```
/// use zk_recipes_nodes::NodeError;
///
/// let err = NodeError::Closed;
/// assert!(!err.is_retryable());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NodeError {
    /// From the framework: an invalid path, data too large, a timeout, a server error.
    #[error(transparent)]
    Framework(#[from] FrameworkError),

    /// A setting is out of range; nothing was sent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The node was closed (or its task ended with the framework).
    #[error("the persistent node was closed")]
    Closed,
}

impl From<zk_recipes_cache::CacheError> for NodeError {
    fn from(err: zk_recipes_cache::CacheError) -> Self {
        match err {
            zk_recipes_cache::CacheError::Framework(err) => Self::Framework(err),
            other => Self::InvalidArgument(other.to_string()),
        }
    }
}

impl NodeError {
    /// Whether the deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Framework(err) if err.is_timeout())
    }

    /// Whether the node (or its framework) is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed) || matches!(self, Self::Framework(err) if err.is_closed())
    }

    /// Whether trying again may succeed (a timeout, a connection error).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Framework(err) => err.is_retryable(),
            Self::InvalidArgument(_) | Self::Closed => false,
        }
    }
}
