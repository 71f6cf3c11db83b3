//! Interop with Apache Curator 5.4 (a real JVM on the same server): the nodes Curator creates
//! compared live with ours, revocation in both directions, and a crashed Curator holder handing
//! the lock to a Rust waiter.
//!
//! Needs Java, `javac` and Debian's `libcurator-recipes-java` (`scripts/install-deps.sh`).

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::time::{Duration, Instant};

use common::{
    acl, assert_gone, children, curator, expect_success, parse_session, protected, read, session, within,
    Env, STEP,
};
use zk_recipes::framework::{local_address, path, Deadline, Framework};
use zk_recipes::lock_internals::revoke;
use zk_recipes::mutex::{Hold, Mutex};
use zk_recipes::semaphore::{Semaphore, SemaphoreMutex};

/// Explicit node data both sides give their nodes.
const GOLDEN_DATA: &str = "golden-data:42";

#[tokio::test]
async fn curator_local_address_equals_ours() {
    let mut driver = curator(["local-address"]);
    let address = within("ADDRESS", driver.expect_line("ADDRESS", STEP)).await.expect("address");
    expect_success(driver).await;
    assert_eq!(
        address,
        String::from_utf8_lossy(&local_address()),
        "Curator's default node data (CuratorFrameworkFactory.getLocalAddress()) vs local_address()"
    );
}

/// Compares a Curator node with ours: same name pattern and sequence, both ephemeral and owned by
/// the expected session, data equal to `expected_data`, same ACL; and their parents (same ACL too) up to the bases: same
/// relative path, not ephemeral, empty data (that they are CONTAINERs shows when the server reaps
/// them at the end of the test).
#[allow(clippy::too_many_arguments)]
async fn compare(
    framework: &Framework,
    label: &str,
    (java_base, java_node, java_session): (&str, &str, i64),
    (rust_base, rust_node, rust_session): (&str, &str, i64),
    expected_stem: &str,
    expected_data: &[u8],
) {
    let java = protected(framework, java_node).await;
    let rust = protected(framework, rust_node).await;
    assert_eq!(java.stem, expected_stem, "{label}: Curator's node {}", java.path);
    assert_eq!(
        rust.stem, java.stem,
        "{label}: name after the protected prefix ({} vs {})",
        rust.path, java.path
    );
    // The sequence is the parent's child version, which restarts at 0 when a container parent is
    // reaped and re-created: the semaphore's internal lock directory empties between the holder's
    // and the waiter's acquire, and the server may reap it in between (every 500 ms here), on
    // either side. Equal sequences are required only where no such gap exists.
    if !label.contains("internal lock") {
        assert_eq!(
            rust.sequence, java.sequence,
            "{label}: sequence under a fresh parent ({} vs {})",
            rust.path, java.path
        );
    }
    assert_eq!(
        java.ephemeral_owner, java_session,
        "{label}: Curator's node is EPHEMERAL, owned by its session"
    );
    assert_eq!(rust.ephemeral_owner, rust_session, "{label}: our node is EPHEMERAL, owned by our session");
    assert_eq!(
        String::from_utf8_lossy(&java.data),
        String::from_utf8_lossy(expected_data),
        "{label}: Curator's data"
    );
    assert_eq!(String::from_utf8_lossy(&rust.data), String::from_utf8_lossy(&java.data), "{label}: data");

    assert_eq!(acl(framework, rust_node).await, acl(framework, java_node).await, "{label}: ACL of the node");

    let java_relative = java_node.strip_prefix(java_base).expect("under the java base");
    let rust_relative = rust_node.strip_prefix(rust_base).expect("under the rust base");
    let (java_dir, _) = path::split(java_relative);
    let (rust_dir, _) = path::split(rust_relative);
    assert_eq!(rust_dir, java_dir, "{label}: directory of the node");
    // Every parent from the node's up to (and including) the base.
    let mut relative = java_dir.to_owned();
    loop {
        let java_parent = format!("{java_base}{relative}").trim_end_matches('/').to_owned();
        let rust_parent = format!("{rust_base}{relative}").trim_end_matches('/').to_owned();
        assert_eq!(
            acl(framework, &rust_parent).await,
            acl(framework, &java_parent).await,
            "{label}: ACL of {rust_parent}"
        );
        for parent in [&java_parent, &rust_parent] {
            let (data, stat) = read(framework, parent).await.unwrap_or_else(|| panic!("{parent} is gone"));
            // The server reports containers with ephemeral_owner 0 (DataNode.copyStat hides its
            // CONTAINER marker): container-ness shows when the test ends and the server reaps
            // every parent (`assert_gone`).
            assert_eq!(stat.ephemeral_owner, 0, "{label}: {parent} is not ephemeral: {stat:?}");
            assert!(data.is_empty(), "{label}: {parent} has empty data, not {data:?}");
        }
        if relative.is_empty() || relative == "/" {
            break;
        }
        relative = path::parent(&relative).filter(|parent| *parent != "/").unwrap_or("").to_owned();
    }
}

/// Curator and we create each kind of node on the same server, under two bases; the test compares
/// them: names, sequences, modes, data, parents.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn golden_nodes_match_curator() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let waiter_framework = env.framework().await;
    let root = "/interop-golden";
    let java_base = format!("{root}/java");
    let rust_base = format!("{root}/rust");
    let data = GOLDEN_DATA.as_bytes();

    // Curator's nodes.
    let mut driver = curator(["golden", &env.connect(), &java_base, GOLDEN_DATA]);
    let (lines, _) = within("golden HELD", driver.lines_until("HELD ", STEP)).await.expect("golden nodes");
    let mut java_session = 0;
    let mut java_waiter_session = 0;
    let mut java_nodes = std::collections::BTreeMap::new();
    for line in &lines {
        if let Some(rest) = line.strip_prefix("SESSION ") {
            java_session = parse_session(rest);
        } else if let Some(rest) = line.strip_prefix("WAITER-SESSION ") {
            java_waiter_session = parse_session(rest);
        } else if let Some(rest) = line.strip_prefix("NODE ") {
            let (label, node) = rest.split_once(' ').expect("NODE <label> <path>");
            java_nodes.insert(label.to_owned(), node.to_owned());
        }
    }
    assert!(java_session != 0 && java_waiter_session != 0, "sessions in {lines:?}");

    // Ours, in the same order.
    let rust_session = session(&framework).await.id().0;
    let rust_waiter_session = session(&waiter_framework).await.id().0;
    let mutex = Mutex::new(&framework, &format!("{rust_base}/mutex")).expect("mutex").node_data(data);
    let mutex_guard = within("mutex", mutex.lock_timeout(STEP)).await.expect("mutex");
    let default_mutex = Mutex::new(&framework, &format!("{rust_base}/mutex-default")).expect("mutex");
    let default_guard = within("default mutex", default_mutex.lock_timeout(STEP)).await.expect("mutex");
    let revocable =
        Mutex::new(&framework, &format!("{rust_base}/revocable")).expect("mutex").make_revocable();
    let revocable_guard = within("revocable", revocable.lock_timeout(STEP)).await.expect("revocable");
    let semaphore_path = format!("{rust_base}/semaphore");
    let semaphore = Semaphore::new(&framework, &semaphore_path, 1).expect("semaphore").lease_data(data);
    let lease = within("lease", semaphore.acquire_timeout(STEP)).await.expect("lease");
    let waiter_semaphore =
        Semaphore::new(&waiter_framework, &semaphore_path, 1).expect("semaphore").lease_data(data);
    let waiter = tokio::spawn(async move { waiter_semaphore.acquire_timeout(STEP).await });
    let semaphore_mutex =
        SemaphoreMutex::new(&framework, &format!("{rust_base}/semaphore-mutex")).expect("mutex");
    let semaphore_mutex_lease =
        within("semaphore mutex", semaphore_mutex.lock_timeout(STEP)).await.expect("lock");

    // Both semaphore waiters hold their internal lock and have a lease node.
    let internal_lock = |base: &str| format!("{base}/semaphore/locks");
    let leases = |base: &str| format!("{base}/semaphore/leases");
    for base in [&java_base, &rust_base] {
        within("semaphore waiter queued", async {
            while children(&framework, &internal_lock(base)).await.len() != 1
                || children(&framework, &leases(base)).await.len() != 2
            {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
    }

    let local = local_address();
    let java =
        |label: &str| java_nodes.get(label).unwrap_or_else(|| panic!("no {label} in {lines:?}")).clone();
    let cases: [(&str, String, &str, &[u8]); 5] = [
        ("mutex", mutex_guard.node_path().to_owned(), "lock-", data),
        ("mutex-default", default_guard.node_path().to_owned(), "lock-", &local),
        ("revocable", revocable_guard.node_path().to_owned(), "lock-", b""),
        ("semaphore", lease.node_path().to_owned(), "lease-", data),
        ("semaphore-mutex", semaphore_mutex_lease.node_path().to_owned(), "lease-", &local),
    ];
    for (label, rust_node, stem, expected_data) in &cases {
        compare(
            &framework,
            label,
            (&java_base, &java(label), java_session),
            (&rust_base, rust_node, rust_session),
            stem,
            expected_data,
        )
        .await;
    }

    // The semaphore waiters: internal lock node and queued lease node.
    let only_child = |children: Vec<String>, dir: &str| path::join(dir, &children[0]);
    let java_lock =
        only_child(children(&framework, &internal_lock(&java_base)).await, &internal_lock(&java_base));
    let rust_lock =
        only_child(children(&framework, &internal_lock(&rust_base)).await, &internal_lock(&rust_base));
    compare(
        &framework,
        "semaphore internal lock",
        (&java_base, &java_lock, java_waiter_session),
        (&rust_base, &rust_lock, rust_waiter_session),
        "lock-",
        &local,
    )
    .await;
    let waiting_lease = |mut children: Vec<String>, dir: &str| {
        children.sort();
        path::join(
            dir,
            &children.into_iter().find(|child| child.ends_with("0000000001")).expect("queued lease"),
        )
    };
    let java_queued = waiting_lease(children(&framework, &leases(&java_base)).await, &leases(&java_base));
    let rust_queued = waiting_lease(children(&framework, &leases(&rust_base)).await, &leases(&rust_base));
    compare(
        &framework,
        "semaphore queued lease",
        (&java_base, &java_queued, java_waiter_session),
        (&rust_base, &rust_queued, rust_waiter_session),
        "lease-",
        data,
    )
    .await;
    let mut java_layout = children(&framework, &format!("{java_base}/semaphore")).await;
    let mut rust_layout = children(&framework, &semaphore_path).await;
    java_layout.sort();
    rust_layout.sort();
    assert_eq!(java_layout, ["leases", "locks"]);
    assert_eq!(rust_layout, java_layout, "semaphore layout");

    // Release everything. Nobody deletes the parents: the server reaps them, so every parent on
    // both sides was created as a CONTAINER.
    within("send release", driver.send_line("release")).await.expect("release");
    within("RELEASED", driver.expect_line("RELEASED", STEP)).await.expect("released");
    expect_success(driver).await;
    within("release", mutex_guard.release()).await.expect("release");
    within("release", default_guard.release()).await.expect("release");
    within("release", revocable_guard.release()).await.expect("release");
    within("release", lease.release()).await.expect("release");
    let waiter_lease = within("waiter", waiter).await.expect("join").expect("waiter's lease");
    within("release", waiter_lease.release()).await.expect("release");
    within("release", semaphore_mutex_lease.release()).await.expect("release");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
    within("close", waiter_framework.close()).await;
}

/// A Curator `Revoker` asks our revocable holder to let go: `revocation_requested` resolves, we
/// release, the node is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curator_revoker_reaches_a_rust_holder() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-revoke-rust";
    let mutex = Mutex::new(&framework, &format!("{root}/lock")).expect("mutex").make_revocable();
    let guard = within("lock", mutex.lock_timeout(STEP)).await.expect("lock");
    let node = guard.node_path().to_owned();
    let (data, _) = read(&framework, &node).await.expect("our node");
    assert!(data.is_empty(), "a revocable node has empty data, as Curator's");

    // The holder is already watching its node when the Revoker writes to it.
    let revoker = async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let mut driver = curator(["revoke", &env.connect(), &node]);
        within("REVOKED", driver.expect_line("REVOKED", STEP)).await.expect("revoked");
        driver
    };
    let (requested, driver) =
        within("revocation", async { tokio::join!(guard.revocation_requested(), revoker) }).await;
    requested.expect("revocation requested");
    expect_success(driver).await;
    let (data, _) = read(&framework, &node).await.expect("our node");
    assert_eq!(data, b"__REVOKE__", "Curator's Revoker writes __REVOKE__");
    within("release", guard.release()).await.expect("release");
    assert!(read(&framework, &node).await.is_none(), "the node is gone");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// Our `revoke` reaches a Curator holder made revocable: its listener runs, it releases, and a
/// Rust waiter queued behind it gets the lock.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_revoke_reaches_a_curator_holder() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-revoke-java";
    let lock_path = format!("{root}/lock");
    let mut driver = curator(["revocable-hold", &env.connect(), &lock_path]);
    let node = within("NODE", driver.expect_line("NODE ", STEP)).await.expect("Curator holds");
    let (data, _) = read(&framework, &node).await.expect("Curator's node");
    assert!(data.is_empty(), "Curator's revocable node has empty data");

    let waiter_mutex = Mutex::new(&framework, &lock_path).expect("mutex");
    let waiter = tokio::spawn(async move { waiter_mutex.lock_timeout(STEP).await });
    within("waiter queued", async {
        while children(&framework, &lock_path).await.len() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(!waiter.is_finished(), "the waiter waits while Curator holds");

    within("revoke", revoke(&framework, &node, Deadline::after(STEP))).await.expect("revoke");
    within("REVOKE-REQUESTED", driver.expect_line("REVOKE-REQUESTED", STEP)).await.expect("listener ran");
    within("RELEASED", driver.expect_line("RELEASED", STEP)).await.expect("Curator released");
    expect_success(driver).await;
    let guard = within("waiter", waiter).await.expect("join").expect("the waiter holds");
    assert!(read(&framework, &node).await.is_none(), "Curator's node is gone");
    within("release", guard.release()).await.expect("release");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// Curator's session timeout for the crash tests (the server grants 1 s .. 60 s).
const CRASH_SESSION_TIMEOUT: Duration = Duration::from_secs(2);

/// A Curator mutex holder SIGKILLed: its node lives until the server expires its session, then
/// the Rust waiter holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_curator_mutex_holder_hands_over_after_session_timeout() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-crash-mutex";
    let lock_path = format!("{root}/lock");
    let timeout_ms = CRASH_SESSION_TIMEOUT.as_millis().to_string();
    let mut driver =
        curator(["--session-timeout-ms", &timeout_ms, "hold", "mutex", &env.connect(), &lock_path]);
    let session_line = within("SESSION", driver.expect_line("SESSION ", STEP)).await.expect("session");
    assert!(session_line.ends_with(&format!("timeout-ms={timeout_ms}")), "negotiated: {session_line}");
    let java_node = within("NODE", driver.expect_line("NODE ", STEP)).await.expect("Curator holds");

    let mutex = Mutex::new(&framework, &lock_path).expect("mutex");
    let waiter = tokio::spawn(async move { mutex.lock_timeout(STEP).await });
    within("waiter queued", async {
        while children(&framework, &lock_path).await.len() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "the waiter waits while Curator holds");

    driver.kill().expect("SIGKILL the JVM");
    let killed = Instant::now();
    let guard = within("waiter", waiter).await.expect("join").expect("the waiter holds after the expiry");
    let handed_over = killed.elapsed();
    assert!(read(&framework, &java_node).await.is_none(), "Curator's node went with its session");
    // The server expires the session one timeout after the last ping (Curator pings every third
    // of it), so the hand-over takes between 2/3 of the timeout and the timeout plus a tick.
    assert!(
        handed_over >= CRASH_SESSION_TIMEOUT / 2 && handed_over < CRASH_SESSION_TIMEOUT * 4,
        "hand-over after {handed_over:?}"
    );
    println!("mutex: the Rust waiter held {handed_over:?} after the Curator JVM was SIGKILLed");
    within("release", guard.release()).await.expect("release");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// The same for the semaphore mutex: the lease goes with Curator's session and the Rust waiter
/// (holding the internal lock meanwhile) takes it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_curator_semaphore_mutex_holder_hands_over_after_session_timeout() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-crash-semaphore-mutex";
    let lock_path = format!("{root}/lock");
    let timeout_ms = CRASH_SESSION_TIMEOUT.as_millis().to_string();
    let mut driver =
        curator(["--session-timeout-ms", &timeout_ms, "hold", "semaphore-mutex", &env.connect(), &lock_path]);
    let java_node = within("NODE", driver.expect_line("NODE ", STEP)).await.expect("Curator holds");
    let semaphore_mutex = SemaphoreMutex::new(&framework, &lock_path).expect("semaphore mutex");
    let waiter = tokio::spawn(async move { semaphore_mutex.lock_timeout(STEP).await });
    within("waiter queued", async {
        while children(&framework, &format!("{lock_path}/leases")).await.len() < 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert!(!waiter.is_finished(), "the waiter waits while Curator holds");

    driver.kill().expect("SIGKILL the JVM");
    let killed = Instant::now();
    let lease = within("waiter", waiter).await.expect("join").expect("the waiter holds after the expiry");
    let handed_over = killed.elapsed();
    assert!(read(&framework, &java_node).await.is_none(), "Curator's lease went with its session");
    assert!(
        handed_over >= CRASH_SESSION_TIMEOUT / 2 && handed_over < CRASH_SESSION_TIMEOUT * 4,
        "hand-over after {handed_over:?}"
    );
    println!("semaphore mutex: Rust waiter held {handed_over:?} after the Curator JVM was SIGKILLed");
    within("release", lease.release()).await.expect("release");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}

/// The driver exits when its stdin closes, closing its session first: a test that dies leaves no
/// JVM, and no node waits for a session timeout.
#[tokio::test]
async fn curator_driver_exits_when_its_stdin_closes() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-stdin";
    let mut driver = curator(["hold", "mutex", &env.connect(), &format!("{root}/lock")]);
    let node = within("NODE", driver.expect_line("NODE ", STEP)).await.expect("Curator holds");
    driver.close_stdin();
    let status = within("exit", driver.wait(STEP)).await.expect("the driver exits");
    assert_eq!(status.code(), Some(3), "exit status on stdin EOF");
    assert!(read(&framework, &node).await.is_none(), "the session was closed with the JVM");
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}
