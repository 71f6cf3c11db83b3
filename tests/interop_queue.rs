//! Queue interop with Apache Curator 5.4 (real JVMs on the same server):
//!
//! - golden nodes: every kind of queue node Curator writes (`DistributedQueue`, priority, delay,
//!   id, `SimpleDistributedQueue`, a lock-safe consumer's lock node), read live and compared byte
//!   for byte with ours, and the queue and lock paths (PERSISTENT, this host's address) and the
//!   simple queue's directory (a container);
//! - Rust producers → Curator consumers and Curator producers → Rust consumers, at most once and
//!   lock-safe (Curator's `QueueBuilder.lockPath`), and both languages consuming one lock-safe
//!   queue at once: every item delivered exactly once, nothing left behind;
//! - priority order across languages, delay items not delivered early across languages, the
//!   simple queue's FIFO both ways, and removal by id both ways.
//!
//! Needs Java, `javac` and Debian's `libcurator-recipes-java` (`scripts/install-deps.sh`).

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use common::{
    acl, assert_gone, children, curator, eventually_true, expect_success, parse_session, read, session,
    within, Env, STEP,
};
use zk_recipes::framework::{local_address, path, zookeeper_client, Deadline, Framework};
use zk_recipes::queue::framing::frame;
use zk_recipes::queue::{names, Consumer, DistributedQueue, QueueBuilder, SimpleQueue, Utf8Serializer};
use zk_recipes_testing::{CuratorProcess, FaultProxy, RequestMatch, TestingError};

/// How long consumers keep running after the last expected item, to catch extra deliveries.
const LINGER: Duration = Duration::from_millis(300);

/// Milliseconds since the epoch (the clock the Java side prints in `ITEM` lines).
fn epoch_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970").as_millis() as i64
}

fn builder(framework: &Framework, queue_path: &str, lock_path: Option<&str>) -> QueueBuilder<String> {
    let builder = DistributedQueue::builder(framework, queue_path).serializer(Utf8Serializer);
    match lock_path {
        Some(lock_path) => builder.lock_path(lock_path),
        None => builder,
    }
}

/// The children of `dir`, sorted.
async fn sorted_children(framework: &Framework, dir: &str) -> Vec<String> {
    let mut names = children(framework, dir).await;
    names.sort();
    names
}

/// Asserts `got` holds every item of `expected` exactly once (and nothing else).
fn assert_exactly_once(label: &str, expected: &BTreeSet<String>, got: &[String]) {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for item in got {
        *counts.entry(item).or_default() += 1;
    }
    let duplicates: Vec<_> = counts.iter().filter(|(_, count)| **count > 1).collect();
    let unexpected: Vec<_> = counts.keys().filter(|item| !expected.contains(**item)).collect();
    let missing: Vec<_> = expected.iter().filter(|item| !counts.contains_key(item.as_str())).collect();
    assert!(
        duplicates.is_empty() && unexpected.is_empty() && missing.is_empty(),
        "{label}: {} items delivered for {} expected; duplicates {duplicates:?}, unexpected {unexpected:?}, \
         missing {missing:?}",
        got.len(),
        expected.len()
    );
    assert_eq!(got.len(), expected.len(), "{label}: delivered count");
}

/// Asserts no item and no lock node is left.
async fn assert_drained(framework: &Framework, queue_path: &str, lock_path: Option<&str>) {
    let items: Vec<String> = children(framework, queue_path)
        .await
        .into_iter()
        .filter(|child| child.starts_with(names::ITEM_PREFIX) || child.starts_with(names::SIMPLE_PREFIX))
        .collect();
    assert!(items.is_empty(), "{queue_path}: items left behind: {items:?}");
    if let Some(lock_path) = lock_path {
        let locks = children(framework, lock_path).await;
        assert!(locks.is_empty(), "{lock_path}: lock nodes left behind: {locks:?}");
    }
}

/// One `ITEM <consumer> <epoch-ms> <item>` line of the driver.
fn parse_item(line: &str) -> Option<(i64, String)> {
    let mut fields = line.strip_prefix("ITEM ")?.splitn(3, ' ');
    let _consumer = fields.next()?;
    let at = fields.next()?.parse().ok()?;
    Some((at, fields.next()?.to_owned()))
}

/// Reads a `queue-consume` driver to its `DONE items=N`: the items it consumed, in order, with the
/// epoch ms of each.
async fn java_items(driver: &mut CuratorProcess) -> Vec<(i64, String)> {
    let (items, reported) = java_items_until_done(driver).await;
    assert_eq!(reported, items.len(), "Curator's count vs its ITEM lines");
    items
}

/// As [`java_items`], without the check: the items printed from now on and the `DONE` count.
async fn java_items_until_done(driver: &mut CuratorProcess) -> (Vec<(i64, String)>, usize) {
    let (lines, done) = within("DONE", driver.lines_until("DONE ", STEP)).await.expect("Curator consumed");
    let items = lines.iter().filter_map(|line| parse_item(line)).collect();
    (items, done.trim_start_matches("DONE items=").parse().expect("DONE items=N"))
}

/// Starts `queue-consume` and returns once the driver runs.
fn java_consumer(
    env: &Env,
    kind: &str,
    queue_path: &str,
    lock_path: Option<&str>,
    expected: usize,
) -> CuratorProcess {
    let linger = LINGER.as_millis().to_string();
    curator([
        "queue-consume",
        &env.connect(),
        kind,
        queue_path,
        lock_path.unwrap_or("-"),
        &expected.to_string(),
        "2",
        "print",
        &linger,
    ])
}

/// Items received by Rust consumers: (epoch ms, item).
type Received = Arc<StdMutex<Vec<(i64, String)>>>;

/// Rust consumers, each on its own framework, recording what they get until stopped.
struct RustConsumers {
    frameworks: Vec<Framework>,
    tasks: Vec<tokio::task::JoinHandle<()>>,
    received: Received,
}

impl RustConsumers {
    /// `count` consumers made by `make` (from a fresh framework each).
    async fn start(env: &Env, count: usize, make: impl Fn(&Framework) -> Consumer<String>) -> RustConsumers {
        Self::start_with(env, count, Duration::ZERO, make).await
    }

    /// One consumer whose handler takes `pace` per item.
    async fn start_paced(
        env: &Env,
        pace: Duration,
        make: impl Fn(&Framework) -> Consumer<String>,
    ) -> RustConsumers {
        Self::start_with(env, 1, pace, make).await
    }

    async fn start_with(
        env: &Env,
        count: usize,
        pace: Duration,
        make: impl Fn(&Framework) -> Consumer<String>,
    ) -> RustConsumers {
        let received: Received = Arc::default();
        let mut frameworks = Vec::new();
        let mut tasks = Vec::new();
        for _ in 0..count {
            let framework = env.framework().await;
            let consumer = make(&framework);
            let received = received.clone();
            tasks.push(tokio::spawn(async move {
                let run = consumer.run(move |item: String| {
                    received.lock().expect("received").push((epoch_ms(), item));
                    async move {
                        if !pace.is_zero() {
                            tokio::time::sleep(pace).await;
                        }
                        Ok::<(), std::convert::Infallible>(())
                    }
                });
                run.await.expect("consumer run");
            }));
            frameworks.push(framework);
        }
        RustConsumers { frameworks, tasks, received }
    }

    fn count(&self) -> usize {
        self.received.lock().expect("received").len()
    }

    /// Waits until `expected` items arrived, lingers, stops: every item received.
    async fn finish(self, expected: usize) -> Vec<String> {
        within("Rust consumers", async {
            while self.count() < expected {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
        self.stop().await
    }

    async fn stop(self) -> Vec<String> {
        tokio::time::sleep(LINGER).await;
        for framework in &self.frameworks {
            within("close", framework.close()).await;
        }
        for task in self.tasks {
            within("consumer task", task).await.expect("consumer task");
        }
        let received = self.received.lock().expect("received");
        received.iter().map(|(_, item)| item.clone()).collect()
    }
}

/// A node expected under a golden directory: its name and data.
type GoldenNode = (&'static str, Vec<u8>);

/// Curator's nodes of every kind compared with ours, byte for byte (the names and the data are
/// deterministic under fresh directories); the queue and lock paths PERSISTENT with this host's
/// address, the simple queue's directory and every parent a container.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_queue_nodes_match_curator() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-queue-golden";
    let java_base = format!("{root}/java");
    let rust_base = format!("{root}/rust");

    let mut driver = curator(["queue-golden", &env.connect(), &java_base]);
    let (lines, _) = within("golden HELD", driver.lines_until("HELD ", STEP)).await.expect("golden nodes");
    let java_session =
        lines.iter().find_map(|line| line.strip_prefix("SESSION ")).map(parse_session).expect("SESSION");
    let java_lock = lines
        .iter()
        .find_map(|line| line.strip_prefix("NODE lock "))
        .unwrap_or_else(|| panic!("no NODE lock in {lines:?}"))
        .to_owned();

    // Ours, in the same order.
    let at = |base: &str, name: &str| format!("{base}/{name}");
    let queue = builder(&framework, &at(&rust_base, "queue"), Some(&at(&rust_base, "queue-locks")))
        .build()
        .expect("queue");
    within("put", queue.put(&"one".to_owned())).await.expect("put");
    within("put_many", queue.put_many(&["two".to_owned(), "three".to_owned()])).await.expect("put_many");
    let priority = builder(&framework, &at(&rust_base, "priority"), None).build_priority().expect("priority");
    for (item, value) in [("p5", 5), ("m3", -3), ("max", i32::MAX), ("min", i32::MIN), ("zero", 0)] {
        within("put", priority.put(&item.to_owned(), value)).await.expect("put");
    }
    let delay = builder(&framework, &at(&rust_base, "delay"), None).build_delay().expect("delay");
    for (item, due_ms) in [("d1", 0x18F_0000_0000_u64), ("d2", 1)] {
        let due = UNIX_EPOCH + Duration::from_millis(due_ms);
        within("put", delay.put(&item.to_owned(), due)).await.expect("put");
    }
    let id_queue = builder(&framework, &at(&rust_base, "id"), None).build_id().expect("id queue");
    for (item, id) in [("i1", "job-1"), ("i2", "a/b|c")] {
        within("put", id_queue.put(&item.to_owned(), id)).await.expect("put");
    }
    let simple = SimpleQueue::new(&framework, &at(&rust_base, "simple")).expect("simple queue");
    within("offer", simple.offer(b"s1")).await.expect("offer");
    within("offer", simple.offer(&[0, 1, 2, 0xff])).await.expect("offer");
    let locked = builder(&framework, &at(&rust_base, "locked"), Some(&at(&rust_base, "locked-locks")))
        .build()
        .expect("locked queue");
    within("put", locked.put(&"held".to_owned())).await.expect("put");
    let mut consumer = locked.consumer().prefetch(1);
    let delivery = within("take", consumer.next()).await.expect("open").expect("delivery");
    assert_eq!(delivery.items(), ["held"]);
    let rust_lock = delivery.lock_node().expect("lock-safe").to_owned();
    let rust_session = session(&framework).await.id().0;

    // The expected table (../shared/CURATOR-PROTOCOL.md), checked against Curator's nodes first.
    let framed = |items: &[&str]| frame(items.iter().map(|item| item.as_bytes()));
    let golden: Vec<(&str, Vec<GoldenNode>)> = vec![
        (
            "queue",
            vec![("queue-0000000000", framed(&["one"])), ("queue-0000000001", framed(&["two", "three"]))],
        ),
        ("queue-locks", vec![]),
        (
            "priority",
            vec![
                ("queue-0800000000000000003", framed(&["min"])),
                ("queue-0FFFFFFFD0000000001", framed(&["m3"])),
                ("queue-1000000000000000004", framed(&["zero"])),
                ("queue-1000000050000000000", framed(&["p5"])),
                ("queue-17FFFFFFF0000000002", framed(&["max"])),
            ],
        ),
        (
            "delay",
            vec![
                ("queue-|00000001|0000000001", framed(&["d2"])),
                ("queue-|18F00000000|0000000000", framed(&["d1"])),
            ],
        ),
        (
            "id",
            vec![("queue-|a_b_c|0000000001", framed(&["i2"])), ("queue-|job-1|0000000000", framed(&["i1"]))],
        ),
        ("simple", vec![("qn-0000000000", b"s1".to_vec()), ("qn-0000000001", vec![0, 1, 2, 0xff])]),
        ("locked", vec![("queue-0000000000", framed(&["held"]))]),
        ("locked-locks", vec![("queue-0000000000", local_address())]),
    ];
    // Our names module agrees with the table.
    assert_eq!(format!("{}0000000000", names::priority_name(5)), "queue-1000000050000000000");
    assert_eq!(format!("{}0000000003", names::priority_name(i32::MIN)), "queue-0800000000000000003");
    assert_eq!(format!("{}0000000001", names::delay_name(1)), "queue-|00000001|0000000001");
    assert_eq!(format!("{}0000000001", names::id_name("a/b|c")), "queue-|a_b_c|0000000001");

    let local = local_address();
    for (dir, expected) in &golden {
        let java_dir = at(&java_base, dir);
        let rust_dir = at(&rust_base, dir);
        let java_names = sorted_children(&framework, &java_dir).await;
        let expected_names: Vec<&str> = expected.iter().map(|(name, _)| *name).collect();
        assert_eq!(java_names, expected_names, "Curator's nodes under {dir}");
        assert_eq!(sorted_children(&framework, &rust_dir).await, java_names, "our nodes under {dir}");
        for (name, expected_data) in expected {
            let java_node = path::join(&java_dir, name);
            let rust_node = path::join(&rust_dir, name);
            let (java_data, java_stat) = read(&framework, &java_node).await.expect("Curator's node");
            let (rust_data, rust_stat) = read(&framework, &rust_node).await.expect("our node");
            assert_eq!(&java_data, expected_data, "Curator's data of {java_node}");
            assert_eq!(rust_data, java_data, "data of {rust_node} vs {java_node}");
            let lock_node = *dir == "locked-locks";
            let (java_owner, rust_owner) = if lock_node { (java_session, rust_session) } else { (0, 0) };
            assert_eq!(java_stat.ephemeral_owner, java_owner, "{java_node}: EPHEMERAL iff a lock node");
            assert_eq!(rust_stat.ephemeral_owner, rust_owner, "{rust_node}: EPHEMERAL iff a lock node");
            assert_eq!(
                acl(&framework, &rust_node).await,
                acl(&framework, &java_node).await,
                "ACL of {rust_node}"
            );
        }
        // The directories: the distributed family's queue and lock paths hold this host's address;
        // the simple queue's directory (a container) is empty.
        let (java_data, java_stat) = read(&framework, &java_dir).await.expect("Curator's directory");
        let (rust_data, rust_stat) = read(&framework, &rust_dir).await.expect("our directory");
        let expected_data: &[u8] = if *dir == "simple" { b"" } else { &local };
        assert_eq!(java_data, expected_data, "Curator's data of {java_dir}");
        assert_eq!(rust_data, java_data, "data of {rust_dir}");
        assert_eq!((java_stat.ephemeral_owner, rust_stat.ephemeral_owner), (0, 0), "{dir} is not ephemeral");
        assert_eq!(acl(&framework, &rust_dir).await, acl(&framework, &java_dir).await, "ACL of {rust_dir}");
    }
    assert_eq!(java_lock, at(&java_base, "locked-locks/queue-0000000000"), "Curator's lock node");
    assert_eq!(rust_lock, at(&rust_base, "locked-locks/queue-0000000000"), "our lock node");

    // Both consumers finish: item and lock node go.
    within("send release", driver.send_line("release")).await.expect("release");
    within("RELEASED", driver.expect_line("RELEASED", STEP)).await.expect("released");
    expect_success(driver).await;
    within("ack", delivery.ack()).await.expect("ack");
    drop(consumer);
    for base in [&java_base, &rust_base] {
        assert_drained(&framework, &at(base, "locked"), Some(&at(base, "locked-locks"))).await;
    }

    // Empty every directory. After a few container checks (every 500 ms) the simple queue's
    // directory is gone on both sides (a container) and the distributed family's paths are not
    // (PERSISTENT), including `locked-locks`, which had a child.
    let admin = session(&framework).await;
    for base in [&java_base, &rust_base] {
        for (dir, expected) in &golden {
            for (name, _) in expected {
                let node = path::join(&at(base, dir), name);
                match within("delete", admin.client().delete(&node, None)).await {
                    Ok(()) | Err(zk_recipes::framework::zookeeper_client::Error::NoNode) => {}
                    Err(err) => panic!("delete {node}: {err}"),
                }
            }
        }
    }
    // Two container passes after the deletes (see `after_two_container_passes`): any empty
    // container that had a child is reaped by now, and only those.
    after_two_container_passes(&framework, &at(root, "container-probe")).await;
    for base in [&java_base, &rust_base] {
        assert!(
            read(&framework, &at(base, "simple")).await.is_none(),
            "{base}/simple is a container: reaped"
        );
        for (dir, _) in golden.iter().filter(|(dir, _)| *dir != "simple") {
            assert!(
                read(&framework, &at(base, dir)).await.is_some(),
                "{base}/{dir} is PERSISTENT: not reaped"
            );
        }
    }
    // Deleting them leaves the bases empty: the server reaps them (containers on both sides).
    for base in [&java_base, &rust_base] {
        for (dir, _) in golden.iter().filter(|(dir, _)| *dir != "simple") {
            within("delete", admin.client().delete(&at(base, dir), None)).await.expect("delete");
        }
    }
    drop(admin);
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// Returns once the server's container manager has run two passes that began after this call,
/// waited on as events, not on the clock: each pass is shown by a fresh probe container (created
/// at `probe`, given a child, emptied) being reaped. The first pass began after the probe was
/// emptied, so after every delete made before this call, and submitted the deletes of every empty
/// container then; its deletes are all committed before the second pass's (one request
/// pipeline), so once the second probe is gone, every container empty before this call is too.
async fn after_two_container_passes(framework: &Framework, probe: &str) {
    let admin = session(framework).await;
    for pass in ["first", "second"] {
        let container = admin.create_options(zookeeper_client::CreateMode::Container);
        within("create the probe", admin.client().create(probe, b"", &container)).await.expect("probe");
        let child = path::join(probe, "child");
        let persistent = admin.create_options(zookeeper_client::CreateMode::Persistent);
        within("create its child", admin.client().create(&child, b"", &persistent)).await.expect("child");
        within("delete its child", admin.client().delete(&child, None)).await.expect("delete");
        eventually_true(&format!("the {pass} probe container is reaped"), || async {
            read(framework, probe).await.is_none()
        })
        .await;
    }
}

/// Rust producers feed Curator consumers, Curator producers feed Rust consumers: every item
/// exactly once, nothing left.
async fn both_ways(root: &str, lock_safe: bool) {
    let env = Env::start().await;
    let framework = env.framework().await;
    let items_per_way = 300;

    // Rust → Curator: one producer puts one item per node, one puts nodes of three items
    // (`put_many`), one puts a batch of single-item nodes in multis (`put_batch`).
    let queue_path = format!("{root}/to-curator");
    let lock_path = lock_safe.then(|| format!("{root}/to-curator-locks"));
    let mut driver = java_consumer(&env, "queue", &queue_path, lock_path.as_deref(), items_per_way);
    let expected: BTreeSet<String> = (0..items_per_way).map(|index| format!("r-{index:04}")).collect();
    let all: Vec<String> = expected.iter().cloned().collect();
    let thirds: Vec<&[String]> = all.chunks(items_per_way / 3).collect();
    let mut producers = Vec::new();
    for (way, items) in thirds.into_iter().enumerate() {
        let framework = env.framework().await;
        let queue = builder(&framework, &queue_path, lock_path.as_deref()).build().expect("queue");
        let items = items.to_vec();
        producers.push(tokio::spawn(async move {
            match way {
                0 => {
                    for item in &items {
                        queue.put(item).await.expect("put");
                    }
                }
                1 => {
                    for chunk in items.chunks(3) {
                        queue.put_many(chunk).await.expect("put_many");
                    }
                }
                _ => {
                    queue.put_batch(&items).await.expect("put_batch");
                }
            }
            framework.close().await;
        }));
    }
    for producer in producers {
        within("Rust producer", producer).await.expect("producer");
    }
    let got: Vec<String> = java_items(&mut driver).await.into_iter().map(|(_, item)| item).collect();
    expect_success(driver).await;
    assert_exactly_once("Rust → Curator", &expected, &got);
    assert_drained(&framework, &queue_path, lock_path.as_deref()).await;

    // Curator → Rust: two Curator producers, two Rust consumers, at the same time.
    let queue_path = format!("{root}/to-rust");
    let lock_path = lock_safe.then(|| format!("{root}/to-rust-locks"));
    let consumers = RustConsumers::start(&env, 2, |framework| {
        builder(framework, &queue_path, lock_path.as_deref()).build().expect("queue").consumer()
    })
    .await;
    let mut producer =
        curator(["queue-produce", &env.connect(), &queue_path, &items_per_way.to_string(), "2", "c-"]);
    within("RESULT", producer.expect_line("RESULT", STEP)).await.expect("Curator produced");
    expect_success(producer).await;
    let expected: BTreeSet<String> = (0..items_per_way).map(|index| format!("c-{index}")).collect();
    let got = consumers.finish(items_per_way).await;
    assert_exactly_once("Curator → Rust", &expected, &got);
    assert_drained(&framework, &queue_path, lock_path.as_deref()).await;

    within("clean up", framework.delete_recursive(root, Deadline::after(STEP))).await.expect("delete");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_most_once_queue_both_ways() {
    both_ways("/interop-queue-plain", false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lock_safe_queue_both_ways() {
    both_ways("/interop-queue-locked", true).await;
}

/// One lock-safe queue, consumed by Curator and Rust at the same time while Curator and Rust
/// produce: the lock nodes of both languages exclude each other, so every item is delivered
/// exactly once overall.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_and_rust_share_a_lock_safe_queue() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-queue-shared";
    let queue_path = format!("{root}/queue");
    let lock_path = format!("{root}/locks");
    let per_side = 250;

    // Curator's consumer runs until told to stop (expected 0).
    let mut java =
        curator(["queue-consume", &env.connect(), "queue", &queue_path, &lock_path, "0", "1", "print"]);
    within("STARTED", java.expect_line("STARTED", STEP)).await.expect("Curator consumer started");
    // A slower Rust consumer (one item at a time, 4 ms each), so both languages get items.
    let consumers = RustConsumers::start_paced(&env, Duration::from_millis(4), |framework| {
        builder(framework, &queue_path, Some(&lock_path)).build().expect("queue").consumer().prefetch(1)
    })
    .await;
    let mut producer =
        curator(["queue-produce", &env.connect(), &queue_path, &per_side.to_string(), "1", "c-"]);
    let rust_items: Vec<String> = (0..per_side).map(|index| format!("r-{index}")).collect();
    let rust_queue = builder(&framework, &queue_path, Some(&lock_path)).build().expect("queue");
    for item in &rust_items {
        within("put", rust_queue.put(item)).await.expect("put");
    }
    within("RESULT", producer.expect_line("RESULT", STEP)).await.expect("Curator produced");
    expect_success(producer).await;

    // Until both sides together have every item.
    let total = 2 * per_side;
    let mut java_got = Vec::new();
    let started = Instant::now();
    while java_got.len() + consumers.count() < total {
        assert!(started.elapsed() < STEP, "only {} + {} of {total} items", java_got.len(), consumers.count());
        match java.next_line(Duration::from_millis(20)).await {
            Ok(Some(line)) => java_got.extend(parse_item(&line).map(|(_, item)| item)),
            Ok(None) => panic!("the Curator consumer exited; stderr:\n{}", java.log_tail(30)),
            Err(TestingError::Timeout { .. }) => {}
            Err(err) => panic!("reading the Curator consumer: {err}"),
        }
    }
    within("send stop", java.send_line("stop")).await.expect("stop");
    let (rest, reported) = java_items_until_done(&mut java).await;
    java_got.extend(rest.into_iter().map(|(_, item)| item));
    assert_eq!(reported, java_got.len(), "Curator's count vs its ITEM lines");
    expect_success(java).await;
    let rust_got = consumers.stop().await;
    assert!(
        !java_got.is_empty() && !rust_got.is_empty(),
        "both languages consumed: {} / {}",
        java_got.len(),
        rust_got.len()
    );
    let expected: BTreeSet<String> =
        rust_items.iter().cloned().chain((0..per_side).map(|index| format!("c-{index}"))).collect();
    let got: Vec<String> = java_got.into_iter().chain(rust_got).collect();
    assert_exactly_once("Curator + Rust consumers", &expected, &got);
    assert_drained(&framework, &queue_path, Some(&lock_path)).await;

    within("clean up", framework.delete_recursive(root, Deadline::after(STEP))).await.expect("delete");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// Priorities put by both languages into one queue come out in priority order (FIFO within a
/// priority) whichever language consumes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn priority_order_across_languages() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-queue-priority";
    let rust_priorities = [3, -1, 7, i32::MIN, 0, 3];
    let java_priorities = [-1, i32::MAX, 2, 0, -7, 3];

    for consumer_side in ["curator", "rust"] {
        let queue_path = format!("{root}/{consumer_side}");
        let queue = builder(&framework, &queue_path, None).build_priority().expect("priority queue");
        // One language puts its items, then the other (Curator first when Rust consumes); some
        // priorities are used by both, so FIFO within a priority crosses languages.
        let mut expected: Vec<(i32, usize, String)> = Vec::new();
        let rust_puts: Vec<(i32, String)> = rust_priorities
            .iter()
            .enumerate()
            .map(|(index, priority)| (*priority, format!("r{index}")))
            .collect();
        let java_puts: Vec<(i32, String)> = java_priorities
            .iter()
            .enumerate()
            .map(|(index, priority)| (*priority, format!("j{index}")))
            .collect();
        for side in if consumer_side == "curator" { ["rust", "curator"] } else { ["curator", "rust"] } {
            if side == "rust" {
                for (priority, item) in &rust_puts {
                    within("put", queue.put(item, *priority)).await.expect("put");
                    expected.push((*priority, expected.len(), item.clone()));
                }
            } else {
                let mut args =
                    vec!["queue-put".to_owned(), env.connect(), "priority".into(), queue_path.clone()];
                args.push("-".into());
                args.extend(java_puts.iter().map(|(priority, item)| format!("{item}@{priority}")));
                let mut put = curator(args);
                within("PUT", put.expect_line("DONE", STEP)).await.expect("Curator put");
                expect_success(put).await;
                let first = expected.len();
                expected.extend(
                    java_puts
                        .iter()
                        .enumerate()
                        .map(|(index, (priority, item))| (*priority, first + index, item.clone())),
                );
            }
        }
        expected.sort();
        let expected: Vec<String> = expected.into_iter().map(|(_, _, item)| item).collect();

        let got: Vec<String> = if consumer_side == "curator" {
            let mut driver = curator([
                "queue-consume",
                &env.connect(),
                "priority",
                &queue_path,
                "-",
                &expected.len().to_string(),
                "1",
                "print",
            ]);
            let got = java_items(&mut driver).await.into_iter().map(|(_, item)| item).collect();
            expect_success(driver).await;
            got
        } else {
            let mut consumer = queue.consumer().prefetch(1);
            let mut got = Vec::new();
            while got.len() < expected.len() {
                let delivery = within("take", consumer.next()).await.expect("open").expect("delivery");
                got.extend(delivery.items().iter().cloned());
                within("ack", delivery.ack()).await.expect("ack");
            }
            got
        };
        assert_eq!(got, expected, "priority order, consumed by {consumer_side}");
        assert_drained(&framework, &queue_path, None).await;
    }
    within("clean up", framework.delete_recursive(root, Deadline::after(STEP))).await.expect("delete");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// A delay item put by one language is not delivered early by the other, nor much later; an item
/// due at once goes first.
///
/// The late item is put first and the due one after it, so the due one is due earlier only when
/// the first put takes less than `delay_ms`: 5 s leaves room for a cold JVM's first create on a
/// busy machine. The consumer runs before the puts, so "not much later" times its wakeup alone,
/// not a JVM's start.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delay_items_wait_for_their_time_across_languages() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-queue-delay";
    let delay_ms = 5_000;
    let late_by = 2_000;

    // Curator puts, Rust consumes.
    let queue_path = format!("{root}/to-rust");
    let queue = builder(&framework, &queue_path, None).build_delay().expect("delay queue");
    let mut consumer = queue.consumer().prefetch(1);
    let mut put = curator([
        "queue-put",
        &env.connect(),
        "delay",
        &queue_path,
        "-",
        &format!("late@{delay_ms}"),
        "now@0",
    ]);
    let late_line = within("PUT late", put.expect_line("PUT late", STEP)).await.expect("Curator put");
    let due: i64 = late_line.trim_start_matches("due=").parse().expect("due=<epoch ms>");
    within("DONE", put.expect_line("DONE", STEP)).await.expect("Curator put");
    expect_success(put).await;
    let mut got = Vec::new();
    for _ in 0..2 {
        let delivery = within("take", consumer.next()).await.expect("open").expect("delivery");
        got.push((epoch_ms(), delivery.items()[0].clone()));
        within("ack", delivery.ack()).await.expect("ack");
    }
    assert_eq!(got[0].1, "now", "the item due at once first: {got:?}");
    assert_eq!(got[1].1, "late");
    assert!(got[1].0 >= due, "Curator's delay item delivered {} ms early", due - got[1].0);
    assert!(got[1].0 < due + late_by, "Curator's delay item delivered {} ms late", got[1].0 - due);
    drop(consumer);
    assert_drained(&framework, &queue_path, None).await;

    // Rust puts, Curator consumes.
    let queue_path = format!("{root}/to-curator");
    let queue = builder(&framework, &queue_path, None).build_delay().expect("delay queue");
    let mut driver = java_consumer(&env, "delay", &queue_path, None, 2);
    within("STARTED", driver.expect_line("STARTED", STEP)).await.expect("Curator consumer started");
    let due = epoch_ms() + delay_ms;
    within("put", queue.put(&"late".to_owned(), UNIX_EPOCH + Duration::from_millis(due as u64)))
        .await
        .expect("put");
    within("put", queue.put_after(&"now".to_owned(), Duration::ZERO)).await.expect("put");
    let got = java_items(&mut driver).await;
    expect_success(driver).await;
    assert_eq!(got.iter().map(|(_, item)| item.as_str()).collect::<Vec<_>>(), ["now", "late"]);
    assert!(got[1].0 >= due, "our delay item delivered {} ms early by Curator", due - got[1].0);
    assert!(got[1].0 < due + late_by, "our delay item delivered {} ms late by Curator", got[1].0 - due);
    assert_drained(&framework, &queue_path, None).await;

    within("clean up", framework.delete_recursive(root, Deadline::after(STEP))).await.expect("delete");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// The simple queue both ways, in FIFO order; its directories are containers, reaped once empty.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn simple_queue_fifo_across_languages() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-queue-simple";
    let items: Vec<String> = (0..60).map(|index| format!("s-{index:03}")).collect();

    // Rust offers, Curator takes.
    let to_curator = format!("{root}/to-curator");
    let queue = SimpleQueue::new(&framework, &to_curator).expect("simple queue");
    for item in &items {
        within("offer", queue.offer(item.as_bytes())).await.expect("offer");
    }
    let mut driver = curator([
        "queue-consume",
        &env.connect(),
        "simple",
        &to_curator,
        "-",
        &items.len().to_string(),
        "1",
        "print",
    ]);
    let got: Vec<String> = java_items(&mut driver).await.into_iter().map(|(_, item)| item).collect();
    expect_success(driver).await;
    assert_eq!(got, items, "Curator takes our items in FIFO order");
    // Curator's pollers create their directory whenever it is missing (SimpleDistributedQueue's
    // EnsureContainers), so after the server reaped the emptied container a last Java poll may
    // have made it again (a createContainer in the server's log): empty and childless, a container
    // the server never reaps. The server does not say a node is a container (its stat reports
    // ephemeral owner 0 for containers and TTL nodes alike), so what is checked is that it is no
    // ephemeral and empty; then it is removed by hand.
    if let Some((_, stat)) = read(&framework, &to_curator).await {
        assert_eq!(stat.ephemeral_owner, 0, "{to_curator} is not an ephemeral node");
        assert_eq!(stat.num_children, 0, "{to_curator} is empty");
        let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
        match within("delete", session.client().delete(&to_curator, None)).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(err) => panic!("deleting {to_curator}: {err}"),
        }
    }

    // Curator offers, Rust takes.
    let to_rust = format!("{root}/to-rust");
    let mut args = vec!["queue-put".to_owned(), env.connect(), "simple".into(), to_rust.clone(), "-".into()];
    args.extend(items.iter().cloned());
    let mut put = curator(args);
    within("DONE", put.expect_line("DONE", STEP)).await.expect("Curator offered");
    expect_success(put).await;
    let queue = SimpleQueue::new(&framework, &to_rust).expect("simple queue");
    let mut got = Vec::new();
    for _ in 0..items.len() {
        let bytes = within("take", queue.take()).await.expect("take");
        got.push(String::from_utf8(bytes).expect("UTF-8"));
    }
    assert_eq!(got, items, "we take Curator's items in FIFO order");
    assert_eq!(within("poll", queue.poll()).await.expect("poll"), None, "nothing left");
    // Our consumer never re-creates a reaped directory, so the server reaps it and the root.
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// Removal by id both ways: Curator's `remove(id)` finds our items, ours finds Curator's; other
/// ids stay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn id_queue_removal_across_languages() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-queue-id";
    let queue_path = format!("{root}/queue");
    let queue = builder(&framework, &queue_path, None).build_id().expect("id queue");
    for (item, id) in [("a", "job-1"), ("b", "job-2"), ("c", "job-1"), ("d", "job-1")] {
        within("put", queue.put(&item.to_owned(), id)).await.expect("put");
    }
    let mut put =
        curator(["queue-put", &env.connect(), "id", &queue_path, "-", "e@job-3", "f@job-2", "g@job-3"]);
    within("DONE", put.expect_line("DONE", STEP)).await.expect("Curator put");
    expect_success(put).await;

    let mut remove = curator(["queue-remove-id", &env.connect(), &queue_path, "-", "job-1"]);
    let removed = within("REMOVED", remove.expect_line("REMOVED", STEP)).await.expect("Curator removed");
    expect_success(remove).await;
    assert_eq!(removed, "3", "Curator removes our three job-1 items");
    assert_eq!(
        within("remove", queue.remove("job-3")).await.expect("remove"),
        2,
        "we remove Curator's job-3 items"
    );
    let left = sorted_children(&framework, &queue_path).await;
    assert_eq!(left.len(), 2, "the job-2 items stay: {left:?}");
    assert!(left.iter().all(|name| name.starts_with("queue-|job-2|")), "{left:?}");

    within("clean up", framework.delete_recursive(root, Deadline::after(STEP))).await.expect("delete");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// Items carrying our delivery count (a trailer after Curator's end marker, written when a queue
/// has `max_deliveries`) are read by Curator's consumer as the same items: each exactly once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_reads_items_that_carry_our_delivery_count() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-queue-counted";
    let queue_path = format!("{root}/queue");
    let lock_path = format!("{root}/locks");
    let count = 20;
    let queue = builder(&framework, &queue_path, Some(&lock_path))
        .max_deliveries(5)
        .dead_letter_path(format!("{root}/dead"))
        .build()
        .expect("queue");
    let expected: BTreeSet<String> = (0..count).map(|index| format!("counted-{index:02}")).collect();
    let items: Vec<String> = expected.iter().cloned().collect();
    within("put", queue.put_batch(&items)).await.expect("put");
    // Each item delivered once and requeued: its new node carries the count 1.
    let mut consumer = queue.consumer().prefetch(1);
    for _ in 0..count {
        let delivery = within("next", consumer.next()).await.expect("open").expect("delivery");
        assert_eq!(delivery.delivery_count(), 1);
        within("requeue", delivery.requeue()).await.expect("requeue");
    }
    drop(consumer);
    let nodes = sorted_children(&framework, &queue_path).await;
    assert_eq!(nodes.len(), count);
    for node in &nodes {
        let (bytes, _) = read(&framework, &path::join(&queue_path, node)).await.expect("node");
        assert_eq!(zk_recipes::queue::framing::delivery_count(&bytes), 1, "{node} carries its count");
    }

    let mut driver = java_consumer(&env, "queue", &queue_path, Some(&lock_path), count);
    let got: Vec<String> = java_items(&mut driver).await.into_iter().map(|(_, item)| item).collect();
    expect_success(driver).await;
    assert_exactly_once("counted items → Curator", &expected, &got);
    assert_drained(&framework, &queue_path, Some(&lock_path)).await;

    within("clean up", framework.delete_recursive(root, Deadline::after(STEP))).await.expect("delete");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// A finding about Curator 5.4 (seen in a chaos run, reproduced here): its lock-safe consumer
/// creates an item's lock node with a plain create. When the reply to that create is lost with
/// the connection, Curator retries it on the same session, gets `NodeExists` from the node its
/// first try made, takes it for another consumer's lock and passes the item by. Its node stays
/// as long as its session lives, and nobody can take the item. Our consumer on the same queue
/// watches that lock node and takes the item as soon as Curator's session ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_strands_an_item_whose_lock_create_it_retried_and_ours_takes_it_when_that_session_ends() {
    const CURATOR_SESSION: Duration = Duration::from_secs(4);
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-queue-stranded";
    let queue_path = format!("{root}/queue");
    let lock_path = format!("{root}/locks");
    let queue = builder(&framework, &queue_path, Some(&lock_path)).build().expect("queue");

    // Curator's consumer goes through a proxy that drops the reply to its first lock create,
    // with the connection: the server made the node, Curator does not know.
    let proxy = within("proxy", FaultProxy::start(env.server.address())).await.expect("proxy");
    let cut = proxy.cut_after_next_reply(RequestMatch::create().under(format!("{lock_path}/")));
    let session_ms = CURATOR_SESSION.as_millis().to_string();
    let mut java = curator([
        "--session-timeout-ms",
        &session_ms,
        "queue-consume",
        &proxy.connect_string(),
        "queue",
        &queue_path,
        &lock_path,
        "0",
        "1",
        "print",
    ]);
    within("STARTED", java.expect_line("STARTED", STEP)).await.expect("Curator consumer started");
    let item = within("put", queue.put(&"stranded".to_owned())).await.expect("put");
    let cut = within("the cut", cut).await.expect("cut");
    let lock_node = path::join(&lock_path, &item);
    assert_eq!(cut.path, lock_node, "Curator's lock create was the request cut");

    // Our consumer runs beside it from now on.
    let consumers = RustConsumers::start(&env, 1, |framework| {
        builder(framework, &queue_path, Some(&lock_path)).build().expect("queue").consumer().prefetch(1)
    })
    .await;
    let ours = session(&consumers.frameworks[0]).await.id().0;
    let (_, lock) = read(&framework, &lock_node).await.expect("Curator's lock node is there");
    assert_ne!(lock.ephemeral_owner, ours, "the lock node is Curator's");
    // Twice Curator's session timeout later, the node is still there with the same owner (so its
    // session is alive: it reconnected), and nobody took the item.
    let stranded_since = Instant::now();
    while stranded_since.elapsed() < 2 * CURATOR_SESSION {
        let (_, still) = read(&framework, &lock_node).await.expect("Curator's lock node stays");
        assert_eq!((still.czxid, still.ephemeral_owner), (lock.czxid, lock.ephemeral_owner));
        assert_eq!(consumers.count(), 0, "nobody can take an item whose lock is held");
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    assert_eq!(children(&framework, &queue_path).await, vec![item.clone()], "the item is still queued");
    assert!(proxy.stats().cut >= 1);

    // Curator's consumer never processed it. (Its orderly stop would wait for the lock path to
    // empty, and never finish.) It dies; once its session expires its lock node goes, and ours
    // takes the item.
    while let Ok(Some(line)) = java.next_line(Duration::from_millis(50)).await {
        assert!(parse_item(&line).is_none(), "Curator never processed the item: {line}");
    }
    java.kill().expect("SIGKILL the Curator consumer");
    let rust_got = consumers.finish(1).await;
    assert_exactly_once(
        "our consumer, after Curator's session ended",
        &BTreeSet::from(["stranded".to_owned()]),
        &rust_got,
    );
    assert_drained(&framework, &queue_path, Some(&lock_path)).await;

    within("clean up", framework.delete_recursive(root, Deadline::after(STEP))).await.expect("delete");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}
