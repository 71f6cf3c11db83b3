//! Items per second through a distributed queue on a real ZooKeeper server, ours and Curator 5.4's
//! `DistributedQueue` (through the Java driver in `crates/testing/java`) in the same run: 4 producers and
//! 4 consumers, each with its own session, in both delivery modes.
//!
//! `cargo bench -p zk-recipes-benches --bench queues` (release build; both JVMs compile as in production,
//! see `support`). Under `cargo test` it makes a
//! smoke run of 200 items and one round. Environment:
//! `QUEUE_BENCH_ITEMS` (default 10000), `QUEUE_BENCH_ROUNDS` (default 3), or `--items N` and
//! `--rounds N`; medians are printed, with ours / Curator ratios. With `--json PATH` (or
//! `ZKR_BENCH_JSON`) each scenario is also appended as a JSON line (`bench` = `queues`; scenario
//! `put`, `put-batch`, `take`, `take-lock-safe`, `end-to-end`, `end-to-end-lock-safe`). Each round runs ours and Curator's scenarios, alternating which
//! goes first.
//!
//! Curator's side: `queue-produce` (4 clients in one JVM, one `put` per item, foreground —
//! `putInBackground(false)` — or Curator's default background puts, then `flushPuts`) and
//! `queue-consume` (4 clients in one JVM, each its own `DistributedQueue` and consumer; with
//! `lockPath` for lock-safe), timed inside the JVM from after the clients connected.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::framework::Framework;
use zk_recipes::queue::{DistributedQueue, Utf8Serializer};

mod support;

const WORKERS: usize = 4;

/// Queue throughput, ours against Curator's (the module docs say what runs).
#[derive(clap::Parser, Debug)]
#[command(name = "queues", bin_name = "cargo bench -p zk-recipes-benches --bench queues --")]
struct Args {
    /// Items through the queue per scenario and round.
    #[arg(long, env = "QUEUE_BENCH_ITEMS", default_value_t = 10_000)]
    items: usize,
    /// Interleaved rounds; medians over them are reported.
    #[arg(long, env = "QUEUE_BENCH_ROUNDS", default_value_t = 3)]
    rounds: usize,
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

async fn connect(connect_string: &str) -> Framework {
    let framework = Framework::builder(connect_string).start().expect("framework");
    framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");
    framework
}

fn queue(framework: &Framework, path: &str, lock_safe: bool) -> DistributedQueue<String> {
    let builder = DistributedQueue::builder(framework, path).serializer(Utf8Serializer);
    let builder = if lock_safe { builder.lock_path(format!("{path}-locks")) } else { builder };
    builder.build().expect("queue")
}

/// Puts `items` with `WORKERS` producers; `batch` 1 means one `put` per item.
async fn produce(connect_string: &str, path: &str, items: usize, batch: usize) -> Duration {
    let mut frameworks = Vec::new();
    for _ in 0..WORKERS {
        frameworks.push(connect(connect_string).await);
    }
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (producer, framework) in frameworks.iter().enumerate() {
        let queue = queue(framework, path, false);
        tasks.push(tokio::spawn(async move {
            let mine: Vec<String> =
                (producer..items).step_by(WORKERS).map(|index| format!("item-{index}")).collect();
            if batch == 1 {
                for item in &mine {
                    queue.put(item).await.expect("put");
                }
            } else {
                for chunk in mine.chunks(batch) {
                    queue.put_batch(chunk).await.expect("put_batch");
                }
            }
        }));
    }
    for task in tasks {
        task.await.expect("producer");
    }
    let elapsed = started.elapsed();
    for framework in frameworks {
        framework.close().await;
    }
    elapsed
}

/// Takes `items` with `WORKERS` consumers (handler API, default prefetch).
async fn consume(connect_string: &str, path: &str, items: usize, lock_safe: bool) -> Duration {
    let mut frameworks = Vec::new();
    for _ in 0..WORKERS {
        frameworks.push(connect(connect_string).await);
    }
    let done = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for framework in &frameworks {
        let consumer = queue(framework, path, lock_safe).consumer();
        let done = done.clone();
        tasks.push(tokio::spawn(consumer.run(move |_item: String| {
            done.fetch_add(1, Ordering::Relaxed);
            async { Ok::<(), std::convert::Infallible>(()) }
        })));
    }
    while done.load(Ordering::Relaxed) < items {
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let elapsed = started.elapsed();
    for framework in &frameworks {
        framework.close().await;
    }
    for task in tasks {
        task.await.expect("consumer").expect("run");
    }
    elapsed
}

/// Runs a Curator driver command and returns the `ops=` of its `RESULT` line (items/s).
async fn curator(args: &[String]) -> f64 {
    let line = support::curator_result(args).await;
    support::field(&line, "ops").unwrap_or_else(|| panic!("no ops= in {line:?}"))
}

/// Curator's producers: `background` is Curator's default (`putInBackground(true)` + `flushPuts`).
async fn curator_produce(connect: &str, path: &str, items: usize, background: bool) -> f64 {
    let mode = if background { "background" } else { "foreground" };
    curator(&[
        "queue-produce".into(),
        connect.into(),
        path.into(),
        items.to_string(),
        WORKERS.to_string(),
        "item-".into(),
        mode.into(),
    ])
    .await
}

async fn curator_consume(connect: &str, path: &str, items: usize, lock_safe: bool) -> f64 {
    let lock_path = if lock_safe { format!("{path}-locks") } else { "-".into() };
    curator(&[
        "queue-consume".into(),
        connect.into(),
        "queue".into(),
        path.into(),
        lock_path,
        items.to_string(),
        WORKERS.to_string(),
        "quiet".into(),
    ])
    .await
}

/// Scenario indexes into the results table.
const OURS_PUT: usize = 0;
const OURS_PUT_BATCH: usize = 1;
const OURS_TAKE: usize = 2;
const OURS_TAKE_LOCKED: usize = 3;
const OURS_END_TO_END: usize = 4;
const OURS_END_TO_END_LOCKED: usize = 5;
const CURATOR_PUT: usize = 6;
const CURATOR_PUT_BACKGROUND: usize = 7;
const CURATOR_TAKE: usize = 8;
const CURATOR_TAKE_LOCKED: usize = 9;

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let args: Args = support::parse();
        let json = support::JsonLines::new("queues", &args.json);
        let smoke = args.harness.is_smoke_run();
        let items = if smoke { 200 } else { args.items };
        let rounds = if smoke { 1 } else { args.rounds };
        let (connect, _server) = support::server(None).await;
        let mut results: Vec<(&str, Vec<f64>)> = vec![
            ("ours: put (one put per item)", Vec::new()),
            ("ours: put_batch (100 per multi)", Vec::new()),
            ("ours: take, at most once (no lock path)", Vec::new()),
            ("ours: take, lock-safe (lock path, ack multi)", Vec::new()),
            ("ours: end to end, at most once (put + take)", Vec::new()),
            ("ours: end to end, lock-safe (put + take)", Vec::new()),
            ("Curator: put (one put per item, foreground)", Vec::new()),
            ("Curator: put (default: in background + flush)", Vec::new()),
            ("Curator: take, at most once (no lockPath)", Vec::new()),
            ("Curator: take, lock-safe (lockPath)", Vec::new()),
        ];
        let rate = |elapsed: Duration| items as f64 / elapsed.as_secs_f64();
        for round in 0..rounds {
            eprintln!("round {} of {rounds}", round + 1);
            let curator_first = round % 2 == 1;
            for curator_turn in [curator_first, !curator_first] {
                if curator_turn {
                    // Foreground puts feed the at-most-once take, background puts the lock-safe one.
                    let plain = format!("/bench/curator-plain-{round}");
                    let locked = format!("/bench/curator-locked-{round}");
                    results[CURATOR_PUT].1.push(curator_produce(&connect, &plain, items, false).await);
                    results[CURATOR_TAKE].1.push(curator_consume(&connect, &plain, items, false).await);
                    results[CURATOR_PUT_BACKGROUND].1.push(curator_produce(&connect, &locked, items, true).await);
                    results[CURATOR_TAKE_LOCKED].1.push(curator_consume(&connect, &locked, items, true).await);
                    continue;
                }
                for (mode, lock_safe) in [("plain", false), ("locked", true)] {
                    let path = format!("/bench/{mode}-{round}");
                    let batch = if lock_safe { 100 } else { 1 };
                    let put = produce(&connect, &path, items, batch).await;
                    results[if lock_safe { OURS_PUT_BATCH } else { OURS_PUT }].1.push(rate(put));
                    let take = consume(&connect, &path, items, lock_safe).await;
                    results[if lock_safe { OURS_TAKE_LOCKED } else { OURS_TAKE }].1.push(rate(take));
                    // Producers (one put per item) and consumers at the same time.
                    let path = format!("/bench/{mode}-mixed-{round}");
                    let started = Instant::now();
                    let (_, _) = tokio::join!(
                        produce(&connect, &path, items, 1),
                        consume(&connect, &path, items, lock_safe)
                    );
                    results[if lock_safe { OURS_END_TO_END_LOCKED } else { OURS_END_TO_END }]
                        .1
                        .push(rate(started.elapsed()));
                }
            }
        }
        println!(
            "{items} items, {WORKERS} producers / {WORKERS} consumers (one session each), medians of {rounds} \
             interleaved rounds:"
        );
        let medians: Vec<f64> = results.iter().map(|(_, rates)| support::median(rates)).collect();
        for ((what, rates), median) in results.iter().zip(&medians) {
            println!("  {what:<48} {median:>8.0} items/s   (rounds: {rates:.0?})");
        }
        // (scenario, client, results index, how Curator's side runs it)
        let emitted = [
            ("put", "ours", OURS_PUT, ""),
            ("put-batch", "ours", OURS_PUT_BATCH, ""),
            ("take", "ours", OURS_TAKE, ""),
            ("take-lock-safe", "ours", OURS_TAKE_LOCKED, ""),
            ("end-to-end", "ours", OURS_END_TO_END, ""),
            ("end-to-end-lock-safe", "ours", OURS_END_TO_END_LOCKED, ""),
            ("put", "curator", CURATOR_PUT, "one put per item, foreground"),
            ("put-batch", "curator", CURATOR_PUT_BACKGROUND, "its default: puts in background + flushPuts"),
            ("take", "curator", CURATOR_TAKE, "no lockPath"),
            ("take-lock-safe", "curator", CURATOR_TAKE_LOCKED, "lockPath"),
        ];
        for (scenario, client, index, how) in emitted {
            json.emit_series(
                scenario,
                client,
                "items/s",
                &results[index].1,
                serde_json::json!({ "what": results[index].0, "how": how, "items": items, "workers": WORKERS }),
            );
        }
        let ratio = |ours: usize, theirs: usize| medians[ours] / medians[theirs];
        println!("ratios, ours / Curator (same run):");
        println!("  put, one per item, both awaited:            {:.2}x", ratio(OURS_PUT, CURATOR_PUT));
        println!("  put, one per item vs Curator's default:     {:.2}x", ratio(OURS_PUT, CURATOR_PUT_BACKGROUND));
        println!("  put_batch vs Curator's default put:         {:.2}x", ratio(OURS_PUT_BATCH, CURATOR_PUT_BACKGROUND));
        println!("  take, at most once:                         {:.2}x (target >= 3x)", ratio(OURS_TAKE, CURATOR_TAKE));
        println!(
            "  take, lock-safe:                            {:.2}x (target >= 3x)",
            ratio(OURS_TAKE_LOCKED, CURATOR_TAKE_LOCKED)
        );
    });
}
