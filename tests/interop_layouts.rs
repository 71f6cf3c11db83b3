//! The other lock layouts against real clients of theirs: ZooKeeper's own lock recipe (a Java
//! client of its protocol, `crates/testing/java/ZkRecipeLocks.java`) and kazoo 2.11
//! (`crates/testing/python/kazoo_driver.py`, in the virtualenv `scripts/install-deps.sh` makes).
//! Rust and the other side contend on one path; inside every hold both run the same checks (a
//! marker that must not exist, a versioned counter increment), so two holders at once show up as
//! violations and the counter must equal the acquisitions.
//!
//! Needs Java, `javac`, Debian's ZooKeeper jars, and kazoo (`bash scripts/install-deps.sh`): a
//! missing kazoo fails the kazoo tests with the install command.

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::time::Duration;

use common::{
    children, curator, exclusive_section, expect_success, field, read, session, shared_section, within,
    within_for, Env, STEP,
};
use zk_recipes::framework::zookeeper_client::CreateMode;
use zk_recipes::framework::{path, Deadline, Framework};
use zk_recipes::leader::KazooElection;
use zk_recipes::mutex::{LockLayout, Mutex};
use zk_recipes::rwlock::RwLock;
use zk_recipes_testing::CuratorProcess;

/// Contenders per side (each its own session).
const CONTENDERS: usize = 3;
/// Acquisitions per contender: 6 × 90 = 540 in all.
const ITERATIONS: usize = 90;
/// Deadline of a whole mixed run.
const RUN_TIMEOUT: Duration = Duration::from_secs(300);

fn kazoo<I, S>(args: I) -> CuratorProcess
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    CuratorProcess::spawn_kazoo("kazoo_driver.py", args).unwrap_or_else(|err| panic!("{err}"))
}

/// Creates the marker directory and the counter ("0") of one run.
async fn prepare(framework: &Framework, marker_dir: &str, counter_path: &str) {
    let session = session(framework).await;
    let options = session.create_options(CreateMode::Persistent);
    for node in [path::parent(marker_dir).expect("a parent"), marker_dir] {
        match within("create", session.client().create(node, b"", &options)).await {
            Ok(_) | Err(zk_recipes::framework::zookeeper_client::Error::NodeExists) => {}
            Err(err) => panic!("create {node}: {err}"),
        }
    }
    within("counter", session.client().create(counter_path, b"0", &options)).await.expect("counter");
}

async fn counter(framework: &Framework, counter_path: &str) -> u64 {
    let (data, _) = read(framework, counter_path).await.expect("counter");
    String::from_utf8(data).expect("utf-8").parse().expect("decimal")
}

/// What the Rust side of a run saw.
#[derive(Debug, Default)]
struct RustTally {
    acquisitions: u64,
    violations: u64,
    reads: u64,
    writes: u64,
}

/// How a Rust contender locks.
#[derive(Debug, Clone, Copy)]
enum RustSide {
    Mutex(LockLayout),
    /// kazoo's read-write layout: a write with this probability in percent.
    KazooRw {
        write_percent: u64,
    },
}

/// `CONTENDERS` Rust contenders, each on its own session, `ITERATIONS` holds each.
async fn run_rust_side(
    env: &Env,
    side: RustSide,
    lock_path: &str,
    marker_dir: &str,
    counter_path: &str,
) -> RustTally {
    let mut tasks = Vec::new();
    for index in 0..CONTENDERS {
        let framework = env.framework().await;
        let (lock_path, marker_dir, counter_path) =
            (lock_path.to_owned(), marker_dir.to_owned(), counter_path.to_owned());
        tasks.push(tokio::spawn(async move {
            let mut tally = RustTally::default();
            // A deterministic read/write mix (seeded per contender).
            let mut rng = fastrand::Rng::with_seed(2000 + index as u64);
            for _ in 0..ITERATIONS {
                match side {
                    RustSide::Mutex(layout) => {
                        let mutex = Mutex::with_layout(&framework, &lock_path, layout)
                            .expect("mutex")
                            .node_data(format!("rust-{index}"));
                        let guard = mutex.lock_timeout(STEP).await.expect("lock");
                        tally.violations += exclusive_section(&framework, &marker_dir, &counter_path).await;
                        within("release", guard.release()).await.expect("release");
                        tally.writes += 1;
                    }
                    RustSide::KazooRw { write_percent } => {
                        let lock = RwLock::kazoo(&framework, &lock_path)
                            .expect("rwlock")
                            .node_data(format!("rust-{index}"));
                        if rng.u64(0..100) < write_percent {
                            let guard = lock.write_timeout(STEP).await.expect("write");
                            tally.violations +=
                                exclusive_section(&framework, &marker_dir, &counter_path).await;
                            within("release", guard.release()).await.expect("release");
                            tally.writes += 1;
                        } else {
                            let guard = lock.read_timeout(STEP).await.expect("read");
                            tally.violations += shared_section(&framework, &marker_dir, &counter_path).await;
                            within("release", guard.release()).await.expect("release");
                            tally.reads += 1;
                        }
                    }
                }
                tally.acquisitions += 1;
            }
            within("close", framework.close()).await;
            tally
        }));
    }
    let mut total = RustTally::default();
    for task in tasks {
        let tally = within_for("rust contender", RUN_TIMEOUT, task).await.expect("contender task");
        total.acquisitions += tally.acquisitions;
        total.violations += tally.violations;
        total.reads += tally.reads;
        total.writes += tally.writes;
    }
    total
}

/// Starts the other side (it prints READY once connected), then both sides at once; checks the
/// counts. Returns the other side's DONE line.
async fn mixed_run(env: &Env, mut other: CuratorProcess, side: RustSide, base: &str) -> String {
    let (lock_path, marker_dir, counter_path) =
        (format!("{base}/lock"), format!("{base}/markers"), format!("{base}/counter"));
    let admin = env.framework().await;
    within("other side ready", other.expect_line("READY", STEP)).await.expect("READY");
    within("go", other.send_line("go")).await.expect("go");
    let rust = run_rust_side(env, side, &lock_path, &marker_dir, &counter_path).await;
    let done = within_for("other side done", RUN_TIMEOUT, other.expect_line("DONE", RUN_TIMEOUT))
        .await
        .expect("DONE");
    expect_success(other).await;
    let other_acquisitions = field(&done, "acquisitions");
    let total = rust.acquisitions + other_acquisitions;
    let counted = counter(&admin, &counter_path).await;
    println!(
        "{base}: rust acquisitions={} (reads={} writes={}) violations={}; other side: {done}; total acquisitions={total} counter={counted}",
        rust.acquisitions, rust.reads, rust.writes, rust.violations
    );
    assert_eq!(rust.violations, 0, "Rust saw two holders at once");
    assert_eq!(field(&done, "violations"), 0, "the other side saw two holders at once: {done}");
    assert_eq!(counted, total, "the counter must equal the acquisitions");
    assert!(total >= 500, "{total} acquisitions");
    assert!(children(&admin, &marker_dir).await.is_empty(), "a marker was left");
    within("close", admin.close()).await;
    done
}

/// The other side of a mixed run.
#[derive(Debug, Clone, Copy)]
enum OtherSide {
    /// ZooKeeper's recipe, in Java (Rust on `LockLayout::ZooKeeperRecipe`).
    Recipe,
    /// kazoo's `Lock` (Rust on `LockLayout::Kazoo`).
    KazooLock,
    /// kazoo's `ReadLock`/`WriteLock`, writes with this probability in percent (Rust on
    /// `RwLock::kazoo`, the same mix).
    KazooRw { write_percent: u64 },
}

/// A server, the counter and markers under `base`, `CONTENDERS` contenders of `other` and as
/// many Rust ones on `<base>/lock`; returns the other side's DONE line.
async fn mixed(other: OtherSide, base: &str) -> String {
    let env = Env::start().await;
    let admin = env.framework().await;
    let (marker_dir, counter_path) = (format!("{base}/markers"), format!("{base}/counter"));
    prepare(&admin, &marker_dir, &counter_path).await;
    let common = [env.connect(), format!("{base}/lock"), ITERATIONS.to_string()];
    let (process, side) = match other {
        OtherSide::Recipe => {
            let guard_path = format!("{marker_dir}/writer");
            let args = [&common[..], &[guard_path, counter_path, CONTENDERS.to_string()]].concat();
            (
                curator([&["recipe-contend".to_owned()][..], &args].concat()),
                RustSide::Mutex(LockLayout::ZooKeeperRecipe),
            )
        }
        OtherSide::KazooLock | OtherSide::KazooRw { .. } => {
            let (kind, side) = match other {
                OtherSide::KazooRw { write_percent } => {
                    (vec!["rw".to_owned(), write_percent.to_string()], RustSide::KazooRw { write_percent })
                }
                _ => (vec!["lock".to_owned()], RustSide::Mutex(LockLayout::Kazoo)),
            };
            let args = [
                &["contend".to_owned()][..],
                &common,
                &[marker_dir, counter_path, CONTENDERS.to_string()],
                &kind,
            ]
            .concat();
            (kazoo(args), side)
        }
    };
    let done = mixed_run(&env, process, side, base).await;
    within("close", admin.close()).await;
    done
}

#[tokio::test]
async fn zookeeper_recipe_java_and_rust_exclude_each_other() {
    mixed(OtherSide::Recipe, "/interop-recipe").await;
}

#[tokio::test]
async fn kazoo_lock_and_rust_exclude_each_other() {
    mixed(OtherSide::KazooLock, "/interop-kazoo-lock").await;
}

#[tokio::test]
async fn kazoo_read_write_lock_and_rust_one_writer_alone_readers_together() {
    let done = mixed(OtherSide::KazooRw { write_percent: 30 }, "/interop-kazoo-rw").await;
    assert!(field(&done, "reads") > 0 && field(&done, "writes") > 0, "kazoo took both kinds: {done}");
}

#[tokio::test]
async fn kazoo_election_and_our_leader_take_turns_and_see_each_other() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let (election_path, marker_path) = ("/interop-kazoo-election/election", "/interop-kazoo-election/leader");
    let rounds = 3;
    let mut python = kazoo([
        "election".to_owned(),
        env.connect(),
        election_path.to_owned(),
        "kazoo-1".to_owned(),
        marker_path.to_owned(),
        rounds.to_string(),
    ]);
    within("ready", python.expect_line("READY", STEP)).await.expect("READY");
    within("go", python.send_line("go")).await.expect("go");
    let election = KazooElection::new(&framework, election_path, "rust-1").expect("election");
    for round in 0..rounds {
        // kazoo leads (it queued first, and re-queues right after each of its turns).
        within("kazoo leads", python.expect_line("LEADING kazoo-1", STEP)).await.expect("LEADING");
        let rust_turn = {
            let election = election.clone();
            tokio::spawn(async move { election.lead_until(Deadline::after(STEP)).await })
        };
        // Our contender queues behind kazoo; then kazoo lists the contenders and gives up.
        common::eventually_true("our contender queued", || async {
            election.contenders().await.expect("contenders") == ["kazoo-1", "rust-1"]
        })
        .await;
        within("next", python.send_line("next")).await.expect("next");
        let contenders =
            within("contenders", python.expect_line("CONTENDERS ", STEP)).await.expect("CONTENDERS");
        assert_eq!(contenders, "kazoo-1,rust-1", "kazoo's contenders() in round {round}");

        let leadership = within("rust leads", rust_turn).await.expect("task").expect("rust leads");
        // One leader at a time: the marker kazoo's leader created is gone, ours goes in.
        let session = session(&framework).await;
        let options = session.create_options(CreateMode::Ephemeral);
        within("marker", session.client().create(marker_path, b"rust-1", &options))
            .await
            .expect("no other leader");
        if round + 1 < rounds {
            common::eventually_true("kazoo queued again", || async {
                election.contenders().await.expect("contenders") == ["rust-1", "kazoo-1"]
            })
            .await;
        }
        within("unmark", session.client().delete(marker_path, None)).await.expect("unmark");
        within("release", leadership.release()).await.expect("release");
    }
    let finished = within("kazoo finishes", python.expect_line("FINISHED", STEP)).await.expect("FINISHED");
    assert_eq!(field(&finished, "leaderships"), rounds as u64, "{finished}");
    assert_eq!(field(&finished, "violations"), 0, "{finished}");
    expect_success(python).await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_sigkilled_kazoo_holder_hands_over_once_its_session_expires() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let lock_path = "/interop-kazoo-crash/lock";
    let mut python = kazoo(["--session-timeout", "4", "hold", &env.connect(), lock_path, "kazoo-1"]);
    within("kazoo session", python.expect_line("SESSION ", STEP)).await.expect("SESSION");
    let held = within("kazoo holds", python.expect_line("HELD ", STEP)).await.expect("HELD");
    let kazoo_node = path::join(lock_path, held.trim());
    let mutex = Mutex::with_layout(&framework, lock_path, LockLayout::Kazoo).expect("mutex");
    let pending = within("enqueue", mutex.enqueue()).await.expect("enqueue");
    assert!(!pending.is_owner(), "kazoo holds the lock");
    python.kill().expect("SIGKILL kazoo");
    let guard = within("rust takes over", pending.acquired(Deadline::after(STEP))).await.expect("acquired");
    assert!(read(&framework, &kazoo_node).await.is_none(), "the killed holder's node is gone");
    within("release", guard.release()).await.expect("release");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn kazoo_readers_share_with_ours_and_writers_exclude_both_ways() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let lock_path = "/interop-kazoo-rw-share/lock";
    let ours = RwLock::kazoo(&framework, lock_path).expect("rwlock").node_data("rust-1");

    // A kazoo reader holds: our reader joins it, our writer cannot.
    let mut reader = kazoo(["hold", &env.connect(), lock_path, "kazoo-reader", "read"]);
    within("kazoo reads", reader.expect_line("HELD ", STEP)).await.expect("HELD");
    let reading = within("try_read", ours.try_read()).await.expect("try_read");
    assert!(reading.is_some(), "readers hold together");
    assert!(
        within("try_write", ours.try_write()).await.expect("try_write").is_none(),
        "a writer beside a reader"
    );
    within("release", reading.expect("read guard").release()).await.expect("release");
    reader.kill().expect("kill the kazoo reader");

    // Our writer holds: a kazoo reader waits until it is released.
    let writing = within("write", ours.write_timeout(STEP)).await.expect("write");
    let mut reader = kazoo(["hold", &env.connect(), lock_path, "kazoo-reader-2", "read"]);
    within("kazoo session", reader.expect_line("SESSION ", STEP)).await.expect("SESSION");
    common::eventually_true("kazoo's reader queued", || async {
        children(&framework, lock_path).await.len() == 2
    })
    .await;
    let early = reader.next_line(Duration::from_millis(500)).await;
    assert!(early.is_err(), "kazoo read while we wrote: {early:?}");
    within("release", writing.release()).await.expect("release");
    within("kazoo reads", reader.expect_line("HELD ", STEP)).await.expect("HELD after our writer left");
    reader.kill().expect("kill the kazoo reader");
    within("close", framework.close()).await;
}
