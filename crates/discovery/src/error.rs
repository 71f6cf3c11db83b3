//! The discovery crate's errors.

use zk_recipes_framework::Error as FrameworkError;

/// A `Result` with a [`DiscoveryError`].
///
/// ```
/// use zk_recipes_discovery::{Result, UriSpec};
///
/// fn endpoint_spec() -> Result<UriSpec> {
///     UriSpec::parse("{scheme}://{address}:{port}/api")
/// }
/// assert_eq!(endpoint_spec().unwrap().parts().len(), 6);
/// ```
pub type Result<T, E = DiscoveryError> = std::result::Result<T, E>;

/// What can go wrong with service discovery.
///
/// Bad input (an empty service name, a `/` in a name or id, data over the framework's
/// `max_node_data`, a bad base path) is refused before anything is sent.
///
/// ```
/// use zk_recipes_discovery::{DiscoveryError, JsonInstanceSerializer};
///
/// let err = JsonInstanceSerializer::new().deserialize::<serde_json::Value>(b"not json").unwrap_err();
/// assert!(matches!(err, DiscoveryError::Deserialize { .. }));
/// assert!(!err.is_retryable());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum DiscoveryError {
    /// From the framework: an invalid path, data too large (`DataTooLarge`), a timeout, a server
    /// error, a closed framework.
    #[error(transparent)]
    Framework(#[from] FrameworkError),

    /// The instance (its payload) could not be written as JSON; nothing was sent.
    #[error("could not write the service instance as JSON: {0}")]
    Serialize(#[source] serde_json::Error),

    /// A node's data is not a service instance this reader understands (not Curator's JSON, or a
    /// payload that does not fit the payload type).
    #[error("could not read a service instance{}: {source}", in_node(.path.as_deref()))]
    Deserialize {
        /// The node read, if the data came from one.
        path: Option<String>,
        /// What serde_json found wrong.
        #[source]
        source: serde_json::Error,
    },

    /// An argument is not allowed (an empty service name, a `/` in a name or id, an update that
    /// changes an instance's name or type); nothing was sent.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// A URI spec that Curator's `UriSpec` would refuse too.
    #[error("invalid URI spec {spec:?}: {reason}")]
    InvalidUriSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: &'static str,
    },

    /// `update` of an instance id this discovery has not registered (Curator's "Service not
    /// registered").
    #[error("the service instance {id} is not registered with this discovery")]
    NotRegistered {
        /// The instance id.
        id: String,
    },

    /// The discovery was closed (or its task ended with the framework).
    #[error("the service discovery is closed")]
    Closed,
}

fn in_node(path: Option<&str>) -> String {
    path.map(|path| format!(" from {path}")).unwrap_or_default()
}

impl DiscoveryError {
    /// Whether the deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Framework(err) if err.is_timeout())
    }

    /// Whether the discovery (or its framework) is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Closed) || matches!(self, Self::Framework(err) if err.is_closed())
    }

    /// Whether trying again at once may succeed: a connection error (as the framework's
    /// [`is_retryable`](FrameworkError::is_retryable)).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Framework(err) => err.is_retryable(),
            _ => false,
        }
    }
}
