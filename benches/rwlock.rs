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

use zk_recipes::framework::Framework;
use zk_recipes::rwlock::RwLock;

mod support;

/// Clients (sessions) contending on one lock.
const CLIENTS: usize = 8;
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

/// A small deterministic generator (xorshift64*), one per client.
struct Coin(u64);

impl Coin {
    fn new(seed: u64) -> Self {
        Coin(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    /// True with probability `percent` %.
    fn flip(&mut self, percent: u32) -> bool {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 33) % 100 < u64::from(percent)
    }
}

async fn ours(connect: &str, path: &str, write_percent: u32, options: &Options) -> Measured {
    let mut frameworks = Vec::new();
    for _ in 0..CLIENTS {
        let framework = Framework::builder(connect).start().expect("framework");
        framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");
        frameworks.push(framework);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let reads = Arc::new(AtomicU64::new(0));
    let writes = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = frameworks
        .iter()
        .enumerate()
        .map(|(index, framework)| {
            let lock = RwLock::new(framework, path).expect("rwlock");
            let (stop, reads, writes) = (stop.clone(), reads.clone(), writes.clone());
            tokio::spawn(async move {
                let mut coin = Coin::new(1000 + index as u64);
                while !stop.load(Ordering::Relaxed) {
                    if coin.flip(write_percent) {
                        lock.write().await.expect("write").release().await.expect("release");
                        writes.fetch_add(1, Ordering::Relaxed);
                    } else {
                        lock.read().await.expect("read").release().await.expect("release");
                        reads.fetch_add(1, Ordering::Relaxed);
                    }
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
    // [mix][0: ours, 1: Curator] -> one measurement per round.
    let mut results: Vec<[Vec<Measured>; 2]> = MIXES.iter().map(|_| [Vec::new(), Vec::new()]).collect();
    for round in 0..options.rounds {
        eprintln!("round {} of {}", round + 1, options.rounds);
        let curator_first = round % 2 == 1;
        for (mix, write_percent) in MIXES.iter().enumerate() {
            for curator_turn in [curator_first, !curator_first] {
                if curator_turn {
                    let path = format!("/bench/rw-curator-{write_percent}-{round}");
                    results[mix][1].push(curator(&connect, &path, *write_percent, &options).await);
                } else {
                    let path = format!("/bench/rw-ours-{write_percent}-{round}");
                    results[mix][0].push(ours(&connect, &path, *write_percent, &options).await);
                }
            }
        }
    }

    println!(
        "\n{CLIENTS} clients (one session each) on one read-write lock, {:?} per run, medians of {} interleaved \
         rounds:",
        options.duration, options.rounds
    );
    println!(
        "{:<14} {:>14} {:>14} {:>8}   {:>22}",
        "mix", "ours acq/s", "Curator acq/s", "ratio", "reads/writes (ours; Curator)"
    );
    for (mix, write_percent) in MIXES.iter().enumerate() {
        let [ours, theirs] = &results[mix];
        let ours_ops = support::median(&ours.iter().map(|m| m.ops).collect::<Vec<_>>());
        let theirs_ops = support::median(&theirs.iter().map(|m| m.ops).collect::<Vec<_>>());
        let totals = |runs: &[Measured]| {
            runs.iter().fold((0, 0), |(reads, writes), m| (reads + m.reads, writes + m.writes))
        };
        let ((our_reads, our_writes), (their_reads, their_writes)) = (totals(ours), totals(theirs));
        println!(
            "{:<14} {ours_ops:>14.0} {theirs_ops:>14.0} {:>7.2}x   \
             {our_reads}/{our_writes}; {their_reads}/{their_writes}",
            mix_name(*write_percent),
            ours_ops / theirs_ops,
        );
        for (client, runs) in [("ours", ours), ("curator", theirs)] {
            let per_round: Vec<f64> = runs.iter().map(|m| m.ops).collect();
            let (reads, writes) = totals(runs);
            json.emit_series(
                "mix",
                client,
                "acquisitions/s",
                &per_round,
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
            "{:<14} rounds: ours {:.0?}, Curator {:.0?}",
            "",
            ours.iter().map(|m| m.ops).collect::<Vec<_>>(),
            theirs.iter().map(|m| m.ops).collect::<Vec<_>>()
        );
    }
}
