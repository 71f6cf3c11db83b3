//! Counter interop with Apache Curator 5.4 (real JVMs on the same server):
//!
//! - golden nodes both ways: Curator writes a `SharedCount`, a `SharedValue`, a
//!   `DistributedAtomicLong` and a `DistributedAtomicValue`; Rust reads the exact bytes (and the
//!   values through its own types); Rust does the same operations and Curator reads them back;
//! - 3 Curator clients and 3 Rust clients incrementing one `SharedCount` (versioned sets) and one
//!   `DistributedAtomicLong` (no optimistic retry, promoted to the mutex in both languages) at
//!   once, 500 each: the final value is exactly the sum, and both languages took the lock;
//! - `PromotedToLock` across languages: while Curator holds the mutex at the lock path, promoted
//!   Rust increments wait at most the max lock time and report not succeeded; once it is released
//!   they take the lock. And the reverse: a lock held by Rust keeps promoted Curator increments
//!   out, then Curator takes it.
//!
//! Needs Java, `javac` and Debian's `libcurator-recipes-java` (`scripts/install-deps.sh`).

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::future::Future;
use std::time::{Duration, Instant};

use common::{children, curator, expect_success, read, within, within_for, Env, STEP};
use zk_recipes::counter::{
    encode_count, encode_int, encode_long, AtomicValue, DistributedAtomicInteger, DistributedAtomicLong,
    DistributedAtomicValue, PromotedToLock, SharedCount, SharedValue, VersionedValue,
};
use zk_recipes::framework::retry::{NoRetry, RetryNTimes};
use zk_recipes::framework::{Deadline, Framework};
use zk_recipes::mutex::Hold;

/// Increments per client, and clients per language.
const PER_CLIENT: usize = 500;
const CLIENTS: usize = 3;

fn step() -> Deadline {
    Deadline::after(STEP)
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|byte| format!("{byte:02x}")).collect()
}

/// The value of a driver line `<prefix> <name> <value...>`, by name.
fn field<'a>(lines: &'a [String], prefix: &str, name: &str) -> &'a str {
    let start = format!("{prefix} {name} ");
    lines
        .iter()
        .find_map(|line| line.strip_prefix(&start))
        .unwrap_or_else(|| panic!("no {start:?} line in {lines:?}"))
}

/// The bytes of `node`.
async fn bytes(framework: &Framework, node: &str) -> Vec<u8> {
    read(framework, node).await.unwrap_or_else(|| panic!("{node} is missing")).0
}

/// Does what `counter-golden-write` does, in Rust, under `base`.
async fn rust_golden_write(framework: &Framework, base: &str) {
    let count =
        SharedCount::start(framework, &format!("{base}/shared-count"), 7, step()).await.expect("count");
    count.set(-2, step()).await.expect("set");
    let value =
        SharedValue::start(framework, &format!("{base}/shared-value"), b"seed", step()).await.expect("value");
    value.set(b"curator", step()).await.expect("set");
    let retry = RetryNTimes::new(3, Duration::from_millis(10));
    let long =
        DistributedAtomicLong::new(framework, &format!("{base}/atomic-long"), retry.clone()).expect("long");
    assert!(long.initialize(0x0102_0304_0506_0708, step()).await.expect("initialize"));
    assert!(long.increment(step()).await.expect("increment").succeeded());
    let atomic =
        DistributedAtomicValue::new(framework, &format!("{base}/atomic-value"), retry).expect("value");
    assert!(atomic.try_set(b"bytes", step()).await.expect("try_set").succeeded());
    let int = DistributedAtomicInteger::new(
        framework,
        &format!("{base}/atomic-int"),
        RetryNTimes::new(3, Duration::from_millis(10)),
    )
    .expect("int");
    assert!(int.initialize(0x0102_0304, step()).await.expect("initialize"));
    assert!(int.increment(step()).await.expect("increment").succeeded());
}

#[tokio::test]
async fn golden_counter_nodes_match_curator_both_ways() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let expected = [
        ("shared-count", encode_count(-2).to_vec()),
        ("shared-value", b"curator".to_vec()),
        ("atomic-long", encode_long(0x0102_0304_0506_0709).to_vec()),
        ("atomic-value", b"bytes".to_vec()),
        ("atomic-int", encode_int(0x0102_0305).to_vec()),
    ];

    // Java writes, Rust reads the exact bytes and the values.
    let mut driver = curator(["counter-golden-write", &env.connect(), "/golden-java"]);
    let (lines, _) = within("golden write", driver.lines_until("DONE", STEP)).await.expect("DONE");
    expect_success(driver).await;
    for (name, data) in &expected {
        assert_eq!(field(&lines, "NODE", name), hex(data), "{name}: Curator wrote Curator's encoding");
        assert_eq!(&bytes(&framework, &format!("/golden-java/{name}")).await, data, "{name}");
    }
    let count = within("count", SharedCount::start(&framework, "/golden-java/shared-count", 0, step()))
        .await
        .expect("count");
    assert_eq!(count.get().expect("count"), VersionedValue { version: 1, value: -2 });
    let value = within("value", SharedValue::start(&framework, "/golden-java/shared-value", b"", step()))
        .await
        .expect("value");
    assert_eq!(value.get(), VersionedValue { version: 1, value: b"curator".to_vec() });
    let long = DistributedAtomicLong::new(&framework, "/golden-java/atomic-long", NoRetry).expect("long");
    assert_eq!(*within("get", long.get(step())).await.expect("get").pre_value(), 0x0102_0304_0506_0709);
    let atomic =
        DistributedAtomicValue::new(&framework, "/golden-java/atomic-value", NoRetry).expect("value");
    assert_eq!(
        within("get", atomic.get(step())).await.expect("get").pre_value().as_deref(),
        Some(&b"bytes"[..])
    );
    let int = DistributedAtomicInteger::new(&framework, "/golden-java/atomic-int", NoRetry).expect("int");
    assert_eq!(*within("get", int.get(step())).await.expect("get").pre_value(), 0x0102_0305);

    // Rust writes the same way, byte for byte; Java reads it.
    within("rust golden write", rust_golden_write(&framework, "/golden-rust")).await;
    for (name, data) in &expected {
        assert_eq!(&bytes(&framework, &format!("/golden-rust/{name}")).await, data, "{name}");
    }
    let mut driver = curator(["counter-golden-read", &env.connect(), "/golden-rust"]);
    let (lines, _) = within("golden read", driver.lines_until("DONE", STEP)).await.expect("DONE");
    expect_success(driver).await;
    assert_eq!(field(&lines, "READ", "shared-count"), "-2 1");
    assert_eq!(field(&lines, "READ", "shared-value"), format!("{} 1", hex(b"curator")));
    assert_eq!(field(&lines, "READ", "atomic-long"), 0x0102_0304_0506_0709_i64.to_string());
    assert_eq!(field(&lines, "READ", "atomic-value"), hex(b"bytes"));
    assert_eq!(field(&lines, "READ", "atomic-int"), 0x0102_0305_i32.to_string());
    within("close", framework.close()).await;
}

/// `DONE increments=N retries=R promoted=P` as (N, P).
fn parse_done(line: &str) -> (usize, usize) {
    let value = |key: &str| -> usize {
        line.split_whitespace()
            .find_map(|part| part.strip_prefix(key))
            .and_then(|value| value.parse().ok())
            .unwrap_or_else(|| panic!("no {key} in {line:?}"))
    };
    (value("increments="), value("promoted="))
}

/// Runs `CLIENTS` Curator clients (the driver's `count-increment` with `driver_args`) and
/// `CLIENTS` Rust clients (`rust_client`, each on its own session) at once, from one "go"; returns
/// the Rust clients' results and the driver's `DONE` line.
async fn increment_from_both<F, Fut>(env: &Env, driver_args: &[&str], rust_client: F) -> (Vec<usize>, String)
where
    F: Fn(Framework) -> Fut,
    Fut: Future<Output = usize> + Send + 'static,
{
    let connect = env.connect();
    let (per_client, clients) = (PER_CLIENT.to_string(), CLIENTS.to_string());
    let mut args = vec!["count-increment", connect.as_str()];
    args.extend_from_slice(&driver_args[..2]);
    args.extend([per_client.as_str(), clients.as_str()]);
    args.extend_from_slice(&driver_args[2..]);
    let mut driver = curator(args);
    within("READY", driver.expect_line("READY", STEP)).await.expect("READY");
    let mut rust = Vec::new();
    for _ in 0..CLIENTS {
        rust.push(tokio::spawn(rust_client(env.framework().await)));
    }
    driver.send_line("go").await.expect("go");
    let mut results = Vec::new();
    for client in rust {
        results.push(within_for("rust increments", STEP * 10, client).await.expect("rust client"));
    }
    let done = within_for("java DONE", STEP * 10, driver.expect_line("DONE", STEP * 10)).await.expect("DONE");
    expect_success(driver).await;
    (results, done)
}

/// Rust's half of a shared-count run: `CLIENTS` sessions, `PER_CLIENT` versioned increments each.
async fn rust_shared_count_client(framework: Framework, path: String) -> usize {
    let count = SharedCount::start(&framework, &path, 0, step()).await.expect("count");
    let mut retries = 0;
    for _ in 0..PER_CLIENT {
        loop {
            let seen = count.get().expect("a count");
            if count.try_set(seen.version, seen.value + 1, step()).await.expect("try_set") {
                break;
            }
            retries += 1;
        }
    }
    framework.close().await;
    retries
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_count_increments_from_rust_and_curator_sum_exactly() {
    let env = Env::start().await;
    let observer = env.framework().await;
    let path = "/interop-count/shared";
    let started = Instant::now();
    let (rust_retries, done) = increment_from_both(&env, &["shared-count", path], |framework| {
        rust_shared_count_client(framework, path.to_owned())
    })
    .await;
    let rust_retries: usize = rust_retries.iter().sum();
    let (java_increments, _) = parse_done(&done);
    assert_eq!(java_increments, PER_CLIENT * CLIENTS);
    let total = (2 * CLIENTS * PER_CLIENT) as i32;
    assert_eq!(bytes(&observer, path).await, encode_count(total).to_vec(), "exactly the sum");
    eprintln!(
        "shared count: {total} increments (3 Rust + 3 Java x {PER_CLIENT}) in {:?}; Rust retries {rust_retries}; Java: {done}",
        started.elapsed()
    );
    within("close", observer.close()).await;
}

/// Rust's half of an atomic-long run: increments until each succeeds; returns how many were
/// promoted.
async fn rust_atomic_long_client(framework: Framework, path: String, lock_path: String) -> usize {
    let counter = DistributedAtomicLong::new(&framework, &path, NoRetry)
        .expect("counter")
        .promoted_to_lock(
            PromotedToLock::new(&lock_path).retry_policy(RetryNTimes::new(1_000, Duration::from_millis(2))),
        )
        .expect("promoted");
    let mut promoted = 0;
    for _ in 0..PER_CLIENT {
        loop {
            let result: AtomicValue<i64> = counter.increment(step()).await.expect("increment");
            promoted += usize::from(result.stats().promoted_tries > 0);
            if result.succeeded() {
                assert_eq!(*result.post_value(), *result.pre_value() + 1);
                break;
            }
        }
    }
    framework.close().await;
    promoted
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn atomic_long_increments_from_rust_and_curator_with_promotion_sum_exactly() {
    let env = Env::start().await;
    let observer = env.framework().await;
    let (path, lock_path) = ("/interop-count/atomic", "/interop-count/atomic-lock");
    let started = Instant::now();
    let (rust_promoted, done) = increment_from_both(&env, &["atomic-long", path, lock_path], |framework| {
        rust_atomic_long_client(framework, path.to_owned(), lock_path.to_owned())
    })
    .await;
    let rust_promoted: usize = rust_promoted.iter().sum();
    let (java_increments, java_promoted) = parse_done(&done);
    assert_eq!(java_increments, PER_CLIENT * CLIENTS);
    let total = (2 * CLIENTS * PER_CLIENT) as i64;
    assert_eq!(bytes(&observer, path).await, encode_long(total).to_vec(), "exactly the sum");
    assert!(
        rust_promoted > 0 && java_promoted > 0,
        "both languages took the lock: Rust {rust_promoted}, Java {java_promoted}"
    );
    assert!(children(&observer, lock_path).await.is_empty(), "no lock node left behind");
    eprintln!(
        "atomic long: {total} increments (3 Rust + 3 Java x {PER_CLIENT}) in {:?}; promoted: Rust {rust_promoted}, Java: {done}",
        started.elapsed()
    );
    within("close", observer.close()).await;
}

/// Six tasks of one counter incrementing `rounds` times each; every outcome.
async fn contend(counter: &DistributedAtomicLong, rounds: usize) -> Vec<AtomicValue<i64>> {
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for _ in 0..rounds {
                outcomes.push(counter.increment(step()).await.expect("increment"));
            }
            outcomes
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.extend(within_for("increments", STEP * 3, task).await.expect("task"));
    }
    outcomes
}

#[tokio::test]
async fn a_lock_held_by_curator_keeps_promoted_rust_increments_out() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let (path, lock_path) = ("/interop-promoted/n", "/interop-promoted/lock");
    let mut holder = curator(["hold", "mutex", &env.connect(), lock_path]);
    let node = within("NODE", holder.expect_line("NODE ", STEP)).await.expect("NODE");
    within("HELD", holder.expect_line("HELD", STEP)).await.expect("HELD");
    let counter = DistributedAtomicLong::new(&framework, path, NoRetry)
        .expect("counter")
        .promoted_to_lock(PromotedToLock::new(lock_path).max_lock_time(Duration::from_millis(300)))
        .expect("promoted");

    let outcomes = contend(&counter, 10).await;
    let kept_out: Vec<_> = outcomes.iter().filter(|outcome| !outcome.succeeded()).collect();
    assert!(!kept_out.is_empty(), "some optimistic tries lost and were promoted");
    for outcome in &kept_out {
        assert_eq!(outcome.stats().promoted_tries, 0, "never held the lock Curator holds: {outcome:?}");
        assert!(outcome.stats().promoted_time >= Duration::from_millis(300), "{outcome:?}");
    }
    let succeeded = outcomes.iter().filter(|outcome| outcome.succeeded()).count() as i64;
    assert_eq!(*within("get", counter.get(step())).await.expect("get").pre_value(), succeeded);
    let lock_nodes = children(&framework, lock_path).await;
    assert_eq!(lock_nodes.len(), 1, "only Curator's node is left: {lock_nodes:?} ({node})");

    holder.send_line("release").await.expect("release");
    within("RELEASED", holder.expect_line("RELEASED", STEP)).await.expect("RELEASED");
    holder.close_stdin();
    let outcomes = contend(&counter, 10).await;
    assert!(
        outcomes.iter().any(|outcome| outcome.succeeded() && outcome.stats().promoted_tries > 0),
        "with Curator gone, promoted increments take the lock"
    );
    within("close", framework.close()).await;
}

/// The value of `key=` in a driver line.
fn number(line: &str, key: &str) -> i64 {
    line.split_whitespace()
        .find_map(|part| part.strip_prefix(key))
        .and_then(|value| value.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line:?}"))
}

#[tokio::test]
async fn a_lock_held_by_rust_keeps_promoted_curator_increments_out() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let (path, lock_path) = ("/interop-promoted-java/n", "/interop-promoted-java/lock");
    let mutex = zk_recipes::mutex::Mutex::new(&framework, lock_path).expect("mutex");
    let guard = within("lock", mutex.lock_until(step())).await.expect("lock");

    let mut driver = curator(["promoted-try", &env.connect(), path, lock_path, "300", "6", "10"]);
    within("READY", driver.expect_line("READY", STEP)).await.expect("READY");
    driver.send_line("go").await.expect("go");
    let done = within_for("DONE", STEP * 3, driver.expect_line("DONE", STEP * 3)).await.expect("DONE");
    expect_success(driver).await;
    let (succeeded, failed) = (number(&done, "succeeded="), number(&done, "failed="));
    assert!(failed > 0, "some optimistic tries lost and were promoted: {done}");
    assert_eq!(number(&done, "promoted="), 0, "Curator never held the lock Rust holds: {done}");
    assert!(number(&done, "min-failed-promoted-ms=") >= 300, "each waited the max lock time: {done}");
    let counter = DistributedAtomicLong::new(&framework, path, NoRetry).expect("counter");
    assert_eq!(*within("get", counter.get(step())).await.expect("get").pre_value(), succeeded);
    assert_eq!(
        children(&framework, lock_path).await,
        vec![guard.node_path().rsplit('/').next().expect("name").to_owned()]
    );

    within("release", guard.release()).await.expect("release");
    let mut driver = curator(["promoted-try", &env.connect(), path, lock_path, "5000", "6", "10"]);
    within("READY", driver.expect_line("READY", STEP)).await.expect("READY");
    driver.send_line("go").await.expect("go");
    let done = within_for("DONE", STEP * 3, driver.expect_line("DONE", STEP * 3)).await.expect("DONE");
    expect_success(driver).await;
    assert!(number(&done, "promoted=") > 0, "with the Rust lock released, Curator takes it: {done}");
    within("close", framework.close()).await;
}
