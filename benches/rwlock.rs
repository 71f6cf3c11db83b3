//! Read-write lock throughput: ours against Curator 5.4's `InterProcessReadWriteLock` on the same
//! ZooKeeper server, in one run.
//!
//! ```sh
//! cargo bench -p zk-recipes-benches --bench rwlock                      # 3 interleaved rounds of 3 s
//! cargo bench -p zk-recipes-benches --bench rwlock -- --rounds 5 --secs 5 --warm-up-secs 2
//! ```
//!
//! Uses `ZK_CONNECT` if set, else starts a `TestingServer` with both JVMs compiling as in
//! production (see `support`); each run is counted after a warm-up of the same load (2 s). 8 clients (one session each, one
//! task or thread each) loop acquire + release on one path for a fixed time; each acquisition is
//! a write with probability p (each client's own pseudo-random sequence), else a read. Mixes:
//! 20 % writes, reads only, writes only. Each round runs every mix for us and for Curator (the
//! Java driver's `bench-rw`), alternating which goes first; medians over the rounds and ratios
//! are printed. With `--json PATH` (or `ZKR_BENCH_JSON`) each mix is also appended as JSON lines
//! (`bench` = `rwlock`, `scenario` = `mix`, `param` = `write_percent`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes::framework::zookeeper_client::{Client, CreateMode};
use zk_recipes::rwlock::RwLock;

mod support;

/// Clients (sessions) contending on one lock.
const CLIENTS: usize = 8;
/// The sides measured, in their JSON names: ours, the raw floor, Curator's.
const SIDES: [&str; 3] = ["ours", "floor", "curator"];
/// Write percentages: the mixed load, reads only, writes only.
const MIXES: [u32; 3] = [20, 0, 100];

/// Read-write lock throughput, ours against Curator's (the module docs say what runs).
#[derive(clap::Parser, Debug)]
#[command(name = "rwlock", bin_name = "cargo bench -p zk-recipes-benches --bench rwlock --")]
struct Args {
    /// Interleaved rounds; medians over them are reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Seconds each mix is measured, per round and side.
    #[arg(long, default_value_t = 3)]
    secs: u64,
    /// Seconds of the same load before each measurement.
    #[arg(long, default_value_t = 2)]
    warm_up_secs: u64,
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

struct Options {
    rounds: usize,
    duration: Duration,
    warm_up: Duration,
}

impl Options {
    fn new(args: &Args) -> Self {
        if args.harness.is_smoke_run() {
            return Options {
                rounds: 1,
                duration: Duration::from_millis(300),
                warm_up: Duration::from_millis(100),
            };
        }
        Options {
            rounds: args.rounds,
            duration: Duration::from_secs(args.secs),
            warm_up: Duration::from_secs(args.warm_up_secs),
        }
    }
}

/// One measurement: acquisitions per second, and how many were reads and writes.
#[derive(Debug, Clone, Copy, Default)]
struct Measured {
    ops: f64,
    reads: u64,
    writes: u64,
}

/// A deterministic coin, one per client (seeded, so runs compare).
struct Coin(fastrand::Rng);

impl Coin {
    fn new(seed: u64) -> Self {
        Coin(fastrand::Rng::with_seed(seed))
    }

    /// True with probability `percent` %.
    fn flip(&mut self, percent: u32) -> bool {
        self.0.u32(0..100) < percent
    }
}

/// The raw floor: our read-write lock's protocol on bare calls, per acquisition. Create
/// (protected, ephemeral sequential, `__READ__` or `__WRIT__`) and list sent back to back, each
/// name's sequence parsed once; a read holds when no write node is before it, else it watches the
/// first write node before it and, when that goes, lists again; a write holds when first, else it
/// watches its predecessor and, when that goes, holds without listing again if the predecessor
/// was first, else lists again (the decisions of `crates/rwlock/src/driver.rs`). Release deletes.
struct RawRwLock {
    client: Client,
    dir: String,
    read_prefix: String,
    write_prefix: String,
}

impl RawRwLock {
    async fn acquire(&self, write: bool) -> String {
        let prefix = if write { &self.write_prefix } else { &self.read_prefix };
        let options = support::anyone(CreateMode::EphemeralSequential);
        let create = self.client.create(prefix, b"", &options);
        let list = self.client.list_children(&self.dir);
        let (_, sequence) = create.await.expect("create");
        let mut children = list.await.expect("list");
        let ours = format!("{prefix}{sequence}");
        let our_name = ours.rsplit('/').next().expect("a name").to_owned();
        loop {
            children.sort_by_cached_key(|child| support::sequence_of(child));
            let index = children.iter().position(|child| *child == our_name).expect("our node is listed");
            let (to_watch, holds_once_gone) = if write {
                if index == 0 {
                    return ours;
                }
                (&children[index - 1], index == 1)
            } else {
                match children[..index].iter().find(|child| child.contains("__WRIT__")) {
                    None => return ours,
                    Some(writer) => (writer, false),
                }
            };
            let watched = format!("{}/{to_watch}", self.dir);
            let (stat, watcher) = self.client.check_and_watch_stat(&watched).await.expect("exists watch");
            if stat.is_some() {
                watcher.changed().await;
                if holds_once_gone {
                    return ours;
                }
            }
            children = self.client.list_children(&self.dir).await.expect("list");
        }
    }

    async fn release(&self, node: String) {
        self.client.delete(&node, None).await.expect("delete");
    }
}

/// One client's lock: ours or the floor's.
enum Contender {
    Ours(RwLock),
    Floor(RawRwLock),
}

impl Contender {
    /// One acquisition (a write or a read) and its release.
    async fn cycle(&self, write: bool) {
        match self {
            Contender::Ours(lock) if write => {
                lock.write().await.expect("write").release().await.expect("release")
            }
            Contender::Ours(lock) => lock.read().await.expect("read").release().await.expect("release"),
            Contender::Floor(raw) => {
                let node = raw.acquire(write).await;
                raw.release(node).await;
            }
        }
    }
}

/// `CLIENTS` sessions cycling ours (or, with `floor`, the raw floor) on `path`.
async fn measure(connect: &str, path: &str, write_percent: u32, options: &Options, floor: bool) -> Measured {
    let mut frameworks = Vec::new();
    for _ in 0..CLIENTS {
        frameworks.push(support::start_framework(connect).await);
    }
    let mut contenders = Vec::new();
    for (index, framework) in frameworks.iter().enumerate() {
        contenders.push(if floor {
            let client = support::bare_client(framework).await;
            if index == 0 {
                client
                    .mkdir(path, &support::anyone(CreateMode::Persistent))
                    .await
                    .expect("the lock directory");
            }
            Contender::Floor(RawRwLock {
                client,
                dir: path.to_owned(),
                read_prefix: support::protected_prefix(path, index, "__READ__"),
                write_prefix: support::protected_prefix(path, index, "__WRIT__"),
            })
        } else {
            Contender::Ours(RwLock::new(framework, path).expect("rwlock"))
        });
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let writes = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = contenders
        .into_iter()
        .enumerate()
        .map(|(index, contender)| {
            let (stop, reads, writes) = (stop.clone(), reads.clone(), writes.clone());
            tokio::spawn(async move {
                let mut coin = Coin::new(1000 + index as u64);
                while !stop.load(Ordering::Relaxed) {
                    let write = coin.flip(write_percent);
                    contender.cycle(write).await;
                    if write { &writes } else { &reads }.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let totals = || (reads.load(Ordering::Relaxed), writes.load(Ordering::Relaxed));
    let ((reads_from, writes_from), (reads_to, writes_to), elapsed) =
        support::measure_window(options.warm_up, options.duration, totals).await;
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("contender");
    }
    for framework in frameworks {
        framework.close().await;
    }
    let (reads, writes) = (reads_to - reads_from, writes_to - writes_from);
    Measured { ops: (reads + writes) as f64 / elapsed.as_secs_f64(), reads, writes }
}

async fn curator(connect: &str, path: &str, write_percent: u32, options: &Options) -> Measured {
    let line = support::curator_result(&[
        "bench-rw".to_owned(),
        connect.to_owned(),
        path.to_owned(),
        CLIENTS.to_string(),
        options.duration.as_millis().to_string(),
        write_percent.to_string(),
        options.warm_up.as_millis().to_string(),
    ])
    .await;
    let field = |name: &str| support::field(&line, name).unwrap_or_else(|| panic!("no {name}= in {line:?}"));
    Measured { ops: field("ops"), reads: field("reads") as u64, writes: field("writes") as u64 }
}

fn mix_name(write_percent: u32) -> String {
    match write_percent {
        0 => "reads only".to_owned(),
        100 => "writes only".to_owned(),
        percent => format!("{percent} % writes"),
    }
}

#[tokio::main]
async fn main() {
    let args: Args = support::parse();
    let options = Options::new(&args);
    let json = support::JsonLines::new("rwlock", &args.json);
    let (connect, _server) = support::server(None).await;
    // [mix][side] -> one measurement per round.
    let mut results: Vec<[Vec<Measured>; 3]> =
        MIXES.iter().map(|_| [Vec::new(), Vec::new(), Vec::new()]).collect();
    for round in 0..options.rounds {
        eprintln!("round {} of {}", round + 1, options.rounds);
        for (mix, write_percent) in MIXES.iter().enumerate() {
            // Which side goes first turns with the rounds.
            for turn in 0..SIDES.len() {
                let side = (turn + round) % SIDES.len();
                let path = format!("/bench/rw-{}-{write_percent}-{round}", SIDES[side]);
                let measured = match SIDES[side] {
                    "curator" => curator(&connect, &path, *write_percent, &options).await,
                    name => measure(&connect, &path, *write_percent, &options, name == "floor").await,
                };
                results[mix][side].push(measured);
            }
        }
    }

    println!(
        "\n{CLIENTS} clients (one session each) on one read-write lock, {:?} per run, medians of {} interleaved \
         rounds (ratios: of the medians [median of the per-round ratios]):",
        options.duration, options.rounds
    );
    println!(
        "{:<14} {:>12} {:>12} {:>14} {:>16} {:>16}   reads/writes (ours; floor; Curator)",
        "mix", "ours acq/s", "floor acq/s", "Curator acq/s", "ours / floor", "ours / Curator",
    );
    let ops = |runs: &[Measured]| runs.iter().map(|m| m.ops).collect::<Vec<_>>();
    let ratios = |a: &[Measured], b: &[Measured]| {
        let per_round: Vec<f64> = a.iter().zip(b).map(|(a, b)| a.ops / b.ops).collect();
        format!(
            "{:.2} [{:.2}]",
            support::median(&ops(a)) / support::median(&ops(b)),
            support::median(&per_round)
        )
    };
    let totals = |runs: &[Measured]| {
        runs.iter().fold((0, 0), |(reads, writes), m| (reads + m.reads, writes + m.writes))
    };
    for (mix, write_percent) in MIXES.iter().enumerate() {
        let [ours, floor, theirs] = &results[mix];
        let shares: Vec<String> = [ours, floor, theirs]
            .iter()
            .map(|runs| format!("{}/{}", totals(runs).0, totals(runs).1))
            .collect();
        println!(
            "{:<14} {:>12.0} {:>12.0} {:>14.0} {:>16} {:>16}   {}",
            mix_name(*write_percent),
            support::median(&ops(ours)),
            support::median(&ops(floor)),
            support::median(&ops(theirs)),
            ratios(ours, floor),
            ratios(ours, theirs),
            shares.join("; "),
        );
        for (side, runs) in SIDES.iter().zip(&results[mix]) {
            let (reads, writes) = totals(runs);
            json.emit_series(
                "mix",
                side,
                "acquisitions/s",
                &ops(runs),
                serde_json::json!({
                    "param": "write_percent",
                    "value": write_percent,
                    "sessions": CLIENTS,
                    "reads": reads,
                    "writes": writes,
                }),
            );
        }
        println!(
            "{:<14} rounds: ours {:.0?}, floor {:.0?}, Curator {:.0?}",
            "",
            ops(ours),
            ops(floor),
            ops(theirs)
        );
    }
}
