//! `PersistentNode` against a real ZooKeeper server: kept present through deletes, expiry,
//! another session's node, and closed cleanly.

use std::time::Duration;

use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{Deadline, Error as FrameworkError};
use zk_recipes_nodes::{NodeError, PersistentNode};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, TestingServer};

#[tokio::test]
async fn a_deleted_node_is_created_again_with_its_data() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let node = PersistentNode::builder(&framework, "/kept/a").data(b"one").start().expect("node");
    let path = within("created", node.wait_for_initial_create(step())).await.expect("created");
    assert_eq!(path, "/kept/a");
    assert_eq!(data_and_owner(&other, "/kept/a").await, Some((b"one".to_vec(), session_of(&framework))));

    within("delete", other.delete("/kept/a")).await.expect("delete");
    eventually("created again", || async { data_and_owner(&other, "/kept/a").await.is_some() }).await;
    assert_eq!(data_and_owner(&other, "/kept/a").await, Some((b"one".to_vec(), session_of(&framework))));
    assert_eq!(node.actual_path().as_deref(), Some("/kept/a"));
    within("close", node.close()).await.expect("close");
    assert_eq!(data_and_owner(&other, "/kept/a").await, None, "closed: deleted");
    within("close", framework.close()).await;
    within("close", other.close()).await;
}

#[tokio::test]
async fn an_ephemeral_node_is_created_again_on_the_new_session_after_expiry() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let observer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let node = PersistentNode::builder(&framework, "/expiring/member").data(b"m").start().expect("node");
    within("created", node.wait_for_initial_create(step())).await.expect("created");
    let first_session = session_of(&framework);
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");

    proxy.black_hole(negotiated * 3);
    lost_then_reconnected(&mut events).await;
    let new_session = session_of(&framework);
    assert_ne!(new_session, first_session);
    eventually("created again on the new session", || async {
        data_and_owner(&observer, "/expiring/member").await.map(|(_, owner)| owner) == Some(new_session)
    })
    .await;
    within("close", node.close()).await.expect("close");
    within("close", framework.close()).await;
    within("close", observer.close()).await;
}

#[tokio::test]
async fn set_data_changes_the_node_and_what_it_is_created_with_again() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let node = PersistentNode::builder(&framework, "/data/n")
        .mode(CreateMode::Persistent)
        .data(b"v1")
        .start()
        .expect("node");
    within("created", node.wait_for_initial_create(step())).await.expect("created");
    within("set", node.set_data(b"v2".to_vec())).await.expect("set");
    assert_eq!(data_and_owner(&framework, "/data/n").await.map(|(data, _)| data), Some(b"v2".to_vec()));
    within("delete", framework.delete("/data/n")).await.expect("delete");
    eventually("created again with v2", || async {
        data_and_owner(&framework, "/data/n").await.map(|(data, _)| data) == Some(b"v2".to_vec())
    })
    .await;
    assert_eq!(node.data(), b"v2");
    let too_large = vec![0u8; 2 << 20];
    match within("set", node.set_data(too_large)).await {
        Err(NodeError::Framework(FrameworkError::DataTooLarge { .. })) => {}
        other => panic!("expected DataTooLarge, got {other:?}"),
    }
    assert_eq!(node.data(), b"v2", "refused data changes nothing");
    within("close", node.close()).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn another_live_sessions_ephemeral_node_is_waited_for_not_taken_over() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("other's node", other.create("/taken").mode(CreateMode::Ephemeral).data(b"theirs"))
        .await
        .expect("create");
    let node = PersistentNode::builder(&framework, "/taken").data(b"ours").start().expect("node");
    let waited = node.wait_for_initial_create(Deadline::after(Duration::from_millis(500))).await;
    assert!(waited.is_err(), "not ours while another session holds it: {waited:?}");
    assert_eq!(node.actual_path(), None);
    assert_eq!(
        data_and_owner(&framework, "/taken").await,
        Some((b"theirs".to_vec(), session_of(&other))),
        "untouched"
    );

    within("other closes", other.close()).await;
    within("created", node.wait_for_initial_create(step())).await.expect("ours once theirs is gone");
    assert_eq!(data_and_owner(&framework, "/taken").await, Some((b"ours".to_vec(), session_of(&framework))));
    within("close", node.close()).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_persistent_node_already_there_is_taken_over_with_our_data() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    within("existing", framework.create("/existing").data(b"old")).await.expect("create");
    let node = PersistentNode::builder(&framework, "/existing")
        .mode(CreateMode::Persistent)
        .data(b"new")
        .start()
        .expect("node");
    within("created", node.wait_for_initial_create(step())).await.expect("taken over");
    assert_eq!(data_and_owner(&framework, "/existing").await, Some((b"new".to_vec(), 0)));
    within("close", node.close()).await.expect("close");
    assert_eq!(data_and_owner(&framework, "/existing").await, None);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_protected_sequential_node_gets_a_new_name_when_created_again_and_drop_deletes_it() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let node = PersistentNode::builder(&framework, "/seq/member-")
        .mode(CreateMode::EphemeralSequential)
        .protected()
        .start()
        .expect("node");
    let first = within("created", node.wait_for_initial_create(step())).await.expect("created");
    assert!(first.starts_with("/seq/_c_") && first.contains("-member-"), "{first}");
    within("delete", framework.delete(&first)).await.expect("delete");
    eventually("created again", || async { node.actual_path().is_some_and(|path| path != first) }).await;
    assert_eq!(children(&framework, "/seq").await.len(), 1, "one node, never two");
    drop(node);
    eventually("deleted after drop", || async { children(&framework, "/seq").await.is_empty() }).await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    init_tracing();
    let framework = builder("127.0.0.1:1", Duration::from_secs(10)).start().expect("framework");
    let invalid = PersistentNode::builder(&framework, "relative").start();
    assert!(matches!(invalid, Err(NodeError::Framework(FrameworkError::InvalidPath { .. }))), "{invalid:?}");
    let root = PersistentNode::builder(&framework, "/").start();
    assert!(matches!(root, Err(NodeError::InvalidArgument(_))), "{root:?}");
    let ttl = PersistentNode::builder(&framework, "/t").ttl(Duration::from_secs(1)).start();
    assert!(
        matches!(ttl, Err(NodeError::InvalidArgument(_))),
        "a TTL on the default ephemeral mode: {ttl:?}"
    );
    let large = PersistentNode::builder(&framework, "/l").data(vec![0u8; 2 << 20]).start();
    assert!(matches!(large, Err(NodeError::Framework(FrameworkError::DataTooLarge { .. }))), "{large:?}");
    within("close", framework.close()).await;
}
