//! Cache and node interop with Apache Curator 5.4 (real JVMs on the same server):
//!
//! - Curator's `CuratorCache` reports our creates, sets and deletes, and our cache reports
//!   Curator's, event for event;
//! - gzip data both ways: Curator's `compressed()` writes read by our `compressed_data()` cache,
//!   and our gzip writes read by Curator's `COMPRESSED_DATA` cache;
//! - a Curator `GroupMember` and ours in one group see each other (with Curator's default
//!   payload, the local address), and see a member leave;
//! - `PersistentNode` (protected, ephemeral-sequential) and `PersistentTtlNode` lay out the same
//!   nodes as Curator's, and Curator's TTL node and ours both go once closed.
//!
//! Needs Java, `javac` and Debian's `libcurator-recipes-java` (`scripts/install-deps.sh`).

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::time::Duration;

use common::{
    assert_gone, children, curator, expect_success, parse_session, protected, read, within, Env, STEP,
};
use zk_recipes::cache::{Cache, CacheEvent, CacheEvents};
use zk_recipes::framework::zookeeper_client::CreateMode;
use zk_recipes::framework::{local_address, Deadline, ParentMode};
use zk_recipes::nodes::{GroupMember, PersistentNode, PersistentTtlNode};
use zk_recipes_testing::CuratorProcess;

fn deadline() -> Deadline {
    Deadline::after(STEP)
}

fn hex(data: &[u8]) -> String {
    data.iter().map(|byte| format!("{byte:02x}")).collect()
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    encoder.write_all(data).expect("gzip");
    encoder.finish().expect("gzip")
}

fn gunzip(data: &[u8]) -> Vec<u8> {
    let mut plain = Vec::new();
    flate2::read::GzDecoder::new(data).read_to_end(&mut plain).expect("gunzip");
    plain
}

/// Starts a Curator `CuratorCache` on `path` and waits for its `INITIALIZED`.
async fn curator_cache(env: &Env, path: &str, options: &[&str]) -> CuratorProcess {
    let mut args = vec!["cache-watch".to_owned(), env.connect(), path.to_owned()];
    args.extend(options.iter().map(|option| option.to_string()));
    let mut driver = curator(args);
    within("SESSION", driver.expect_line("SESSION", STEP)).await.expect("SESSION");
    within("INITIALIZED", driver.expect_line("INITIALIZED", STEP)).await.expect("INITIALIZED");
    driver
}

/// The next line the driver prints.
async fn next_line(driver: &mut CuratorProcess) -> String {
    within("a line", driver.next_line(STEP)).await.expect("a line").expect("the driver is running")
}

/// Runs Curator's `node-ops` (each op awaited, in order) to completion.
async fn curator_writes(env: &Env, compressed: bool, ops: &[&str]) {
    let mut args =
        vec!["node-ops".to_owned(), env.connect(), if compressed { "on" } else { "off" }.to_owned()];
    args.extend(ops.iter().map(|op| op.to_string()));
    let mut driver = curator(args);
    within("DONE", driver.expect_line("DONE", STEP)).await.expect("DONE");
    expect_success(driver).await;
}

/// The next event of our cache, as Curator's driver would print it.
async fn next_event(events: &mut CacheEvents) -> String {
    let event = within("a cache event", events.next()).await.expect("the cache is running");
    let data = |node: &zk_recipes::cache::CachedNode| hex(node.data.as_deref().unwrap_or_default());
    match event {
        CacheEvent::Created { path, node } => format!("CREATED {path} {}", data(&node)),
        CacheEvent::Changed { path, old, new } => format!("CHANGED {path} {} {}", data(&old), data(&new)),
        CacheEvent::Deleted { path, old } => format!("DELETED {path} {}", data(&old)),
        CacheEvent::Initialized => "INITIALIZED".to_owned(),
        other => panic!("unexpected event {other:?}"),
    }
}

#[tokio::test]
async fn curator_cache_and_ours_report_each_others_writes_event_for_event() {
    let env = Env::start().await;
    let framework = env.framework().await;

    // Ours write, Curator's cache reports.
    let root = "/interop-cache/to-curator";
    let mut driver = curator_cache(&env, root, &[]).await;
    within("create", framework.create(root).data(b"r").creating_parents(ParentMode::Container))
        .await
        .expect("create");
    assert_eq!(next_line(&mut driver).await, format!("CREATED {root} {}", hex(b"r")));
    let child = format!("{root}/a");
    within("create", framework.create(&child).data(b"1")).await.expect("create");
    assert_eq!(next_line(&mut driver).await, format!("CREATED {child} {}", hex(b"1")));
    within("set", framework.set_data(&child, b"2", None, deadline())).await.expect("set");
    assert_eq!(next_line(&mut driver).await, format!("CHANGED {child} {} {}", hex(b"1"), hex(b"2")));
    within("delete", framework.delete(&child)).await.expect("delete");
    assert_eq!(next_line(&mut driver).await, format!("DELETED {child} {}", hex(b"2")));
    within("close", driver.send_line("close")).await.expect("close");
    expect_success(driver).await;

    // Curator writes, ours reports.
    let root = "/interop-cache/from-curator";
    let cache = Cache::builder(&framework, root).start().expect("cache");
    let mut events = cache.events();
    assert_eq!(next_event(&mut events).await, "INITIALIZED");
    let child = format!("{root}/b");
    curator_writes(&env, false, &["create", root, "j", "create", &child, "1"]).await;
    assert_eq!(next_event(&mut events).await, format!("CREATED {root} {}", hex(b"j")));
    assert_eq!(next_event(&mut events).await, format!("CREATED {child} {}", hex(b"1")));
    curator_writes(&env, false, &["set", &child, "2"]).await;
    assert_eq!(next_event(&mut events).await, format!("CHANGED {child} {} {}", hex(b"1"), hex(b"2")));
    curator_writes(&env, false, &["delete", &child]).await;
    assert_eq!(next_event(&mut events).await, format!("DELETED {child} {}", hex(b"2")));
    cache.close().await;
    within("cleanup", framework.delete_recursive("/interop-cache", deadline())).await.expect("cleanup");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn compressed_data_is_read_the_same_both_ways() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let text = b"compressed across languages, compressed across languages";

    // Our gzip, read by Curator's COMPRESSED_DATA cache.
    let root = "/interop-gzip/to-curator";
    let mut driver = curator_cache(&env, root, &["compressed"]).await;
    within("create", framework.create(root).data(gzip(text)).creating_parents(ParentMode::Container))
        .await
        .expect("create");
    assert_eq!(next_line(&mut driver).await, format!("CREATED {root} {}", hex(text)));
    within("close", driver.send_line("close")).await.expect("close");
    expect_success(driver).await;

    // Curator's compressed() writes, read by our compressed-data cache.
    let root = "/interop-gzip/from-curator";
    let cache = Cache::builder(&framework, root).compressed_data().start().expect("cache");
    let mut events = cache.events();
    assert_eq!(next_event(&mut events).await, "INITIALIZED");
    let text = std::str::from_utf8(text).expect("utf-8");
    curator_writes(&env, true, &["create", root, text]).await;
    assert_eq!(next_event(&mut events).await, format!("CREATED {root} {}", hex(text.as_bytes())));
    let (stored, _) = read(&framework, root).await.expect("stored");
    assert_eq!(&stored[..2], &[0x1f, 0x8b], "Curator stores gzip");
    assert_eq!(gunzip(&stored), text.as_bytes());
    cache.close().await;
    within("cleanup", framework.delete_recursive("/interop-gzip", deadline())).await.expect("cleanup");
    within("close", framework.close()).await;
}

/// Curator's member's view: id → payload (hex).
async fn curator_members(driver: &mut CuratorProcess) -> BTreeMap<String, String> {
    within("members", driver.send_line("members")).await.expect("members");
    let (lines, _) = within("MEMBERS-END", driver.lines_until("MEMBERS-END", STEP)).await.expect("members");
    lines
        .iter()
        .filter_map(|line| line.strip_prefix("MEMBER "))
        .map(|rest| {
            let (id, data) = rest.split_once(' ').unwrap_or((rest, ""));
            (id.to_owned(), data.to_owned())
        })
        .collect()
}

#[tokio::test]
async fn a_curator_group_member_and_ours_see_each_other() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let group = "/interop-group/members";
    let mut java = curator(["group-member", &env.connect(), group, "java-1", "-"]);
    within("STARTED", java.expect_line("STARTED", STEP)).await.expect("STARTED");
    let ours = GroupMember::builder(&framework, group, "rust-1").data(b"r").start().expect("member");
    within("initialized", ours.initialized(deadline())).await.expect("initialized");

    let both: BTreeMap<String, String> =
        [("java-1".to_owned(), hex(&local_address())), ("rust-1".to_owned(), hex(b"r"))].into();
    within("ours sees both", async {
        loop {
            let seen: BTreeMap<String, String> =
                ours.current_members().into_iter().map(|(id, data)| (id, hex(&data))).collect();
            if seen == both {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    within("Curator's sees both", async {
        while curator_members(&mut java).await != both {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    // The payload changes on both sides, and Curator's member leaves.
    within("set", ours.set_data(b"r2".to_vec())).await.expect("set");
    within("Curator sees the change", async {
        while curator_members(&mut java).await.get("rust-1") != Some(&hex(b"r2")) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    within("close", java.send_line("close")).await.expect("close");
    within("CLOSED", java.expect_line("CLOSED", STEP)).await.expect("CLOSED");
    expect_success(java).await;
    within("ours sees it leave", async {
        while ours.current_members().contains_key("java-1") {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    within("close", ours.close()).await.expect("close");
    assert_gone(&framework, "/interop-group").await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn persistent_and_ttl_nodes_have_curators_layout() {
    let env = Env::start().await;
    let framework = env.framework().await;

    // A protected ephemeral-sequential PersistentNode on each side.
    let mut java = curator([
        "persistent-node",
        &env.connect(),
        "EPHEMERAL_SEQUENTIAL",
        "on",
        "/interop-pnode/java/member-",
        "payload",
    ]);
    let session_line = within("SESSION", java.expect_line("SESSION", STEP)).await.expect("SESSION");
    let java_path = within("NODE", java.expect_line("NODE", STEP)).await.expect("NODE");
    let ours = PersistentNode::builder(&framework, "/interop-pnode/rust/member-")
        .mode(CreateMode::EphemeralSequential)
        .protected()
        .data(b"payload")
        .start()
        .expect("node");
    let our_path = within("created", ours.wait_for_initial_create(deadline())).await.expect("created");
    let (theirs, mine) = (protected(&framework, &java_path).await, protected(&framework, &our_path).await);
    assert_eq!((theirs.stem.as_str(), theirs.data.as_slice()), ("member-", &b"payload"[..]), "{theirs:?}");
    assert_eq!((mine.stem.as_str(), mine.data.as_slice()), ("member-", &b"payload"[..]), "{mine:?}");
    assert_eq!(theirs.ephemeral_owner, parse_session(&session_line));
    assert_eq!(mine.ephemeral_owner, framework.current().session_id.expect("session").0);
    within("close", java.send_line("close")).await.expect("close");
    within("CLOSED", java.expect_line("CLOSED", STEP)).await.expect("CLOSED");
    expect_success(java).await;
    within("close", ours.close()).await.expect("close");
    assert_gone(&framework, "/interop-pnode").await;

    // A PersistentTtlNode on each side: a container holding one TTL child `touch` with the local
    // address, gone once closed.
    let ttl = Duration::from_millis(1000);
    let mut java = curator(["ttl-node", &env.connect(), "/interop-ttl/java", "1000", "c"]);
    within("NODE", java.expect_line("NODE", STEP)).await.expect("NODE");
    within("touched", java.send_line("touched")).await.expect("touched");
    within("TOUCHED", java.expect_line("TOUCHED", STEP)).await.expect("TOUCHED");
    let ours =
        PersistentTtlNode::builder(&framework, "/interop-ttl/rust", ttl).data(b"c").start().expect("node");
    within("created", ours.wait_for_initial_create(deadline())).await.expect("created");
    within("touched", async {
        while read(&framework, "/interop-ttl/rust/touch").await.is_none() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    for side in ["java", "rust"] {
        let container = format!("/interop-ttl/{side}");
        let (data, stat) = read(&framework, &container).await.expect("container");
        assert_eq!((data.as_slice(), stat.ephemeral_owner), (&b"c"[..], 0), "{container}");
        assert_eq!(children(&framework, &container).await, vec!["touch".to_owned()], "{container}");
        let (touch, stat) = read(&framework, &format!("{container}/touch")).await.expect("touch");
        assert_eq!((touch, stat.ephemeral_owner), (local_address(), 0), "{container}/touch");
    }
    within("close", java.send_line("close")).await.expect("close");
    within("CLOSED", java.expect_line("CLOSED", STEP)).await.expect("CLOSED");
    expect_success(java).await;
    within("close", ours.close()).await.expect("close");
    // Each child expires a TTL after its last touch; then the server reaps the containers.
    assert_gone(&framework, "/interop-ttl").await;
    within("close", framework.close()).await;
}
