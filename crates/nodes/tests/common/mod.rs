//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

#[path = "../../../framework/tests/common/shared.rs"]
mod shared;

pub use shared::{builder, children, lost_then_reconnected};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};

use std::time::Duration;

use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_testing::TestingServer;

/// A deadline one [`STEP`] away.
pub fn step() -> Deadline {
    Deadline::after(STEP)
}

/// A server and a framework on it with a 10 s session.
pub async fn server_and_framework() -> (TestingServer, Framework) {
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    (server, framework)
}
