//! What every benchmark in this directory shares: its command line, the server, the Curator side
//! and the statistics. Each bench includes it with `mod support;`.
//!
//! Both JVMs run as in production ([`Jit::Full`]), and the server keeps ZooKeeper's default
//! container check interval (60 s), so the server's background work is what a real one does.
#![allow(dead_code)] // Each bench uses its own part.

use std::time::Duration;

use zk_recipes_testing::{CuratorProcess, Jit, TestingServer};

/// The bench's command line: `--name value` options, and whether this is a smoke run.
pub struct Args {
    args: Vec<String>,
}

impl Args {
    pub fn from_env() -> Self {
        Args { args: std::env::args().collect() }
    }

    /// `cargo test --all-targets` runs a bench binary without `--bench`: a smoke run that proves
    /// every scenario works, with numbers too small to mean anything.
    pub fn is_smoke_run(&self) -> bool {
        !self.args.iter().any(|arg| arg == "--bench")
    }

    /// The number after `--name`, if given.
    pub fn number(&self, name: &str) -> Option<u64> {
        let at = self.args.iter().position(|arg| arg == name)?;
        self.args.get(at + 1)?.parse().ok()
    }
}

/// The server to measure against: `ZK_CONNECT` if set, else a [`TestingServer`] as production runs
/// one (the server is returned so that it lives as long as the bench). `tick_time` is for
/// benches that measure session expiry.
pub async fn server(tick_time: Option<Duration>) -> (String, Option<TestingServer>) {
    if let Ok(connect) = std::env::var("ZK_CONNECT") {
        if !connect.is_empty() {
            return (connect, None);
        }
    }
    let mut builder = production_like_server();
    if let Some(tick_time) = tick_time {
        builder = builder.with_tick_time(tick_time);
    }
    let server = builder.start().await.expect("a ZooKeeper server (run scripts/install-deps.sh)");
    (server.connect_string(), Some(server))
}

/// A testing server's builder set as production runs one: full JIT, ZooKeeper's default container
/// check interval.
pub fn production_like_server() -> zk_recipes_testing::TestingServerBuilder {
    TestingServer::builder().with_jit(Jit::Full).with_container_check_interval(Duration::from_secs(60))
}

/// Starts the Curator driver (`tests/java/CuratorDriver.java`) as production runs a JVM.
pub fn spawn_curator<S: AsRef<str>>(args: &[S]) -> CuratorProcess {
    CuratorProcess::spawn_with_jit(Jit::Full, args.iter().map(AsRef::as_ref))
        .expect("the Curator driver starts")
}

/// Runs a driver command to its end and returns its `RESULT` line.
pub async fn curator_result<S: AsRef<str>>(args: &[S]) -> String {
    let mut process = spawn_curator(args);
    let line = process.expect_line("RESULT", Duration::from_secs(600)).await.expect("a Curator result");
    let status = process.wait(Duration::from_secs(60)).await.expect("the Curator driver exits");
    assert!(status.success(), "the Curator driver failed: {status}\n{}", process.log_tail(30));
    line
}

/// The number in `name=<number>` of a `RESULT` line.
pub fn field(line: &str, name: &str) -> Option<f64> {
    line.split_whitespace().find_map(|field| field.strip_prefix(name)?.strip_prefix('=')?.parse().ok())
}

/// The median (the upper one of an even count).
pub fn median<T: PartialOrd + Copy>(values: &[T]) -> T {
    let mut values = values.to_vec();
    values.sort_by(|a, b| a.partial_cmp(b).expect("comparable"));
    values[values.len() / 2]
}

/// Lets a running load warm up, then measures it: `snapshot` reads its running totals, taken
/// after `warm_up` and again after `duration`. Returns both snapshots and the exact time between.
pub async fn measure_window<T>(
    warm_up: Duration,
    duration: Duration,
    snapshot: impl Fn() -> T,
) -> (T, T, Duration) {
    tokio::time::sleep(warm_up).await;
    let (first, started) = (snapshot(), std::time::Instant::now());
    tokio::time::sleep(duration).await;
    (first, snapshot(), started.elapsed())
}
