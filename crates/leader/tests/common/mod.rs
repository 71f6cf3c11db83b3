//! The leader tests' own helpers, for every test binary: a framework with an error policy and
//! `children` through the framework's retries (a listing that outlives a server restart), beside
//! the shared ones of `zk_recipes_test_support` (re-exported here). The marker protocol is in
//! `checks`, the latch contenders built on it in `contender`.

use std::time::Duration;

use zk_recipes_framework::zookeeper_client;
use zk_recipes_framework::{Deadline, ErrorPolicy, Framework};
pub use zk_recipes_test_support::*;

/// A started framework with `policy`.
pub fn framework(connect_string: &str, session_timeout: Duration, policy: ErrorPolicy) -> Framework {
    builder(connect_string, session_timeout).error_policy(policy).start().expect("framework")
}

/// The children of `path` (none if it does not exist).
pub async fn children(framework: &Framework, path: &str) -> Vec<String> {
    framework
        .retry(Deadline::after(STEP), |session| async move {
            match session.client().list_children(path).await {
                Ok(children) => Ok(children),
                Err(zookeeper_client::Error::NoNode) => Ok(Vec::new()),
                Err(err) => Err(err.into()),
            }
        })
        .await
        .expect("list children")
}
