//! `PersistentTtlNode` and `GroupMember` against a real ZooKeeper server (TTL nodes enabled, the
//! container check every 500 ms): kept while touched, gone a TTL after the process stops,
//! membership converging through joins, payload changes, a crashed member and its return.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::{local_address, Error as FrameworkError, Framework, WatchEvent};
use zk_recipes_nodes::{GroupMember, MemberEvent, NodeError, PersistentTtlNode};
use zk_recipes_test_support::*;
use zk_recipes_testing::FaultProxy;

/// The node's `mzxid`, if it exists.
async fn modified(framework: &Framework, path: &str) -> Option<i64> {
    within("exists", framework.exists(path, step())).await.expect("exists").map(|stat| stat.mzxid)
}

/// Waits for `path` to be deleted, at most `limit`; whether it was.
async fn deleted_within(framework: &Framework, path: &str, limit: Duration) -> bool {
    let mut watch = within("watch", framework.watch(path, false, step())).await.expect("watch");
    if modified(framework, path).await.is_none() {
        return true;
    }
    tokio::time::timeout(limit, async {
        while let Some(event) = watch.next().await {
            if matches!(event, WatchEvent::Deleted { .. }) {
                return;
            }
        }
    })
    .await
    .is_ok()
}

#[tokio::test]
async fn a_ttl_node_stays_while_touched_and_goes_a_ttl_after_close() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let ttl = Duration::from_millis(800);
    let node =
        PersistentTtlNode::builder(&framework, "/ttl/kept/node", ttl).data(b"job").start().expect("node");
    let path = within("created", node.wait_for_initial_create(step())).await.expect("created");
    assert_eq!(path, "/ttl/kept/node");
    eventually("touched at once", || async { modified(&framework, "/ttl/kept/node/touch").await.is_some() })
        .await;
    let read = within("get", framework.get_data("/ttl/kept/node/touch", step())).await.expect("touch");
    assert_eq!(read.data, local_address(), "the touch child holds the local address, as Curator's");
    let container = within("get", framework.get_data("/ttl/kept/node", step())).await.expect("container");
    assert_eq!((container.data.as_slice(), container.stat.ephemeral_owner), (&b"job"[..], 0));

    // Four TTLs (and several container checks) pass without a delete, the child touched again.
    let first_touch = modified(&framework, "/ttl/kept/node/touch").await;
    assert!(!deleted_within(&framework, "/ttl/kept/node", ttl * 4).await, "kept while touched");
    assert!(modified(&framework, "/ttl/kept/node/touch").await > first_touch, "touched again");

    within("close", node.close()).await.expect("close");
    assert!(
        deleted_within(&framework, "/ttl/kept/node", ttl + Duration::from_secs(10)).await,
        "the child expires a TTL after its last touch, then the container is reaped"
    );
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_deleted_touch_child_or_container_comes_back_and_a_dropped_node_goes() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let ttl = Duration::from_millis(600);
    let node = PersistentTtlNode::builder(&framework, "/ttl/back", ttl).start().expect("node");
    within("created", node.wait_for_initial_create(step())).await.expect("created");
    eventually("touched", || async { modified(&other, "/ttl/back/touch").await.is_some() }).await;

    within("delete child", other.delete("/ttl/back/touch")).await.expect("delete");
    eventually("child back", || async { modified(&other, "/ttl/back/touch").await.is_some() }).await;
    within("delete both", other.delete("/ttl/back").deleting_children_if_needed()).await.expect("delete");
    eventually("container and child back", || async { modified(&other, "/ttl/back/touch").await.is_some() })
        .await;

    drop(node);
    assert!(
        deleted_within(&other, "/ttl/back", ttl + Duration::from_secs(10)).await,
        "dropped: no longer touched, so gone a TTL later (drop deletes nothing itself)"
    );
    within("close", framework.close()).await;
    within("close", other.close()).await;
}

#[tokio::test]
async fn ttl_node_bad_input_is_refused_before_anything_is_sent() {
    init_tracing();
    let framework = builder("127.0.0.1:1", Duration::from_secs(10)).start().expect("framework");
    let second = Duration::from_secs(1);
    let cases = [
        ("no TTL", PersistentTtlNode::builder(&framework, "/t", Duration::ZERO).start()),
        ("factor 0", PersistentTtlNode::builder(&framework, "/t", second).touch_factor(0).start()),
        ("child a/b", PersistentTtlNode::builder(&framework, "/t", second).touch_child("a/b").start()),
        ("child empty", PersistentTtlNode::builder(&framework, "/t", second).touch_child("").start()),
        ("period < 1 ms", PersistentTtlNode::builder(&framework, "/t", Duration::from_millis(1)).start()),
    ];
    for (what, started) in cases {
        assert!(matches!(started, Err(NodeError::InvalidArgument(_))), "{what}: {started:?}");
    }
    let invalid = PersistentTtlNode::builder(&framework, "t", second).start();
    assert!(matches!(invalid, Err(NodeError::Framework(FrameworkError::InvalidPath { .. }))), "{invalid:?}");
    let large = PersistentTtlNode::builder(&framework, "/t", second).data(vec![0u8; 2 << 20]).start();
    assert!(matches!(large, Err(NodeError::Framework(FrameworkError::DataTooLarge { .. }))), "{large:?}");
    within("close", framework.close()).await;
}

fn payloads(members: BTreeMap<String, Arc<[u8]>>) -> BTreeMap<String, Vec<u8>> {
    members.into_iter().map(|(id, data)| (id, data.to_vec())).collect()
}

fn expected(pairs: &[(&str, &str)]) -> BTreeMap<String, Vec<u8>> {
    pairs.iter().map(|(id, data)| (id.to_string(), data.as_bytes().to_vec())).collect()
}

/// Waits until `member` sees exactly `pairs`.
async fn sees(member: &GroupMember, pairs: &[(&str, &str)]) {
    let want = expected(pairs);
    eventually(&format!("{} sees {pairs:?}", member.id()), || async {
        payloads(member.current_members()) == want
    })
    .await;
}

#[tokio::test]
async fn members_see_each_other_join_change_and_leave() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let second = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let a = GroupMember::builder(&framework, "/group/one", "a").data(b"10.0.0.1").start().expect("a");
    within("a ready", a.initialized(step())).await.expect("a");
    assert_eq!(payloads(a.current_members()), expected(&[("a", "10.0.0.1")]), "itself, at once");
    let mut a_events = a.events();
    let b = GroupMember::builder(&second, "/group/one", "b").data(b"10.0.0.2").start().expect("b");
    within("b ready", b.initialized(step())).await.expect("b");
    sees(&a, &[("a", "10.0.0.1"), ("b", "10.0.0.2")]).await;
    sees(&b, &[("a", "10.0.0.1"), ("b", "10.0.0.2")]).await;

    within("set", b.set_data(b"10.0.0.22".to_vec())).await.expect("set");
    sees(&a, &[("a", "10.0.0.1"), ("b", "10.0.0.22")]).await;
    within("b leaves", b.close()).await.expect("close");
    sees(&a, &[("a", "10.0.0.1")]).await;

    let mut seen = Vec::new();
    while let Some(event) = a_events.try_next() {
        seen.push(event);
    }
    let b_events: Vec<_> = seen
        .into_iter()
        .filter(|event| match event {
            MemberEvent::Joined { id, .. } | MemberEvent::Changed { id, .. } | MemberEvent::Left { id } => {
                id == "b"
            }
            _ => false,
        })
        .collect();
    assert_eq!(
        b_events,
        vec![
            MemberEvent::Joined { id: "b".into(), data: Arc::from(&b"10.0.0.2"[..]) },
            MemberEvent::Changed { id: "b".into(), data: Arc::from(&b"10.0.0.22"[..]) },
            MemberEvent::Left { id: "b".into() },
        ]
    );
    assert_eq!(GroupMember::id_from_path("/group/one/b"), "b");
    within("a leaves", a.close()).await.expect("close");
    assert!(children(&framework, "/group/one").await.is_empty(), "no member node left");
    within("close", framework.close()).await;
    within("close", second.close()).await;
}

#[tokio::test]
async fn a_crashed_member_leaves_when_its_session_expires_and_comes_back_with_a_new_one() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let cut_off = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let stays = GroupMember::builder(&framework, "/group/crash", "stays").data(b"s").start().expect("member");
    let crashes =
        GroupMember::builder(&cut_off, "/group/crash", "crashes").data(b"c").start().expect("member");
    within("ready", crashes.initialized(step())).await.expect("ready");
    sees(&stays, &[("crashes", "c"), ("stays", "s")]).await;

    let mut events = cut_off.connection_events();
    let negotiated = cut_off.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    sees(&stays, &[("stays", "s")]).await;
    lost_then_reconnected(&mut events).await;
    sees(&stays, &[("crashes", "c"), ("stays", "s")]).await;
    sees(&crashes, &[("crashes", "c"), ("stays", "s")]).await;
    within("close", crashes.close()).await.expect("close");
    within("close", stays.close()).await.expect("close");
    within("close", framework.close()).await;
    within("close", cut_off.close()).await;
}

#[tokio::test]
async fn group_member_bad_input_is_refused_before_anything_is_sent() {
    init_tracing();
    let framework = builder("127.0.0.1:1", Duration::from_secs(10)).start().expect("framework");
    for id in ["", "a/b", ".", ".."] {
        let started = GroupMember::builder(&framework, "/g", id).start();
        assert!(matches!(started, Err(NodeError::InvalidArgument(_))), "id {id:?}: {started:?}");
    }
    let invalid = GroupMember::builder(&framework, "g/", "a").start();
    assert!(matches!(invalid, Err(NodeError::Framework(FrameworkError::InvalidPath { .. }))), "{invalid:?}");
    let large = GroupMember::builder(&framework, "/g", "a").data(vec![0u8; 2 << 20]).start();
    assert!(matches!(large, Err(NodeError::Framework(FrameworkError::DataTooLarge { .. }))), "{large:?}");
    within("close", framework.close()).await;
}

/// On a server without TTL nodes, a `PersistentTtlNode` and a `PersistentNode` with a TTL stop
/// before creating anything, and `wait_for_initial_create` names the missing feature at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_ttl_nodes_stops_ttl_nodes_before_anything_is_created() {
    init_tracing();
    let server = within_for(
        SERVER_START,
        "server start",
        zk_recipes_testing::TestingServer::builder().without_extended_types().start(),
    )
    .await
    .expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let missing_ttl = |err: &NodeError| {
        matches!(
            err,
            NodeError::Framework(FrameworkError::MissingFeature {
                feature: zk_recipes_framework::Feature::TtlNodes,
                ..
            })
        )
    };
    let ttl_node = PersistentTtlNode::builder(&framework, "/no-ttl/ttl-node", Duration::from_secs(5))
        .start()
        .expect("valid settings");
    let err =
        within("initial create", ttl_node.wait_for_initial_create(step())).await.expect_err("no TTL nodes");
    assert!(missing_ttl(&err), "{err:?}");
    let with_ttl = zk_recipes_nodes::PersistentNode::builder(&framework, "/no-ttl/persistent")
        .mode(zk_recipes_framework::zookeeper_client::CreateMode::Persistent)
        .ttl(Duration::from_secs(5))
        .start()
        .expect("valid settings");
    let err =
        within("initial create", with_ttl.wait_for_initial_create(step())).await.expect_err("no TTL nodes");
    assert!(missing_ttl(&err), "{err:?}");
    assert!(
        within("exists", framework.exists("/no-ttl", step())).await.expect("exists").is_none(),
        "nothing was created, not even the parent"
    );
    drop((ttl_node, with_ttl));
    close_all([framework]).await;
}
