//! [`Partitioner`], what it reports ([`PartitionEvent`], [`OwnedItem`]) and its shared state.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex as SyncMutex;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::{CancellationToken, DropGuard};
use tracing::Instrument;
use zk_recipes_framework::{Deadline, Framework};

use crate::builder::{Config, PartitionLayout, PartitionerBuilder};
use crate::driver::Driver;
use crate::error::{PartitionError, Result};

/// The per-item work [`Partitioner::run`] runs.
pub(crate) type Work = Arc<dyn Fn(String, i64) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync>;

/// An item this worker owns: its name, its lock's fencing token, and a signal that ends the
/// ownership. Cheap to clone; holding it does not keep the item.
///
/// ```no_run
/// # async fn demo(partitioner: zk_recipes_partition::Partitioner) {
/// for owned in partitioner.owned() {
///     println!("{} is ours, fencing token {}", owned.item(), owned.fencing_token());
///     tokio::spawn(async move {
///         tokio::select! {
///             () = owned.ended() => println!("{} moved or was lost: stop", owned.item()),
///             () = std::future::pending::<()>() => {}
///         }
///     });
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct OwnedItem {
    item: String,
    fencing_token: i64,
    ended: CancellationToken,
}

impl OwnedItem {
    pub(crate) fn new(item: String, fencing_token: i64) -> Self {
        Self { item, fencing_token, ended: CancellationToken::new() }
    }

    /// The item.
    pub fn item(&self) -> &str {
        &self.item
    }

    /// The item lock's fencing token: grows strictly from one owner of the item to the next (the
    /// lock node's `czxid`). Hand it to the store the item's work writes to.
    pub fn fencing_token(&self) -> i64 {
        self.fencing_token
    }

    /// Resolves when this ownership ends: the item is being released (it moves, or the
    /// partitioner closes) or its lock was lost (the connection is in an error state, the session
    /// ended, the lock node was deleted). From then on another worker may own it: stop working on
    /// it. Resolves at once if it has ended already.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn ended(&self) {
        self.ended.cancelled().await;
    }

    /// Whether this ownership has ended (see [`ended`](Self::ended)).
    pub fn has_ended(&self) -> bool {
        self.ended.is_cancelled()
    }

    pub(crate) fn end(&self) {
        self.ended.cancel();
    }
}

impl fmt::Debug for OwnedItem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedItem")
            .field("item", &self.item)
            .field("fencing_token", &self.fencing_token)
            .field("ended", &self.has_ended())
            .finish()
    }
}

/// A change in what this worker owns ([`Partitioner::events`]).
///
/// ```no_run
/// # async fn demo(partitioner: zk_recipes_partition::Partitioner) {
/// use zk_recipes_partition::PartitionEvent;
///
/// let mut events = partitioner.events();
/// while let Some(event) = events.next().await {
///     match event {
///         PartitionEvent::Acquired(items) => {
///             for owned in items {
///                 println!("+ {} (token {})", owned.item(), owned.fencing_token());
///             }
///         }
///         PartitionEvent::Released(items) => println!("- {items:?}: moved to other workers"),
///         PartitionEvent::Lost(items) => println!("! {items:?}: lost; another worker may own them"),
///         _ => {}
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum PartitionEvent {
    /// These items' locks are ours now.
    Acquired(Vec<OwnedItem>),
    /// We gave these items up (they moved, or the partitioner closed): their work was stopped
    /// first, then their locks released.
    Released(Vec<String>),
    /// These items' locks were lost (connection error state, session ended, node deleted): their
    /// work was stopped, and another worker may own them already.
    Lost(Vec<String>),
}

/// A subscription to a partitioner's events ([`Partitioner::events`]). It ends (`None`) once the
/// partitioner has closed and reported its last releases.
///
/// ```no_run
/// # async fn demo(partitioner: zk_recipes_partition::Partitioner) {
/// let mut events = partitioner.events();
/// if let Some(event) = events.next().await {
///     println!("{event:?}");
/// }
/// # }
/// ```
#[must_use = "events queue up until read; drop the subscription when done"]
#[derive(Debug)]
pub struct PartitionEvents {
    events: mpsc::UnboundedReceiver<PartitionEvent>,
}

impl PartitionEvents {
    /// The next event; `None` once the partitioner has closed.
    ///
    /// # Cancel safety
    /// Cancel safe: an event is taken only when returned.
    pub async fn next(&mut self) -> Option<PartitionEvent> {
        self.events.recv().await
    }

    /// An event already waiting, if any.
    pub fn try_next(&mut self) -> Option<PartitionEvent> {
        self.events.try_recv().ok()
    }
}

/// What the handle and the driver share.
pub(crate) struct Shared {
    pub(crate) owned: SyncMutex<BTreeMap<String, OwnedItem>>,
    subscribers: SyncMutex<Option<Vec<mpsc::UnboundedSender<PartitionEvent>>>>,
    pub(crate) work: watch::Sender<Option<Work>>,
}

impl Shared {
    pub(crate) fn emit(&self, event: PartitionEvent) {
        if let Some(subscribers) = self.subscribers.lock().as_mut() {
            subscribers.retain(|subscriber| subscriber.send(event.clone()).is_ok());
        }
    }

    /// Ends every subscription: no more events.
    pub(crate) fn finish(&self) {
        self.subscribers.lock().take();
    }
}

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
    /// Starts building a partitioner of `items` at `path`.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_partition::Result<()> {
    /// let partitioner = zk_recipes_partition::Partitioner::builder(&framework, "/app/queues", ["q1", "q2", "q3"])
    ///     .start()?;
    /// # drop(partitioner); Ok(()) }
    /// ```
    pub fn builder<I, S>(framework: &Framework, path: &str, items: I) -> PartitionerBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PartitionerBuilder::new(framework, path, items.into_iter().map(Into::into).collect())
    }

    pub(crate) fn spawn(config: Arc<Config>) -> Self {
        let (work, _) = watch::channel(None);
        let shared = Arc::new(Shared {
            owned: SyncMutex::new(BTreeMap::new()),
            subscribers: SyncMutex::new(Some(Vec::new())),
            work,
        });
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
        let (sender, events) = mpsc::unbounded_channel();
        if let Some(subscribers) = self.shared.subscribers.lock().as_mut() {
            subscribers.push(sender);
        }
        PartitionEvents { events }
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
    /// [`PartitionEvent::Released`]), leaves the party, and ends the events. Waits at most
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
