//! The native layout: one `PERSISTENT_WITH_TTL` node at the lease path (see the crate docs).

use std::time::{Duration, Instant};

use zk_recipes_framework::zookeeper_client;
use zk_recipes_framework::{Deadline, Error as FrameworkError, NodeData, ParentMode};

use crate::error::{LeaseError, Result};
use crate::holder::{LeaseHolder, NativeRecord};
use crate::state::{HeldState, LeaseConfig};

/// How long an acquire whose outcome stayed unknown may take to find and delete its node.
const RESOLVE_TIMEOUT: Duration = Duration::from_secs(5);

/// The node's TTL: the duration rounded up to whole milliseconds (the server counts in them), so
/// that the server never ends the node before the holder's view of the lease ends.
fn ttl(duration: Duration) -> Duration {
    let millis = duration.as_nanos().div_ceil(1_000_000);
    Duration::from_millis(u64::try_from(millis).unwrap_or(u64::MAX))
}

fn is_bad_version(err: &FrameworkError) -> bool {
    matches!(err, FrameworkError::ZooKeeper(zookeeper_client::Error::BadVersion))
}

pub(crate) async fn acquire(config: &LeaseConfig, deadline: Deadline) -> Result<HeldState> {
    let record = NativeRecord {
        holder: config.identifier.clone(),
        duration_ms: u64::try_from(config.duration.as_millis()).unwrap_or(u64::MAX),
        attempt: uuid::Uuid::new_v4().simple().to_string(),
    };
    let data = record.encode();
    // Taken before the first create is sent: whichever try made the node, the server started
    // its TTL after this instant.
    let sent_after = Instant::now();
    let valid_until = sent_after + config.duration;
    let outcome = take(config, &data, deadline).await;
    let state = |stat: zookeeper_client::Stat| HeldState {
        valid_until,
        fencing_token: stat.czxid,
        data: data.clone(),
        end: None,
        lost: None,
    };
    match outcome {
        Ok(stat) => {
            tracing::debug!(czxid = stat.czxid, "lease taken");
            Ok(state(stat))
        }
        Err(err @ (LeaseError::Held { .. } | LeaseError::Malformed { .. })) => Err(err),
        Err(err) => {
            // The create may have been applied: find our node and delete it, while it cannot yet
            // be anyone else's.
            delete_if_ours(config, &data, valid_until).await;
            Err(err)
        }
    }
}

/// Creates the node; a `NodeExists` is ours (a retried create meeting its own node) if it holds
/// our data, else another holder's.
async fn take(config: &LeaseConfig, data: &[u8], deadline: Deadline) -> Result<zookeeper_client::Stat> {
    loop {
        let created = config
            .framework
            .create(&config.path)
            .ttl(ttl(config.duration))
            .data(data)
            .creating_parents(ParentMode::Container)
            .deadline(deadline)
            .await;
        match created {
            Ok(created) => return Ok(created.stat),
            Err(err) if err.is_node_exists() => match config.framework.get_data(&config.path, deadline).await
            {
                Ok(read) if read.data == data => return Ok(read.stat),
                Ok(read) => {
                    let holder = read_holder(config, &read.data, read.stat.czxid)?;
                    return Err(LeaseError::Held { path: config.path.clone(), holder: Box::new(holder) });
                }
                // It ended between the create and the read: try again.
                Err(err) if err.is_no_node() => continue,
                Err(err) => return Err(err.into()),
            },
            Err(err) => return Err(err.into()),
        }
    }
}

/// Deletes the node if it holds `data` (ours), while `valid_until` has not passed (so the server
/// cannot have reaped it and let another holder create a node of the same version). Best effort.
async fn delete_if_ours(config: &LeaseConfig, data: &[u8], valid_until: Instant) {
    let deadline = Deadline::after(RESOLVE_TIMEOUT).min(Some(valid_until.into()));
    let read = match config.framework.get_data(&config.path, deadline).await {
        Ok(read) if read.data == data => read,
        Ok(_) => return,
        Err(err) if err.is_no_node() => return,
        Err(err) => {
            tracing::warn!(%err, "could not tell whether a failed acquire created the lease node; its TTL ends it");
            return;
        }
    };
    let deleted =
        config.framework.delete(&config.path).version(read.stat.version).quietly().deadline(deadline).await;
    match deleted {
        Ok(()) => tracing::debug!("deleted the node of an acquire that did not complete"),
        Err(err) => tracing::warn!(%err, "could not delete the node of a failed acquire; its TTL ends it"),
    }
}

/// Reads the node: its data and stat if it is still the one we hold (our `czxid`, our data).
async fn read_ours(config: &LeaseConfig, state: &HeldState, deadline: Deadline) -> Result<Option<NodeData>> {
    match config.framework.get_data(&config.path, deadline).await {
        Ok(read) if read.stat.czxid == state.fencing_token && read.data == state.data => Ok(Some(read)),
        Ok(_) => Ok(None),
        Err(err) if err.is_no_node() => Ok(None),
        Err(err) => Err(err.into()),
    }
}

pub(crate) async fn renew(config: &LeaseConfig, state: &HeldState) -> Result<HeldState> {
    let lost = || LeaseError::Lost { path: config.path.clone() };
    let sent_after = Instant::now();
    // Never sent once the lease may have ended: the node could be another holder's by then.
    let deadline = Deadline::after(config.timeout).min(Some(state.valid_until.into()));
    let renewed = || HeldState { valid_until: sent_after + config.duration, ..state.clone() };
    // Read first: a node made again by another holder starts at version 0 as ours did, so a
    // versioned set alone could land on theirs. The read leaves one round trip for that, and
    // only for a node deleted by hand (the server cannot reap ours while it is valid).
    let Some(read) = read_ours(config, state, deadline).await? else {
        return Err(lost());
    };
    match config.framework.set_data(&config.path, &state.data, Some(read.stat.version), deadline).await {
        Ok(stat) if stat.czxid == state.fencing_token => Ok(renewed()),
        Ok(_) => Err(lost()),
        Err(err) if err.is_no_node() => Err(lost()),
        // A retried set meeting its own write, or someone else's node.
        Err(err) if is_bad_version(&err) => match read_ours(config, state, deadline).await? {
            Some(_) => Ok(renewed()),
            None => Err(lost()),
        },
        Err(err) => Err(err.into()),
    }
}

pub(crate) async fn release(config: &LeaseConfig, state: &HeldState) -> Result<()> {
    if Instant::now() >= state.valid_until {
        tracing::debug!("the lease has ended: nothing to release");
        return Ok(());
    }
    let deadline = Deadline::after(config.timeout).min(Some(state.valid_until.into()));
    // Read first, for the reason renew does; a `BadVersion` (a cancelled renew moved our
    // version on between the read and the delete) reads again.
    for _ in 0..2 {
        let Some(read) = read_ours(config, state, deadline).await? else {
            tracing::debug!("the lease node is no longer ours: nothing to release");
            return Ok(());
        };
        let deleted = config
            .framework
            .delete(&config.path)
            .version(read.stat.version)
            .quietly()
            .deadline(deadline)
            .await;
        match deleted {
            Ok(()) => return Ok(()),
            Err(err) if is_bad_version(&err) => continue,
            Err(err) => return Err(err.into()),
        }
    }
    Err(LeaseError::Lost { path: config.path.clone() })
}

pub(crate) async fn holder(config: &LeaseConfig, deadline: Deadline) -> Result<Option<LeaseHolder>> {
    match config.framework.get_data(&config.path, deadline).await {
        Ok(read) => Ok(Some(read_holder(config, &read.data, read.stat.czxid)?)),
        Err(err) if err.is_no_node() => Ok(None),
        Err(err) => Err(err.into()),
    }
}

fn read_holder(config: &LeaseConfig, data: &[u8], czxid: i64) -> Result<LeaseHolder> {
    let record = NativeRecord::decode(data)
        .map_err(|reason| LeaseError::Malformed { path: config.path.clone(), reason })?;
    Ok(LeaseHolder {
        identifier: record.holder,
        end: None,
        duration: Some(Duration::from_millis(record.duration_ms)),
        fencing_token: czxid,
    })
}
