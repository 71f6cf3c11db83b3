//! Deadlines for tests: every await in a test that talks to a server gets one.

use std::future::{Future, IntoFuture};
use std::sync::Arc;
use std::time::Duration;

/// The default deadline for one step of a test (a connect, a lock, a release): generous, since
/// the machine is shared, but finite.
pub const STEP: Duration = Duration::from_secs(20);

/// How long a test may wait to start its servers: the [`crate::ServerSlot`] is held by one test at
/// a time, and the tests before it in the same binary may run for minutes.
pub const SERVER_START: Duration = Duration::from_secs(15 * 60);

/// Awaits `future` at most [`STEP`]; panics naming `what` if it does not finish in time.
///
/// # Cancel safety
/// Dropping it drops `future` where it stands: a cancelled call loses what `future`'s own cancel
/// safety says.
///
/// ```no_run
/// # async fn demo() {
/// use zk_recipes_testing::{within, within_for, TestingServer, SERVER_START};
/// let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
/// let mode = within("srvr", server.mode()).await.expect("mode");
/// # }
/// ```
pub async fn within<T>(what: &str, future: impl IntoFuture<Output = T>) -> T {
    within_for(STEP, what, future).await
}

/// Awaits `future` (anything `.await` takes, such as a builder that is a future) at most `limit`;
/// panics naming `what` if it does not finish in time.
///
/// # Cancel safety
/// Dropping it drops `future` where it stands: a cancelled call loses what `future`'s own cancel
/// safety says.
pub async fn within_for<T>(limit: Duration, what: &str, future: impl IntoFuture<Output = T>) -> T {
    match tokio::time::timeout(limit, future).await {
        Ok(value) => value,
        Err(_) => panic!("timed out after {:.1} s waiting for: {what}", limit.as_secs_f64()),
    }
}

/// Polls `condition` every 20 ms until it holds, at most [`STEP`]; panics naming `what` otherwise.
///
/// # Cancel safety
/// Dropping it drops the `condition` future being polled, if any; it only waits otherwise.
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

/// Captures what `tracing` logs at WARN and above on this thread while the returned guard lives
/// (a thread-local default subscriber, so run it in a current-thread test: `#[tokio::test]`), for
/// tests that assert a warning is — or is not — logged. Installs [`init_tracing`]'s global
/// subscriber first, so that other tests' threads never make a callsite skip this one.
///
/// # Example
/// ```
/// let logs = zk_recipes_testing::capture_warnings();
/// tracing::warn!(path = "/app/lock", "something to see");
/// assert!(logs.contains("something to see"));
/// assert_eq!(logs.count("/app/lock"), 1);
/// ```
pub fn capture_warnings() -> CapturedLogs {
    // With no global subscriber, a callsite first reached on another thread may cache "never
    // interesting" and skip this thread's subscriber too: install the global one first.
    init_tracing();
    let buffer = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let writer = CaptureWriter(buffer.clone());
    let subscriber = tracing_subscriber::fmt()
        .with_max_level(tracing::Level::WARN)
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .finish();
    let guard = tracing::subscriber::set_default(subscriber);
    CapturedLogs { buffer, _guard: guard }
}

/// What [`capture_warnings`] captured; capturing stops when this is dropped.
///
/// # Example
/// ```
/// let logs = zk_recipes_testing::capture_warnings();
/// tracing::warn!("first");
/// tracing::info!("below WARN: not captured");
/// tracing::warn!("second");
/// assert_eq!(logs.text().lines().count(), 2);
/// assert!(logs.contains("second") && !logs.contains("below WARN"));
/// drop(logs); // capturing stops
/// ```
#[must_use = "capturing stops when this is dropped"]
pub struct CapturedLogs {
    buffer: Arc<parking_lot::Mutex<Vec<u8>>>,
    _guard: tracing::subscriber::DefaultGuard,
}

impl CapturedLogs {
    /// Everything captured so far.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.buffer.lock()).into_owned()
    }

    /// Whether `needle` was logged.
    pub fn contains(&self, needle: &str) -> bool {
        self.text().contains(needle)
    }

    /// How many captured lines contain `needle`.
    pub fn count(&self, needle: &str) -> usize {
        self.text().lines().filter(|line| line.contains(needle)).count()
    }
}

impl std::fmt::Debug for CapturedLogs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CapturedLogs").field("text", &self.text()).finish()
    }
}

#[derive(Clone)]
struct CaptureWriter(Arc<parking_lot::Mutex<Vec<u8>>>);

impl std::io::Write for CaptureWriter {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
