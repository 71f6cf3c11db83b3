//! Consumers of the distributed-queue family: a claimer task per consumer takes items (in
//! pipelined batches) and hands them over a bounded channel as [`Delivery`] values.

use std::collections::{HashSet, VecDeque};
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::{BoxFuture, FutureExt};
use futures::stream::{FuturesUnordered, Stream, StreamExt};
use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, error, info_span, trace, warn, Instrument};
use zk_recipes_framework::zookeeper_client::{self, CreateMode, MultiWriteError, WatchedEvent};
use zk_recipes_framework::{
    ConnectionEvents, ConnectionState, ConnectionUpdate, Deadline, Error as FrameworkError, Session,
};

use crate::background::{holds_lock, register_lock, unregister_lock, Job};
use crate::error::{QueueError, Result};
use crate::framing::unframe;
use crate::names::{parse_due, Kind, ITEM_PREFIX};
use crate::queue::{ErrorMode, Inner};

/// How many items a consumer takes ahead by default ([`Consumer::prefetch`]).
pub const DEFAULT_PREFETCH: usize = 16;

/// How long an ack, requeue or reject keeps retrying through connection trouble.
const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);
/// At most this many lock nodes of other consumers are watched at once.
const MAX_LOCK_WATCHES: usize = 256;

type StateListener = Arc<dyn Fn(ConnectionState) + Send + Sync>;

/// Takes items from a queue of the distributed-queue family: a stream of [`Delivery`] values
/// ([`next`](Self::next), [`into_stream`](Self::into_stream)) or a handler
/// ([`run`](Self::run)).
///
/// The consumer starts with its first `next` (or `run`): a task takes up to
/// [`prefetch`](Self::prefetch) items ahead of the application, a batch at a time in one round
/// trip: at most once, the reads and one multi deleting the batch; lock-safe, one multi creating
/// the batch's lock nodes and the reads (if another consumer holds one of them, the batch is taken
/// item by item instead). Competing consumers that lose a race jump to a random point of the
/// listing, and list again when most of a batch was gone. Taking works as the queue's mode
/// says (see [`crate::DistributedQueue`]): without a lock path items are deleted when taken;
/// with one they are locked. Items are skipped if their name does not start with `queue-`.
///
/// Dropping the consumer stops its task. Taken items not yet handed out are given back: their
/// lock nodes are deleted (lock-safe) or they are put back as new items (at most once mode).
/// A corrupt node (bad framing, or refused by the serializer) is logged and deleted, as Curator
/// does.
///
/// ```no_run
/// # async fn demo(queue: zk_recipes_queue::DistributedQueue<Vec<u8>>) -> zk_recipes_queue::Result<()> {
/// use futures::StreamExt;
///
/// let mut deliveries = queue.consumer().prefetch(32).into_stream();
/// while let Some(delivery) = deliveries.next().await {
///     let delivery = delivery?;
///     println!("{} items from {}", delivery.items().len(), delivery.name());
///     delivery.ack().await?;
/// }
/// # Ok(()) }
/// ```
#[must_use = "a consumer does nothing until `next` or `run` is called"]
pub struct Consumer<T> {
    inner: Arc<Inner<T>>,
    prefetch: usize,
    listener: Option<StateListener>,
    receiver: Option<mpsc::Receiver<Result<Delivery<T>>>>,
    /// Items the claimer may take: `prefetch - 1` ahead, plus one per waiting `next`.
    credits: Arc<Semaphore>,
}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("queue", &self.inner)
            .field("prefetch", &self.prefetch)
            .field("started", &self.receiver.is_some())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Consumer<T> {
    pub(crate) fn new(inner: Arc<Inner<T>>) -> Self {
        Self {
            inner,
            prefetch: DEFAULT_PREFETCH,
            listener: None,
            receiver: None,
            credits: Arc::new(Semaphore::new(0)),
        }
    }

    /// How many items the consumer may have taken and not yet handed out: the one a
    /// [`next`](Self::next) waits for, plus up to `prefetch - 1` taken ahead while the application
    /// is busy (in [`run`](Self::run) also how many nodes the handler processes at once). At least
    /// 1; defaults to [`DEFAULT_PREFETCH`]. Set it before the first `next`.
    ///
    /// Items taken ahead are unavailable to other consumers: locked (lock-safe) or already deleted
    /// (at most once: a crash loses them too). With 1 the consumer takes an item only when asked,
    /// so a priority or delay queue's consumer always gets the head at the time of asking; with
    /// more, items taken ahead go before an urgent item put later.
    pub fn prefetch(mut self, prefetch: usize) -> Self {
        self.prefetch = prefetch.max(1);
        self
    }

    /// Calls `listener` with every connection state change the consumer sees (Curator's
    /// `QueueConsumer.stateChanged`, which Curator itself never calls: CURATOR-336). It runs on the
    /// consumer's task: keep it short. Set it before the first [`next`](Self::next).
    pub fn on_connection_state(mut self, listener: impl Fn(ConnectionState) + Send + Sync + 'static) -> Self {
        self.listener = Some(Arc::new(listener));
        self
    }

    /// The next delivery, waiting for one; `None` once the framework is closed.
    ///
    /// Errors are reported and the consumer goes on (it backs off while they last).
    ///
    /// # Cancel safety
    /// Cancel safe: a delivery is never lost by dropping this future (the item it asked for is
    /// handed to the next call).
    pub async fn next(&mut self) -> Option<Result<Delivery<T>>> {
        self.start();
        // One more item may be taken: the one this call waits for. (If this call is cancelled, the
        // item it asked for waits in the channel for the next call.)
        self.credits.add_permits(1);
        let receiver = self.receiver.as_mut()?;
        let mut delivery = receiver.recv().await?;
        if let Ok(delivery) = &mut delivery {
            delivery.handed_out = true;
        }
        Some(delivery)
    }

    /// The deliveries as a [`Stream`].
    pub fn into_stream(self) -> impl Stream<Item = Result<Delivery<T>>> + Send + Unpin {
        Box::pin(futures::stream::unfold(self, |mut consumer| async move {
            let delivery = consumer.next().await?;
            Some((delivery, consumer))
        }))
    }

    /// Runs `handler` on every item until the framework is closed, up to
    /// [`prefetch`](Self::prefetch) nodes at a time (items of one node in order, one by one).
    ///
    /// When the handler succeeds for every item of a node, the node is acknowledged. When it fails,
    /// the error is logged and the queue's [`ErrorMode`] decides: `Requeue` stops at the failed
    /// item and puts the node back (every item of it, as Curator does), `Delete` goes on with the
    /// node's other items and then deletes it. Failures to acknowledge are logged (lock-safe: the
    /// item is delivered again).
    ///
    /// # Errors
    /// None yet: it returns `Ok` when the framework is closed.
    ///
    /// # Cancel safety
    /// Dropping the future stops the consumer; nodes being processed are dropped mid-way (lock-safe:
    /// delivered again).
    pub async fn run<F, Fut, E>(self, handler: F) -> Result<()>
    where
        F: Fn(T) -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
        E: fmt::Display,
    {
        let concurrency = self.prefetch;
        let error_mode = self.inner.error_mode;
        let handler = &handler;
        // A stream keeps an unfinished `next` across the select below (no item is asked twice).
        let mut deliveries = self.into_stream();
        let mut in_flight = FuturesUnordered::new();
        loop {
            tokio::select! {
                Some(()) = in_flight.next(), if !in_flight.is_empty() => {}
                next = deliveries.next(), if in_flight.len() < concurrency => match next {
                    None => break,
                    Some(Err(err)) => warn!(%err, "queue consumer error"),
                    Some(Ok(delivery)) => in_flight.push(process(delivery, handler, error_mode)),
                },
            }
        }
        while in_flight.next().await.is_some() {}
        Ok(())
    }

    fn start(&mut self) {
        if self.receiver.is_some() {
            return;
        }
        // Room for the items taken ahead, and for those asked for by cancelled `next` calls.
        let (sender, receiver) = mpsc::channel(self.prefetch);
        self.credits.add_permits(self.prefetch - 1);
        let claimer = Claimer::new(
            self.inner.clone(),
            sender,
            self.credits.clone(),
            self.prefetch,
            self.listener.clone(),
        );
        let span =
            info_span!("queue_consumer", path = %self.inner.path, lock_safe = self.inner.lock_path.is_some());
        tokio::spawn(claimer.run().instrument(span));
        self.receiver = Some(receiver);
    }
}

async fn process<T, F, Fut, E>(mut delivery: Delivery<T>, handler: &F, error_mode: ErrorMode)
where
    F: Fn(T) -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
    E: fmt::Display,
{
    let mut failed = false;
    for item in delivery.take_items() {
        if let Err(err) = handler(item).await {
            error!(item = delivery.name(), %err, ?error_mode, "queue handler failed");
            delivery.inner.metrics.handler_failures.increment(1);
            failed = true;
            if error_mode == ErrorMode::Requeue {
                break;
            }
        }
    }
    let name = delivery.name().to_owned();
    let outcome = if failed && error_mode == ErrorMode::Requeue {
        delivery.requeue().await.map(drop)
    } else {
        delivery.ack().await
    };
    if let Err(err) = outcome {
        warn!(item = %name, %err, "could not finish a queue item");
    }
}

/// Our lock on an item (lock-safe mode).
#[derive(Debug, Clone)]
struct LockClaim {
    lock_node: String,
    generation: u64,
    session_id: i64,
}

/// One node taken from the queue: its items, and (lock-safe) our lock on it.
///
/// Finish it with [`ack`](Self::ack) (done: delete it), [`requeue`](Self::requeue) (put it back at
/// the tail) or [`reject`](Self::reject) (delete it unprocessed). Dropping an unfinished
/// lock-safe delivery releases its lock, so the item is delivered again; dropping an at-most-once
/// delivery counts as consumed.
///
/// ```no_run
/// # async fn demo(mut consumer: zk_recipes_queue::Consumer<Vec<u8>>) -> zk_recipes_queue::Result<()> {
/// let delivery = consumer.next().await.expect("open")?;
/// let looks_fine = delivery.items().iter().all(|item| !item.is_empty());
/// if looks_fine {
///     delivery.ack().await?;
/// } else {
///     delivery.requeue().await?;
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping a lock-safe delivery without `ack` releases it for redelivery"]
pub struct Delivery<T> {
    inner: Arc<Inner<T>>,
    name: String,
    items: Vec<T>,
    bytes: Vec<u8>,
    claim: Option<LockClaim>,
    finished: bool,
    handed_out: bool,
}

impl<T> fmt::Debug for Delivery<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Delivery")
            .field("name", &self.name)
            .field("items", &self.items.len())
            .field("lock", &self.claim.as_ref().map(|claim| &claim.lock_node))
            .finish_non_exhaustive()
    }
}

/// How an item leaves the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Finish {
    Delete,
    Requeue,
}

impl<T> Delivery<T> {
    /// The items of the node, in put order (one, unless it was put with `put_many`).
    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// Moves the items out (the delivery stays, to be acknowledged).
    pub fn take_items(&mut self) -> Vec<T> {
        std::mem::take(&mut self.items)
    }

    /// The item node's name (`queue-...`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The node's raw data (Curator's framing of the items).
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Our lock node, in lock-safe mode.
    pub fn lock_node(&self) -> Option<&str> {
        self.claim.as_ref().map(|claim| claim.lock_node.as_str())
    }

    /// Done: deletes the item. Lock-safe: one multi {check our lock node exists, delete the item,
    /// delete our lock node}, retried through connection losses on the same session only (a retry
    /// that finds the item and our lock gone knows the first try committed). Acks of one queue
    /// handle that wait while a multi is in flight are committed together in the next multi (group
    /// commit); if that fails, each is committed on its own, so one lost lock never fails another
    /// ack. At most once: nothing to do (the item was deleted when taken).
    ///
    /// # Errors
    /// [`QueueError::LockLost`] if our lock node is gone (our session was lost): nothing was
    /// committed and the item is delivered again. [`QueueError::ItemGone`] if someone deleted the
    /// item without the lock. Framework errors when the outcome is unknown (the lock is then
    /// released in the background: the item is delivered again unless the ack did commit).
    ///
    /// # Cancel safety
    /// Not cancel safe: if dropped, the ack may or may not have committed; the lock is released.
    pub async fn ack(mut self) -> Result<()> {
        self.finish(Finish::Delete).await.map(drop)
    }

    /// Puts the node back as a new item at the tail, with the same bytes, and returns its name.
    /// Lock-safe: in the same multi as the delete, so the item is neither lost nor doubled. At most
    /// once: a new put.
    ///
    /// The new item keeps an id queue's id, a priority queue's priority and a delay queue's due
    /// time.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    ///
    /// # Cancel safety
    /// As [`ack`](Self::ack).
    pub async fn requeue(mut self) -> Result<Option<String>> {
        self.finish(Finish::Requeue).await
    }

    /// Deletes the item without processing it ([`ErrorMode::Delete`]). Lock-safe: as
    /// [`ack`](Self::ack); at most once: nothing to do.
    ///
    /// # Errors
    /// As [`ack`](Self::ack).
    ///
    /// # Cancel safety
    /// As [`ack`](Self::ack).
    pub async fn reject(mut self) -> Result<()> {
        self.finish(Finish::Delete).await.map(drop)
    }

    /// Resolves when our lock on the item can no longer be trusted: the connection entered a state
    /// the framework's error policy calls an error (`Suspended` under the standard policy) or the
    /// session was lost, or the framework was closed. Never resolves in at-most-once mode (the
    /// item is ours once taken).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn lost(&self) -> ConnectionState {
        let Some(claim) = &self.claim else {
            return std::future::pending().await;
        };
        let framework = &self.inner.framework;
        let policy = framework.error_policy();
        let mut events = framework.connection_events();
        let snapshot = framework.current();
        if snapshot.closed || snapshot.generation != claim.generation {
            return ConnectionState::Lost;
        }
        if let Some(state) = snapshot.state.filter(|state| policy.is_error_state(*state)) {
            return state;
        }
        loop {
            match events.next().await {
                None => return ConnectionState::Lost,
                Some(update @ ConnectionUpdate::Lagged { .. }) => return update.state(),
                Some(ConnectionUpdate::Changed(event)) => {
                    let ours = event.generation == claim.generation;
                    if (ours && policy.is_error_state(event.state)) || event.state == ConnectionState::Lost {
                        return event.state;
                    }
                }
            }
        }
    }

    async fn finish(&mut self, finish: Finish) -> Result<Option<String>> {
        let inner = self.inner.clone();
        let Some(claim) = self.claim.clone() else {
            self.finished = true;
            if finish == Finish::Requeue {
                let prefix = inner.item_path(&inner.kind.requeue_name(&self.name));
                let name = requeue_plain(&inner, &prefix, &self.bytes).await?;
                inner.metrics.redeliveries.increment(1);
                return Ok(Some(name));
            }
            return Ok(None);
        };
        let span = info_span!("queue_finish", item = %self.name, ?finish);
        if inner.framework.is_closed() {
            // The session went with the framework, and our lock with it; nothing was sent.
            self.finished = true;
            unregister_lock(claim.session_id, &claim.lock_node);
            return Err(QueueError::LockLost { item: self.name.clone() });
        }
        let outcome = match finish {
            Finish::Delete => inner.acks.delete(&inner, &self.name, &claim).instrument(span).await,
            Finish::Requeue => {
                commit(&inner, &self.name, &claim, &self.bytes, finish, false).instrument(span).await
            }
        };
        self.finished = true;
        match outcome {
            Ok(Committed::Done(requeued)) => {
                unregister_lock(claim.session_id, &claim.lock_node);
                match finish {
                    Finish::Delete => inner.metrics.acks.increment(1),
                    Finish::Requeue => inner.metrics.redeliveries.increment(1),
                }
                Ok(requeued)
            }
            Ok(Committed::LockLost) => {
                unregister_lock(claim.session_id, &claim.lock_node);
                Err(QueueError::LockLost { item: self.name.clone() })
            }
            Ok(Committed::ItemGone) => {
                self.release();
                Err(QueueError::ItemGone { item: self.name.clone() })
            }
            Err(err) => {
                self.release();
                Err(err.into())
            }
        }
    }

    /// Hands our lock to the background task for deletion (on its own session only).
    fn release(&self) {
        if let Some(claim) = &self.claim {
            self.inner.submit(Job::ReleaseLock {
                lock_node: claim.lock_node.clone(),
                generation: claim.generation,
                session_id: claim.session_id,
                verify_owner: false,
            });
        }
    }
}

impl<T> Drop for Delivery<T> {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if self.claim.is_some() {
            trace!(item = %self.name, "unfinished delivery dropped: releasing its lock");
            self.release();
        } else if !self.handed_out {
            debug!(item = %self.name, "taken item never handed out: putting it back");
            let prefix = self.inner.item_path(&self.inner.kind.requeue_name(&self.name));
            self.inner.submit(Job::Reput { prefix, bytes: std::mem::take(&mut self.bytes) });
        }
    }
}

/// What a lock-safe finish found.
#[derive(Debug)]
enum Committed {
    /// Committed (with the requeued item's name).
    Done(Option<String>),
    LockLost,
    ItemGone,
}

/// The lock-safe finish: one multi {check lock, delete item, [create requeued item], delete lock}
/// on the session that holds the lock.
async fn commit<T>(
    inner: &Inner<T>,
    name: &str,
    claim: &LockClaim,
    bytes: &[u8],
    finish: Finish,
    maybe_sent: bool,
) -> Result<Committed, FrameworkError> {
    let item_path = inner.item_path(name);
    let requeue_prefix = (finish == Finish::Requeue).then(|| inner.item_path(&inner.kind.requeue_name(name)));
    let tries = std::sync::atomic::AtomicU32::new(u32::from(maybe_sent));
    let (item_path, requeue_prefix, tries) = (&item_path, &requeue_prefix, &tries);
    inner
        .framework
        .retry(Deadline::after(COMMIT_TIMEOUT), |session| async move {
            if session.generation() != claim.generation || session.id().0 != claim.session_id {
                return Ok(Committed::LockLost);
            }
            let earlier_tries = tries.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            let mut multi = session.client().new_multi_writer();
            multi.add_check_version(&claim.lock_node, -1)?;
            multi.add_delete(item_path, None)?;
            if let Some(prefix) = requeue_prefix {
                let options = session.create_options(CreateMode::PersistentSequential);
                multi.add_create(prefix, bytes, &options)?;
            }
            multi.add_delete(&claim.lock_node, None)?;
            match multi.commit().await {
                Ok(results) => {
                    let requeued = results.into_iter().find_map(|result| match result {
                        zookeeper_client::MultiWriteResult::Create { path, .. } => {
                            Some(zk_recipes_framework::path::name(&path).to_owned())
                        }
                        _ => None,
                    });
                    Ok(Committed::Done(requeued))
                }
                Err(MultiWriteError::OperationFailed {
                    index: 0,
                    source: zookeeper_client::Error::NoNode,
                }) => {
                    if earlier_tries == 0 {
                        return Ok(Committed::LockLost);
                    }
                    // An earlier try was in flight when the connection broke. On this same session
                    // only that try can have deleted our lock; it committed iff the item is gone.
                    match session.client().check_stat(item_path).await? {
                        None => Ok(Committed::Done(None)),
                        Some(_) => Ok(Committed::LockLost),
                    }
                }
                Err(MultiWriteError::OperationFailed {
                    index: 1,
                    source: zookeeper_client::Error::NoNode,
                }) => {
                    // After an interrupted try, the lock that passed the check may be another
                    // consumer's (taken after ours went with our committed try): the item is gone
                    // because that try committed.
                    if earlier_tries == 0 {
                        Ok(Committed::ItemGone)
                    } else {
                        Ok(Committed::Done(None))
                    }
                }
                Err(err) => Err(zookeeper_client::Error::from(err).into()),
            }
        })
        .await
}

/// At most this many acks go in one multi (three operations each).
const MAX_ACKS_PER_MULTI: usize = 300;

/// Group commit of lock-safe acks: acks that arrive while one multi is in flight go together in
/// the next one (one transaction for many items). If a combined multi fails, each ack is
/// committed on its own, so one lost lock never fails the others.
#[derive(Debug, Default)]
pub(crate) struct AckBatcher {
    waiting: parking_lot::Mutex<Vec<AckRequest>>,
    flushing: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
struct AckRequest {
    name: String,
    claim: LockClaim,
    reply: tokio::sync::oneshot::Sender<Result<Committed, FrameworkError>>,
}

impl AckBatcher {
    /// Deletes the item (and our lock), together with whatever other acks are waiting.
    async fn delete<T>(
        &self,
        inner: &Inner<T>,
        name: &str,
        claim: &LockClaim,
    ) -> Result<Committed, FrameworkError> {
        let (reply, mut outcome) = tokio::sync::oneshot::channel();
        self.waiting.lock().push(AckRequest { name: name.to_owned(), claim: claim.clone(), reply });
        let flushing = self.flushing.lock().await;
        // Committed by the flusher before us?
        if let Ok(committed) = outcome.try_recv() {
            return committed;
        }
        let mut batch = std::mem::take(&mut *self.waiting.lock());
        while !batch.is_empty() {
            let rest = batch.split_off(batch.len().min(MAX_ACKS_PER_MULTI));
            commit_acks(inner, batch).await;
            batch = rest;
        }
        drop(flushing);
        match outcome.try_recv() {
            Ok(committed) => committed,
            // Our ack was taken by a flusher that was cancelled: its outcome is unknown, so commit
            // it ourselves, knowing it may have been sent.
            Err(_) => commit(inner, name, claim, &[], Finish::Delete, true).await,
        }
    }
}

/// Commits `batch` in one multi {check lock, delete item, delete lock}*; falls back to one commit
/// each when that fails.
async fn commit_acks<T>(inner: &Inner<T>, batch: Vec<AckRequest>) {
    if batch.len() == 1 {
        for request in batch {
            let committed = commit(inner, &request.name, &request.claim, &[], Finish::Delete, false).await;
            let _ = request.reply.send(committed);
        }
        return;
    }
    let together = async {
        let session = inner.framework.session(Deadline::after(COMMIT_TIMEOUT)).await?;
        let mut multi = session.client().new_multi_writer();
        for request in &batch {
            let claim = &request.claim;
            if session.generation() != claim.generation || session.id().0 != claim.session_id {
                return Ok(Err(false));
            }
            multi.add_check_version(&claim.lock_node, -1)?;
            multi.add_delete(&inner.item_path(&request.name), None)?;
            multi.add_delete(&claim.lock_node, None)?;
        }
        let committed = multi.commit().await;
        Ok::<_, FrameworkError>(match committed {
            Ok(_) => Ok(()),
            Err(MultiWriteError::OperationFailed { .. }) => Err(false),
            // Connection trouble: it may have committed.
            Err(MultiWriteError::RequestFailed { .. }) => Err(true),
        })
    };
    let maybe_sent = match together.await {
        Ok(Ok(())) => {
            trace!(acks = batch.len(), items = ?batch.iter().map(|r| &r.name).collect::<Vec<_>>(), "acks committed together");
            for request in batch {
                let _ = request.reply.send(Ok(Committed::Done(None)));
            }
            return;
        }
        Ok(Err(maybe_sent)) => maybe_sent,
        Err(_) => true,
    };
    let each = batch.into_iter().map(|request| async move {
        let committed = commit(inner, &request.name, &request.claim, &[], Finish::Delete, maybe_sent).await;
        trace!(item = %request.name, ?committed, maybe_sent, "ack committed alone");
        let _ = request.reply.send(committed);
    });
    futures::future::join_all(each).await;
}

/// Puts `bytes` back as a new node `<prefix><seq>` (at-most-once requeue).
async fn requeue_plain<T>(inner: &Inner<T>, prefix: &str, bytes: &[u8]) -> Result<String> {
    let created = inner
        .framework
        .retry(Deadline::after(COMMIT_TIMEOUT), |session| async move {
            inner.ensure_created(&session).await?;
            let options = session.create_options(CreateMode::PersistentSequential);
            let (_, sequence) = session.client().create(prefix, bytes, &options).await?;
            Ok(format!("{}{sequence}", zk_recipes_framework::path::name(prefix)))
        })
        .await?;
    Ok(created)
}

/// Removes one item for an id queue's `remove`: lock-safe, lock it first and delete it in one
/// multi with the lock check; else delete it. `false` if someone else has it (or had it).
pub(crate) async fn remove_item<T>(inner: &Inner<T>, name: &str) -> Result<bool> {
    let item_path = inner.item_path(name);
    let item_path = &item_path;
    let Some(lock_node) = inner.lock_node(name) else {
        let removed = inner
            .framework
            .retry(Deadline::after(COMMIT_TIMEOUT), |session| async move {
                match session.client().delete(item_path, None).await {
                    Ok(()) => Ok(true),
                    Err(zookeeper_client::Error::NoNode) => Ok(false),
                    Err(err) => Err(err.into()),
                }
            })
            .await?;
        return Ok(removed);
    };
    let session = inner.framework.session(Deadline::after(COMMIT_TIMEOUT)).await?;
    let claim = LockClaim { lock_node, generation: session.generation(), session_id: session.id().0 };
    if !register_lock(claim.session_id, &claim.lock_node) {
        return Ok(false);
    }
    let options = session.create_options(CreateMode::Ephemeral);
    let created = session.client().create(&claim.lock_node, &inner.data, &options).await;
    drop(session);
    match created {
        Ok(_) => {}
        Err(zookeeper_client::Error::NodeExists | zookeeper_client::Error::NoNode) => {
            unregister_lock(claim.session_id, &claim.lock_node);
            return Ok(false);
        }
        Err(err) => {
            inner.submit(Job::ReleaseLock {
                lock_node: claim.lock_node.clone(),
                generation: claim.generation,
                session_id: claim.session_id,
                verify_owner: true,
            });
            return Err(FrameworkError::from(err).into());
        }
    }
    let outcome = commit(inner, name, &claim, &[], Finish::Delete, false).await;
    match outcome {
        Ok(Committed::Done(_)) => {
            unregister_lock(claim.session_id, &claim.lock_node);
            Ok(true)
        }
        Ok(Committed::LockLost) => {
            unregister_lock(claim.session_id, &claim.lock_node);
            Ok(false)
        }
        Ok(Committed::ItemGone) | Err(_) => {
            inner.submit(Job::ReleaseLock {
                lock_node: claim.lock_node.clone(),
                generation: claim.generation,
                session_id: claim.session_id,
                verify_owner: false,
            });
            outcome.map(|_| false).map_err(QueueError::from)
        }
    }
}

fn now_epoch_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as i64)
}

type WatchFuture = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// The consumer's task: lists, takes, hands over.
struct Claimer<T> {
    inner: Arc<Inner<T>>,
    sender: mpsc::Sender<Result<Delivery<T>>>,
    credits: Arc<Semaphore>,
    prefetch: usize,
    listener: Option<StateListener>,
    events: ConnectionEvents,
    /// Candidates from the last listing, in the order to try them.
    pending: VecDeque<String>,
    /// The children watch armed by the last listing.
    children_watch: Option<WatchFuture>,
    /// The children watch fired since the last listing.
    children_changed: bool,
    /// Relist before taking anything else (a new session, or an error).
    must_relist: bool,
    /// The session generation of the last listing.
    generation: u64,
    /// Lost a race in the last pass: start the next pass at a random point (if the kind allows).
    contended: bool,
    /// Items whose lock another consumer held, since the last listing.
    locked_by_others: Vec<String>,
    /// Lock nodes of other consumers we watch, by item name.
    lock_watches: FuturesUnordered<BoxFuture<'static, String>>,
    watched: HashSet<String>,
    /// Delay queue: when the earliest item not yet due is due (epoch ms).
    next_due: Option<i64>,
    /// Lock creates whose outcome is unknown (connection lost in flight): item, lock claim.
    uncertain: Vec<(String, LockClaim)>,
    /// Consecutive errors, for backing off.
    errors: u32,
}

impl<T: Send + 'static> Claimer<T> {
    fn new(
        inner: Arc<Inner<T>>,
        sender: mpsc::Sender<Result<Delivery<T>>>,
        credits: Arc<Semaphore>,
        prefetch: usize,
        listener: Option<StateListener>,
    ) -> Self {
        let events = inner.framework.connection_events();
        Self {
            inner,
            sender,
            credits,
            prefetch,
            listener,
            events,
            pending: VecDeque::new(),
            children_watch: None,
            children_changed: false,
            must_relist: true,
            generation: 0,
            contended: false,
            locked_by_others: Vec::new(),
            lock_watches: FuturesUnordered::new(),
            watched: HashSet::new(),
            next_due: None,
            uncertain: Vec::new(),
            errors: 0,
        }
    }

    async fn run(mut self) {
        debug!(prefetch = self.prefetch, "consumer started");
        loop {
            if self.inner.framework.is_closed() {
                break;
            }
            let credit = tokio::select! {
                credit = self.credits.clone().acquire_owned() => match credit {
                    Ok(credit) => credit,
                    Err(_) => break,
                },
                () = self.sender.closed() => break,
                update = self.events.next() => {
                    if !self.on_connection_update(update) {
                        break;
                    }
                    continue;
                }
            };
            credit.forget();
            let extra = self.credits.available_permits().min(self.prefetch - 1);
            if let Ok(extra) = self.credits.try_acquire_many(extra as u32) {
                extra.forget();
            }
            let want = 1 + extra;
            let deliveries = match self.take_some(want).await {
                Ok(deliveries) => {
                    self.errors = 0;
                    deliveries
                }
                Err(err) if err.is_closed() => break,
                Err(err) => {
                    self.credits.add_permits(want);
                    self.errors += 1;
                    self.must_relist = true;
                    let backoff = Duration::from_millis(50 << self.errors.min(5));
                    debug!(%err, backoff = %zk_recipes_framework::ReadableDuration(backoff), "consumer error");
                    if self.sender.send(Err(err)).await.is_err() {
                        break;
                    }
                    tokio::time::sleep(backoff).await;
                    continue;
                }
            };
            self.credits.add_permits(want - deliveries.len());
            if deliveries.is_empty() {
                if !self.wait_for_work().await {
                    break;
                }
                continue;
            }
            for delivery in deliveries {
                // If the receiver is gone, the delivery is dropped and gives its item back.
                if self.sender.send(Ok(delivery)).await.is_err() {
                    break;
                }
            }
        }
        self.shut_down();
        debug!("consumer stopped");
    }

    /// Handles a connection update; `false` when the framework is closed.
    fn on_connection_update(&mut self, update: Option<ConnectionUpdate>) -> bool {
        let Some(update) = update else { return false };
        let state = update.state();
        if let Some(listener) = &self.listener {
            listener(state);
        }
        match update {
            ConnectionUpdate::Changed(event)
                if event.generation == self.generation && state.is_connected() => {}
            _ => self.must_relist = true,
        }
        true
    }

    /// Takes up to `want` items: lists when needed (at most twice), then claims in pipelined
    /// batches.
    async fn take_some(&mut self, want: usize) -> Result<Vec<Delivery<T>>> {
        self.resolve_uncertain().await?;
        let mut taken = Vec::new();
        let mut lists = 0;
        while taken.len() < want {
            self.poll_children_watch();
            let stale = self.must_relist || (self.inner.kind.head_only() && self.children_changed);
            if stale || self.pending.is_empty() {
                if lists >= 2 || (lists > 0 && (self.pending.is_empty() || !taken.is_empty())) {
                    break;
                }
                self.relist().await?;
                lists += 1;
            }
            let batch = self.next_batch(want - taken.len());
            if batch.is_empty() {
                break;
            }
            self.contended = false;
            let claimed = if self.inner.lock_path.is_some() {
                self.claim_locked(batch).await?
            } else {
                self.claim_plain(batch).await?
            };
            taken.extend(claimed);
            if self.contended && !self.inner.kind.head_only() && self.pending.len() > 1 {
                // Another consumer works on the same stretch: go on from a random point instead of
                // racing it item by item.
                let start = fastrand::usize(..self.pending.len());
                self.pending.rotate_left(start);
            }
        }
        Ok(taken)
    }

    /// The next candidates to try, from the front of the pending list (delay: due ones only).
    fn next_batch(&mut self, count: usize) -> Vec<String> {
        let mut batch = Vec::with_capacity(count);
        let now = now_epoch_ms();
        while batch.len() < count {
            let Some(name) = self.pending.front() else { break };
            if self.inner.kind == Kind::Delay {
                let due = parse_due(name);
                if due > now {
                    self.next_due = Some(due);
                    // Not due: stop here, and look again when it is (or the queue changes).
                    self.pending.clear();
                    break;
                }
            }
            batch.extend(self.pending.pop_front());
        }
        batch
    }

    fn poll_children_watch(&mut self) {
        if let Some(watch) = &mut self.children_watch {
            if watch.as_mut().now_or_never().is_some() {
                self.children_watch = None;
                self.children_changed = true;
            }
        }
    }

    /// Lists the queue with a children watch and rebuilds the pending list.
    async fn relist(&mut self) -> Result<()> {
        let inner = &*self.inner;
        let (children, watcher, generation, session_id) = inner
            .framework
            .retry(Deadline::never(), |session| async move {
                inner.ensure_created(&session).await?;
                let listed = match session.client().list_and_watch_children(&inner.path).await {
                    Err(zookeeper_client::Error::NoNode) => {
                        inner.forget_created();
                        inner.ensure_created(&session).await?;
                        session.client().list_and_watch_children(&inner.path).await?
                    }
                    other => other?,
                };
                Ok((listed.0, listed.1, session.generation(), session.id().0))
            })
            .await?;
        if generation != self.generation {
            // A new session: lock watches of the old one are dead.
            self.lock_watches = FuturesUnordered::new();
            self.watched.clear();
        }
        self.generation = generation;
        self.children_watch = Some(Box::pin(watcher.changed()));
        self.children_changed = false;
        self.must_relist = false;
        self.next_due = None;
        self.locked_by_others.clear();
        let depth = children.iter().filter(|child| child.starts_with(ITEM_PREFIX)).count();
        inner.metrics.depth.set(depth as f64);
        let mut names: Vec<String> = children
            .into_iter()
            .filter(|child| child.starts_with(ITEM_PREFIX))
            .filter(|child| !self.watched.contains(child))
            .collect();
        if let Some(lock_path) = &inner.lock_path {
            names
                .retain(|child| !holds_lock(session_id, &zk_recipes_framework::path::join(lock_path, child)));
        }
        inner.kind.sort(&mut names);
        if self.contended && !inner.kind.head_only() && names.len() > 1 {
            let start = fastrand::usize(..names.len());
            names.rotate_left(start);
        }
        trace!(candidates = names.len(), generation, "listed");
        self.pending = names.into();
        Ok(())
    }

    /// At most once: read and delete each item in one round trip; ours if our delete won.
    async fn claim_plain(&mut self, batch: Vec<String>) -> Result<Vec<Delivery<T>>> {
        let inner = self.inner.clone();
        let session = inner.framework.session(Deadline::never()).await?;
        let paths: Vec<String> = batch.iter().map(|name| inner.item_path(name)).collect();
        // Sent now, back to back, and run in order by the server: the reads, then one multi
        // deleting every item (one transaction). If another consumer took one of them, the multi
        // deletes nothing and each item is deleted on its own.
        let reads: Vec<_> = paths.iter().map(|path| session.client().get_data(path)).collect();
        let multi = (paths.len() > 1).then(|| {
            let mut multi = session.client().new_multi_writer();
            for path in &paths {
                multi.add_delete(path, None).expect("valid path");
            }
            multi.commit()
        });
        let mut read_results = Vec::with_capacity(reads.len());
        for read in reads {
            read_results.push(read.await);
        }
        let deleted: Vec<Result<(), zookeeper_client::Error>> = match multi {
            Some(multi) => match multi.await {
                Ok(_) => paths.iter().map(|_| Ok(())).collect(),
                Err(MultiWriteError::OperationFailed { .. }) => {
                    self.contended = true;
                    let deletes: Vec<_> = paths
                        .iter()
                        .zip(&read_results)
                        .map(|(path, read)| read.is_ok().then(|| session.client().delete(path, None)))
                        .collect();
                    let mut deleted = Vec::with_capacity(deletes.len());
                    for delete in deletes {
                        deleted.push(match delete {
                            Some(delete) => delete.await,
                            None => Err(zookeeper_client::Error::NoNode),
                        });
                    }
                    deleted
                }
                Err(MultiWriteError::RequestFailed { source }) => {
                    paths.iter().map(|_| Err(source.clone())).collect()
                }
            },
            None => vec![session.client().delete(&paths[0], None).await],
        };
        let mut taken = Vec::new();
        let mut lost_races = 0;
        for ((name, read), delete) in batch.into_iter().zip(read_results).zip(deleted) {
            match (read, delete) {
                (Ok((bytes, _)), Ok(())) => {
                    if let Some(delivery) = Self::delivery(&inner, name, bytes, None).await {
                        taken.push(delivery);
                    }
                }
                (_, Err(zookeeper_client::Error::NoNode)) => {
                    self.contended = true;
                    lost_races += 1;
                }
                (_, Err(err)) => {
                    // The delete's outcome is unknown: the item is either still there (someone
                    // takes it later) or gone, by our delete or another consumer's. Handing it
                    // out could deliver it twice, so it is not (at most once): if our delete went
                    // through, it is lost.
                    warn!(item = %name, %err, "take interrupted by connection trouble: not delivered; lost if our delete went through");
                    self.must_relist = true;
                }
                (Err(err), Ok(())) => {
                    warn!(item = %name, %err, "item deleted but its data was not read: lost");
                }
            }
        }
        self.note_races(lost_races, taken.len());
        Ok(taken)
    }

    /// Most of a batch was already taken by others: the listing is stale, list again.
    fn note_races(&mut self, lost: usize, won: usize) {
        if lost > 0 && lost >= won {
            self.must_relist = true;
        }
    }

    /// Lock-safe: create our lock node and read the item in one round trip.
    async fn claim_locked(&mut self, batch: Vec<String>) -> Result<Vec<Delivery<T>>> {
        let inner = self.inner.clone();
        let session = inner.framework.session(Deadline::never()).await?;
        if session.generation() != self.generation {
            self.must_relist = true;
            return Ok(Vec::new());
        }
        let options = session.create_options(CreateMode::Ephemeral);
        let claims: Vec<(String, LockClaim, String)> = batch
            .into_iter()
            .filter_map(|name| {
                let lock_node = inner.lock_node(&name)?;
                let claim =
                    LockClaim { lock_node, generation: session.generation(), session_id: session.id().0 };
                // Not if another consumer of this process holds it.
                register_lock(claim.session_id, &claim.lock_node).then(|| {
                    let item_path = inner.item_path(&name);
                    (name, claim, item_path)
                })
            })
            .collect();
        if claims.len() > 1 {
            match self.claim_locked_together(&session, &claims).await {
                Some(taken) => return Ok(taken),
                None => self.contended = true,
            }
        }
        // One by one (one item, or someone else holds one of them). Sent now, back to back; the
        // server runs them in order: our create before our read.
        let requests: Vec<_> = claims
            .iter()
            .map(|(_, claim, item_path)| {
                let create = session.client().create(&claim.lock_node, &inner.data, &options);
                let read = session.client().get_data(item_path);
                (create, read)
            })
            .collect();
        let mut taken = Vec::new();
        let mut lost_races = 0;
        for ((name, claim, _), (create, read)) in claims.iter().zip(requests) {
            let (created, read) = (create.await, read.await);
            match created {
                Ok(_) => match read {
                    Ok((bytes, _)) => {
                        if let Some(delivery) =
                            Self::delivery(&inner, name.clone(), bytes, Some(claim.clone())).await
                        {
                            taken.push(delivery);
                        }
                    }
                    Err(err) => {
                        trace!(item = %name, %err, "locked alone but unread");
                        self.let_go_unread(name, claim, err);
                    }
                },
                Err(zookeeper_client::Error::NodeExists) => {
                    unregister_lock(claim.session_id, &claim.lock_node);
                    self.contended = true;
                    lost_races += 1;
                    self.locked_by_others.push(name.clone());
                }
                Err(zookeeper_client::Error::NoNode) => {
                    // The lock path is missing: create it again and retry.
                    unregister_lock(claim.session_id, &claim.lock_node);
                    inner.forget_created();
                    self.must_relist = true;
                }
                Err(err) if FrameworkError::from(err.clone()).is_retryable() => {
                    debug!(item = %name, %err, "lock create interrupted; outcome unknown");
                    self.uncertain.push((name.clone(), claim.clone()));
                    self.must_relist = true;
                }
                Err(err) => {
                    unregister_lock(claim.session_id, &claim.lock_node);
                    warn!(item = %name, %err, "could not lock a queue item");
                    self.must_relist = true;
                }
            }
        }
        self.note_races(lost_races, taken.len());
        Ok(taken)
    }

    /// Locks every item of the batch in one multi (one transaction), then reads them. `None` if
    /// the multi created nothing because one lock was taken (or an item vanished): go one by one.
    async fn claim_locked_together(
        &mut self,
        session: &Session,
        claims: &[(String, LockClaim, String)],
    ) -> Option<Vec<Delivery<T>>> {
        let inner = self.inner.clone();
        let options = session.create_options(CreateMode::Ephemeral);
        let mut multi = session.client().new_multi_writer();
        for (_, claim, _) in claims {
            multi.add_create(&claim.lock_node, &inner.data, &options).expect("valid path");
        }
        // Sent now, back to back: the locks, then the reads.
        let created = multi.commit();
        let reads: Vec<_> =
            claims.iter().map(|(_, _, item_path)| session.client().get_data(item_path)).collect();
        let created = created.await;
        let mut read_results = Vec::with_capacity(reads.len());
        for read in reads {
            read_results.push(read.await);
        }
        match created {
            Ok(_) => {}
            Err(MultiWriteError::OperationFailed { .. }) => return None,
            Err(MultiWriteError::RequestFailed { source }) => {
                debug!(%source, "lock multi interrupted; outcome unknown");
                self.must_relist = true;
                for (name, claim, _) in claims {
                    self.uncertain.push((name.clone(), claim.clone()));
                }
                return Some(Vec::new());
            }
        }
        let mut taken = Vec::new();
        for ((name, claim, _), read) in claims.iter().zip(read_results) {
            match read {
                Ok((bytes, _)) => {
                    if let Some(delivery) =
                        Self::delivery(&inner, name.clone(), bytes, Some(claim.clone())).await
                    {
                        taken.push(delivery);
                    }
                }
                Err(err) => {
                    trace!(item = %name, %err, "locked together but unread");
                    self.let_go_unread(name, claim, err);
                }
            }
        }
        Some(taken)
    }

    /// We hold the lock on an item whose read failed. Gone (acknowledged by another consumer
    /// meanwhile) or unreadable: let the lock go in the background. Unread for connection
    /// trouble: release it before the next take (see [`resolve_uncertain`](Self::resolve_uncertain))
    /// and try the item again.
    fn let_go_unread(&mut self, name: &str, claim: &LockClaim, err: zookeeper_client::Error) {
        if err == zookeeper_client::Error::NoNode {
            self.inner.submit(release_job(claim, false));
            return;
        }
        self.must_relist = true;
        if FrameworkError::from(err).is_retryable() {
            self.uncertain.push((name.to_owned(), claim.clone()));
        } else {
            self.inner.submit(release_job(claim, false));
        }
    }

    /// Lock creates whose outcome was unknown, and locks we hold on items we could not read: ours
    /// if the node exists with our session as owner (no other consumer of this process can have
    /// it: see the lock registry). Ours are deleted here, before the item is tried again: a lock
    /// still registered keeps the item out of the next listing, and nothing would wake this
    /// consumer once a background release finished on a quiet queue.
    async fn resolve_uncertain(&mut self) -> Result<()> {
        if self.uncertain.is_empty() {
            return Ok(());
        }
        let session = self.inner.framework.session(Deadline::never()).await?;
        while let Some((name, claim)) = self.uncertain.pop() {
            if session.generation() != claim.generation {
                // That session is gone, and its ephemeral node with it.
                unregister_lock(claim.session_id, &claim.lock_node);
                continue;
            }
            let released = match session.client().check_stat(&claim.lock_node).await {
                Ok(Some(stat)) if session.owns(stat.ephemeral_owner) => {
                    debug!(item = %name, "our lock on an item we did not take is there; releasing it");
                    match session.client().delete(&claim.lock_node, None).await {
                        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                        Err(err) => Err(err),
                    }
                }
                Ok(_) => Ok(()),
                Err(err) => Err(err),
            };
            if let Err(err) = released {
                self.uncertain.push((name, claim));
                return Err(FrameworkError::from(err).into());
            }
            unregister_lock(claim.session_id, &claim.lock_node);
            self.pending.push_front(name);
        }
        Ok(())
    }

    /// A delivery from a taken node; a corrupt node is logged and deleted.
    async fn delivery(
        inner: &Arc<Inner<T>>,
        name: String,
        bytes: Vec<u8>,
        claim: Option<LockClaim>,
    ) -> Option<Delivery<T>> {
        let items = unframe(&bytes).map_err(|err| err.to_string()).and_then(|frames| {
            frames
                .iter()
                .map(|frame| inner.serializer.deserialize(frame).map_err(|err| err.to_string()))
                .collect::<std::result::Result<Vec<T>, String>>()
        });
        let corrupt = items.as_ref().err().cloned();
        let delivery = Delivery {
            inner: inner.clone(),
            name,
            items: items.unwrap_or_default(),
            bytes,
            claim,
            finished: false,
            handed_out: false,
        };
        trace!(item = %delivery.name, lock = ?delivery.claim.as_ref().map(|c| c.session_id), "taken");
        inner.metrics.takes.increment(1);
        let Some(reason) = corrupt else { return Some(delivery) };
        error!(item = %delivery.name, %reason, "corrupt queue item: deleting it");
        let name = delivery.name.clone();
        if let Err(err) = delivery.reject().await {
            warn!(item = %name, %err, "could not delete a corrupt queue item");
        }
        None
    }

    /// Nothing to take: watch other consumers' locks, then wait for the queue to change, a lock
    /// to go, the delay head to become due, or the connection to change. `false` to stop.
    async fn wait_for_work(&mut self) -> bool {
        self.watch_locks().await;
        if !self.pending.is_empty() || self.must_relist || !self.uncertain.is_empty() {
            return true;
        }
        if self.children_changed {
            self.must_relist = true;
            return true;
        }
        let due_in = self.next_due.map(|due| Duration::from_millis((due - now_epoch_ms()).max(0) as u64 + 1));
        enum Woke {
            Children(WatchedEvent),
            Due,
            Lock(Option<String>),
            Connection(Option<ConnectionUpdate>),
            Stop,
        }
        let Self { children_watch, lock_watches, events, sender, .. } = self;
        let children_watch = async {
            match children_watch {
                Some(watch) => watch.await,
                None => std::future::pending().await,
            }
        };
        let due = async {
            match due_in {
                Some(due_in) => tokio::time::sleep(due_in).await,
                None => std::future::pending().await,
            }
        };
        let lock_freed = async {
            if lock_watches.is_empty() {
                std::future::pending().await
            } else {
                lock_watches.next().await
            }
        };
        let woke = tokio::select! {
            event = children_watch => Woke::Children(event),
            () = due => Woke::Due,
            name = lock_freed => Woke::Lock(name),
            update = events.next() => Woke::Connection(update),
            () = sender.closed() => Woke::Stop,
        };
        match woke {
            Woke::Children(event) => {
                trace!(?event.event_type, "queue changed");
                self.children_watch = None;
                self.must_relist = true;
            }
            Woke::Due => self.must_relist = true,
            Woke::Lock(Some(name)) => {
                trace!(item = %name, "a lock we waited on is gone");
                self.watched.remove(&name);
                self.pending.push_front(name);
            }
            Woke::Lock(None) => {}
            Woke::Connection(update) => return self.on_connection_update(update),
            Woke::Stop => return false,
        }
        true
    }

    /// Watches the lock nodes of items other consumers held (so an item whose consumer dies is
    /// taken as soon as its lock goes, even if the queue itself never changes).
    async fn watch_locks(&mut self) {
        let names: Vec<String> = std::mem::take(&mut self.locked_by_others)
            .into_iter()
            .filter(|name| !self.watched.contains(name))
            .collect();
        if names.is_empty() {
            return;
        }
        let Ok(session) = self.inner.framework.session(Deadline::never()).await else { return };
        if session.generation() != self.generation {
            self.must_relist = true;
            return;
        }
        let room = MAX_LOCK_WATCHES.saturating_sub(self.watched.len());
        let lock_nodes: Vec<(String, String)> = names
            .into_iter()
            .take(room)
            .filter_map(|name| self.inner.lock_node(&name).map(|lock_node| (name, lock_node)))
            .collect();
        // Sent now, back to back; a data watch (not exists) so no watch is left on a missing node.
        let requests: Vec<_> =
            lock_nodes.iter().map(|(_, lock_node)| session.client().get_and_watch_data(lock_node)).collect();
        for ((name, _), request) in lock_nodes.into_iter().zip(requests) {
            match request.await {
                Ok((_, _, watcher)) => {
                    self.watched.insert(name.clone());
                    self.lock_watches.push(Box::pin(async move {
                        let event = watcher.changed().await;
                        trace!(?event.event_type, item = %name, "lock watch fired");
                        name
                    }));
                }
                // Already gone: try the item again now.
                Err(zookeeper_client::Error::NoNode) => self.pending.push_front(name),
                Err(err) => {
                    debug!(item = %name, %err, "could not watch a lock");
                    self.must_relist = true;
                }
            }
        }
    }

    /// Gives back what was taken but not handed over (the channel's deliveries give themselves
    /// back when dropped).
    fn shut_down(&mut self) {
        for (_, claim) in self.uncertain.drain(..) {
            self.inner.submit(release_job(&claim, true));
        }
    }
}

fn release_job(claim: &LockClaim, verify_owner: bool) -> Job {
    Job::ReleaseLock {
        lock_node: claim.lock_node.clone(),
        generation: claim.generation,
        session_id: claim.session_id,
        verify_owner,
    }
}
