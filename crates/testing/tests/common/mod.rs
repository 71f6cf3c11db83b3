//! Helpers for the proxy, server and cluster tests: a zookeeper-client session and a node on it,
//! each within a test step. The deadlines themselves are the crate's own (`within`, `STEP`).

use std::time::Duration;

use zk_recipes_testing::within;
use zookeeper_client::{Acls, Client, CreateMode};

/// Connects with the given session timeout, within [`STEP`](zk_recipes_testing::STEP).
pub async fn connect(connect_string: &str, session_timeout: Duration) -> Client {
    within("connecting", Client::connector().with_session_timeout(session_timeout).connect(connect_string))
        .await
        .expect("connect")
}

/// Creates a persistent node, within [`STEP`](zk_recipes_testing::STEP).
pub async fn create(client: &Client, path: &str, data: &[u8]) {
    within(
        "creating a node",
        client.create(path, data, &CreateMode::Persistent.with_acls(Acls::anyone_all())),
    )
    .await
    .unwrap_or_else(|err| panic!("create {path}: {err}"));
}
