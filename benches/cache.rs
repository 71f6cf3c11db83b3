//! The subtree cache on a real ZooKeeper server, against the raw floor (the same protocol on
//! bare zookeeper-client calls) and Curator's `CuratorCache`, in the same run.
//!
//! `cargo bench -p zk-recipes-benches --bench cache` (release build). Under `cargo test` it makes a
//! smoke run with small trees. Environment (full run defaults in brackets):
//! - `CACHE_BENCH_CHILDREN` [100000]: children under one parent;
//! - `CACHE_BENCH_TREE` [300000]: nodes in a subtree (parents of 1,000 children each);
//!   1,000,000 needs `CACHE_BENCH_SERVER_HEAP_MB=1536`;
//! - `CACHE_BENCH_SERVER_HEAP_MB` [1024]: the testing server's heap (`-Xmx`);
//! - `CACHE_BENCH_CURATOR_HEAP_MB` [2048]: the Curator JVM's heap;
//! - `CACHE_BENCH_CURATOR_TIMEOUT` [120]: seconds Curator's load may take before it is reported
//!   as failed (past about 87,000 children of 8-character names, one listing exceeds the Java
//!   client's 1 MB `jute.maxbuffer` and Curator's cache never initializes);
//! - `CACHE_BENCH_FOLLOW_CHILDREN` [10000]: children of the parent whose changes are followed;
//! - `CACHE_BENCH_RATE` [10000]: sets per second while the changes are followed, for 5 s;
//! - `CACHE_BENCH_ROUNDS` [3]: load rounds, ours, the floor and Curator interleaved; medians;
//! - `CACHE_BENCH_LOADS` [1]: 0 skips the loads (only the follow lag runs);
//! - `--json FILE` (or `ZKR_BENCH_JSON`): also append each result as a JSON line
//!   (`support::JsonLines`; scenarios `load-flat`, `load-tree` (unit `s`), `memory-flat`,
//!   `memory-tree` (unit `bytes/node`: live heap, ours also `rss_bytes_per_node`) and `follow`
//!   (`p50_us`, `p99_us`, `achieved_rate`), clients `ours`, `floor`, `curator`).
//!
//! - **Load**: from start to `Initialized`, against a bare walk (`get_data`, then
//!   `get_children` when the node has children), with the same 256 reads in flight; Curator's
//!   from `start()` to its `initialized` callback, in a fresh JVM each round.
//! - **Memory**: ours, the live heap the loaded cache holds per node (bytes allocated and not
//!   freed, counted by this binary's allocator, after the load minus before it), and resident
//!   memory per node (RSS after the load minus before it, each after `malloc_trim`, which depends
//!   on the heap's history; the first round, which also grows the process's own buffers, is left
//!   out when there are more); Curator's, Java heap in use after a full GC,
//!   after the load minus before it. Node data 8 bytes.
//! - **Follow lag**: a writer sets the follow parent's children at the given rate, each set
//!   carrying its send time; ours (a cache subscriber), the floor (a bare persistent recursive
//!   watch that reads each changed node) and Curator's cache (its listener) follow the same
//!   writes at the same time, each on its own session; lag is from the set being sent to the
//!   changed data being seen (one clock: this machine's).

use std::collections::VecDeque;
use std::future::IntoFuture;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use zk_recipes::cache::{Cache, CacheEvent};
use zk_recipes::framework::zookeeper_client::{AddWatchMode, Client, CreateMode, EventType};
use zk_recipes::framework::{Deadline, Framework, ParentMode};
use zk_recipes_testing::{CuratorProcess, Jit, TestingServer};

mod support;

/// The subtree cache against the raw floor and Curator's (the module docs say what runs; the
/// settings come from the environment).
#[derive(clap::Parser, Debug)]
#[command(name = "cache", bin_name = "cargo bench -p zk-recipes-benches --bench cache --")]
struct Args {
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

/// Counts live heap, for the bytes a loaded cache holds per node (see `support::live_heap`).
#[global_allocator]
static ALLOCATOR: support::live_heap::CountingAllocator = support::live_heap::CountingAllocator;

const IN_FLIGHT: usize = 256;
const DATA: [u8; 8] = *b"8 bytes!";

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

async fn open_framework(connect_string: &str) -> Framework {
    let framework = Framework::builder(connect_string).start().expect("framework");
    framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");
    framework
}

/// Creates `parents` x `per_parent` nodes below `root` (`parents == 0`: the children directly
/// under `root`), in transactions of 500, several in flight.
async fn populate(framework: &Framework, root: &str, parents: usize, per_parent: usize) {
    framework.create(root).creating_parents(ParentMode::Persistent).await.expect("root");
    let mut paths = Vec::new();
    if parents == 0 {
        paths.extend((0..per_parent).map(|child| format!("{root}/c{child:07}")));
    } else {
        for parent in 0..parents {
            let parent_path = format!("{root}/p{parent:05}");
            paths.push(parent_path.clone());
            paths.extend((0..per_parent).map(|child| format!("{parent_path}/c{child:05}")));
        }
    }
    let mut batches = paths.chunks(500).map(|chunk| {
        let mut transaction = framework.transaction();
        for path in chunk {
            transaction = transaction.create(path.clone(), DATA.to_vec(), CreateMode::Persistent);
        }
        transaction.timeout(Duration::from_secs(120))
    });
    // Parents come before their children within the order, so batches run one after another
    // per parent group; 8 at a time keep the server busy.
    let mut in_flight = FuturesOrdered::new();
    loop {
        while in_flight.len() < 8 {
            let Some(batch) = batches.next() else { break };
            in_flight.push_back(batch.into_future());
        }
        let Some(done) = in_flight.next().await else { break };
        done.expect("populate");
    }
}

/// The floor's load: the cache's protocol on bare calls, nothing kept but a count.
async fn floor_load(client: &Client, root: &str) -> usize {
    let mut to_load = VecDeque::from([root.to_owned()]);
    let mut in_flight = FuturesUnordered::new();
    let mut loaded = 0;
    loop {
        while in_flight.len() < IN_FLIGHT {
            let Some(path) = to_load.pop_front() else { break };
            in_flight.push(async move {
                let (_data, stat) = client.get_data(&path).await.expect("get data");
                let children = if stat.num_children > 0 {
                    client.list_children(&path).await.expect("list")
                } else {
                    Vec::new()
                };
                (path, children)
            });
        }
        let Some((path, children)) = in_flight.next().await else { break };
        loaded += 1;
        to_load.extend(children.into_iter().map(|child| format!("{path}/{child}")));
    }
    loaded
}

/// How Curator's JVM runs in this bench.
struct CuratorSettings {
    heap: String,
    timeout: Duration,
}

impl CuratorSettings {
    fn spawn(&self, args: &[&str]) -> CuratorProcess {
        CuratorProcess::spawn_with_jvm_options(Jit::Full, &[self.heap.as_str()], args)
            .expect("the Curator driver starts")
    }
}

/// One Curator load: its time, node count and heap bytes; `None` when it did not initialize
/// within the timeout.
async fn curator_load(connect: &str, root: &str, settings: &CuratorSettings) -> Option<(Duration, f64, f64)> {
    let timeout = settings.timeout.as_secs().to_string();
    let mut process = settings.spawn(&["bench-cache", connect, root, &timeout]);
    let rest = process
        .expect_line("LOAD", settings.timeout + Duration::from_secs(120))
        .await
        .expect("Curator's load line");
    let line = format!("LOAD{rest}");
    let _ = process.send_line("close").await;
    let _ = process.wait(Duration::from_secs(60)).await;
    if line.starts_with("LOAD-FAILED") {
        eprintln!("Curator's cache of {root}: {line}; its log:\n{}", process.log_tail(5));
        return None;
    }
    let field = |name| support::field(&line, name).expect("a LOADED field");
    Some((Duration::from_millis(field("ms") as u64), field("nodes"), field("heap_bytes")))
}

struct Load {
    ours: Vec<Duration>,
    floor: Vec<Duration>,
    /// RSS per node (the first round left out when there are more).
    bytes_per_node: Vec<f64>,
    /// Live heap per node, each round.
    live_per_node: Vec<f64>,
    nodes: usize,
    /// Curator's rounds: load time and heap bytes per node; `None` for a failed load.
    curator: Vec<Option<(Duration, f64)>>,
    /// Curator's loads that reported `initialized` holding fewer nodes than the tree has.
    curator_incomplete: Vec<f64>,
}

impl Load {
    /// A Curator load counts only if it holds every node ours held; one that reported
    /// `initialized` with fewer (a listing past `jute.maxbuffer` failed) is kept apart.
    fn record_curator(&mut self, loaded: Option<(Duration, f64, f64)>) {
        match loaded {
            Some((time, nodes, heap)) if nodes as usize >= self.nodes => {
                self.curator.push(Some((time, heap / nodes)))
            }
            Some((_, nodes, _)) => {
                self.curator_incomplete.push(nodes);
                self.curator.push(None);
            }
            None => self.curator.push(None),
        }
    }
}

async fn measure_load(connect: &str, root: &str, rounds: usize, curator: &CuratorSettings) -> Load {
    let framework = open_framework(connect).await;
    let (_bare, client) = support::raw_client(connect).await;
    let mut load = Load {
        ours: Vec::new(),
        floor: Vec::new(),
        bytes_per_node: Vec::new(),
        live_per_node: Vec::new(),
        nodes: 0,
        curator_incomplete: Vec::new(),
        curator: Vec::new(),
    };
    for round in 0..rounds {
        // Curator first in odd rounds, last in even ones.
        if round % 2 == 1 {
            load.record_curator(curator_load(connect, root, curator).await);
        }
        for ours_turn in [round % 2 == 0, round % 2 == 1] {
            if ours_turn {
                let before = support::rss_bytes();
                let live_before = support::live_heap::live_heap_bytes();
                let started = Instant::now();
                let cache = Cache::builder(&framework, root).start().expect("cache");
                cache.initialized(Deadline::after(Duration::from_secs(600))).await.expect("loaded");
                load.ours.push(started.elapsed());
                load.nodes = cache.len();
                load.live_per_node
                    .push((support::live_heap::live_heap_bytes() - live_before) as f64 / cache.len() as f64);
                // The first load also grows the process's own buffers and allocator arenas.
                if round > 0 || rounds == 1 {
                    load.bytes_per_node
                        .push((support::rss_bytes().saturating_sub(before)) as f64 / cache.len() as f64);
                }
                cache.close().await;
            } else {
                let started = Instant::now();
                let loaded = floor_load(&client, root).await;
                load.floor.push(started.elapsed());
                assert!(loaded > 0);
            }
        }
        if round % 2 == 0 {
            load.record_curator(curator_load(connect, root, curator).await);
        }
    }
    framework.close().await;
    load
}

fn percentile(lags: &mut [Duration], fraction: f64) -> Duration {
    lags.sort();
    lags[((lags.len() as f64 - 1.0) * fraction).round() as usize]
}

fn epoch_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_micros() as u64
}

/// A set's data: its send time, `<epoch micros>:` (the form Curator's driver reads too).
fn stamp() -> Vec<u8> {
    format!("{}:", epoch_micros()).into_bytes()
}

/// How long ago the stamp in `data` was written.
fn seen(data: &[u8]) -> Option<Duration> {
    let text = std::str::from_utf8(data).ok()?;
    let sent: u64 = text.strip_suffix(':')?.parse().ok()?;
    Some(Duration::from_micros(epoch_micros().saturating_sub(sent)))
}

/// What each follower saw.
struct Lags {
    ours: Vec<Duration>,
    floor: Vec<Duration>,
    /// Curator's count, p50 and p99.
    curator: (usize, Duration, Duration),
    achieved_rate: f64,
}

/// Follows `rate` sets per second on `root`'s children for `duration`: ours, the floor and
/// Curator's at once.
async fn measure_lag(
    connect: &str,
    root: &str,
    children: usize,
    rate: usize,
    duration: Duration,
    curator: &CuratorSettings,
) -> Lags {
    let expected = (rate as f64 * duration.as_secs_f64()) as usize;

    let timeout = curator.timeout.as_secs().to_string();
    let mut java = curator.spawn(&["bench-cache", connect, root, &timeout]);
    let loaded = java.expect_line("LOAD", curator.timeout + Duration::from_secs(120)).await.expect("loaded");
    assert!(loaded.starts_with("ED "), "Curator follows {root}: LOAD{loaded}");
    java.send_line("lag-reset").await.expect("lag-reset");
    java.expect_line("LAG-RESET", Duration::from_secs(60)).await.expect("LAG-RESET");

    let framework = open_framework(connect).await;
    let cache = Cache::builder(&framework, root).start().expect("cache");
    cache.initialized(Deadline::after(Duration::from_secs(600))).await.expect("loaded");
    let mut events = cache.events();
    while events.next().await != Some(CacheEvent::Initialized) {}
    let ours = tokio::spawn(async move {
        let mut lags = Vec::new();
        while lags.len() < expected {
            match tokio::time::timeout(Duration::from_secs(10), events.next()).await {
                Ok(Some(CacheEvent::Changed { new, .. })) => lags.extend(new.data.as_deref().and_then(seen)),
                Ok(Some(_)) => {}
                _ => break,
            }
        }
        lags
    });

    let (_floor_session, floor_client) = support::raw_client(connect).await;
    let mut watcher = floor_client.watch(root, AddWatchMode::PersistentRecursive).await.expect("watch");
    let floor = tokio::spawn(async move {
        let mut lags = Vec::new();
        let mut reads = FuturesOrdered::new();
        while lags.len() < expected {
            tokio::select! {
                event = watcher.changed() => {
                    if event.event_type == EventType::NodeDataChanged {
                        let client = floor_client.clone();
                        reads.push_back(async move { client.get_data(&event.path).await });
                    }
                }
                Some(read) = reads.next(), if !reads.is_empty() => {
                    if let Ok((data, _)) = read {
                        lags.extend(seen(&data));
                    }
                }
                () = tokio::time::sleep(Duration::from_secs(10)) => break,
            }
        }
        lags
    });

    let (_writer_session, writer) = support::raw_client(connect).await;
    let interval = Duration::from_secs_f64(1.0 / rate as f64);
    let started = Instant::now();
    let mut writes = FuturesUnordered::new();
    for index in 0..expected {
        let due = started + interval * index as u32;
        if let Some(wait) = due.checked_duration_since(Instant::now()) {
            // Drive the writes in flight while waiting for the next one's time.
            let _ = tokio::time::timeout(wait, async {
                while writes.next().await.is_some() {}
                std::future::pending::<()>().await
            })
            .await;
        }
        let path = format!("{root}/c{:07}", index % children);
        let data = stamp();
        let writer = writer.clone();
        writes.push(async move { writer.set_data(&path, &data, None).await.map(drop) });
    }
    while let Some(written) = writes.next().await {
        written.expect("set");
    }
    let achieved_rate = expected as f64 / started.elapsed().as_secs_f64();
    let ours = ours.await.expect("ours");
    let floor = floor.await.expect("floor");
    // Curator's listener has had as long as ours and the floor took, and at least 2 s more.
    tokio::time::sleep(Duration::from_secs(2)).await;
    java.send_line("lag-report").await.expect("lag-report");
    let report = java.expect_line("LAG", Duration::from_secs(60)).await.expect("LAG");
    let _ = java.send_line("close").await;
    let _ = java.wait(Duration::from_secs(60)).await;
    let micros = |name| Duration::from_micros(support::field(&report, name).expect("a LAG field") as u64);
    let curator =
        (support::field(&report, "count").expect("count") as usize, micros("p50_us"), micros("p99_us"));
    cache.close().await;
    framework.close().await;
    Lags { ours, floor, curator, achieved_rate }
}

fn report_load(what: &str, scenario: &str, load: &Load, json: &support::JsonLines) {
    let ours = support::median(&load.ours);
    let floor = support::median(&load.floor);
    println!(
        "{what}: {} nodes, load ours {:.2} s, floor {:.2} s, floor / ours {:.2} (1.0 = at the floor); memory {:.0} bytes \
         of live heap, {:.0} bytes of RSS per node (data {} bytes)",
        load.nodes,
        ours.as_secs_f64(),
        floor.as_secs_f64(),
        floor.as_secs_f64() / ours.as_secs_f64(),
        support::median(&load.live_per_node),
        support::median(&load.bytes_per_node),
        DATA.len()
    );
    let secs = |times: &[Duration]| times.iter().map(Duration::as_secs_f64).collect::<Vec<f64>>();
    let nodes = serde_json::json!({ "param": "nodes", "value": load.nodes, "data_bytes": DATA.len() });
    json.emit_series(&format!("load-{scenario}"), "ours", "s", &secs(&load.ours), nodes.clone());
    json.emit_series(&format!("load-{scenario}"), "floor", "s", &secs(&load.floor), nodes.clone());
    let mut memory = nodes.clone();
    memory["rss_bytes_per_node"] = serde_json::json!(support::median(&load.bytes_per_node));
    json.emit_series(&format!("memory-{scenario}"), "ours", "bytes/node", &load.live_per_node, memory);
    let complete: Vec<(Duration, f64)> = load.curator.iter().flatten().copied().collect();
    let mut curator = nodes;
    curator["incomplete"] = serde_json::json!(load.curator_incomplete);
    curator["loads"] = serde_json::json!(load.curator.len());
    if complete.len() == load.curator.len() && !complete.is_empty() {
        let times: Vec<Duration> = complete.iter().map(|(time, _)| *time).collect();
        let bytes: Vec<f64> = complete.iter().map(|(_, bytes)| *bytes).collect();
        json.emit_series(&format!("load-{scenario}"), "curator", "s", &secs(&times), curator.clone());
        json.emit_series(&format!("memory-{scenario}"), "curator", "bytes/node", &bytes, curator);
    } else {
        // Curator's cache did not load the whole tree in every round: no time to compare.
        json.emit(&format!("load-{scenario}"), "curator", curator);
    }
    println!(
        "    rounds: ours {:?}, floor {:?}, bytes/node {:?}",
        load.ours, load.floor, load.bytes_per_node
    );
    let loaded: Vec<(Duration, f64)> = load.curator.iter().flatten().copied().collect();
    let failed = load.curator.len() - loaded.len() - load.curator_incomplete.len();
    if failed > 0 {
        println!(
            "    Curator: {failed} of {} loads never initialized (see the log lines above)",
            load.curator.len()
        );
    }
    if !load.curator_incomplete.is_empty() {
        println!(
            "    Curator: {} of {} loads reported initialized holding only {:?} of {} nodes",
            load.curator_incomplete.len(),
            load.curator.len(),
            load.curator_incomplete,
            load.nodes
        );
    }
    if !loaded.is_empty() {
        let times: Vec<Duration> = loaded.iter().map(|(time, _)| *time).collect();
        let bytes: Vec<f64> = loaded.iter().map(|(_, bytes)| *bytes).collect();
        let curator = support::median(&times);
        println!(
            "    Curator: load {:.2} s, heap {:.0} bytes per node; Curator / ours: load time {:.2}, memory {:.2} (rounds {:?})",
            curator.as_secs_f64(),
            support::median(&bytes),
            curator.as_secs_f64() / support::median(&load.ours).as_secs_f64(),
            support::median(&bytes) / support::median(&load.bytes_per_node),
            times
        );
    }
}

/// `ZK_CONNECT` if set, else a testing server with `heap_mib` of heap, as `support::server`
/// starts one otherwise.
async fn server(heap_mib: u32) -> (String, Option<TestingServer>) {
    if let Some(connect) = std::env::var("ZK_CONNECT").ok().filter(|connect| !connect.is_empty()) {
        return (connect, None);
    }
    let server = support::production_like_server()
        .heap_mib(heap_mib)
        .start()
        .await
        .expect("a ZooKeeper server (run scripts/install-deps.sh)");
    (server.connect_string(), Some(server))
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let args: Args = support::parse();
        let json = support::JsonLines::new("cache", &args.json);
        let smoke = args.harness.is_smoke_run();
        let children = if smoke { 2_000 } else { env_usize("CACHE_BENCH_CHILDREN", 100_000) };
        let tree = if smoke { 4_000 } else { env_usize("CACHE_BENCH_TREE", 300_000) };
        let rate = if smoke { 500 } else { env_usize("CACHE_BENCH_RATE", 10_000) };
        let rounds = if smoke { 1 } else { env_usize("CACHE_BENCH_ROUNDS", 3) };
        let follow_for = if smoke { Duration::from_secs(1) } else { Duration::from_secs(5) };
        let curator = CuratorSettings {
            heap: format!("-Xmx{}m", env_usize("CACHE_BENCH_CURATOR_HEAP_MB", 2048)),
            timeout: Duration::from_secs(if smoke {
                60
            } else {
                env_usize("CACHE_BENCH_CURATOR_TIMEOUT", 120) as u64
            }),
        };
        let follow_children = if smoke { 500 } else { env_usize("CACHE_BENCH_FOLLOW_CHILDREN", 10_000) };
        let server_heap = env_usize("CACHE_BENCH_SERVER_HEAP_MB", 1024) as u32;
        let (connect, _server) = server(server_heap).await;
        let setup = open_framework(&connect).await;
        let started = Instant::now();
        populate(&setup, "/bench-cache/flat", 0, children).await;
        let per_parent = 1_000.min(tree);
        populate(&setup, "/bench-cache/tree", tree / per_parent, per_parent - 1).await;
        populate(&setup, "/bench-cache/follow", 0, follow_children).await;
        eprintln!("populated in {:.1} s", started.elapsed().as_secs_f64());
        setup.close().await;

        if env_usize("CACHE_BENCH_LOADS", 1) != 0 {
            let flat = measure_load(&connect, "/bench-cache/flat", rounds, &curator).await;
            report_load(&format!("{children} children under one parent"), "flat", &flat, &json);
            let deep = measure_load(&connect, "/bench-cache/tree", rounds, &curator).await;
            report_load(&format!("a subtree of {tree} nodes"), "tree", &deep, &json);
        }

        let Lags { mut ours, mut floor, curator: (curator_count, curator_p50, curator_p99), achieved_rate } =
            measure_lag(&connect, "/bench-cache/follow", follow_children, rate, follow_for, &curator).await;
        assert!(!ours.is_empty() && !floor.is_empty() && curator_count > 0, "every follower saw changes");
        let ms = |lag: Duration| lag.as_secs_f64() * 1e3;
        println!(
            "follow {achieved_rate:.0} sets/s (asked {rate}) on {follow_children} children for {:.0} s:",
            follow_for.as_secs_f64()
        );
        let (ours_p99, floor_p99) = (percentile(&mut ours, 0.99), percentile(&mut floor, 0.99));
        println!(
            "    ours    {:>6} changes p50 {:>8.2} ms p99 {:>8.2} ms",
            ours.len(),
            ms(percentile(&mut ours, 0.5)),
            ms(ours_p99)
        );
        println!(
            "    floor   {:>6} changes p50 {:>8.2} ms p99 {:>8.2} ms",
            floor.len(),
            ms(percentile(&mut floor, 0.5)),
            ms(floor_p99)
        );
        println!(
            "    Curator {:>6} changes p50 {:>8.2} ms p99 {:>8.2} ms",
            curator_count,
            ms(curator_p50),
            ms(curator_p99)
        );
        println!(
            "    p99 ours / floor {:.2}, ours / Curator {:.2}",
            ours_p99.as_secs_f64() / floor_p99.as_secs_f64(),
            ours_p99.as_secs_f64() / curator_p99.as_secs_f64()
        );
        let follow = serde_json::json!({
            "param": "children", "value": follow_children, "asked_rate": rate,
            "achieved_rate": achieved_rate, "secs": follow_for.as_secs_f64(),
        });
        let micros = |lag: Duration| lag.as_secs_f64() * 1e6;
        for (client, count, p50, p99) in [
            ("ours", ours.len(), percentile(&mut ours, 0.5), ours_p99),
            ("floor", floor.len(), percentile(&mut floor, 0.5), floor_p99),
            ("curator", curator_count, curator_p50, curator_p99),
        ] {
            let mut fields = follow.clone();
            fields["changes"] = serde_json::json!(count);
            fields["p50_us"] = serde_json::json!(micros(p50));
            fields["p99_us"] = serde_json::json!(micros(p99));
            json.emit("follow", client, fields);
        }
    });
}
