//! The consumer's task: lists the queue, takes items in batches, and hands them over.

use std::collections::{HashSet, VecDeque};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::future::BoxFuture;
use futures::stream::FuturesUnordered;
use tokio::sync::{mpsc, Semaphore};
use tracing::{debug, error, trace, warn};
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::zookeeper_client::{self, WatchedEvent};
use zk_recipes_framework::{ConnectionEvents, ConnectionState, Deadline};

use crate::acks::LockClaim;
use crate::background::holds_lock;
use crate::error::Result;
use crate::framing::{delivery_count, unframe, with_delivery_count};
use crate::names::{parse_due, Kind, ITEM_PREFIX};
use crate::shared::Inner;

use super::commit::{count_delivery, release_job};
use super::delivery::Delivery;

/// What a consumer's owner is told of each connection change.
pub(super) type StateListener = Arc<dyn Fn(ConnectionState) + Send + Sync>;

/// At most this many lock nodes of other consumers are watched at once.
pub(super) const MAX_LOCK_WATCHES: usize = 256;

pub(super) fn now_epoch_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as i64)
}

pub(super) type WatchFuture = Pin<Box<dyn Future<Output = WatchedEvent> + Send>>;

/// The consumer's task: lists, takes, hands over.
pub(super) struct Claimer<T> {
    pub(super) inner: Arc<Inner<T>>,
    pub(super) sender: mpsc::Sender<Result<Delivery<T>>>,
    pub(super) credits: Arc<Semaphore>,
    pub(super) prefetch: usize,
    pub(super) listener: Option<StateListener>,
    pub(super) events: ConnectionEvents,
    /// Candidates from the last listing, in the order to try them.
    pub(super) pending: VecDeque<String>,
    /// The children watch armed by the last listing.
    pub(super) children_watch: Option<WatchFuture>,
    /// The children watch fired since the last listing.
    pub(super) children_changed: bool,
    /// Relist before taking anything else (a new session, or an error).
    pub(super) must_relist: bool,
    /// The session generation of the last listing.
    pub(super) generation: u64,
    /// The queue node's child version (`cversion`) and child count at the last listing: while no
    /// child was created since, the listing is still in order, only shorter.
    pub(super) listed: Option<(i32, i32)>,
    /// Lost a race in the last pass: start the next pass at a random point (if the kind allows).
    pub(super) contended: bool,
    /// Items whose lock another consumer held, since the last listing.
    pub(super) locked_by_others: Vec<String>,
    /// Lock nodes of other consumers we watch, by item name.
    pub(super) lock_watches: FuturesUnordered<BoxFuture<'static, String>>,
    pub(super) watched: HashSet<String>,
    /// Delay queue: when the earliest item not yet due is due (epoch ms).
    pub(super) next_due: Option<i64>,
    /// Lock creates whose outcome is unknown (connection lost in flight): item, lock claim.
    pub(super) uncertain: Vec<(String, LockClaim)>,
    /// The pause after an error: 100 ms, doubling up to 1.6 s; a success starts it over.
    pub(super) backoff: Backoff,
}

impl<T: Send + 'static> Claimer<T> {
    pub(super) fn new(
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
            listed: None,
            contended: false,
            locked_by_others: Vec::new(),
            lock_watches: FuturesUnordered::new(),
            watched: HashSet::new(),
            next_due: None,
            uncertain: Vec::new(),
            backoff: Backoff::new(Duration::from_millis(100), Duration::from_millis(1600)),
        }
    }

    pub(super) async fn run(mut self) {
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
            if !self.wait_for_a_batch().await {
                break;
            }
            let extra = self.credits.available_permits().min(self.prefetch - 1);
            if let Ok(extra) = self.credits.try_acquire_many(extra as u32) {
                extra.forget();
            }
            let want = 1 + extra;
            let deliveries = match self.take_some(want).await {
                Ok(deliveries) => {
                    self.backoff.reset();
                    deliveries
                }
                Err(err) if err.is_closed() => break,
                Err(err) => {
                    self.credits.add_permits(want);
                    self.must_relist = true;
                    let backoff = self.backoff.next_pause();
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

    /// Refills in batches: with one credit in hand (taken) and deliveries still waiting in the
    /// channel, waits until credits for half a window are there, or until the application has
    /// taken what waits (then it asks for more). Taking a credit's worth at a time would cost a
    /// round trip per item; waiting longer than the channel lasts would keep the application
    /// waiting. `false` when the consumer is to stop.
    async fn wait_for_a_batch(&mut self) -> bool {
        let half_window = self.prefetch.div_ceil(2);
        let have = 1 + self.credits.available_permits();
        let queued = self.sender.max_capacity() - self.sender.capacity();
        if have >= half_window || queued == 0 {
            return true;
        }
        // Each delivery the application takes comes with a credit: `queued` more credits mean
        // the channel has run dry.
        let need = (half_window - have).min(queued) as u32;
        tokio::select! {
            credits = self.credits.acquire_many(need) => {
                // Given back: counted again with the others below.
                drop(credits);
                true
            }
            () = self.sender.closed() => false,
        }
    }

    /// Takes up to `want` items: lists when needed (at most twice), then claims in pipelined
    /// batches.
    pub(super) async fn take_some(&mut self, want: usize) -> Result<Vec<Delivery<T>>> {
        self.resolve_uncertain().await?;
        let mut taken = Vec::new();
        let mut lists = 0;
        let mut checked = false;
        while taken.len() < want {
            self.poll_children_watch();
            let mut stale = self.must_relist || (self.inner.kind.head_only() && self.children_changed);
            if stale && !self.must_relist && !self.pending.is_empty() {
                // Items were only taken (by us or others) since the listing: the head is still the
                // first of our candidates that is left. Listing a long queue again for every item
                // would cost more than skipping the few that are gone. (Checked once per take.)
                if !checked {
                    checked = self.only_taken_since_listing().await?;
                }
                stale = !checked;
            }
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
    pub(super) fn next_batch(&mut self, count: usize) -> Vec<String> {
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

    /// Lists the queue with a children watch and rebuilds the pending list.
    pub(super) async fn relist(&mut self) -> Result<()> {
        let inner = &*self.inner;
        let (children, stat, watcher, generation, session_id) = inner
            .framework
            .retry(Deadline::never(), |session| async move {
                inner.ensure_created(&session).await?;
                let listed = match session.client().get_and_watch_children(&inner.path).await {
                    Err(zookeeper_client::Error::NoNode) => {
                        inner.forget_created();
                        inner.ensure_created(&session).await?;
                        session.client().get_and_watch_children(&inner.path).await?
                    }
                    other => other?,
                };
                Ok((listed.0, listed.1, listed.2, session.generation(), session.id().0))
            })
            .await?;
        if generation != self.generation {
            // A new session: lock watches of the old one are dead.
            self.lock_watches = FuturesUnordered::new();
            self.watched.clear();
        }
        self.generation = generation;
        self.listed = Some((stat.cversion, stat.num_children));
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

    /// Most of a batch was already taken by others: the listing is stale, list again. Not for a
    /// head-only kind: its candidates are in order, so it goes on with the next one (as a
    /// listing would, without the items others hold); a new item makes it list (see
    /// [`only_taken_since_listing`](Self::only_taken_since_listing)).
    pub(super) fn note_races(&mut self, lost: usize, won: usize) {
        if lost > 0 && lost >= won && !self.inner.kind.head_only() {
            self.must_relist = true;
        }
    }

    /// Whether the queue only lost children since the last listing (one `exists`): ZooKeeper
    /// bumps a node's `cversion` once for every child created or deleted, so with `created +
    /// deleted` = the `cversion` change and `created - deleted` = the child count change, nothing
    /// was created when the two changes cancel out. False when a child was created, when the
    /// session changed, or when more than a few dozen children went (walking gone candidates one
    /// by one would then cost more than a listing).
    pub(super) async fn only_taken_since_listing(&mut self) -> Result<bool> {
        /// Children gone since the listing beyond which we list again anyway.
        const MAX_GONE: i32 = 64;
        let Some((cversion, children)) = self.listed else { return Ok(false) };
        let session = self.inner.framework.session(Deadline::never()).await?;
        if session.generation() != self.generation {
            return Ok(false);
        }
        let stat = match session.client().check_stat(&self.inner.path).await {
            Ok(Some(stat)) => stat,
            Ok(None) => return Ok(false),
            Err(err) => return Err(zk_recipes_framework::Error::from(err).into()),
        };
        let changes = stat.cversion.wrapping_sub(cversion);
        let gone = children - stat.num_children;
        let only_taken = changes == gone && gone <= MAX_GONE;
        trace!(only_taken, changes, gone, "queue changed since the listing");
        Ok(only_taken)
    }

    /// A delivery from a taken node; a corrupt node is logged and deleted.
    pub(super) async fn delivery(
        inner: &Arc<Inner<T>>,
        name: String,
        bytes: Vec<u8>,
        version: i32,
        claim: Option<LockClaim>,
    ) -> Option<Delivery<T>> {
        let items = unframe(&bytes).map_err(|err| err.to_string()).and_then(|frames| {
            frames
                .iter()
                .map(|frame| inner.serializer.deserialize(frame).map_err(|err| err.to_string()))
                .collect::<std::result::Result<Vec<T>, String>>()
        });
        let corrupt = items.as_ref().err().cloned();
        let earlier_deliveries = delivery_count(&bytes);
        let mut delivery = Delivery {
            inner: inner.clone(),
            name,
            items: items.unwrap_or_default(),
            bytes,
            claim,
            finished: false,
            handed_out: false,
            deliveries: earlier_deliveries.saturating_add(1),
        };
        trace!(item = %delivery.name, lock = ?delivery.claim.as_ref().map(|c| c.session_id), "taken");
        inner.metrics.takes.increment(1);
        if let Some(reason) = corrupt {
            error!(item = %delivery.name, %reason, "corrupt queue item: deleting it");
            let name = delivery.name.clone();
            if let Err(err) = delivery.reject().await {
                warn!(item = %name, %err, "could not delete a corrupt queue item");
            }
            return None;
        }
        let Some(max_deliveries) = inner.max_deliveries else { return Some(delivery) };
        if earlier_deliveries >= max_deliveries {
            let name = delivery.name.clone();
            error!(
                item = %name,
                deliveries = earlier_deliveries,
                dead_letter_path = inner.dead_letter_path.as_deref().unwrap_or("(none: deleted)"),
                "queue item delivered max_deliveries times: taken out of the queue"
            );
            delivery.deliveries = earlier_deliveries;
            match delivery.dead_letter().await {
                Ok(_) => inner.metrics.dead_letters.increment(1),
                Err(err) => warn!(item = %name, %err, "could not move a queue item to the dead-letter path"),
            }
            return None;
        }
        delivery.bytes = with_delivery_count(&delivery.bytes, delivery.deliveries);
        if let Some(claim) = &delivery.claim {
            if let Err(err) = count_delivery(inner, &delivery.name, claim, &delivery.bytes, version).await {
                // Dropped unhanded: our lock is released and the item is taken again later.
                warn!(item = %delivery.name, %err, "could not count a delivery: letting the item go");
                return None;
            }
        }
        Some(delivery)
    }

    /// Gives back what was taken but not handed over (the channel's deliveries give themselves
    /// back when dropped).
    pub(super) fn shut_down(&mut self) {
        for (_, claim) in self.uncertain.drain(..) {
            self.inner.submit(release_job(&claim, true));
        }
    }
}
