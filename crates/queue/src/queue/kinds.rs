//! The other queues of the family, each a [`DistributedQueue`] with its own node names:
//! [`DistributedPriorityQueue`], [`DistributedDelayQueue`] and [`DistributedIdQueue`].

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::debug;
use zk_recipes_framework::Deadline;

use super::distributed::DistributedQueue;
use crate::consumer::Consumer;
use crate::error::{QueueError, Result};
use crate::names::{self, ITEM_PREFIX};

/// A priority queue on ZooKeeper — Curator's `DistributedPriorityQueue`, same names: items with a
/// lower priority come out first (`queue-` + `1`/`0` for the sign + 8 uppercase hex digits +
/// `<seq>`), FIFO within one priority.
///
/// Consumers always take from the head, and look again after every change of the queue, so a
/// newly added urgent item is next. With a prefetch above 1 (the default is 16; see
/// [`Consumer::prefetch`]) up to that many already-taken items go before it. Everything else is
/// as [`DistributedQueue`]: the two delivery modes, connection loss, limits. A requeued item keeps
/// its priority (Curator's loses it).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_queue::Result<()> {
/// use zk_recipes_queue::DistributedQueue;
/// let queue = DistributedQueue::builder(&framework, "/app/urgent").build_priority()?;
/// queue.put(&b"later".to_vec(), 10).await?;
/// queue.put(&b"first".to_vec(), -5).await?;
/// let mut consumer = queue.consumer().prefetch(1);
/// let delivery = consumer.next().await.expect("open")?;
/// assert_eq!(delivery.items(), [b"first".to_vec()]);
/// delivery.ack().await?;
/// # Ok(()) }
/// ```
pub struct DistributedPriorityQueue<T> {
    pub(super) queue: DistributedQueue<T>,
}

/// A delay queue on ZooKeeper — Curator's `DistributedDelayQueue`, same names
/// (`queue-|<due epoch-ms in uppercase hex>|<seq>`): an item is invisible to consumers until its
/// due time, then items come out in order of due time.
///
/// A consumer sleeps until the head is due (or the queue changes), and always takes from the
/// head. Due times are wall-clock milliseconds, so producers' and consumers' clocks must agree.
/// Everything else is as [`DistributedQueue`]. A requeued item keeps its (past) due time, so it is
/// due at once (Curator's requeue makes it a plain `queue-<seq>`, also due at once).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_queue::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_queue::DistributedQueue;
/// let queue = DistributedQueue::builder(&framework, "/app/reminders").build_delay()?;
/// queue.put_after(&b"ping".to_vec(), Duration::from_secs(2)).await?;
/// let mut consumer = queue.consumer();
/// let delivery = consumer.next().await.expect("open")?; // about 2 s later
/// delivery.ack().await?;
/// # Ok(()) }
/// ```
pub struct DistributedDelayQueue<T> {
    pub(super) queue: DistributedQueue<T>,
}

/// A queue whose items carry an id, so they can be removed before they are consumed — Curator's
/// `DistributedIdQueue`, same names (`queue-|<id>|<seq>`, `/` and `|` in the id replaced by `_`).
///
/// Items come out in put order. Everything else is as [`DistributedQueue`]; a requeued item keeps
/// its id, as Curator's does.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_queue::Result<()> {
/// use zk_recipes_queue::DistributedQueue;
/// let queue = DistributedQueue::builder(&framework, "/app/orders").build_id()?;
/// queue.put(&b"order 17".to_vec(), "order-17").await?;
/// assert_eq!(queue.remove("order-17").await?, 1);
/// # Ok(()) }
/// ```
pub struct DistributedIdQueue<T> {
    pub(super) queue: DistributedQueue<T>,
}

macro_rules! common_queue_methods {
    ($queue:ident) => {
        impl<T> Clone for $queue<T> {
            fn clone(&self) -> Self {
                Self { queue: self.queue.clone() }
            }
        }

        impl<T> fmt::Debug for $queue<T> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.queue.inner.fmt(f)
            }
        }

        impl<T: Send + 'static> $queue<T> {
            /// The queue path.
            pub fn path(&self) -> &str {
                self.queue.path()
            }

            /// The lock path, if consumption is lock-safe.
            pub fn lock_path(&self) -> Option<&str> {
                self.queue.lock_path()
            }

            /// A consumer (not started until its first [`Consumer::next`]).
            pub fn consumer(&self) -> Consumer<T> {
                self.queue.consumer()
            }

            /// As [`DistributedQueue::with_put_timeout`]: a handle whose puts time out after
            /// `timeout`.
            #[must_use]
            pub fn with_put_timeout(&self, timeout: Duration) -> Self {
                Self { queue: self.queue.with_put_timeout(timeout) }
            }

            /// As [`DistributedQueue::put_timeout`].
            pub fn put_timeout(&self) -> Option<Duration> {
                self.queue.put_timeout()
            }

            /// How many items the queue holds now (due or not), including items being processed.
            ///
            /// # Errors
            /// As [`DistributedQueue::len`].
            ///
            /// # Cancel safety
            /// As [`DistributedQueue::len`].
            pub async fn len(&self) -> Result<usize> {
                self.queue.len().await
            }

            /// Whether the queue holds no items now.
            ///
            /// # Errors
            /// As [`DistributedQueue::len`].
            ///
            /// # Cancel safety
            /// As [`DistributedQueue::is_empty`].
            pub async fn is_empty(&self) -> Result<bool> {
                self.queue.is_empty().await
            }

            /// As [`DistributedQueue::flush_background`].
            ///
            /// # Errors
            /// A timeout at `deadline`.
            ///
            /// # Cancel safety
            /// As [`DistributedQueue::flush_background`].
            pub async fn flush_background(&self, deadline: impl Into<Deadline>) -> Result<()> {
                let deadline = deadline.into();
                self.queue.flush_background(deadline).await
            }
        }
    };
}

common_queue_methods!(DistributedPriorityQueue);
common_queue_methods!(DistributedDelayQueue);
common_queue_methods!(DistributedIdQueue);

impl<T: Send + 'static> DistributedPriorityQueue<T> {
    /// Adds `item` with `priority` (lower comes out first) and returns the node's name.
    ///
    /// # Errors
    /// As [`DistributedQueue::put`].
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the item may or may not have been
    /// stored, and nothing tells which. Cancelled before (while waiting for room in a bounded
    /// queue, say), nothing was stored.
    pub async fn put(&self, item: &T, priority: i32) -> Result<String> {
        let bytes = self.queue.encode(std::slice::from_ref(item))?;
        self.queue.put_node(&names::priority_name(priority), bytes).await
    }

    /// Adds `items` together as one node with `priority`.
    ///
    /// # Errors
    /// As [`DistributedQueue::put_many`].
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the items (all of them or none) may
    /// or may not have been stored, and nothing tells which. Cancelled before (while waiting for
    /// room in a bounded queue, say), nothing was stored.
    pub async fn put_many(&self, items: &[T], priority: i32) -> Result<String> {
        let bytes = self.queue.encode(items)?;
        self.queue.put_node(&names::priority_name(priority), bytes).await
    }
}

impl<T: Send + 'static> DistributedDelayQueue<T> {
    /// Adds `item`, invisible to consumers until `due`; returns the node's name.
    ///
    /// # Errors
    /// [`QueueError::InvalidArgument`] for a due time not after 1970-01-01; as
    /// [`DistributedQueue::put`].
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the item may or may not have been
    /// stored, and nothing tells which. Cancelled before (while waiting for room in a bounded
    /// queue, say), nothing was stored.
    pub async fn put(&self, item: &T, due: SystemTime) -> Result<String> {
        let name = names::delay_name(epoch_ms(due)?);
        let bytes = self.queue.encode(std::slice::from_ref(item))?;
        self.queue.put_node(&name, bytes).await
    }

    /// Adds `item`, due `delay` from now.
    ///
    /// # Errors
    /// As [`put`](Self::put).
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the item may or may not have been
    /// stored, and nothing tells which. Cancelled before (while waiting for room in a bounded
    /// queue, say), nothing was stored.
    pub async fn put_after(&self, item: &T, delay: Duration) -> Result<String> {
        self.put(item, SystemTime::now() + delay).await
    }

    /// Adds `items` together as one node, due at `due`.
    ///
    /// # Errors
    /// As [`put`](Self::put) and [`DistributedQueue::put_many`].
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the items (all of them or none) may
    /// or may not have been stored, and nothing tells which. Cancelled before (while waiting for
    /// room in a bounded queue, say), nothing was stored.
    pub async fn put_many(&self, items: &[T], due: SystemTime) -> Result<String> {
        let name = names::delay_name(epoch_ms(due)?);
        let bytes = self.queue.encode(items)?;
        self.queue.put_node(&name, bytes).await
    }
}

fn epoch_ms(due: SystemTime) -> Result<u64> {
    match due.duration_since(UNIX_EPOCH) {
        Ok(since) if since.as_millis() > 0 => u64::try_from(since.as_millis())
            .map_err(|_| QueueError::InvalidArgument("due time too far in the future".into())),
        _ => Err(QueueError::InvalidArgument("the due time must be after 1970-01-01".into())),
    }
}

impl<T: Send + 'static> DistributedIdQueue<T> {
    /// Adds `item` with `id` (need not be unique) and returns the node's name.
    ///
    /// # Errors
    /// [`QueueError::InvalidArgument`] for an empty id; as [`DistributedQueue::put`].
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the item may or may not have been
    /// stored, and nothing tells which. Cancelled before (while waiting for room in a bounded
    /// queue, say), nothing was stored.
    pub async fn put(&self, item: &T, id: &str) -> Result<String> {
        if id.is_empty() {
            return Err(QueueError::InvalidArgument("an item id cannot be empty".into()));
        }
        let bytes = self.queue.encode(std::slice::from_ref(item))?;
        self.queue.put_node(&names::id_name(id), bytes).await
    }

    /// Removes every item with `id` that no consumer holds, and returns how many it removed
    /// (Curator's `remove`). With a lock path, each item is locked first, so an item a consumer is
    /// processing is left alone (and not counted). An item whose removal was sent just before our
    /// session expired, and which is gone afterwards, is not counted either: it may have been
    /// removed by us or consumed by someone else.
    ///
    /// # Errors
    /// [`QueueError::InvalidArgument`] for an empty id; as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a cancelled call may have removed some of the items, and their count is
    /// lost. With a lock path, a call cancelled while it locks or holds an item's lock hands that
    /// lock to the queue's background task, which deletes it on the session that made it: the
    /// item goes back to the consumers (unless the removal sent before the cancel took it).
    ///
    /// [`Framework::retry`]: zk_recipes_framework::Framework::retry
    pub async fn remove(&self, id: &str) -> Result<usize> {
        if id.is_empty() {
            return Err(QueueError::InvalidArgument("an item id cannot be empty".into()));
        }
        let wanted = names::fix_id(id);
        let inner = &*self.queue.inner;
        let children = inner
            .framework
            .retry(Deadline::within(inner.put_timeout), |session| async move {
                inner.ensure_created(&session).await?;
                Ok(session.client().list_children(&inner.path).await?)
            })
            .await?;
        let matching: Vec<String> = children
            .into_iter()
            .filter(|child| child.starts_with(ITEM_PREFIX))
            .filter(|child| names::parse_id(child).is_some_and(|(found, _)| found == wanted))
            .collect();
        let mut removed = 0;
        for name in &matching {
            if crate::consumer::remove_item(inner, name).await? {
                removed += 1;
            }
        }
        debug!(id, removed, "removed by id");
        Ok(removed)
    }
}
