//! A contender's lock objects and holds: how each recipe is acquired, how a write is guarded by
//! the hold, and what says the hold was lost.

use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{Deadline, Error as FrameworkError, Framework};
use zk_recipes_leader::{
    CloseMode, LeaderLatch, LeaderSelector, Leadership, LeadershipEvent, LeadershipEvents,
};
use zk_recipes_lock_internals::{LockError, TransactionOp};
use zk_recipes_mutex::{Hold as _, LockLayout, Mutex, MutexGuard};
use zk_recipes_rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use zk_recipes_semaphore::{Lease, Semaphore, SemaphoreMutex};

use super::{Contender, ACQUIRE_TIMEOUT, STEP_TIMEOUT};
use crate::recipes::{is_writer, Recipe};

/// How one acquire goes.
#[derive(Debug, Clone, Copy)]
pub(super) enum Attempt {
    /// Waits up to [`ACQUIRE_TIMEOUT`].
    Patient,
    /// Gives up after this deadline (the acquire's own timeout).
    Deadline(Duration),
    /// Dropped this long after it started, wherever it is then.
    DroppedAfter(Duration),
}

/// Why an acquire returned no hold.
pub(super) enum NotAcquired {
    /// It gave up early, as its [`Attempt`] said.
    GaveUp(String),
    /// It failed (a timeout of a patient acquire, a lost session, ...).
    Failed(String),
}

/// The lock object of one session, made once.
pub(super) enum Lock {
    Mutex(Mutex),
    SemaphoreMutex(SemaphoreMutex),
    Semaphore(Semaphore),
    RwLock(RwLock),
    Latch,
    /// The selector hands each leadership over this channel and keeps it until told it is done.
    Selector {
        selector: LeaderSelector,
        turns: tokio::sync::Mutex<mpsc::Receiver<Turn>>,
    },
    Off,
}

/// One leadership of a selector: it lasts until `done` is sent (or dropped).
pub(super) type Turn = (Leadership, oneshot::Sender<()>);

/// One hold: what a write is guarded by and what says it was lost.
pub(super) enum Hold {
    Mutex(MutexGuard),
    Lease(Lease),
    Read(RwLockReadGuard),
    Write(RwLockWriteGuard),
    Latch { latch: LeaderLatch, node: String, events: tokio::sync::Mutex<LeadershipEvents> },
    Selector { leadership: Leadership, done: oneshot::Sender<()> },
    Off,
}

/// A write of the protocol.
pub(super) enum Op {
    CreateEphemeral(String),
    SetData(String, Vec<u8>, i32),
    Delete(String),
}

/// How a write ended.
pub(super) enum Outcome {
    Ok,
    /// Our lock node is gone (checked in the same transaction): nothing was written.
    Lost,
    /// The write itself failed; nothing was written.
    Failed(zookeeper_client::Error),
    /// Unknown (connection loss, timeout).
    Unknown(String),
}

/// Why a critical section ended early.
pub(super) enum Abort {
    Lost,
    Unknown(String),
}

impl Contender {
    pub(super) fn make_lock(&self) -> Result<Lock, String> {
        if !self.config.locking {
            return Ok(Lock::Off);
        }
        let path = self.recipe.lock_path(&self.config.lock_root);
        Ok(match self.recipe {
            Recipe::Mutex => Lock::Mutex(Mutex::new(&self.framework, &path).map_err(|err| err.to_string())?),
            Recipe::SemaphoreMutex => Lock::SemaphoreMutex(
                SemaphoreMutex::new(&self.framework, &path).map_err(|err| err.to_string())?,
            ),
            Recipe::Semaphore => Lock::Semaphore(
                Semaphore::new(&self.framework, &path, self.recipe.allowed_holders() as u32)
                    .map_err(|err| err.to_string())?,
            ),
            Recipe::Batch(_) => {
                Lock::Mutex(Mutex::new(&self.framework, &path).map_err(|err| err.to_string())?)
            }
            Recipe::ZooKeeperLock => Lock::Mutex(
                Mutex::with_layout(&self.framework, &path, LockLayout::ZooKeeperRecipe)
                    .map_err(|err| err.to_string())?,
            ),
            Recipe::KazooLock => Lock::Mutex(
                Mutex::with_layout(&self.framework, &path, LockLayout::Kazoo)
                    .map_err(|err| err.to_string())?
                    .node_data(self.prefix.clone()),
            ),
            Recipe::Queue | Recipe::PriorityQueue => return Err("a queue is not a lock".to_owned()),
            Recipe::Latch => Lock::Latch,
            Recipe::RwLock => {
                Lock::RwLock(RwLock::new(&self.framework, &path).map_err(|err| err.to_string())?)
            }
            Recipe::Selector => {
                let (sender, turns) = mpsc::channel::<Turn>(1);
                let selector = LeaderSelector::builder(&self.framework, &path)
                    .id(self.prefix.clone())
                    .auto_requeue(true)
                    .build(move |leadership: Leadership| {
                        let sender = sender.clone();
                        async move {
                            let (done, finished) = oneshot::channel();
                            let handed = tokio::select! {
                                sent = sender.send((leadership.clone(), done)) => sent.is_ok(),
                                _ = leadership.cancelled() => false,
                            };
                            if handed {
                                let _ = finished.await;
                            }
                        }
                    })
                    .map_err(|err| err.to_string())?;
                selector.start().map_err(|err| err.to_string())?;
                Lock::Selector { selector, turns: tokio::sync::Mutex::new(turns) }
            }
        })
    }

    /// Acquires as `attempt` says and returns the hold with its fencing token (0 without
    /// locking). Only a mutex gives up early; the other recipes are always patient.
    pub(super) async fn acquire(
        &self,
        lock: &Lock,
        holder: &str,
        attempt: Attempt,
    ) -> Result<(Hold, i64), NotAcquired> {
        let Lock::Mutex(mutex) = lock else {
            return self.acquire_patiently(lock, holder).await.map_err(NotAcquired::Failed);
        };
        let locked = match attempt {
            Attempt::Patient => mutex.lock_timeout(ACQUIRE_TIMEOUT).await,
            Attempt::Deadline(deadline) => match mutex.lock_timeout(deadline).await {
                Err(err) if err.is_timeout() => {
                    return Err(NotAcquired::GaveUp(format!("deadline {}us", deadline.as_micros())));
                }
                locked => locked,
            },
            Attempt::DroppedAfter(after) => tokio::select! {
                locked = mutex.lock_timeout(ACQUIRE_TIMEOUT) => locked,
                () = tokio::time::sleep(after) => {
                    return Err(NotAcquired::GaveUp(format!("dropped after {}us", after.as_micros())));
                }
            },
        };
        let guard = locked.map_err(|err| NotAcquired::Failed(err.to_string()))?;
        let token = guard.fencing_token();
        Ok((Hold::Mutex(guard), token))
    }

    /// Acquires, waiting up to [`ACQUIRE_TIMEOUT`].
    async fn acquire_patiently(&self, lock: &Lock, holder: &str) -> Result<(Hold, i64), String> {
        match lock {
            Lock::Mutex(mutex) => {
                let guard = mutex.lock_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                let token = guard.fencing_token();
                Ok((Hold::Mutex(guard), token))
            }
            Lock::SemaphoreMutex(mutex) => {
                let lease = mutex.lock_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                self.lease_hold(lease).await
            }
            Lock::Semaphore(semaphore) => {
                let lease =
                    semaphore.acquire_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                self.lease_hold(lease).await
            }
            Lock::RwLock(lock) => {
                if is_writer(holder) {
                    let guard = lock.write_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                    let token = guard.fencing_token();
                    Ok((Hold::Write(guard), token))
                } else {
                    let guard = lock.read_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                    let token = guard.fencing_token();
                    Ok((Hold::Read(guard), token))
                }
            }
            Lock::Latch => {
                let path = self.recipe.lock_path(&self.config.lock_root);
                let latch =
                    LeaderLatch::new(&self.framework, &path, holder).map_err(|err| err.to_string())?;
                let events = latch.subscribe();
                latch.start().map_err(|err| err.to_string())?;
                let token = match latch.await_leadership_timeout(ACQUIRE_TIMEOUT).await {
                    Ok(token) => token,
                    Err(err) => {
                        let _ = latch.close(CloseMode::Silent).await;
                        return Err(err.to_string());
                    }
                };
                let Some(node) = latch.our_node_path() else {
                    let _ = latch.close(CloseMode::Silent).await;
                    return Err("leader without a node".to_owned());
                };
                Ok((Hold::Latch { latch, node, events: tokio::sync::Mutex::new(events) }, token))
            }
            Lock::Selector { turns, .. } => {
                let mut turns = turns.lock().await;
                match tokio::time::timeout(ACQUIRE_TIMEOUT, turns.recv()).await {
                    Ok(Some((leadership, done))) => {
                        let token = leadership.fencing_token();
                        Ok((Hold::Selector { leadership, done }, token))
                    }
                    Ok(None) => Err("the selector is closed".to_owned()),
                    Err(_) => Err(format!("no leadership within {ACQUIRE_TIMEOUT:?}")),
                }
            }
            Lock::Off => Ok((Hold::Off, 0)),
        }
    }

    /// A lease's fencing token: its node's creation zxid (what the Curator contender uses too).
    async fn lease_hold(&self, lease: Lease) -> Result<(Hold, i64), String> {
        let stat = self
            .framework
            .exists(lease.node_path(), Deadline::after(STEP_TIMEOUT))
            .await
            .map_err(|err| err.to_string())?;
        let token = stat.map(|stat| stat.czxid).unwrap_or(0);
        Ok((Hold::Lease(lease), token))
    }
}

impl Hold {
    /// Commits `op` only while this hold's node exists (one multi with a check of it, on the
    /// session that owns it); without locking, a plain one-op transaction.
    pub(super) async fn write(&self, framework: &Framework, op: Op) -> Outcome {
        let deadline = Deadline::after(STEP_TIMEOUT);
        let guarded = match &op {
            Op::CreateEphemeral(path) => {
                TransactionOp::Create { path: path.clone(), data: Vec::new(), mode: CreateMode::Ephemeral }
            }
            Op::SetData(path, data, version) => {
                TransactionOp::SetData { path: path.clone(), data: data.clone(), version: Some(*version) }
            }
            Op::Delete(path) => TransactionOp::Delete { path: path.clone(), version: None },
        };
        let locked = match self {
            Hold::Mutex(guard) => guard.write_guarded(&[guarded], deadline).await.map(drop),
            Hold::Read(guard) => guard.write_guarded(&[guarded], deadline).await.map(drop),
            Hold::Write(guard) => guard.write_guarded(&[guarded], deadline).await.map(drop),
            Hold::Lease(lease) => lease.write_guarded(&[guarded], deadline).await.map(drop),
            Hold::Selector { leadership, .. } => {
                let check = framework.transaction().check(leadership.node_path().to_owned(), None);
                return transaction_outcome(op.into_transaction(check).deadline(deadline).await, 1);
            }
            Hold::Latch { node, .. } => {
                return transaction_outcome(
                    op.into_transaction(framework.transaction().check(node.clone(), None))
                        .deadline(deadline)
                        .await,
                    1,
                );
            }
            Hold::Off => {
                return transaction_outcome(
                    op.into_transaction(framework.transaction()).deadline(deadline).await,
                    0,
                );
            }
        };
        match locked {
            Ok(()) => Outcome::Ok,
            Err(LockError::NodeLost { .. }) => Outcome::Lost,
            Err(LockError::GuardedWriteFailed { source, .. }) => Outcome::Failed(source),
            Err(err) => Outcome::Unknown(err.to_string()),
        }
    }

    /// Resolves when this hold can no longer be trusted (never without locking).
    pub(super) async fn lost(&self) {
        match self {
            Hold::Mutex(guard) => {
                guard.lost().await;
            }
            Hold::Lease(lease) => {
                lease.lost().await;
            }
            Hold::Read(guard) => {
                guard.lost().await;
            }
            Hold::Write(guard) => {
                guard.lost().await;
            }
            Hold::Latch { events, .. } => {
                let mut events = events.lock().await;
                loop {
                    match events.next().await {
                        Some(LeadershipEvent::IsLeader { .. }) => {}
                        Some(_) | None => return,
                    }
                }
            }
            Hold::Selector { leadership, .. } => {
                leadership.cancelled().await;
            }
            Hold::Off => std::future::pending().await,
        }
    }

    pub(super) async fn release(self) {
        // Errors (NodeLost after an expiry, ...) are expected under chaos; the checkers look at
        // what happened, not at what release says.
        match self {
            Hold::Mutex(guard) => drop(guard.release().await),
            Hold::Lease(lease) => drop(lease.release().await),
            Hold::Read(guard) => drop(guard.release().await),
            Hold::Write(guard) => drop(guard.release().await),
            Hold::Latch { latch, .. } => drop(latch.close(CloseMode::Silent).await),
            Hold::Selector { done, .. } => drop(done.send(())),
            Hold::Off => {}
        }
    }
}

impl Op {
    fn into_transaction(
        self,
        transaction: zk_recipes_framework::Transaction,
    ) -> zk_recipes_framework::Transaction {
        match self {
            Op::CreateEphemeral(path) => transaction.create(path, Vec::new(), CreateMode::Ephemeral),
            Op::SetData(path, data, version) => transaction.set_data(path, data, Some(version)),
            Op::Delete(path) => transaction.delete(path, None),
        }
    }
}

/// A transaction's outcome; `first_op` is the index of our write (after a check, 1).
fn transaction_outcome<T>(result: Result<T, FrameworkError>, first_op: usize) -> Outcome {
    match result {
        Ok(_) => Outcome::Ok,
        Err(FrameworkError::TransactionFailed { index, .. }) if index < first_op => Outcome::Lost,
        Err(FrameworkError::TransactionFailed { source, .. }) => Outcome::Failed(source),
        Err(FrameworkError::NodeLost { .. }) => Outcome::Lost,
        Err(err) => Outcome::Unknown(err.to_string()),
    }
}
