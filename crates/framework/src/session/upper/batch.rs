//! A session's batcher, as the session keeps it: its counts and its queue. How it decides and
//! sends is the nodes floor's (`nodes/batch.rs`).

use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};
use zookeeper_client::{CreateMode, Stat};

use super::cleanup::CleanupSender;

/// What the server answered to a create: its stat and sequence (`-1` when not sequential).
pub(crate) type CreateAnswer = Result<(Stat, i64), zookeeper_client::Error>;
/// The listing sent behind a create, when asked for.
pub(crate) type ListingAnswer = Option<Result<Vec<String>, zookeeper_client::Error>>;

/// A session's batcher: see the batcher's documentation (`nodes/batch.rs`).
#[derive(Debug)]
pub(crate) struct Batcher {
    pub(crate) enabled: bool,
    pub(crate) state: Mutex<State>,
    pub(crate) slot_freed: Notify,
    /// Where a node made for a caller that is gone goes, to be deleted.
    pub(crate) cleanup: CleanupSender,
    /// The framework's runtime, which runs the batches (`None` outside a runtime: then every
    /// request goes on its own).
    pub(crate) runtime: Option<tokio::runtime::Handle>,
}

/// What a batcher counts, and its queue.
#[derive(Debug)]
pub(crate) struct State {
    /// Creates and deletes sent and not yet answered (each batch counts as one).
    pub(crate) in_flight: usize,
    /// The creates and deletes in flight, each batch's counted one by one.
    pub(crate) operations_in_flight: usize,
    /// How many may be in flight before the next ones wait for a batch.
    pub(crate) direct_limit: usize,
    pub(crate) queued: Vec<Queued>,
    /// A batch task is waiting to take the queue.
    pub(crate) batch_waiting: bool,
}

/// A create waiting for a batch.
#[derive(Debug)]
pub(crate) struct QueuedCreate {
    pub(crate) path: String,
    pub(crate) data: Vec<u8>,
    pub(crate) mode: CreateMode,
    pub(crate) ttl: Option<Duration>,
    /// The parent to list right behind the create.
    pub(crate) list: Option<String>,
}

/// A create or delete waiting for a batch.
#[derive(Debug)]
pub(crate) enum Queued {
    /// A create, the size of its ACL on the wire, and where to answer.
    Create(QueuedCreate, usize, oneshot::Sender<(CreateAnswer, ListingAnswer)>),
    Delete(String, oneshot::Sender<Result<(), zookeeper_client::Error>>),
}
