//! Read-write lock interop with Apache Curator 5.4's `InterProcessReadWriteLock` (a real JVM on
//! the same server):
//!
//! - golden nodes: Curator's `__WRIT__` / `__READ__` nodes compared live with ours (names,
//!   sequences, modes, data, ACLs, container parents), and the two downgrade forms side by side;
//! - mixed contention: Rust and Java readers and writers on one path with a marker protocol
//!   (a writer finds no one inside, a reader no writer), and the same harness with locking off
//!   must find violations;
//! - our downgrade keeps a queued writer out, Java's and ours, until the read guard is released.
//!
//! Needs Java, `javac` and Debian's `libcurator-recipes-java` (`scripts/install-deps.sh`).

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use common::{
    acl, assert_gone, children, curator, epoch_micros, expect_success, parse_session, protected, read,
    session, within, within_for, Env, STEP,
};
use zk_recipes::framework::zookeeper_client::{self, CreateMode};
use zk_recipes::framework::{local_address, path, Deadline, Framework};
use zk_recipes::rwlock::{
    Hold as _, RwLock, RwLockReadGuard, RwLockWriteGuard, READ_LOCK_NAME, WRITE_LOCK_NAME,
};
use zk_recipes_testing::{CuratorProcess, TestingError};

/// Explicit node data both sides give their nodes.
const GOLDEN_DATA: &str = "golden-rw:42";
/// Contenders per side (each its own session).
const CONTENDERS: usize = 3;
/// Acquisitions per contender with locking on; override with `ZK_INTEROP_ITERATIONS`.
const ITERATIONS: usize = 300;
/// Acquisitions per contender with locking off.
const UNLOCKED_ITERATIONS: usize = 30;
/// Share of writes, in percent.
const WRITE_PERCENT: u32 = 20;
/// Time spent inside, between the two marker checks.
const HOLD: Duration = Duration::from_millis(1);
/// Deadline of a whole contention run.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);
/// How long a driver that must stay quiet is watched after the state it waits in was observed.
const QUIET: Duration = Duration::from_millis(300);

// ---------------------------------------------------------------------------------------------
// Golden nodes

/// Curator's node and ours: same stem and sequence under a fresh parent, both EPHEMERAL and owned
/// by the expected session, the expected data, same ACL; the parents: same ACL, empty data, not
/// ephemeral (that they are CONTAINERs shows when the server reaps them at the end).
async fn compare(
    framework: &Framework,
    label: &str,
    (java_node, java_session): (&str, i64),
    (rust_node, rust_session): (&str, i64),
    expected_stem: &str,
    expected_data: &[u8],
) {
    let java = protected(framework, java_node).await;
    let rust = protected(framework, rust_node).await;
    assert_eq!(java.stem, expected_stem, "{label}: Curator's node {}", java.path);
    assert_eq!(rust.stem, java.stem, "{label}: name after the prefix ({} vs {})", rust.path, java.path);
    assert_eq!(rust.sequence, java.sequence, "{label}: sequence ({} vs {})", rust.path, java.path);
    assert_eq!(java.ephemeral_owner, java_session, "{label}: Curator's node is EPHEMERAL, its session's");
    assert_eq!(rust.ephemeral_owner, rust_session, "{label}: our node is EPHEMERAL, our session's");
    assert_eq!(
        String::from_utf8_lossy(&java.data),
        String::from_utf8_lossy(expected_data),
        "{label}: Curator's data"
    );
    assert_eq!(String::from_utf8_lossy(&rust.data), String::from_utf8_lossy(&java.data), "{label}: data");
    assert_eq!(acl(framework, rust_node).await, acl(framework, java_node).await, "{label}: node ACL");
    let java_parent = path::parent(java_node).expect("parent");
    let rust_parent = path::parent(rust_node).expect("parent");
    assert_eq!(acl(framework, rust_parent).await, acl(framework, java_parent).await, "{label}: parent ACL");
    for parent in [java_parent, rust_parent] {
        let (data, stat) = read(framework, parent).await.unwrap_or_else(|| panic!("{parent} is gone"));
        assert_eq!(stat.ephemeral_owner, 0, "{label}: {parent} is not ephemeral");
        assert!(data.is_empty(), "{label}: {parent} has empty data, not {data:?}");
    }
}

/// Curator and we take each kind of read-write node on the same server, under two bases; the
/// test compares them. The downgrade differs on purpose: Curator 5.4 takes a new sequence for the
/// read node (a queued writer may slip in, CURATOR-621), we reuse the writer's as Curator 5.5+.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_read_write_nodes_match_curator() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-golden-rw";
    let java_base = format!("{root}/java");
    let rust_base = format!("{root}/rust");
    let data = GOLDEN_DATA.as_bytes();

    let mut driver = curator(["golden-rw", &env.connect(), &java_base, GOLDEN_DATA]);
    let (lines, _) = within("golden-rw HELD", driver.lines_until("HELD ", STEP)).await.expect("golden nodes");
    let mut java_session = 0;
    let mut java_nodes = BTreeMap::new();
    for line in &lines {
        if let Some(rest) = line.strip_prefix("SESSION ") {
            java_session = parse_session(rest);
        } else if let Some(rest) = line.strip_prefix("NODE ") {
            let (label, node) = rest.split_once(' ').expect("NODE <label> <path>");
            java_nodes.insert(label.to_owned(), node.to_owned());
        }
    }
    assert_ne!(java_session, 0, "session in {lines:?}");
    let java =
        |label: &str| java_nodes.get(label).unwrap_or_else(|| panic!("no {label} in {lines:?}")).clone();

    let rust_session = session(&framework).await.id().0;
    let lock = |name: &str| RwLock::new(&framework, &format!("{rust_base}/{name}")).expect("rwlock");
    let write = within("write", lock("write").node_data(data).write_timeout(STEP)).await.expect("write");
    let read_guard = within("read", lock("read").node_data(data).read_timeout(STEP)).await.expect("read");
    let read_default = within("read", lock("read-default").read_timeout(STEP)).await.expect("read");
    let downgrade_lock = lock("downgrade").node_data(data);
    let downgrade_write = within("write", downgrade_lock.write_timeout(STEP)).await.expect("write");
    let downgrade_write_path = downgrade_write.node_path().to_owned();
    let downgraded = within("downgrade", downgrade_write.downgrade()).await.expect("downgrade");

    let local = local_address();
    let cases: [(&str, &str, &str, &[u8]); 3] = [
        ("write", write.node_path(), WRITE_LOCK_NAME, data),
        ("read", read_guard.node_path(), READ_LOCK_NAME, data),
        ("read-default", read_default.node_path(), READ_LOCK_NAME, &local),
    ];
    for (label, rust_node, stem, expected_data) in cases {
        compare(
            &framework,
            label,
            (&java(label), java_session),
            (rust_node, rust_session),
            stem,
            expected_data,
        )
        .await;
    }

    // The downgrade: both writers had sequence 0 and are gone; Curator 5.4's read node took the
    // next sequence (EPHEMERAL_SEQUENTIAL), ours reuses the writer's (EPHEMERAL: a sequential
    // create would have been given 1 as well).
    let java_write = java("downgrade-write");
    let java_read = protected(&framework, &java("downgrade-read")).await;
    assert_eq!(path::name(&java_write).rsplit_once(WRITE_LOCK_NAME).map(|(_, seq)| seq), Some("0000000000"));
    assert!(read(&framework, &java_write).await.is_none(), "Curator released its write node");
    assert!(read(&framework, &downgrade_write_path).await.is_none(), "we released our write node");
    assert_eq!(
        path::name(&downgrade_write_path).rsplit_once(WRITE_LOCK_NAME).map(|(_, s)| s),
        Some("0000000000")
    );
    assert_eq!(java_read.stem, READ_LOCK_NAME);
    assert_eq!(java_read.sequence, "0000000001", "Curator 5.4's downgrade takes a new sequence");
    assert_eq!(java_read.ephemeral_owner, java_session);
    let ours = protected(&framework, downgraded.node_path()).await;
    assert_eq!(ours.stem, READ_LOCK_NAME, "{}", ours.path);
    assert_eq!(ours.sequence, "0000000000", "our downgrade reuses the writer's sequence (Curator 5.5+)");
    assert_eq!(ours.ephemeral_owner, rust_session, "our downgraded read node is EPHEMERAL, ours");
    assert_eq!(ours.data, data, "our downgraded read node keeps the lock's data");
    assert_eq!(java_read.data, data);
    println!(
        "downgrade: Curator 5.4 {} -> {}; ours {} -> {}",
        path::name(&java_write),
        path::name(&java_read.path),
        path::name(&downgrade_write_path),
        path::name(&ours.path)
    );

    within("send release", driver.send_line("release")).await.expect("release");
    within("RELEASED", driver.expect_line("RELEASED", STEP)).await.expect("released");
    expect_success(driver).await;
    within("release", write.release()).await.expect("release");
    within("release", read_guard.release()).await.expect("release");
    within("release", read_default.release()).await.expect("release");
    within("release", downgraded.release()).await.expect("release");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

// ---------------------------------------------------------------------------------------------
// Mixed contention

/// One acquisition: side (`'J'`/`'R'`), kind (`'R'`ead/`'W'`rite), acquired and released in epoch
/// micros.
type Hold = (char, char, i64, i64);

#[derive(Debug, Default)]
struct Tally {
    holds: Vec<Hold>,
    violations: u64,
    max_readers: usize,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.holds.extend(other.holds);
        self.violations += other.violations;
        self.max_readers = self.max_readers.max(other.max_readers);
    }

    fn writes(&self) -> usize {
        self.holds.iter().filter(|hold| hold.1 == 'W').count()
    }
}

/// The Rust side's read/write choice, seeded so a run is reproducible.
struct Choice(fastrand::Rng);

impl Choice {
    fn write(&mut self) -> bool {
        self.0.u32(0..100) < WRITE_PERCENT
    }
}

enum Held {
    Read(RwLockReadGuard),
    Write(RwLockWriteGuard),
}

/// A writer finds no marker but its own; a reader no writer marker. Also returns the readers seen.
async fn alone(framework: &Framework, markers: &str, write: bool, our_marker: Option<&str>) -> (bool, usize) {
    let session = session(framework).await;
    let names = within("list markers", session.client().list_children(markers)).await.expect("markers");
    let readers = names.iter().filter(|name| name.starts_with("reader-")).count();
    let ours = |name: &String| our_marker.is_some_and(|marker| path::name(marker) == name);
    let ok = if write { names.iter().all(ours) } else { !names.iter().any(|name| name == "writer") };
    (ok, readers)
}

/// One Rust contender: the protocol of the driver's `contend-rw` (see its header).
async fn rust_contender(
    framework: Framework,
    lock_path: String,
    markers: String,
    index: usize,
    iterations: usize,
    locking: bool,
) -> Tally {
    let lock = RwLock::new(&framework, &lock_path).expect("rwlock");
    let mut choice = Choice(fastrand::Rng::with_seed(index as u64 + 1));
    let mut tally = Tally::default();
    for _ in 0..iterations {
        let write = choice.write();
        let held = match (locking, write) {
            (false, _) => None,
            (true, true) => {
                Some(Held::Write(within("write", lock.write_timeout(STEP)).await.expect("write")))
            }
            (true, false) => Some(Held::Read(within("read", lock.read_timeout(STEP)).await.expect("read"))),
        };
        let acquired = epoch_micros();
        let session = session(&framework).await;
        let client = session.client();
        let mut violated = false;
        let marker = if write {
            let options = session.create_options(CreateMode::Ephemeral);
            let marker = format!("{markers}/writer");
            match within("writer marker", client.create(&marker, b"", &options)).await {
                Ok(_) => Some(marker),
                Err(zookeeper_client::Error::NodeExists) => {
                    violated = true;
                    None
                }
                Err(err) => panic!("writer marker: {err}"),
            }
        } else {
            let options = session.create_options(CreateMode::EphemeralSequential);
            let prefix = format!("{markers}/reader-");
            let (_, sequence) =
                within("reader marker", client.create(&prefix, b"", &options)).await.expect("reader marker");
            Some(format!("{prefix}{sequence}"))
        };
        for check in 0..2 {
            if check == 1 {
                tokio::time::sleep(HOLD).await;
            }
            let (ok, readers) = alone(&framework, &markers, write, marker.as_deref()).await;
            violated |= !ok;
            tally.max_readers = tally.max_readers.max(readers);
        }
        if let Some(marker) = &marker {
            within("delete marker", client.delete(marker, None)).await.expect("delete marker");
        }
        let released = epoch_micros();
        drop(session);
        match held {
            Some(Held::Read(guard)) => within("release", guard.release()).await.expect("release"),
            Some(Held::Write(guard)) => within("release", guard.release()).await.expect("release"),
            None => {}
        }
        tally.violations += u64::from(violated);
        tally.holds.push(('R', if write { 'W' } else { 'R' }, acquired, released));
    }
    tally
}

/// The driver's `T <client> <acquired> <released> <R|W>` lines and its `DONE` line.
fn java_tally(lines: &[String], done: &str) -> Tally {
    let mut tally = Tally::default();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let ["T", _client, acquired, released, kind] = fields[..] {
            let kind = kind.chars().next().expect("R or W");
            tally.holds.push((
                'J',
                kind,
                acquired.parse().expect("micros"),
                released.parse().expect("micros"),
            ));
        }
    }
    for field in done.split_whitespace().skip(1) {
        let (key, value) = field.split_once('=').expect("key=value");
        match key {
            "acquisitions" => assert_eq!(value.parse::<usize>().expect("count"), tally.holds.len(), "{done}"),
            "writes" => assert_eq!(value.parse::<usize>().expect("count"), tally.writes(), "{done}"),
            "violations" => tally.violations = value.parse().expect("count"),
            "max-readers" => tally.max_readers = value.parse().expect("count"),
            _ => {}
        }
    }
    tally
}

/// What the clocks say (both sides share the machine's): holds that overlapped a write, the most
/// reads inside at once, and how many Java reads overlapped a Rust read.
#[derive(Debug)]
struct Timeline {
    write_overlaps: usize,
    max_concurrent_reads: usize,
    cross_language_read_overlaps: usize,
}

fn timeline(holds: &[Hold]) -> Timeline {
    let mut sorted = holds.to_vec();
    sorted.sort_by_key(|hold| hold.2);
    let mut write_overlaps = 0;
    let mut cross_language_read_overlaps = 0;
    for (index, first) in sorted.iter().enumerate() {
        // Later holds that start before this one ends overlap it.
        for second in sorted[index + 1..].iter().take_while(|second| second.2 < first.3) {
            if first.1 == 'W' || second.1 == 'W' {
                write_overlaps += 1;
            } else if first.0 != second.0 {
                cross_language_read_overlaps += 1;
            }
        }
    }
    // A release at the same microsecond as an acquire comes first.
    let mut events: Vec<(i64, i32)> =
        sorted.iter().filter(|hold| hold.1 == 'R').flat_map(|hold| [(hold.2, 1), (hold.3, -1)]).collect();
    events.sort();
    let (mut inside, mut max_concurrent_reads) = (0i32, 0i32);
    for (_, delta) in events {
        inside += delta;
        max_concurrent_reads = max_concurrent_reads.max(inside);
    }
    Timeline {
        write_overlaps,
        max_concurrent_reads: max_concurrent_reads as usize,
        cross_language_read_overlaps,
    }
}

/// Per side and kind: mean time inside and when the side's last hold ended (ms after the first
/// acquisition of the run).
fn timings(holds: &[Hold]) -> String {
    let start = holds.iter().map(|hold| hold.2).min().unwrap_or_default();
    let mut text = String::new();
    for side in ['J', 'R'] {
        for kind in ['R', 'W'] {
            let inside: Vec<i64> = holds
                .iter()
                .filter(|hold| hold.0 == side && hold.1 == kind)
                .map(|hold| hold.3 - hold.2)
                .collect();
            let mean = inside.iter().sum::<i64>() / inside.len().max(1) as i64;
            text.push_str(&format!("{side}{kind} inside {mean} us; "));
        }
        let end = holds.iter().filter(|hold| hold.0 == side).map(|hold| hold.3).max().unwrap_or_default();
        text.push_str(&format!("{side} done after {} ms; ", (end - start) / 1000));
    }
    text
}

struct Run {
    java: Tally,
    rust: Tally,
    elapsed: Duration,
}

/// `CONTENDERS` Rust contenders and `CONTENDERS` Java ones (one JVM, one Curator client each) on
/// `<root>/lock`, with markers under `<root>/markers`.
async fn run(env: &Env, admin: &Framework, root: &str, iterations: usize, locking: bool) -> Run {
    let lock_path = format!("{root}/lock");
    let markers = format!("{root}/markers");
    within("root", admin.ensure_path(root, Deadline::after(STEP))).await.expect("root");
    {
        let session = session(admin).await;
        let persistent = session.create_options(CreateMode::Persistent);
        within("markers", session.client().create(&markers, b"", &persistent)).await.expect("markers");
    }
    let connect = env.connect();
    let (iterations_arg, hold_ms, write_percent, clients) = (
        iterations.to_string(),
        HOLD.as_millis().to_string(),
        WRITE_PERCENT.to_string(),
        CONTENDERS.to_string(),
    );
    let locking_arg = if locking { "on" } else { "off" };
    let mut driver = curator([
        "contend-rw",
        &connect,
        &lock_path,
        &iterations_arg,
        &hold_ms,
        &markers,
        &write_percent,
        locking_arg,
        &clients,
    ]);
    let mut frameworks = Vec::with_capacity(CONTENDERS);
    for _ in 0..CONTENDERS {
        frameworks.push(env.framework().await);
    }
    within_for("READY", Duration::from_secs(60), driver.expect_line("READY", Duration::from_secs(60)))
        .await
        .expect("Java contenders ready");
    within("go", driver.send_line("go")).await.expect("go");
    let started = Instant::now();
    let mut contenders = tokio::task::JoinSet::new();
    for (index, framework) in frameworks.iter().enumerate() {
        contenders.spawn(rust_contender(
            framework.clone(),
            lock_path.clone(),
            markers.clone(),
            index,
            iterations,
            locking,
        ));
    }
    let rust_side = async {
        let mut rust = Tally::default();
        while let Some(tally) = contenders.join_next().await {
            rust.merge(tally.expect("a Rust contender panicked"));
        }
        rust
    };
    let java_side = async {
        let (lines, done) = driver.lines_until("DONE ", RUN_TIMEOUT).await.expect("Java contenders DONE");
        java_tally(&lines, &done)
    };
    let (rust, java) =
        within_for("contention run", RUN_TIMEOUT, async { tokio::join!(rust_side, java_side) }).await;
    let elapsed = started.elapsed();
    expect_success(driver).await;
    for framework in &frameworks {
        within("close", framework.close()).await;
    }
    let session = session(admin).await;
    within("delete markers", session.client().delete(&markers, None)).await.expect("delete markers");
    Run { java, rust, elapsed }
}

fn iterations() -> usize {
    std::env::var("ZK_INTEROP_ITERATIONS").ok().and_then(|value| value.parse().ok()).unwrap_or(ITERATIONS)
}

/// Rust and Curator readers and writers on one path: no writer ever shares the lock, readers do
/// share it (across languages too); with locking off the same checks find violations.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_read_write_contention_with_curator() {
    let env = Env::start().await;
    let started = Instant::now();
    let admin = env.framework().await;
    let root = "/interop-contend-rw";
    let iterations = iterations();

    let locked = run(&env, &admin, &format!("{root}/locked"), iterations, true).await;
    let (java, rust) = (&locked.java, &locked.rust);
    let mut all = java.holds.clone();
    all.extend(rust.holds.iter().copied());
    let total = all.len();
    let timeline = timeline(&all);
    println!(
        "rwlock locked: {total} acquisitions in {:.1} s ({:.0}/s): Java {} ({} writes), Rust {} ({} writes); \
         {timeline:?}; readers seen in the marker dir: Java {} Rust {}",
        locked.elapsed.as_secs_f64(),
        total as f64 / locked.elapsed.as_secs_f64(),
        java.holds.len(),
        java.writes(),
        rust.holds.len(),
        rust.writes(),
        java.max_readers,
        rust.max_readers,
    );
    println!("rwlock locked timings: {}", timings(&all));
    assert_eq!(java.holds.len(), CONTENDERS * iterations, "Java acquisitions");
    assert_eq!(rust.holds.len(), CONTENDERS * iterations, "Rust acquisitions");
    for (side, tally) in [("Java", java), ("Rust", rust)] {
        assert_eq!(tally.violations, 0, "{side} saw violations");
        let share = tally.writes() * 100 / tally.holds.len();
        assert!((10..=30).contains(&share), "{side}: {share} % writes");
    }
    assert_eq!(timeline.write_overlaps, 0, "a write overlapped another hold in time");
    assert!(timeline.max_concurrent_reads >= 2, "readers never shared the lock: {timeline:?}");
    assert!(timeline.cross_language_read_overlaps > 0, "a Java and a Rust reader never held together");
    let first = |holds: &[Hold]| holds.iter().map(|hold| hold.2).min().expect("holds");
    let last = |holds: &[Hold]| holds.iter().map(|hold| hold.2).max().expect("holds");
    assert!(
        first(&java.holds) < last(&rust.holds) && first(&rust.holds) < last(&java.holds),
        "the Java and Rust acquisition time ranges overlap"
    );

    let unlocked = run(&env, &admin, &format!("{root}/unlocked"), UNLOCKED_ITERATIONS, false).await;
    println!(
        "rwlock unlocked: {} acquisitions in {:.1} s: violations Java {} Rust {}",
        unlocked.java.holds.len() + unlocked.rust.holds.len(),
        unlocked.elapsed.as_secs_f64(),
        unlocked.java.violations,
        unlocked.rust.violations,
    );
    assert!(
        unlocked.java.violations > 0 && unlocked.rust.violations > 0,
        "without the lock each side's checks find violations"
    );

    assert_gone(&admin, root).await;
    within("close", admin.close()).await;
    println!(
        "rwlock contention: whole test {:.1} s after the server started",
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------------
// Our downgrade keeps queued writers out

/// The path of the child of `dir` owned by `session_id`, once there is one.
async fn owned_child(framework: &Framework, dir: &str, session_id: i64) -> String {
    within("the owned node appears", async {
        loop {
            for child in children(framework, dir).await {
                let child = path::join(dir, &child);
                if read(framework, &child).await.is_some_and(|(_, stat)| stat.ephemeral_owner == session_id) {
                    return child;
                }
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// Waits until the server reports a watch by `session_id` on `node`: the session's queued
/// contender looked at the lock again and now waits for `node`.
async fn wait_watching(env: &Env, session_id: i64, node: &str) {
    within("the queued writer watches our read node", async {
        loop {
            let watches = env.server.watches().await.expect("wchc");
            let watching = watches.iter().any(|(session, paths)| {
                u64::from_str_radix(session.trim_start_matches("0x"), 16).ok() == Some(session_id as u64)
                    && paths.iter().any(|watched| watched == node)
            });
            if watching {
                return;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await
}

/// Asserts the driver prints nothing for [`QUIET`] (a queued `hold write` prints HELD once it
/// holds).
async fn assert_quiet(driver: &mut CuratorProcess, what: &str) {
    match driver.next_line(QUIET).await {
        Err(TestingError::Timeout { .. }) => {}
        other => panic!("{what}: the Curator writer printed {other:?}"),
    }
}

/// A Rust writer queued on `lock_path` in its own session: the task returns the guard and the epoch
/// micros at which it held.
fn rust_writer(framework: &Framework, lock_path: &str) -> tokio::task::JoinHandle<(RwLockWriteGuard, i64)> {
    let lock = RwLock::new(framework, lock_path).expect("rwlock");
    tokio::spawn(async move {
        let guard = lock.write_timeout(STEP).await.expect("queued Rust writer");
        (guard, epoch_micros())
    })
}

/// `hold write` in Curator, with its session id once connected.
async fn java_writer(env: &Env, lock_path: &str) -> (CuratorProcess, i64) {
    let mut driver = curator(["hold", "write", &env.connect(), lock_path]);
    let line = within("SESSION", driver.expect_line("SESSION ", STEP)).await.expect("session");
    (driver, parse_session(&line))
}

/// The number in a `HELD <micros>` / `RELEASED <micros>` line.
fn micros(line: &str) -> i64 {
    line.trim().parse().unwrap_or_else(|_| panic!("epoch micros in {line:?}"))
}

/// A Rust writer downgrades while a Curator writer and a Rust writer queue behind it, in both
/// orders: the writer right behind wakes when the write node goes, finds our read node (the
/// writer's sequence) before it and waits on it; no writer holds until the read guard is
/// released, then they hold in queue order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_writers_stay_out_after_our_downgrade() {
    let env = Env::start().await;
    let started = Instant::now();
    let framework = env.framework().await;
    let writer_framework = env.framework().await;
    let writer_session = session(&writer_framework).await.id().0;
    let root = "/interop-rw-downgrade";

    // Round 1: [our writer, Curator writer, Rust writer].
    let lock_path = format!("{root}/java-first");
    let lock = RwLock::new(&framework, &lock_path).expect("rwlock");
    let write = within("write", lock.write_timeout(STEP)).await.expect("write");
    let write_node = write.node_path().to_owned();
    let (mut java, java_session) = java_writer(&env, &lock_path).await;
    let java_node = owned_child(&framework, &lock_path, java_session).await;
    let rust = rust_writer(&writer_framework, &lock_path);
    owned_child(&framework, &lock_path, writer_session).await;

    let token = write.fencing_token();
    let read_guard = within("downgrade", write.downgrade()).await.expect("downgrade");
    assert_eq!(read_guard.fencing_token(), token, "the read guard keeps the writer's token");
    let sequence = |node: &str, name: &str| path::name(node).rsplit_once(name).map(|(_, seq)| seq.to_owned());
    assert_eq!(sequence(read_guard.node_path(), READ_LOCK_NAME), sequence(&write_node, WRITE_LOCK_NAME));
    assert!(read(&framework, &write_node).await.is_none(), "the write node is gone");
    wait_watching(&env, java_session, read_guard.node_path()).await;
    assert_quiet(&mut java, "after our downgrade").await;
    assert!(!rust.is_finished(), "the Rust writer waits");

    let release_started = epoch_micros();
    within("release read", read_guard.release()).await.expect("release");
    let held = within("HELD", java.expect_line("HELD ", STEP)).await.expect("the Curator writer holds");
    assert!(
        micros(&held) >= release_started,
        "Curator held at {held} before our read release at {release_started}"
    );
    println!(
        "round 1: the Curator writer held {} us after our read guard's release began",
        micros(&held) - release_started
    );
    assert!(read(&framework, &java_node).await.is_some());
    assert!(!rust.is_finished(), "the Rust writer waits behind the Curator writer");
    let java_release = epoch_micros();
    within("release", java.send_line("release")).await.expect("release");
    within("RELEASED", java.expect_line("RELEASED", STEP)).await.expect("released");
    expect_success(java).await;
    let (rust_guard, rust_held) = within("Rust writer", rust).await.expect("join");
    assert!(rust_held >= java_release, "the Rust writer held before Curator released");
    within("release", rust_guard.release()).await.expect("release");

    // Round 2: [our writer, Rust writer, Curator writer].
    let lock_path = format!("{root}/rust-first");
    let lock = RwLock::new(&framework, &lock_path).expect("rwlock");
    let write = within("write", lock.write_timeout(STEP)).await.expect("write");
    let rust = rust_writer(&writer_framework, &lock_path);
    owned_child(&framework, &lock_path, writer_session).await;
    let (mut java, java_session) = java_writer(&env, &lock_path).await;
    owned_child(&framework, &lock_path, java_session).await;

    let read_guard = within("downgrade", write.downgrade()).await.expect("downgrade");
    wait_watching(&env, writer_session, read_guard.node_path()).await;
    assert_quiet(&mut java, "after our downgrade").await;
    assert!(!rust.is_finished(), "the Rust writer waits for our read guard");

    let release_started = epoch_micros();
    within("release read", read_guard.release()).await.expect("release");
    let (rust_guard, rust_held) = within("Rust writer", rust).await.expect("join");
    assert!(rust_held >= release_started, "the Rust writer held before our read release");
    println!(
        "round 2: the Rust writer held {} us after our read guard's release began",
        rust_held - release_started
    );
    assert_quiet(&mut java, "while the Rust writer holds").await;
    let rust_release = epoch_micros();
    within("release", rust_guard.release()).await.expect("release");
    let held = within("HELD", java.expect_line("HELD ", STEP)).await.expect("the Curator writer holds");
    assert!(micros(&held) >= rust_release, "Curator held before the Rust writer released");
    within("release", java.send_line("release")).await.expect("release");
    within("RELEASED", java.expect_line("RELEASED", STEP)).await.expect("released");
    expect_success(java).await;

    within("close", writer_framework.close()).await;
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
    println!("downgrade test: {:.1} s after the server started", started.elapsed().as_secs_f64());
}
