//! The barrier crate's errors, and the path check that makes one before anything is sent.

use zk_recipes_framework::{path, Error as FrameworkError};

/// A `Result` with a [`BarrierError`].
///
/// ```
/// use std::future::Future;
/// use std::time::Duration;
/// use zk_recipes_barrier::{DistributedBarrier, Result};
/// use zk_recipes_framework::Deadline;
///
/// /// Holds every waiter until `release` resolves.
/// async fn hold_until(barrier: &DistributedBarrier, release: impl Future<Output = ()>) -> Result<()> {
///     barrier.set(Deadline::after(Duration::from_secs(5))).await?;
///     release.await;
///     barrier.remove(Deadline::after(Duration::from_secs(5))).await
/// }
/// ```
pub type Result<T, E = BarrierError> = std::result::Result<T, E>;

/// What can go wrong with a barrier.
///
/// ```
/// use zk_recipes_barrier::BarrierError;
///
/// let err = BarrierError::InvalidMemberCount(0);
/// assert!(!err.is_retryable());
/// assert!(!err.is_timeout());
/// assert_eq!(err.to_string(), "a double barrier needs at least one member, not 0");
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BarrierError {
    /// From the framework: an invalid path (nothing sent), a timeout at the caller's deadline,
    /// a closed framework, a server error.
    #[error(transparent)]
    Framework(#[from] FrameworkError),

    /// A double barrier's member count must be at least 1; nothing was sent.
    #[error("a double barrier needs at least one member, not {0}")]
    InvalidMemberCount(usize),

    /// The path cannot be a barrier (the root); nothing was sent.
    #[error("invalid barrier path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// Why it cannot be used.
        reason: &'static str,
    },

    /// This member's node vanished while it waited in [`enter`](crate::DistributedDoubleBarrier::enter):
    /// its session was lost (the node was ephemeral) or someone deleted it. The member no longer
    /// counts; enter again to take part.
    #[error("the member node {path} is gone (its session was lost, or it was deleted)")]
    MemberLost {
        /// The member node's path.
        path: String,
    },
}

impl BarrierError {
    /// Whether trying again may succeed: a connection error, or the member's node lost with its
    /// session (a new `enter` creates a new one).
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Framework(err) => err.is_retryable() || err.is_session_lost(),
            Self::MemberLost { .. } => true,
            Self::InvalidMemberCount(_) | Self::InvalidPath { .. } => false,
        }
    }

    /// Whether the framework is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, Self::Framework(err) if err.is_closed())
    }

    /// Whether this member's node is gone with its session.
    pub fn is_node_lost(&self) -> bool {
        matches!(self, Self::MemberLost { .. }) || matches!(self, Self::Framework(err) if err.is_node_lost())
    }

    /// Whether the caller's deadline passed (Curator's `false` from a timed wait).
    pub fn is_timeout(&self) -> bool {
        matches!(self, Self::Framework(FrameworkError::Timeout { .. }))
    }
}

/// Checks a barrier path before anything is sent.
pub(crate) fn validate_path(barrier_path: &str) -> Result<()> {
    path::validate(barrier_path).map_err(|reason| {
        BarrierError::Framework(FrameworkError::InvalidPath { path: barrier_path.to_owned(), reason })
    })?;
    if barrier_path == "/" {
        return Err(BarrierError::InvalidPath {
            path: barrier_path.to_owned(),
            reason: "the root cannot be a barrier",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_are_checked_before_anything_is_sent() {
        assert!(validate_path("/a/b").is_ok());
        assert!(matches!(validate_path("/"), Err(BarrierError::InvalidPath { .. })));
        assert!(matches!(
            validate_path("a/b"),
            Err(BarrierError::Framework(FrameworkError::InvalidPath { .. }))
        ));
        assert!(matches!(
            validate_path("/a/"),
            Err(BarrierError::Framework(FrameworkError::InvalidPath { .. }))
        ));
    }
}
