//! The queue tests' own helpers, beside the shared ones of `zk_recipes_test_support` (re-exported
//! here): a server with a connected framework, and `children` sorted.

use std::time::Duration;

use zk_recipes_framework::{zookeeper_client, Deadline, Framework};
pub use zk_recipes_test_support::*;
use zk_recipes_testing::TestingServer;

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

/// The children of `path`, sorted (empty if it does not exist); the shared `children` keeps the
/// server's order.
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
