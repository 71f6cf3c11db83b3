//! What every benchmark in this directory shares: its command line's common part (each bench
//! declares its own flags with clap), the server, the Curator side and the statistics. Each bench includes it with `mod support;`.
//!
//! Machine-readable results: with `--json PATH` (or `ZKR_BENCH_JSON=PATH`) every measured scenario
//! is also appended to `PATH` as one JSON object per line ([`JsonLines`]); `crates/bench-report`
//! renders them into `docs/benchmarks.md`. The human-readable output is printed either way.
//!
//! Both JVMs run as in production ([`Jit::Full`]), and the server keeps ZooKeeper's default
//! container check interval (60 s), so the server's background work is what a real one does.
#![allow(dead_code)] // Each bench uses its own part.

pub mod live_heap;

use std::io::Write;
use std::path::PathBuf;
use std::time::Duration;

use clap::error::ErrorKind;
use zk_recipes::framework::zookeeper_client::{self, Client, CreateMode};
use zk_recipes::framework::{Deadline, Framework};
use zk_recipes_testing::{CuratorProcess, Jit, TestingServer};

/// Parses a bench's flags (`T`: the bench's own `clap::Parser`, which flattens [`Harness`]).
///
/// Under `cargo test` a bench binary also receives the test harness's arguments (a name filter,
/// `--nocapture`, ...): a smoke run (no `--bench`) that cannot parse them runs with its defaults
/// instead of failing. `--help` is answered either way.
pub fn parse<T: clap::Parser>() -> T {
    match T::try_parse() {
        Ok(args) => args,
        Err(err)
            if !std::env::args_os().any(|arg| arg == "--bench")
                && !matches!(err.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) =>
        {
            eprintln!("smoke run: ignoring the arguments ({})", err.kind());
            T::parse_from(std::env::args_os().take(1))
        }
        Err(err) => err.exit(),
    }
}

/// What `cargo bench` passes to every bench binary (flatten it into the bench's flags).
#[derive(clap::Args, Debug)]
pub struct Harness {
    /// Passed by `cargo bench`. `cargo test --all-targets` runs a bench binary without it: a smoke
    /// run that proves every scenario works, with numbers too small to mean anything.
    #[arg(long, hide = true)]
    bench: bool,
}

impl Harness {
    /// Whether this is a smoke run (no `--bench`).
    pub fn is_smoke_run(&self) -> bool {
        !self.bench
    }
}

/// `--json FILE`, for the benches that write [`JsonLines`] (flatten it into the bench's flags).
#[derive(clap::Args, Debug)]
pub struct JsonOutput {
    /// Also append every result to FILE as one JSON object per line (relative to the bench's
    /// package directory).
    #[arg(long, value_name = "FILE", env = "ZKR_BENCH_JSON")]
    json: Option<PathBuf>,
}

/// Where a bench appends its results as JSON lines: `--json PATH`, else `ZKR_BENCH_JSON`, else
/// nowhere ([`JsonOutput`]). Each line is one object: `bench`, `scenario`, `client` (`ours`, `curator` or
/// `floor`), `param`/`value` (what the scenario varies, e.g. `sessions` = 8; absent when
/// nothing), `unit` and `ops` (the median), `p50_us`/`p99_us` where measured (medians), `rounds`
/// and `per_round`, plus scenario-specific fields.
pub struct JsonLines {
    bench: &'static str,
    path: Option<PathBuf>,
}

impl JsonLines {
    pub fn new(bench: &'static str, output: &JsonOutput) -> Self {
        let path = output.json.clone().filter(|path| !path.as_os_str().is_empty());
        if let Some(path) = &path {
            eprintln!("appending JSON lines to {}", path.display());
        }
        JsonLines { bench, path }
    }

    /// Appends one result: `fields` (an object) after `bench`, `scenario` and `client`.
    pub fn emit(&self, scenario: &str, client: &str, fields: serde_json::Value) {
        let Some(path) = &self.path else { return };
        let mut record = serde_json::json!({ "bench": self.bench, "scenario": scenario, "client": client });
        if let (Some(record), serde_json::Value::Object(fields)) = (record.as_object_mut(), fields) {
            record.extend(fields);
        }
        let mut file =
            std::fs::OpenOptions::new().create(true).append(true).open(path).unwrap_or_else(|err| {
                panic!("opening {} (relative to the bench's package directory): {err}", path.display())
            });
        writeln!(file, "{record}").unwrap_or_else(|err| panic!("writing {}: {err}", path.display()));
    }

    /// Appends a measured series: the median of `per_round` as `ops`, the rounds, and `fields`.
    pub fn emit_series(
        &self,
        scenario: &str,
        client: &str,
        unit: &str,
        per_round: &[f64],
        fields: serde_json::Value,
    ) {
        let mut record = serde_json::json!({
            "unit": unit,
            "ops": median(per_round),
            "rounds": per_round.len(),
            "per_round": per_round,
        });
        if let (Some(record), serde_json::Value::Object(fields)) = (record.as_object_mut(), fields) {
            record.extend(fields);
        }
        self.emit(scenario, client, record);
    }
}

/// This process's resident memory in bytes (`VmRSS` of `/proc/self/status`), after glibc's
/// `malloc_trim` returned what it could, so deltas count memory in use. Elsewhere (macOS) `ps`'s
/// resident size, without the trim.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn rss_bytes() -> usize {
    let output = std::process::Command::new("ps")
        .args(["-o", "rss=", "-p", &std::process::id().to_string()])
        .output()
        .expect("ps");
    let kib: usize = String::from_utf8_lossy(&output.stdout).trim().parse().expect("ps -o rss= prints KiB");
    kib * 1024
}

/// See the other platforms' `rss_bytes`.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn rss_bytes() -> usize {
    #[allow(unsafe_code)]
    // SAFETY: glibc's malloc_trim only returns free heap memory to the system.
    unsafe {
        libc::malloc_trim(0);
    }
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let kib: usize = status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|value| value.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status");
    kib * 1024
}

/// The CPU time this process has used so far, user and system (`getrusage`). The server and
/// Curator's driver are processes of their own, so this is our side's alone.
pub fn cpu_time() -> Duration {
    let mut usage = std::mem::MaybeUninit::<libc::rusage>::zeroed();
    #[allow(unsafe_code)]
    // SAFETY: getrusage fills the whole rusage it points to when it returns 0 (checked).
    let usage = unsafe {
        assert_eq!(libc::getrusage(libc::RUSAGE_SELF, usage.as_mut_ptr()), 0, "getrusage");
        usage.assume_init()
    };
    let time = |value: libc::timeval| Duration::new(value.tv_sec as u64, value.tv_usec as u32 * 1_000);
    time(usage.ru_utime) + time(usage.ru_stime)
}

/// The server's `mntr` counters, from the first address of `connect` (four-letter words must be
/// whitelisted; the testing server allows `mntr`).
pub async fn mntr(connect: &str) -> std::collections::BTreeMap<String, String> {
    let first = connect.split(',').next().expect("an address").split('/').next().expect("host:port");
    let address = tokio::net::lookup_host(first).await.expect("resolve").next().expect("an address");
    let answer =
        zk_recipes_testing::four_letter_word(address, "mntr", Duration::from_secs(10)).await.expect("mntr");
    zk_recipes_testing::parse_mntr(&answer)
}

/// `zk_packets_sent + zk_packets_received` of the server's `mntr`.
pub async fn server_packets(connect: &str) -> u64 {
    let counters = mntr(connect).await;
    let count = |name: &str| -> u64 {
        counters.get(name).and_then(|value| value.parse().ok()).unwrap_or_else(|| panic!("no {name} in mntr"))
    };
    count("zk_packets_sent") + count("zk_packets_received")
}

/// The `q` quantile (0..=1) of sorted values.
pub fn quantile<T: Copy>(sorted: &[T], q: f64) -> T {
    sorted[((sorted.len() as f64 - 1.0) * q).round() as usize]
}

/// The server to measure against: `ZK_CONNECT` if set, else a [`TestingServer`] as production runs
/// one (the server is returned so that it lives as long as the bench). `tick_time` is for
/// benches that measure session expiry.
/// A framework connected to `connect` (the deadline of its first connection: 20 s).
/// `ZKR_BENCH_NO_TCP_NODELAY=1` leaves Nagle on, for ours and the floors alike: what the
/// framework's `TCP_NODELAY` is worth (docs/framework.md).
pub async fn start_framework(connect: &str) -> Framework {
    let nodelay = std::env::var_os("ZKR_BENCH_NO_TCP_NODELAY").is_none();
    let framework = Framework::builder(connect).tcp_nodelay(nodelay).start().expect("framework");
    framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");
    framework
}

/// The bare zookeeper-client of `framework`'s session, for a floor: the same protocol on bare
/// calls (the framework only keeps the session open).
pub async fn bare_client(framework: &Framework) -> Client {
    let session = framework.session(Deadline::after(Duration::from_secs(20))).await.expect("session");
    session.client().clone()
}

/// A session of its own for a floor: its framework (keep it alive) and its bare client.
pub async fn raw_client(connect: &str) -> (Framework, Client) {
    let framework = start_framework(connect).await;
    let client = bare_client(&framework).await;
    (framework, client)
}

/// Creates `path` (PERSISTENT, with its parents, the open ACL) unless it exists: a floor's
/// directory, made before its clock starts.
pub async fn ensure_dir(client: &Client, path: &str) {
    match client.mkdir(path, &anyone(CreateMode::Persistent)).await {
        Ok(()) | Err(zookeeper_client::Error::NodeExists) => {}
        Err(err) => panic!("creating {path}: {err}"),
    }
}

/// Create options with the open ACL, as the recipes' nodes have.
pub fn anyone(mode: CreateMode) -> zookeeper_client::CreateOptions<'static> {
    mode.with_acls(zookeeper_client::Acls::anyone_all())
}

/// A protected-create name prefix (`{dir}/_c_<uuid>-{name}`) with a made-up but well-formed uuid
/// per contender, for a floor's nodes.
pub fn protected_prefix(dir: &str, contender: usize, name: &str) -> String {
    format!("{dir}/_c_{contender:08x}-0000-4000-8000-000000000000-{name}")
}

/// The sequence number that ends a sequential node's name (`…-lock-0000000042`).
pub fn sequence_of(name: &str) -> i64 {
    let digits = name.len() - name.bytes().rev().take_while(u8::is_ascii_digit).count();
    name[digits..].parse().unwrap_or(i64::MAX)
}

pub async fn server(tick_time: Option<Duration>) -> (String, Option<TestingServer>) {
    if let Ok(connect) = std::env::var("ZK_CONNECT") {
        if !connect.is_empty() {
            return (connect, None);
        }
    }
    let mut builder = production_like_server();
    if let Some(tick_time) = tick_time {
        builder = builder.tick_time(tick_time);
    }
    let server = builder.start().await.expect("a ZooKeeper server (run scripts/install-deps.sh)");
    (server.connect_string(), Some(server))
}

/// A testing server's builder set as production runs one: full JIT, ZooKeeper's default container
/// check interval. Its start may take up to 2 min (not the default 30 s): a full-JIT JVM boots
/// slowly on a busy machine, and the smoke runs share theirs with the other test binaries.
pub fn production_like_server() -> zk_recipes_testing::TestingServerBuilder {
    TestingServer::builder()
        .jit(Jit::Full)
        .container_check_interval(Duration::from_secs(60))
        .start_timeout(Duration::from_secs(120))
}

/// Starts the Curator driver (`crates/testing/java/CuratorDriver.java`) as production runs a JVM.
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

/// The lock recipe's acquire on bare calls, as our mutex sends it: create (protected, ephemeral
/// sequential) and list back to back; if first, held; else an exists watch on the predecessor,
/// and when it goes, held without listing again if it was first, else list again. Returns the
/// lock node's path.
pub async fn raw_lock(client: &Client, dir: &str, prefix: &str) -> String {
    let options = anyone(CreateMode::EphemeralSequential);
    let create = client.create(prefix, b"", &options);
    let list = client.list_children(dir);
    let (_, sequence) = create.await.expect("create the lock node");
    let mut children = list.await.expect("list the lock's directory");
    let ours = format!("{prefix}{sequence}");
    let our_name = ours.rsplit('/').next().expect("a name").to_owned();
    loop {
        children.sort_by_cached_key(|child| sequence_of(child));
        let index = children.iter().position(|child| *child == our_name).expect("our node is listed");
        if index == 0 {
            return ours;
        }
        let predecessor = format!("{dir}/{}", children[index - 1]);
        let (stat, watcher) = client.check_and_watch_stat(&predecessor).await.expect("exists watch");
        if stat.is_some() {
            watcher.changed().await;
            if index == 1 {
                return ours;
            }
        }
        children = client.list_children(dir).await.expect("list the lock's directory");
    }
}
