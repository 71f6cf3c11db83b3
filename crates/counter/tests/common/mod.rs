//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

#[path = "../../../framework/tests/common/shared.rs"]
mod shared;

use std::time::Duration;

pub use shared::{builder, children, lost_then_reconnected, server_and_framework, step};
use zk_recipes_framework::{Deadline, Framework};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};
use zk_recipes_testing::{FaultProxy, TestingServer};

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
