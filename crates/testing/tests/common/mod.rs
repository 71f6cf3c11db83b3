//! Helpers shared by the integration tests.
#![allow(dead_code, unused_imports)]

use std::future::Future;
use std::time::Duration;

use zookeeper_client::{Acls, Client, CreateMode, SessionState, StateWatcher};

/// Deadline for one server or cluster start, including waiting for the process-wide slot while
/// other tests of this binary hold it.
pub const START: Duration = zk_recipes_testing::SERVER_START;
/// Deadline for one ordinary step (a request, a stop, a state change).
pub const STEP: Duration = Duration::from_secs(20);

/// Awaits `future` for at most `limit`, panicking with `what` when it does not finish.
pub async fn within<T>(limit: Duration, what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {limit:?}: {what}"),
    }
}

/// Connects with the given session timeout, within [`STEP`].
pub async fn connect(connect_string: &str, session_timeout: Duration) -> Client {
    within(
        STEP,
        "connecting",
        Client::connector().with_session_timeout(session_timeout).connect(connect_string),
    )
    .await
    .expect("connect")
}

/// Creates a persistent node, within [`STEP`].
pub async fn create(client: &Client, path: &str, data: &[u8]) {
    within(
        STEP,
        "creating a node",
        client.create(path, data, &CreateMode::Persistent.with_acls(Acls::anyone_all())),
    )
    .await
    .unwrap_or_else(|err| panic!("create {path}: {err}"));
}

/// Waits until `watcher` reports `wanted`; panics on another terminal state or after `limit`.
pub async fn wait_for_state(watcher: &mut StateWatcher, wanted: SessionState, limit: Duration) {
    within(limit, &format!("waiting for {wanted:?}"), async {
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
