//! Lock benchmarks: zk-recipes against Curator 5.4 on the same ZooKeeper server, in one run.
//!
//! ```sh
//! cargo bench -p zk-recipes --bench locks                  # 3 interleaved rounds
//! cargo bench -p zk-recipes --bench locks -- --rounds 5 --cycles 3000 --warm-up-cycles 3000 \
//!     --contended-secs 3 --warm-up-secs 2 --distinct-locks 1000 --distinct-cycles 3
//! ```
//!
//! Uses `ZK_CONNECT` if set, else starts a `TestingServer` with both JVMs (server and Curator)
//! compiling as in production (see `support`). Every timed part follows a warm-up of the same kind
//! (3,000 cycles, or 2 s with 8 sessions), for our side and Curator's alike. Scenarios, each run for zk-recipes and
//! for Curator (through the Java driver in `tests/java`), alternating which goes first, and
//! reported as medians over the rounds with ratios:
//! - `floor`: the raw protocol a lock cycle needs — create (ephemeral sequential) and list sent
//!   back to back, then delete — with bare zookeeper-client calls on a session of its own;
//!   `floor/one-by-one` the same calls each awaited before the next, as Curator sends them: their
//!   ratio is the most any client can gain on Curator from the protocol alone;
//! - `uncontended`: lock + release on one path, one session: cycles/s, p50, p99;
//! - `contended-8`: 8 sessions looping lock + release on one path: acquisitions/s;
//! - `distinct-1000`: 1,000 locks on distinct paths cycled concurrently by one process (ours: 1,000
//!   tasks on one session; Curator: 1,000 threads on one client), with the raw floor for the same
//!   concurrency.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::framework::zookeeper_client::{self, CreateMode};
use zk_recipes::framework::{Deadline, Framework};
use zk_recipes::mutex::Mutex;

mod support;

struct Options {
    rounds: usize,
    cycles: usize,
    warm_up_cycles: usize,
    contended_for: Duration,
    warm_up_for: Duration,
    distinct_locks: usize,
    distinct_cycles: usize,
}

impl Options {
    fn from_args() -> Self {
        let args = support::Args::from_env();
        if args.is_smoke_run() {
            return Options {
                rounds: 1,
                cycles: 20,
                warm_up_cycles: 10,
                contended_for: Duration::from_millis(300),
                warm_up_for: Duration::from_millis(100),
                distinct_locks: 10,
                distinct_cycles: 2,
            };
        }
        let number = |name: &str, default: u64| args.number(name).unwrap_or(default);
        Options {
            rounds: number("--rounds", 3) as usize,
            cycles: number("--cycles", 2_000) as usize,
            // Enough for the JVMs' optimising compiler to have compiled Curator's and the
            // server's hot paths before the timed part.
            warm_up_cycles: number("--warm-up-cycles", 3_000) as usize,
            contended_for: Duration::from_secs(number("--contended-secs", 3)),
            warm_up_for: Duration::from_secs(number("--warm-up-secs", 2)),
            distinct_locks: number("--distinct-locks", 1_000) as usize,
            distinct_cycles: number("--distinct-cycles", 3) as usize,
        }
    }
}

/// One measurement: operations per second and, where measured per cycle, p50/p99 latency.
#[derive(Clone, Copy, Debug, Default)]
struct Measured {
    ops: f64,
    p50_us: Option<f64>,
    p99_us: Option<f64>,
}

fn from_latencies(mut latencies: Vec<Duration>, total: Duration) -> Measured {
    latencies.sort_unstable();
    let at = |q: f64| latencies[((latencies.len() as f64 - 1.0) * q).round() as usize].as_secs_f64() * 1e6;
    Measured {
        ops: latencies.len() as f64 / total.as_secs_f64(),
        p50_us: Some(at(0.5)),
        p99_us: Some(at(0.99)),
    }
}

async fn curator(args: &[String]) -> Measured {
    let line = support::curator_result(args).await;
    Measured {
        ops: support::field(&line, "ops").unwrap_or_else(|| panic!("no ops= in {line:?}")),
        p50_us: support::field(&line, "p50_us"),
        p99_us: support::field(&line, "p99_us"),
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

async fn raw_floor(connect: &str, path: &str, protocol: Protocol, warm_up: usize, cycles: usize) -> Measured {
    // A session of its own, opened by a framework so that its socket is set up as ours are
    // (`TCP_NODELAY`), then driven with bare zookeeper-client calls.
    let framework = Framework::builder(connect).start().expect("framework");
    let session = framework.session(Deadline::after(Duration::from_secs(20))).await.expect("session");
    let client = session.client().clone();
    // Persistent, not a container: an emptied container would be reaped between cycles.
    let options = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
    client.mkdir(path, &options).await.expect("the bench directory");
    let node_options = CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all());
    let node_prefix = format!("{path}/_c_00000000-0000-4000-8000-000000000000-lock-");
    let mut latencies = Vec::with_capacity(cycles);
    let mut started = Instant::now();
    for cycle_index in 0..warm_up + cycles {
        if cycle_index == warm_up {
            latencies.clear();
            started = Instant::now();
        }
        let cycle = Instant::now();
        let sequence = match protocol {
            Protocol::Pipelined => {
                let create = client.create(&node_prefix, b"", &node_options);
                let list = client.list_children(path);
                let (_, sequence) = create.await.expect("create");
                list.await.expect("list");
                sequence
            }
            Protocol::OneByOne => {
                let (_, sequence) = client.create(&node_prefix, b"", &node_options).await.expect("create");
                client.list_children(path).await.expect("list");
                sequence
            }
        };
        client.delete(&format!("{node_prefix}{sequence}"), None).await.expect("delete");
        latencies.push(cycle.elapsed());
    }
    let measured = from_latencies(latencies, started.elapsed());
    drop(client);
    drop(session);
    framework.close().await;
    measured
}

async fn ours_uncontended(framework: &Framework, path: &str, warm_up: usize, cycles: usize) -> Measured {
    let mutex = Mutex::new(framework, path).expect("mutex");
    for _ in 0..warm_up {
        mutex.lock().await.expect("lock").release().await.expect("release");
    }
    let mut latencies = Vec::with_capacity(cycles);
    let started = Instant::now();
    for _ in 0..cycles {
        let cycle = Instant::now();
        mutex.lock().await.expect("lock").release().await.expect("release");
        latencies.push(cycle.elapsed());
    }
    from_latencies(latencies, started.elapsed())
}

async fn ours_contended(
    connect: &str,
    path: &str,
    sessions: usize,
    warm_up: Duration,
    duration: Duration,
) -> Measured {
    let mut frameworks = Vec::new();
    for _ in 0..sessions {
        let framework = Framework::builder(connect).start().expect("framework");
        framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");
        frameworks.push(framework);
    }
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let tasks: Vec<_> = frameworks
        .iter()
        .map(|framework| {
            let (mutex, stop, count) =
                (Mutex::new(framework, path).expect("mutex"), stop.clone(), count.clone());
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    mutex.lock().await.expect("lock").release().await.expect("release");
                    count.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    let (first, last, elapsed) =
        support::measure_window(warm_up, duration, || count.load(Ordering::Relaxed)).await;
    let measured = Measured { ops: (last - first) as f64 / elapsed.as_secs_f64(), ..Default::default() };
    stop.store(true, Ordering::Relaxed);
    for task in tasks {
        task.await.expect("contender");
    }
    for framework in frameworks {
        framework.close().await;
    }
    measured
}

async fn ours_distinct(framework: &Framework, base: &str, locks: usize, cycles: usize) -> Measured {
    let started = Instant::now();
    let tasks: Vec<_> = (0..locks)
        .map(|index| {
            let mutex = Mutex::new(framework, &format!("{base}/lock-{index}")).expect("mutex");
            tokio::spawn(async move {
                for _ in 0..cycles {
                    mutex.lock().await.expect("lock").release().await.expect("release");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("cycler");
    }
    Measured { ops: (locks * cycles) as f64 / started.elapsed().as_secs_f64(), ..Default::default() }
}

async fn raw_distinct(framework: &Framework, base: &str, locks: usize, cycles: usize) -> Measured {
    let session = framework.session(Deadline::after(Duration::from_secs(20))).await.expect("session");
    framework.ensure_path(base, Deadline::after(Duration::from_secs(20))).await.expect("base");
    let started = Instant::now();
    let tasks: Vec<_> = (0..locks)
        .map(|index| {
            let client = session.client().clone();
            let dir = format!("{base}/raw-{index}");
            tokio::spawn(async move {
                let persistent = CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all());
                let _ = client.create(&dir, &[], &persistent).await;
                let options = CreateMode::EphemeralSequential.with_acls(zookeeper_client::Acls::anyone_all());
                let prefix = format!("{dir}/_c_00000000-0000-4000-8000-000000000000-lock-");
                for _ in 0..cycles {
                    let create = client.create(&prefix, b"", &options);
                    let list = client.list_children(&dir);
                    let (_, sequence) = create.await.expect("create");
                    list.await.expect("list");
                    client.delete(&format!("{prefix}{sequence}"), None).await.expect("delete");
                }
            })
        })
        .collect();
    for task in tasks {
        task.await.expect("raw cycler");
    }
    Measured { ops: (locks * cycles) as f64 / started.elapsed().as_secs_f64(), ..Default::default() }
}

#[derive(Default)]
struct Series {
    ops: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
}

impl Series {
    fn push(&mut self, measured: Measured) {
        self.ops.push(measured.ops);
        self.p50.extend(measured.p50_us);
        self.p99.extend(measured.p99_us);
    }

    fn summary(&self) -> (f64, Option<f64>, Option<f64>) {
        let p50 = (!self.p50.is_empty()).then(|| support::median(&self.p50));
        let p99 = (!self.p99.is_empty()).then(|| support::median(&self.p99));
        (support::median(&self.ops), p50, p99)
    }
}

#[tokio::main]
async fn main() {
    let options = Options::from_args();
    let (connect, _server) = support::server(None).await;
    let framework = Framework::builder(connect.as_str()).start().expect("framework");
    framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");

    let names = [
        "floor",
        "ours/uncontended",
        "curator/uncontended",
        "ours/contended-8",
        "curator/contended-8",
        "floor/distinct-1000",
        "ours/distinct-1000",
        "curator/distinct-1000",
        "floor/one-by-one",
    ];
    let mut series: Vec<Series> = names.iter().map(|_| Series::default()).collect();
    let contended_ms = options.contended_for.as_millis().to_string();
    let warm_up_ms = options.warm_up_for.as_millis().to_string();
    for round in 0..options.rounds {
        eprintln!("round {} of {}", round + 1, options.rounds);
        let path = |name: &str| format!("/bench/{name}-{round}");
        let (warm_up, cycles) = (options.warm_up_cycles, options.cycles);
        series[0].push(raw_floor(&connect, &path("floor"), Protocol::Pipelined, warm_up, cycles).await);
        series[8].push(raw_floor(&connect, &path("floor-serial"), Protocol::OneByOne, warm_up, cycles).await);
        let curator_first = round % 2 == 1;
        for first in [curator_first, !curator_first] {
            if first {
                series[2].push(
                    curator(&[
                        "bench-cycles".into(),
                        connect.clone(),
                        path("curator-cycles"),
                        options.cycles.to_string(),
                        options.warm_up_cycles.to_string(),
                    ])
                    .await,
                );
                series[4].push(
                    curator(&[
                        "bench-contended".into(),
                        connect.clone(),
                        path("curator-contended"),
                        "8".into(),
                        contended_ms.clone(),
                        warm_up_ms.clone(),
                    ])
                    .await,
                );
                series[7].push(
                    curator(&[
                        "bench-distinct".into(),
                        connect.clone(),
                        path("curator-distinct"),
                        options.distinct_locks.to_string(),
                        options.distinct_cycles.to_string(),
                    ])
                    .await,
                );
            } else {
                series[1].push(
                    ours_uncontended(
                        &framework,
                        &path("ours-cycles"),
                        options.warm_up_cycles,
                        options.cycles,
                    )
                    .await,
                );
                series[3].push(
                    ours_contended(
                        &connect,
                        &path("ours-contended"),
                        8,
                        options.warm_up_for,
                        options.contended_for,
                    )
                    .await,
                );
                series[6].push(
                    ours_distinct(
                        &framework,
                        &path("ours-distinct"),
                        options.distinct_locks,
                        options.distinct_cycles,
                    )
                    .await,
                );
            }
        }
        series[5].push(
            raw_distinct(&framework, &path("raw-distinct"), options.distinct_locks, options.distinct_cycles)
                .await,
        );
    }

    println!("\nmedians of {} interleaved rounds ({} cycles uncontended; 8 sessions for {:?}; {} locks x {} cycles)",
        options.rounds, options.cycles, options.contended_for, options.distinct_locks, options.distinct_cycles);
    println!("{:<24} {:>12} {:>10} {:>10}", "scenario", "ops/s", "p50 us", "p99 us");
    let mut summaries = Vec::new();
    for (name, series) in names.iter().zip(series.iter_mut()) {
        let (ops, p50, p99) = series.summary();
        let show = |value: Option<f64>| value.map_or("-".to_string(), |value| format!("{value:.0}"));
        println!("{name:<24} {ops:>12.0} {:>10} {:>10}", show(p50), show(p99));
        summaries.push((ops, p50, p99));
    }
    let ratio = |a: usize, b: usize| summaries[a].0 / summaries[b].0;
    println!("\nratios (same run):");
    println!("  uncontended cycles/s, ours / Curator:      {:.2}x", ratio(1, 2));
    if let (Some(ours), Some(theirs)) = (summaries[1].2, summaries[2].2) {
        println!("  uncontended p99, ours / Curator:           {:.2}", ours / theirs);
    }
    println!("  uncontended, ours / raw floor:             {:.2}", ratio(1, 0));
    println!("  uncontended, Curator / raw floor:          {:.2}", ratio(2, 0));
    println!(
        "  protocol bound, raw floor / raw one-by-one (Curator's protocol on bare calls): {:.2}x",
        ratio(0, 8)
    );
    println!("  uncontended, Curator / raw one-by-one:     {:.2}", ratio(2, 8));
    println!("  8 sessions acquisitions/s, ours / Curator: {:.2}x", ratio(3, 4));
    println!("  distinct locks, ours / Curator:      {:.2}x", ratio(6, 7));
    println!("  distinct locks, ours / raw floor:    {:.2}", ratio(6, 5));
    println!("  distinct locks, Curator / raw floor: {:.2}", ratio(7, 5));
    framework.delete_recursive("/bench", Deadline::after(Duration::from_secs(60))).await.expect("clean up");
    framework.close().await;
}
