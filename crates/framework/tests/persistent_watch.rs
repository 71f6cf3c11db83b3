//! Persistent watches against a real ZooKeeper: events, re-registration after expiry with a reset,
//! removal on drop.

use std::time::Duration;

use zk_recipes_framework::{ParentMode, PersistentWatch, WatchEvent};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, TestingServer};

/// The next event, within [`STEP`].
async fn next(watch: &mut PersistentWatch) -> WatchEvent {
    within("the next watch event", watch.next()).await.expect("an event")
}

#[tokio::test]
async fn a_recursive_watch_reports_every_change_below_its_path() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mut watch = within("watch", framework.watch("/watched", true, step())).await.expect("watch");
    assert!(watch.is_recursive());

    within("create", framework.create("/watched/a/b").creating_parents(ParentMode::Persistent))
        .await
        .expect("create");
    assert_eq!(next(&mut watch).await, WatchEvent::Created { path: "/watched".into() });
    assert_eq!(next(&mut watch).await, WatchEvent::Created { path: "/watched/a".into() });
    assert_eq!(next(&mut watch).await, WatchEvent::Created { path: "/watched/a/b".into() });
    within("set", framework.set_data("/watched/a/b", b"1", None, step())).await.expect("set");
    assert_eq!(next(&mut watch).await, WatchEvent::DataChanged { path: "/watched/a/b".into() });
    within("delete", framework.delete("/watched/a/b")).await.expect("delete");
    assert_eq!(next(&mut watch).await, WatchEvent::Deleted { path: "/watched/a/b".into() });
    within("close", framework.close()).await;
    assert_eq!(within("end", watch.next()).await, None, "the watch ends with its framework");
}

#[tokio::test]
async fn a_plain_watch_reports_its_node_and_its_children_list() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("create", framework.create("/plain")).await.expect("create");
    let mut watch = within("watch", framework.watch("/plain", false, step())).await.expect("watch");
    within("child", framework.create("/plain/child")).await.expect("child");
    assert_eq!(next(&mut watch).await, WatchEvent::ChildrenChanged { path: "/plain".into() });
    within("set", framework.set_data("/plain", b"x", None, step())).await.expect("set");
    assert_eq!(next(&mut watch).await, WatchEvent::DataChanged { path: "/plain".into() });
    within("grandchild", framework.create("/plain/child/grandchild")).await.expect("create");
    within("set", framework.set_data("/plain", b"y", None, step())).await.expect("set");
    assert_eq!(
        next(&mut watch).await,
        WatchEvent::DataChanged { path: "/plain".into() },
        "nothing below the children reaches a plain watch"
    );
    within("close", framework.close()).await;
}

#[tokio::test]
async fn after_session_expiry_the_watch_is_set_again_and_says_reset() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let writer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mut watch = within("watch", framework.watch("/expiring", true, step())).await.expect("watch");
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");

    proxy.black_hole(negotiated * 3);
    // Written while the session is cut off: this change is missed, and the reset says so.
    within("create", writer.create("/expiring")).await.expect("create");
    lost_then_reconnected(&mut events).await;
    assert_eq!(next(&mut watch).await, WatchEvent::Reset);
    within("set", writer.set_data("/expiring", b"after", None, step())).await.expect("set");
    assert_eq!(next(&mut watch).await, WatchEvent::DataChanged { path: "/expiring".into() });
    within("close", framework.close()).await;
    within("close", writer.close()).await;
}

#[tokio::test]
async fn after_a_reconnection_on_the_same_session_the_watch_says_reset() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mut watch = within("watch", framework.watch("/reconnecting", true, step())).await.expect("watch");
    let session = framework.current().session_id;

    proxy.cut_now();
    assert_eq!(next(&mut watch).await, WatchEvent::Reset);
    assert_eq!(framework.current().session_id, session, "the same session");
    within("create", framework.create("/reconnecting")).await.expect("create");
    assert_eq!(next(&mut watch).await, WatchEvent::Created { path: "/reconnecting".into() });
    // Set again, not twice: the server holds one watch for it.
    assert_eq!(server.watch_count().await.expect("wchc"), 1, "one watch on the server");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_dropped_watch_leaves_no_watch_on_the_server() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("create", framework.create("/dropped")).await.expect("create");
    let watch = within("watch", framework.watch("/dropped", true, step())).await.expect("watch");
    eventually("the server holds the watch", || async { server.watch_count().await.expect("wchc") > 0 })
        .await;
    drop(watch);
    eventually("no watch left", || async { server.watch_count().await.expect("wchc") == 0 }).await;
    within("close", framework.close()).await;
}
