//! Test helpers every crate's integration tests share: the framework preset and a plain listing.
//!
//! They live with the framework's tests, the lowest crate that has a `Framework` (the testing
//! crate cannot depend on the framework, which dev-depends on it). The other crates' `tests/common`
//! include this file with `#[path = "../../../framework/tests/common/shared.rs"] mod shared;`.
#![allow(dead_code, unused_imports)]

use std::time::Duration;

use zk_recipes_framework::retry::ExponentialBackoffRetry;
use zk_recipes_framework::{zookeeper_client, Deadline, Framework, FrameworkBuilder};
use zk_recipes_testing::{within, within_for, FaultProxy, TestingServer, SERVER_START, STEP};

/// A builder with test-friendly settings: the given session timeout, a 5 s connection timeout,
/// fast retries (from 50 ms, at most 500 ms apart, 10 times).
pub fn builder(connect_string: &str, session_timeout: Duration) -> FrameworkBuilder {
    Framework::builder(connect_string)
        .session_timeout(session_timeout)
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(
            ExponentialBackoffRetry::new(Duration::from_millis(50), 10)
                .with_max_sleep(Duration::from_millis(500)),
        )
}

/// The children of `path` in the server's order (none if it does not exist): one listing on the
/// current session, each step within [`STEP`]; panics on any other error.
pub async fn children(framework: &Framework, path: &str) -> Vec<String> {
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    match within("list", session.client().list_children(path)).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(err) => panic!("list {path}: {err}"),
    }
}

/// Waits (within [`STEP`]) until `events` shows the session lost and then a new session: `Lost`,
/// then `Reconnected`.
pub async fn lost_then_reconnected(events: &mut zk_recipes_framework::ConnectionEvents) {
    use zk_recipes_framework::ConnectionState;
    within("Lost, then a new session", async {
        let mut lost = false;
        while let Some(update) = events.next().await {
            lost |= update.state() == ConnectionState::Lost;
            if lost && update.state() == ConnectionState::Reconnected {
                return;
            }
        }
        panic!("the framework closed");
    })
    .await;
}

/// Waits (within [`STEP`]) until `events` shows `state` (`Lost`, `Reconnected`, …).
pub async fn until_state(
    events: &mut zk_recipes_framework::ConnectionEvents,
    state: zk_recipes_framework::ConnectionState,
) {
    within(&format!("{state:?}"), async {
        while let Some(update) = events.next().await {
            if update.state() == state {
                return;
            }
        }
        panic!("the framework closed");
    })
    .await;
}

/// A deadline of one test step.
pub fn step() -> Deadline {
    Deadline::after(STEP)
}

/// A server and a framework on it (10 s sessions).
pub async fn server_and_framework() -> (TestingServer, Framework) {
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    (server, framework)
}

/// The node's data and version on the server, if it exists.
pub async fn on_server(framework: &Framework, path: &str) -> Option<(Vec<u8>, i32)> {
    match within("get data", framework.get_data(path, step())).await {
        Ok(read) => Some((read.data, read.stat.version)),
        Err(err) if err.is_no_node() => None,
        Err(err) => panic!("get data {path}: {err}"),
    }
}

/// A server with a fault proxy in front: a framework through the proxy (with `session_timeout`)
/// and an observer connected directly.
pub async fn proxied(session_timeout: Duration) -> (TestingServer, FaultProxy, Framework, Framework) {
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), session_timeout).start().expect("framework");
    within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    let observer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    (server, proxy, framework, observer)
}

/// Closes every framework.
pub async fn close_all(frameworks: impl IntoIterator<Item = Framework>) {
    for framework in frameworks {
        within("close", framework.close()).await;
    }
}
