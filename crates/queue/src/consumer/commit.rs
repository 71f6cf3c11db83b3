//! Finishing: the lock-safe finish multi, group commit of acks, the at-most-once requeue, and the id
//! queue's remove.

use std::time::Duration;

use tracing::trace;
use zk_recipes_framework::zookeeper_client::{self, CreateMode, MultiWriteError};
use zk_recipes_framework::{Deadline, Error as FrameworkError};

use crate::acks::{AckBatcher, AckRequest, Committed, Finish, LockClaim};
use crate::background::{register_lock, unregister_lock, Job};
use crate::error::{QueueError, Result};
use crate::shared::Inner;

use super::finish::{finish_verdict, FinishAnswer, FinishVerdict};

/// How long an ack, requeue or reject keeps retrying through connection trouble.
pub(super) const COMMIT_TIMEOUT: Duration = Duration::from_secs(30);

/// The lock-safe finish: one multi {check lock, delete item, [create requeued item], delete lock}
/// on the session that holds the lock.
pub(super) async fn commit<T>(
    inner: &Inner<T>,
    name: &str,
    claim: &LockClaim,
    bytes: &[u8],
    finish: Finish,
    maybe_sent: bool,
) -> Result<Committed, FrameworkError> {
    let item_path = inner.item_path(name);
    let requeue_prefix = match finish {
        Finish::Delete => None,
        Finish::Requeue => Some(inner.item_path(&inner.kind.requeue_name(name))),
        Finish::DeadLetter => inner.dead_letter_prefix(),
    };
    let tries = std::sync::atomic::AtomicU32::new(u32::from(maybe_sent));
    let (item_path, requeue_prefix, tries) = (&item_path, &requeue_prefix, &tries);
    inner
        .framework
        .retry(Deadline::after(COMMIT_TIMEOUT), |session| async move {
            if session.generation() != claim.generation || session.id().0 != claim.session_id {
                // Never retried onto a newer session. If no try was sent, nothing was committed.
                if tries.load(std::sync::atomic::Ordering::Acquire) == 0 {
                    return Ok(Committed::LockLost);
                }
                // A try was sent on the lost session and its reply never came. What that session
                // did is ordered before its expiry, and so before this session began: after a sync,
                // a queued item means the try did not commit. A gone item may be our commit or
                // another consumer's, who took it once our lock expired. This read only looks.
                session.client().sync(&inner.path).await?;
                return match session.client().check_stat(item_path).await? {
                    Some(_) => Ok(Committed::LockLost),
                    None => Ok(Committed::OutcomeUnknown),
                };
            }
            let earlier_tries = tries.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
            let mut multi = session.client().new_multi_writer();
            multi.add_check_version(&claim.lock_node, -1)?;
            multi.add_delete(item_path, None)?;
            if let Some(prefix) = requeue_prefix {
                let options = session.create_options_for(prefix, CreateMode::PersistentSequential);
                multi.add_create(prefix, bytes, &options)?;
            }
            multi.add_delete(&claim.lock_node, None)?;
            let answer = match multi.commit().await {
                Ok(results) => {
                    let requeued = results.into_iter().find_map(|result| match result {
                        zookeeper_client::MultiWriteResult::Create { path, .. } => {
                            Some(zk_recipes_framework::path::name(&path).to_owned())
                        }
                        _ => None,
                    });
                    return Ok(Committed::Done(requeued));
                }
                Err(MultiWriteError::OperationFailed {
                    index: 0,
                    source: zookeeper_client::Error::NoNode,
                }) => FinishAnswer::LockMissing,
                Err(MultiWriteError::OperationFailed {
                    index: 1,
                    source: zookeeper_client::Error::NoNode,
                }) => FinishAnswer::ItemMissing,
                Err(err) => return Err(zookeeper_client::Error::from(err).into()),
            };
            match finish_verdict(answer, earlier_tries) {
                FinishVerdict::Done => Ok(Committed::Done(None)),
                FinishVerdict::LockLost => Ok(Committed::LockLost),
                FinishVerdict::ItemGone => Ok(Committed::ItemGone),
                FinishVerdict::DoneIfItemGone => match session.client().check_stat(item_path).await? {
                    None => Ok(Committed::Done(None)),
                    Some(_) => Ok(Committed::LockLost),
                },
            }
        })
        .await
}

/// At most this many acks go in one multi (three operations each).
pub(super) const MAX_ACKS_PER_MULTI: usize = 300;

/// The group commit's steps: an ack waits with the others, one flusher sends them all.
impl AckBatcher {
    /// Deletes the item (and our lock), together with whatever other acks are waiting.
    pub(super) async fn delete<T>(
        &self,
        inner: &Inner<T>,
        name: &str,
        claim: &LockClaim,
    ) -> Result<Committed, FrameworkError> {
        let mut outcomes = self.delete_all(inner, vec![(name.to_owned(), claim.clone())]).await;
        outcomes.pop().expect("one outcome per ack")
    }

    /// Deletes every item of `acks` (and our locks on them), in one multi with whatever other acks
    /// are waiting (the items a consumer's handlers finished at once); one outcome per ack, in
    /// order.
    pub(super) async fn delete_all<T>(
        &self,
        inner: &Inner<T>,
        acks: Vec<(String, LockClaim)>,
    ) -> Vec<Result<Committed, FrameworkError>> {
        let mut outcomes = Vec::with_capacity(acks.len());
        {
            let mut waiting = self.waiting.lock();
            for (name, claim) in &acks {
                let (reply, outcome) = tokio::sync::oneshot::channel();
                waiting.push(AckRequest { name: name.clone(), claim: claim.clone(), reply });
                outcomes.push(outcome);
            }
        }
        let flushing = self.flushing.lock().await;
        // Every one of ours committed by a flusher before us? Then nothing is left to send.
        let mut settled: Vec<Option<Result<Committed, FrameworkError>>> =
            outcomes.iter_mut().map(|outcome| outcome.try_recv().ok()).collect();
        if settled.iter().any(Option::is_none) {
            let mut batch = std::mem::take(&mut *self.waiting.lock());
            while !batch.is_empty() {
                let rest = batch.split_off(batch.len().min(MAX_ACKS_PER_MULTI));
                commit_acks(inner, batch).await;
                batch = rest;
            }
        }
        drop(flushing);
        let mut committed = Vec::with_capacity(acks.len());
        for (((name, claim), outcome), settled) in acks.iter().zip(&mut outcomes).zip(&mut settled) {
            committed.push(match settled.take().map_or_else(|| outcome.try_recv().ok(), Some) {
                Some(committed) => committed,
                // Our ack was taken by a flusher that was cancelled: its outcome is unknown, so
                // commit it ourselves, knowing it may have been sent.
                None => commit(inner, name, claim, &[], Finish::Delete, true).await,
            });
        }
        committed
    }
}

/// Commits `batch` in one multi {check lock, delete item, delete lock}*; falls back to one commit
/// each when that fails.
pub(super) async fn commit_acks<T>(inner: &Inner<T>, batch: Vec<AckRequest>) {
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
pub(super) async fn requeue_plain<T>(inner: &Inner<T>, prefix: &str, bytes: &[u8]) -> Result<String> {
    let created = inner
        .framework
        .retry(Deadline::after(COMMIT_TIMEOUT), |session| async move {
            inner.ensure_created(&session).await?;
            let options = session.create_options_for(prefix, CreateMode::PersistentSequential);
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
    let cancelled = ReleaseIfCancelled { inner, claim: Some(claim.clone()) };
    let options = session.create_options_for(&claim.lock_node, CreateMode::Ephemeral);
    let created = session.client().create(&claim.lock_node, &inner.data, &options).await;
    drop(session);
    match created {
        Ok(_) => {}
        Err(zookeeper_client::Error::NodeExists | zookeeper_client::Error::NoNode) => {
            cancelled.disarm();
            unregister_lock(claim.session_id, &claim.lock_node);
            return Ok(false);
        }
        Err(err) => {
            cancelled.disarm();
            inner.submit(release_job(&claim, true));
            return Err(FrameworkError::from(err).into());
        }
    }
    let outcome = commit(inner, name, &claim, &[], Finish::Delete, false).await;
    cancelled.disarm();
    match outcome {
        Ok(Committed::Done(_)) => {
            unregister_lock(claim.session_id, &claim.lock_node);
            Ok(true)
        }
        Ok(Committed::LockLost) => {
            unregister_lock(claim.session_id, &claim.lock_node);
            Ok(false)
        }
        Ok(Committed::OutcomeUnknown) => {
            // Gone from the queue, by our hand or a consumer's: not counted as ours.
            unregister_lock(claim.session_id, &claim.lock_node);
            Ok(false)
        }
        Ok(Committed::ItemGone) | Err(_) => {
            // After an error the commit may have applied and the lock node be gone, and another
            // one made since: only one our session owns is deleted.
            inner.submit(release_job(&claim, outcome.is_err()));
            outcome.map(|_| false).map_err(QueueError::from)
        }
    }
}

/// The lock [`remove_item`] is taking or holds, handed to the background task if the call is
/// dropped before it settled the lock itself: a cancelled remove holds no item back from the
/// consumers until its session ends. The lock node may or may not have been made, or deleted by a
/// commit sent before: the background task deletes it only if our session owns it (this call
/// made it: the lock registry lets one call of this process at a time claim it on a session).
struct ReleaseIfCancelled<'a, T> {
    inner: &'a Inner<T>,
    claim: Option<LockClaim>,
}

impl<T> ReleaseIfCancelled<'_, T> {
    /// The call settles the lock itself from here on.
    fn disarm(mut self) {
        self.claim = None;
    }
}

impl<T> Drop for ReleaseIfCancelled<'_, T> {
    fn drop(&mut self) {
        if let Some(claim) = self.claim.take() {
            self.inner.submit(release_job(&claim, true));
        }
    }
}

pub(super) fn release_job(claim: &LockClaim, verify_owner: bool) -> Job {
    Job::ReleaseLock {
        lock_node: claim.lock_node.clone(),
        generation: claim.generation,
        session_id: claim.session_id,
        verify_owner,
    }
}

/// Writes a lock-safe delivery's new count into the item, on the session that holds our lock,
/// before the item is handed out (so a delivery cut short by a crash counts too). `version` is the
/// item's version as we read it: nobody else writes an item whose lock we hold.
pub(super) async fn count_delivery<T>(
    inner: &Inner<T>,
    name: &str,
    claim: &LockClaim,
    counted: &[u8],
    version: i32,
) -> Result<(), FrameworkError> {
    let item_path = inner.item_path(name);
    let item_path = &item_path;
    inner
        .framework
        .retry_on_session(claim.generation, Deadline::after(COMMIT_TIMEOUT), |session| async move {
            if session.id().0 != claim.session_id {
                return Err(FrameworkError::SessionLost);
            }
            match session.client().set_data(item_path, counted, Some(version)).await {
                Ok(_) => Ok(()),
                // A try whose reply was lost may have written it already.
                Err(zookeeper_client::Error::BadVersion) => {
                    match session.client().get_data(item_path).await {
                        Ok((data, _)) if data == counted => Ok(()),
                        Ok(_) => Err(zookeeper_client::Error::BadVersion.into()),
                        Err(err) => Err(err.into()),
                    }
                }
                Err(err) => Err(err.into()),
            }
        })
        .await
}
