//! Consumers of the distributed-queue family: a claimer task per consumer takes items (in
//! pipelined batches) and hands them over a bounded channel as [`Delivery`] values.

mod claim;
mod claimer;
mod commit;
mod delivery;
pub(crate) mod finish;
mod follow;
mod item;

use std::fmt;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, Stream, StreamExt};
use tokio::sync::{mpsc, Semaphore};
use tokio_util::sync::CancellationToken;
use tracing::{error, info, info_span, warn, Instrument};
use zk_recipes_framework::ConnectionState;

use crate::error::{QueueError, Result};
use crate::options::ErrorMode;
use crate::shared::Inner;

use claimer::{Claimer, StateListener};
pub(crate) use commit::remove_item;
pub use delivery::Delivery;
pub use item::Item;

/// How many items a consumer takes ahead by default ([`Consumer::prefetch`]).
pub const DEFAULT_PREFETCH: usize = 16;

/// How long a stopped [`Consumer::run`] waits for its handlers by default
/// ([`Consumer::drain_timeout`]).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

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
///
/// # Stopping
/// [`close`](Self::close), or cancelling its [`stop_token`](Self::stop_token) (or a token given
/// with [`stop_on`](Self::stop_on)), stops the consumer on its own, without closing the framework:
/// it takes nothing more, gives back what it took ahead, and [`next`](Self::next) returns `None`.
/// A [`run`](Self::run) lets the handlers at work finish (their items are acknowledged or requeued
/// as usual) for up to [`drain_timeout`](Self::drain_timeout), then returns.
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
    stop: CancellationToken,
    drain_timeout: Duration,
}

impl<T> fmt::Debug for Consumer<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Consumer")
            .field("queue", &self.inner)
            .field("prefetch", &self.prefetch)
            .field("started", &self.receiver.is_some())
            .field("stopped", &self.stop.is_cancelled())
            .field("drain_timeout", &self.drain_timeout)
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
            stop: CancellationToken::new(),
            drain_timeout: DEFAULT_DRAIN_TIMEOUT,
        }
    }

    /// Stops the consumer when `token` is cancelled (instead of its own token): one token can stop
    /// a whole service's consumers.
    pub fn stop_on(mut self, token: CancellationToken) -> Self {
        self.stop = token;
        self
    }

    /// The token that stops this consumer when cancelled (see [Stopping](Self#stopping)). Take it
    /// before [`run`](Self::run), which consumes the consumer.
    ///
    /// ```no_run
    /// # async fn demo(queue: zk_recipes_queue::DistributedQueue<Vec<u8>>) -> zk_recipes_queue::Result<()> {
    /// let consumer = queue.consumer();
    /// let stop = consumer.stop_token();
    /// let worker = tokio::spawn(consumer.run(|item| async move { println!("{item:?}"); Ok::<_, String>(()) }));
    /// // ... at shutdown:
    /// stop.cancel(); // no new items; those being handled finish
    /// worker.await.expect("worker")?;
    /// # Ok(()) }
    /// ```
    pub fn stop_token(&self) -> CancellationToken {
        self.stop.clone()
    }

    /// Stops the consumer (see [Stopping](Self#stopping)): cancels its stop token.
    pub fn close(&self) {
        self.stop.cancel();
    }

    /// How long a stopped [`run`](Self::run) waits for the handlers at work before it drops them
    /// (lock-safe: their items are delivered again; at most once: they count as consumed) and
    /// returns [`QueueError::DrainTimedOut`]. Defaults to [`DEFAULT_DRAIN_TIMEOUT`].
    pub fn drain_timeout(mut self, timeout: Duration) -> Self {
        self.drain_timeout = timeout;
        self
    }

    /// How many items the consumer may have taken and not yet handed out: the one a
    /// [`next`](Self::next) waits for, plus up to `prefetch - 1` taken ahead while the application
    /// is busy (in [`run`](Self::run) also how many nodes the handler processes at once; nodes
    /// whose handler finished wait for their acknowledgement outside that count, up to as many
    /// again). At least 1; defaults to [`DEFAULT_PREFETCH`]. Set it before the first `next`.
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

    /// The next delivery, waiting for one; `None` once the framework is closed or the consumer is
    /// stopped (items it took ahead are then given back).
    ///
    /// Errors are reported and the consumer goes on (it backs off while they last).
    ///
    /// # Cancel safety
    /// Cancel safe: a delivery is never lost by dropping this future (the item it asked for is
    /// handed to the next call).
    pub async fn next(&mut self) -> Option<Result<Delivery<T>>> {
        if self.stop.is_cancelled() {
            self.give_back();
            return None;
        }
        self.start();
        // One more item may be taken: the one this call waits for. (If this call is cancelled, the
        // item it asked for waits in the channel for the next call.)
        self.credits.add_permits(1);
        let receiver = self.receiver.as_mut()?;
        let received = tokio::select! {
            biased;
            () = self.stop.cancelled() => None,
            received = receiver.recv() => Some(received),
        };
        let Some(received) = received else {
            self.give_back();
            return None;
        };
        let mut delivery = received?;
        if let Ok(delivery) = &mut delivery {
            delivery.handed_out = true;
        }
        Some(delivery)
    }

    /// Stops the claimer and gives back what it took ahead (dropped deliveries give their items
    /// back).
    fn give_back(&mut self) {
        if let Some(receiver) = &mut self.receiver {
            receiver.close();
            while let Ok(taken_ahead) = receiver.try_recv() {
                drop(taken_ahead);
            }
        }
    }

    /// The deliveries as a [`Stream`].
    pub fn into_stream(self) -> impl Stream<Item = Result<Delivery<T>>> + Send + Unpin {
        Box::pin(futures::stream::unfold(self, |mut consumer| async move {
            let delivery = consumer.next().await?;
            Some((delivery, consumer))
        }))
    }

    /// Runs `handler` on every item until the framework is closed or the consumer is stopped, up to
    /// [`prefetch`](Self::prefetch) nodes at a time (items of one node in order, one by one).
    ///
    /// When the handler succeeds for every item of a node, the node is acknowledged; nodes whose
    /// handlers finished at once are acknowledged together, in one multi on the session that
    /// holds their locks (see the crate docs, "Round trips"). When it fails,
    /// the error is logged and the queue's [`ErrorMode`] decides: `Requeue` stops at the failed
    /// item and puts the node back (every item of it, as Curator does), `Delete` goes on with the
    /// node's other items and then deletes it. Failures to acknowledge are logged (lock-safe: the
    /// item is delivered again). With [`crate::QueueBuilder::max_deliveries`], a node that keeps
    /// failing goes to the dead-letter path instead of coming back forever.
    ///
    /// The handler gets the item alone; [`run_items`](Self::run_items) gives it the delivery's
    /// context too (the node's name, its delivery count, the lock's `lost()`).
    ///
    /// # Errors
    /// [`QueueError::DrainTimedOut`] if, once stopped, handlers were still at work (or
    /// acknowledgements unanswered) after the [`drain_timeout`](Self::drain_timeout). Otherwise `Ok` when the framework is closed or the
    /// consumer stopped.
    ///
    /// # Cancel safety
    /// Dropping the future stops the consumer, and the nodes being processed are dropped mid-way:
    /// lock-safe, their locks are released in the background and they are delivered again (unless
    /// an acknowledgement on the wire committed: then they are gone); at most once, they count as
    /// consumed (their items are lost). Items taken ahead and not yet handed to
    /// the handler are given back either way.
    pub async fn run<F, Fut, E>(self, handler: F) -> Result<()>
    where
        F: Fn(T) -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
        E: fmt::Display,
    {
        self.run_items(|item: Item<T>| handler(item.into_value())).await
    }

    /// As [`run`](Self::run), but the handler receives each item with its delivery's context: an
    /// [`Item`] with the node's name ([`Item::id`]), its delivery count, and
    /// [`Item::lost`], which resolves when the consumer's lock on it can no longer be trusted.
    ///
    /// ```no_run
    /// # async fn demo(queue: zk_recipes_queue::DistributedQueue<String>) -> zk_recipes_queue::Result<()> {
    /// queue
    ///     .consumer()
    ///     .run_items(|item| async move {
    ///         if item.delivery_count() > 1 {
    ///             println!("{} came back (delivery {})", item.id(), item.delivery_count());
    ///         }
    ///         Ok::<_, String>(())
    ///     })
    ///     .await
    /// # }
    /// ```
    ///
    /// # Errors
    /// As [`run`](Self::run).
    ///
    /// # Cancel safety
    /// As [`run`](Self::run).
    pub async fn run_items<F, Fut, E>(self, handler: F) -> Result<()>
    where
        F: Fn(Item<T>) -> Fut,
        Fut: Future<Output = std::result::Result<(), E>>,
        E: fmt::Display,
    {
        let concurrency = self.prefetch;
        let error_mode = self.inner.error_mode;
        let stop = self.stop.clone();
        let drain_timeout = self.drain_timeout;
        let handler = &handler;
        // A stream keeps an unfinished `next` across the select below (no item is asked twice).
        let mut deliveries = Some(self.into_stream());
        // Handlers at work; each returns its delivery if it is to be acknowledged.
        let mut in_flight = FuturesUnordered::new();
        // Deliveries whose handlers finished, not yet acknowledged: acknowledged together once
        // nothing else is ready (group commit, see `ack_all`).
        let mut finished: Vec<Delivery<T>> = Vec::new();
        // Group acks on the wire, with how many deliveries each carries.
        let mut acking = FuturesUnordered::new();
        let mut unacked = 0;
        let mut drain_deadline = None;
        loop {
            if drain_deadline.is_some() && in_flight.is_empty() && finished.is_empty() && acking.is_empty() {
                return Ok(());
            }
            // Handlers at work, plus as many again waiting for their acknowledgement.
            let room = in_flight.len() < concurrency && in_flight.len() + unacked < 2 * concurrency;
            tokio::select! {
                biased;
                () = stop.cancelled(), if drain_deadline.is_none() => {
                    // Stops the claimer; what it took ahead goes back.
                    drop(deliveries.take());
                    if !in_flight.is_empty() {
                        info!(
                            in_flight = in_flight.len(),
                            "queue consumer stopping: letting the handlers at work finish"
                        );
                    }
                    drain_deadline = Some(tokio::time::Instant::now() + drain_timeout);
                }
                () = sleep_until_some(drain_deadline) => {
                    let abandoned = in_flight.len() + unacked;
                    warn!(
                        abandoned,
                        "queue consumer's drain timed out: dropping the deliveries still being handled"
                    );
                    return Err(QueueError::DrainTimedOut { abandoned, timeout: drain_timeout });
                }
                Some(done) = in_flight.next(), if !in_flight.is_empty() => {
                    if let Some(delivery) = done {
                        finished.push(delivery);
                        unacked += 1;
                    }
                }
                Some(acked) = acking.next(), if !acking.is_empty() => unacked -= acked,
                next = next_delivery(&mut deliveries), if room => match next {
                    None => {
                        drop(deliveries.take());
                        drain_deadline.get_or_insert_with(|| tokio::time::Instant::now() + drain_timeout);
                    }
                    Some(Err(err)) => warn!(%err, "queue consumer error"),
                    Some(Ok(delivery)) => in_flight.push(process(delivery, handler, error_mode)),
                },
                // Nothing else is ready: the handlers that finished meanwhile are acknowledged
                // together.
                () = std::future::ready(()), if !finished.is_empty() => {
                    let batch = std::mem::take(&mut finished);
                    let count = batch.len();
                    acking.push(async move {
                        for (name, outcome) in Delivery::ack_all(batch).await {
                            if let Err(err) = outcome {
                                warn!(item = %name, %err, "could not finish a queue item");
                            }
                        }
                        count
                    });
                }
            }
        }
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

/// The next delivery of `deliveries`; pending for ever once it is gone (stopped).
async fn next_delivery<T: Send + 'static>(
    deliveries: &mut Option<impl Stream<Item = Result<Delivery<T>>> + Unpin>,
) -> Option<Result<Delivery<T>>> {
    match deliveries {
        Some(deliveries) => deliveries.next().await,
        None => std::future::pending().await,
    }
}

/// Waits until `deadline`; pending for ever without one.
async fn sleep_until_some(deadline: Option<tokio::time::Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

/// Runs the handler on the items of `delivery`. Returns the delivery when it is to be
/// acknowledged (the caller acknowledges deliveries finished at once together); a failed one is
/// requeued here.
async fn process<T, F, Fut, E>(
    mut delivery: Delivery<T>,
    handler: &F,
    error_mode: ErrorMode,
) -> Option<Delivery<T>>
where
    F: Fn(Item<T>) -> Fut,
    Fut: Future<Output = std::result::Result<(), E>>,
    E: fmt::Display,
{
    let mut failed = false;
    let lost = delivery.lost_signal();
    for (index, value) in delivery.take_items().into_iter().enumerate() {
        let item = Item {
            value,
            id: delivery.name().to_owned(),
            index,
            deliveries: delivery.delivery_count(),
            lost: lost.clone(),
        };
        if let Err(err) = handler(item).await {
            error!(item = delivery.name(), %err, ?error_mode, "queue handler failed");
            delivery.inner.metrics.handler_failures.increment(1);
            failed = true;
            if error_mode == ErrorMode::Requeue {
                break;
            }
        }
    }
    if !(failed && error_mode == ErrorMode::Requeue) {
        return Some(delivery);
    }
    let name = delivery.name().to_owned();
    if let Err(err) = delivery.requeue().await {
        warn!(item = %name, %err, "could not finish a queue item");
    }
    None
}
