//! The cache's background task: set the watch, load the tree, then re-read what the watch
//! reports; load again after every reset.
//!
//! Why the view converges: every read is sent after the watch event it answers was received,
//! and one session's requests are answered in order, so each read returns the node's state at or
//! after that event; reads are applied in the order they were sent. A load after a reset reads
//! every node after the new watch was set, so it sees everything the reset may have hidden; the
//! events queued behind it are re-read afterwards, newer still. A late older read of a node never
//! overwrites a newer one (`Store::apply` compares `mzxid`).

use std::collections::{BTreeMap, VecDeque};
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{BoxFuture, FutureExt};
use futures::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use tracing::{debug, info_span, warn, Instrument};
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::{
    path, Deadline, Error as FrameworkError, Framework, WatchEvent, DEFAULT_OPERATION_TIMEOUT,
};

use crate::node::CachedNode;
use crate::settings::Settings;
use crate::shared::Shared;

/// Reads of changed nodes in flight at most; past it, watch events wait.
const MAX_READS_IN_FLIGHT: usize = 1024;
/// The first pause between attempts after an error; it doubles after each failure.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// The longest pause between attempts after an error.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

pub(crate) async fn run(framework: Framework, shared: Arc<Shared>, settings: Settings) {
    let span = info_span!("cache", root = %settings.root);
    follow(framework, shared, settings).instrument(span).await;
}

async fn follow(framework: Framework, shared: Arc<Shared>, settings: Settings) {
    let mut backoff = Backoff::new(FIRST_BACKOFF, MAX_BACKOFF);
    let watch = loop {
        match framework.watch(&settings.root, settings.subtree, Deadline::never()).await {
            Ok(watch) => break watch,
            Err(FrameworkError::Closed) => return,
            // Trying again would not help: say so to whoever waits for the first load, and stop.
            Err(err @ FrameworkError::MissingFeature { .. }) => {
                warn!(%err, "the cache cannot follow this server: stopped");
                shared.failed.send_replace(Some(err));
                return;
            }
            Err(err) => {
                warn!(%err, "could not set the cache's watch; trying again");
                backoff.pause().await;
            }
        }
    };
    let mut watch_events = watch.into_stream();
    let mut load_needed = true;
    // Reads of changed nodes, applied in the order their events came: a read never waits for
    // the one before it to return (the server answers one session's requests in order anyway).
    let mut reads: FuturesOrdered<BoxFuture<'_, NodeRead>> = FuturesOrdered::new();
    loop {
        if load_needed {
            // Reads in flight answer events from before the reset: the load covers them.
            reads = FuturesOrdered::new();
            match load(&framework, &settings).await {
                Ok(fresh) => {
                    let nodes = fresh.len();
                    let changes = shared.replace_all(fresh);
                    shared.mark_initialized();
                    debug!(nodes, changes, "cache loaded");
                    load_needed = false;
                    backoff.reset();
                }
                Err(FrameworkError::Closed) => return,
                Err(err) => {
                    warn!(%err, "loading the cache failed; trying again");
                    backoff.pause().await;
                    continue;
                }
            }
        }
        tokio::select! {
            biased;
            Some(first) = reads.next(), if !reads.is_empty() => {
                // Apply every read already answered under one lock.
                let mut answered = vec![first];
                while let Some(Some(read)) = reads.next().now_or_never() {
                    answered.push(read);
                }
                let mut failed = None;
                shared.apply(|store, events| {
                    for (path, read) in answered {
                        match read {
                            Ok(found) => store.apply(&path, found, events),
                            Err(err) => failed = Some(err),
                        }
                    }
                });
                match failed {
                    None => {}
                    Some(FrameworkError::Closed) => return,
                    Some(err) => {
                        warn!(%err, "re-reading a changed node failed; loading the cache again");
                        backoff.pause().await;
                        load_needed = true;
                    }
                }
            }
            event = watch_events.next(), if reads.len() < MAX_READS_IN_FLIGHT => match event {
                None => return,
                // Everything is read again, after every event received so far.
                Some(WatchEvent::Reset) => load_needed = true,
                Some(WatchEvent::Created { path } | WatchEvent::Deleted { path } | WatchEvent::DataChanged { path }) => {
                    if settings.keeps(&path) {
                        let (framework, settings) = (&framework, &settings);
                        reads.push_back(Box::pin(async move {
                            let read = read_node(framework, settings, &path).await;
                            (path, read)
                        }));
                    }
                }
                // A single-node cache keeps no children; a subtree cache hears of each child.
                Some(WatchEvent::ChildrenChanged { .. }) => {}
                Some(other) => debug!(?other, "watch event ignored"),
            },
        }
    }
}

/// A changed node's path and what reading it found.
type NodeRead = (String, Result<Option<CachedNode>, FrameworkError>);

/// Reads the whole tree (what the settings keep), `load_concurrency` reads in flight.
async fn load(
    framework: &Framework,
    settings: &Settings,
) -> Result<BTreeMap<String, CachedNode>, FrameworkError> {
    // Collected first, then built in one go: a map built from sorted entries fills its nodes,
    // where one grown in order of arrival leaves them about half empty.
    let mut fresh = Vec::new();
    if !settings.keeps(&settings.root) {
        return Ok(BTreeMap::new());
    }
    let mut to_load = VecDeque::from([settings.root.clone()]);
    let mut in_flight = FuturesUnordered::new();
    loop {
        while in_flight.len() < settings.load_concurrency {
            let Some(node_path) = to_load.pop_front() else { break };
            in_flight.push(load_node(framework, settings, node_path));
        }
        let Some(loaded) = in_flight.next().await else { break };
        let (node_path, node, children) = loaded?;
        if let Some(node) = node {
            for child in children {
                let child_path = path::join(&node_path, &child);
                if settings.keeps(&child_path) {
                    to_load.push_back(child_path);
                }
            }
            fresh.push((node_path, node));
        }
    }
    Ok(BTreeMap::from_iter(fresh))
}

/// A node and, for a subtree cache, its children's names (only listed when it has any).
async fn load_node(
    framework: &Framework,
    settings: &Settings,
    node_path: String,
) -> Result<(String, Option<CachedNode>, Vec<String>), FrameworkError> {
    let node = read_node(framework, settings, &node_path).await?;
    let children = match &node {
        Some(found) if settings.subtree && found.stat.num_children > 0 => {
            match framework.children(&node_path, Deadline::after(DEFAULT_OPERATION_TIMEOUT)).await {
                Ok((names, _)) => names,
                // Deleted since: its events follow, and they are read after this load.
                Err(err) if err.is_no_node() => Vec::new(),
                Err(err) => return Err(err),
            }
        }
        _ => Vec::new(),
    };
    Ok((node_path, node, children))
}

/// The node at `node_path` now, or `None` if there is none.
async fn read_node(
    framework: &Framework,
    settings: &Settings,
    node_path: &str,
) -> Result<Option<CachedNode>, FrameworkError> {
    let deadline = Deadline::after(DEFAULT_OPERATION_TIMEOUT);
    if !settings.with_data {
        let stat = framework.exists(node_path, deadline).await?;
        return Ok(stat.map(|stat| CachedNode { stat, data: None }));
    }
    match framework.get_data(node_path, deadline).await {
        Ok(read) => {
            let data = if settings.compressed { gunzip(node_path, read.data) } else { read.data };
            Ok(Some(CachedNode { stat: read.stat, data: Some(Arc::from(data)) }))
        }
        Err(err) if err.is_no_node() => Ok(None),
        Err(err) => Err(err),
    }
}

/// Curator's `GzipCompressionProvider` format; data that is not gzip stays as it is.
fn gunzip(node_path: &str, stored: Vec<u8>) -> Vec<u8> {
    let mut plain = Vec::new();
    match flate2::read::GzDecoder::new(stored.as_slice()).read_to_end(&mut plain) {
        Ok(_) => plain,
        Err(err) => {
            warn!(path = node_path, %err, "node data is not gzip-compressed; cached as stored");
            stored
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    #[test]
    fn gzip_data_is_unpacked_and_anything_else_kept_as_stored() {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        encoder.write_all(b"hello").expect("compress");
        let packed = encoder.finish().expect("compress");
        assert_eq!(gunzip("/n", packed), b"hello");
        assert_eq!(gunzip("/n", b"plain".to_vec()), b"plain");
    }
}
