//! The partitioner's errors.

use zk_recipes_framework::Error as FrameworkError;
use zk_recipes_mutex::LockError;
use zk_recipes_nodes::NodeError;

/// A `Result` with a [`PartitionError`].
///
/// ```
/// use zk_recipes_partition::{PartitionError, Result};
///
/// fn at_least_one(items: &[&str]) -> Result<()> {
///     if items.is_empty() {
///         return Err(PartitionError::NoItems);
///     }
///     Ok(())
/// }
/// assert!(at_least_one(&[]).is_err());
/// ```
pub type Result<T, E = PartitionError> = std::result::Result<T, E>;

/// What can go wrong starting, running or closing a partitioner.
///
/// Bad input (an invalid path, no items, an item that is not one znode name, an item given twice,
/// an invalid identifier, a zero settle time) is refused by
/// [`PartitionerBuilder::start`](crate::PartitionerBuilder::start) before anything is sent.
///
/// ```
/// use zk_recipes_partition::PartitionError;
///
/// let err = PartitionError::DuplicateItem { item: "shard-1".into() };
/// assert_eq!(err.to_string(), "the item \"shard-1\" is given twice");
/// assert!(!err.is_retryable());
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PartitionError {
    /// From the framework: a timeout, a closed framework, connection or server errors.
    #[error(transparent)]
    Framework(#[from] FrameworkError),
    /// From an item's lock.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// From the party membership node.
    #[error(transparent)]
    Membership(#[from] NodeError),
    /// The partitioner's path is not a valid ZooKeeper path (or is the root); nothing was sent.
    #[error("invalid partitioner path {path:?}: {reason}")]
    InvalidPath {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The set of items is empty; nothing was sent.
    #[error("a partitioner needs at least one item")]
    NoItems,
    /// An item is not one valid znode name (empty, `.`, `..`, a `/`, or a character ZooKeeper
    /// refuses); nothing was sent.
    #[error("invalid item {item:?}: {reason}")]
    InvalidItem {
        /// The item as given.
        item: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The same item is given twice; nothing was sent.
    #[error("the item {item:?} is given twice")]
    DuplicateItem {
        /// The item.
        item: String,
    },
    /// The worker identifier cannot name a party member (empty, a `/`, or a character ZooKeeper
    /// refuses in a node name); nothing was sent.
    #[error("invalid worker identifier {identifier:?}: {reason}")]
    InvalidIdentifier {
        /// The identifier as given.
        identifier: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The settle time is zero; nothing was sent.
    #[error("the settle time must be positive")]
    ZeroSettle,
    /// [`Partitioner::run`](crate::Partitioner::run) was called a second time.
    #[error("this partitioner already runs a task per item")]
    AlreadyRunning,
    /// The partitioner is closed (or its framework is).
    #[error("the partitioner is closed")]
    Closed,
}

impl PartitionError {
    /// Whether trying again may succeed (a connection loss, a timeout).
    pub fn is_retryable(&self) -> bool {
        match self {
            PartitionError::Framework(err) => err.is_retryable(),
            PartitionError::Lock(err) => err.is_retryable(),
            PartitionError::Membership(err) => err.is_retryable(),
            _ => false,
        }
    }

    /// Whether a deadline passed.
    pub fn is_timeout(&self) -> bool {
        match self {
            PartitionError::Framework(err) => err.is_timeout(),
            PartitionError::Lock(err) => err.is_timeout(),
            PartitionError::Membership(err) => err.is_timeout(),
            _ => false,
        }
    }

    /// Whether the partitioner (or its framework) is closed: nothing more will work.
    ///
    /// ```
    /// use zk_recipes_partition::PartitionError;
    ///
    /// assert!(PartitionError::Closed.is_closed());
    /// assert!(!PartitionError::NoItems.is_closed());
    /// ```
    pub fn is_closed(&self) -> bool {
        match self {
            PartitionError::Closed => true,
            PartitionError::Framework(err) => err.is_closed(),
            PartitionError::Lock(err) => err.is_closed(),
            PartitionError::Membership(err) => err.is_closed(),
            _ => false,
        }
    }

    /// Whether a node of ours that the call built on is gone with its session (an item's lock
    /// node): the item is no longer ours.
    ///
    /// ```
    /// use zk_recipes_framework::Error as FrameworkError;
    /// use zk_recipes_partition::PartitionError;
    ///
    /// let lost = FrameworkError::NodeLost { path: "/app/items/shard-1/_c_x-lock-0000000001".into() };
    /// assert!(PartitionError::from(lost).is_node_lost());
    /// assert!(!PartitionError::Closed.is_node_lost());
    /// ```
    pub fn is_node_lost(&self) -> bool {
        match self {
            PartitionError::Framework(err) => err.is_node_lost(),
            PartitionError::Lock(err) => err.is_node_lost(),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn closed_and_node_lost_come_from_every_source() {
        let lost = || FrameworkError::NodeLost { path: "/app/items/shard-1/_c_x-lock-0000000001".into() };
        assert!(PartitionError::Closed.is_closed());
        assert!(PartitionError::from(FrameworkError::Closed).is_closed());
        assert!(PartitionError::from(LockError::from(FrameworkError::Closed)).is_closed());
        assert!(PartitionError::from(NodeError::Closed).is_closed());
        assert!(!PartitionError::from(lost()).is_closed());
        assert!(PartitionError::from(lost()).is_node_lost());
        assert!(PartitionError::from(LockError::from(lost())).is_node_lost());
        assert!(!PartitionError::Closed.is_node_lost() && !PartitionError::NoItems.is_node_lost());
    }

    #[test]
    fn the_membership_node_answers_timeout_and_retryable_too() {
        let timeout = || zk_recipes_framework::Deadline::after(std::time::Duration::ZERO).timeout_error();
        let connection_loss =
            || FrameworkError::ZooKeeper(zk_recipes_framework::zookeeper_client::Error::ConnectionLoss);
        assert!(PartitionError::from(NodeError::from(timeout())).is_timeout());
        assert!(PartitionError::from(NodeError::from(connection_loss())).is_retryable());
        assert!(!PartitionError::from(NodeError::Closed).is_retryable());
    }
}
