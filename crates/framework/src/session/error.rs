//! The framework's error type.

use std::time::Duration;

use super::duration::ReadableDuration;
use crate::path::PathError;

/// Everything that can go wrong in the framework (and, wrapped, in the recipes built on it).
///
/// ```
/// use zk_recipes_framework::Error;
///
/// let err = Error::Timeout { waited: std::time::Duration::from_secs(1), last_connection_failure: None };
/// assert!(!err.is_retryable());
/// assert_eq!(err.to_string(), "timed out after 1 s");
/// assert!(Error::ZooKeeper(zookeeper_client::Error::ConnectionLoss).is_retryable());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The path is not a valid ZooKeeper path; nothing was sent to the server.
    #[error("invalid path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Which rule it breaks.
        #[source]
        reason: PathError,
    },

    /// An argument is out of range (for example node data larger than the server accepts);
    /// nothing was sent to the server.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// Node data (or a multi's data in total) larger than the server accepts in one request;
    /// nothing was sent to the server. A request over the server's `jute.maxbuffer` would make it
    /// drop the connection, suspending every user of the session.
    #[error(
        "{size} bytes of node data, more than the {limit} allowed (see FrameworkBuilder::max_node_data)"
    )]
    DataTooLarge {
        /// Bytes of data given.
        size: usize,
        /// The framework's limit.
        limit: usize,
    },

    /// The caller's deadline passed (waiting for a connection, retrying, or waiting on the server).
    /// When it passed while no session could be opened, the last failed attempt is the source and
    /// the message names it.
    #[error("timed out after {}{}", ReadableDuration(*.waited), FailureSuffix(.last_connection_failure.as_ref()))]
    Timeout {
        /// How long the call had been running.
        waited: Duration,
        /// Why the last attempt to open a session failed, if the call was waiting for one.
        #[source]
        last_connection_failure: Option<ConnectionFailure>,
    },

    /// The server refused this framework's credentials (the auth info of
    /// [`crate::FrameworkBuilder::auth`] / `digest_auth`, or SASL): no session can be opened with
    /// them. Calls that need a session fail at once with it, instead of waiting for their deadline;
    /// the framework keeps trying in the background (the server side may be fixed).
    #[error(
        "authentication failed at {connect_string}: the server refused this client's credentials (see FrameworkBuilder::auth, digest_auth, sasl)"
    )]
    AuthFailed {
        /// The servers the framework connects to.
        connect_string: String,
    },

    /// The framework was closed (or every handle to it dropped).
    #[error("the framework is closed")]
    Closed,

    /// The session the operation belonged to is gone (expired, or declared lost after being
    /// suspended for the session timeout). Ephemeral nodes of that session are gone or will be.
    #[error("the ZooKeeper session was lost")]
    SessionLost,

    /// The node this call builds on is gone: its session was lost (the node went with it), or it
    /// was deleted. Nothing was done, and nothing was tried on a newer session.
    #[error("the node {path} is gone (its session was lost, or it was deleted)")]
    NodeLost {
        /// The node's path.
        path: String,
    },

    /// The connection broke while a write sent once ([`crate::Framework::write_once`]) was in
    /// flight, and reading the node afterwards could not tell whether the write was applied: the
    /// node changed, but perhaps by someone else. The write was not repeated (repeating it could
    /// apply it twice). `likely_applied` is true when the node now holds exactly what was written
    /// (for a set, one version later): it is ours unless another writer wrote the same bytes at the
    /// same moment.
    #[error(
        "the connection broke during a write to {path}; it may or may not have been applied (likely applied: {likely_applied})"
    )]
    OutcomeUnknown {
        /// The node written.
        path: String,
        /// The node holds what was written, as the write would have left it.
        likely_applied: bool,
    },

    /// One operation of a transaction failed, so none was committed.
    #[error("transaction operation number {index} failed, nothing was committed: {source}")]
    TransactionFailed {
        /// Which operation (0 is the first).
        index: usize,
        /// What the server said of it.
        source: zookeeper_client::Error,
    },

    /// The server cannot do what the call needs ([`crate::Framework::require`]): checked when a
    /// recipe starts, so nothing was sent to the server for it.
    #[error("the server (ZooKeeper {server_version}) does not support {feature}")]
    MissingFeature {
        /// What is missing.
        feature: crate::Feature,
        /// The server's version from `srvr`, or `unknown`.
        server_version: String,
    },

    /// The framework is connected to a read-only server (a partitioned member, with
    /// [`crate::FrameworkBuilder::can_be_read_only`]): reads work, this write was refused at once
    /// and nothing was changed. Not retryable: the write can succeed once the framework is back on
    /// a read-write server (state `Reconnected`), which is for the caller to wait for.
    #[error(
        "the server is read-only (partitioned from its quorum): writes are refused until a quorum returns"
    )]
    ReadOnly,

    /// The server answered with an error, or the connection failed while a request was in flight.
    #[error("ZooKeeper: {0}")]
    ZooKeeper(#[from] zookeeper_client::Error),
}

impl Error {
    /// Whether a write was refused because the server is read-only ([`Error::ReadOnly`], or the
    /// server's own `NotReadOnly` from a call outside the framework's node API).
    pub fn is_read_only(&self) -> bool {
        matches!(self, Error::ReadOnly | Error::ZooKeeper(zookeeper_client::Error::NotReadOnly))
    }

    /// Whether the call's deadline (or timeout) passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, Error::Timeout { .. })
    }

    /// Whether the framework is closed: nothing more will work.
    pub fn is_closed(&self) -> bool {
        matches!(self, Error::Closed)
    }

    /// Whether a node of ours that the call built on is gone with its session (or was deleted):
    /// the hold it stood for is lost.
    pub fn is_node_lost(&self) -> bool {
        matches!(self, Error::NodeLost { .. })
    }

    /// Whether trying again (on the same session, after the connection comes back) can succeed:
    /// the connection was lost or timed out while a request was in flight, so its outcome is unknown.
    ///
    /// A lost session is not retryable here: only a caller that can start over on a new session may
    /// retry it (see [`crate::Framework::retry`]).
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::ZooKeeper(err) => is_connection_error(err),
            _ => false,
        }
    }

    /// Whether the session this operation ran on is gone for good.
    pub fn is_session_lost(&self) -> bool {
        match self {
            Error::SessionLost => true,
            Error::ZooKeeper(err) => {
                matches!(err, zookeeper_client::Error::SessionExpired | zookeeper_client::Error::ClientClosed)
            }
            _ => false,
        }
    }

    /// The ZooKeeper error inside, if this is one.
    pub fn zookeeper(&self) -> Option<&zookeeper_client::Error> {
        match self {
            Error::ZooKeeper(err) => Some(err),
            _ => None,
        }
    }

    /// Whether the server said the node does not exist.
    pub fn is_no_node(&self) -> bool {
        matches!(self, Error::ZooKeeper(zookeeper_client::Error::NoNode))
    }

    /// Whether the server said the node already exists.
    pub fn is_node_exists(&self) -> bool {
        matches!(self, Error::ZooKeeper(zookeeper_client::Error::NodeExists))
    }

    pub(crate) fn invalid_path(path: &str, reason: PathError) -> Error {
        Error::InvalidPath { path: path.to_owned(), reason }
    }
}

/// Why an attempt to open a session failed: each server of the connect string, and what went
/// wrong with it (its name does not resolve, the connection was refused, it answered but gave no
/// session, ...).
///
/// ```
/// use zk_recipes_framework::ConnectionFailure;
///
/// let failure = ConnectionFailure {
///     connect_string: "127.0.0.1:2999".into(),
///     cause: "127.0.0.1:2999: Connection refused (os error 111)".into(),
/// };
/// assert_eq!(
///     failure.to_string(),
///     "no session with 127.0.0.1:2999: 127.0.0.1:2999: Connection refused (os error 111)"
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("no session with {connect_string}: {cause}")]
pub struct ConnectionFailure {
    /// The connect string tried.
    pub connect_string: String,
    /// What went wrong, server by server.
    pub cause: String,
}

/// `; the last connection attempt failed: ...` when there is a failure to name.
struct FailureSuffix<'a>(Option<&'a ConnectionFailure>);

impl std::fmt::Display for FailureSuffix<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(failure) => write!(f, "; the last connection attempt failed: {failure}"),
            None => Ok(()),
        }
    }
}

/// zookeeper-client fails requests that were in flight when a connection broke with the error that
/// broke it: `ConnectionLoss`, a `Timeout`, or a `Custom` error carrying the I/O failure.
pub(crate) fn is_connection_error(err: &zookeeper_client::Error) -> bool {
    use zookeeper_client::Error as Zk;
    matches!(err, Zk::ConnectionLoss | Zk::Timeout | Zk::Custom(_) | Zk::Throttled)
}

/// The framework's result type.
///
/// ```
/// use zk_recipes_framework::path::{self, PathError};
/// use zk_recipes_framework::{Deadline, Framework, Result};
///
/// async fn config(framework: &Framework) -> Result<Vec<u8>> {
///     Ok(framework.get_data("/app/config", Deadline::never()).await?.data)
/// }
///
/// // The error type can be named too.
/// fn check(path: &str) -> Result<(), PathError> {
///     path::validate(path)
/// }
/// assert!(check("/app/config").is_ok());
/// # let _ = config;
/// ```
pub type Result<T, E = Error> = std::result::Result<T, E>;
