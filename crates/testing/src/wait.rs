//! Deadlines for tests: every await in a test that talks to a server gets one.

use std::future::Future;
use std::time::Duration;

/// The default deadline for one step of a test (a connect, a lock, a release): generous, since
/// the machine is shared, but finite.
pub const STEP: Duration = Duration::from_secs(20);

/// How long a test may wait to start its servers: the [`crate::ServerSlot`] is held by one test at
/// a time, and the tests before it in the same binary may run for minutes.
pub const SERVER_START: Duration = Duration::from_secs(15 * 60);

/// Awaits `future` at most [`STEP`]; panics naming `what` if it does not finish in time.
///
/// ```no_run
/// # async fn demo() {
/// use zk_recipes_testing::{within, within_for, TestingServer, SERVER_START};
/// let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
/// let mode = within("srvr", server.mode()).await.expect("mode");
/// # }
/// ```
pub async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    within_for(STEP, what, future).await
}

/// Awaits `future` at most `limit`; panics naming `what` if it does not finish in time.
pub async fn within_for<T>(limit: Duration, what: &str, future: impl Future<Output = T>) -> T {
    match tokio::time::timeout(limit, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {limit:?} waiting for: {what}"),
    }
}

/// Polls `condition` every 20 ms until it holds, at most [`STEP`]; panics naming `what` otherwise.
///
/// ```no_run
/// # async fn demo(server: zk_recipes_testing::TestingServer) {
/// zk_recipes_testing::eventually("no watches left", || async {
///     server.watch_count().await.expect("wchc") == 0
/// })
/// .await;
/// # }
/// ```
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

/// Installs a `tracing` subscriber for tests once (level from `RUST_LOG`, default `warn`), writing
/// through the test harness so output shows only for failing tests.
pub fn init_tracing() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_test_writer()
        .try_init();
}
