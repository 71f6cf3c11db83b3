//! [`QueueBuilder`]: the settings of a queue of the family, checked and turned into a queue; and
//! [`DistributedQueue::builder`], where it starts.

use std::fmt;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::{local_address, path, Error as FrameworkError, Framework};

use super::distributed::DistributedQueue;
use super::kinds::{DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue};
use crate::acks::AckBatcher;
use crate::background::Background;
use crate::error::{QueueError, Result};
use crate::framing::{BytesSerializer, QueueSerializer};
use crate::names::{Kind, SEPARATOR};
use crate::options::{ErrorMode, DEFAULT_MAX_NODE_BYTES};
use crate::shared::Inner;

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
    ///
    /// [`Consumer::run`]: crate::Consumer::run
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
