//! Waiting for a zookeeper-client session state (the proxy and server tests).

use std::time::Duration;

use zk_recipes_testing::within_for;
use zookeeper_client::{SessionState, StateWatcher};

/// Waits until `watcher` reports `wanted`; panics on another terminal state or after `limit`.
pub async fn wait_for_state(watcher: &mut StateWatcher, wanted: SessionState, limit: Duration) {
    within_for(limit, &format!("waiting for {wanted:?}"), async {
        loop {
            let state = watcher.changed().await;
            if state == wanted {
                return;
            }
            assert!(!state.is_terminated(), "reached {state:?} while waiting for {wanted:?}");
        }
    })
    .await
}
