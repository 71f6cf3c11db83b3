//! The distributed-queue family: builder, shared state, producers.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::{debug, info_span, Instrument};
use zk_recipes_framework::zookeeper_client::{self, CreateMode, MultiWriteResult};
use zk_recipes_framework::{local_address, path, Deadline, Error as FrameworkError, Framework, Session};

use crate::background::{Background, Job};
use crate::consumer::{AckBatcher, Consumer};
use crate::error::{QueueError, Result};
use crate::framing::{frame, BytesSerializer, QueueSerializer};
use crate::names::{self, Kind, ITEM_PREFIX, SEPARATOR};
use crate::simple::wait_for_change;

/// The largest node (framed item bytes) a put writes by default: ZooKeeper's default
/// `jute.maxbuffer` (1 MiB) less 4 KiB for the rest of the request. Larger puts fail with
/// [`QueueError::ItemTooLarge`] before anything is sent.
pub const DEFAULT_MAX_NODE_BYTES: usize = zk_recipes_framework::DEFAULT_MAX_NODE_DATA;

/// How many nodes one multi of [`DistributedQueue::put_batch`] creates at most.
const MAX_NODES_PER_MULTI: usize = 1000;

/// What a lock-safe consumer's handler failure does to the item (Curator's `ErrorMode`).
///
/// ```
/// assert_eq!(zk_recipes_queue::ErrorMode::default(), zk_recipes_queue::ErrorMode::Requeue);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorMode {
    /// Put the node back as a new item at the tail with the same bytes (the default). With a lock
    /// path it is one multi with the delete, so the item is never lost nor doubled.
    #[default]
    Requeue,
    /// Delete the item.
    Delete,
}

/// Builds the queues of the distributed-queue family (Curator's `QueueBuilder`). Start from
/// [`DistributedQueue::builder`].
///
/// Defaults: items are `Vec<u8>` ([`BytesSerializer`]); no lock path (items are deleted before
/// they are handed out: at most once); unbounded; [`ErrorMode::Requeue`]; no put timeout (the
/// framework's retry policy still bounds connection trouble); nodes up to
/// [`DEFAULT_MAX_NODE_BYTES`].
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_queue::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_queue::{DistributedQueue, ErrorMode, Utf8Serializer};
///
/// let queue = DistributedQueue::builder(&framework, "/app/jobs")
///     .serializer(Utf8Serializer)
///     .lock_path("/app/jobs-locks")
///     .error_mode(ErrorMode::Requeue)
///     .max_items(10_000)
///     .put_timeout(Duration::from_secs(30))
///     .build()?;
/// queue.put(&"hello".to_string()).await?;
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until built"]
pub struct QueueBuilder<T> {
    framework: Framework,
    path: String,
    serializer: Arc<dyn QueueSerializer<T>>,
    lock_path: Option<String>,
    max_items: Option<usize>,
    error_mode: ErrorMode,
    put_timeout: Option<Duration>,
    max_node_bytes: usize,
    max_deliveries: Option<u32>,
    dead_letter_path: Option<String>,
}

impl<T> fmt::Debug for QueueBuilder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("QueueBuilder")
            .field("path", &self.path)
            .field("lock_path", &self.lock_path)
            .field("max_items", &self.max_items)
            .field("error_mode", &self.error_mode)
            .field("put_timeout", &self.put_timeout)
            .field("max_node_bytes", &self.max_node_bytes)
            .field("max_deliveries", &self.max_deliveries)
            .field("dead_letter_path", &self.dead_letter_path)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> QueueBuilder<T> {
    /// Items of another type, turned into bytes by `serializer`.
    pub fn serializer<U: Send + 'static>(self, serializer: impl QueueSerializer<U>) -> QueueBuilder<U> {
        QueueBuilder {
            framework: self.framework,
            path: self.path,
            serializer: Arc::new(serializer),
            lock_path: self.lock_path,
            max_items: self.max_items,
            error_mode: self.error_mode,
            put_timeout: self.put_timeout,
            max_node_bytes: self.max_node_bytes,
            max_deliveries: self.max_deliveries,
            dead_letter_path: self.dead_letter_path,
        }
    }

    /// Makes consumption lock-safe (at least once): a consumer locks an item by creating the
    /// EPHEMERAL node `<lock_path>/<item name>` and deletes the item only when it is acknowledged;
    /// an item whose consumer dies is delivered again. Defaults to none (at most once).
    pub fn lock_path(mut self, lock_path: impl Into<String>) -> Self {
        self.lock_path = Some(lock_path.into());
        self
    }

    /// Bounds the queue: producers wait while the queue path has `max_items` children or more.
    /// The bound is approximate: producers that look at the same time all see room, so the queue
    /// can overshoot by up to (concurrent producers × nodes per put) - 1. Defaults to unbounded.
    pub fn max_items(mut self, max_items: usize) -> Self {
        self.max_items = Some(max_items);
        self
    }

    /// What a failed handler does to its item ([`Consumer::run`]). Defaults to
    /// [`ErrorMode::Requeue`].
    pub fn error_mode(mut self, error_mode: ErrorMode) -> Self {
        self.error_mode = error_mode;
        self
    }

    /// A deadline for each put (including waiting for room in a bounded queue). Defaults to none.
    pub fn put_timeout(mut self, timeout: Duration) -> Self {
        self.put_timeout = Some(timeout);
        self
    }

    /// Bounds redelivery: a node handed to consumers `max_deliveries` times is not handed out again
    /// but moved to the [`dead_letter_path`](Self::dead_letter_path) (or, without one, deleted
    /// with an error logged), so an item that always fails (or always crashes its consumer) cannot
    /// loop forever. Defaults to unbounded.
    ///
    /// The count travels with the item, in a trailer after the frame's end marker (see
    /// [`crate::framing::delivery_count`]) that Curator does not read: Curator consumers see the
    /// same items. Lock-safe, a consumer writes the new count to the item before it hands the item
    /// out (one more write per delivery), so deliveries cut short by a crash count too; at most
    /// once, the count is written when the item is requeued. A node Curator requeues loses its
    /// count (Curator writes the items again without it).
    pub fn max_deliveries(mut self, max_deliveries: u32) -> Self {
        self.max_deliveries = Some(max_deliveries);
        self
    }

    /// Where items over [`max_deliveries`](Self::max_deliveries) go: a queue path of their own,
    /// where each becomes a plain `queue-<seq>` node with the same bytes (priority and due time are
    /// not kept), for a [`DistributedQueue`] (Rust or Curator) on that path to inspect or replay.
    /// Lock-safe, the move is one multi with the release of our lock: never lost nor doubled.
    pub fn dead_letter_path(mut self, dead_letter_path: impl Into<String>) -> Self {
        self.dead_letter_path = Some(dead_letter_path.into());
        self
    }

    /// The largest node a put writes, for servers with a larger `jute.maxbuffer`. Defaults to
    /// [`DEFAULT_MAX_NODE_BYTES`].
    pub fn max_node_bytes(mut self, max_node_bytes: usize) -> Self {
        self.max_node_bytes = max_node_bytes;
        self
    }

    /// A [`DistributedQueue`] (Curator's `buildQueue`).
    ///
    /// # Errors
    /// An invalid queue or lock path, the same path for both or one inside the other,
    /// `max_items == 0`: nothing is sent.
    pub fn build(self) -> Result<DistributedQueue<T>> {
        self.build_kind(Kind::Plain)
    }

    /// A [`DistributedPriorityQueue`] (Curator's `buildPriorityQueue`).
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_priority(self) -> Result<DistributedPriorityQueue<T>> {
        Ok(DistributedPriorityQueue { queue: self.build_kind(Kind::Priority)? })
    }

    /// A [`DistributedDelayQueue`] (Curator's `buildDelayQueue`).
    ///
    /// # Errors
    /// As [`build`](Self::build).
    pub fn build_delay(self) -> Result<DistributedDelayQueue<T>> {
        Ok(DistributedDelayQueue { queue: self.build_kind(Kind::Delay)? })
    }

    /// A [`DistributedIdQueue`] (Curator's `buildIdQueue`).
    ///
    /// # Errors
    /// As [`build`](Self::build), and a queue path containing `|`.
    pub fn build_id(self) -> Result<DistributedIdQueue<T>> {
        if self.path.contains(SEPARATOR) {
            return Err(QueueError::InvalidArgument(format!(
                "an id queue's path cannot contain {SEPARATOR:?}"
            )));
        }
        Ok(DistributedIdQueue { queue: self.build_kind(Kind::Id)? })
    }

    fn build_kind(self, kind: Kind) -> Result<DistributedQueue<T>> {
        validate_queue_path(&self.path)?;
        if let Some(lock_path) = &self.lock_path {
            validate_queue_path(lock_path)?;
            if *lock_path == self.path {
                return Err(QueueError::InvalidArgument(
                    "the lock path must differ from the queue path".into(),
                ));
            }
            refuse_nesting(&self.path, "queue path", lock_path, "lock path")?;
        }
        if self.max_deliveries == Some(0) {
            return Err(QueueError::InvalidArgument("max_deliveries must be at least 1".into()));
        }
        if let Some(dead_letters) = &self.dead_letter_path {
            validate_queue_path(dead_letters)?;
            if self.max_deliveries.is_none() {
                return Err(QueueError::InvalidArgument(
                    "a dead-letter path needs max_deliveries: nothing would ever go there".into(),
                ));
            }
            let others = std::iter::once((&self.path, "queue path"))
                .chain(self.lock_path.as_ref().map(|lock_path| (lock_path, "lock path")));
            for (other, other_name) in others {
                if dead_letters == other {
                    return Err(QueueError::InvalidArgument(format!(
                        "the dead-letter path must differ from the {other_name}"
                    )));
                }
                refuse_nesting(other, other_name, dead_letters, "dead-letter path")?;
            }
        }
        if self.max_items == Some(0) {
            return Err(QueueError::InvalidArgument("max_items must be at least 1".into()));
        }
        let data: Arc<[u8]> = local_address().into();
        let background = Background::new(self.framework.clone(), self.path.clone(), data.clone());
        let metrics = crate::metrics::QueueMetrics::new(&self.framework, &self.path);
        Ok(DistributedQueue {
            put_timeout: self.put_timeout,
            inner: Arc::new(Inner {
                metrics,
                framework: self.framework,
                path: self.path,
                lock_path: self.lock_path,
                serializer: self.serializer,
                kind,
                max_items: self.max_items,
                error_mode: self.error_mode,
                put_timeout: self.put_timeout,
                max_node_bytes: self.max_node_bytes,
                max_deliveries: self.max_deliveries,
                dead_letter_path: self.dead_letter_path,
                data,
                created: AtomicBool::new(false),
                background,
                acks: AckBatcher::default(),
            }),
        })
    }
}

fn validate_queue_path(queue_path: &str) -> Result<()> {
    path::validate(queue_path)
        .map_err(|reason| FrameworkError::InvalidPath { path: queue_path.to_owned(), reason })?;
    if queue_path == "/" {
        return Err(QueueError::InvalidArgument("a queue cannot live at the root".into()));
    }
    Ok(())
}

/// Refuses one of the queue's paths inside another: a lock path under the queue path would be a
/// foreign child that every consumer (Curator's too) lists and skips with a warning, and a queue
/// under its lock path would look like a lock node.
fn refuse_nesting(a: &str, a_name: &str, b: &str, b_name: &str) -> Result<()> {
    for (outer, outer_name, inner, inner_name) in [(a, a_name, b, b_name), (b, b_name, a, a_name)] {
        if inner.strip_prefix(outer).is_some_and(|rest| rest.starts_with('/')) {
            return Err(QueueError::InvalidArgument(format!(
                "the {inner_name} {inner} is inside the {outer_name} {outer}: use separate paths"
            )));
        }
    }
    Ok(())
}

/// What every handle, consumer and delivery of one queue shares.
pub(crate) struct Inner<T> {
    pub(crate) framework: Framework,
    pub(crate) path: String,
    pub(crate) lock_path: Option<String>,
    pub(crate) serializer: Arc<dyn QueueSerializer<T>>,
    pub(crate) kind: Kind,
    pub(crate) max_items: Option<usize>,
    pub(crate) error_mode: ErrorMode,
    pub(crate) put_timeout: Option<Duration>,
    pub(crate) max_node_bytes: usize,
    pub(crate) max_deliveries: Option<u32>,
    pub(crate) dead_letter_path: Option<String>,
    /// Default node data (this host's address), for the queue and lock paths and lock nodes.
    pub(crate) data: Arc<[u8]>,
    /// Whether the queue path (and lock path) are known to exist.
    created: AtomicBool,
    pub(crate) background: Background,
    /// Group commit of lock-safe acks.
    pub(crate) acks: AckBatcher,
    pub(crate) metrics: crate::metrics::QueueMetrics,
}

impl<T> fmt::Debug for Inner<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Queue")
            .field("path", &self.path)
            .field("lock_path", &self.lock_path)
            .field("kind", &self.kind)
            .field("max_items", &self.max_items)
            .field("error_mode", &self.error_mode)
            .finish_non_exhaustive()
    }
}

impl<T> Inner<T> {
    /// Creates the queue path and the lock path (PERSISTENT, default data, parents as containers)
    /// as Curator's `start()` does, once; again after [`forget_created`](Self::forget_created).
    pub(crate) async fn ensure_created(&self, session: &Session) -> Result<(), FrameworkError> {
        if self.created.load(Ordering::Acquire) {
            return Ok(());
        }
        create_persistent(&self.framework, session, &self.path, &self.data).await?;
        for other in [&self.lock_path, &self.dead_letter_path].into_iter().flatten() {
            create_persistent(&self.framework, session, other, &self.data).await?;
        }
        self.created.store(true, Ordering::Release);
        Ok(())
    }

    /// The queue or lock path turned out missing: create them again next time.
    pub(crate) fn forget_created(&self) {
        self.created.store(false, Ordering::Release);
    }

    pub(crate) fn item_path(&self, name: &str) -> String {
        path::join(&self.path, name)
    }

    /// Where a node goes past `max_deliveries`: `<dead_letter_path>/queue-` (sequential).
    pub(crate) fn dead_letter_prefix(&self) -> Option<String> {
        self.dead_letter_path.as_deref().map(|dead_letters| path::join(dead_letters, ITEM_PREFIX))
    }

    pub(crate) fn lock_node(&self, name: &str) -> Option<String> {
        self.lock_path.as_deref().map(|lock_path| path::join(lock_path, name))
    }

    pub(crate) fn submit(&self, job: Job) {
        self.background.submit(job);
    }
}

/// Creates `node` as PERSISTENT with `data` (parents as containers); an existing node is fine.
pub(crate) async fn create_persistent(
    framework: &Framework,
    session: &Session,
    node: &str,
    data: &[u8],
) -> Result<(), FrameworkError> {
    let options = session.create_options_for(node, CreateMode::Persistent);
    match session.client().create(node, data, &options).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => return Ok(()),
        Err(zookeeper_client::Error::NoNode) => {}
        Err(err) => return Err(err.into()),
    }
    if let Some(parent) = path::parent(node) {
        framework.ensure_path(parent, Deadline::never()).await?;
    }
    match session.client().create(node, data, &options).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

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
pub struct DistributedQueue<T> {
    pub(crate) inner: Arc<Inner<T>>,
    /// This handle's put deadline (the builder's, or [`DistributedQueue::with_put_timeout`]'s).
    put_timeout: Option<Duration>,
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

impl DistributedQueue<Vec<u8>> {
    /// A builder for a queue at `path` whose items are bytes; see [`QueueBuilder`] for the rest.
    pub fn builder(framework: &Framework, path: impl Into<String>) -> QueueBuilder<Vec<u8>> {
        QueueBuilder {
            framework: framework.clone(),
            path: path.into(),
            serializer: Arc::new(BytesSerializer),
            lock_path: None,
            max_items: None,
            error_mode: ErrorMode::default(),
            put_timeout: None,
            max_node_bytes: DEFAULT_MAX_NODE_BYTES,
            max_deliveries: None,
            dead_letter_path: None,
        }
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
    #[must_use]
    pub fn with_put_timeout(&self, timeout: Duration) -> Self {
        Self { inner: self.inner.clone(), put_timeout: Some(timeout) }
    }

    /// The deadline each put of this handle has (`None`: no deadline).
    pub fn put_timeout(&self) -> Option<Duration> {
        self.put_timeout
    }

    /// Adds `item` as one node, `queue-<seq>`, and returns the node's name.
    ///
    /// # Errors
    /// [`QueueError::Serialize`], [`QueueError::ItemTooLarge`] and a closed framework before
    /// anything is sent; [`QueueError::Framework`] with a timeout (the put timeout) or what the
    /// server said.
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the item may or may not have been
    /// stored, and nothing tells which. Cancelled before (while waiting for room in a bounded
    /// queue, say), nothing was stored.
    pub async fn put(&self, item: &T) -> Result<String> {
        let bytes = self.encode(std::slice::from_ref(item))?;
        self.put_node(ITEM_PREFIX, bytes).await
    }

    /// Adds `items` together as one node (Curator's `putMulti`): a consumer gets them in one
    /// [`crate::Delivery`], in order. Returns the node's name.
    ///
    /// # Errors
    /// As [`put`](Self::put); [`QueueError::InvalidArgument`] for no items.
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the items (all of them or none) may
    /// or may not have been stored, and nothing tells which. Cancelled before (while waiting for
    /// room in a bounded queue, say), nothing was stored.
    pub async fn put_many(&self, items: &[T]) -> Result<String> {
        let bytes = self.encode(items)?;
        self.put_node(ITEM_PREFIX, bytes).await
    }

    /// Adds each of `items` as its own node, creating many nodes per multi (one round trip and one
    /// transaction per up to 1,000 nodes or ~1 MiB). Returns the nodes' names in order. The fast
    /// way to produce: consumers see ordinary single-item nodes.
    ///
    /// Each multi is atomic; if a later one fails, the earlier ones stay.
    ///
    /// # Errors
    /// As [`put`](Self::put), checked for every item before anything is sent.
    ///
    /// # Cancel safety
    /// Not cancel safe: a cancelled call may have stored some of the items. Each multi sent before
    /// it was cancelled may or may not have been committed (as a whole); items of multis not yet
    /// sent were not stored. Nothing tells which: read the queue to find out.
    pub async fn put_batch(&self, items: &[T]) -> Result<Vec<String>> {
        let nodes = items
            .iter()
            .map(|item| Ok((ITEM_PREFIX.to_owned(), self.encode(std::slice::from_ref(item))?)))
            .collect::<Result<Vec<_>>>()?;
        self.put_nodes(nodes).await
    }

    /// How many items (`queue-` nodes) the queue holds now, including items being processed by
    /// lock-safe consumers.
    ///
    /// # Errors
    /// As [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads (a missing queue directory may have been created).
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

    pub(crate) fn encode(&self, items: &[T]) -> Result<Vec<u8>> {
        if items.is_empty() {
            return Err(QueueError::InvalidArgument("a queue node needs at least one item".into()));
        }
        let serialized = items
            .iter()
            .map(|item| {
                self.inner.serializer.serialize(item).map_err(|err| QueueError::Serialize(err.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        let bytes = frame(serialized.iter().map(Vec::as_slice));
        if bytes.len() > self.inner.max_node_bytes {
            return Err(QueueError::ItemTooLarge { size: bytes.len(), limit: self.inner.max_node_bytes });
        }
        Ok(bytes)
    }

    pub(crate) async fn put_node(&self, name: &str, bytes: Vec<u8>) -> Result<String> {
        let mut names = self.put_nodes(vec![(name.to_owned(), bytes)]).await?;
        Ok(names.remove(0))
    }

    /// Creates `(name, bytes)` nodes, in multis when there are several.
    async fn put_nodes(&self, nodes: Vec<(String, Vec<u8>)>) -> Result<Vec<String>> {
        if self.inner.framework.is_closed() {
            return Err(FrameworkError::Closed.into());
        }
        let deadline = Deadline::within(self.put_timeout);
        let span = info_span!("queue_put", path = %self.inner.path, nodes = nodes.len());
        async {
            let mut names = Vec::with_capacity(nodes.len());
            for chunk in chunks(&nodes, self.inner.max_node_bytes) {
                self.wait_for_room(deadline).await?;
                names.extend(self.create_chunk(chunk, deadline).await?);
            }
            debug!(first = ?names.first(), count = names.len(), "put");
            self.inner.metrics.puts.increment(names.len() as u64);
            Ok(names)
        }
        .instrument(span)
        .await
    }

    async fn create_chunk(&self, chunk: &[(String, Vec<u8>)], deadline: Deadline) -> Result<Vec<String>> {
        let inner = &*self.inner;
        let names = inner
            .framework
            .retry(deadline, |session| async move {
                inner.ensure_created(&session).await?;
                match create_nodes(&session, &inner.path, chunk).await {
                    Err(err) if err.is_no_node() => {
                        inner.forget_created();
                        inner.ensure_created(&session).await?;
                        create_nodes(&session, &inner.path, chunk).await
                    }
                    other => other,
                }
            })
            .await?;
        Ok(names)
    }

    /// Waits while a bounded queue is full (Curator's `blockIfMaxed`), on a children watch.
    async fn wait_for_room(&self, deadline: Deadline) -> Result<()> {
        let Some(max_items) = self.inner.max_items else { return Ok(()) };
        let inner = &*self.inner;
        let mut events = inner.framework.connection_events();
        loop {
            let (count, watcher) = inner
                .framework
                .retry(deadline, |session| async move {
                    inner.ensure_created(&session).await?;
                    // Cheap look first; watch only when full.
                    let stat = session.client().check_stat(&inner.path).await?;
                    if stat.is_some_and(|stat| (stat.num_children as usize) < max_items) {
                        return Ok((0, None));
                    }
                    let (children, watcher) = session.client().list_and_watch_children(&inner.path).await?;
                    Ok((children.len(), Some(watcher)))
                })
                .await?;
            match watcher {
                Some(watcher) if count >= max_items => {
                    debug!(count, max_items, "bounded queue full: waiting");
                    wait_for_change(watcher, &mut events, deadline).await?;
                }
                _ => return Ok(()),
            }
        }
    }
}

/// Splits nodes into multis of at most `max_bytes` of data and [`MAX_NODES_PER_MULTI`] nodes.
fn chunks(nodes: &[(String, Vec<u8>)], max_bytes: usize) -> Vec<&[(String, Vec<u8>)]> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (index, (name, data)) in nodes.iter().enumerate() {
        let size = data.len() + name.len() + 64;
        if index > start && (bytes + size > max_bytes || index - start >= MAX_NODES_PER_MULTI) {
            chunks.push(&nodes[start..index]);
            (start, bytes) = (index, 0);
        }
        bytes += size;
    }
    if start < nodes.len() {
        chunks.push(&nodes[start..]);
    }
    chunks
}

/// Creates the nodes `<dir>/<name><seq>` (PERSISTENT_SEQUENTIAL): one create, or one multi.
async fn create_nodes(
    session: &Session,
    dir: &str,
    nodes: &[(String, Vec<u8>)],
) -> Result<Vec<String>, FrameworkError> {
    if let [(name, data)] = nodes {
        let node = path::join(dir, name);
        let options = session.create_options_for(&node, CreateMode::PersistentSequential);
        let (_, sequence) = session.client().create(&node, data, &options).await?;
        return Ok(vec![format!("{name}{sequence}")]);
    }
    let mut multi = session.client().new_multi_writer();
    for (name, data) in nodes {
        let node = path::join(dir, name);
        multi.add_create(
            &node,
            data,
            &session.create_options_for(&node, CreateMode::PersistentSequential),
        )?;
    }
    let results = multi.commit().await.map_err(zookeeper_client::Error::from)?;
    Ok(results
        .into_iter()
        .filter_map(|result| match result {
            MultiWriteResult::Create { path: created, .. } => Some(path::name(&created).to_owned()),
            _ => None,
        })
        .collect())
}

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
    queue: DistributedQueue<T>,
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
    queue: DistributedQueue<T>,
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
    queue: DistributedQueue<T>,
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
    /// lost. With a lock path, a call cancelled while it holds an item's lock leaves that lock node
    /// in place until the session ends: the item is held back from consumers meanwhile.
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
