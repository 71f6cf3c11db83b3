//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

#[path = "../../../framework/tests/common/shared.rs"]
mod shared;

use std::time::Duration;

pub use shared::{builder, children, lost_then_reconnected};
use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_testing::TestingServer;
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};

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
