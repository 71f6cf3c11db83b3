//! `zkr` against a real ZooKeeper server: the read commands on nodes made by our recipes and by
//! Curator (through the Java driver), `zkr services` on instances registered by the discovery
//! crate, exit codes, `--json`, and `zkr lock` keeping two commands apart and stopping its command
//! when its session is lost.

use std::path::PathBuf;
use std::process::Output;
use std::time::{Duration, Instant};

use serde_json::Value;
use zk_recipes_discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, ServiceType, UriSpec};
use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_leader::LeaderLatch;
use zk_recipes_mutex::{Hold, Mutex};
use zk_recipes_queue::DistributedQueue;
use zk_recipes_semaphore::Semaphore;
use zk_recipes_test_support::*;
use zk_recipes_testing::{CuratorProcess, FaultProxy, TestingServer};

fn zkr_binary() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_zkr"))
}

/// Runs `zkr --connect <connect> <args>` to completion.
async fn zkr(connect: &str, args: &[&str]) -> Output {
    let mut command = tokio::process::Command::new(zkr_binary());
    command.arg("--connect").arg(connect).args(args).kill_on_drop(true);
    within("zkr", command.output()).await.expect("zkr runs")
}

/// Runs a read command with `--json`; its exit code and document.
async fn zkr_json(connect: &str, args: &[&str]) -> (i32, Value) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let output = zkr(connect, &all).await;
    let text = String::from_utf8_lossy(&output.stdout);
    let document = serde_json::from_str(&text).unwrap_or_else(|err| {
        panic!("zkr {args:?}: not JSON ({err}): {text}\n{}", String::from_utf8_lossy(&output.stderr))
    });
    (output.status.code().unwrap_or(-1), document)
}

async fn server() -> TestingServer {
    within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server")
}

fn framework(connect: &str) -> Framework {
    builder(connect, Duration::from_secs(10)).start().expect("framework")
}

fn session_hex(framework: &Framework) -> String {
    format!("0x{:x}", framework.current().session_id.expect("session").0)
}

/// `(kind, state, session, data)` of each node in a `locks` or `leader` document.
fn rows(document: &Value, key: &str) -> Vec<(String, String, String, String)> {
    document[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {document}"))
        .iter()
        .map(|row| {
            let field = |name: &str| row[name].as_str().unwrap_or_default().to_owned();
            (field("kind"), field("state"), field("session"), field("data"))
        })
        .collect()
}

#[tokio::test]
async fn locks_shows_our_holder_and_waiter_in_order_and_says_when_nothing_is_held() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let (holder, waiter) = (framework(&connect), framework(&connect));
    let guard =
        within("lock", Mutex::new(&holder, "/zkr/orders").expect("mutex").lock()).await.expect("lock");
    let waiting = Mutex::new(&waiter, "/zkr/orders").expect("mutex");
    let queued = tokio::spawn(async move { waiting.lock_timeout(Duration::from_secs(60)).await.map(drop) });
    eventually("the waiter queued", || async { children(&holder, "/zkr/orders").await.len() == 2 }).await;

    let (code, document) = zkr_json(&connect, &["locks", "/zkr/orders"]).await;
    assert_eq!(code, 0);
    assert_eq!(document["kind"], "mutex");
    let found = rows(&document, "nodes");
    assert_eq!(found.len(), 2, "{document}");
    let first_node = document["nodes"][0]["node"].as_str().expect("node").to_owned();
    assert_eq!((found[0].0.as_str(), found[0].1.as_str()), ("lock", "held"));
    assert_eq!(found[0].2, session_hex(&holder));
    assert_eq!(found[1].1, "waiting");
    assert_eq!(document["nodes"][1]["watching"].as_str(), Some(first_node.as_str()));
    assert_eq!(found[1].2, session_hex(&waiter));
    assert_eq!(document["nodes"][0]["fencing_token"].as_i64(), Some(guard.fencing_token()));

    let table = zkr(&connect, &["locks", "/zkr/orders"]).await;
    let text = String::from_utf8_lossy(&table.stdout);
    let stripped = zk_recipes_framework::path::strip_protected(&first_node);
    assert!(text.contains("held") && text.contains(&format!("waiting ({stripped})")), "{text}");

    within("release", guard.release()).await.expect("release");
    within("waiter", queued).await.expect("task").expect("the waiter got the lock");
    eventually("released", || async { children(&holder, "/zkr/orders").await.is_empty() }).await;
    let (code, document) = zkr_json(&connect, &["locks", "/zkr/orders"]).await;
    assert_eq!((code, document["kind"].as_str()), (3, Some("none")), "not held: exit code 3");
    within("close", holder.close()).await;
    within("close", waiter.close()).await;
}

/// The name in the NODE column of the `zkr locks` table for the node in `state`.
fn node_in_table(table: &str, state: &str) -> String {
    let row = table.lines().find(|line| line.split_whitespace().nth(2) == Some(state));
    let name = row.and_then(|row| row.split_whitespace().next());
    name.unwrap_or_else(|| panic!("no {state} node in:\n{table}")).to_owned()
}

#[tokio::test]
async fn revoke_takes_the_node_name_zkr_locks_prints_and_the_holder_hears_it() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let (holder, observer) = (framework(&connect), framework(&connect));
    let mutex = Mutex::new(&holder, "/zkr/revocable").expect("mutex").make_revocable();
    // Each hold lets go when asked, and says so.
    let hold = |guard: zk_recipes_mutex::MutexGuard| {
        tokio::spawn(async move {
            guard.revocation_requested().await.expect("asked to let go, not lost");
            guard.release().await.expect("released");
        })
    };

    let held = hold(within("lock", mutex.lock()).await.expect("lock"));
    let table = zkr(&connect, &["locks", "/zkr/revocable"]).await;
    let name = node_in_table(&String::from_utf8_lossy(&table.stdout), "held");
    // The name alone is not a path: a usage error that says what to write, sent nowhere.
    let alone = zkr(&connect, &["revoke", &name]).await;
    let stderr = String::from_utf8_lossy(&alone.stderr);
    assert_eq!(alone.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("zkr revoke /the/lock"), "{stderr}");
    assert!(!held.is_finished(), "nobody asked yet");

    let revoked = zkr(&connect, &["revoke", "/zkr/revocable", &name]).await;
    assert_eq!(revoked.status.code(), Some(0), "{}", String::from_utf8_lossy(&revoked.stderr));
    within("the holder heard the request and released", held).await.expect("task");
    assert!(children(&observer, "/zkr/revocable").await.is_empty(), "the lock is free");
    let (code, document) = zkr_json(&connect, &["locks", "/zkr/revocable"]).await;
    assert_eq!((code, document["kind"].as_str()), (3, Some("none")), "not held: {document}");
    // Its node is gone: nothing to revoke.
    let again = zkr(&connect, &["revoke", "/zkr/revocable", &name]).await;
    assert_eq!(again.status.code(), Some(3), "{}", String::from_utf8_lossy(&again.stderr));

    // The node's full path alone works too.
    let held = hold(within("lock", mutex.lock()).await.expect("lock"));
    let (_, document) = zkr_json(&connect, &["locks", "/zkr/revocable"]).await;
    let name = document["nodes"][0]["node"].as_str().expect("a node").to_owned();
    let revoked = zkr(&connect, &["revoke", &format!("/zkr/revocable/{name}")]).await;
    assert_eq!(revoked.status.code(), Some(0), "{}", String::from_utf8_lossy(&revoked.stderr));
    within("the holder heard the request and released", held).await.expect("task");
    assert!(children(&observer, "/zkr/revocable").await.is_empty(), "the lock is free");
    within("close", holder.close()).await;
    within("close", observer.close()).await;
}

#[tokio::test]
async fn locks_reads_a_curator_held_lock_with_a_curator_waiter() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let mut held =
        CuratorProcess::spawn(["hold", "mutex", &connect, "/zkr/curator"]).expect("Curator driver");
    let held_session = within("SESSION", held.expect_line("SESSION ", STEP)).await.expect("SESSION");
    within("HELD", held.expect_line("HELD", STEP)).await.expect("HELD");
    let mut queued =
        CuratorProcess::spawn(["hold", "mutex", &connect, "/zkr/curator"]).expect("Curator driver");
    let queued_session = within("SESSION", queued.expect_line("SESSION ", STEP)).await.expect("SESSION");
    let observer = framework(&connect);
    eventually("Curator's waiter queued", || async { children(&observer, "/zkr/curator").await.len() == 2 })
        .await;

    let (code, document) = zkr_json(&connect, &["locks", "/zkr/curator"]).await;
    assert_eq!(code, 0);
    let found = rows(&document, "nodes");
    let hex = |line: &str| format!("0x{}", line.split_whitespace().next().unwrap_or_default());
    assert_eq!((found[0].1.as_str(), found[0].2.clone()), ("held", hex(&held_session)), "{document}");
    assert_eq!(found[1].1, "waiting", "{document}");
    assert_eq!(document["nodes"][1]["watching"], document["nodes"][0]["node"]);
    assert_eq!(found[1].2, hex(&queued_session));
    let address = String::from_utf8(zk_recipes_framework::local_address()).expect("utf-8");
    assert_eq!(found[0].3, address, "Curator's default lock data, decoded as text");
    let table = zkr(&connect, &["locks", "/zkr/curator"]).await;
    println!("{}", String::from_utf8_lossy(&table.stdout));

    within("release", held.send_line("release")).await.expect("release");
    within("RELEASED", held.expect_line("RELEASED", STEP)).await.expect("RELEASED");
    within("the waiter holds", queued.expect_line("HELD", STEP)).await.expect("HELD");
    within("release", queued.send_line("release")).await.expect("release");
    within("RELEASED", queued.expect_line("RELEASED", STEP)).await.expect("RELEASED");
    within("close", observer.close()).await;
}

#[tokio::test]
async fn leader_semaphore_queue_and_tree_read_what_the_recipes_wrote() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let fw = framework(&connect);
    let (a, b) = (
        LeaderLatch::new(&fw, "/zkr/app/leader", "node-a").expect("latch"),
        LeaderLatch::new(&fw, "/zkr/app/leader", "node-b").expect("latch"),
    );
    a.start().expect("start");
    within("a leads", a.await_leadership()).await.expect("leads");
    b.start().expect("start");
    eventually("b joined", || async { children(&fw, "/zkr/app/leader").await.len() == 2 }).await;
    let (code, document) = zkr_json(&connect, &["leader", "/zkr/app/leader"]).await;
    assert_eq!(
        (code, document["layout"].as_str(), document["leader"].as_str()),
        (0, Some("latch"), Some("node-a"))
    );
    let participants: Vec<String> = rows(&document, "participants").into_iter().map(|row| row.3).collect();
    assert_eq!(participants, ["node-a", "node-b"]);
    let (code, _) = zkr_json(&connect, &["leader", "/zkr/app/nobody"]).await;
    assert_eq!(code, 3, "no leader: exit code 3");

    let semaphore = Semaphore::new(&fw, "/zkr/app/pool", 2).expect("semaphore");
    let leases = within("leases", semaphore.acquire_many(2)).await.expect("leases");
    let (code, document) = zkr_json(&connect, &["semaphore", "/zkr/app/pool", "--max", "2"]).await;
    assert_eq!(code, 0);
    assert_eq!((document["held"].as_u64(), document["waiting"].as_u64()), (Some(2), Some(0)), "{document}");

    let queue = DistributedQueue::builder(&fw, "/zkr/app/jobs").build_priority().expect("queue");
    for (item, priority) in [(b"a".to_vec(), 5), (b"b".to_vec(), 5), (b"c".to_vec(), -1)] {
        within("put", queue.put(&item, priority)).await.expect("put");
    }
    let (code, document) = zkr_json(&connect, &["queue", "/zkr/app/jobs"]).await;
    assert_eq!(
        (code, document["layout"].as_str(), document["depth"].as_u64()),
        (0, Some("priority"), Some(3))
    );
    assert_eq!(document["priorities"], serde_json::json!({"-1": 1, "5": 2}));
    assert!(document["oldest_age_ms"].as_i64().is_some_and(|age| age >= 0));
    let (code, _) = zkr_json(&connect, &["queue", "/zkr/app/none"]).await;
    assert_eq!(code, 3, "empty: exit code 3");

    let (code, document) = zkr_json(&connect, &["tree", "/zkr/app"]).await;
    assert_eq!(code, 0);
    let found: Vec<(String, String)> = document["recipes"]
        .as_array()
        .expect("recipes")
        .iter()
        .map(|row| {
            (
                row["path"].as_str().unwrap_or_default().to_owned(),
                row["recipe"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        found,
        [
            ("/zkr/app/jobs".to_owned(), "priority queue".to_owned()),
            ("/zkr/app/leader".to_owned(), "leader latch".to_owned()),
            ("/zkr/app/pool".to_owned(), "semaphore".to_owned()),
        ]
    );
    for lease in leases {
        within("release", lease.release()).await.expect("release");
    }
    within("close", a.close(Default::default())).await.expect("close");
    within("close", b.close(Default::default())).await.expect("close");
    within("close", fw.close()).await;
}

#[tokio::test]
async fn two_zkr_lock_commands_never_run_at_once() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let dir = tempfile_dir();
    let marker = dir.join("marker");
    // Fails (exit 7) if the other command's marker is there: `set -C` refuses to overwrite.
    let script = format!("set -C; echo $$ > {0} || exit 7; sleep 0.2; rm {0}", marker.display());
    let runs = (0..2).map(|_| {
        let (connect, script) = (connect.clone(), script.clone());
        tokio::spawn(async move {
            let mut codes = Vec::new();
            for _ in 0..4 {
                let output = zkr(&connect, &["lock", "/zkr/exclusive", "--", "sh", "-c", &script]).await;
                codes.push(output.status.code());
            }
            codes
        })
    });
    for run in runs {
        let codes = within("runs", run).await.expect("task");
        assert_eq!(codes, vec![Some(0); 4], "every command ran alone and exited 0");
    }
    assert!(!marker.exists());
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn zkr_lock_stops_its_command_when_the_session_is_lost() {
    init_tracing();
    let server = server().await;
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let dir = tempfile_dir();
    let pid_file = dir.join("pid");
    let script = format!("echo $$ > {}; exec sleep 120", pid_file.display());
    let mut command = tokio::process::Command::new(zkr_binary());
    command
        .args(["--connect", &proxy.connect_string(), "--session-timeout", "2s", "--grace", "1s"])
        .args(["lock", "/zkr/lost", "--", "sh", "-c", &script])
        .kill_on_drop(true);
    let mut zkr = command.spawn().expect("zkr");
    eventually("the command runs", || async {
        std::fs::read_to_string(&pid_file).is_ok_and(|pid| !pid.trim().is_empty())
    })
    .await;
    let pid: i32 = std::fs::read_to_string(&pid_file).expect("pid").trim().parse().expect("a pid");

    let cut = Instant::now();
    proxy.black_hole(Duration::from_secs(30));
    let status = within("zkr exits", zkr.wait()).await.expect("status");
    assert_eq!(status.code(), Some(1), "lost: exit code 1");
    assert!(
        cut.elapsed() < Duration::from_secs(10),
        "stopped within the session timeout and the grace: {:?}",
        cut.elapsed()
    );
    let alive = std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ");
    assert!(!alive, "the command (pid {pid}) was stopped");
    proxy.heal();
    let observer = framework(&server.connect_string());
    eventually("the lock node went with the session", || async {
        children(&observer, "/zkr/lost").await.is_empty()
    })
    .await;
    within("close", observer.close()).await;
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn usage_errors_exit_2_and_connection_failures_exit_1() {
    let output = within("zkr", tokio::process::Command::new(zkr_binary()).args(["locks"]).output())
        .await
        .expect("zkr");
    assert_eq!(output.status.code(), Some(2), "a missing path is a usage error");
    let output = within(
        "zkr",
        tokio::process::Command::new(zkr_binary())
            .args(["--connect", "127.0.0.1:1", "--connect-timeout", "1s", "locks", "/x"])
            .output(),
    )
    .await
    .expect("zkr");
    assert_eq!(output.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&output.stderr).contains("zkr:"), "an error message");
    let output = within(
        "zkr",
        tokio::process::Command::new(zkr_binary()).args(["--tls-cert", "c.pem", "locks", "/x"]).output(),
    )
    .await
    .expect("zkr");
    assert_eq!(output.status.code(), Some(2), "a certificate needs its key");
    let output = within(
        "zkr",
        tokio::process::Command::new(zkr_binary())
            .args(["--connect", "127.0.0.1:1", "--tls-ca", "/nonexistent/ca.pem", "locks", "/x"])
            .output(),
    )
    .await
    .expect("zkr");
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("TLS") || stderr.contains("/nonexistent/ca.pem"), "says why: {stderr}");
}

fn tempfile_dir() -> PathBuf {
    let dir = std::env::temp_dir().join(format!("zkr-test-{}-{}", std::process::id(), fastrand_suffix()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn fastrand_suffix() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |since| since.as_nanos())
}

/// `zkr semaphore --max N` splits holders from waiters as the recipe does
/// (`Semaphore::participants`), and lists each apart.
#[tokio::test]
async fn semaphore_shows_holders_and_waiters_apart() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let fw = framework(&connect);
    let semaphore = Semaphore::new(&fw, "/zkr/split/pool", 2).expect("semaphore");
    let leases = within("leases", semaphore.acquire_many(2)).await.expect("leases");
    let waiter = {
        let semaphore = semaphore.clone();
        tokio::spawn(async move { semaphore.acquire().await })
    };
    eventually("a waiter in line", || async {
        semaphore.participants().await.is_ok_and(|split| split.waiting.len() == 1)
    })
    .await;
    let split = within("participants", semaphore.participants()).await.expect("participants");
    let names = |nodes: &[String]| -> Vec<String> {
        nodes.iter().map(|node| zk_recipes_framework::path::name(node).to_owned()).collect()
    };
    let rows = |document: &Value, key: &str| -> Vec<(String, String)> {
        document[key]
            .as_array()
            .unwrap_or_else(|| panic!("{key}: {document}"))
            .iter()
            .map(|row| {
                let field = |name: &str| row[name].as_str().unwrap_or_default().to_owned();
                (field("node"), field("state"))
            })
            .collect()
    };

    let (code, document) = zkr_json(&connect, &["semaphore", "/zkr/split/pool", "--max", "2"]).await;
    assert_eq!(code, 0);
    assert_eq!((document["held"].as_u64(), document["waiting"].as_u64()), (Some(2), Some(1)), "{document}");
    let holders = rows(&document, "holders");
    assert_eq!(holders.iter().map(|(node, _)| node.clone()).collect::<Vec<_>>(), names(&split.holders));
    assert!(holders.iter().all(|(_, state)| state == "held"), "{holders:?}");
    let waiters = rows(&document, "waiters");
    assert_eq!(waiters.iter().map(|(node, _)| node.clone()).collect::<Vec<_>>(), names(&split.waiting));
    assert!(waiters.iter().all(|(_, state)| state.starts_with("waiting")), "{waiters:?}");

    let text = zkr(&connect, &["semaphore", "/zkr/split/pool", "--max", "2"]).await;
    let text = String::from_utf8_lossy(&text.stdout);
    let (held_part, waiting_part) =
        text.split_once("waiting:\n").unwrap_or_else(|| panic!("no waiting section: {text}"));
    assert!(held_part.contains("holders:\n"), "{text}");
    assert!(names(&split.holders).iter().all(|node| held_part.contains(node.as_str())), "{text}");
    assert!(names(&split.waiting).iter().all(|node| waiting_part.contains(node.as_str())), "{text}");

    let (_, document) = zkr_json(&connect, &["semaphore", "/zkr/split/pool"]).await;
    assert!(
        document["holders"].is_null() && document["waiters"].is_null(),
        "no split without --max: {document}"
    );
    assert_eq!(document["leases"].as_array().map(Vec::len), Some(3), "{document}");

    waiter.abort();
    let _ = waiter.await;
    for lease in leases {
        within("release", lease.release()).await.expect("release");
    }
    within("close", fw.close()).await;
}

#[tokio::test]
async fn elect_and_semaphore_run_the_command_while_holding_and_pass_on_its_exit_code() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let dir = tempfile_dir();
    let started = dir.join("started");
    let release = dir.join("release");
    // Leads while it waits for the release file, then exits 5.
    let script = format!(
        "touch {}; while [ ! -e {} ]; do sleep 0.05; done; exit 5",
        started.display(),
        release.display()
    );
    let mut command = tokio::process::Command::new(zkr_binary());
    command.args([
        "--connect",
        &connect,
        "elect",
        "/zkr/elect",
        "--id",
        "runner-1",
        "--",
        "sh",
        "-c",
        &script,
    ]);
    let mut elected = command.kill_on_drop(true).spawn().expect("zkr");
    eventually("the command runs", || async { started.exists() }).await;
    let (code, document) = zkr_json(&connect, &["leader", "/zkr/elect"]).await;
    assert_eq!((code, document["leader"].as_str()), (0, Some("runner-1")), "it leads while the command runs");
    std::fs::write(&release, b"").expect("release");
    let status = within("zkr exits", elected.wait()).await.expect("status");
    assert_eq!(status.code(), Some(5), "the command's exit code");
    let (code, _) = zkr_json(&connect, &["leader", "/zkr/elect"]).await;
    assert_eq!(code, 3, "no leader once it is done");

    let output =
        zkr(&connect, &["semaphore", "/zkr/pool", "--leases", "2", "--", "sh", "-c", "exit 4"]).await;
    assert_eq!(output.status.code(), Some(4), "{}", String::from_utf8_lossy(&output.stderr));
    let (code, document) = zkr_json(&connect, &["semaphore", "/zkr/pool", "--max", "2"]).await;
    assert_eq!((code, document["held"].as_u64()), (3, Some(0)), "the lease was given back: {document}");
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn leader_semaphore_and_queue_read_what_curator_wrote() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let spawn = |args: &[&str]| CuratorProcess::spawn(args.iter().copied()).expect("Curator driver");

    let mut leader = spawn(&["latch", &connect, "/zkr/curator-app/leader", "java-leader"]);
    within("LEADER", leader.expect_line("LEADER", STEP)).await.expect("Curator leads");
    let mut follower = spawn(&["latch", &connect, "/zkr/curator-app/leader", "java-follower"]);
    within("STARTED", follower.expect_line("STARTED", STEP)).await.expect("started");
    let observer = framework(&connect);
    eventually("both joined", || async { children(&observer, "/zkr/curator-app/leader").await.len() == 2 })
        .await;
    let (code, document) = zkr_json(&connect, &["leader", "/zkr/curator-app/leader"]).await;
    assert_eq!(
        (code, document["layout"].as_str(), document["leader"].as_str()),
        (0, Some("latch"), Some("java-leader"))
    );
    let ids: Vec<String> = rows(&document, "participants").into_iter().map(|row| row.3).collect();
    assert_eq!(ids, ["java-leader", "java-follower"]);

    let mut lease = spawn(&["hold", "semaphore", &connect, "/zkr/curator-app/pool", "-", "2"]);
    within("HELD", lease.expect_line("HELD", STEP)).await.expect("Curator holds a lease");
    let (code, document) = zkr_json(&connect, &["semaphore", "/zkr/curator-app/pool", "--max", "2"]).await;
    assert_eq!(
        (code, document["held"].as_u64(), document["waiting"].as_u64()),
        (0, Some(1), Some(0)),
        "{document}"
    );

    let mut put =
        spawn(&["queue-put", &connect, "priority", "/zkr/curator-app/jobs", "-", "a@5", "b@5", "c@-1"]);
    within("DONE", put.expect_line("DONE", STEP)).await.expect("Curator put");
    let (code, document) = zkr_json(&connect, &["queue", "/zkr/curator-app/jobs"]).await;
    assert_eq!(
        (code, document["layout"].as_str(), document["depth"].as_u64()),
        (0, Some("priority"), Some(3))
    );
    assert_eq!(document["priorities"], serde_json::json!({"-1": 1, "5": 2}));

    for (driver, line) in [(&mut leader, "close"), (&mut follower, "close"), (&mut lease, "release")] {
        within("stop", driver.send_line(line)).await.expect("stop the driver");
    }
    within("close", observer.close()).await;
}

/// `zkr ... | head`: a reader that goes away before zkr writes is no error; zkr neither panics
/// ("failed printing to stdout: Broken pipe") nor reports it, and its exit code is the command's.
#[tokio::test]
async fn a_reader_that_goes_away_ends_zkr_quietly() {
    init_tracing();
    let server = server().await;
    let framework = framework(&server.connect_string());
    let held =
        within("lock", Mutex::new(&framework, "/pipe/lock").expect("mutex").lock()).await.expect("lock");
    for args in [&["locks", "/pipe/lock"][..], &["--json", "locks", "/pipe/lock"], &["tree", "/"]] {
        let mut command = tokio::process::Command::new(zkr_binary());
        command
            .arg("--connect")
            .arg(server.connect_string())
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn().expect("zkr starts");
        // The reader is gone before zkr has connected, so its first write meets a closed pipe.
        drop(child.stdout.take());
        let output = within("zkr", child.wait_with_output()).await.expect("zkr runs");
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(!stderr.contains("panicked") && !stderr.contains("Broken pipe"), "zkr {args:?}: {stderr}");
        assert_eq!(output.status.code(), Some(0), "zkr {args:?}: {stderr}");
    }
    within("release", held.release()).await.expect("release");
    within("close", framework.close()).await;
}

/// The cells of the table row whose first cell is `first`.
fn table_row(table: &str, first: &str) -> Vec<String> {
    let row = table.lines().find(|line| line.split_whitespace().next() == Some(first));
    row.unwrap_or_else(|| panic!("no row {first:?} in:\n{table}"))
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// `zkr services` lists what the discovery crate registered (Curator's layout and JSON): the
/// services with their instance counts, one service's instances as a table, and with `--json`
/// each instance's node data as stored, one line each. A missing base path or service is an empty
/// answer (exit 3, as every read command's "no"), and nothing is ever written.
#[tokio::test]
async fn services_lists_the_services_and_their_instances_as_stored() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let fw = framework(&connect);
    let deadline = || Deadline::after(STEP);
    // Curator's default serializer (no `enabled`), and one that writes `enabled` (Curator's
    // `new JsonInstanceSerializer(cls, false)`), for a disabled instance.
    let discovery = ServiceDiscovery::builder(&fw, "/services").build().expect("discovery");
    let writes_enabled = ServiceDiscovery::builder(&fw, "/services")
        .serializer(JsonInstanceSerializer::new().write_enabled(true))
        .build()
        .expect("discovery");
    let api_1 = ServiceInstance::builder("api")
        .id("api-1")
        .address("10.0.0.7")
        .port(8080)
        .payload(serde_json::json!({"@class": "java.util.LinkedHashMap", "zone": "eu-1"}))
        .registration_time_utc(1_700_000_000_123)
        .uri_spec(UriSpec::parse("{scheme}://{address}:{port}").expect("spec"))
        .build();
    let api_2 = ServiceInstance::builder("api")
        .id("api-2")
        .address("10.0.0.8")
        .ssl_port(8443)
        .registration_time_utc(1_700_000_060_000)
        .service_type(ServiceType::Static)
        .enabled(false)
        .build();
    let billing = ServiceInstance::builder("billing").id("billing-1").port(9000).build();
    within("register", discovery.register(&api_1, deadline())).await.expect("register");
    within("register", writes_enabled.register(&api_2, deadline())).await.expect("register");
    within("register", discovery.register(&billing, deadline())).await.expect("register");

    // The services, with their instance counts.
    let listed = zkr(&connect, &["services"]).await;
    let text = String::from_utf8_lossy(&listed.stdout);
    println!("{text}");
    assert_eq!(listed.status.code(), Some(0), "{}", String::from_utf8_lossy(&listed.stderr));
    assert!(text.starts_with("/services: 2 services\n"), "{text}");
    assert_eq!(table_row(&text, "NAME"), ["NAME", "INSTANCES"]);
    assert_eq!(table_row(&text, "api"), ["api", "2"]);
    assert_eq!(table_row(&text, "billing"), ["billing", "1"]);
    let (code, document) = zkr_json(&connect, &["services"]).await;
    assert_eq!(code, 0);
    assert_eq!(
        document,
        serde_json::json!({
            "base_path": "/services",
            "services": [{"name": "api", "instances": 2}, {"name": "billing", "instances": 1}],
        })
    );

    // One service's instances, as a table.
    let listed = zkr(&connect, &["services", "api"]).await;
    let text = String::from_utf8_lossy(&listed.stdout);
    println!("{text}");
    assert_eq!(listed.status.code(), Some(0), "{}", String::from_utf8_lossy(&listed.stderr));
    assert!(text.starts_with("/services/api: 2 instances\n"), "{text}");
    assert!(text.contains("ID ") && text.contains("SSL PORT") && text.contains("REGISTERED (UTC)"), "{text}");
    assert_eq!(
        table_row(&text, "api-1"),
        [
            "api-1",
            "10.0.0.7",
            "8080",
            "-",
            "DYNAMIC",
            "yes",
            "2023-11-14T22:13:20.123Z",
            "http://10.0.0.7:8080"
        ]
    );
    assert_eq!(
        table_row(&text, "api-2"),
        ["api-2", "10.0.0.8", "-", "8443", "STATIC", "no", "2023-11-14T22:14:20.000Z", "-"]
    );

    // With --json: each instance's node data as stored, one line each, in node-name order.
    let listed = zkr(&connect, &["--json", "services", "api"]).await;
    assert_eq!(listed.status.code(), Some(0), "{}", String::from_utf8_lossy(&listed.stderr));
    let text = String::from_utf8(listed.stdout).expect("UTF-8");
    println!("{text}");
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    for (line, instance, serializer) in [
        (lines[0], &api_1, JsonInstanceSerializer::new()),
        (lines[1], &api_2, JsonInstanceSerializer::new().write_enabled(true)),
    ] {
        let node = format!("/services/api/{}", instance.id);
        let (stored, _) = on_server(&fw, &node).await.unwrap_or_else(|| panic!("no node {node}"));
        assert_eq!(line.as_bytes(), stored.as_slice(), "the node's data, byte for byte");
        assert_eq!(line.as_bytes(), serializer.serialize(instance).expect("serialize"), "Curator's JSON");
        let read: ServiceInstance = serializer.deserialize(line.as_bytes()).expect("an instance");
        assert_eq!(&read, instance);
    }
    assert!(lines[1].ends_with(r#""enabled":false}"#), "`enabled` as stored: {}", lines[1]);
    assert!(!lines[0].contains("enabled"), "left out as stored: {}", lines[0]);

    // Another base path (Curator's own example uses /discovery/example).
    let example = ServiceDiscovery::builder(&fw, "/discovery/example").build().expect("discovery");
    let elsewhere = ServiceInstance::builder("worker").id("worker-1").build();
    within("register", example.register(&elsewhere, deadline())).await.expect("register");
    let (code, document) = zkr_json(&connect, &["services", "--base-path", "/discovery/example"]).await;
    assert_eq!((code, &document["services"]), (0, &serde_json::json!([{"name": "worker", "instances": 1}])));

    // Nothing there: an empty answer, exit 3 ("no"), and nothing written.
    let missing = zkr(&connect, &["services", "nothing"]).await;
    assert_eq!(missing.status.code(), Some(3), "{}", String::from_utf8_lossy(&missing.stderr));
    assert_eq!(String::from_utf8_lossy(&missing.stdout), "/services/nothing: no instance\n");
    let missing = zkr(&connect, &["--json", "services", "nothing"]).await;
    assert_eq!((missing.status.code(), missing.stdout.is_empty()), (Some(3), true), "no line at all");
    let missing = zkr(&connect, &["services", "--base-path", "/nowhere"]).await;
    assert_eq!(missing.status.code(), Some(3));
    assert_eq!(String::from_utf8_lossy(&missing.stdout), "/nowhere: no service\n");
    let (code, document) = zkr_json(&connect, &["services", "--base-path", "/nowhere"]).await;
    assert_eq!((code, &document["services"]), (3, &serde_json::json!([])));
    for never_written in ["/services/nothing", "/nowhere"] {
        let found = within("exists", fw.exists(never_written, deadline())).await.expect("exists");
        assert!(found.is_none(), "zkr services wrote {never_written}");
    }

    // A node that is not an instance is left out, and said so on stderr.
    within("create", fw.create("/services/api/junk").data(b"not json".to_vec()).deadline(deadline()))
        .await
        .expect("create");
    let listed = zkr(&connect, &["--json", "services", "api"]).await;
    let stderr = String::from_utf8_lossy(&listed.stderr);
    assert_eq!(listed.status.code(), Some(0), "{stderr}");
    assert_eq!(String::from_utf8_lossy(&listed.stdout).lines().count(), 2);
    assert!(stderr.contains("/services/api/junk") && stderr.contains("left out"), "{stderr}");

    // A name that is not one node name is a usage error, before anything is sent.
    let usage = zkr(&connect, &["services", "api/api-1"]).await;
    assert_eq!(usage.status.code(), Some(2), "{}", String::from_utf8_lossy(&usage.stderr));

    for discovery in [discovery, writes_enabled, example] {
        within("close", discovery.close(deadline())).await.expect("close");
    }
    within("close", fw.close()).await;
}

/// `zkr ensemble` on a reconfigurable ensemble: every server of `/zookeeper/config` with its
/// client address, and the one this client is connected to marked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ensemble_lists_the_servers_and_marks_the_connected_one() {
    let cluster = within_for(
        Duration::from_secs(120),
        "cluster start",
        zk_recipes_testing::TestingCluster::builder().size(3).reconfig(true).start(),
    )
    .await
    .expect("a reconfigurable ensemble");
    let first = cluster.member(0).expect("a first member");
    let (code, document) = zkr_json(&first.connect_string(), &["ensemble"]).await;
    assert_eq!(code, 0, "{document}");
    let servers = document["servers"].as_array().unwrap_or_else(|| panic!("no servers in {document}"));
    let clients: Vec<&str> = servers.iter().map(|server| server["client"].as_str().unwrap_or("")).collect();
    let expected: Vec<String> = cluster.members().iter().map(|member| member.address().to_string()).collect();
    assert_eq!(clients, expected, "one server per member, in id order: {document}");
    assert!(servers.iter().all(|server| server["role"] == "participant"), "{document}");
    assert!(document["version"].as_str().is_some_and(|version| !version.is_empty()), "{document}");
    if cfg!(target_os = "linux") {
        let marked: Vec<&Value> = servers.iter().filter(|server| server["connected"] == true).collect();
        assert_eq!(marked.len(), 1, "exactly one server is marked: {document}");
        assert_eq!(marked[0]["client"], first.address().to_string(), "{document}");
        assert_eq!(document["connected_to"], first.address().to_string(), "{document}");
    }

    let table = zkr(&first.connect_string(), &["ensemble"]).await;
    let text = String::from_utf8_lossy(&table.stdout);
    assert!(table.status.success(), "{text}");
    assert_eq!(text.lines().filter(|line| line.starts_with("server.")).count(), 3, "{text}");
}
