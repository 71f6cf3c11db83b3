//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

#[path = "../../../framework/tests/common/shared.rs"]
mod shared;

use std::collections::BTreeMap;

use zk_recipes_cache::{CacheEvent, CacheEvents};
use zk_recipes_framework::{path, Deadline, Framework};

pub use shared::{builder, children, lost_then_reconnected};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};

/// Every node at and below `root` on the server now: path -> (mzxid, data), read directly.
pub async fn listing(framework: &Framework, root: &str) -> BTreeMap<String, (i64, Vec<u8>)> {
    let mut found = BTreeMap::new();
    let mut to_read = vec![root.to_owned()];
    while let Some(node) = to_read.pop() {
        let read = within("get data", framework.get_data(&node, Deadline::after(STEP))).await;
        match read {
            Ok(read) => {
                found.insert(node.clone(), (read.stat.mzxid, read.data));
                for child in children(framework, &node).await {
                    to_read.push(path::join(&node, &child));
                }
            }
            Err(err) if err.is_no_node() => {}
            Err(err) => panic!("get data {node}: {err}"),
        }
    }
    found
}

/// The next event, within [`STEP`].
pub async fn next_event(events: &mut CacheEvents) -> CacheEvent {
    within("the next cache event", events.next()).await.expect("the cache is running")
}

/// A short form of an event, for assertions: `+path`, `~path`, `-path`, `initialized`.
pub fn short(event: &CacheEvent) -> String {
    match event {
        CacheEvent::Created { path, .. } => format!("+{path}"),
        CacheEvent::Changed { path, .. } => format!("~{path}"),
        CacheEvent::Deleted { path, .. } => format!("-{path}"),
        CacheEvent::Initialized => "initialized".to_owned(),
        other => format!("{other:?}"),
    }
}

/// Events (short forms) up to and including the first for which `last` holds.
pub async fn events_until(events: &mut CacheEvents, last: impl Fn(&CacheEvent) -> bool) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let event = next_event(events).await;
        seen.push(short(&event));
        if last(&event) {
            return seen;
        }
    }
}
