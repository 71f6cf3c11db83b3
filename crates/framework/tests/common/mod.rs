//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

mod shared;

pub use shared::{
    builder, children, close_all, lost_then_reconnected, on_server, proxied, server_and_framework, step,
    until_state,
};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};

/// The next transition's state, session id and generation (panics on a lag or the end).
pub async fn next_state(
    events: &mut zk_recipes_framework::ConnectionEvents,
) -> (zk_recipes_framework::ConnectionState, i64, u64) {
    let event = next_event(events).await;
    (event.state, event.session_id.0, event.generation)
}

/// The next transition (a lag fails the test).
pub async fn next_event(
    events: &mut zk_recipes_framework::ConnectionEvents,
) -> zk_recipes_framework::ConnectionEvent {
    match within("the next connection event", events.next()).await {
        Some(zk_recipes_framework::ConnectionUpdate::Changed(event)) => event,
        other => panic!("expected a connection event, got {other:?}"),
    }
}
