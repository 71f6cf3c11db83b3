//! [`Inner`]: what every handle, consumer and delivery of one queue shares, and the paths and
//! directories it knows about.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::{path, Error as FrameworkError, Framework, Session};

use crate::acks::AckBatcher;
use crate::background::{Background, Job};
use crate::error::Result;
use crate::framing::QueueSerializer;
use crate::names::{Kind, ITEM_PREFIX};
use crate::nodes::create_persistent;
use crate::options::ErrorMode;

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
    pub(crate) created: AtomicBool,
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
