//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

use std::time::Duration;

use zk_recipes_framework::{Framework, FrameworkBuilder};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};

/// A builder with test-friendly settings: short session timeout, fast retries.
pub fn builder(connect_string: &str, session_timeout: Duration) -> FrameworkBuilder {
    Framework::builder(connect_string)
        .session_timeout(session_timeout)
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(
            zk_recipes_framework::retry::ExponentialBackoffRetry::new(Duration::from_millis(50), 10)
                .with_max_sleep(Duration::from_millis(500)),
        )
}
