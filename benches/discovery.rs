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
//! - **Memory per instance**: ours, the live heap the started and loaded `ServiceCache` holds (a
//!   counting global allocator in this binary: bytes allocated and not freed, after the load minus
//!   before the cache was built), and the resident memory it adds (RSS after minus before, each
//!   after `malloc_trim`; depends on the heap's history, so read the live heap first; the first
//!   round, which also grows the process's own buffers, is left out when there are more); Curator's,
//!   the Java heap in use after full GCs, after its cache's first load minus before it was built
//!   (the driver's `cache-watch`, as the cache bench measures Curator's `CuratorCache`), in a
//!   fresh JVM each round, after a cache of an empty service has loaded the classes. Both divided
//!   by N.
//! - **Follow latency**: for D seconds the writer re-registers 10 % of the instances per second,
//!   evenly spaced, cycling through them: `unregister` then `register` of the same id (what a
//!   Curator user's re-registration after a session change does), each its own future, several in
//!   flight when the server is slow. Latency is from the writer's `register` returning (the new
//!   node is on the server) to the cache telling of that instance: ours, a subscriber's
//!   `Added`/`Updated` event for its id; Curator's, the `cacheChanged` call of a listener that
//!   diffs `getInstances()` against what it last saw to find which instance arrived (Curator's
//!   listener does not say; the diff is O(N) per call, what a user who needs to know must do).
//!   One clock, this machine's (epoch microseconds on both sides). A cache event that comes before
//!   the `register` reply counts as 0. A re-registration whose instance never arrived (within
//!   10 s after the writer stops) is counted as missed, not in the percentiles.
//!
//! Printed: a line per round, then a table of medians over the rounds with the ratios
//! "ours / Curator" (lower is better for both latency and memory), the median of per-round
//! ratios in brackets. With `--json FILE` (or `ZKR_BENCH_JSON`) each result is also appended as
//! JSON lines (`support::JsonLines`): scenario `follow` (unit `us`, `ops` = the p99, plus
//! `p50_us`, `p99_us`, `missed`) and `memory` (unit `bytes/instance`; ours also
//! `rss_bytes_per_instance`), client `ours` or `curator`, `param` `instances`.
//!
//! No floor yet (issue 40 wants one: a bare child watch plus reads of the changed nodes).

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashMap;
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use futures::stream::{FuturesUnordered, StreamExt};
use zk_recipes::discovery::{ServiceCacheEvent, ServiceDiscovery, ServiceInstance, UriSpec};
use zk_recipes::framework::Framework;
use zk_recipes_testing::{CuratorDiscovery, Jit};

mod support;

/// Counts the bytes allocated and not yet freed, for the live heap a cache holds.
struct CountingAllocator;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

#[allow(unsafe_code)]
// SAFETY: every call is passed to the system allocator unchanged; only a counter is added.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc(layout) };
        if !pointer.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let pointer = unsafe { System.alloc_zeroed(layout) };
        if !pointer.is_null() {
            LIVE_BYTES.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        pointer
    }

    unsafe fn dealloc(&self, pointer: *mut u8, layout: Layout) {
        unsafe { System.dealloc(pointer, layout) };
        LIVE_BYTES.fetch_sub(layout.size() as isize, Ordering::Relaxed);
    }

    unsafe fn realloc(&self, pointer: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let moved = unsafe { System.realloc(pointer, layout, new_size) };
        if !moved.is_null() {
            LIVE_BYTES.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        moved
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

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
    connect: &str,
    ids: &[String],
    duration: Duration,
) -> (Side, Side) {
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

    let (live_before, rss_before) = (LIVE_BYTES.load(Ordering::Relaxed), support::rss_bytes());
    let cache = reader.service_cache(SERVICE).start(CALL).await.expect("our cache");
    cache.loaded(CALL).await.expect("our cache loads");
    let live = LIVE_BYTES.load(Ordering::Relaxed) - live_before;
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

    // Let both caches catch up: until each has an arrival per write, or SETTLE.
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
    tokio::time::timeout(CALL, collector).await.expect("the collector stops").expect("the collector");
    tokio::time::timeout(CALL, cache.close()).await.expect("our cache closes");
    tokio::time::timeout(CALL * 3, curator.close())
        .await
        .expect("Curator closes in time")
        .expect("Curator closes");

    let ours_seen = std::mem::take(&mut *ours_seen.lock().expect("not poisoned"));
    let (ours_latencies, ours_missed) = match_arrivals(&writes, &ours_seen);
    let (curator_latencies, curator_missed) = match_arrivals(&writes, &curator_seen);
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
    (ours, curator)
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

        let rate = n as f64 * REREGISTER_PER_SECOND;
        println!(
            "ServiceCache following {n} instances, {rate:.0} re-registrations/s (unregister + register) for {secs} s, {rounds} round(s):"
        );
        let mut results = Vec::new();
        for index in 0..rounds {
            let (ours, curator_side) = round(index, &reader, &writer, &connect, &ids, duration).await;
            println!(
                "  round {}: ours p50 {:.2} ms p99 {:.2} ms ({} seen, {} missed, {} arrivals), {:.0} B live heap/instance, {:.0} B RSS/instance; \
                 Curator p50 {:.2} ms p99 {:.2} ms ({} seen, {} missed, {} arrivals), {:.0} B Java heap/instance",
                index + 1,
                ms(ours.p50),
                ms(ours.p99),
                ours.seen,
                ours.missed,
                ours.arrivals,
                ours.bytes_per_instance,
                ours.rss_per_instance,
                ms(curator_side.p50),
                ms(curator_side.p99),
                curator_side.seen,
                curator_side.missed,
                curator_side.arrivals,
                curator_side.bytes_per_instance,
            );
            results.push((ours, curator_side));
        }
        let _ = writer.close(CALL).await;
        reader_framework.close().await;
        writer_framework.close().await;

        let column = |pick: &dyn Fn(&Side) -> f64| -> (Vec<f64>, Vec<f64>, Vec<f64>) {
            let ours: Vec<f64> = results.iter().map(|(ours, _)| pick(ours)).collect();
            let curator: Vec<f64> = results.iter().map(|(_, curator)| pick(curator)).collect();
            let ratios = ours.iter().zip(&curator).map(|(ours, curator)| ours / curator).collect();
            (ours, curator, ratios)
        };
        println!();
        println!(
            "| {n} instances, {rate:.0} re-registrations/s, {secs} s x {rounds} | ours | Curator | ours / Curator [median of rounds] |"
        );
        println!("|---|---:|---:|---:|");
        let rows: [(&str, Pick, usize); 3] = [
            ("latency p50 (ms)", &|side| ms(side.p50), 2),
            ("latency p99 (ms)", &|side| ms(side.p99), 2),
            ("memory (bytes/instance: ours live heap, Curator Java heap)", &|side| side.bytes_per_instance, 0),
        ];
        for (label, pick, digits) in &rows {
            let (ours, curator, ratios) = column(*pick);
            let (ours, curator) = (support::median(&ours), support::median(&curator));
            println!(
                "| {label} | {ours:.digits$} | {curator:.digits$} | {:.2} [{:.2}] |",
                ours / curator,
                support::median(&ratios)
            );
        }
        // The first round also grows the process's own buffers and allocator arenas.
        let skip = usize::from(results.len() > 1);
        let rss: Vec<f64> = results.iter().skip(skip).map(|(ours, _)| ours.rss_per_instance).collect();
        println!(
            "| ours RSS (bytes/instance{}) | {:.0} | | |",
            if skip == 1 { ", first round left out" } else { "" },
            support::median(&rss)
        );
        let missed: (usize, usize) =
            results.iter().fold((0, 0), |(ours, curator), (o, c)| (ours + o.missed, curator + c.missed));
        println!("missed re-registrations (never seen within {} s): ours {}, Curator {}", SETTLE.as_secs(), missed.0, missed.1);

        for client in ["ours", "curator"] {
            let pick_side = |pair: &(Side, Side)| if client == "ours" { pair.0 } else { pair.1 };
            let sides: Vec<Side> = results.iter().map(pick_side).collect();
            let micros = |pick: fn(&Side) -> Duration| -> Vec<f64> {
                sides.iter().map(|side| pick(side).as_secs_f64() * 1e6).collect()
            };
            let (p50, p99) = (micros(|side| side.p50), micros(|side| side.p99));
            json.emit_series(
                "follow",
                client,
                "us",
                &p99,
                serde_json::json!({
                    "param": "instances", "value": n, "secs": secs, "rate": rate,
                    "p50_us": support::median(&p50), "p99_us": support::median(&p99),
                    "missed": sides.iter().map(|side| side.missed).sum::<usize>(),
                }),
            );
            let bytes: Vec<f64> = sides.iter().map(|side| side.bytes_per_instance).collect();
            let mut fields = serde_json::json!({ "param": "instances", "value": n });
            if client == "ours" {
                fields["rss_bytes_per_instance"] = serde_json::json!(support::median(&rss));
            }
            json.emit_series("memory", client, "bytes/instance", &bytes, fields);
        }
    });
}
