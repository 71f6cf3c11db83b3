//! A session's creates and deletes sent together when it has many at once.
//!
//! A ZooKeeper server spends most of a small write on the request itself, not on the node: one
//! multi of a thousand creates costs it far less than a thousand creates. So while a session has
//! [`DIRECT_LIMIT`] creates or deletes of ours unanswered, the next ones wait, and go to the server
//! together as one multi as soon as one of those is answered. The nodes are the same ones, with the
//! same names, modes and data, so nothing on the wire changes for other clients but the grouping.
//!
//! A request alone goes on its own at once, exactly as before: the batcher only changes what a
//! busy session sends. What a multi cannot settle falls back to requests of their own:
//! - a multi fails as a whole if one of its operations fails (a reaped parent, a node already
//!   gone), so then every operation of the batch is sent again on its own, and each caller gets its
//!   own answer;
//! - a create in a multi is answered without its `Stat` by servers before 3.7.2 / 3.8.2
//!   (ZOOKEEPER-4026), so the stat is read in one multi-read behind the batch, with the listings
//!   the creates asked for.
//!
//! Every batch runs on the session it was queued on, and only there: a caller that must stay on
//! its node's session (a release) gets that session's answer, or its loss.

use std::collections::HashSet;
use std::time::Duration;

use futures::future::join_all;
use parking_lot::Mutex;
use tokio::sync::{oneshot, Notify};
use tracing::trace;
use zookeeper_client::{CreateMode, MultiReadResult, MultiWriteError, MultiWriteResult, Stat};

use crate::session::Session;

/// How many creates and deletes a session sends on their own before the next ones wait for a
/// batch. Two keep one request in flight while the answer to another is being read.
const DIRECT_LIMIT: usize = 2;
/// At most this many operations in one multi.
const MAX_OPERATIONS: usize = 1000;
/// At most about this many bytes of paths and data in one multi (the server refuses a request
/// over `jute.maxbuffer`, 1 MiB by default).
const MAX_BATCH_BYTES: usize = 256 * 1024;
/// A create with more data than this is never queued: it goes on its own.
pub(crate) const MAX_QUEUED_DATA: usize = 16 * 1024;
/// How long a batch waits for a request in flight to be answered before it goes anyway: a
/// caller that stops polling its request (without dropping it) delays the next batches by this,
/// never for ever.
const SLOT_WAIT: Duration = Duration::from_millis(10);

/// What the server answered to a create: its stat and sequence (`-1` when not sequential).
pub(crate) type CreateAnswer = Result<(Stat, i64), zookeeper_client::Error>;
/// The listing sent behind a create, when asked for.
pub(crate) type ListingAnswer = Option<Result<Vec<String>, zookeeper_client::Error>>;

/// A session's batcher: see the module's documentation.
#[derive(Debug)]
pub(crate) struct Batcher {
    enabled: bool,
    state: Mutex<State>,
    slot_freed: Notify,
}

#[derive(Debug, Default)]
struct State {
    /// Creates and deletes sent and not yet answered (each batch counts as one).
    in_flight: usize,
    queued: Vec<Queued>,
    /// A batch task is waiting to take the queue.
    batch_waiting: bool,
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
enum Queued {
    Create(QueuedCreate, oneshot::Sender<(CreateAnswer, ListingAnswer)>),
    Delete(String, oneshot::Sender<Result<(), zookeeper_client::Error>>),
}

impl Queued {
    fn is_cancelled(&self) -> bool {
        match self {
            Queued::Create(_, reply) => reply.is_closed(),
            Queued::Delete(_, reply) => reply.is_closed(),
        }
    }

    fn size(&self) -> usize {
        const OVERHEAD: usize = 64;
        match self {
            Queued::Create(create, _) => OVERHEAD + create.path.len() + create.data.len(),
            Queued::Delete(path, _) => OVERHEAD + path.len(),
        }
    }

    fn fail(self, err: zookeeper_client::Error) {
        match self {
            Queued::Create(_, reply) => drop(reply.send((Err(err), None))),
            Queued::Delete(_, reply) => drop(reply.send(Err(err))),
        }
    }
}

/// A place among the requests a session has in flight, given back when dropped.
pub(crate) struct Slot<'a>(&'a Batcher);

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        let waiting = {
            let mut state = self.0.state.lock();
            state.in_flight -= 1;
            state.batch_waiting
        };
        if waiting {
            self.0.slot_freed.notify_one();
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
    pub(crate) fn new(enabled: bool) -> Self {
        Self { enabled, state: Mutex::new(State::default()), slot_freed: Notify::new() }
    }

    /// The turn of a create on `session`.
    pub(crate) fn create_turn<'a>(
        &'a self,
        session: &Session,
        create: impl FnOnce() -> QueuedCreate,
    ) -> Turn<'a, (CreateAnswer, ListingAnswer)> {
        self.turn(session, |reply| Queued::Create(create(), reply))
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
        if !self.enabled {
            return Turn::Now(None);
        }
        let mut state = self.state.lock();
        if state.in_flight < DIRECT_LIMIT && state.queued.is_empty() {
            state.in_flight += 1;
            return Turn::Now(Some(Slot(self)));
        }
        // A batch runs on a task of its own: without a runtime, the request goes on its own.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            state.in_flight += 1;
            return Turn::Now(Some(Slot(self)));
        };
        let (reply, answer) = oneshot::channel();
        state.queued.push(queued(reply));
        if !state.batch_waiting {
            state.batch_waiting = true;
            runtime.spawn(run_batch(session.clone()));
        }
        Turn::Queued(answer)
    }

    /// A slot for the next batch: the first one free, or one more after [`SLOT_WAIT`].
    async fn slot_for_batch(&self) -> Slot<'_> {
        let give_up_at = tokio::time::Instant::now() + SLOT_WAIT;
        loop {
            let freed = self.slot_freed.notified();
            tokio::pin!(freed);
            freed.as_mut().enable();
            {
                let mut state = self.state.lock();
                if state.in_flight < DIRECT_LIMIT {
                    state.in_flight += 1;
                    return Slot(self);
                }
            }
            if tokio::time::timeout_at(give_up_at, freed).await.is_err() {
                self.state.lock().in_flight += 1;
                return Slot(self);
            }
        }
    }

    /// Takes the next batch off the queue (dropping what its callers gave up), and starts the
    /// batch after it if more is queued.
    fn take_batch(&self, session: &Session) -> Vec<Queued> {
        let mut state = self.state.lock();
        state.queued.retain(|queued| !queued.is_cancelled());
        let mut bytes = 0;
        let mut taken = 0;
        for queued in &state.queued {
            let size = queued.size();
            if taken > 0 && (taken == MAX_OPERATIONS || bytes + size > MAX_BATCH_BYTES) {
                break;
            }
            taken += 1;
            bytes += size;
        }
        let batch: Vec<Queued> = state.queued.drain(..taken).collect();
        if state.queued.is_empty() {
            state.batch_waiting = false;
        } else {
            tokio::spawn(run_batch(session.clone()));
        }
        batch
    }
}

/// Deletes `path` on `session` (with any version): at once, or in the session's next batch.
pub(crate) async fn delete(session: &Session, path: &str) -> Result<(), zookeeper_client::Error> {
    match session.batcher().delete_turn(session, path) {
        Turn::Now(_slot) => session.client().delete(path, None).await,
        Turn::Queued(answer) => answer.await.unwrap_or(Err(zookeeper_client::Error::ConnectionLoss)),
    }
}

/// One batch: waits for a slot, takes what is queued, sends it, answers each caller.
async fn run_batch(session: Session) {
    let batcher = session.batcher();
    let mut waiting = StillWaiting { batcher, armed: true };
    let _slot = batcher.slot_for_batch().await;
    let batch = batcher.take_batch(&session);
    waiting.armed = false;
    match batch.len() {
        0 => {}
        1 => one_by_one(&session, batch).await,
        operations => {
            trace!(operations, "sending a batch of writes as one multi");
            send_multi(&session, batch).await;
        }
    }
}

/// A batch task dropped before it took the queue (its runtime shut down): the queued calls fail
/// with a connection loss, which their retries handle, and the next call starts a batch again.
struct StillWaiting<'a> {
    batcher: &'a Batcher,
    armed: bool,
}

impl Drop for StillWaiting<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let queued = {
            let mut state = self.batcher.state.lock();
            state.batch_waiting = false;
            std::mem::take(&mut state.queued)
        };
        for queued in queued {
            queued.fail(zookeeper_client::Error::ConnectionLoss);
        }
    }
}

/// The create options of a queued create on `session`.
fn options_of<'a>(session: &'a Session, create: &QueuedCreate) -> zookeeper_client::CreateOptions<'a> {
    let options = session.create_options_for(&create.path, create.mode);
    match create.ttl {
        Some(ttl) => options.with_ttl(ttl),
        None => options,
    }
}

async fn send_multi(session: &Session, batch: Vec<Queued>) {
    let mut writer = session.client().new_multi_writer();
    let mut sent = Vec::with_capacity(batch.len());
    for queued in batch {
        let added = match &queued {
            Queued::Create(create, _) => {
                writer.add_create(&create.path, &create.data, &options_of(session, create))
            }
            Queued::Delete(path, _) => writer.add_delete(path, None),
        };
        match added {
            Ok(()) => sent.push(queued),
            Err(err) => queued.fail(err),
        }
    }
    match writer.commit().await {
        Ok(results) => answer_multi(session, sent, results).await,
        // One operation failed and the others were not applied: each goes again on its own, and
        // gets its own answer.
        Err(MultiWriteError::OperationFailed { index, source }) => {
            trace!(index, %source, "a batched write failed: sending the batch one by one");
            one_by_one(session, sent).await;
        }
        // Nothing is known of the batch: each caller handles the error as its own (a create looks
        // for its node by its marker, a delete tries again on the same session).
        Err(MultiWriteError::RequestFailed { source }) => {
            for queued in sent {
                queued.fail(source.clone());
            }
        }
    }
}

/// What one create of a successful multi still needs: its stat read, its parent listed.
struct CreatedInBatch {
    create: QueuedCreate,
    reply: oneshot::Sender<(CreateAnswer, ListingAnswer)>,
    path: String,
    stat: Stat,
    /// Where its stat is in the multi-read's answers.
    stat_read: Option<usize>,
    /// Where its listing is in the multi-read's answers (the first create of a parent only).
    listing_read: Option<usize>,
}

async fn answer_multi(session: &Session, sent: Vec<Queued>, results: Vec<MultiWriteResult>) {
    let mut reader = session.client().new_multi_reader();
    let mut reads = 0;
    let mut listed: HashSet<String> = HashSet::new();
    let mut created = Vec::new();
    for (queued, result) in sent.into_iter().zip(results) {
        match (queued, result) {
            (Queued::Create(create, reply), MultiWriteResult::Create { path, stat }) => {
                let stat_read = stat.is_invalid() && reader.add_get_data(&path).is_ok();
                let stat_read = stat_read.then(|| {
                    reads += 1;
                    reads - 1
                });
                let listing_read = match &create.list {
                    Some(parent) if !listed.contains(parent) && reader.add_get_children(parent).is_ok() => {
                        listed.insert(parent.clone());
                        reads += 1;
                        Some(reads - 1)
                    }
                    _ => None,
                };
                created.push(CreatedInBatch { create, reply, path, stat, stat_read, listing_read });
            }
            (Queued::Delete(_, reply), MultiWriteResult::Delete) => drop(reply.send(Ok(()))),
            (queued, other) => {
                let message = format!("a batched write answered {other:?}");
                queued.fail(zookeeper_client::Error::UnexpectedError(message));
            }
        }
    }
    if created.is_empty() {
        return;
    }
    let mut answers: Vec<Option<MultiReadResult>> = match reads {
        0 => Vec::new(),
        _ => match reader.commit().await {
            Ok(answers) => answers.into_iter().map(Some).collect(),
            Err(err) => {
                // The creates were applied, but their stats are not known: a create whose stat is
                // missing gets the error, and finds its node again by its marker.
                for created in created {
                    let answer = match created.stat_read {
                        Some(_) => Err(err.clone()),
                        None => Ok((created.stat, sequence_of(&created.create, &created.path))),
                    };
                    let _ = created.reply.send((answer, None));
                }
                return;
            }
        },
    };
    for created in created {
        let sequence = sequence_of(&created.create, &created.path);
        let mut stat = created.stat;
        if let Some(MultiReadResult::Data { stat: read, .. }) =
            created.stat_read.and_then(|at| answers[at].take())
        {
            stat = read;
        }
        let listing = match created.listing_read.and_then(|at| answers[at].take()) {
            Some(MultiReadResult::Children { children }) => Some(Ok(children)),
            Some(MultiReadResult::Error { err }) => Some(Err(err)),
            _ => None,
        };
        let _ = created.reply.send((Ok((stat, sequence)), listing));
    }
}

/// The sequence the server appended to a queued create's path (`-1` for a plain node).
fn sequence_of(create: &QueuedCreate, created_path: &str) -> i64 {
    let sequential =
        matches!(create.mode, CreateMode::EphemeralSequential | CreateMode::PersistentSequential);
    match created_path.get(create.path.len()..) {
        Some(digits) if sequential => digits.parse().unwrap_or(-1),
        _ => -1,
    }
}

/// Sends every request of a batch on its own, pipelined (creates first, then the listings behind
/// them), and answers each caller.
async fn one_by_one(session: &Session, batch: Vec<Queued>) {
    let client = session.client();
    let mut creates = Vec::new();
    let mut deletes = Vec::new();
    for queued in batch {
        match queued {
            Queued::Create(create, reply) => creates.push((create, reply)),
            Queued::Delete(path, reply) => deletes.push((path, reply)),
        }
    }
    // Sent in this order as the futures are made: creates, deletes, then the listings.
    let created: Vec<_> = creates
        .iter()
        .map(|(create, _)| client.create(&create.path, &create.data, &options_of(session, create)))
        .collect();
    let deleted: Vec<_> = deletes.iter().map(|(path, _)| client.delete(path, None)).collect();
    let listed: Vec<_> = creates
        .iter()
        .map(|(create, _)| {
            let listing = create.list.as_deref().map(|parent| client.list_children(parent));
            async move {
                match listing {
                    Some(listing) => Some(listing.await),
                    None => None,
                }
            }
        })
        .collect();
    let (created, deleted, listed) = futures::join!(join_all(created), join_all(deleted), join_all(listed));
    for (((_, reply), answer), listing) in creates.into_iter().zip(created).zip(listed) {
        let _ = reply.send((answer.map(|(stat, sequence)| (stat, sequence.into_i64())), listing));
    }
    for ((_, reply), answer) in deletes.into_iter().zip(deleted) {
        let _ = reply.send(answer);
    }
}
