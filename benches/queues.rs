//! Items per second through a distributed queue on a real ZooKeeper server, in both delivery
//! modes: 4 producers and 4 consumers, each with its own session.
//!
//! `cargo bench -p zk-recipes --bench queues` (release build). Under `cargo test` it makes a
//! smoke run of 200 items and one round. Environment:
//! `QUEUE_BENCH_ITEMS` (default 10000), `QUEUE_BENCH_ROUNDS` (default 3); medians are printed.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::framework::Framework;
use zk_recipes::queue::{DistributedQueue, Utf8Serializer};
use zk_recipes_testing::TestingServer;

const WORKERS: usize = 4;

fn env_usize(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|value| value.parse().ok()).unwrap_or(default)
}

async fn connect(server: &TestingServer) -> Framework {
    let framework = Framework::builder(server.connect_string()).start().expect("framework");
    framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");
    framework
}

fn queue(framework: &Framework, path: &str, lock_safe: bool) -> DistributedQueue<String> {
    let builder = DistributedQueue::builder(framework, path).serializer(Utf8Serializer);
    let builder = if lock_safe { builder.lock_path(format!("{path}-locks")) } else { builder };
    builder.build().expect("queue")
}

/// Puts `items` with `WORKERS` producers; `batch` 1 means one `put` per item.
async fn produce(server: &TestingServer, path: &str, items: usize, batch: usize) -> Duration {
    let mut frameworks = Vec::new();
    for _ in 0..WORKERS {
        frameworks.push(connect(server).await);
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
async fn consume(server: &TestingServer, path: &str, items: usize, lock_safe: bool) -> Duration {
    let mut frameworks = Vec::new();
    for _ in 0..WORKERS {
        frameworks.push(connect(server).await);
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

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        // `cargo test --all-targets` runs this binary without `--bench`: a smoke run.
        let smoke = !std::env::args().any(|arg| arg == "--bench");
        let items = if smoke { 200 } else { env_usize("QUEUE_BENCH_ITEMS", 10_000) };
        let rounds = if smoke { 1 } else { env_usize("QUEUE_BENCH_ROUNDS", 3) };
        let server = TestingServer::start().await.expect("server");
        let mut results: Vec<(&str, Vec<f64>)> = vec![
            ("put (one put per item)", Vec::new()),
            ("put_batch (100 per multi)", Vec::new()),
            ("take, at most once (no lock path)", Vec::new()),
            ("take, lock-safe (lock path, ack multi)", Vec::new()),
            ("end to end, at most once (put + take at once)", Vec::new()),
            ("end to end, lock-safe (put + take at once)", Vec::new()),
        ];
        let rate = |elapsed: Duration| items as f64 / elapsed.as_secs_f64();
        for round in 0..rounds {
            for (mode, lock_safe) in [("plain", false), ("locked", true)] {
                let path = format!("/bench/{mode}-{round}");
                let batch = if lock_safe { 100 } else { 1 };
                let put = produce(&server, &path, items, batch).await;
                results[if lock_safe { 1 } else { 0 }].1.push(rate(put));
                let take = consume(&server, &path, items, lock_safe).await;
                results[if lock_safe { 3 } else { 2 }].1.push(rate(take));
                // Producers (one put per item) and consumers at the same time.
                let path = format!("/bench/{mode}-mixed-{round}");
                let started = Instant::now();
                let (_, _) = tokio::join!(
                    produce(&server, &path, items, 1),
                    consume(&server, &path, items, lock_safe)
                );
                results[if lock_safe { 5 } else { 4 }].1.push(rate(started.elapsed()));
            }
        }
        println!("{items} items, {WORKERS} producers / {WORKERS} consumers, medians of {rounds} rounds:");
        for (what, rates) in results {
            println!("  {what:<46} {:>8.0} items/s   (rounds: {rates:.0?})", median(rates.clone()));
        }
    });
}
