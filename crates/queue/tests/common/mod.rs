//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

#[path = "../../../framework/tests/common/shared.rs"]
mod shared;

use std::time::Duration;

pub use shared::{builder, until_state};
use zk_recipes_framework::{zookeeper_client, Deadline, Framework};
pub use zk_recipes_testing::{
    eventually, init_tracing, within, within_for, TestingServer, SERVER_START, STEP,
};

/// A started server and a connected framework on it.
pub async fn server_and_framework() -> (TestingServer, Framework) {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = connect(&server).await;
    (server, framework)
}

/// Another connected framework (its own session) on `server`.
pub async fn connect(server: &TestingServer) -> Framework {
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    framework
}

/// The children of `path` (empty if it does not exist).
pub async fn children(framework: &Framework, path: &str) -> Vec<String> {
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    match within("list", session.client().list_children(path)).await {
        Ok(mut children) => {
            children.sort();
            children
        }
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(err) => panic!("list {path}: {err}"),
    }
}

/// The data and stat of `path`.
pub async fn data(framework: &Framework, path: &str) -> (Vec<u8>, zookeeper_client::Stat) {
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    within("get data", session.client().get_data(path))
        .await
        .unwrap_or_else(|err| panic!("get {path}: {err}"))
}

/// Waits until `path` has no children (lock dirs at the end of a test).
pub async fn no_children_left(framework: &Framework, path: &str) {
    let what = format!("no children left under {path}");
    eventually(&what, || async { children(framework, path).await.is_empty() }).await;
}
