//! A session's creates and deletes sent together when it has many at once.
//!
//! A ZooKeeper server spends most of a small write on the request itself, not on the node: one
//! multi of a thousand creates costs it far less than a thousand creates. So while a session has
//! its direct limit of creates or deletes of ours unanswered, the next ones wait, and go to the
//! server together as one multi as soon as one of those is answered. The nodes are the same ones,
//! with the same names, modes and data, so nothing on the wire changes for other clients but the
//! grouping.
//!
//! A batch pays only when many wait: a batched create costs two round trips (the multi, then the
//! read of its stat, see below) where a create alone costs one, and the requests behind the limit
//! wait for a slot. So the direct limit follows how many wait when a batch is taken (queued, and in
//! flight on their own or in batches): it starts at [`DIRECT_LIMIT`] (two), grows by one with each
//! batch taken while fewer than [`BUSY`] wait, up to [`MAX_DIRECT_LIMIT`], and falls back to two
//! with each batch taken while [`BUSY`] or more wait. A session with a few requests at once soon
//! sends each on its own, as without batching; one with many keeps two units in flight and batches
//! the rest (the locks bench's distinct locks on one session, all batched behind two: 10 ran at
//! 0.79 of the raw floor, 100 and more at 3.8 to 7 times it). Not the batch's own size: a busy
//! session whose slots free often takes small batches too, and a limit that grew on them would
//! send ever more on their own, each a request of the server's, and crowd the batches out.
//!
//! A request alone goes on its own at once, exactly as before: the batcher only changes what a
//! busy session sends. At most one create per parent goes in a multi (its nodes would share a
//! `czxid`, the fencing token of a hold): a batch is sent as layers, one multi each, back to back.
//! What a multi cannot settle falls back to requests of their own:
//! - a multi fails as a whole if one of its operations fails (a reaped parent, a node already
//!   gone), so then every operation of the batch is sent again on its own, and each caller gets its
//!   own answer;
//! - a create in a multi is answered without its `Stat` by servers before 3.7.2 / 3.8.2
//!   (ZOOKEEPER-4026), so the stat is read in one multi-read behind the batch, with the listings
//!   the creates asked for (and with `exists` where the multi-read cannot give it);
//! - a create whose node is made but whose stat or sequence is not known is answered with a
//!   connection loss, so its caller finds the node by its marker: never an answer that would have
//!   it forget a node it made;
//! - a multi that failed as a whole without an answer is answered to each create as a connection
//!   loss (its node may be there), but as the session's loss when the session is gone: a create
//!   on an expired session gets what it would have got alone, and starts over on the next session;
//! - a caller gone before its batch is sent is left out; a node made for one gone meanwhile goes
//!   to the cleanup worker.
//!
//! Every batch runs on the session it was queued on, and only there: a caller that must stay on
//! its node's session (a release) gets that session's answer, or its loss.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};
use tracing::trace;
use zookeeper_client::{CreateMode, Stat};

use super::cleanup::{CleanupSender, CleanupTask};
use super::layers::batch_layers;
use crate::session::Session;

/// How many creates and deletes (each batch counts as one) a busy session sends on their own
/// before the next ones wait for a batch: the direct limit at first, and once the session is busy.
/// Two keep one request in flight while the answer to another is being read.
const DIRECT_LIMIT: usize = 2;
/// The most the direct limit grows to while the session is not busy.
const MAX_DIRECT_LIMIT: usize = 16;
/// A batch taken while this many creates and deletes or more wait (queued, or in flight on their
/// own or in batches) sets the direct limit back to [`DIRECT_LIMIT`]; one taken while fewer wait
/// raises it by one.
const BUSY: usize = 16;
/// At most this many operations in one multi.
const MAX_OPERATIONS: usize = 1000;
/// At most about this many bytes of paths and data in one multi (the server refuses a request
/// over `jute.maxbuffer`, 1 MiB by default).
const MAX_BATCH_BYTES: usize = 256 * 1024;
/// A create with more data than this is never queued: it goes on its own.
pub(crate) const MAX_QUEUED_DATA: usize = 16 * 1024;
/// How long a batch waits for a request in flight to be answered before it goes anyway: a
/// caller that stops polling its request (without dropping it) delays the next batches by this
/// much, not for ever. On a link slower than this, batches go about this often.
const SLOT_WAIT: Duration = Duration::from_millis(10);

/// What the server answered to a create: its stat and sequence (`-1` when not sequential).
pub(crate) type CreateAnswer = Result<(Stat, i64), zookeeper_client::Error>;
/// The listing sent behind a create, when asked for.
pub(crate) type ListingAnswer = Option<Result<Vec<String>, zookeeper_client::Error>>;

/// A session's batcher: see the module's documentation.
#[derive(Debug)]
pub(crate) struct Batcher {
    enabled: bool,
    pub(super) state: Mutex<State>,
    slot_freed: Notify,
    /// Where a node made for a caller that is gone goes, to be deleted.
    pub(super) cleanup: CleanupSender,
    /// The framework's runtime, which runs the batches (`None` outside a runtime: then every
    /// request goes on its own).
    pub(super) runtime: Option<tokio::runtime::Handle>,
}

#[derive(Debug)]
pub(super) struct State {
    /// Creates and deletes sent and not yet answered (each batch counts as one).
    in_flight: usize,
    /// The creates and deletes in flight, each batch's counted one by one.
    operations_in_flight: usize,
    /// How many may be in flight before the next ones wait for a batch.
    direct_limit: usize,
    pub(super) queued: Vec<Queued>,
    /// A batch task is waiting to take the queue.
    pub(super) batch_waiting: bool,
}

impl Default for State {
    fn default() -> Self {
        State {
            in_flight: 0,
            operations_in_flight: 0,
            direct_limit: DIRECT_LIMIT,
            queued: Vec::new(),
            batch_waiting: false,
        }
    }
}

impl State {
    /// Whether a new create or delete goes on its own now: nothing is queued ahead of it and a
    /// slot is free.
    fn goes_direct(&self) -> bool {
        self.queued.is_empty() && self.has_free_slot()
    }

    fn has_free_slot(&self) -> bool {
        self.in_flight < self.direct_limit
    }

    /// Follows how many creates and deletes wait as a batch is taken off the queue (the queued
    /// ones, and those in flight): many mean the session is busy (back to two in flight, the rest
    /// batched), few that batching costs more than it saves (one more may go on its own).
    fn batch_taken(&mut self) {
        let waiting = self.queued.len() + self.operations_in_flight;
        self.direct_limit = match waiting >= BUSY {
            true => DIRECT_LIMIT,
            false => (self.direct_limit + 1).min(MAX_DIRECT_LIMIT),
        };
    }
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

#[derive(Debug)]
pub(super) enum Queued {
    /// A create, the size of its ACL on the wire, and where to answer.
    Create(QueuedCreate, usize, oneshot::Sender<(CreateAnswer, ListingAnswer)>),
    Delete(String, oneshot::Sender<Result<(), zookeeper_client::Error>>),
}

impl Queued {
    fn is_cancelled(&self) -> bool {
        match self {
            Queued::Create(_, _, reply) => reply.is_closed(),
            Queued::Delete(_, reply) => reply.is_closed(),
        }
    }

    /// About what it adds to a multi's request.
    fn size(&self) -> usize {
        const OVERHEAD: usize = 32;
        match self {
            Queued::Create(create, acl, _) => OVERHEAD + create.path.len() + create.data.len() + acl,
            Queued::Delete(path, _) => OVERHEAD + path.len(),
        }
    }

    /// Answers with `err`. A create whose caller is gone may have made its node (the outcome of a
    /// lost reply is unknown): whatever carries its name goes to the cleanup worker.
    pub(super) fn fail(self, err: zookeeper_client::Error, batcher: &Batcher) {
        match self {
            Queued::Create(create, _, reply) => {
                if reply.send((Err(err), None)).is_err() {
                    batcher.clean_up_unknown(&create);
                }
            }
            Queued::Delete(_, reply) => drop(reply.send(Err(err))),
        }
    }
}

/// Whether the server appends a sequence to a node created in `mode`.
pub(crate) fn is_sequential(mode: CreateMode) -> bool {
    matches!(mode, CreateMode::EphemeralSequential | CreateMode::PersistentSequential)
}

/// A place among the requests a session has in flight, given back when dropped.
pub(crate) struct Slot<'a> {
    batcher: &'a Batcher,
    /// The creates and deletes sent in it: one, or a batch's.
    operations: usize,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let waiting = {
            let mut state = self.batcher.state.lock();
            state.in_flight -= 1;
            state.operations_in_flight -= self.operations;
            state.batch_waiting
        };
        if waiting {
            self.batcher.slot_freed.notify_one();
        }
    }
}

/// Whether a request goes now, on its own, or waits for a batch.
pub(crate) enum Turn<'a, T> {
    /// Send it now; keep the slot until it is answered (`None` when batching is off).
    Now(Option<Slot<'a>>),
    /// It is queued: the batch answers here (a closed channel means the batch never ran).
    Queued(oneshot::Receiver<T>),
}

impl Batcher {
    /// A session's batcher (off unless `enabled`); must be made within the framework's runtime.
    pub(crate) fn new(enabled: bool, cleanup: CleanupSender) -> Self {
        let runtime = tokio::runtime::Handle::try_current().ok();
        let state = Mutex::new(State::default());
        Self { enabled, state, slot_freed: Notify::new(), cleanup, runtime }
    }

    /// The turn of a create on `session`.
    pub(crate) fn create_turn<'a>(
        &'a self,
        session: &Session,
        create: impl FnOnce() -> QueuedCreate,
    ) -> Turn<'a, (CreateAnswer, ListingAnswer)> {
        self.turn(session, |reply| {
            let create = create();
            let acl = session.acl_for_path(&create.path);
            let acl_size = acl.iter().map(|acl| 12 + acl.scheme().len() + acl.id().len()).sum();
            Queued::Create(create, acl_size, reply)
        })
    }

    /// The turn of a delete of `path` on `session`.
    pub(crate) fn delete_turn<'a>(
        &'a self,
        session: &Session,
        path: &str,
    ) -> Turn<'a, Result<(), zookeeper_client::Error>> {
        self.turn(session, |reply| Queued::Delete(path.to_owned(), reply))
    }

    fn turn<'a, T>(
        &'a self,
        session: &Session,
        queued: impl FnOnce(oneshot::Sender<T>) -> Queued,
    ) -> Turn<'a, T> {
        let Some(runtime) = self.runtime.as_ref().filter(|_| self.enabled) else {
            return Turn::Now(None);
        };
        {
            let mut state = self.state.lock();
            if state.goes_direct() {
                state.in_flight += 1;
                state.operations_in_flight += 1;
                return Turn::Now(Some(Slot { batcher: self, operations: 1 }));
            }
        }
        // Made outside the lock (it copies the data and asks the ACL provider). Meanwhile a slot
        // may have come free: the batch then takes it at once.
        let (reply, answer) = oneshot::channel();
        let queued = queued(reply);
        {
            let mut state = self.state.lock();
            state.queued.push(queued);
            if std::mem::replace(&mut state.batch_waiting, true) {
                return Turn::Queued(answer);
            }
        }
        Batcher::spawn_batch(runtime, session);
        Turn::Queued(answer)
    }

    /// A slot for the next batch: the first one free, or one more after [`SLOT_WAIT`].
    pub(super) async fn slot_for_batch(&self) -> Slot<'_> {
        let give_up_at = tokio::time::Instant::now() + SLOT_WAIT;
        loop {
            let freed = self.slot_freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut state = self.state.lock();
                if state.has_free_slot() {
                    state.in_flight += 1;
                    return Slot { batcher: self, operations: 0 };
                }
            }
            if tokio::time::timeout_at(give_up_at, freed).await.is_err() {
                self.state.lock().in_flight += 1;
                return Slot { batcher: self, operations: 0 };
            }
        }
    }

    /// Takes the next batch off the queue (leaving out what its callers gave up), in layers, and
    /// starts the batch after it if more is queued.
    ///
    /// A layer goes as one multi, and a multi is one transaction with one zxid: the nodes it
    /// creates share their `czxid`, which is a hold's fencing token. So a layer holds at most one
    /// create per parent (two waiters of one lock in one multi would become two holders with one
    /// token): the first create of each parent goes in layer 0 (with every delete), the second in
    /// layer 1, and so on. The layers are sent back to back, so the batch still costs one round
    /// trip; each is a transaction of its own, so in whatever order the server runs them, one
    /// lock's nodes get sequences and `czxid`s that grow together.
    /// The batch's operations are counted in `slot`.
    pub(super) fn take_batch(&self, session: &Session, slot: &mut Slot<'_>) -> Vec<Vec<Queued>> {
        let (layers, more) = {
            let mut state = self.state.lock();
            state.queued.retain(|queued| !queued.is_cancelled());
            if !state.queued.is_empty() {
                state.batch_taken();
                trace!(
                    waiting = state.queued.len() + state.operations_in_flight,
                    direct_limit = state.direct_limit,
                    "taking a batch"
                );
            }
            let layer_of = batch_layers(
                state.queued.iter().map(|queued| match queued {
                    Queued::Create(create, ..) => (Some(crate::path::split(&create.path).0), queued.size()),
                    Queued::Delete(..) => (None, queued.size()),
                }),
                MAX_OPERATIONS,
                MAX_BATCH_BYTES,
            );
            let layer_count = layer_of.iter().flatten().max().map_or(0, |last| last + 1);
            let taken = layer_of.iter().flatten().count();
            state.operations_in_flight += taken;
            slot.operations = taken;
            let mut layers: Vec<Vec<Queued>> = (0..layer_count).map(|_| Vec::new()).collect();
            let mut rest = Vec::new();
            for (queued, layer) in std::mem::take(&mut state.queued).into_iter().zip(layer_of) {
                match layer {
                    Some(layer) => layers[layer].push(queued),
                    None => rest.push(queued),
                }
            }
            state.queued = rest;
            let more = !state.queued.is_empty();
            state.batch_waiting = more;
            (layers, more)
        };
        if let (true, Some(runtime)) = (more, &self.runtime) {
            Batcher::spawn_batch(runtime, session);
        }
        layers
    }

    /// Hands a node made for a caller that is gone to the cleanup worker.
    pub(super) fn clean_up(&self, path: String) {
        self.cleanup.submit(CleanupTask::Node { path, czxid: None });
    }

    /// Hands whatever a create of a caller that is gone may have made to the cleanup worker: the
    /// children of its parent whose names start with its own (its marker makes it unique).
    pub(super) fn clean_up_unknown(&self, create: &QueuedCreate) {
        let (parent, prefix) = crate::path::split(&create.path);
        self.cleanup.submit(CleanupTask::Protected { parent: parent.to_owned(), prefix: prefix.to_owned() });
    }
}

/// `session`'s batcher.
pub(super) fn batcher_of(session: &Session) -> &Batcher {
    session.upper::<Batcher>()
}

/// Deletes `path` on `session` (with any version): at once, or in the session's next batch.
pub(crate) async fn delete(session: &Session, path: &str) -> Result<(), zookeeper_client::Error> {
    match batcher_of(session).delete_turn(session, path) {
        Turn::Now(_slot) => session.client().delete(path, None).await,
        Turn::Queued(answer) => answer.await.unwrap_or(Err(zookeeper_client::Error::ConnectionLoss)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn state(in_flight: usize, direct_limit: usize) -> State {
        State { in_flight, direct_limit, ..State::default() }
    }

    #[test]
    fn a_request_goes_on_its_own_while_a_slot_is_free_and_nothing_is_queued() {
        assert!(State::default().goes_direct());
        assert!(state(DIRECT_LIMIT - 1, DIRECT_LIMIT).goes_direct());
        assert!(!state(DIRECT_LIMIT, DIRECT_LIMIT).goes_direct(), "every slot taken");
        assert!(state(10, 11).goes_direct(), "a raised limit lets more go on their own");
        let (reply, _answer) = oneshot::channel();
        let mut queued_ahead = state(0, DIRECT_LIMIT);
        queued_ahead.queued.push(Queued::Delete("/a".to_owned(), reply));
        assert!(!queued_ahead.goes_direct(), "nothing overtakes a queued request");
    }

    /// A state with `waiting` creates queued and `in_flight` of them in flight on their own.
    fn waiting(in_flight: usize, queued: usize, direct_limit: usize) -> State {
        let mut state = state(in_flight, direct_limit);
        state.operations_in_flight = in_flight;
        for _ in 0..queued {
            state.queued.push(Queued::Delete("/a".to_owned(), oneshot::channel().0));
        }
        state
    }

    #[test]
    fn batches_taken_while_few_wait_raise_the_direct_limit_one_by_one_up_to_its_most() {
        let mut state = waiting(1, BUSY - 2, DIRECT_LIMIT);
        for expected in DIRECT_LIMIT + 1..=MAX_DIRECT_LIMIT {
            state.batch_taken();
            assert_eq!(state.direct_limit, expected);
        }
        state.batch_taken();
        assert_eq!(state.direct_limit, MAX_DIRECT_LIMIT, "no higher than its most");
    }

    #[test]
    fn a_batch_taken_while_many_wait_sets_the_direct_limit_back_to_two() {
        // However small the batch itself: many in flight count.
        let mut state = waiting(BUSY - 1, 1, MAX_DIRECT_LIMIT);
        state.batch_taken();
        assert_eq!(state.direct_limit, DIRECT_LIMIT);
        let mut state = waiting(0, 1000, MAX_DIRECT_LIMIT);
        state.batch_taken();
        assert_eq!(state.direct_limit, DIRECT_LIMIT);
    }
}
