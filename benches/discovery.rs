//! The service-discovery cache on a real ZooKeeper server: our `ServiceCache` against Curator's
//! (`curator-x-discovery` 5.4, Debian's jar), following the same service at the same time, in
//! the same run, on the same server.
//!
//! `cargo bench -p zk-recipes-benches --bench discovery -- [--instances N] [--secs D] [--rounds R]
//! [--json FILE]` (release build; defaults 1,000 instances, 20 s, 3 rounds). Under `cargo test`
//! (no `--bench`) it makes a smoke run: 100 instances, 2 s, 1 round.
//!
//! Each round:
//! - **Setup** (once per run): a writer (a Rust `ServiceDiscovery` on its own session) registers
//!   N `DYNAMIC` instances of one service (address, port, URI spec and a small JSON payload each);
//!   each round Curator's driver (`CuratorDiscovery`, a fresh full-JIT JVM, its own session)
//!   starts, and a reader `ServiceDiscovery` (its own session) serves our caches.
//! - **The floor**: the same protocol on bare zookeeper-client calls, on its own session: one
//!   persistent recursive watch on the service node, a load (`get_data` of the service node, its
//!   children listed, then `get_data` of each, 256 in flight, as the cache loads), and for each
//!   created or changed node a `get_data` of it, keeping each instance's raw bytes in a map by
//!   name (no JSON decoding, no events to subscribers: what any cache must at least do).
//! - **Memory per instance**: ours, the live heap the started and loaded `ServiceCache` holds (a
//!   counting global allocator in this binary: bytes allocated and not freed, after the load minus
//!   before the cache was built; the floor's the same, for its map of raw bytes), and the resident
//!   memory our cache adds (RSS after minus before, each
//!   after `malloc_trim`; depends on the heap's history, so read the live heap first; the first
//!   round, which also grows the process's own buffers, is left out when there are more); Curator's,
//!   the Java heap in use after full GCs, after its cache's first load minus before it was built
//!   (the driver's `cache-watch`, as the cache bench measures Curator's `CuratorCache`), in a
//!   fresh JVM each round, after a cache of an empty service has loaded the classes. Both divided
//!   by N.
//! - **Follow latency**: for D seconds the writer re-registers 10 % of the instances per second,
//!   evenly spaced, cycling through them: `unregister` then `register` of the same id (what a
//!   Curator user's re-registration after a session change does), each its own future, several in
//!   flight when the server is slow. Ours, the floor and Curator's follow the same writes at the
//!   same time. Latency is from the writer's `register` returning (the new node is on the server)
//!   to the cache telling of that instance: ours, a subscriber's `Added`/`Updated` event for its
//!   id; the floor's, its `get_data` reply for the created node; Curator's, the `cacheChanged` call of a listener that
//!   diffs `getInstances()` against what it last saw to find which instance arrived (Curator's
//!   listener does not say; the diff is O(N) per call, what a user who needs to know must do).
//!   One clock, this machine's (epoch microseconds on both sides). A cache event that comes before
//!   the `register` reply counts as 0. A re-registration whose instance never arrived (within
//!   10 s after the writer stops) is counted as missed, not in the percentiles.
//!
//! Printed: a line per round, then a table of medians over the rounds with the ratios
//! "ours / floor" and "ours / Curator" (lower is better for both latency and memory), the median
//! of per-round ratios in brackets. With `--json FILE` (or `ZKR_BENCH_JSON`) each result is also
//! appended as JSON lines (`support::JsonLines`, `per_round` the value of each round):
//! scenarios `follow-p50` and `follow-p99` (unit `us`, plus `missed`) and `memory` (unit
//! `bytes/instance`; ours also `rss_bytes_per_instance`), client `ours`, `floor` or `curator`,
//! `param` `instances`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::stream::{FuturesUnordered, StreamExt};
use zk_recipes::discovery::{ServiceCacheEvent, ServiceDiscovery, ServiceInstance, UriSpec};
use zk_recipes::framework::zookeeper_client::{AddWatchMode, Client, EventType};
use zk_recipes::framework::Framework;
use zk_recipes_interop::CuratorDiscovery;
use zk_recipes_testing::Jit;

mod support;

#[global_allocator]
static ALLOCATOR: support::live_heap::CountingAllocator = support::live_heap::CountingAllocator;

/// Our `ServiceCache` against Curator's (the module docs say what runs).
#[derive(clap::Parser, Debug)]
#[command(name = "discovery", bin_name = "cargo bench -p zk-recipes-benches --bench discovery --")]
struct Args {
    /// Instances of the followed service.
    #[arg(long, env = "DISCOVERY_BENCH_INSTANCES", default_value_t = 1_000)]
    instances: usize,
    /// Seconds the writer re-registers 10 % of the instances per second, each round.
    #[arg(long, env = "DISCOVERY_BENCH_SECS", default_value_t = 20)]
    secs: u64,
    /// Rounds (a fresh cache of each side per round); medians over them are reported.
    #[arg(long, env = "DISCOVERY_BENCH_ROUNDS", default_value_t = 3)]
    rounds: usize,
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

const BASE_PATH: &str = "/bench-discovery";
const SERVICE: &str = "api";
/// A service with no instances whose cache loads Curator's classes before the measured one.
const WARM_UP: &str = "warm-up";
/// Re-registrations per second, as a fraction of the instances.
const REREGISTER_PER_SECOND: f64 = 0.10;
/// The deadline of every call.
const CALL: Duration = Duration::from_secs(20);
/// How long the caches may take to catch up once the writer stops.
const SETTLE: Duration = Duration::from_secs(10);

fn epoch_micros() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_micros() as u64
}

async fn open_framework(connect: &str) -> Framework {
    let framework = Framework::builder(connect).start().expect("framework");
    framework.block_until_connected(CALL).await.expect("connected");
    framework
}

fn instance(id: &str) -> ServiceInstance {
    ServiceInstance::builder(SERVICE)
        .id(id)
        .address("10.0.0.7")
        .port(8080)
        .uri_spec(UriSpec::parse("{scheme}://{address}:{port}").expect("a URI spec"))
        .payload(serde_json::json!({ "zone": "eu-1", "version": "1.2.3" }))
        .build()
}

/// Reads in flight during the floor's load, as the cache's.
const LOAD_IN_FLIGHT: usize = 256;

/// The floor's load: `get_data` of the service node, its children listed, then `get_data` of
/// each (the cache's protocol); the raw bytes kept by instance id.
async fn floor_load(client: &Client, service: &str) -> HashMap<String, Vec<u8>> {
    let (_data, _stat) = client.get_data(service).await.expect("the service node");
    let names = client.list_children(service).await.expect("the instances");
    futures::stream::iter(names)
        .map(|name| async move {
            let (data, _stat) = client.get_data(&format!("{service}/{name}")).await.expect("an instance");
            (name, data)
        })
        .buffer_unordered(LOAD_IN_FLIGHT)
        .collect()
        .await
}

/// The floor following the service: each created or changed node read (`get_data`), the map
/// kept up to date, each arrival recorded as (id, epoch µs), until `stop`.
async fn floor_follow(
    client: Client,
    service: String,
    mut watcher: zk_recipes::framework::zookeeper_client::PersistentWatcher,
    mut instances: HashMap<String, Vec<u8>>,
    mut stop: tokio::sync::oneshot::Receiver<()>,
) -> Vec<(String, u64)> {
    let mut arrivals = Vec::new();
    let mut reads = FuturesUnordered::new();
    loop {
        tokio::select! {
            event = watcher.changed() => {
                let Some(id) = event.path.strip_prefix(&service).and_then(|rest| rest.strip_prefix('/')) else {
                    continue;
                };
                let id = id.to_owned();
                match event.event_type {
                    EventType::NodeCreated | EventType::NodeDataChanged => {
                        let client = client.clone();
                        let path = event.path.clone();
                        reads.push(async move { (id, client.get_data(&path).await) });
                    }
                    EventType::NodeDeleted => {
                        instances.remove(&id);
                    }
                    _ => {}
                }
            }
            Some((id, read)) = reads.next(), if !reads.is_empty() => {
                if let Ok((data, _stat)) = read {
                    arrivals.push((id.clone(), epoch_micros()));
                    instances.insert(id, data);
                }
            }
            _ = &mut stop => break,
        }
    }
    drop(watcher); // removes the persistent watch
    arrivals
}

/// One re-registration: its id, when it was sent and when `register` returned (epoch µs).
struct Write {
    id: String,
    sent: u64,
    returned: u64,
}

/// Re-registers `REREGISTER_PER_SECOND` of `ids` per second for `duration`, starting at `ids[first]`.
async fn rewrite(
    discovery: &ServiceDiscovery,
    ids: &[String],
    first: usize,
    duration: Duration,
) -> Vec<Write> {
    let rate = ids.len() as f64 * REREGISTER_PER_SECOND;
    let total = (rate * duration.as_secs_f64()).round().max(1.0) as usize;
    let interval = Duration::from_secs_f64(1.0 / rate);
    let started = Instant::now();
    let mut in_flight = FuturesUnordered::new();
    let mut writes = Vec::with_capacity(total);
    for index in 0..total {
        let due = started + interval.mul_f64(index as f64);
        // Drive the writes in flight while waiting for the next one's time.
        while let Some(wait) = due.checked_duration_since(Instant::now()) {
            match tokio::time::timeout(wait, in_flight.next()).await {
                Ok(Some(write)) => writes.push(write),
                Ok(None) => tokio::time::sleep(wait).await,
                Err(_) => break,
            }
        }
        let id = ids[(first + index) % ids.len()].clone();
        in_flight.push(async move {
            let again = instance(&id);
            let sent = epoch_micros();
            discovery.unregister(&again, CALL).await.expect("unregister");
            discovery.register(&again, CALL).await.expect("register");
            Write { id, sent, returned: epoch_micros() }
        });
    }
    while let Some(write) =
        tokio::time::timeout(CALL * 2, in_flight.next()).await.expect("the writes end within their deadlines")
    {
        writes.push(write);
    }
    writes
}

/// Matches each write with the first arrival of its id at or after it was sent: the latencies
/// (from `register` returning, 0 when the arrival came first) and how many never arrived.
fn match_arrivals(writes: &[Write], arrivals: &[(String, u64)]) -> (Vec<Duration>, usize) {
    let mut by_id: HashMap<&str, Vec<u64>> = HashMap::new();
    for (id, at) in arrivals {
        by_id.entry(id.as_str()).or_default().push(*at);
    }
    for times in by_id.values_mut() {
        times.sort_unstable();
    }
    let mut next: HashMap<&str, usize> = HashMap::new();
    let mut writes: Vec<&Write> = writes.iter().collect();
    writes.sort_by_key(|write| write.sent);
    let (mut latencies, mut missed) = (Vec::with_capacity(writes.len()), 0);
    for write in writes {
        let times = by_id.get(write.id.as_str()).map(Vec::as_slice).unwrap_or_default();
        let cursor = next.entry(write.id.as_str()).or_default();
        while *cursor < times.len() && times[*cursor] < write.sent {
            *cursor += 1;
        }
        if let Some(&at) = times.get(*cursor) {
            *cursor += 1;
            latencies.push(Duration::from_micros(at.saturating_sub(write.returned)));
        } else {
            missed += 1;
        }
    }
    latencies.sort_unstable();
    (latencies, missed)
}

/// What one side measured in one round.
#[derive(Debug, Clone, Copy)]
struct Side {
    p50: Duration,
    p99: Duration,
    seen: usize,
    missed: usize,
    /// Arrivals recorded (more than `seen` would mean the cache told of instances that did not change).
    arrivals: usize,
    /// Live heap (ours) or Java heap (Curator's) per instance.
    bytes_per_instance: f64,
    /// Ours only: RSS per instance.
    rss_per_instance: f64,
}

impl Side {
    fn new(
        latencies: &[Duration],
        missed: usize,
        arrivals: usize,
        bytes_per_instance: f64,
        rss_per_instance: f64,
    ) -> Side {
        assert!(!latencies.is_empty(), "the cache saw none of the re-registrations");
        Side {
            p50: support::quantile(latencies, 0.5),
            p99: support::quantile(latencies, 0.99),
            seen: latencies.len(),
            missed,
            arrivals,
            bytes_per_instance,
            rss_per_instance,
        }
    }
}

#[allow(clippy::too_many_arguments)]
async fn round(
    round: usize,
    reader: &ServiceDiscovery,
    writer: &ServiceDiscovery,
    floor_client: &Client,
    connect: &str,
    ids: &[String],
    duration: Duration,
) -> Sides {
    let n = ids.len();
    // A fresh JVM each round (a closed cache's objects may stay reachable a while), whose
    // ServiceCache classes a cache of an empty service has loaded before the measured one.
    let mut curator = tokio::time::timeout(
        CALL * 3,
        CuratorDiscovery::builder(connect, BASE_PATH).jit(Jit::Full).reply_timeout(CALL * 3).start(),
    )
    .await
    .expect("Curator's discovery starts within its deadline")
    .expect("Curator's discovery starts");
    tokio::time::timeout(CALL, async {
        curator.watch_cache(WARM_UP).await?;
        curator.close_cache(WARM_UP).await
    })
    .await
    .expect("Curator's warm-up cache within its deadline")
    .expect("Curator's warm-up cache");
    let watch = tokio::time::timeout(CALL * 3, curator.watch_cache(SERVICE))
        .await
        .expect("Curator's cache within its deadline")
        .expect("Curator's cache");
    assert_eq!(watch.instances, n, "Curator's cache holds every instance");

    // The floor: its watch first (as the cache adds its own before loading), then its load.
    let service = format!("{BASE_PATH}/{SERVICE}");
    let floor_watcher =
        floor_client.watch(&service, AddWatchMode::PersistentRecursive).await.expect("the floor's watch");
    let floor_live_before = support::live_heap::live_heap_bytes();
    let floor_instances = tokio::time::timeout(CALL * 3, floor_load(floor_client, &service))
        .await
        .expect("the floor loads within its deadline");
    let floor_live = support::live_heap::live_heap_bytes() - floor_live_before;
    assert_eq!(floor_instances.len(), n, "the floor holds every instance");
    let (floor_stop, floor_stopped) = tokio::sync::oneshot::channel::<()>();
    let floor_follower = tokio::spawn(floor_follow(
        floor_client.clone(),
        service,
        floor_watcher,
        floor_instances,
        floor_stopped,
    ));

    let (live_before, rss_before) = (support::live_heap::live_heap_bytes(), support::rss_bytes());
    let cache = reader.service_cache(SERVICE).start(CALL).await.expect("our cache");
    cache.loaded(CALL).await.expect("our cache loads");
    let live = support::live_heap::live_heap_bytes() - live_before;
    let rss = support::rss_bytes() as isize - rss_before as isize;
    assert_eq!(cache.len(), n, "our cache holds every instance");

    let mut events = cache.events();
    loop {
        match tokio::time::timeout(CALL, events.next()).await.expect("the held instances, then Loaded") {
            Some(ServiceCacheEvent::Loaded) => break,
            Some(_) => {}
            None => panic!("our cache ended"),
        }
    }
    let ours_seen = Arc::new(Mutex::new(Vec::<(String, u64)>::new()));
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let collector = tokio::spawn({
        let ours_seen = ours_seen.clone();
        async move {
            loop {
                tokio::select! {
                    event = events.next() => match event {
                        Some(ServiceCacheEvent::Added(instance)) | Some(ServiceCacheEvent::Updated { new: instance, .. }) => {
                            let at = epoch_micros();
                            ours_seen.lock().expect("not poisoned").push((instance.id, at));
                        }
                        Some(_) => {}
                        None => break,
                    },
                    _ = &mut stopped => break,
                }
            }
        }
    });

    let first = round * (n as f64 * REREGISTER_PER_SECOND * duration.as_secs_f64()) as usize;
    let writes = rewrite(writer, ids, first, duration).await;

    // Let the caches catch up: until each has an arrival per write, or SETTLE (the floor's
    // arrivals are counted once it stops: it has had as long as ours).
    let mut curator_seen: Vec<(String, u64)> = Vec::new();
    let settle_until = Instant::now() + SETTLE;
    loop {
        let arrivals = tokio::time::timeout(CALL, curator.cache_arrivals(SERVICE))
            .await
            .expect("Curator's arrivals within their deadline")
            .expect("Curator's arrivals");
        curator_seen.extend(arrivals.into_iter().map(|arrival| (arrival.id, arrival.epoch_micros)));
        let ours_count = ours_seen.lock().expect("not poisoned").len();
        if (ours_count >= writes.len() && curator_seen.len() >= writes.len())
            || Instant::now() >= settle_until
        {
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let _ = stop.send(());
    let _ = floor_stop.send(());
    tokio::time::timeout(CALL, collector).await.expect("the collector stops").expect("the collector");
    let floor_seen =
        tokio::time::timeout(CALL, floor_follower).await.expect("the floor stops").expect("the floor");
    tokio::time::timeout(CALL, cache.close()).await.expect("our cache closes");
    tokio::time::timeout(CALL * 3, curator.close())
        .await
        .expect("Curator closes in time")
        .expect("Curator closes");

    let ours_seen = std::mem::take(&mut *ours_seen.lock().expect("not poisoned"));
    let (ours_latencies, ours_missed) = match_arrivals(&writes, &ours_seen);
    let (curator_latencies, curator_missed) = match_arrivals(&writes, &curator_seen);
    let (floor_latencies, floor_missed) = match_arrivals(&writes, &floor_seen);
    let floor =
        Side::new(&floor_latencies, floor_missed, floor_seen.len(), floor_live as f64 / n as f64, f64::NAN);
    let ours = Side::new(
        &ours_latencies,
        ours_missed,
        ours_seen.len(),
        live as f64 / n as f64,
        rss as f64 / n as f64,
    );
    let curator = Side::new(
        &curator_latencies,
        curator_missed,
        curator_seen.len(),
        watch.heap_bytes as f64 / n as f64,
        f64::NAN,
    );
    Sides { ours, floor, curator }
}

/// What ours, the floor and Curator's measured in one round.
struct Sides {
    ours: Side,
    floor: Side,
    curator: Side,
}

impl Sides {
    fn of(&self, client: &str) -> Side {
        match client {
            "ours" => self.ours,
            "floor" => self.floor,
            _ => self.curator,
        }
    }
}

/// A table row's figure of one side in one round.
type Pick = &'static dyn Fn(&Side) -> f64;

fn ms(duration: Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let args: Args = support::parse();
        let smoke = args.harness.is_smoke_run();
        let (n, secs, rounds) = if smoke { (100, 2, 1) } else { (args.instances, args.secs, args.rounds) };
        assert!(n >= 10 && secs > 0 && rounds > 0, "--instances >= 10, --secs and --rounds > 0");
        let duration = Duration::from_secs(secs);
        let json = support::JsonLines::new("discovery", &args.json);
        let (connect, _server) = support::server(None).await;

        let writer_framework = open_framework(&connect).await;
        let writer = ServiceDiscovery::builder(&writer_framework, BASE_PATH).build().expect("writer");
        let ids: Vec<String> = (0..n).map(|index| format!("instance-{index:06}")).collect();
        let started = Instant::now();
        let registered: Vec<()> = futures::stream::iter(ids.iter())
            .map(|id| {
                let writer = &writer;
                async move { writer.register(&instance(id), CALL).await.expect("register") }
            })
            .buffer_unordered(64)
            .collect()
            .await;
        eprintln!("registered {} instances in {:.1} s", registered.len(), started.elapsed().as_secs_f64());

        let reader_framework = open_framework(&connect).await;
        let reader = ServiceDiscovery::builder(&reader_framework, BASE_PATH).build().expect("reader");
        let (floor_framework, floor_client) = support::raw_client(&connect).await;

        let rate = n as f64 * REREGISTER_PER_SECOND;
        println!(
            "ServiceCache following {n} instances, {rate:.0} re-registrations/s (unregister + register) for {secs} s, {rounds} round(s):"
        );
        let mut results = Vec::new();
        for index in 0..rounds {
            let sides = round(index, &reader, &writer, &floor_client, &connect, &ids, duration).await;
            let Sides { ours, floor, curator } = sides;
            println!(
                "  round {}: ours p50 {:.2} ms p99 {:.2} ms ({} seen, {} missed, {} arrivals), {:.0} B live heap/instance, {:.0} B RSS/instance; \
                 floor p50 {:.2} ms p99 {:.2} ms ({} seen, {} missed, {} arrivals), {:.0} B live heap/instance; \
                 Curator p50 {:.2} ms p99 {:.2} ms ({} seen, {} missed, {} arrivals), {:.0} B Java heap/instance",
                index + 1,
                ms(ours.p50),
                ms(ours.p99),
                ours.seen,
                ours.missed,
                ours.arrivals,
                ours.bytes_per_instance,
                ours.rss_per_instance,
                ms(floor.p50),
                ms(floor.p99),
                floor.seen,
                floor.missed,
                floor.arrivals,
                floor.bytes_per_instance,
                ms(curator.p50),
                ms(curator.p99),
                curator.seen,
                curator.missed,
                curator.arrivals,
                curator.bytes_per_instance,
            );
            results.push(sides);
        }
        let _ = writer.close(CALL).await;
        reader_framework.close().await;
        floor_framework.close().await;
        writer_framework.close().await;

        // ours / other: the ratio of the medians, and the median of the per-round ratios.
        let compare = |pick: &dyn Fn(&Side) -> f64, other: &str| -> (f64, f64) {
            let ours: Vec<f64> = results.iter().map(|sides| pick(&sides.ours)).collect();
            let theirs: Vec<f64> = results.iter().map(|sides| pick(&sides.of(other))).collect();
            let ratios: Vec<f64> = ours.iter().zip(&theirs).map(|(ours, theirs)| ours / theirs).collect();
            (support::median(&ours) / support::median(&theirs), support::median(&ratios))
        };
        let median_of = |pick: &dyn Fn(&Side) -> f64, client: &str| -> f64 {
            support::median(&results.iter().map(|sides| pick(&sides.of(client))).collect::<Vec<f64>>())
        };
        println!();
        println!(
            "| {n} instances, {rate:.0} re-registrations/s, {secs} s x {rounds} | ours | floor | Curator | ours / floor [median of rounds] | ours / Curator [median of rounds] |"
        );
        println!("|---|---:|---:|---:|---:|---:|");
        let rows: [(&str, Pick, usize); 3] = [
            ("latency p50 (ms)", &|side| ms(side.p50), 2),
            ("latency p99 (ms)", &|side| ms(side.p99), 2),
            ("memory (bytes/instance: ours and the floor live heap, Curator Java heap)", &|side| side.bytes_per_instance, 0),
        ];
        for (label, pick, digits) in &rows {
            let (to_floor, to_floor_rounds) = compare(*pick, "floor");
            let (to_curator, to_curator_rounds) = compare(*pick, "curator");
            println!(
                "| {label} | {:.digits$} | {:.digits$} | {:.digits$} | {to_floor:.2} [{to_floor_rounds:.2}] | {to_curator:.2} [{to_curator_rounds:.2}] |",
                median_of(*pick, "ours"),
                median_of(*pick, "floor"),
                median_of(*pick, "curator"),
            );
        }
        // The first round also grows the process's own buffers and allocator arenas.
        let skip = usize::from(results.len() > 1);
        let rss: Vec<f64> = results.iter().skip(skip).map(|sides| sides.ours.rss_per_instance).collect();
        println!(
            "| ours RSS (bytes/instance{}) | {:.0} | | | | |",
            if skip == 1 { ", first round left out" } else { "" },
            support::median(&rss)
        );
        let missed = |client: &str| results.iter().map(|sides| sides.of(client).missed).sum::<usize>();
        println!(
            "missed re-registrations (never seen within {} s): ours {}, floor {}, Curator {}",
            SETTLE.as_secs(),
            missed("ours"),
            missed("floor"),
            missed("curator")
        );

        for client in ["ours", "floor", "curator"] {
            let sides: Vec<Side> = results.iter().map(|sides| sides.of(client)).collect();
            let micros = |pick: fn(&Side) -> Duration| -> Vec<f64> {
                sides.iter().map(|side| pick(side).as_secs_f64() * 1e6).collect()
            };
            let follow = serde_json::json!({
                "param": "instances", "value": n, "secs": secs, "rate": rate,
                "missed": sides.iter().map(|side| side.missed).sum::<usize>(),
            });
            json.emit_series("follow-p50", client, "us", &micros(|side| side.p50), follow.clone());
            json.emit_series("follow-p99", client, "us", &micros(|side| side.p99), follow);
            let bytes: Vec<f64> = sides.iter().map(|side| side.bytes_per_instance).collect();
            let mut fields = serde_json::json!({ "param": "instances", "value": n });
            if client == "ours" {
                fields["rss_bytes_per_instance"] = serde_json::json!(support::median(&rss));
            }
            json.emit_series("memory", client, "bytes/instance", &bytes, fields);
        }
    });
}
