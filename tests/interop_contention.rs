//! Mixed contention with Apache Curator 5.4: Rust and Java contenders (separate sessions) take
//! the same lock hundreds of times; inside the critical section both sides run the same checks:
//!
//! - a marker protocol: create an EPHEMERAL_SEQUENTIAL marker, count the markers (more than the
//!   allowed holders is a violation), delete it before releasing;
//! - a counter: read it with its version, sleep the hold time, write it + 1 with that version (a
//!   BadVersion is a concurrent writer: a violation when one holder is allowed; retried, so each
//!   acquisition adds exactly one).
//!
//! Then the same harness with locking switched off on both sides must find violations: the
//! checks can fail.
//!
//! Needs Java, `javac` and Debian's `libcurator-recipes-java` (`scripts/install-deps.sh`).

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::time::{Duration, Instant};

use common::{
    assert_gone, curator, epoch_micros, expect_success, read, session, within, within_for, Env, STEP,
};
use zk_recipes::framework::zookeeper_client::{self, CreateMode};
use zk_recipes::framework::{Deadline, Framework};
use zk_recipes::mutex::{Mutex, MutexGuard};
use zk_recipes::semaphore::{Lease, Semaphore, SemaphoreMutex};

/// Contenders per side (each its own session).
const CONTENDERS: usize = 3;
/// Acquisitions per contender with locking on; override with `ZK_INTEROP_ITERATIONS`.
const ITERATIONS: usize = 300;
/// Acquisitions per contender with locking off.
const UNLOCKED_ITERATIONS: usize = 20;
/// Time spent between reading and writing the counter.
const HOLD: Duration = Duration::from_millis(1);
/// Deadline of a whole run.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Mutex,
    Semaphore { max_leases: u32 },
    SemaphoreMutex,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Mutex => "mutex",
            Kind::Semaphore { .. } => "semaphore",
            Kind::SemaphoreMutex => "semaphore-mutex",
        }
    }

    fn allowed_holders(self) -> usize {
        match self {
            Kind::Semaphore { max_leases } => max_leases as usize,
            Kind::Mutex | Kind::SemaphoreMutex => 1,
        }
    }

    fn max_leases(self) -> u32 {
        match self {
            Kind::Semaphore { max_leases } => max_leases,
            Kind::Mutex | Kind::SemaphoreMutex => 1,
        }
    }
}

/// One Rust contender's lock.
enum RustLock {
    Mutex(Mutex),
    Semaphore(Semaphore),
    SemaphoreMutex(SemaphoreMutex),
}

enum Held {
    Guard(MutexGuard),
    /// Boxed: a lease is much larger than a guard (which shares its hold).
    Lease(Box<Lease>),
}

impl RustLock {
    fn new(kind: Kind, framework: &Framework, lock_path: &str) -> RustLock {
        match kind {
            Kind::Mutex => RustLock::Mutex(Mutex::new(framework, lock_path).expect("mutex")),
            Kind::Semaphore { max_leases } => {
                RustLock::Semaphore(Semaphore::new(framework, lock_path, max_leases).expect("semaphore"))
            }
            Kind::SemaphoreMutex => {
                RustLock::SemaphoreMutex(SemaphoreMutex::new(framework, lock_path).expect("semaphore mutex"))
            }
        }
    }

    async fn acquire(&self) -> Held {
        match self {
            RustLock::Mutex(mutex) => Held::Guard(mutex.lock_timeout(STEP).await.expect("mutex")),
            RustLock::Semaphore(semaphore) => {
                Held::Lease(Box::new(semaphore.acquire_timeout(STEP).await.expect("lease")))
            }
            RustLock::SemaphoreMutex(mutex) => {
                Held::Lease(Box::new(mutex.lock_timeout(STEP).await.expect("lease")))
            }
        }
    }
}

impl Held {
    async fn release(self) {
        match self {
            Held::Guard(guard) => within("release", guard.release()).await.expect("release"),
            Held::Lease(lease) => within("release", lease.release()).await.expect("release"),
        }
    }
}

/// What one side saw.
#[derive(Debug, Default)]
struct Tally {
    /// `(side, acquired, released)` in epoch micros; side `'J'` or `'R'`.
    holds: Vec<(char, i64, i64)>,
    violations: u64,
    conflicts: u64,
    max_markers: usize,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.holds.extend(other.holds);
        self.violations += other.violations;
        self.conflicts += other.conflicts;
        self.max_markers = self.max_markers.max(other.max_markers);
    }
}

#[derive(Debug, Clone)]
struct Paths {
    root: String,
    lock: String,
    markers: String,
    counter: String,
}

impl Paths {
    fn new(root: String) -> Paths {
        Paths {
            lock: format!("{root}/lock"),
            markers: format!("{root}/markers"),
            counter: format!("{root}/counter"),
            root,
        }
    }
}

/// One Rust contender: `iterations` times acquire (if `locking`), run the critical section,
/// release.
async fn rust_contender(
    framework: Framework,
    lock: RustLock,
    paths: Paths,
    kind: Kind,
    iterations: usize,
    locking: bool,
) -> Tally {
    let mut tally = Tally::default();
    for _ in 0..iterations {
        let held = if locking { Some(within("acquire", lock.acquire()).await) } else { None };
        let acquired = epoch_micros();
        let session = session(&framework).await;
        let client = session.client();
        let marker_options = session.create_options(CreateMode::EphemeralSequential);
        let marker_prefix = format!("{}/m-", paths.markers);
        let (_, sequence) = within("create marker", client.create(&marker_prefix, b"", &marker_options))
            .await
            .expect("marker");
        let marker = format!("{marker_prefix}{sequence}");
        let markers =
            within("list markers", client.list_children(&paths.markers)).await.expect("markers").len();
        tally.max_markers = tally.max_markers.max(markers);
        if markers > kind.allowed_holders() {
            tally.violations += 1;
        }
        loop {
            let (data, stat) =
                within("read counter", client.get_data(&paths.counter)).await.expect("counter");
            let value: u64 = String::from_utf8(data).expect("utf-8").trim().parse().expect("a number");
            tokio::time::sleep(HOLD).await;
            let next = (value + 1).to_string();
            match within(
                "write counter",
                client.set_data(&paths.counter, next.as_bytes(), Some(stat.version)),
            )
            .await
            {
                Ok(_) => break,
                Err(zookeeper_client::Error::BadVersion) => {
                    tally.conflicts += 1;
                    if kind.allowed_holders() == 1 {
                        tally.violations += 1;
                    }
                }
                Err(err) => panic!("write counter: {err}"),
            }
        }
        within("delete marker", client.delete(&marker, None)).await.expect("delete marker");
        let released = epoch_micros();
        drop(session);
        if let Some(held) = held {
            held.release().await;
        }
        tally.holds.push(('R', acquired, released));
    }
    tally
}

/// Parses the Java side's `T <client> <acquired> <released>` lines and its `DONE` line.
fn java_tally(lines: &[String], done: &str) -> Tally {
    let mut tally = Tally::default();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        if let ["T", _client, acquired, released] = fields[..] {
            tally.holds.push(('J', acquired.parse().expect("micros"), released.parse().expect("micros")));
        }
    }
    for field in done.split_whitespace().skip(1) {
        let (key, value) = field.split_once('=').expect("key=value");
        match key {
            "acquisitions" => {
                assert_eq!(value.parse::<usize>().expect("count"), tally.holds.len(), "T lines vs {done}")
            }
            "violations" => tally.violations = value.parse().expect("count"),
            "conflicts" => tally.conflicts = value.parse().expect("count"),
            "max-markers" => tally.max_markers = value.parse().expect("count"),
            _ => {}
        }
    }
    tally
}

/// The largest number of holds that overlap in time (both sides share the machine's clock).
fn max_overlap(holds: &[(char, i64, i64)]) -> usize {
    // A release at the same microsecond as an acquire comes first.
    let mut events: Vec<(i64, i32)> =
        holds.iter().flat_map(|&(_, acquired, released)| [(acquired, 1), (released, -1)]).collect();
    events.sort();
    let (mut current, mut max) = (0i32, 0i32);
    for (_, delta) in events {
        current += delta;
        max = max.max(current);
    }
    max as usize
}

/// How often the holder switches between a Rust and a Java contender, in acquisition order.
fn side_switches(holds: &[(char, i64, i64)]) -> usize {
    let mut sorted = holds.to_vec();
    sorted.sort_by_key(|&(_, acquired, _)| acquired);
    sorted.windows(2).filter(|pair| pair[0].0 != pair[1].0).count()
}

/// Mean time inside the critical section per side, and (for one allowed holder) the mean gap
/// from one holder's release timestamp to the next holder's acquire timestamp, by hand-over kind
/// (`"JR"`: a Java holder followed by a Rust one), in microseconds.
fn timings(holds: &[(char, i64, i64)], allowed_holders: usize) -> String {
    let mut sorted = holds.to_vec();
    sorted.sort_by_key(|&(_, acquired, _)| acquired);
    let mean =
        |values: &[i64]| if values.is_empty() { 0 } else { values.iter().sum::<i64>() / values.len() as i64 };
    let mut text = String::new();
    for side in ['J', 'R'] {
        let held: Vec<i64> =
            sorted.iter().filter(|hold| hold.0 == side).map(|hold| hold.2 - hold.1).collect();
        text.push_str(&format!("held {side} {} us; ", mean(&held)));
    }
    if allowed_holders > 1 {
        return text;
    }
    for (from, to) in [('J', 'J'), ('J', 'R'), ('R', 'J'), ('R', 'R')] {
        let gaps: Vec<i64> = sorted
            .windows(2)
            .filter(|pair| pair[0].0 == from && pair[1].0 == to)
            .map(|pair| pair[1].1 - pair[0].2)
            .collect();
        text.push_str(&format!("hand-over {from}{to} {} us (n={}); ", mean(&gaps), gaps.len()));
    }
    text
}

/// What a run measured.
struct Run {
    java: Tally,
    rust: Tally,
    counter: u64,
    elapsed: Duration,
}

/// Runs `CONTENDERS` Rust and `CONTENDERS` Java contenders (one JVM, one Curator client each)
/// against `paths`, `iterations` times each, with or without the lock.
async fn run(
    env: &Env,
    admin: &Framework,
    kind: Kind,
    paths: &Paths,
    iterations: usize,
    locking: bool,
) -> Run {
    // The marker dir and the counter are persistent (deleted by the test); their parent is a
    // container like the lock's.
    within("root", admin.ensure_path(&paths.root, Deadline::after(STEP))).await.expect("root");
    {
        let session = session(admin).await;
        let persistent = session.create_options(CreateMode::Persistent);
        within("markers", session.client().create(&paths.markers, b"", &persistent)).await.expect("markers");
        within("counter", session.client().create(&paths.counter, b"0", &persistent)).await.expect("counter");
    }

    let locking_arg = if locking { "on" } else { "off" };
    let iterations_arg = iterations.to_string();
    let hold_ms = HOLD.as_millis().to_string();
    let max_leases = kind.max_leases().to_string();
    let clients = CONTENDERS.to_string();
    let connect = env.connect();
    let mut driver = curator([
        "contend",
        kind.name(),
        &connect,
        &paths.lock,
        &iterations_arg,
        &hold_ms,
        &paths.markers,
        &paths.counter,
        locking_arg,
        &max_leases,
        &clients,
    ]);
    let mut frameworks = Vec::with_capacity(CONTENDERS);
    for _ in 0..CONTENDERS {
        frameworks.push(env.framework().await);
    }
    within_for(
        "Java contenders READY",
        Duration::from_secs(60),
        driver.expect_line("READY", Duration::from_secs(60)),
    )
    .await
    .expect("Java contenders ready");

    // Both sides start together.
    within("go", driver.send_line("go")).await.expect("go");
    let started = Instant::now();
    let mut contenders = tokio::task::JoinSet::new();
    for framework in &frameworks {
        let lock = RustLock::new(kind, framework, &paths.lock);
        contenders.spawn(rust_contender(framework.clone(), lock, paths.clone(), kind, iterations, locking));
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

    let (counter, _) = read(admin, &paths.counter).await.expect("counter");
    let counter: u64 = String::from_utf8(counter).expect("utf-8").parse().expect("a number");
    let session = session(admin).await;
    within("delete counter", session.client().delete(&paths.counter, None)).await.expect("delete counter");
    within("delete markers", session.client().delete(&paths.markers, None)).await.expect("delete markers");
    Run { java, rust, counter, elapsed }
}

fn iterations() -> usize {
    std::env::var("ZK_INTEROP_ITERATIONS").ok().and_then(|value| value.parse().ok()).unwrap_or(ITERATIONS)
}

/// The mixed run with locking on (all checks must pass), then with locking off (the checks must
/// find violations).
async fn mixed_contention(kind: Kind) {
    let env = Env::start().await;
    let started = Instant::now();
    let admin = env.framework().await;
    let root = format!("/interop-contend-{}", kind.name());
    let iterations = iterations();

    let locked = run(&env, &admin, kind, &Paths::new(format!("{root}/locked")), iterations, true).await;
    let (java, rust) = (&locked.java, &locked.rust);
    let total = java.holds.len() + rust.holds.len();
    let mut all = java.holds.clone();
    all.extend(rust.holds.iter().copied());
    let overlap = max_overlap(&all);
    let switches = side_switches(&all);
    let seconds = locked.elapsed.as_secs_f64();
    println!(
        "{} locked: {total} acquisitions in {seconds:.1} s ({:.0}/s): Java {} ({:.0}/s), Rust {} ({:.0}/s); \
         {switches} Rust/Java switches; max overlap {overlap}; max markers Java {} Rust {}; \
         counter conflicts Java {} Rust {}",
        kind.name(),
        total as f64 / seconds,
        java.holds.len(),
        java.holds.len() as f64 / seconds,
        rust.holds.len(),
        rust.holds.len() as f64 / seconds,
        java.max_markers,
        rust.max_markers,
        java.conflicts,
        rust.conflicts,
    );
    println!("{} locked timings: {}", kind.name(), timings(&all, kind.allowed_holders()));
    assert_eq!(java.holds.len(), CONTENDERS * iterations, "Java acquisitions");
    assert_eq!(rust.holds.len(), CONTENDERS * iterations, "Rust acquisitions");
    assert_eq!(java.violations, 0, "Java saw violations");
    assert_eq!(rust.violations, 0, "Rust saw violations");
    assert!(java.max_markers <= kind.allowed_holders() && rust.max_markers <= kind.allowed_holders());
    assert_eq!(locked.counter, total as u64, "the counter counts every acquisition once");
    assert!(overlap <= kind.allowed_holders(), "{overlap} holds overlapped in time");
    let first = |holds: &[(char, i64, i64)]| holds.iter().map(|hold| hold.1).min().expect("holds");
    let last = |holds: &[(char, i64, i64)]| holds.iter().map(|hold| hold.1).max().expect("holds");
    assert!(
        first(&java.holds) < last(&rust.holds) && first(&rust.holds) < last(&java.holds),
        "the Java and Rust acquisition time ranges overlap"
    );
    assert!(switches >= total / 10, "only {switches} switches between Rust and Java holders in {total}");

    let unlocked =
        run(&env, &admin, kind, &Paths::new(format!("{root}/unlocked")), UNLOCKED_ITERATIONS, false).await;
    let found = unlocked.java.violations + unlocked.rust.violations;
    println!(
        "{} unlocked: {} acquisitions in {:.1} s: violations Java {} Rust {}, max markers Java {} Rust {}, \
         counter {} (conflicts Java {} Rust {})",
        kind.name(),
        unlocked.java.holds.len() + unlocked.rust.holds.len(),
        unlocked.elapsed.as_secs_f64(),
        unlocked.java.violations,
        unlocked.rust.violations,
        unlocked.java.max_markers,
        unlocked.rust.max_markers,
        unlocked.counter,
        unlocked.java.conflicts,
        unlocked.rust.conflicts,
    );
    assert!(found > 0, "without the lock the checks must find violations");
    assert!(
        unlocked.java.violations > 0 && unlocked.rust.violations > 0,
        "each side's checks find violations without the lock"
    );

    assert_gone(&admin, &root).await;
    within("close", admin.close()).await;
    println!("{}: whole test {:.1} s after the server started", kind.name(), started.elapsed().as_secs_f64());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_contention_mutex() {
    mixed_contention(Kind::Mutex).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_contention_semaphore_with_two_leases() {
    mixed_contention(Kind::Semaphore { max_leases: 2 }).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_contention_semaphore_mutex() {
    mixed_contention(Kind::SemaphoreMutex).await;
}
