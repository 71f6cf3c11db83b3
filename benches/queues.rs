//! Items per second through a distributed queue on a real ZooKeeper server, ours, the raw protocol
//! floor and Curator 5.4's `DistributedQueue` (through the Java driver in `crates/testing/java`) in
//! the same run: 4 producers and 4 consumers, each with its own session, in both delivery modes.
//!
//! `cargo bench -p zk-recipes-benches --bench queues` (release build; both JVMs compile as in
//! production, see `support`). Under `cargo test` it makes a smoke run of 200 items and one round.
//! Environment: `QUEUE_BENCH_ITEMS` (default 10000), `QUEUE_BENCH_ROUNDS` (default 3), or `--items
//! N` and `--rounds N`; medians are printed, with ours / floor and ours / Curator ratios (of the
//! medians, and the median of the per-round ratios). With `--json PATH` (or `ZKR_BENCH_JSON`) each
//! scenario is also appended as a JSON line (`bench` = `queues`; scenario `put`, `put-batch`,
//! `take`, `take-lock-safe`, `end-to-end`, `end-to-end-lock-safe`; client `ours`, `floor`,
//! `floor-1` or `curator`; for ours and the floor also `cpu_us_per_item`, this process's CPU time
//! per item over the timed part, and for takes `packets_per_item`, the server's packets per item).
//! Each round runs ours, the floor's and Curator's scenarios, the three taking turns going first,
//! after one untimed round of all of them. A take is timed until every item is done: at most once,
//! until the last handler ran (its item was deleted before); lock-safe, until the queue holds no
//! item (the last acks, each a multi deleting an item and its lock node after its handler, done;
//! looked at from a session of its own), as the floor's take ends with its last finish multi. Both
//! clocks stop when the last item is done (a notification, not a poll; the floor's idle consumers
//! stop waiting then too).
//!
//! The floor (JSON client `floor`): our queue's protocol on bare zookeeper-client calls, at the same
//! concurrency (4 producers / 4 consumers, one session each), with nothing else (no channel to a
//! handler, no framing or serializer: the items are their bytes). Producers: one
//! PERSISTENT_SEQUENTIAL create per item (`put`), or one multi of 100 creates (`put-batch`, as our
//! `put_batch` of 100). Consumers (as `crates/queue/src/consumer`): list with a children watch
//! (sorted by sequence), then per batch of up to 16 (our default prefetch), sent back to back: at
//! most once, the `get_data`s and one multi deleting the batch, falling back to single deletes
//! when the multi fails (another consumer took one); lock-safe, one multi creating the EPHEMERAL
//! lock nodes and the `get_data`s, falling back to create + read per item (but for the items
//! those reads found gone), then one finish multi
//! {check lock, delete item, delete lock} per taken item, all of a batch in one multi (our group
//! commit at its best), sent before the next batch is claimed. After a lost race a consumer goes
//! on from a random point of its listing (or of its next listing), and lists again when it lost
//! as many as it won, or ran out; an empty listing waits on its watch. Ours batches; the floor that
//! does not (`floor-1`: one item per round trip: read + delete, or lock create + read, then its own
//! finish multi; for `put-batch`, one create per item) is shown too. Each floor take runs on a
//! queue its floor's producers just filled (`floor-1` on a second queue).
//!
//! Curator's side: `queue-produce` (4 clients in one JVM, one `put` per item, foreground —
//! `putInBackground(false)` — or Curator's default background puts, then `flushPuts`) and
//! `queue-consume` (4 clients in one JVM, each its own `DistributedQueue` and consumer; with
//! `lockPath` for lock-safe), timed inside the JVM from after the clients connected.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use tokio::sync::watch;
use zk_recipes::framework::zookeeper_client::{self, Client, CreateMode, MultiWriteError};
use zk_recipes::framework::Framework;
use zk_recipes::queue::{DistributedQueue, Utf8Serializer, DEFAULT_PREFETCH};

mod support;

const WORKERS: usize = 4;
/// Items per `put_batch` (ours and the batching floor: one multi each).
const PUT_BATCH: usize = 100;
/// The item name prefix (ours: `queue-<seq>`).
const ITEM_PREFIX: &str = "queue-";

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
    /// Delivery modes to run: `plain` (at most once), `lock-safe`, or both (comma-separated).
    #[arg(long, value_delimiter = ',', default_values_t = [Mode::Plain, Mode::LockSafe])]
    modes: Vec<Mode>,
    /// Sides to run: `ours`, `floor`, `curator` (comma-separated; a ratio needs both its sides).
    #[arg(long, value_delimiter = ',', default_values_t = [Side::Ours, Side::Floor, Side::Curator])]
    sides: Vec<Side>,
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

/// A delivery mode (`--modes`).
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// At most once: no lock path.
    Plain,
    /// Lock-safe: a lock path.
    LockSafe,
}

impl std::fmt::Display for Mode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if *self == Mode::Plain { "plain" } else { "lock-safe" })
    }
}

/// Who runs a scenario (`--sides`), in the order they take turns going first.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Side {
    Ours,
    Floor,
    Curator,
}

impl std::fmt::Display for Side {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Side::Ours => "ours",
            Side::Floor => "floor",
            Side::Curator => "curator",
        })
    }
}

/// Runs `scenario` and returns its duration and the server's packets (sent + received) per item:
/// what it costs on the wire, which a busy machine does not change as it changes the time.
async fn counting_packets(
    connect: &str,
    items: usize,
    scenario: impl std::future::Future<Output = Measured>,
) -> (Measured, f64) {
    let before = support::server_packets(connect).await;
    let measured = scenario.await;
    let after = support::server_packets(connect).await;
    // The two `mntr` calls themselves count a few packets: nothing next to thousands of items.
    (measured, after.saturating_sub(before) as f64 / items as f64)
}

/// A timed part's wall time, and the CPU time this process spent meanwhile (user + system: the
/// server and Curator's driver are processes of their own).
#[derive(Debug, Clone, Copy)]
struct Measured {
    wall: Duration,
    cpu: Duration,
}

/// Measures from its start to each [`stop`](Stopwatch::stop).
struct Stopwatch {
    wall: Instant,
    cpu: Duration,
}

impl Stopwatch {
    fn start() -> Self {
        Stopwatch { wall: Instant::now(), cpu: support::cpu_time() }
    }

    fn stop(&self) -> Measured {
        Measured { wall: self.wall.elapsed(), cpu: support::cpu_time().saturating_sub(self.cpu) }
    }
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
async fn produce(connect_string: &str, path: &str, items: usize, batch: usize) -> Measured {
    let mut frameworks = Vec::new();
    for _ in 0..WORKERS {
        frameworks.push(connect(connect_string).await);
    }
    let started = Stopwatch::start();
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
    let measured = started.stop();
    for framework in frameworks {
        framework.close().await;
    }
    measured
}

/// Takes `items` with `WORKERS` consumers (handler API, default prefetch).
async fn consume(connect_string: &str, path: &str, items: usize, lock_safe: bool) -> Measured {
    let mut frameworks = Vec::new();
    for _ in 0..WORKERS {
        frameworks.push(connect(connect_string).await);
    }
    // Lock-safe, an item's ack (one multi deleting it and its lock node) follows its handler: the
    // take ends when the last ack is done, as the floor's ends with its last finish multi. Looked
    // at from a session of its own, whose listings queue behind no consumer's requests.
    let acks_watcher = match lock_safe {
        true => Some(connect(connect_string).await),
        false => None,
    };
    let acks_client = match &acks_watcher {
        Some(framework) => Some(support::bare_client(framework).await),
        None => None,
    };
    let done = Arc::new(AtomicUsize::new(0));
    let all_handled = Arc::new(tokio::sync::Notify::new());
    let started = Stopwatch::start();
    let mut tasks = Vec::new();
    for framework in &frameworks {
        let consumer = queue(framework, path, lock_safe).consumer();
        let (done, all_handled) = (done.clone(), all_handled.clone());
        tasks.push(tokio::spawn(consumer.run(move |_item: String| {
            if done.fetch_add(1, Ordering::Relaxed) + 1 == items {
                all_handled.notify_one();
            }
            async { Ok::<(), std::convert::Infallible>(()) }
        })));
    }
    all_handled.notified().await;
    if let Some(client) = acks_client {
        until_no_items(&client, path).await;
        // Dropped before the frameworks close (closed with a clone of its client alive, a
        // framework takes seconds).
        drop(client);
    }
    let measured = started.stop();
    for framework in frameworks.iter().chain(&acks_watcher) {
        framework.close().await;
    }
    for task in tasks {
        task.await.expect("consumer").expect("run");
    }
    measured
}

/// The floor's producers: `batch` 1 creates one node per item, more creates `batch` per multi.
async fn floor_produce(connect_string: &str, path: &str, items: usize, batch: usize) -> Measured {
    let mut sessions = Vec::new();
    for _ in 0..WORKERS {
        sessions.push(support::raw_client(connect_string).await);
    }
    support::ensure_dir(&sessions[0].1, path).await;
    let started = Stopwatch::start();
    let mut tasks = Vec::new();
    for (producer, (_, client)) in sessions.iter().enumerate() {
        let (client, prefix) = (client.clone(), format!("{path}/{ITEM_PREFIX}"));
        tasks.push(tokio::spawn(async move {
            let options = support::anyone(CreateMode::PersistentSequential);
            let mine: Vec<Vec<u8>> = (producer..items)
                .step_by(WORKERS)
                .map(|index| format!("item-{index}").into_bytes())
                .collect();
            for chunk in mine.chunks(batch) {
                if let [item] = chunk {
                    client.create(&prefix, item, &options).await.expect("create");
                    continue;
                }
                let mut multi = client.new_multi_writer();
                for item in chunk {
                    multi.add_create(&prefix, item, &options).expect("valid path");
                }
                multi.commit().await.expect("multi create");
            }
        }));
    }
    for task in tasks {
        task.await.expect("producer");
    }
    let measured = started.stop();
    for (framework, client) in sessions {
        // The bare client first: closed with a clone of it alive, a framework took seconds here.
        drop(client);
        framework.close().await;
    }
    measured
}

/// A finish multi in flight (lock-safe), awaited before the next one is sent.
type Finishing<'a> = BoxFuture<'a, Result<Vec<zookeeper_client::MultiWriteResult>, MultiWriteError>>;

/// One floor consumer: our consumer's protocol on one bare session (the module docs say which).
struct RawConsumer<'a> {
    client: &'a Client,
    dir: String,
    /// The lock directory, for lock-safe takes.
    locks: Option<String>,
    batch: usize,
    pending: std::collections::VecDeque<String>,
    must_relist: bool,
    /// Lost a race in the last batch: start the next listing at a random point.
    contended: bool,
    finishing: Option<Finishing<'a>>,
    /// The items of the finish multi in flight.
    finishing_names: Vec<String>,
    random: u64,
}

impl<'a> RawConsumer<'a> {
    /// Takes items until `done` reaches `items` (counting its own in it).
    async fn run(mut self, done: &AtomicUsize, items: usize, all_taken: &watch::Sender<bool>) {
        while done.load(Ordering::Relaxed) < items {
            if self.must_relist || self.pending.is_empty() {
                let (children, _, watcher) =
                    self.client.get_and_watch_children(&self.dir).await.expect("list");
                // Not the items whose finish multi is in flight (ours: the locks it holds).
                let mut names: Vec<String> = children
                    .into_iter()
                    .filter(|child| child.starts_with(ITEM_PREFIX) && !self.finishing_names.contains(child))
                    .collect();
                names.sort_by_cached_key(|name| support::sequence_of(name));
                if self.contended && names.len() > 1 {
                    let start = self.next_random() % names.len();
                    names.rotate_left(start);
                }
                self.must_relist = false;
                if names.is_empty() {
                    // Wait on the watch, looking now and then whether the others took the rest,
                    // or until one of them took the last item (the take ends without us).
                    let mut taken = all_taken.subscribe();
                    tokio::select! {
                        _ = watcher.changed() => {}
                        _ = taken.wait_for(|taken| *taken) => {}
                        () = tokio::time::sleep(Duration::from_millis(20)) => {}
                    }
                    continue;
                }
                self.pending = names.into();
            }
            let count = self.batch.min(self.pending.len());
            let batch: Vec<String> = self.pending.drain(..count).collect();
            let (won, lost) = match &self.locks {
                None => self.take_plain(&batch).await,
                Some(locks) => {
                    let locks = locks.clone();
                    self.take_locked(&batch, &locks).await
                }
            };
            if done.fetch_add(won, Ordering::Relaxed) + won >= items {
                all_taken.send_replace(true);
            }
            self.contended = lost > 0;
            if lost > 0 && lost >= won {
                self.must_relist = true;
            } else if lost > 0 && self.pending.len() > 1 {
                let start = self.next_random() % self.pending.len();
                self.pending.rotate_left(start);
            }
        }
        if let Some(finishing) = self.finishing.take() {
            finishing.await.expect("finish multi");
        }
    }

    /// At most once: the reads, then one multi deleting the batch (or one delete), back to back;
    /// single deletes if the multi failed. Returns (taken, lost races).
    async fn take_plain(&mut self, batch: &[String]) -> (usize, usize) {
        let paths: Vec<String> = batch.iter().map(|name| format!("{}/{name}", self.dir)).collect();
        let client = self.client;
        let reads: Vec<_> = paths.iter().map(|path| client.get_data(path)).collect();
        if let [path] = paths.as_slice() {
            let delete = client.delete(path, None);
            let read = reads.into_iter().next().expect("one read").await;
            return match (read, delete.await) {
                (Ok(_), Ok(())) => (1, 0),
                _ => (0, 1),
            };
        }
        let mut multi = client.new_multi_writer();
        for path in &paths {
            multi.add_delete(path, None).expect("valid path");
        }
        let deleted = multi.commit();
        let mut read_ok = Vec::with_capacity(reads.len());
        for read in reads {
            read_ok.push(read.await.is_ok());
        }
        match deleted.await {
            Ok(_) => (paths.len(), 0),
            Err(MultiWriteError::OperationFailed { .. }) => {
                let deletes: Vec<_> = paths
                    .iter()
                    .zip(&read_ok)
                    .filter(|(_, read)| **read)
                    .map(|(path, _)| client.delete(path, None))
                    .collect();
                let mut won = 0;
                for delete in deletes {
                    won += usize::from(delete.await.is_ok());
                }
                (won, paths.len() - won)
            }
            Err(err) => panic!("delete multi: {err}"),
        }
    }

    /// Lock-safe: one multi creating the lock nodes, and the reads, back to back (one by one if
    /// the multi failed); then the finish multi of what was taken, sent before the next claim.
    async fn take_locked(&mut self, batch: &[String], locks: &str) -> (usize, usize) {
        let client = self.client;
        let items: Vec<String> = batch.iter().map(|name| format!("{}/{name}", self.dir)).collect();
        let lock_nodes: Vec<String> = batch.iter().map(|name| format!("{locks}/{name}")).collect();
        let options = support::anyone(CreateMode::Ephemeral);
        let mut taken = Vec::new();
        let mut together = false;
        // Items the reads behind a failed lock multi found gone (finished by another consumer):
        // not tried again one by one (as ours).
        let mut gone = vec![false; batch.len()];
        if batch.len() > 1 {
            let mut multi = client.new_multi_writer();
            for lock_node in &lock_nodes {
                multi.add_create(lock_node, b"", &options).expect("valid path");
            }
            let created = multi.commit();
            let reads: Vec<_> = items.iter().map(|item| client.get_data(item)).collect();
            let created = created.await;
            let mut read_ok = Vec::with_capacity(reads.len());
            for read in reads {
                read_ok.push(read.await.is_ok());
            }
            match created {
                Ok(_) => {
                    together = true;
                    for (index, read) in read_ok.into_iter().enumerate() {
                        if read {
                            taken.push(index);
                        } else {
                            // Finished by another consumer meanwhile: let our lock go.
                            client.delete(&lock_nodes[index], None).await.expect("delete lock");
                        }
                    }
                }
                Err(MultiWriteError::OperationFailed { .. }) => {
                    gone = read_ok.iter().map(|read| !read).collect();
                }
                Err(err) => panic!("lock multi: {err}"),
            }
        }
        if !together {
            let requests: Vec<_> = (0..batch.len())
                .filter(|index| !gone[*index])
                .map(|index| {
                    let (lock_node, item) = (&lock_nodes[index], &items[index]);
                    (index, client.create(lock_node, b"", &options), client.get_data(item))
                })
                .collect();
            for (index, create, read) in requests {
                match (create.await, read.await) {
                    (Ok(_), Ok(_)) => taken.push(index),
                    (Ok(_), Err(_)) => client.delete(&lock_nodes[index], None).await.expect("delete lock"),
                    (Err(_), _) => {}
                }
            }
        }
        let lost = batch.len() - taken.len();
        if taken.is_empty() {
            return (0, lost);
        }
        if let Some(finishing) = self.finishing.take() {
            finishing.await.expect("finish multi");
        }
        let finish = |indexes: &[usize]| {
            let mut multi = client.new_multi_writer();
            for index in indexes {
                multi.add_check_version(&lock_nodes[*index], -1).expect("valid path");
                multi.add_delete(&items[*index], None).expect("valid path");
                multi.add_delete(&lock_nodes[*index], None).expect("valid path");
            }
            multi.commit()
        };
        self.finishing = Some(Box::pin(finish(&taken)));
        self.finishing_names = taken.iter().map(|index| batch[*index].clone()).collect();
        (taken.len(), lost)
    }

    fn next_random(&mut self) -> usize {
        self.random ^= self.random << 13;
        self.random ^= self.random >> 7;
        self.random ^= self.random << 17;
        self.random as usize
    }
}

/// Waits until the queue at `path` holds no item (a children watch, listed again on each change).
async fn until_no_items(client: &Client, path: &str) {
    loop {
        let (children, _, watcher) = client.get_and_watch_children(path).await.expect("list");
        if !children.iter().any(|child| child.starts_with(ITEM_PREFIX)) {
            return;
        }
        tokio::time::timeout(Duration::from_secs(60), watcher.changed()).await.expect("the queue drains");
    }
}

/// The floor's consumers, taking up to `batch` items per round trip (ours: [`DEFAULT_PREFETCH`]).
async fn floor_consume(
    connect_string: &str,
    path: &str,
    items: usize,
    lock_safe: bool,
    batch: usize,
) -> Measured {
    let mut sessions = Vec::new();
    for _ in 0..WORKERS {
        sessions.push(support::raw_client(connect_string).await);
    }
    let locks = lock_safe.then(|| format!("{path}-locks"));
    support::ensure_dir(&sessions[0].1, path).await;
    if let Some(locks) = &locks {
        support::ensure_dir(&sessions[0].1, locks).await;
    }
    let done = Arc::new(AtomicUsize::new(0));
    let all_taken = Arc::new(watch::channel(false).0);
    let started = Stopwatch::start();
    let mut tasks = Vec::new();
    for (index, (_, client)) in sessions.iter().enumerate() {
        let (client, dir, locks, done) = (client.clone(), path.to_owned(), locks.clone(), done.clone());
        let all_taken = all_taken.clone();
        tasks.push(tokio::spawn(async move {
            let consumer = RawConsumer {
                client: &client,
                dir,
                locks,
                batch,
                pending: Default::default(),
                must_relist: true,
                contended: false,
                finishing: None,
                finishing_names: Vec::new(),
                random: 0x9E37_79B9_7F4A_7C15 ^ (index as u64 + 1),
            };
            consumer.run(&done, items, &all_taken).await;
        }));
    }
    for task in tasks {
        task.await.expect("consumer");
    }
    let measured = started.stop();
    for (framework, client) in sessions {
        // The bare client first: closed with a clone of it alive, a framework took seconds here.
        drop(client);
        framework.close().await;
    }
    measured
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
const FLOOR_PUT: usize = 10;
const FLOOR_PUT_BATCH: usize = 11;
const FLOOR_TAKE: usize = 12;
const FLOOR_TAKE_1: usize = 13;
const FLOOR_TAKE_LOCKED: usize = 14;
const FLOOR_TAKE_LOCKED_1: usize = 15;
const FLOOR_END_TO_END: usize = 16;
const FLOOR_END_TO_END_LOCKED: usize = 17;

/// The sides, in the order they take turns going first.
const SIDES: [Side; 3] = [Side::Ours, Side::Floor, Side::Curator];

/// Notes one round of the scenario at `index`: its items/s, and our process's CPU µs per item.
fn note(
    results: &mut [(&str, Vec<f64>)],
    cpu_us: &mut [Vec<f64>],
    index: usize,
    items: usize,
    measured: Measured,
) {
    results[index].1.push(items as f64 / measured.wall.as_secs_f64());
    cpu_us[index].push(measured.cpu.as_secs_f64() * 1e6 / items as f64);
}

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
            ("floor: put (one create per item)", Vec::new()),
            ("floor: put (100 creates per multi)", Vec::new()),
            ("floor: take, at most once (16 per round trip)", Vec::new()),
            ("floor: take, at most once (1 per round trip)", Vec::new()),
            ("floor: take, lock-safe (16 per round trip)", Vec::new()),
            ("floor: take, lock-safe (1 per round trip)", Vec::new()),
            ("floor: end to end, at most once", Vec::new()),
            ("floor: end to end, lock-safe", Vec::new()),
        ];
        // The server's packets (sent + received) per item of each take, by results index.
        let mut packets: Vec<Vec<f64>> = vec![Vec::new(); results.len()];
        // Our process's CPU µs per item (ours and the floor's), by results index.
        let mut cpu_us: Vec<Vec<f64>> = vec![Vec::new(); results.len()];
        let modes: Vec<(&str, bool)> = [("plain", Mode::Plain), ("locked", Mode::LockSafe)]
            .into_iter()
            .filter(|(_, mode)| args.modes.contains(mode))
            .map(|(name, mode)| (name, mode == Mode::LockSafe))
            .collect();
        // One untimed round first (not in a smoke run): the server's JVM and Curator's compile their
        // hot paths before any side is timed. Without it the first round met a cold server on
        // whichever side went first (ours' put in a full report's first round: 0.47 of the floor's,
        // then 0.84 to 0.97).
        let warm_up_rounds = usize::from(!smoke);
        for round in 0..warm_up_rounds + rounds {
            if round < warm_up_rounds {
                eprintln!("warm-up round (untimed)");
            } else {
                if round == warm_up_rounds {
                    results.iter_mut().for_each(|(_, rates)| rates.clear());
                    packets.iter_mut().for_each(Vec::clear);
                    cpu_us.iter_mut().for_each(Vec::clear);
                }
                eprintln!("round {} of {rounds}", round - warm_up_rounds + 1);
            }
            // Which side goes first turns with the rounds.
            for turn in 0..SIDES.len() {
                let side = SIDES[(turn + round) % SIDES.len()];
                if !args.sides.contains(&side) {
                    continue;
                }
                match side {
                    Side::Curator => {
                        // Foreground puts feed the at-most-once take, background puts the lock-safe one.
                        for &(mode, lock_safe) in &modes {
                            let path = format!("/bench/curator-{mode}-{round}");
                            let (put_index, take_index) = if lock_safe {
                                (CURATOR_PUT_BACKGROUND, CURATOR_TAKE_LOCKED)
                            } else {
                                (CURATOR_PUT, CURATOR_TAKE)
                            };
                            results[put_index].1.push(curator_produce(&connect, &path, items, lock_safe).await);
                            results[take_index].1.push(curator_consume(&connect, &path, items, lock_safe).await);
                        }
                    }
                    Side::Floor => {
                        for &(mode, lock_safe) in &modes {
                            let (batch, put_index) =
                                if lock_safe { (PUT_BATCH, FLOOR_PUT_BATCH) } else { (1, FLOOR_PUT) };
                            let (take_index, take_1_index, end_to_end_index) = if lock_safe {
                                (FLOOR_TAKE_LOCKED, FLOOR_TAKE_LOCKED_1, FLOOR_END_TO_END_LOCKED)
                            } else {
                                (FLOOR_TAKE, FLOOR_TAKE_1, FLOOR_END_TO_END)
                            };
                            let path = format!("/bench/floor-{mode}-{round}");
                            let put = floor_produce(&connect, &path, items, batch).await;
                            note(&mut results, &mut cpu_us, put_index, items, put);
                            let take = floor_consume(&connect, &path, items, lock_safe, DEFAULT_PREFETCH);
                            let (take, per_item) = counting_packets(&connect, items, take).await;
                            note(&mut results, &mut cpu_us, take_index, items, take);
                            packets[take_index].push(per_item);
                            let path = format!("/bench/floor-{mode}-1-{round}");
                            floor_produce(&connect, &path, items, batch).await;
                            let take = floor_consume(&connect, &path, items, lock_safe, 1);
                            let (take, per_item) = counting_packets(&connect, items, take).await;
                            note(&mut results, &mut cpu_us, take_1_index, items, take);
                            packets[take_1_index].push(per_item);
                            let path = format!("/bench/floor-{mode}-mixed-{round}");
                            let end_to_end = async {
                                let started = Stopwatch::start();
                                tokio::join!(
                                    floor_produce(&connect, &path, items, 1),
                                    floor_consume(&connect, &path, items, lock_safe, DEFAULT_PREFETCH)
                                );
                                started.stop()
                            };
                            let (measured, per_item) = counting_packets(&connect, items, end_to_end).await;
                            note(&mut results, &mut cpu_us, end_to_end_index, items, measured);
                            packets[end_to_end_index].push(per_item);
                        }
                    }
                    Side::Ours => {
                        for &(mode, lock_safe) in &modes {
                            let path = format!("/bench/{mode}-{round}");
                            let batch = if lock_safe { PUT_BATCH } else { 1 };
                            let put = produce(&connect, &path, items, batch).await;
                            let put_index = if lock_safe { OURS_PUT_BATCH } else { OURS_PUT };
                            note(&mut results, &mut cpu_us, put_index, items, put);
                            let take_index = if lock_safe { OURS_TAKE_LOCKED } else { OURS_TAKE };
                            let take = consume(&connect, &path, items, lock_safe);
                            let (take, per_item) = counting_packets(&connect, items, take).await;
                            note(&mut results, &mut cpu_us, take_index, items, take);
                            packets[take_index].push(per_item);
                            // Producers (one put per item) and consumers at the same time.
                            let path = format!("/bench/{mode}-mixed-{round}");
                            let end_to_end = async {
                                let started = Stopwatch::start();
                                let (_, _) = tokio::join!(
                                    produce(&connect, &path, items, 1),
                                    consume(&connect, &path, items, lock_safe)
                                );
                                started.stop()
                            };
                            let (measured, per_item) = counting_packets(&connect, items, end_to_end).await;
                            let end_to_end_index =
                                if lock_safe { OURS_END_TO_END_LOCKED } else { OURS_END_TO_END };
                            note(&mut results, &mut cpu_us, end_to_end_index, items, measured);
                            packets[end_to_end_index].push(per_item);
                        }
                    }
                }
            }
        }
        println!(
            "{items} items, {WORKERS} producers / {WORKERS} consumers (one session each), medians of {rounds} \
             interleaved rounds:"
        );
        // A scenario left out by `--modes` or `--sides` has no rounds (and no median).
        let medians: Vec<f64> = results
            .iter()
            .map(|(_, rates)| if rates.is_empty() { f64::NAN } else { support::median(rates) })
            .collect();
        for ((what, rates), median) in results.iter().zip(&medians) {
            if !rates.is_empty() {
                println!("  {what:<48} {median:>8.0} items/s   (rounds: {rates:.0?})");
            }
        }
        println!("our process's CPU µs per item (user + system), median of the rounds:");
        for ((what, _), per_item) in results.iter().zip(&cpu_us) {
            if !per_item.is_empty() {
                println!("  {what:<48} {:>8.1}   (rounds: {per_item:.1?})", support::median(per_item));
            }
        }
        println!("server packets (sent + received) per item, median of the rounds (the sessions' connects too):");
        for ((what, _), per_item) in results.iter().zip(&packets) {
            if !per_item.is_empty() {
                println!("  {what:<48} {:>8.2}   (rounds: {per_item:.2?})", support::median(per_item));
            }
        }
        // (scenario, client, results index, how that side runs it)
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
            ("put", "floor", FLOOR_PUT, "one create per item"),
            ("put-batch", "floor", FLOOR_PUT_BATCH, "100 creates per multi"),
            ("put-batch", "floor-1", FLOOR_PUT, "one create per item"),
            ("take", "floor", FLOOR_TAKE, "16 per round trip: reads + one delete multi"),
            ("take", "floor-1", FLOOR_TAKE_1, "1 per round trip: read + delete"),
            ("take-lock-safe", "floor", FLOOR_TAKE_LOCKED, "16 per round trip: lock multi + reads, one finish multi"),
            ("take-lock-safe", "floor-1", FLOOR_TAKE_LOCKED_1, "1 per round trip: lock + read, finish multi"),
            ("end-to-end", "floor", FLOOR_END_TO_END, "one create per item; takes 16 per round trip"),
            ("end-to-end-lock-safe", "floor", FLOOR_END_TO_END_LOCKED, "one create per item; takes 16 per round trip"),
        ];
        for (scenario, client, index, how) in emitted {
            if results[index].1.is_empty() {
                continue;
            }
            json.emit_series(
                scenario,
                client,
                "items/s",
                &results[index].1,
                serde_json::json!({
                    "what": results[index].0,
                    "how": how,
                    "items": items,
                    "workers": WORKERS,
                    // Server packets per item (takes and end to end), the median of the rounds.
                    "packets_per_item": (!packets[index].is_empty()).then(|| support::median(&packets[index])),
                    // Our process's CPU per item (ours and the floor's), the median of the rounds.
                    "cpu_us_per_item": (!cpu_us[index].is_empty()).then(|| support::median(&cpu_us[index])),
                }),
            );
        }
        let ratio = |ours: usize, theirs: usize| {
            if results[ours].1.is_empty() || results[theirs].1.is_empty() {
                return "– (not run)".to_owned();
            }
            let per_round: Vec<f64> =
                results[ours].1.iter().zip(&results[theirs].1).map(|(ours, theirs)| ours / theirs).collect();
            format!("{:.2} [{:.2}]", medians[ours] / medians[theirs], support::median(&per_round))
        };
        println!("ratios (same run; of the medians [median of the per-round ratios]):");
        println!("  ours / floor:");
        println!("    put, one per item:                        {}", ratio(OURS_PUT, FLOOR_PUT));
        println!("    put_batch vs the batching floor:          {}", ratio(OURS_PUT_BATCH, FLOOR_PUT_BATCH));
        println!("    take, at most once (floor batches too):   {}", ratio(OURS_TAKE, FLOOR_TAKE));
        println!("    take, at most once vs floor of 1:         {}", ratio(OURS_TAKE, FLOOR_TAKE_1));
        println!("    take, lock-safe (floor batches too):      {}", ratio(OURS_TAKE_LOCKED, FLOOR_TAKE_LOCKED));
        println!("    take, lock-safe vs floor of 1:            {}", ratio(OURS_TAKE_LOCKED, FLOOR_TAKE_LOCKED_1));
        println!("    end to end, at most once:                 {}", ratio(OURS_END_TO_END, FLOOR_END_TO_END));
        println!(
            "    end to end, lock-safe:                    {}",
            ratio(OURS_END_TO_END_LOCKED, FLOOR_END_TO_END_LOCKED)
        );
        println!("  ours / Curator:");
        println!("    put, one per item, both awaited:          {}", ratio(OURS_PUT, CURATOR_PUT));
        println!("    put, one per item vs Curator's default:   {}", ratio(OURS_PUT, CURATOR_PUT_BACKGROUND));
        println!("    put_batch vs Curator's default put:       {}", ratio(OURS_PUT_BATCH, CURATOR_PUT_BACKGROUND));
        println!("    take, at most once:                       {} (target >= 3x)", ratio(OURS_TAKE, CURATOR_TAKE));
        println!(
            "    take, lock-safe:                          {} (target >= 3x)",
            ratio(OURS_TAKE_LOCKED, CURATOR_TAKE_LOCKED)
        );
    });
}
