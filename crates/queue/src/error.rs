//! The queue error type.

use zk_recipes_framework::Error as FrameworkError;

/// A boxed error from a [`crate::QueueSerializer`] or a consumer's handler.
///
/// ```
/// use zk_recipes_queue::BoxError;
///
/// // `?` turns any error into it.
/// fn parse_count(bytes: &[u8]) -> Result<u32, BoxError> {
///     Ok(std::str::from_utf8(bytes)?.trim().parse()?)
/// }
/// assert_eq!(parse_count(b" 42").unwrap(), 42);
/// assert!(parse_count(b"forty-two").is_err());
/// ```
pub type BoxError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What can go wrong with a queue.
///
/// Errors for bad input ([`QueueError::ItemTooLarge`], [`QueueError::InvalidArgument`],
/// [`QueueError::Serialize`], an invalid path in [`QueueError::Framework`]) are returned before
/// anything is sent to the server: nothing is written.
///
/// ```
/// use zk_recipes_queue::QueueError;
///
/// let err = QueueError::ItemTooLarge { size: 2_000_000, limit: 1_044_480 };
/// assert!(!err.is_retryable());
/// assert!(err.to_string().contains("2000000"));
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// From the framework: invalid path, timeout, closed framework, lost session, connection or
    /// server errors.
    #[error(transparent)]
    Framework(#[from] FrameworkError),

    /// The node to write (the framed item bytes) is larger than the server accepts
    /// (`jute.maxbuffer`, 1 MiB by default, less room for the request around it). Nothing was
    /// written.
    #[error("queue node of {size} bytes is larger than the limit of {limit} bytes")]
    ItemTooLarge {
        /// The node's size in bytes.
        size: usize,
        /// The limit ([`crate::QueueBuilder::max_node_bytes`]).
        limit: usize,
    },

    /// An argument is out of range (an empty batch, an empty id, a due time before 1970, ...).
    /// Nothing was written.
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The serializer refused an item. Nothing was written.
    #[error("could not serialize a queue item: {0}")]
    Serialize(String),

    /// An ack, requeue or reject of a lock-safe delivery found our lock node gone: our session was
    /// lost (or someone deleted the lock node). Nothing was committed; the item is (or will be)
    /// delivered again, perhaps to another consumer.
    #[error("the lock on queue item {item} is gone; the item was not acknowledged and will be redelivered")]
    LockLost {
        /// The item's node name.
        item: String,
    },

    /// An ack, requeue or reject of a lock-safe delivery was sent, then the session that held our
    /// lock expired before the reply came, and the item is no longer queued. Either our request
    /// committed, or our lock went with the session and another consumer took the item and
    /// finished it: which of the two cannot be known. Either way the item is not ours any more
    /// and will not be delivered to us again. (Had it still been queued, the error would be
    /// [`QueueError::LockLost`]: then nothing was committed.)
    #[error(
        "the session holding the lock on queue item {item} expired while our request for it was in flight, and the item has left the queue: either that request committed or another consumer finished the item"
    )]
    OutcomeUnknown {
        /// The item's node name.
        item: String,
    },

    /// A stopped consumer's handlers did not all finish within its drain timeout
    /// ([`crate::Consumer::drain_timeout`]). The unfinished deliveries were dropped: lock-safe,
    /// they are delivered again; at most once, they count as consumed.
    #[error(
        "the queue consumer stopped with {abandoned} deliveries still being handled after its drain timeout of {}; lock-safe ones will be delivered again",
        zk_recipes_framework::ReadableDuration(*timeout)
    )]
    DrainTimedOut {
        /// How many deliveries were still being handled.
        abandoned: usize,
        /// The drain timeout.
        timeout: std::time::Duration,
    },

    /// An ack, requeue or reject of a lock-safe delivery found the item already deleted while we
    /// held its lock: someone removed it without taking the lock (a consumer without a lock path,
    /// an id queue's `remove` without one, or an operator).
    #[error("queue item {item} was deleted by someone who did not hold its lock")]
    ItemGone {
        /// The item's node name.
        item: String,
    },
}

impl QueueError {
    /// Whether the caller's deadline passed (including a consumer's drain deadline).
    pub fn is_timeout(&self) -> bool {
        matches!(
            self,
            QueueError::Framework(FrameworkError::Timeout { .. }) | QueueError::DrainTimedOut { .. }
        )
    }

    /// Whether trying again may succeed (the connection was lost, so the outcome is unknown).
    pub fn is_retryable(&self) -> bool {
        matches!(self, QueueError::Framework(err) if err.is_retryable())
    }

    /// Whether our lock on the item is gone with its session (lock-safe mode):
    /// [`QueueError::LockLost`] (another consumer gets the item) or [`QueueError::OutcomeUnknown`]
    /// (the item has left the queue, perhaps by our hand).
    pub fn is_node_lost(&self) -> bool {
        matches!(self, QueueError::LockLost { .. } | QueueError::OutcomeUnknown { .. })
    }

    /// Whether the framework is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, QueueError::Framework(FrameworkError::Closed))
    }
}

impl From<zk_recipes_framework::zookeeper_client::Error> for QueueError {
    fn from(err: zk_recipes_framework::zookeeper_client::Error) -> Self {
        QueueError::Framework(FrameworkError::from(err))
    }
}

/// The queue's result type.
///
/// ```
/// use zk_recipes_queue::{DistributedQueue, Result};
///
/// /// Puts every job, and returns how many the queue holds now.
/// async fn enqueue_all(queue: &DistributedQueue<Vec<u8>>, jobs: &[Vec<u8>]) -> Result<usize> {
///     queue.put_batch(jobs).await?;
///     queue.len().await
/// }
/// ```
pub type Result<T, E = QueueError> = std::result::Result<T, E>;
