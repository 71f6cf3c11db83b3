//! One taken node handed to the application: its items, our lock on it, and how it leaves the queue.

use std::fmt;
use std::sync::Arc;

use tracing::{debug, info_span, trace, Instrument};
use zk_recipes_framework::{ConnectionState, ConnectionUpdate};

use crate::acks::{Committed, Finish, LockClaim};
use crate::background::{unregister_lock, Job};
use crate::error::{QueueError, Result};
use crate::shared::Inner;

use super::commit::{commit, requeue_plain};

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
    pub(super) inner: Arc<Inner<T>>,
    pub(super) name: String,
    pub(super) items: Vec<T>,
    pub(super) bytes: Vec<u8>,
    pub(super) claim: Option<LockClaim>,
    pub(super) finished: bool,
    pub(super) handed_out: bool,
    /// How many times the node has been handed out, this time included.
    pub(super) deliveries: u32,
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

    /// How many times this node has been handed to a consumer, this time included: 1 for a new
    /// item. Counted only when the queue has [`crate::QueueBuilder::max_deliveries`] (otherwise 1,
    /// or the count the node carries); see there for what counts.
    pub fn delivery_count(&self) -> u32 {
        self.deliveries
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
    /// committed and the item is delivered again. [`QueueError::OutcomeUnknown`] if the ack was
    /// sent, our session expired before its reply, and the item has left the queue (by our ack
    /// or another consumer's after our lock expired). [`QueueError::ItemGone`] if someone deleted the
    /// item without the lock. Framework errors when the outcome is unknown (the lock is then
    /// released in the background: the item is delivered again unless the ack did commit).
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the multi was sent, the ack may or may not have
    /// committed. The lock is released in the background either way, so an ack that did not commit
    /// is delivered again. At most once there is nothing to cancel.
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
    /// Not cancel safe. Lock-safe: as [`ack`](Self::ack), the requeue may or may not have
    /// committed, and an uncommitted one is delivered again. At most once: if cancelled after the
    /// put was sent, the item may or may not have been put back; if it was not, it is lost.
    pub async fn requeue(mut self) -> Result<Option<String>> {
        self.finish(Finish::Requeue).await
    }

    /// Deletes the item without processing it ([`ErrorMode::Delete`](crate::ErrorMode::Delete)). Lock-safe: as
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
    /// Cancel safe: it only reads and waits, and a later call checks the current state first, so a
    /// loss that came meanwhile is not missed.
    pub async fn lost(&self) -> ConnectionState {
        self.lost_signal().wait().await
    }

    /// What [`lost`](Self::lost) waits on, detached from the delivery (for [`super::Item`]).
    pub(super) fn lost_signal(&self) -> LostSignal {
        LostSignal {
            framework: self.inner.framework.clone(),
            generation: self.claim.as_ref().map(|claim| claim.generation),
        }
    }

    /// Takes the node out of the queue past `max_deliveries`: to the dead-letter path, or deleted.
    pub(super) async fn dead_letter(mut self) -> Result<Option<String>> {
        self.finish(Finish::DeadLetter).await
    }

    async fn finish(&mut self, finish: Finish) -> Result<Option<String>> {
        let inner = self.inner.clone();
        let Some(claim) = self.claim.clone() else {
            self.finished = true;
            let prefix = match finish {
                Finish::Delete => return Ok(None),
                Finish::Requeue => inner.item_path(&inner.kind.requeue_name(&self.name)),
                Finish::DeadLetter => match inner.dead_letter_prefix() {
                    Some(prefix) => prefix,
                    None => return Ok(None),
                },
            };
            let name = requeue_plain(&inner, &prefix, &self.bytes).await?;
            if finish == Finish::Requeue {
                inner.metrics.redeliveries.increment(1);
            }
            return Ok(Some(name));
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
            Finish::Requeue | Finish::DeadLetter => {
                commit(&inner, &self.name, &claim, &self.bytes, finish, false).instrument(span).await
            }
        };
        self.settle(&claim, finish, outcome)
    }

    /// Acknowledges lock-safe deliveries whose handlers finished at once, in one multi (with any
    /// other acks waiting); one outcome per delivery, in order. As [`ack`](Self::ack) for each,
    /// and so is cancelling it: the locks of deliveries not yet settled are released in the
    /// background.
    pub(super) async fn ack_all(mut deliveries: Vec<Self>) -> Vec<(String, Result<()>)> {
        let Some(first) = deliveries.first() else { return Vec::new() };
        let inner = first.inner.clone();
        let together =
            !inner.framework.is_closed() && deliveries.iter().all(|delivery| delivery.claim.is_some());
        if !together || deliveries.len() == 1 {
            let mut outcomes = Vec::with_capacity(deliveries.len());
            for delivery in deliveries {
                let name = delivery.name.clone();
                outcomes.push((name, delivery.ack().await));
            }
            return outcomes;
        }
        let acks: Vec<(String, LockClaim)> = deliveries
            .iter()
            .map(|delivery| (delivery.name.clone(), delivery.claim.clone().expect("lock-safe")))
            .collect();
        let span = info_span!("queue_ack_all", items = acks.len());
        let committed = inner.acks.delete_all(&inner, acks).instrument(span).await;
        deliveries
            .iter_mut()
            .zip(committed)
            .map(|(delivery, outcome)| {
                let claim = delivery.claim.clone().expect("lock-safe");
                (delivery.name.clone(), delivery.settle(&claim, Finish::Delete, outcome).map(drop))
            })
            .collect()
    }

    /// What a lock-safe finish's outcome means for this delivery and its lock.
    fn settle(
        &mut self,
        claim: &LockClaim,
        finish: Finish,
        outcome: std::result::Result<Committed, zk_recipes_framework::Error>,
    ) -> Result<Option<String>> {
        let inner = &self.inner;
        self.finished = true;
        match outcome {
            Ok(Committed::Done(requeued)) => {
                unregister_lock(claim.session_id, &claim.lock_node);
                match finish {
                    Finish::Delete => inner.metrics.acks.increment(1),
                    Finish::Requeue => inner.metrics.redeliveries.increment(1),
                    Finish::DeadLetter => {}
                }
                Ok(requeued)
            }
            Ok(Committed::LockLost) => {
                unregister_lock(claim.session_id, &claim.lock_node);
                Err(QueueError::LockLost { item: self.name.clone() })
            }
            Ok(Committed::OutcomeUnknown) => {
                unregister_lock(claim.session_id, &claim.lock_node);
                Err(QueueError::OutcomeUnknown { item: self.name.clone() })
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
    pub(super) fn release(&self) {
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

/// Resolves when a lock-safe delivery's lock can no longer be trusted (see [`Delivery::lost`]).
#[derive(Debug, Clone)]
pub(super) struct LostSignal {
    framework: zk_recipes_framework::Framework,
    /// The generation of the session that holds the lock; `None` at most once (never lost).
    generation: Option<u64>,
}

impl LostSignal {
    pub(super) async fn wait(&self) -> ConnectionState {
        let Some(generation) = self.generation else {
            return std::future::pending().await;
        };
        let framework = &self.framework;
        let policy = framework.error_policy();
        let mut events = framework.connection_events();
        let snapshot = framework.current();
        if snapshot.closed || snapshot.generation != generation {
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
                    let ours = event.generation == generation;
                    if (ours && policy.is_error_state(event.state)) || event.state == ConnectionState::Lost {
                        return event.state;
                    }
                }
            }
        }
    }
}
