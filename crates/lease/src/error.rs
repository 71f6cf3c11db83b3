//! The lease crate's errors.

use std::time::Duration;

use zk_recipes_framework::{Error as FrameworkError, ReadableDuration};
use zk_recipes_mutex::LockError;

use crate::holder::LeaseHolder;

/// A `Result` with a [`LeaseError`].
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_lease::{LeaseError, Result};
///
/// fn check(duration: Duration) -> Result<()> {
///     if duration.is_zero() {
///         return Err(LeaseError::InvalidDuration { duration, reason: "zero".into() });
///     }
///     Ok(())
/// }
/// assert!(check(Duration::ZERO).is_err());
/// ```
pub type Result<T, E = LeaseError> = std::result::Result<T, E>;

/// What can go wrong taking, renewing or releasing a lease.
///
/// Bad input (an invalid path, a zero duration or one the layout cannot store, an empty, oversized
/// or control-character identifier, a multi-lease of zero) is refused when the lease is built,
/// before anything is sent.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_lease::LeaseError;
///
/// let err = LeaseError::InvalidDuration { duration: Duration::ZERO, reason: "zero".into() };
/// assert!(!err.is_retryable());
/// assert!(!err.is_held());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// From the framework: a timeout, a closed framework, connection or server errors.
    #[error(transparent)]
    Framework(#[from] FrameworkError),
    /// From kazoo's lock on the lease path (kazoo layout): its node lost while we held it, a
    /// timeout waiting for it.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// The lease path is not a valid ZooKeeper path (or is the root); nothing was sent.
    #[error("invalid lease path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The duration is zero, or longer than the layout can hold; nothing was sent.
    #[error("invalid lease duration {}: {reason}", ReadableDuration(*.duration))]
    InvalidDuration {
        /// The duration as given.
        duration: Duration,
        /// What is wrong with it.
        reason: String,
    },
    /// The holder identifier is empty, longer than [`MAX_IDENTIFIER_LEN`](crate::MAX_IDENTIFIER_LEN)
    /// bytes, or holds a control character; nothing was sent.
    #[error("invalid lease holder identifier: {reason}")]
    InvalidIdentifier {
        /// What is wrong with it.
        reason: String,
    },
    /// A multi-lease of zero leases; nothing was sent.
    #[error("a multi-lease needs at least one lease")]
    ZeroCount,
    /// Another holder has the lease: we did not get it, and nothing of ours is left on the server.
    #[error("the lease {path} is held by {}", .holder.identifier)]
    Held {
        /// The lease's path.
        path: String,
        /// Who holds it, as read.
        holder: Box<LeaseHolder>,
    },
    /// Every lease of a multi-lease is held by another holder.
    #[error("all {count} leases under {path} are held")]
    AllHeld {
        /// The multi-lease's path.
        path: String,
        /// How many leases it has.
        count: u32,
    },
    /// kazoo layout: the lease's data is of another format version than kazoo 2.11's `1`. As
    /// kazoo does, we leave it to a client that knows that version ("we need an upgrade, let
    /// someone else take the lease").
    #[error("the lease {path} is stored in format version {version}, not 1: left to a client that knows it")]
    UnknownVersion {
        /// The lease's path.
        path: String,
        /// The version found, as JSON.
        version: String,
    },
    /// The lease's data is not what the layout writes (kazoo would fail on it too); nothing was
    /// changed.
    #[error("the lease {path} holds data this layout cannot read: {reason}")]
    Malformed {
        /// The node read.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A renew after our lease had ended by our own clock: nothing was sent, the lease may be
    /// someone else's already. Take it again with an acquire.
    #[error("the lease {path} has ended; it was not renewed")]
    Expired {
        /// The lease's path.
        path: String,
    },
    /// A renew or release found the lease gone or taken by another holder: we do not hold it,
    /// and nothing of anyone else's was changed.
    #[error("the lease {path} is no longer ours (gone, or taken by another holder)")]
    Lost {
        /// The lease's path.
        path: String,
    },
}

impl LeaseError {
    /// Whether trying again may succeed (a connection loss with unknown outcome, a timeout).
    pub fn is_retryable(&self) -> bool {
        match self {
            LeaseError::Framework(err) => err.is_retryable(),
            LeaseError::Lock(err) => err.is_retryable(),
            _ => false,
        }
    }

    /// Whether another holder has the lease (or every lease of a multi-lease).
    pub fn is_held(&self) -> bool {
        matches!(self, LeaseError::Held { .. } | LeaseError::AllHeld { .. })
    }

    /// Whether the call's deadline passed.
    pub fn is_timeout(&self) -> bool {
        match self {
            LeaseError::Framework(err) => err.is_timeout(),
            LeaseError::Lock(err) => err.is_timeout(),
            _ => false,
        }
    }

    /// Whether a renew or release found that we no longer hold the lease.
    pub fn is_lost(&self) -> bool {
        matches!(self, LeaseError::Lost { .. } | LeaseError::Expired { .. })
    }

    /// Whether the framework is closed: nothing more will work.
    ///
    /// ```
    /// use zk_recipes_framework::Error as FrameworkError;
    /// use zk_recipes_lease::LeaseError;
    ///
    /// assert!(LeaseError::from(FrameworkError::Closed).is_closed());
    /// assert!(!LeaseError::ZeroCount.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        match self {
            LeaseError::Framework(err) => err.is_closed(),
            LeaseError::Lock(err) => err.is_closed(),
            _ => false,
        }
    }

    /// Whether a node of ours that the call built on is gone (the lease found gone or taken,
    /// [`LeaseError::Lost`], or the node of kazoo's lock lost with its session): whatever the lease
    /// guarded is no longer ours. A lease that ended by our own clock ([`LeaseError::Expired`]) is
    /// not a lost node; [`is_lost`](Self::is_lost) answers both.
    ///
    /// ```
    /// use zk_recipes_lease::LeaseError;
    ///
    /// assert!(LeaseError::Lost { path: "/app/lease".into() }.is_node_lost());
    /// assert!(!LeaseError::Expired { path: "/app/lease".into() }.is_node_lost());
    /// ```
    pub fn is_node_lost(&self) -> bool {
        match self {
            LeaseError::Framework(err) => err.is_node_lost(),
            LeaseError::Lock(err) => err.is_node_lost(),
            LeaseError::Lost { .. } => true,
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_and_node_lost_come_from_the_framework_and_the_lock() {
        let lost = || FrameworkError::NodeLost { path: "/app/lease/_c_x-lock-0000000001".into() };
        assert!(LeaseError::from(FrameworkError::Closed).is_closed());
        assert!(LeaseError::from(LockError::from(FrameworkError::Closed)).is_closed());
        assert!(!LeaseError::from(lost()).is_closed());
        assert!(LeaseError::from(lost()).is_node_lost());
        assert!(LeaseError::from(LockError::from(lost())).is_node_lost());
        assert!(LeaseError::Lost { path: "/app/lease".into() }.is_node_lost());
        assert!(!LeaseError::Expired { path: "/app/lease".into() }.is_node_lost());
        assert!(!LeaseError::from(FrameworkError::Closed).is_node_lost());
        assert!(!LeaseError::ZeroCount.is_closed() && !LeaseError::ZeroCount.is_node_lost());
    }
}
