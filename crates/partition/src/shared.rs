//! What a partitioner reports ([`PartitionEvent`], [`OwnedItem`]) and the state its handle and
//! its driver share.

use std::collections::BTreeMap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use parking_lot::Mutex as SyncMutex;
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

/// The per-item work [`Partitioner::run`](crate::Partitioner::run) runs.
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

/// A change in what this worker owns ([`Partitioner::events`](crate::Partitioner::events)).
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

/// A subscription to a partitioner's events ([`Partitioner::events`](crate::Partitioner::events)). It ends (`None`) once the
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
    /// Nothing owned, no subscriber, no work yet.
    pub(crate) fn new() -> Self {
        Shared {
            owned: SyncMutex::new(BTreeMap::new()),
            subscribers: SyncMutex::new(Some(Vec::new())),
            work: watch::channel(None).0,
        }
    }

    pub(crate) fn emit(&self, event: PartitionEvent) {
        if let Some(subscribers) = self.subscribers.lock().as_mut() {
            subscribers.retain(|subscriber| subscriber.send(event.clone()).is_ok());
        }
    }

    /// A new subscription: the events from now on (none once the partitioner has finished).
    pub(crate) fn subscribe(&self) -> PartitionEvents {
        let (sender, events) = mpsc::unbounded_channel();
        if let Some(subscribers) = self.subscribers.lock().as_mut() {
            subscribers.push(sender);
        }
        PartitionEvents { events }
    }

    /// Ends every subscription: no more events.
    pub(crate) fn finish(&self) {
        self.subscribers.lock().take();
    }
}
