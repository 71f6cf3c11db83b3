//! kazoo 2.11's layout (`kazoo/recipe/lease.py`): kazoo's `Lock` on the lease path, the record
//! in `<path>/lease_holder` as `{"version": 1, "holder": ..., "end": "%Y-%m-%dT%H:%M:%S"}` (UTC).

use std::time::{Duration, Instant, SystemTime};

use zk_recipes_framework::zookeeper_client::{CreateMode, Stat};
use zk_recipes_framework::{path, Deadline, NodeData, TransactionOp, TransactionResult};
use zk_recipes_mutex::{Hold, MutexGuard};

use crate::error::{LeaseError, Result};
use crate::holder::{
    self, epoch_micros, from_epoch_secs, kazoo_decode, kazoo_encode, KazooRecord, LeaseHolder,
};
use crate::state::{HeldState, LeaseConfig};

/// The name of kazoo's lease record under the lease path.
pub const KAZOO_LEASE_HOLDER: &str = "lease_holder";

/// How long reading back a write whose reply was lost may take.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

fn holder_path(config: &LeaseConfig) -> String {
    path::join(&config.path, KAZOO_LEASE_HOLDER)
}

/// The clock readings a lease's end is computed from: our wall clock (what kazoo compares) and the
/// monotonic instant taken just before it (what our own view of the lease counts from).
struct Now {
    instant: Instant,
    micros: i64,
}

impl Now {
    fn read() -> Self {
        let instant = Instant::now();
        Self { instant, micros: epoch_micros(SystemTime::now()) }
    }

    /// kazoo's `(now + duration).strftime(...)`: the end, cut to whole seconds.
    fn end_secs(&self, duration: Duration) -> i64 {
        let duration_micros = i64::try_from(duration.as_micros()).unwrap_or(i64::MAX);
        self.micros.saturating_add(duration_micros).div_euclid(1_000_000)
    }

    /// When `end_secs` comes by our monotonic clock.
    fn until(&self, end_secs: i64) -> Instant {
        let left = end_secs.saturating_mul(1_000_000).saturating_sub(self.micros);
        self.instant + Duration::from_micros(u64::try_from(left).unwrap_or(0))
    }
}

async fn read_record(config: &LeaseConfig, deadline: Deadline) -> Result<Option<NodeData>> {
    match config.framework.get_data(&holder_path(config), deadline).await {
        Ok(read) => Ok(Some(read)),
        Err(err) if err.is_no_node() => Ok(None),
        Err(err) => Err(err.into()),
    }
}

fn decode(config: &LeaseConfig, data: &[u8]) -> Result<KazooRecord> {
    kazoo_decode(data).map_err(|reason| LeaseError::Malformed { path: holder_path(config), reason })
}

pub(crate) async fn acquire(config: &LeaseConfig, lock: MutexGuard, deadline: Deadline) -> Result<HeldState> {
    let outcome = take(config, &lock, deadline).await;
    if let Err(err) = release_lock(lock).await {
        tracing::debug!(%err, "releasing kazoo's lock failed; the framework's cleanup worker deletes its node");
    }
    outcome
}

/// kazoo's `_attempt_obtaining`, under its lock: free, ended, or ours by identifier, it becomes
/// ours.
async fn take(config: &LeaseConfig, lock: &MutexGuard, deadline: Deadline) -> Result<HeldState> {
    let record_path = holder_path(config);
    let now = Now::read();
    let existing = read_record(config, deadline).await?;
    if let Some(read) = &existing {
        match decode(config, &read.data)? {
            KazooRecord::OtherVersion(version) => {
                return Err(LeaseError::UnknownVersion { path: config.path.clone(), version });
            }
            KazooRecord::Current { holder, end_secs } => {
                if holder != config.identifier && now.micros < end_secs.saturating_mul(1_000_000) {
                    let holder = LeaseHolder {
                        identifier: holder,
                        end: Some(from_epoch_secs(end_secs)),
                        duration: None,
                        fencing_token: read.stat.czxid,
                    };
                    return Err(LeaseError::Held { path: config.path.clone(), holder: Box::new(holder) });
                }
            }
        }
    }
    let end_secs = now.end_secs(config.duration);
    let data = kazoo_encode(&config.identifier, end_secs);
    // kazoo deletes and creates; we do both in one transaction guarded by the lock, so a failure
    // in between leaves the old record, never none.
    let mut ops = Vec::with_capacity(2);
    if let Some(read) = &existing {
        ops.push(TransactionOp::Delete { path: record_path.clone(), version: Some(read.stat.version) });
    }
    ops.push(TransactionOp::Create {
        path: record_path.clone(),
        data: data.clone(),
        mode: CreateMode::Persistent,
    });
    let stat = match lock.write_guarded(&ops, deadline).await {
        Ok(results) => match results.last() {
            Some(TransactionResult::Created { stat, .. }) if !stat.is_invalid() => *stat,
            _ => record_stat(config, &data, deadline).await?,
        },
        // Sent once, so after a lost reply it may have been applied: read it back.
        Err(err) if err.is_retryable() || err.is_timeout() => match written(config, &data).await {
            Some(stat) => stat,
            None => return Err(err.into()),
        },
        Err(err) => return Err(err.into()),
    };
    tracing::debug!(czxid = stat.czxid, end = %holder::format_utc(end_secs), "kazoo lease taken");
    Ok(HeldState {
        valid_until: now.until(end_secs),
        fencing_token: stat.czxid,
        data,
        end: Some(from_epoch_secs(end_secs)),
        lost: None,
    })
}

/// The stat of the record we just wrote, for servers that send none in a transaction.
async fn record_stat(config: &LeaseConfig, data: &[u8], deadline: Deadline) -> Result<Stat> {
    match read_record(config, deadline).await? {
        Some(read) if read.data == data => Ok(read.stat),
        _ => Err(LeaseError::Lost { path: config.path.clone() }),
    }
}

/// The stat of the record if it holds exactly `data` (a write whose reply was lost was applied);
/// `None` if it does not, or if that cannot be read (then the record, if ours, ends at its end).
async fn written(config: &LeaseConfig, data: &[u8]) -> Option<Stat> {
    match read_record(config, Deadline::after(RESOLVE_TIMEOUT)).await {
        Ok(Some(read)) if read.data == data => Some(read.stat),
        Ok(_) => None,
        Err(err) => {
            tracing::warn!(%err, "could not tell whether a lease record write was applied; if it was, it ends at its end");
            None
        }
    }
}

async fn release_lock(lock: MutexGuard) -> Result<()> {
    Ok(lock.release().await?)
}

/// Whether the record is still the one we hold: the same `czxid` (anyone else taking it, kazoo's
/// renewal included, creates it again) and our identifier. Its end may differ from the one we
/// last knew, after a renew whose reply was lost or that was cancelled.
fn is_ours(config: &LeaseConfig, state: &HeldState, read: &NodeData) -> bool {
    read.stat.czxid == state.fencing_token
        && matches!(kazoo_decode(&read.data), Ok(KazooRecord::Current { holder, .. }) if holder == config.identifier)
}

/// Takes kazoo's lock, runs `write` with the record if it is still ours, releases the lock.
async fn while_ours<T>(
    config: &LeaseConfig,
    state: &HeldState,
    write: impl AsyncFnOnce(&MutexGuard, NodeData, Deadline) -> Result<T>,
) -> Result<Option<T>> {
    let deadline = Deadline::after(config.timeout);
    let mutex = config.mutex.as_ref().expect("a kazoo-layout lease has kazoo's lock");
    let lock = mutex.lock_until(deadline).await?;
    let outcome: Result<Option<T>> = async {
        match read_record(config, deadline).await? {
            Some(read) if is_ours(config, state, &read) => Ok(Some(write(&lock, read, deadline).await?)),
            _ => Ok(None),
        }
    }
    .await;
    let released = release_lock(lock).await;
    let outcome = outcome?;
    released?;
    Ok(outcome)
}

pub(crate) async fn renew(config: &LeaseConfig, state: &HeldState) -> Result<HeldState> {
    let renewed = while_ours(config, state, async |lock, read, deadline| {
        let now = Now::read();
        let end_secs = now.end_secs(config.duration);
        let data = kazoo_encode(&config.identifier, end_secs);
        let ops = [TransactionOp::SetData {
            path: holder_path(config),
            data: data.clone(),
            version: Some(read.stat.version),
        }];
        match lock.write_guarded(&ops, deadline).await {
            Ok(_) => {}
            // Sent once: after a lost reply, read it back.
            Err(err) if err.is_retryable() || err.is_timeout() => match written(config, &data).await {
                Some(stat) if stat.czxid == state.fencing_token => {}
                _ => return Err(err.into()),
            },
            Err(err) => return Err(err.into()),
        }
        Ok(HeldState {
            valid_until: now.until(end_secs),
            data,
            end: Some(from_epoch_secs(end_secs)),
            ..state.clone()
        })
    })
    .await?;
    renewed.ok_or_else(|| LeaseError::Lost { path: config.path.clone() })
}

pub(crate) async fn release(config: &LeaseConfig, state: &HeldState) -> Result<()> {
    let deleted = while_ours(config, state, async |lock, read, deadline| {
        let ops = [TransactionOp::Delete { path: holder_path(config), version: Some(read.stat.version) }];
        lock.write_guarded(&ops, deadline).await?;
        Ok(())
    })
    .await?;
    if deleted.is_none() {
        tracing::debug!("the kazoo lease record is no longer ours: nothing to release");
    }
    Ok(())
}

pub(crate) async fn holder(config: &LeaseConfig, deadline: Deadline) -> Result<Option<LeaseHolder>> {
    let Some(read) = read_record(config, deadline).await? else {
        return Ok(None);
    };
    match decode(config, &read.data)? {
        KazooRecord::OtherVersion(version) => {
            Err(LeaseError::UnknownVersion { path: config.path.clone(), version })
        }
        KazooRecord::Current { holder, end_secs } => Ok(Some(LeaseHolder {
            identifier: holder,
            end: Some(from_epoch_secs(end_secs)),
            duration: None,
            fencing_token: read.stat.czxid,
        })),
    }
}
