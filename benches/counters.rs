//! Counter increments under contention: our `SharedCount` and `DistributedAtomicLong` against the
//! raw protocol floor and Curator 5.4's on the same ZooKeeper server, in one run.
//!
//! ```sh
//! cargo bench -p zk-recipes-benches --bench counters                      # 3 interleaved rounds
//! cargo bench -p zk-recipes-benches --bench counters -- --rounds 5 --clients 8 --per-client 500
//! ```
//!
//! Uses `ZK_CONNECT` if set, else starts a `TestingServer` with both JVMs compiling as in
//! production (see `support`). `--clients` sessions (one task or thread each) add 1 to one counter
//! `--per-client` times each, every increment retried until it succeeds; the counter node is
//! created (zero) before the clock starts. Reported: successful increments per second over the
//! whole run (all of them succeed in the end: a lost compare-and-set is a retry), and the retries.
//! After each run the node's value must equal the number of increments (checked, the bench fails
//! otherwise).
//!
//! - **shared-count**: ours loops `SharedCount::get` (the value its watch keeps, no round trip) and
//!   `try_set(version, value + 1)`. Curator's does the same with `getVersionedValue` and
//!   `trySetCount` (the driver's `count-increment shared-count`). The floor, on bare calls, does
//!   what a `SharedCount` does on the wire: a persistent watch on the node whose every event
//!   re-reads it (`get_data`) into the known value and version, and per try a versioned
//!   `set_data` of known value + 1; on a version conflict one `get_data` refreshes the known value
//!   before the next try (as our `try_set` does when refused). Ours and the floor both send a
//!   plain versioned `set_data`.
//! - **atomic-long**: ours calls `DistributedAtomicLong::increment` (retry policy: no retry, no
//!   promotion) until it succeeds, Curator's likewise (`RetryNTimes(0, 0)`); per try, one
//!   `get_data` and one versioned `set_data`. The floor: `get_data`, then
//!   a versioned `set_data` of value + 1, until one succeeds.
//! - **atomic-long-promoted**: as `atomic-long`, but promoted to a mutex (Curator's
//!   `PromotedToLock`, the driver's `count-increment atomic-long <path> … <lock-path>`): one
//!   optimistic try; if it loses, take the mutex at the lock path and try again holding it, up to
//!   1,001 tries 2 ms apart (`RetryNTimes(1000, 2)`: other sessions' optimistic tries still race
//!   the holder), then release it. Ours: `DistributedAtomicLong` with a `PromotedToLock` of that
//!   retry policy. The floor does the same on bare calls: the optimistic `get_data` + versioned
//!   `set_data`; on a conflict the lock recipe (a protected ephemeral-sequential create and the
//!   list sent back to back, an exists watch on the predecessor until it goes), the tries, and the
//!   delete of its lock node. The lock's directory is created before the clock starts.
//!
//! On the write: ours sends each conditional write through the framework's `write_once`, a plain
//! versioned `set_data` sent once on the session (never by the retry loop); after a lost reply it
//! `sync`s and reads the node back, and the node's version and `czxid` prove the write unapplied or
//! the outcome unknown. The floor sends the same plain `set_data` and has no lost replies to settle
//! in a quiet run. (Until 2026-11-28 ours sent a one-operation multi, which bought nothing.)
//!
//! Each round runs every scenario for ours, the floor and Curator, taking turns going first; medians
//! over the rounds and ratios (of the medians, and in brackets the median of the per-round ratios)
//! are printed. With `--json PATH` (or `ZKR_BENCH_JSON`) each is also appended as JSON lines
//! (`bench` = `counters`, `scenario` = `shared-count`, `atomic-long` or `atomic-long-promoted`,
//! `param` = `clients`, unit increments/s, with `retries`, `promoted` and `increments`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::counter::{decode_count, decode_long, DistributedAtomicLong, PromotedToLock, SharedCount};
use zk_recipes::framework::retry::RetryNTimes;
use zk_recipes::framework::zookeeper_client::{self, AddWatchMode, Client, CreateMode};
use zk_recipes::framework::{Deadline, Framework};

mod support;

/// The sides measured, in their JSON names: ours, the raw floor, Curator's.
const SIDES: [&str; 3] = ["ours", "floor", "curator"];
/// The counters: (scenario, also the driver's kind; bytes of a zero).
const SCENARIOS: [(&str, usize); 3] = [("shared-count", 4), ("atomic-long", 8), ("atomic-long-promoted", 8)];
/// The promoted scenario's tries holding the lock: Curator's `RetryNTimes(1000, 2)`.
const PROMOTED_RETRIES: u32 = 1000;
/// The sleep between the promoted scenario's tries holding the lock.
const PROMOTED_SLEEP: Duration = Duration::from_millis(2);
/// How long one step (connecting, a whole run) may take.
const STEP: Duration = Duration::from_secs(300);

/// Counter increments under contention, ours against the floor and Curator's (the module docs say
/// what runs).
#[derive(clap::Parser, Debug)]
#[command(name = "counters", bin_name = "cargo bench -p zk-recipes-benches --bench counters --")]
struct Args {
    /// Interleaved rounds; medians over them are reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Sessions incrementing one counter.
    #[arg(long, default_value_t = 8)]
    clients: usize,
    /// Increments per session and run.
    #[arg(long, default_value_t = 300)]
    per_client: usize,
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

/// One run: increments per second, the retries (lost compare-and-sets) they took, and the
/// increments that took the promoted lock.
#[derive(Debug, Clone, Copy)]
struct Measured {
    ops: f64,
    retries: u64,
    promoted: u64,
}

/// The promoted scenario's lock path for a counter at `path`.
fn lock_path_of(path: &str) -> String {
    format!("{path}-lock")
}

/// Creates `path` holding a zero of `bytes` bytes (its parent too), before the clock starts.
async fn create_counter(client: &Client, path: &str, bytes: usize) {
    let parent = &path[..path.rfind('/').expect("an absolute path")];
    support::ensure_dir(client, parent).await;
    client
        .create(path, &vec![0; bytes], &support::anyone(CreateMode::Persistent))
        .await
        .expect("the counter");
}

/// The counter's value as its kind encodes it.
async fn read_counter(client: &Client, scenario: &str, path: &str) -> i64 {
    let (data, _) = client.get_data(path).await.expect("read the counter");
    match scenario {
        "shared-count" => i64::from(decode_count(path, &data).expect("a count")),
        _ => decode_long(path, Some(&data)).expect("a long"),
    }
}

/// The floor's `SharedCount`: the known value and version, kept by a persistent watch re-reading
/// the node on every event, as `SharedValue` does.
struct RawSharedCount {
    client: Client,
    path: String,
    known: Arc<std::sync::Mutex<(i32, i32)>>,
    follower: tokio::task::JoinHandle<()>,
}

impl RawSharedCount {
    async fn start(client: Client, path: &str) -> Self {
        let mut watcher = client.watch(path, AddWatchMode::Persistent).await.expect("persistent watch");
        let known = Arc::new(std::sync::Mutex::new((-1, 0)));
        let (data, stat) = client.get_data(path).await.expect("read");
        update(&known, stat.version, &data, path);
        let (follower_client, follower_path, follower_known) =
            (client.clone(), path.to_owned(), known.clone());
        let follower = tokio::spawn(async move {
            loop {
                watcher.changed().await;
                match follower_client.get_data(&follower_path).await {
                    Ok((data, stat)) => update(&follower_known, stat.version, &data, &follower_path),
                    Err(_) => return,
                }
            }
        });
        RawSharedCount { client, path: path.to_owned(), known, follower }
    }

    async fn refresh(&self) {
        let (data, stat) = self.client.get_data(&self.path).await.expect("read");
        update(&self.known, stat.version, &data, &self.path);
    }

    /// One increment, retried until it succeeds; returns the retries.
    async fn increment(&self) -> u64 {
        let mut retries = 0;
        loop {
            let (version, value) = *self.known.lock().expect("known");
            let data = (value + 1).to_be_bytes();
            match self.client.set_data(&self.path, &data, Some(version)).await {
                Ok(stat) => {
                    update(&self.known, stat.version, &data, &self.path);
                    return retries;
                }
                Err(zookeeper_client::Error::BadVersion) => {
                    retries += 1;
                    self.refresh().await;
                }
                Err(err) => panic!("set_data: {err}"),
            }
        }
    }
}

impl Drop for RawSharedCount {
    fn drop(&mut self) {
        self.follower.abort();
    }
}

/// Keeps `(version, value)` if newer than what `known` holds.
fn update(known: &std::sync::Mutex<(i32, i32)>, version: i32, data: &[u8], path: &str) {
    let value = decode_count(path, data).expect("a count");
    let mut known = known.lock().expect("known");
    if version > known.0 {
        *known = (version, value);
    }
}

/// One optimistic try of the floor's atomic long: `get_data`, then a versioned `set_data`;
/// whether it was applied.
async fn raw_atomic_try(client: &Client, path: &str) -> bool {
    let (data, stat) = client.get_data(path).await.expect("read");
    let value = decode_long(path, Some(&data)).expect("a long");
    match client.set_data(path, &(value + 1).to_be_bytes(), Some(stat.version)).await {
        Ok(_) => true,
        Err(zookeeper_client::Error::BadVersion) => false,
        Err(err) => panic!("set_data: {err}"),
    }
}

/// The floor's promoted atomic long: one optimistic try, then the lock recipe on bare calls
/// around the tries a promoted increment makes.
struct RawPromoted {
    client: Client,
    path: String,
    lock_dir: String,
    lock_prefix: String,
}

impl RawPromoted {
    /// One increment as `DistributedAtomicLong::increment` with promotion makes it: whether it
    /// succeeded and whether it took the lock.
    async fn increment_once(&self) -> (bool, bool) {
        if raw_atomic_try(&self.client, &self.path).await {
            return (true, false);
        }
        let lock_node = support::raw_lock(&self.client, &self.lock_dir, &self.lock_prefix).await;
        let mut succeeded = false;
        for retry in 0..=PROMOTED_RETRIES {
            if raw_atomic_try(&self.client, &self.path).await {
                succeeded = true;
                break;
            }
            if retry < PROMOTED_RETRIES {
                tokio::time::sleep(PROMOTED_SLEEP).await;
            }
        }
        self.client.delete(&lock_node, None).await.expect("delete the lock node");
        (succeeded, true)
    }
}

/// One client of a run, ready to loop.
enum Incrementer {
    Count(SharedCount),
    Atomic(DistributedAtomicLong),
    RawCount(RawSharedCount),
    RawAtomic(Client, String),
    RawPromoted(RawPromoted),
}

/// What one increment took: the failed tries (whole calls) before it succeeded, and whether any
/// of them took the promoted lock.
#[derive(Debug, Clone, Copy, Default)]
struct Took {
    retries: u64,
    promoted: bool,
}

impl Incrementer {
    /// One increment, retried until it succeeds.
    async fn increment(&self) -> Took {
        let deadline = || Deadline::after(Duration::from_secs(30));
        let mut took = Took::default();
        match self {
            Incrementer::Count(count) => loop {
                let seen = count.get().expect("a count");
                if count.try_set(seen.version, seen.value + 1, deadline()).await.expect("try_set") {
                    return took;
                }
                took.retries += 1;
            },
            Incrementer::Atomic(counter) => loop {
                let result = counter.increment(deadline()).await.expect("increment");
                took.promoted |= result.stats().promoted_tries > 0;
                if result.succeeded() {
                    return took;
                }
                took.retries += 1;
            },
            Incrementer::RawCount(raw) => Took { retries: raw.increment().await, promoted: false },
            Incrementer::RawAtomic(client, path) => {
                while !raw_atomic_try(client, path).await {
                    took.retries += 1;
                }
                took
            }
            Incrementer::RawPromoted(raw) => loop {
                let (succeeded, promoted) = raw.increment_once().await;
                took.promoted |= promoted;
                if succeeded {
                    return took;
                }
                took.retries += 1;
            },
        }
    }
}

/// Ours (or with `floor`, the floor): `clients` sessions, `per_client` increments each.
async fn measure(
    connect: &str,
    scenario: &str,
    path: &str,
    clients: usize,
    per_client: usize,
    floor: bool,
) -> Measured {
    let mut frameworks: Vec<Framework> = Vec::new();
    for _ in 0..clients {
        frameworks.push(support::start_framework(connect).await);
    }
    let mut incrementers = Vec::new();
    let lock_path = lock_path_of(path);
    for (contender, framework) in frameworks.iter().enumerate() {
        let deadline = Deadline::after(Duration::from_secs(30));
        incrementers.push(match (scenario, floor) {
            ("shared-count", false) => Incrementer::Count(
                SharedCount::start(framework, path, 0, deadline).await.expect("shared count"),
            ),
            ("shared-count", true) => Incrementer::RawCount(
                RawSharedCount::start(support::bare_client(framework).await, path).await,
            ),
            ("atomic-long", false) => Incrementer::Atomic(
                DistributedAtomicLong::new(framework, path, RetryNTimes::new(0, Duration::ZERO))
                    .expect("atomic long"),
            ),
            ("atomic-long", true) => {
                Incrementer::RawAtomic(support::bare_client(framework).await, path.to_owned())
            }
            (_, false) => Incrementer::Atomic(
                DistributedAtomicLong::new(framework, path, RetryNTimes::new(0, Duration::ZERO))
                    .and_then(|counter| {
                        counter.promoted_to_lock(
                            PromotedToLock::new(&lock_path)
                                .retry_policy(RetryNTimes::new(PROMOTED_RETRIES, PROMOTED_SLEEP)),
                        )
                    })
                    .expect("promoted atomic long"),
            ),
            (_, true) => Incrementer::RawPromoted(RawPromoted {
                client: support::bare_client(framework).await,
                path: path.to_owned(),
                lock_prefix: support::protected_prefix(&lock_path, contender, "lock-"),
                lock_dir: lock_path.clone(),
            }),
        });
    }
    let started = Instant::now();
    let tasks: Vec<_> = incrementers
        .into_iter()
        .map(|incrementer| {
            tokio::spawn(async move {
                let (mut retries, mut promoted) = (0, 0);
                for _ in 0..per_client {
                    let took = incrementer.increment().await;
                    retries += took.retries;
                    promoted += u64::from(took.promoted);
                }
                (retries, promoted)
            })
        })
        .collect();
    let (mut retries, mut promoted) = (0, 0);
    for task in tasks {
        let (task_retries, task_promoted) =
            tokio::time::timeout(STEP, task).await.expect("the run ends").expect("incrementer");
        retries += task_retries;
        promoted += task_promoted;
    }
    let elapsed = started.elapsed();
    for framework in frameworks {
        framework.close().await;
    }
    Measured { ops: (clients * per_client) as f64 / elapsed.as_secs_f64(), retries, promoted }
}

/// Curator's run (the driver's `count-increment`), timed from `go` to its `DONE`.
async fn curator(connect: &str, scenario: &str, path: &str, clients: usize, per_client: usize) -> Measured {
    let mut args = vec![
        "count-increment".to_owned(),
        connect.to_owned(),
        scenario.trim_end_matches("-promoted").to_owned(),
        path.to_owned(),
        per_client.to_string(),
        clients.to_string(),
    ];
    if scenario == "atomic-long-promoted" {
        args.push(lock_path_of(path));
    }
    let mut driver = support::spawn_curator(&args);
    driver.expect_line("READY", STEP).await.expect("READY");
    let started = Instant::now();
    driver.send_line("go").await.expect("go");
    let done = driver.expect_line("DONE", STEP).await.expect("DONE");
    let elapsed = started.elapsed();
    let status = driver.wait(Duration::from_secs(60)).await.expect("the Curator driver exits");
    assert!(status.success(), "the Curator driver failed: {status}\n{}", driver.log_tail(30));
    let field = |name: &str| support::field(&done, name).unwrap_or_else(|| panic!("no {name}= in {done:?}"));
    assert_eq!(field("increments") as usize, clients * per_client, "Curator's increments: {done}");
    Measured {
        ops: (clients * per_client) as f64 / elapsed.as_secs_f64(),
        retries: field("retries") as u64,
        promoted: field("promoted") as u64,
    }
}

#[tokio::main]
async fn main() {
    let args: Args = support::parse();
    let json = support::JsonLines::new("counters", &args.json);
    let (rounds, clients, per_client) =
        if args.harness.is_smoke_run() { (1, 4, 5) } else { (args.rounds, args.clients, args.per_client) };
    let (connect, _server) = support::server(None).await;
    let (checker, checker_client) = support::raw_client(&connect).await;
    // [scenario][side] -> one measurement per round.
    let mut results: Vec<[Vec<Measured>; 3]> = SCENARIOS.iter().map(|_| [vec![], vec![], vec![]]).collect();
    for round in 0..rounds {
        eprintln!("round {} of {rounds}", round + 1);
        for (index, (scenario, zero_bytes)) in SCENARIOS.iter().enumerate() {
            for turn in 0..SIDES.len() {
                let side = (turn + round) % SIDES.len();
                let path = format!("/bench/counters/{scenario}-{}-{round}", SIDES[side]);
                create_counter(&checker_client, &path, *zero_bytes).await;
                if *scenario == "atomic-long-promoted" {
                    support::ensure_dir(&checker_client, &lock_path_of(&path)).await;
                }
                let measured = match SIDES[side] {
                    "curator" => curator(&connect, scenario, &path, clients, per_client).await,
                    name => measure(&connect, scenario, &path, clients, per_client, name == "floor").await,
                };
                let value = read_counter(&checker_client, scenario, &path).await;
                assert_eq!(
                    value,
                    (clients * per_client) as i64,
                    "{scenario}, {}: the counter's value",
                    SIDES[side]
                );
                results[index][side].push(measured);
            }
        }
    }
    checker.close().await;

    println!(
        "\n{clients} sessions incrementing one counter, {per_client} increments each, medians of {rounds} \
         interleaved rounds (ratios: of the medians [median of the per-round ratios]):"
    );
    println!(
        "{:<20} {:>12} {:>12} {:>14} {:>14} {:>16}   retries (ours; floor; Curator) [promoted]",
        "counter", "ours inc/s", "floor inc/s", "Curator inc/s", "ours / floor", "ours / Curator",
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
    let retries = |runs: &[Measured]| runs.iter().map(|m| m.retries).sum::<u64>();
    let promoted = |runs: &[Measured]| runs.iter().map(|m| m.promoted).sum::<u64>();
    for (index, (scenario, _)) in SCENARIOS.iter().enumerate() {
        let [ours, floor, theirs] = &results[index];
        let promoted_note = if *scenario == "atomic-long-promoted" {
            format!(" [{}; {}; {}]", promoted(ours), promoted(floor), promoted(theirs))
        } else {
            String::new()
        };
        println!(
            "{:<20} {:>12.0} {:>12.0} {:>14.0} {:>14} {:>16}   {}; {}; {}{promoted_note}",
            scenario,
            support::median(&ops(ours)),
            support::median(&ops(floor)),
            support::median(&ops(theirs)),
            ratios(ours, floor),
            ratios(ours, theirs),
            retries(ours),
            retries(floor),
            retries(theirs),
        );
        for (side, runs) in SIDES.iter().zip(&results[index]) {
            json.emit_series(
                scenario,
                side,
                "increments/s",
                &ops(runs),
                serde_json::json!({
                    "param": "clients",
                    "value": clients,
                    "increments": clients * per_client,
                    "retries": retries(runs),
                    "promoted": promoted(runs),
                }),
            );
        }
        println!(
            "{:<20} rounds: ours {:.0?}, floor {:.0?}, Curator {:.0?}",
            "",
            ops(ours),
            ops(floor),
            ops(theirs)
        );
    }
}
