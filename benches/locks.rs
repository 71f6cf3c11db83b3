//! Lock benchmarks: zk-recipes against Curator 5.4 and the raw protocol floor on the same
//! ZooKeeper server, in one run.
//!
//! ```sh
//! cargo bench -p zk-recipes-benches --bench locks                  # 3 interleaved rounds
//! cargo bench -p zk-recipes-benches --bench locks -- --rounds 5 --cycles 3000 --warm-up-cycles 3000 \
//!     --contended-secs 3 --warm-up-secs 2 --sessions 2,8,32,128 --distinct-locks 10,100,1000,10000 \
//!     --distinct-cycles 3 --waiters 10,100,1000,10000 --held 100000 --json target/bench.jsonl
//! ```
//!
//! `ZKR_BENCH_NO_TCP_NODELAY=1` builds every framework (ours and the floor's sessions) with
//! `tcp_nodelay(false)`, to measure what the framework's `TCP_NODELAY` is worth.
//!
//! Uses `ZK_CONNECT` if set, else starts a `TestingServer` with both JVMs (server and Curator)
//! compiling as in production (see `support`; the server gets a 1 GiB heap for the held-locks
//! scenario). Every timed part follows a warm-up of the same kind (3,000 cycles, or 2 s of the
//! contended load), for our side and Curator's alike, and the server is warmed up (untimed)
//! before the first round. Scenarios, each run for zk-recipes, for Curator (through the Java
//! driver in `crates/testing/java`) and for the raw floor back to back at each point, in an order rotated
//! every round, and reported as medians over the rounds with ratios (each ratio twice: of the
//! medians, and the median of each round's own ratio, which a drift between rounds moves less):
//! - `floor`: the raw protocol a lock cycle needs — create (ephemeral sequential) and list sent
//!   back to back, then delete — with bare zookeeper-client calls on a session of its own;
//!   `floor/one-by-one` the same calls each awaited before the next, as Curator sends them: their
//!   ratio is the most any client can gain on Curator from the protocol alone;
//! - `uncontended`: lock + release on one path, one session: cycles/s, p50, p99;
//! - `uncontended-interleaved`: ours and the pipelined floor, each on a session and path of its
//!   own, cycling in alternating blocks of `--interleave-block` cycles (50): both are timed over
//!   the same stretch of time, so a machine whose speed drifts between measurements moves their
//!   ratio less than the back-to-back `uncontended` scenario's;
//! - `contended-N` for each of `--sessions` (2, 8, 32, 128): N sessions (one task or thread each)
//!   looping lock + release on one path: acquisitions/s, and hand-off latency — from one
//!   holder's release returning to the next holder's lock returning, p50 and p99 (it can be
//!   negative: the next holder's watch may fire before the releaser's delete reply is read).
//!   Curator's contenders live in one JVM and are timed there with `System.nanoTime`. The raw
//!   hand-off floor runs the same protocol as our lock on bare calls: protected ephemeral-sequential
//!   create and list sent back to back, watch the predecessor, and no re-list when the
//!   predecessor was first; `contended-interleaved-N`: ours and the raw floor, N sessions each on
//!   a lock of its own, cycling in alternating windows (`--contended-windows` per side, 4, over
//!   the same `--contended-secs` each), a side's window opening only once the other's queue has
//!   drained: both meet the same stretch of the machine's time, with the lock to themselves;
//! - `distinct-N` for each of `--distinct-locks` (10 … 10,000): N locks on distinct paths cycled
//!   concurrently by one process, `--distinct-cycles` each (3), or more where that makes fewer
//!   than `--distinct-min-total` (3,000) in all, rounded up to even (ours: N tasks on one session; Curator: a thread per lock on one
//!   client, at most `--curator-max-threads`, the pool used is printed), with the raw floor for
//!   the same concurrency. Each client first cycles the same locks untimed, at least once each
//!   and `--distinct-warm-up-total` (3,000) cycles in all: the locks' directories exist, Curator's
//!   threads are started and its JVM has compiled its hot paths before the clock starts;
//!   `distinct-interleaved-N`: ours and the floor on N locks each, the same cycles, timed in
//!   alternating passes (every lock once per pass), so that both meet the same stretch of the
//!   machine's time. Our lock directories are containers, as Curator's: the server reaps one it
//!   finds empty (every 60 s, up to 10,000 a minute), and the lock's next create fails and makes it
//!   again (a failed create and listing, one round trip more). The floor's directories are
//!   persistent. For ours both scenarios report the share of timed cycles that made a reaped
//!   directory again (median, then per round), from the parent's children version: each create
//!   or delete of a child bumps it, and between two looks only the reaper deletes a directory;
//! - scale (once, after the rounds; `--no-scale` skips it): `waiters-N` for each of `--waiters`:
//!   N waiters (tasks, one `Mutex` each) queued on one held lock of one session: live heap per
//!   waiter (bytes allocated and not freed, counted by this binary's allocator, delta / N: what
//!   a waiter holds, whatever ran before) and resident memory per waiter (VmRSS delta / N, which
//!   depends on the heap's history), then the holder releases and the waiters drain one by one:
//!   server packets (mntr `zk_packets_sent` + `zk_packets_received`) per hand-off, which stays
//!   flat when every release wakes exactly one waiter; `held`: `--held` locks (100,000) held on
//!   one session: live heap and resident memory per held lock, then the session is expired on the server (a
//!   second connection resumes it with its id and password and closes it while a fault proxy
//!   keeps our client away) and, from the moment our client can reach the server again, we
//!   measure until every hold's `lost()` has fired (`ErrorPolicy::SessionOnly`: lost with the
//!   session, not on a mere disconnection).
//!
//! `--rounds 0` runs only the scale part. With `--json PATH` (or `ZKR_BENCH_JSON`) every result is also appended to `PATH` as a JSON
//! line (`bench` = `locks`; see `support::JsonLines`).

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};
use serde_json::json;
use zk_recipes::framework::zookeeper_client::{self, Client, CreateMode};
use zk_recipes::framework::{ConnectionState, Deadline, ErrorPolicy, Framework};
use zk_recipes::mutex::{Hold, Mutex, MutexGuard};
use zk_recipes_testing::FaultProxy;

mod support;

/// Counts live heap for the scale part (per waiter, per held lock); see `support::live_heap`.
#[global_allocator]
static ALLOCATOR: support::live_heap::CountingAllocator = support::live_heap::CountingAllocator;

/// Lock benchmarks, ours against Curator's and the raw protocol floor (the module docs say what
/// each scenario does).
#[derive(clap::Parser, Debug)]
#[command(name = "locks", bin_name = "cargo bench -p zk-recipes-benches --bench locks --")]
struct Args {
    /// Interleaved rounds; medians over them are reported (0: only the scale part).
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Timed uncontended cycles per round and client.
    #[arg(long, default_value_t = 2_000)]
    cycles: usize,
    /// Untimed uncontended cycles before the timed ones (enough for the JVMs' optimising compiler
    /// to have compiled Curator's and the server's hot paths).
    #[arg(long, default_value_t = 3_000)]
    warm_up_cycles: usize,
    /// Cycles per block in `uncontended-interleaved`.
    #[arg(long, default_value_t = 50)]
    interleave_block: usize,
    /// Seconds each contended load is measured.
    #[arg(long, default_value_t = 3)]
    contended_secs: u64,
    /// Milliseconds each contended load is measured (overrides `--contended-secs`).
    #[arg(long)]
    contended_ms: Option<u64>,
    /// Windows per side in `contended-interleaved-N`.
    #[arg(long, default_value_t = 4)]
    contended_windows: u32,
    /// Seconds of the contended load before it is measured.
    #[arg(long, default_value_t = 2)]
    warm_up_secs: u64,
    /// Milliseconds of the contended load before it is measured (overrides `--warm-up-secs`).
    #[arg(long)]
    warm_up_ms: Option<u64>,
    /// Sessions contending on one lock, one `contended-N` scenario each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [2, 8, 32, 128])]
    sessions: Vec<usize>,
    /// Locks cycled concurrently, one `distinct-N` scenario each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [10, 100, 1_000, 10_000])]
    distinct_locks: Vec<usize>,
    /// Timed cycles per lock in `distinct-N` (raised to make `--distinct-min-total`).
    #[arg(long, default_value_t = 3)]
    distinct_cycles: usize,
    /// Timed cycles in all, at least, in `distinct-N`.
    #[arg(long, default_value_t = 3_000)]
    distinct_min_total: usize,
    /// Untimed cycles in all before `distinct-N` (at least one per lock).
    #[arg(long, default_value_t = 3_000)]
    distinct_warm_up_total: usize,
    /// The most threads Curator's side uses in `distinct-N` (a thread per lock up to it).
    #[arg(long, default_value_t = 10_000)]
    curator_max_threads: usize,
    /// Skip the scale part (waiters and held locks).
    #[arg(long)]
    no_scale: bool,
    /// Skip the contended scenarios (to re-measure the others alone).
    #[arg(long)]
    no_contended: bool,
    /// Waiters queued on one held lock, one `waiters-N` scenario each (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [10, 100, 1_000, 10_000])]
    waiters: Vec<usize>,
    /// Locks held on one session in `held`.
    #[arg(long, default_value_t = 100_000)]
    held: usize,
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

struct Options {
    rounds: usize,
    cycles: usize,
    warm_up_cycles: usize,
    interleave_block: usize,
    contended_for: Duration,
    /// Windows per side in `contended-interleaved-N`.
    contended_windows: u32,
    warm_up_for: Duration,
    sessions: Vec<usize>,
    distinct_locks: Vec<usize>,
    distinct_cycles: usize,
    distinct_min_total: usize,
    distinct_warm_up_total: usize,
    curator_max_threads: usize,
    scale: bool,
    waiters: Vec<usize>,
    held: usize,
}

impl Options {
    /// Cycles per lock with `locks` distinct locks: `--distinct-cycles`, or more where that many
    /// locks would make fewer than `--distinct-min-total` cycles in all; rounded up to an even
    /// number, so that in `distinct-interleaved` each client goes first in as many passes.
    fn distinct_cycles_for(&self, locks: usize) -> usize {
        let cycles = self.distinct_cycles.max(self.distinct_min_total.div_ceil(locks.max(1)));
        cycles + cycles % 2
    }

    /// Untimed cycles per lock before a distinct-locks run: at least one, and
    /// `--distinct-warm-up-total` in all.
    fn distinct_warm_up_for(&self, locks: usize) -> usize {
        self.distinct_warm_up_total.div_ceil(locks.max(1)).max(1)
    }

    fn new(args: &Args) -> Self {
        if args.harness.is_smoke_run() {
            return Options {
                rounds: 1,
                cycles: 20,
                warm_up_cycles: 10,
                interleave_block: 5,
                contended_for: Duration::from_millis(300),
                contended_windows: 2,
                warm_up_for: Duration::from_millis(100),
                sessions: vec![2, 4],
                distinct_locks: vec![10],
                distinct_cycles: 2,
                distinct_min_total: 20,
                distinct_warm_up_total: 10,
                curator_max_threads: 10_000,
                scale: true,
                waiters: vec![10, 20],
                held: 100,
            };
        }
        let ms_or_secs = |ms: Option<u64>, secs: u64| Duration::from_millis(ms.unwrap_or(secs * 1000));
        Options {
            rounds: args.rounds,
            cycles: args.cycles,
            warm_up_cycles: args.warm_up_cycles,
            interleave_block: args.interleave_block,
            contended_for: ms_or_secs(args.contended_ms, args.contended_secs),
            contended_windows: args.contended_windows,
            warm_up_for: ms_or_secs(args.warm_up_ms, args.warm_up_secs),
            sessions: if args.no_contended { Vec::new() } else { args.sessions.clone() },
            distinct_locks: args.distinct_locks.clone(),
            distinct_cycles: args.distinct_cycles,
            distinct_min_total: args.distinct_min_total,
            distinct_warm_up_total: args.distinct_warm_up_total,
            curator_max_threads: args.curator_max_threads,
            scale: !args.no_scale,
            waiters: args.waiters.clone(),
            held: args.held,
        }
    }
}

/// One measurement: operations per second and, where measured, p50/p99 latency (per cycle, or
/// per hand-off in the contended scenarios).
#[derive(Clone, Copy, Debug, Default)]
struct Measured {
    ops: f64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
    /// Our process's CPU time per operation, where measured (scenarios of one client in this process).
    cpu_us: Option<f64>,
    /// Of the cycles, the share that found its lock directory reaped by the server (an emptied
    /// container) and made it again, where measured (our side of the distinct-locks scenarios).
    remade_dirs: Option<f64>,
}

fn from_latencies(mut latencies: Vec<Duration>, total: Duration) -> Measured {
    if latencies.is_empty() {
        return Measured::default();
    }
    latencies.sort_unstable();
    let at = |q: f64| support::quantile(&latencies, q).as_secs_f64() * 1e6;
    Measured {
        ops: latencies.len() as f64 / total.as_secs_f64(),
        p50_us: Some(at(0.5)),
        p99_us: Some(at(0.99)),
        ..Default::default()
    }
}

async fn curator(args: &[String]) -> Measured {
    let line = support::curator_result(args).await;
    curator_measured(&line)
}

fn curator_measured(line: &str) -> Measured {
    Measured {
        ops: support::field(line, "ops").unwrap_or_else(|| panic!("no ops= in {line:?}")),
        p50_us: support::field(line, "p50_us").or_else(|| support::field(line, "handoff_p50_us")),
        p99_us: support::field(line, "p99_us").or_else(|| support::field(line, "handoff_p99_us")),
        ..Default::default()
    }
}

/// How the raw floor sends a cycle's create and listing.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Protocol {
    /// The listing right behind the create, both awaited together (what our lock does).
    Pipelined,
    /// Create, then list, then delete, each awaited before the next (what Curator does).
    OneByOne,
}

/// The raw floor's lock cycle in `dir` on bare calls: creates a node `prefix<sequence>` with
/// `options`, lists `dir` (per `protocol`), deletes the node.
async fn raw_cycle(
    client: &Client,
    dir: &str,
    prefix: &str,
    options: &zookeeper_client::CreateOptions<'_>,
    protocol: Protocol,
) {
    let sequence = match protocol {
        Protocol::Pipelined => {
            let create = client.create(prefix, b"", options);
            let list = client.list_children(dir);
            let (_, sequence) = create.await.expect("create");
            list.await.expect("list");
            sequence
        }
        Protocol::OneByOne => {
            let (_, sequence) = client.create(prefix, b"", options).await.expect("create");
            client.list_children(dir).await.expect("list");
            sequence
        }
    };
    client.delete(&format!("{prefix}{sequence}"), None).await.expect("delete");
}

/// The raw floor's lock cycle on bare calls, on a session of its own: `cycle` creates our node
/// (protected, ephemeral sequential), lists the directory and deletes the node.
struct RawCycler {
    framework: Framework,
    client: Client,
    dir: String,
    node_prefix: String,
    node_options: zookeeper_client::CreateOptions<'static>,
}

impl RawCycler {
    async fn start(connect_string: &str, dir: &str) -> Self {
        let framework = support::start_framework(connect_string).await;
        let client = support::bare_client(&framework).await;
        // Persistent, not a container: an emptied container would be reaped between cycles.
        client.mkdir(dir, &support::anyone(CreateMode::Persistent)).await.expect("the bench directory");
        RawCycler {
            framework,
            client,
            dir: dir.to_owned(),
            node_prefix: support::protected_prefix(dir, 0, "lock-"),
            node_options: support::anyone(CreateMode::EphemeralSequential),
        }
    }

    async fn cycle(&self, protocol: Protocol) {
        raw_cycle(&self.client, &self.dir, &self.node_prefix, &self.node_options, protocol).await;
    }

    async fn close(self) {
        drop(self.client);
        self.framework.close().await;
    }
}

/// Cycles timed one by one, in one or more runs: the rate is the cycles over the runs' time.
#[derive(Default)]
struct Timed {
    latencies: Vec<Duration>,
    total: Duration,
    cpu: Duration,
}

impl Timed {
    /// `warm_up` cycles untimed, then `cycles` timed.
    async fn after_warm_up<F: Future<Output = ()>>(
        warm_up: usize,
        cycles: usize,
        mut cycle: impl FnMut() -> F,
    ) -> Measured {
        for _ in 0..warm_up {
            cycle().await;
        }
        let mut timed = Timed::default();
        timed.run(cycles, cycle).await;
        timed.measured()
    }

    async fn run<F: Future<Output = ()>>(&mut self, cycles: usize, mut cycle: impl FnMut() -> F) {
        self.latencies.reserve(cycles);
        let (started, cpu) = (Instant::now(), support::cpu_time());
        for _ in 0..cycles {
            let one = Instant::now();
            cycle().await;
            self.latencies.push(one.elapsed());
        }
        self.total += started.elapsed();
        self.cpu += support::cpu_time() - cpu;
    }

    fn measured(self) -> Measured {
        let cycles = self.latencies.len();
        let cpu_us = (cycles > 0).then(|| self.cpu.as_secs_f64() * 1e6 / cycles as f64);
        Measured { cpu_us, ..from_latencies(self.latencies, self.total) }
    }
}

async fn raw_floor(
    connect_string: &str,
    path: &str,
    protocol: Protocol,
    warm_up: usize,
    cycles: usize,
) -> Measured {
    let floor = RawCycler::start(connect_string, path).await;
    let measured = Timed::after_warm_up(warm_up, cycles, || floor.cycle(protocol)).await;
    floor.close().await;
    measured
}

/// One lock + release of ours.
async fn cycle_ours(mutex: &Mutex) {
    mutex.lock().await.expect("lock").release().await.expect("release");
}

/// Lock + release on one path, on a framework of its own: a fresh connection, as the raw floor's.
async fn ours_uncontended(connect_string: &str, path: &str, warm_up: usize, cycles: usize) -> Measured {
    let framework = support::start_framework(connect_string).await;
    let mutex = Mutex::new(&framework, path).expect("mutex");
    let measured = Timed::after_warm_up(warm_up, cycles, || cycle_ours(&mutex)).await;
    drop(mutex);
    framework.close().await;
    measured
}

/// Ours and the raw floor (pipelined), each on a framework of its own and a path of its own,
/// cycling in alternating blocks of `block` cycles, the first of each pair alternating too: both
/// are timed across the same stretch of the machine's weather, so a drift between measurements,
/// which moves the back-to-back scenario's ratio, falls on both alike. Returns (ours, floor).
async fn uncontended_interleaved(
    connect_string: &str,
    path: &str,
    warm_up: usize,
    cycles: usize,
    block: usize,
) -> (Measured, Measured) {
    let framework = support::start_framework(connect_string).await;
    let mutex = Mutex::new(&framework, &format!("{path}-ours")).expect("mutex");
    let floor = RawCycler::start(connect_string, &format!("{path}-floor")).await;
    for _ in 0..warm_up {
        cycle_ours(&mutex).await;
        floor.cycle(Protocol::Pipelined).await;
    }
    let (mut ours, mut theirs) = (Timed::default(), Timed::default());
    let block = block.max(1);
    for (index, first) in (0..cycles).step_by(block).enumerate() {
        let count = block.min(cycles - first);
        if index % 2 == 0 {
            ours.run(count, || cycle_ours(&mutex)).await;
            theirs.run(count, || floor.cycle(Protocol::Pipelined)).await;
        } else {
            theirs.run(count, || floor.cycle(Protocol::Pipelined)).await;
            ours.run(count, || cycle_ours(&mutex)).await;
        }
    }
    drop(mutex);
    framework.close().await;
    floor.close().await;
    (ours.measured(), theirs.measured())
}

/// The holds of one contended lock, in the order they happened (the lock serializes them), for
/// hand-off latency: each holder numbers its hold while holding, and records when its lock
/// returned and when its release returned.
struct HoldLog {
    base: Instant,
    next_hold: AtomicU64,
    acquisitions: AtomicU64,
    timing: AtomicBool,
    stop: AtomicBool,
    /// (hold number, lock returned, release returned), in ns since `base`, for holds that began
    /// while `timing` was on.
    holds: std::sync::Mutex<Vec<(u64, u64, u64)>>,
}

impl HoldLog {
    fn new() -> Arc<Self> {
        Arc::new(HoldLog {
            base: Instant::now(),
            next_hold: AtomicU64::new(0),
            acquisitions: AtomicU64::new(0),
            timing: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            holds: std::sync::Mutex::new(Vec::new()),
        })
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    /// Called right after the lock returned; returns the hold's number and whether it is timed.
    fn acquired(&self) -> (u64, u64, bool) {
        let at = self.now();
        (self.next_hold.fetch_add(1, Ordering::Relaxed), at, self.timing.load(Ordering::Relaxed))
    }

    /// Lets the load warm up, then counts acquisitions and records holds for `duration`; stops
    /// the contenders (the caller awaits them) and returns acquisitions per second.
    async fn run_window(&self, warm_up: Duration, duration: Duration) -> f64 {
        tokio::time::sleep(warm_up).await;
        self.timing.store(true, Ordering::Relaxed);
        let (first, started) = (self.acquisitions.load(Ordering::Relaxed), Instant::now());
        tokio::time::sleep(duration).await;
        let last = self.acquisitions.load(Ordering::Relaxed);
        let elapsed = started.elapsed();
        self.timing.store(false, Ordering::Relaxed);
        self.stop.store(true, Ordering::Relaxed);
        (last - first) as f64 / elapsed.as_secs_f64()
    }

    /// Hand-off latency p50 and p99 in µs (signed): each timed hold's lock returning minus the
    /// previous hold's release returning.
    fn hand_off_quantiles(&self) -> (Option<f64>, Option<f64>) {
        let holds = self.holds.lock().expect("hold log");
        let released: BTreeMap<u64, u64> =
            holds.iter().map(|(hold, _, released)| (*hold, *released)).collect();
        let mut hand_offs: Vec<i64> = holds
            .iter()
            .filter_map(|(hold, acquired, _)| {
                let previous = released.get(&hold.checked_sub(1)?)?;
                Some(*acquired as i64 - *previous as i64)
            })
            .collect();
        if hand_offs.is_empty() {
            return (None, None);
        }
        hand_offs.sort_unstable();
        let at = |q: f64| support::quantile(&hand_offs, q) as f64 / 1e3;
        (Some(at(0.5)), Some(at(0.99)))
    }

    /// One contender's loop until the window ends: acquire, note the hold, release, note the
    /// release.
    async fn contend(&self, mut contender: impl Contender) {
        let mut mine = Vec::new();
        while !self.stop.load(Ordering::Relaxed) {
            let held = contender.acquire().await;
            let (hold, acquired, timed) = self.acquired();
            contender.release(held).await;
            let released = self.now();
            self.acquisitions.fetch_add(1, Ordering::Relaxed);
            if timed {
                mine.push((hold, acquired, released));
            }
        }
        self.holds.lock().expect("hold log").extend(mine);
    }

    /// Runs the measured window over the contenders' `tasks`, waits for them, closes their
    /// `frameworks`: acquisitions/s and hand-off quantiles.
    async fn measure(
        &self,
        tasks: Vec<tokio::task::JoinHandle<()>>,
        frameworks: Vec<Framework>,
        warm_up: Duration,
        duration: Duration,
    ) -> Measured {
        let ops = self.run_window(warm_up, duration).await;
        for task in tasks {
            task.await.expect("contender");
        }
        for framework in frameworks {
            framework.close().await;
        }
        let (p50_us, p99_us) = self.hand_off_quantiles();
        Measured { ops, p50_us, p99_us, ..Default::default() }
    }
}

/// What a contender of the contended runs does in each cycle.
trait Contender: Send {
    type Held: Send;
    fn acquire(&mut self) -> impl std::future::Future<Output = Self::Held> + Send;
    fn release(&mut self, held: Self::Held) -> impl std::future::Future<Output = ()> + Send;
}

/// Ours: the mutex.
impl Contender for Mutex {
    type Held = MutexGuard;
    async fn acquire(&mut self) -> MutexGuard {
        self.lock().await.expect("lock")
    }
    async fn release(&mut self, guard: MutexGuard) {
        guard.release().await.expect("release")
    }
}

/// The floor: [`support::raw_lock`] on one session's bare client, and a delete.
struct RawContender {
    client: Client,
    dir: String,
    prefix: String,
}

impl Contender for RawContender {
    type Held = String;
    async fn acquire(&mut self) -> String {
        support::raw_lock(&self.client, &self.dir, &self.prefix).await
    }
    async fn release(&mut self, node: String) {
        self.client.delete(&node, None).await.expect("delete")
    }
}

/// One framework (one session) per contender.
async fn start_frameworks(connect_string: &str, sessions: usize) -> Vec<Framework> {
    let mut frameworks = Vec::new();
    for _ in 0..sessions {
        frameworks.push(support::start_framework(connect_string).await);
    }
    frameworks
}

async fn ours_contended(
    connect_string: &str,
    path: &str,
    sessions: usize,
    warm_up: Duration,
    duration: Duration,
) -> Measured {
    let frameworks = start_frameworks(connect_string, sessions).await;
    let log = HoldLog::new();
    let tasks: Vec<_> = frameworks
        .iter()
        .map(|framework| {
            let (mutex, log) = (Mutex::new(framework, path).expect("mutex"), log.clone());
            tokio::spawn(async move { log.contend(mutex).await })
        })
        .collect();
    log.measure(tasks, frameworks, warm_up, duration).await
}

async fn raw_contended(
    connect_string: &str,
    path: &str,
    sessions: usize,
    warm_up: Duration,
    duration: Duration,
) -> Measured {
    let frameworks = start_frameworks(connect_string, sessions).await;
    let first = support::bare_client(&frameworks[0]).await;
    first.mkdir(path, &support::anyone(CreateMode::Persistent)).await.expect("the bench directory");
    let log = HoldLog::new();
    let mut tasks = Vec::new();
    for (contender, framework) in frameworks.iter().enumerate() {
        let (client, log) = (support::bare_client(framework).await, log.clone());
        let raw = RawContender {
            client,
            dir: path.to_owned(),
            prefix: support::protected_prefix(path, contender, "lock-"),
        };
        tasks.push(tokio::spawn(async move { log.contend(raw).await }));
    }
    log.measure(tasks, frameworks, warm_up, duration).await
}

/// One side of an interleaved contended run: its contenders cycle only while its gate is open,
/// and an acquisition counts if it returned with the gate open.
struct GatedSide {
    open: tokio::sync::watch::Sender<bool>,
    stop: AtomicBool,
    contenders: usize,
    /// Contenders waiting at the closed gate.
    parked: AtomicU64,
    acquisitions: AtomicU64,
}

impl GatedSide {
    fn new(contenders: usize) -> Arc<Self> {
        Arc::new(GatedSide {
            open: tokio::sync::watch::Sender::new(false),
            stop: AtomicBool::new(false),
            contenders,
            parked: AtomicU64::new(0),
            acquisitions: AtomicU64::new(0),
        })
    }

    /// One contender's loop: wait at the gate while it is closed, else acquire and release.
    async fn contend(&self, mut contender: impl Contender) {
        let mut open = self.open.subscribe();
        loop {
            if !*open.borrow_and_update() {
                self.parked.fetch_add(1, Ordering::SeqCst);
                let _ = open.wait_for(|open| *open).await;
                self.parked.fetch_sub(1, Ordering::SeqCst);
            }
            if self.stop.load(Ordering::SeqCst) {
                return;
            }
            let held = contender.acquire().await;
            if *open.borrow() {
                self.acquisitions.fetch_add(1, Ordering::Relaxed);
            }
            contender.release(held).await;
        }
    }

    /// Opens the gate for `window`, then closes it and waits until every contender is parked (the
    /// queue drained: none of it is timed): (acquisitions, time open, CPU time while open).
    async fn run(&self, window: Duration) -> (u64, Duration, Duration) {
        let (first, cpu, started) =
            (self.acquisitions.load(Ordering::Relaxed), support::cpu_time(), Instant::now());
        self.open.send_replace(true);
        tokio::time::sleep(window).await;
        self.open.send_replace(false);
        let (took, cpu) = (started.elapsed(), support::cpu_time() - cpu);
        let acquisitions = self.acquisitions.load(Ordering::Relaxed) - first;
        // A contender that failed (its task panicked) never parks: fail loudly, not hang.
        let drained_by = Instant::now() + Duration::from_secs(60);
        while self.parked.load(Ordering::SeqCst) < self.contenders as u64 {
            assert!(
                Instant::now() < drained_by,
                "the contenders did not all park within 60 s of their window"
            );
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        (acquisitions, took, cpu)
    }

    /// Lets the parked contenders go and end.
    fn finish(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.open.send_replace(true);
    }
}

/// Ours and the raw hand-off floor, `sessions` contenders each on a lock of its own (`{path}-ours`,
/// `{path}-floor`), in alternating windows: each side's contenders cycle only while its window
/// is open, and the other side's queue has drained before it opens, so both are timed across the
/// same stretch of the machine's time with the lock to themselves. `warm_up` is split between
/// the sides untimed; `duration` is each side's timed total, in `windows` windows (which side goes
/// first alternates). Returns (ours, floor): acquisitions/s and CPU µs per acquisition.
async fn contended_interleaved(
    connect_string: &str,
    path: &str,
    sessions: usize,
    warm_up: Duration,
    duration: Duration,
    windows: u32,
) -> (Measured, Measured) {
    let (ours_path, floor_path) = (format!("{path}-ours"), format!("{path}-floor"));
    let (ours, floor) = (GatedSide::new(sessions), GatedSide::new(sessions));
    let ours_frameworks = start_frameworks(connect_string, sessions).await;
    let floor_frameworks = start_frameworks(connect_string, sessions).await;
    let first = support::bare_client(&floor_frameworks[0]).await;
    first.mkdir(&floor_path, &support::anyone(CreateMode::Persistent)).await.expect("the bench directory");
    let mut tasks = Vec::new();
    for framework in &ours_frameworks {
        let (mutex, side) = (Mutex::new(framework, &ours_path).expect("mutex"), ours.clone());
        tasks.push(tokio::spawn(async move { side.contend(mutex).await }));
    }
    for (contender, framework) in floor_frameworks.iter().enumerate() {
        let (client, side) = (support::bare_client(framework).await, floor.clone());
        let raw = RawContender {
            client,
            dir: floor_path.clone(),
            prefix: support::protected_prefix(&floor_path, contender, "lock-"),
        };
        tasks.push(tokio::spawn(async move { side.contend(raw).await }));
    }
    ours.run(warm_up / 2).await;
    floor.run(warm_up / 2).await;
    let windows = windows.max(1);
    let window = duration / windows;
    let (mut ours_total, mut floor_total) =
        ((0, Duration::ZERO, Duration::ZERO), (0, Duration::ZERO, Duration::ZERO));
    let add = |total: &mut (u64, Duration, Duration), (count, took, cpu): (u64, Duration, Duration)| {
        *total = (total.0 + count, total.1 + took, total.2 + cpu);
    };
    for index in 0..windows {
        if index % 2 == 0 {
            add(&mut ours_total, ours.run(window).await);
            add(&mut floor_total, floor.run(window).await);
        } else {
            add(&mut floor_total, floor.run(window).await);
            add(&mut ours_total, ours.run(window).await);
        }
    }
    ours.finish();
    floor.finish();
    for task in tasks {
        task.await.expect("contender");
    }
    for framework in ours_frameworks.iter().chain(&floor_frameworks) {
        framework.close().await;
    }
    let measured = |(count, took, cpu): (u64, Duration, Duration)| Measured {
        ops: count as f64 / took.as_secs_f64(),
        cpu_us: (count > 0).then(|| cpu.as_secs_f64() * 1e6 / count as f64),
        ..Default::default()
    };
    (measured(ours_total), measured(floor_total))
}

/// `(warm-up, timed)` cycles per lock of a distinct-locks run.
type DistinctCycles = (usize, usize);

/// Many distinct locks of one client, each cycled by a task of its own.
trait DistinctLocks: Send + Sync + 'static {
    /// How many locks.
    fn len(&self) -> usize;
    /// The node whose children are the locks' directories, where they are containers the server
    /// reaps once emptied (and the lock makes again), with a client to look at it.
    fn reapable_dirs(&self) -> Option<(&Client, &str)> {
        None
    }
    /// One lock + release of lock `index`.
    fn cycle(&self, index: usize) -> impl Future<Output = ()> + Send + '_;
}

/// Cycles every lock `count` times at once, a task per lock: how long that took.
async fn distinct_pass<L: DistinctLocks>(locks: &Arc<L>, count: usize) -> Duration {
    let started = Instant::now();
    let tasks: Vec<_> = (0..locks.len())
        .map(|index| {
            let locks = Arc::clone(locks);
            tokio::spawn(async move {
                for _ in 0..count {
                    locks.cycle(index).await;
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("cycler");
    }
    started.elapsed()
}

/// Every lock `warm_up` times untimed, then `cycles` times timed: the timed part's cycles/s and
/// our process's CPU time per cycle.
async fn cycle_distinct<L: DistinctLocks>(locks: Arc<L>, (warm_up, cycles): DistinctCycles) -> Measured {
    distinct_pass(&locks, warm_up).await;
    let dirs = DirectoryLook::take(&*locks).await;
    let cpu = support::cpu_time();
    let took = distinct_pass(&locks, cycles).await;
    let cpu = support::cpu_time() - cpu;
    let total = (locks.len() * cycles) as f64;
    Measured {
        ops: total / took.as_secs_f64(),
        cpu_us: Some(cpu.as_secs_f64() * 1e6 / total),
        remade_dirs: DirectoryLook::remade_since(dirs, &*locks).await.map(|remade| remade as f64 / total),
        ..Default::default()
    }
}

/// The parent of reapable lock directories, as one look saw it: how often its children changed,
/// how many it had.
#[derive(Clone, Copy)]
struct DirectoryLook {
    children_version: i32,
    children: i32,
}

impl DirectoryLook {
    /// A look at `locks`' directories' parent, if they are reapable (untimed: one request).
    async fn take<L: DistinctLocks>(locks: &L) -> Option<Self> {
        let (client, parent) = locks.reapable_dirs()?;
        let stat = client.check_stat(parent).await.expect("stat").expect("the lock directories' parent");
        Some(DirectoryLook { children_version: stat.cversion, children: stat.num_children })
    }

    /// How many directories the locks made again since `before`. Between two looks only the
    /// server's reaper deletes a directory and only a lock makes one, and each bumps the parent's
    /// children version: (version change − directories fewer) / 2.
    async fn remade_since<L: DistinctLocks>(before: Option<Self>, locks: &L) -> Option<u64> {
        let (before, after) = (before?, Self::take(locks).await?);
        let changes = i64::from(after.children_version) - i64::from(before.children_version);
        let fewer = i64::from(before.children) - i64::from(after.children);
        Some(u64::try_from((changes - fewer) / 2).expect("no fewer creates than nothing"))
    }
}

/// Ours and the raw floor on `locks` distinct locks each (under `{base}-ours` and `{base}-floor`,
/// on the one session of `framework`), warmed up as [`cycle_distinct`] does, then timed in
/// alternating passes (one cycle of every lock at once; which client goes first alternates too):
/// both are timed across the same stretch of the machine's time, so a drift that moves the
/// back-to-back `distinct` ratio falls on both alike. Returns (ours, floor).
async fn distinct_interleaved(
    framework: &Framework,
    base: &str,
    locks: usize,
    (warm_up, cycles): DistinctCycles,
) -> (Measured, Measured) {
    let ours = OursDistinct::new(framework, &format!("{base}-ours"), locks).await;
    let floor = RawDistinct::new(framework, &format!("{base}-floor"), locks).await;
    distinct_pass(&ours, warm_up).await;
    distinct_pass(&floor, warm_up).await;
    let ours_dirs = DirectoryLook::take(&*ours).await;
    // (time, CPU time) of each client's passes.
    let (mut ours_spent, mut floor_spent) =
        ((Duration::ZERO, Duration::ZERO), (Duration::ZERO, Duration::ZERO));
    async fn timed_pass<L: DistinctLocks>(locks: &Arc<L>, spent: &mut (Duration, Duration)) {
        let cpu = support::cpu_time();
        spent.0 += distinct_pass(locks, 1).await;
        spent.1 += support::cpu_time() - cpu;
    }
    for pass in 0..cycles {
        if pass % 2 == 0 {
            timed_pass(&ours, &mut ours_spent).await;
            timed_pass(&floor, &mut floor_spent).await;
        } else {
            timed_pass(&floor, &mut floor_spent).await;
            timed_pass(&ours, &mut ours_spent).await;
        }
    }
    let total = (locks * cycles) as f64;
    let measured = |(took, cpu): (Duration, Duration)| Measured {
        ops: total / took.as_secs_f64(),
        cpu_us: Some(cpu.as_secs_f64() * 1e6 / total),
        ..Default::default()
    };
    let remade = DirectoryLook::remade_since(ours_dirs, &*ours).await;
    let ours_measured =
        Measured { remade_dirs: remade.map(|remade| remade as f64 / total), ..measured(ours_spent) };
    (ours_measured, measured(floor_spent))
}

/// Our mutexes on `locks` distinct paths under `base`, and a bare client to look at `base`.
struct OursDistinct {
    mutexes: Vec<Mutex>,
    client: Client,
    base: String,
}

impl OursDistinct {
    async fn new(framework: &Framework, base: &str, locks: usize) -> Arc<Self> {
        // As the raw floor: the common parent exists before anything; each lock's own directory
        // is made by its first (warm-up) acquire.
        framework.ensure_path(base, Deadline::after(Duration::from_secs(20))).await.expect("base");
        let mutexes = (0..locks)
            .map(|index| Mutex::new(framework, &format!("{base}/lock-{index}")).expect("mutex"))
            .collect();
        Arc::new(OursDistinct {
            mutexes,
            client: support::bare_client(framework).await,
            base: base.to_owned(),
        })
    }
}

impl DistinctLocks for OursDistinct {
    fn len(&self) -> usize {
        self.mutexes.len()
    }

    fn reapable_dirs(&self) -> Option<(&Client, &str)> {
        Some((&self.client, &self.base))
    }

    async fn cycle(&self, index: usize) {
        cycle_ours(&self.mutexes[index]).await;
    }
}

/// The raw floor's lock cycle on `locks` distinct directories under `base`, on bare calls.
struct RawDistinct {
    client: Client,
    dirs: Vec<String>,
}

impl RawDistinct {
    async fn new(framework: &Framework, base: &str, locks: usize) -> Arc<Self> {
        let session = framework.session(Deadline::after(Duration::from_secs(20))).await.expect("session");
        framework.ensure_path(base, Deadline::after(Duration::from_secs(20))).await.expect("base");
        let client = session.client().clone();
        let dirs: Vec<String> = (0..locks).map(|index| format!("{base}/raw-{index}")).collect();
        let made = futures::future::join_all(
            dirs.iter().map(|dir| client.create(dir, &[], &support::anyone(CreateMode::Persistent))),
        );
        for result in made.await {
            result.expect("a raw lock directory");
        }
        Arc::new(RawDistinct { client, dirs })
    }
}

impl DistinctLocks for RawDistinct {
    fn len(&self) -> usize {
        self.dirs.len()
    }

    async fn cycle(&self, index: usize) {
        let dir = &self.dirs[index];
        let options = support::anyone(CreateMode::EphemeralSequential);
        raw_cycle(
            &self.client,
            dir,
            &support::protected_prefix(dir, 0, "lock-"),
            &options,
            Protocol::Pipelined,
        )
        .await;
    }
}

/// Deletes `base` and its children (emptied lock directories), the deletes sent together and
/// untimed. Left behind, emptied containers are reaped by the server during later measurements (a
/// write each, up to 10,000 a minute) and the floor's persistent directories stay for ever.
async fn remove_lock_dirs(framework: &Framework, base: &str) {
    let client = support::bare_client(framework).await;
    let children = match client.list_children(base).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => return,
        Err(err) => panic!("listing {base}: {err}"),
    };
    for chunk in children.chunks(1_000) {
        let deletes = chunk.iter().map(|child| {
            let (client, path) = (&client, format!("{base}/{child}"));
            async move {
                match client.delete(&path, None).await {
                    Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
                    Err(zookeeper_client::Error::NotEmpty) => framework
                        .delete_recursive(&path, Deadline::after(Duration::from_secs(60)))
                        .await
                        .expect("a lock directory with nodes left"),
                    Err(err) => panic!("deleting {path}: {err}"),
                }
            }
        });
        futures::future::join_all(deletes).await;
    }
    framework
        .delete_recursive(base, Deadline::after(Duration::from_secs(60)))
        .await
        .expect("the distinct-locks base");
}

/// Curator's distinct-locks run: a thread per lock (at most `max_threads`), in a JVM with small
/// thread stacks so that 10,000 threads fit. Returns the measurement and the pool size used.
async fn curator_distinct(
    connect: &str,
    base: &str,
    locks: usize,
    (warm_up, cycles): DistinctCycles,
    max_threads: usize,
) -> (Measured, usize) {
    let args = [
        "bench-distinct".to_owned(),
        connect.to_owned(),
        base.to_owned(),
        locks.to_string(),
        cycles.to_string(),
        max_threads.to_string(),
        warm_up.to_string(),
    ];
    let mut process = zk_recipes_testing::CuratorProcess::spawn_with_jvm_options(
        zk_recipes_testing::Jit::Full,
        &["-Xss256k", "-Xmx1g"],
        args.iter(),
    )
    .expect("the Curator driver starts");
    let line = process.expect_line("RESULT", Duration::from_secs(600)).await.expect("a Curator result");
    let status = process.wait(Duration::from_secs(60)).await.expect("the Curator driver exits");
    assert!(status.success(), "the Curator driver failed: {status}\n{}", process.log_tail(30));
    let threads = support::field(&line, "threads").unwrap_or(locks as f64) as usize;
    (curator_measured(&line), threads)
}

#[derive(Default)]
struct Series {
    ops: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    cpu: Vec<f64>,
    remade_dirs: Vec<f64>,
}

impl Series {
    fn push(&mut self, measured: Measured) {
        self.ops.push(measured.ops);
        self.p50.extend(measured.p50_us);
        self.p99.extend(measured.p99_us);
        self.cpu.extend(measured.cpu_us);
        self.remade_dirs.extend(measured.remade_dirs);
    }

    fn cpu(&self) -> Option<f64> {
        (!self.cpu.is_empty()).then(|| support::median(&self.cpu))
    }

    fn remade_dirs(&self) -> Option<f64> {
        (!self.remade_dirs.is_empty()).then(|| support::median(&self.remade_dirs))
    }

    fn ops(&self) -> f64 {
        support::median(&self.ops)
    }

    fn p50(&self) -> Option<f64> {
        (!self.p50.is_empty()).then(|| support::median(&self.p50))
    }

    fn p99(&self) -> Option<f64> {
        (!self.p99.is_empty()).then(|| support::median(&self.p99))
    }
}

/// Results by (scenario, client, parameter value).
#[derive(Default)]
struct Results(BTreeMap<(&'static str, &'static str, usize), Series>);

impl Results {
    fn push(&mut self, scenario: &'static str, client: &'static str, value: usize, measured: Measured) {
        self.0.entry((scenario, client, value)).or_default().push(measured);
    }

    fn get(&self, scenario: &'static str, client: &'static str, value: usize) -> &Series {
        &self.0[&(scenario, client, value)]
    }
}

/// Scale: `waiters` queued on one held lock of one session (its own framework): resident memory
/// per waiter, then server packets per hand-off while they drain.
async fn waiters_scale(connect_string: &str, path: &str, waiters: usize) -> serde_json::Value {
    let framework = support::start_framework(connect_string).await;
    let holder = Mutex::new(&framework, path).expect("mutex").lock().await.expect("the holder's lock");
    let rss_before = support::rss_bytes();
    let live_before = support::live_heap::live_heap_bytes();
    let queued_at = Instant::now();
    let tasks: Vec<_> = (0..waiters)
        .map(|_| {
            let mutex = Mutex::new(&framework, path).expect("mutex");
            tokio::spawn(async move { mutex.lock().await.expect("lock").release().await.expect("release") })
        })
        .collect();
    // Queued: every waiter's node listed, and every waiter watching its predecessor.
    let client = support::bare_client(&framework).await;
    let deadline = Instant::now() + Duration::from_secs(600);
    loop {
        let children = client.list_children(path).await.expect("list").len();
        let watches: usize = support::mntr(connect_string)
            .await
            .get("zk_watch_count")
            .and_then(|count| count.parse().ok())
            .unwrap_or(0);
        if children == waiters + 1 && watches >= waiters {
            break;
        }
        assert!(Instant::now() < deadline, "{waiters} waiters queued: {children} nodes, {watches} watches");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let queue_secs = queued_at.elapsed().as_secs_f64();
    let live_per_waiter = (support::live_heap::live_heap_bytes() - live_before) as f64 / waiters as f64;
    let rss_per_waiter = support::rss_bytes().saturating_sub(rss_before) as f64 / waiters as f64;
    let packets_before = support::server_packets(connect_string).await;
    let drained_at = Instant::now();
    holder.release().await.expect("the holder's release");
    for task in tasks {
        task.await.expect("waiter");
    }
    let drain = drained_at.elapsed();
    let packets = support::server_packets(connect_string).await - packets_before;
    drop(client);
    framework.close().await;
    // `waiters` releases, each handing the lock to the next waiter (the last to nobody).
    let per_hand_off = packets as f64 / waiters as f64;
    println!(
        "  {waiters:>6} waiters: {:>7.0} B live heap and {:>7.0} B RSS per waiter, {per_hand_off:>5.2} server packets \
         per hand-off, drained at {:.0} hand-offs/s (queued in {queue_secs:.1} s)",
        live_per_waiter,
        rss_per_waiter,
        waiters as f64 / drain.as_secs_f64()
    );
    json!({
        "param": "waiters",
        "value": waiters,
        "live_heap_per_waiter_bytes": live_per_waiter,
        "rss_per_waiter_bytes": rss_per_waiter,
        "packets_per_handoff": per_hand_off,
        "handoffs_per_sec": waiters as f64 / drain.as_secs_f64(),
        "queue_secs": queue_secs,
    })
}

/// Scale: `held` locks held on one session (its own framework, through a fault proxy, with
/// [`ErrorPolicy::SessionOnly`] so that a hold is lost only with its session), then the session
/// expired on the server; how long after the client can reach the server again every hold's
/// `lost()` has fired.
///
/// Expiry: the proxy black-holes our connection, a second connection straight to the server
/// resumes the session (its id and password) and closes it, so the server ends it at once; once
/// an observer sees our nodes gone, the proxy heals and our client reconnects to an expired
/// session (`Lost`, then a new session: `Reconnected`). Times run from the heal.
async fn held_scale(
    connect_string: &str,
    observer: &Framework,
    base: &str,
    held: usize,
) -> serde_json::Value {
    let first = connect_string.split(',').next().expect("an address");
    let proxy = FaultProxy::start(first).await.expect("a fault proxy");
    let framework = Framework::builder(proxy.connect_string())
        .error_policy(ErrorPolicy::SessionOnly)
        .start()
        .expect("framework");
    framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");
    framework.ensure_path(base, Deadline::after(Duration::from_secs(20))).await.expect("base");
    let rss_before = support::rss_bytes();
    let live_before = support::live_heap::live_heap_bytes();
    let set_up_at = Instant::now();
    let mut holds = Vec::with_capacity(held);
    let mut acquiring = futures::stream::iter(0..held)
        .map(|index| {
            let mutex = Mutex::new(&framework, &format!("{base}/lock-{index}")).expect("mutex");
            async move {
                let guard = mutex.lock().await.expect("lock");
                (mutex, guard)
            }
        })
        .buffer_unordered(1_000);
    while let Some(hold) = acquiring.next().await {
        holds.push(hold);
    }
    drop(acquiring);
    let set_up_secs = set_up_at.elapsed().as_secs_f64();
    let live_per_hold = (support::live_heap::live_heap_bytes() - live_before) as f64 / held as f64;
    let rss_per_hold = support::rss_bytes().saturating_sub(rss_before) as f64 / held as f64;

    // Every hold's lost(), polled once so that each is waiting before the session goes.
    let mut lost: FuturesUnordered<_> = holds.iter().map(|(_, guard)| guard.lost()).collect();
    assert!(
        tokio::time::timeout(Duration::from_millis(50), lost.next()).await.is_err(),
        "no hold is lost before the session is closed"
    );
    let mut events = framework.connection_events();
    let session_info = framework
        .session(Deadline::after(Duration::from_secs(20)))
        .await
        .expect("session")
        .client()
        .session()
        .clone();
    proxy.black_hole(Duration::from_secs(3600));
    let closing_at = Instant::now();
    let closer = Client::connector()
        .with_session(session_info)
        .connect(connect_string)
        .await
        .expect("resume the session");
    drop(closer);
    let probe = format!("{base}/lock-0");
    let observer_session =
        observer.session(Deadline::after(Duration::from_secs(20))).await.expect("observer session");
    let deadline = Instant::now() + Duration::from_secs(60);
    while !observer_session.client().list_children(&probe).await.expect("list").is_empty() {
        assert!(Instant::now() < deadline, "the server closed the session");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let expired_in = closing_at.elapsed();
    let healed_at = Instant::now();
    proxy.heal();
    let events_seen = tokio::spawn(async move {
        let mut lost = None;
        while let Some(update) = events.next().await {
            let at = update.at().map_or_else(Instant::now, |at| at.into_std());
            match update.state() {
                ConnectionState::Lost => lost = lost.or(Some(at)),
                ConnectionState::Reconnected if lost.is_some() => return (lost, Some(at)),
                _ => {}
            }
        }
        (lost, None)
    });
    let mut first_lost = None;
    let mut count = 0;
    while tokio::time::timeout(Duration::from_secs(120), lost.next())
        .await
        .expect("every hold lost")
        .is_some()
    {
        first_lost.get_or_insert_with(|| healed_at.elapsed());
        count += 1;
    }
    let all_lost = healed_at.elapsed();
    assert_eq!(count, held);
    drop(lost);
    let (lost_event, reconnected) = tokio::time::timeout(Duration::from_secs(120), events_seen)
        .await
        .expect("reconnected")
        .expect("events");
    let since_heal =
        |at: Option<Instant>| at.map(|at| at.saturating_duration_since(healed_at).as_secs_f64() * 1e3);
    let (lost_event_ms, reconnected_ms) = (since_heal(lost_event), since_heal(reconnected));
    let show = |ms: Option<f64>| ms.map_or("-".to_owned(), |ms| format!("{ms:.0} ms"));
    println!(
        "  {held} held locks (set up in {set_up_secs:.1} s): {live_per_hold:.0} B live heap and {rss_per_hold:.0} B RSS \
         per held lock; session expired on \
         the server (in {:.0} ms); from the client reaching the server again: Lost {}, new session {}, first lost() \
         {:.0} ms, every lost() {:.0} ms",
        expired_in.as_secs_f64() * 1e3,
        show(lost_event_ms),
        show(reconnected_ms),
        first_lost.unwrap_or_default().as_secs_f64() * 1e3,
        all_lost.as_secs_f64() * 1e3,
    );
    drop(holds);
    framework.close().await;
    json!({
        "param": "held",
        "value": held,
        "live_heap_per_hold_bytes": live_per_hold,
        "rss_per_hold_bytes": rss_per_hold,
        "set_up_secs": set_up_secs,
        "expiry_ms": expired_in.as_secs_f64() * 1e3,
        "first_lost_ms": first_lost.unwrap_or_default().as_secs_f64() * 1e3,
        "all_lost_ms": all_lost.as_secs_f64() * 1e3,
        "lost_event_ms": lost_event_ms,
        "reconnected_ms": reconnected_ms,
    })
}

/// `clients` rotated left by `round`.
fn rotated<'a>(clients: &[&'a str], round: usize) -> Vec<&'a str> {
    let mut clients = clients.to_vec();
    let len = clients.len();
    clients.rotate_left(round % len);
    clients
}

fn show(value: Option<f64>) -> String {
    value.map_or("-".to_string(), |value| format!("{value:.0}"))
}

fn print_and_emit(
    options: &Options,
    results: &Results,
    curator_threads: &BTreeMap<usize, usize>,
    json: &support::JsonLines,
) {
    println!(
        "\nmedians of {} interleaved rounds ({} cycles uncontended; contended for {:?} after {:?}; distinct locks x {} \
         cycles, at least {} in all, after at least {} untimed)",
        options.rounds,
        options.cycles,
        options.contended_for,
        options.warm_up_for,
        options.distinct_cycles,
        options.distinct_min_total,
        options.distinct_warm_up_total
    );
    println!("{:<34} {:>12} {:>10} {:>10} {:>12}", "scenario", "ops/s", "p50 us", "p99 us", "CPU us/op");
    for ((scenario, client, value), series) in &results.0 {
        let name = format!("{client}/{scenario}-{value}");
        println!(
            "{name:<34} {:>12.0} {:>10} {:>10} {:>12}",
            series.ops(),
            show(series.p50()),
            show(series.p99()),
            series.cpu().map_or("-".to_owned(), |cpu| format!("{cpu:.1}"))
        );
        let (param, unit, latency) = match *scenario {
            "contended" => (Some("sessions"), "acquisitions/s", "handoff"),
            "contended-interleaved" => (Some("sessions"), "acquisitions/s", "cycle"),
            "distinct" | "distinct-interleaved" => (Some("locks"), "cycles/s", "cycle"),
            _ => (None, "cycles/s", "cycle"),
        };
        let mut fields = json!({
            "p50_us": series.p50(),
            "p99_us": series.p99(),
            "latency": latency,
        });
        if let Some(cpu) = series.cpu() {
            fields["cpu_us_per_op"] = json!(cpu);
        }
        if let Some(remade) = series.remade_dirs() {
            fields["remade_dirs_per_cycle"] = json!(remade);
            fields["remade_dirs_per_round"] = json!(series.remade_dirs);
        }
        if let Some(param) = param {
            fields["param"] = json!(param);
            fields["value"] = json!(value);
        }
        if *scenario == "uncontended-interleaved" {
            fields["block"] = json!(options.interleave_block);
        }
        if matches!(*scenario, "distinct" | "distinct-interleaved") {
            fields["cycles_each"] = json!(options.distinct_cycles_for(*value));
            fields["warm_up_each"] = json!(options.distinct_warm_up_for(*value));
            if *client == "curator" {
                fields["threads"] = json!(curator_threads.get(value));
            }
        }
        json.emit_series(scenario, client, unit, &series.ops, fields);
    }
    println!(
        "(p50/p99: per cycle for uncontended; per hand-off for contended — release returned -> next lock returned; \
         CPU: this process's user + system time per cycle, where it runs one client alone)"
    );

    // The ratio of the medians, then the median of each round's own ratio (both measured back to
    // back in that round; a drift of the machine between rounds moves it less).
    let ratio = |a: &Series, b: &Series| {
        let per_round: Vec<f64> = a.ops.iter().zip(&b.ops).map(|(a, b)| a / b).collect();
        format!("{:.2} ({:.2} per round)", a.ops() / b.ops(), support::median(&per_round))
    };
    let get = |scenario, client, value| results.get(scenario, client, value);
    println!("\nratios (same run):");
    let (ours, theirs, floor) =
        (get("uncontended", "ours", 1), get("uncontended", "curator", 1), get("uncontended", "floor", 1));
    println!("  uncontended cycles/s, ours / Curator:      {}", ratio(ours, theirs));
    if let (Some(ours), Some(theirs)) = (ours.p99(), theirs.p99()) {
        println!("  uncontended p99, ours / Curator:           {:.2}", ours / theirs);
    }
    println!("  uncontended, ours / raw floor:             {}", ratio(ours, floor));
    println!("  uncontended, Curator / raw floor:          {}", ratio(theirs, floor));
    println!(
        "  uncontended, interleaved in blocks of {}, ours / raw floor: {}",
        options.interleave_block,
        ratio(get("uncontended-interleaved", "ours", 1), get("uncontended-interleaved", "floor", 1))
    );
    let one_by_one = get("uncontended-one-by-one", "floor", 1);
    println!(
        "  protocol bound, raw floor / raw one-by-one (Curator's protocol on bare calls): {}",
        ratio(floor, one_by_one)
    );
    println!("  uncontended, Curator / raw one-by-one:     {}", ratio(theirs, one_by_one));
    for &sessions in &options.sessions {
        let (ours, theirs, floor) = (
            get("contended", "ours", sessions),
            get("contended", "curator", sessions),
            get("contended", "floor", sessions),
        );
        println!(
            "  {sessions:>3} sessions acquisitions/s: ours / Curator {}, ours / raw floor {}, Curator / raw floor {}; \
             interleaved windows, ours / raw floor {}",
            ratio(ours, theirs),
            ratio(ours, floor),
            ratio(theirs, floor),
            ratio(get("contended-interleaved", "ours", sessions), get("contended-interleaved", "floor", sessions)),
        );
    }
    for &locks in &options.distinct_locks {
        let (ours, theirs, floor) = (
            get("distinct", "ours", locks),
            get("distinct", "curator", locks),
            get("distinct", "floor", locks),
        );
        let interleaved = get("distinct-interleaved", "ours", locks);
        // The median, then each round's.
        let remade = |series: &Series| {
            let percent = |share: f64| format!("{:.1}%", share * 100.0);
            let rounds: Vec<String> = series.remade_dirs.iter().copied().map(percent).collect();
            series
                .remade_dirs()
                .map_or("?".to_owned(), |share| format!("{} ({})", percent(share), rounds.join(", ")))
        };
        println!(
            "  {locks:>6} distinct locks: ours / Curator {}, ours / raw floor {}, Curator / raw floor {} \
             (Curator: {} threads); interleaved passes, ours / raw floor {}; ours' cycles that made a reaped \
             lock directory again: {} back to back, {} interleaved",
            ratio(ours, theirs),
            ratio(ours, floor),
            ratio(theirs, floor),
            curator_threads.get(&locks).map_or("?".to_owned(), ToString::to_string),
            ratio(interleaved, get("distinct-interleaved", "floor", locks)),
            remade(ours),
            remade(interleaved),
        );
    }
}

#[tokio::main]
async fn main() {
    let args: Args = support::parse();
    let options = Options::new(&args);
    let json = support::JsonLines::new("locks", &args.json);
    let (connect, _server) = match std::env::var("ZK_CONNECT") {
        Ok(connect) if !connect.is_empty() => (connect, None),
        _ => {
            // 1 GiB: the held-locks scenario keeps 200,000 nodes (a parent and a lock node each).
            let server = support::production_like_server()
                .heap_mib(1024)
                .start()
                .await
                .expect("a ZooKeeper server (run scripts/install-deps.sh)");
            (server.connect_string(), Some(server))
        }
    };
    let framework = support::start_framework(&connect).await;

    let mut results = Results::default();
    let mut curator_threads = BTreeMap::new();
    let contended_ms = options.contended_for.as_millis().to_string();
    let warm_up_ms = options.warm_up_for.as_millis().to_string();
    if options.rounds > 0 {
        // The server's JIT compiles its hot paths during the first thousands of requests: warm it
        // up (untimed) so that whichever scenario runs first is not the one that pays.
        eprintln!("warming the server up");
        raw_floor(&connect, "/bench/server-warm-up", Protocol::Pipelined, options.warm_up_cycles, 0).await;
    }
    for round in 0..options.rounds {
        eprintln!("round {} of {}", round + 1, options.rounds);
        let (warm_up, cycles) = (options.warm_up_cycles, options.cycles);
        // Each scenario point runs its clients back to back, in an order rotated every round, so
        // that drift (a busy neighbour, the JIT) falls on all of them alike.
        for client in rotated(&["floor", "floor-one-by-one", "ours", "curator"], round) {
            let path = format!("/bench/uncontended-{client}-{round}");
            let measured = match client {
                "floor" => raw_floor(&connect, &path, Protocol::Pipelined, warm_up, cycles).await,
                "floor-one-by-one" => raw_floor(&connect, &path, Protocol::OneByOne, warm_up, cycles).await,
                "ours" => ours_uncontended(&connect, &path, warm_up, cycles).await,
                _ => {
                    curator(&[
                        "bench-cycles".into(),
                        connect.clone(),
                        path,
                        cycles.to_string(),
                        warm_up.to_string(),
                    ])
                    .await
                }
            };
            match client {
                "floor-one-by-one" => results.push("uncontended-one-by-one", "floor", 1, measured),
                client => results.push("uncontended", client, 1, measured),
            }
        }
        let path = format!("/bench/uncontended-interleaved-{round}");
        let (ours, floor) =
            uncontended_interleaved(&connect, &path, warm_up, cycles, options.interleave_block).await;
        results.push("uncontended-interleaved", "ours", 1, ours);
        results.push("uncontended-interleaved", "floor", 1, floor);
        for &sessions in &options.sessions {
            for client in rotated(&["floor", "ours", "curator"], round) {
                let path = format!("/bench/contended-{client}-{sessions}-{round}");
                let (warm_up, duration) = (options.warm_up_for, options.contended_for);
                let measured = match client {
                    "floor" => raw_contended(&connect, &path, sessions, warm_up, duration).await,
                    "ours" => ours_contended(&connect, &path, sessions, warm_up, duration).await,
                    _ => {
                        curator(&[
                            "bench-contended".into(),
                            connect.clone(),
                            path,
                            sessions.to_string(),
                            contended_ms.clone(),
                            warm_up_ms.clone(),
                        ])
                        .await
                    }
                };
                results.push("contended", client, sessions, measured);
            }
            let path = format!("/bench/contended-interleaved-{sessions}-{round}");
            let (ours, floor) = contended_interleaved(
                &connect,
                &path,
                sessions,
                options.warm_up_for,
                options.contended_for,
                options.contended_windows,
            )
            .await;
            results.push("contended-interleaved", "ours", sessions, ours);
            results.push("contended-interleaved", "floor", sessions, floor);
        }
        for &locks in &options.distinct_locks {
            for client in rotated(&["floor", "ours", "curator"], round) {
                let base = format!("/bench/distinct-{client}-{locks}-{round}");
                let cycles = (options.distinct_warm_up_for(locks), options.distinct_cycles_for(locks));
                let measured = match client {
                    "floor" => cycle_distinct(RawDistinct::new(&framework, &base, locks).await, cycles).await,
                    "ours" => cycle_distinct(OursDistinct::new(&framework, &base, locks).await, cycles).await,
                    _ => {
                        let max_threads = options.curator_max_threads;
                        let (measured, threads) =
                            curator_distinct(&connect, &base, locks, cycles, max_threads).await;
                        curator_threads.insert(locks, threads);
                        measured
                    }
                };
                results.push("distinct", client, locks, measured);
                remove_lock_dirs(&framework, &base).await;
            }
            let base = format!("/bench/distinct-interleaved-{locks}-{round}");
            let cycles = (options.distinct_warm_up_for(locks), options.distinct_cycles_for(locks));
            let (ours, floor) = distinct_interleaved(&framework, &base, locks, cycles).await;
            results.push("distinct-interleaved", "ours", locks, ours);
            results.push("distinct-interleaved", "floor", locks, floor);
            for client in ["ours", "floor"] {
                remove_lock_dirs(&framework, &format!("{base}-{client}")).await;
            }
        }
    }

    if options.rounds > 0 {
        print_and_emit(&options, &results, &curator_threads, &json);
    }

    if options.scale {
        println!("\nscale (ours, one session each):");
        for &waiters in &options.waiters {
            let fields = waiters_scale(&connect, &format!("/bench/waiters-{waiters}"), waiters).await;
            json.emit("waiters", "ours", fields);
        }
        let fields = held_scale(&connect, &framework, "/bench/held", options.held).await;
        json.emit("held", "ours", fields);
    }

    if _server.is_none() {
        // Someone else's server: leave it as we found it (a thrown-away testing server is not
        // worth the time 200,000 deletes take).
        framework
            .delete_recursive("/bench", Deadline::after(Duration::from_secs(600)))
            .await
            .expect("clean up");
    }
    framework.close().await;
}
