//! The cache tests' own helpers (reading cache events), beside the shared ones of
//! `zk_recipes_test_support` (re-exported here).

use zk_recipes_cache::{CacheEvent, CacheEvents};

pub use zk_recipes_test_support::*;

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
