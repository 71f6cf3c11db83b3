//! Shared helpers for the framework's integration tests (real ZooKeeper servers).
#![allow(dead_code)]

use std::future::Future;
use std::time::Duration;

use zk_recipes_framework::{Framework, FrameworkBuilder};

/// The deadline on every await in these tests.
pub const STEP: Duration = Duration::from_secs(20);

pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}

/// Awaits `future` at most `STEP`, panicking with `what` if it does not finish.
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    within_for(STEP, what, future).await
}

pub async fn within_for<T>(limit: Duration, what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {limit:?} waiting for: {what}"),
    }
}

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

/// Polls `condition` every 20 ms until it returns true, at most `STEP`.
pub async fn eventually<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    within(what, async {
        while !condition().await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}
