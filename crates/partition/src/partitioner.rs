//! [`Partitioner`]: the handle on a running partitioner.

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex as SyncMutex;
use tokio::sync::oneshot;
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument;
use zk_recipes_framework::Deadline;

use crate::config::{Config, PartitionLayout};
use crate::driver::Driver;
use crate::error::{PartitionError, Result};
use crate::shared::{OwnedItem, PartitionEvents, Shared, Work};

/// A worker sharing a set of items with the other workers of its party: each item is owned by
/// exactly one worker at a time, through a lock on that item (see the crate docs).
///
/// Closing releases everything and leaves the party ([`close`](Self::close)); dropping does the
/// same in the background.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_partition::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_partition::Partitioner;
///
/// let items: Vec<String> = (0..64).map(|shard| format!("shard-{shard:02}")).collect();
/// let partitioner = Partitioner::builder(&framework, "/app/shards", items).identifier("worker-1").start()?;
/// partitioner.run(|item, fencing_token| async move {
///     println!("working on {item} with token {fencing_token}");
///     std::future::pending::<()>().await; // dropped when the item moves
/// })?;
/// tokio::time::sleep(Duration::from_secs(60)).await;
/// partitioner.close(Duration::from_secs(10)).await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a partitioner releases its items and leaves the party"]
pub struct Partitioner {
    config: Arc<Config>,
    shared: Arc<Shared>,
    stop: Option<DropGuard>,
    done: SyncMutex<Option<oneshot::Receiver<()>>>,
}

impl Partitioner {
    pub(crate) fn spawn(config: Arc<Config>) -> Self {
        let shared = Arc::new(Shared::new());
        let stop = CancellationToken::new();
        let (done_tx, done) = oneshot::channel();
        let span = tracing::info_span!("partitioner", path = %config.path, identifier = %config.identifier);
        let driver = Driver::new(config.clone(), shared.clone(), stop.clone());
        tokio::spawn(
            async move {
                driver.run().await;
                let _ = done_tx.send(());
            }
            .instrument(span),
        );
        Self { config, shared, stop: Some(stop.drop_guard()), done: SyncMutex::new(Some(done)) }
    }

    /// The partitioner's path.
    pub fn path(&self) -> &str {
        &self.config.path
    }

    /// This worker's identifier.
    pub fn identifier(&self) -> &str {
        &self.config.identifier
    }

    /// The layout.
    pub fn layout(&self) -> PartitionLayout {
        self.config.layout
    }

    /// The items, as given.
    pub fn items(&self) -> &[String] {
        &self.config.items
    }

    /// The items this worker owns now, by name.
    pub fn owned(&self) -> Vec<OwnedItem> {
        self.shared.owned.lock().values().cloned().collect()
    }

    /// The changes from now on: what this worker acquires, releases and loses. Subscribe before
    /// reading [`owned`](Self::owned) to miss nothing in between.
    pub fn events(&self) -> PartitionEvents {
        self.shared.subscribe()
    }

    /// Runs `work(item, fencing_token)` in a task of its own for every item this worker owns,
    /// now and from now on. When the item moves or its lock is lost the task is cancelled (its
    /// future dropped at its next await), and only once it has finished is the lock released: two
    /// workers never run one item's work at once. A task that returns is not started again until
    /// the item is acquired again.
    ///
    /// # Errors
    /// [`PartitionError::AlreadyRunning`] on a second call.
    pub fn run<F, Fut>(&self, work: F) -> Result<()>
    where
        F: Fn(String, i64) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let work: Work = Arc::new(move |item, token| Box::pin(work(item, token)));
        let mut installed = false;
        self.shared.work.send_if_modified(|current| {
            if current.is_none() {
                *current = Some(work.clone());
                installed = true;
            }
            installed
        });
        if installed {
            Ok(())
        } else {
            Err(PartitionError::AlreadyRunning)
        }
    }

    /// Releases every item (each item's work stopped first, then its lock released, reported as
    /// [`PartitionEvent::Released`](crate::PartitionEvent::Released)), leaves the party, and ends the events. Waits at most
    /// `timeout`.
    ///
    /// # Errors
    /// A framework timeout error if it took longer than `timeout`: the rest goes on in the
    /// background (locks not yet released are deleted by the framework's cleanup worker).
    ///
    /// # Cancel safety
    /// Cancel safe: the close goes on in the background either way; a cancelled call only misses
    /// the outcome.
    pub async fn close(mut self, timeout: Duration) -> Result<()> {
        let deadline = Deadline::after(timeout);
        drop(self.stop.take());
        let done = self.done.lock().take();
        let Some(done) = done else { return Ok(()) };
        match tokio::time::timeout(timeout, done).await {
            Ok(_) => Ok(()),
            Err(_) => Err(deadline.timeout_error().into()),
        }
    }
}

impl fmt::Debug for Partitioner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Partitioner")
            .field("path", &self.config.path)
            .field("identifier", &self.config.identifier)
            .field("layout", &self.config.layout)
            .field("owned", &self.shared.owned.lock().len())
            .finish_non_exhaustive()
    }
}
