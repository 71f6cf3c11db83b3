//! [`DistributedQueue`]: the FIFO queue of the family, its handle and what it tells about itself.
//! Its puts are in [`super::put`], its builder in [`super::builder`].

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::Deadline;

use crate::consumer::Consumer;
use crate::error::Result;
use crate::names::ITEM_PREFIX;
use crate::shared::Inner;

/// A distributed FIFO queue on ZooKeeper — Curator's `DistributedQueue`, with the same nodes and
/// bytes, so Rust and Java producers and consumers share one queue.
///
/// Each put creates `<path>/queue-<seq>` (PERSISTENT_SEQUENTIAL) holding Curator's framing of one
/// or more items. The queue path (and lock path) are created as PERSISTENT nodes holding this
/// host's address, their parents as containers.
///
/// # Two delivery modes
/// - **Without a lock path: at most once.** A consumer deletes an item's node before it hands
///   the item out (whoever deletes it first gets it), as Curator does. If the consumer dies
///   before it has processed the item, the item is lost. A dropped [`crate::Delivery`] counts as
///   consumed; deliveries prefetched by a [`Consumer`] that never reached the application are put
///   back (as new nodes at the tail) when the consumer is dropped.
/// - **With a lock path ([`QueueBuilder::lock_path`]): at least once.** A consumer takes an item
///   by creating the EPHEMERAL node `<lock_path>/<item name>` (holding this host's address), reads
///   it, and hands it out. [`crate::Delivery::ack`] deletes the item in one multi
///   {check our lock node exists, delete the item, delete our lock node}: if our lock is gone (our
///   session was lost), nothing is committed and [`QueueError::LockLost`] says so, because the
///   item goes to another consumer. A failed handler requeues the item (one multi: delete it and
///   create a new item with the same bytes) or deletes it, per the [`ErrorMode`]. An item whose
///   consumer dies (its session ends, so its lock node goes) is delivered again: consumers that
///   met the lock watch it and take the item when it goes, even on a quiet queue. So an item is
///   processed more than once only if its consumer died (or lost its session) before the ack.
///
/// A single consumer sees items in FIFO order. Competing consumers that lose races jump to a
/// random point of the listing, so they spread over the queue instead of all fighting for the
/// head.
///
/// # Connection loss and session expiry
/// Every call retries per the framework's retry policy. A put whose create was in flight when the
/// connection broke may be stored twice (at least once). Without a lock path, an item whose delete
/// (the take) was in flight when the connection broke is not handed out, since another consumer
/// may have taken it: if our delete went through, the item is lost, with a warning naming it. In
/// lock-safe mode, a session loss frees every item its consumers held: their acks fail with
/// [`QueueError::LockLost`] and the items are delivered again. [`crate::Delivery::lost`] tells a
/// handler that its lock can no longer be trusted, and [`Consumer::on_connection_state`] tells a
/// consumer about every connection change (Curator never calls its consumers' `stateChanged`:
/// CURATOR-336).
///
/// # Limits
/// A consumer lists the whole queue path: ZooKeeper refuses to send a listing larger than
/// `jute.maxbuffer` (1 MiB by default), about 50,000 `queue-<seq>` names (each costs its length
/// plus 4 bytes). Beyond that, listing fails with a connection error and consumers stop making
/// progress (Curator's too); keep queues shorter, or bound them with
/// [`QueueBuilder::max_items`].
///
/// ```no_run
/// use zk_recipes_framework::Framework;
/// use zk_recipes_queue::DistributedQueue;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let framework = Framework::builder("127.0.0.1:2181").start()?;
/// let queue = DistributedQueue::builder(&framework, "/app/jobs").lock_path("/app/jobs-locks").build()?;
/// queue.put(&b"job 1".to_vec()).await?;
/// queue.put_many(&[b"job 2".to_vec(), b"job 3".to_vec()]).await?; // one node, two items
///
/// let mut consumer = queue.consumer();
/// while let Some(delivery) = consumer.next().await {
///     let delivery = delivery?;
///     for item in delivery.items() {
///         println!("processing {}", String::from_utf8_lossy(item));
///     }
///     delivery.ack().await?;
/// }
/// # Ok(()) }
/// ```
///
/// [`QueueBuilder::lock_path`]: crate::QueueBuilder::lock_path
/// [`QueueBuilder::max_items`]: crate::QueueBuilder::max_items
/// [`QueueError::LockLost`]: crate::QueueError::LockLost
/// [`ErrorMode`]: crate::ErrorMode
pub struct DistributedQueue<T> {
    pub(crate) inner: Arc<Inner<T>>,
    /// This handle's put deadline (the builder's, or [`DistributedQueue::with_put_timeout`]'s).
    pub(super) put_timeout: Option<Duration>,
}

impl<T> Clone for DistributedQueue<T> {
    fn clone(&self) -> Self {
        Self { inner: self.inner.clone(), put_timeout: self.put_timeout }
    }
}

impl<T> fmt::Debug for DistributedQueue<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<T: Send + 'static> DistributedQueue<T> {
    /// The queue path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The lock path, if consumption is lock-safe.
    pub fn lock_path(&self) -> Option<&str> {
        self.inner.lock_path.as_deref()
    }

    /// A handle to the same queue whose puts time out after `timeout` (including the wait for room
    /// in a bounded queue), whatever the builder's [`QueueBuilder::put_timeout`] said: a deadline
    /// per call, without building another queue.
    ///
    /// ```no_run
    /// # async fn demo(queue: zk_recipes_queue::DistributedQueue<Vec<u8>>) -> zk_recipes_queue::Result<()> {
    /// use std::time::Duration;
    /// // An interactive request waits a second at most; the batch job keeps the queue's default.
    /// queue.with_put_timeout(Duration::from_secs(1)).put(&b"urgent".to_vec()).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// [`QueueBuilder::put_timeout`]: crate::QueueBuilder::put_timeout
    #[must_use]
    pub fn with_put_timeout(&self, timeout: Duration) -> Self {
        Self { inner: self.inner.clone(), put_timeout: Some(timeout) }
    }

    /// The deadline each put of this handle has (`None`: no deadline).
    pub fn put_timeout(&self) -> Option<Duration> {
        self.put_timeout
    }

    /// How many items (`queue-` nodes) the queue holds now, including items being processed by
    /// lock-safe consumers.
    ///
    /// # Errors
    /// As [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads (a missing queue directory may have been created).
    ///
    /// [`Framework::retry`]: zk_recipes_framework::Framework::retry
    pub async fn len(&self) -> Result<usize> {
        let inner = &*self.inner;
        let children = inner
            .framework
            .retry(Deadline::within(inner.put_timeout), |session| async move {
                inner.ensure_created(&session).await?;
                Ok(session.client().list_children(&inner.path).await?)
            })
            .await?;
        Ok(children.iter().filter(|child| child.starts_with(ITEM_PREFIX)).count())
    }

    /// Whether the queue holds no items now.
    ///
    /// # Errors
    /// As [`len`](Self::len).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads (a missing queue directory may have been created).
    pub async fn is_empty(&self) -> Result<bool> {
        Ok(self.len().await? == 0)
    }

    /// A consumer (not started until its first [`Consumer::next`]).
    pub fn consumer(&self) -> Consumer<T> {
        Consumer::new(self.inner.clone())
    }

    /// Waits until the background work of dropped deliveries is done: lock nodes released, items
    /// put back. For tests and orderly shutdown.
    ///
    /// # Errors
    /// A timeout at `deadline`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits. The background work goes on either way.
    pub async fn flush_background(&self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        Ok(self.inner.background.idle(deadline).await?)
    }
}
