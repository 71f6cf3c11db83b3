//! `SharedValue` / `SharedCount` against a real ZooKeeper server: seeding, reading, versioned
//! sets, the change stream, a re-created node, typed errors before anything is sent, and a
//! `try_set` whose reply is lost or whose request is held back.

use std::time::Duration;

use zk_recipes_counter::{CounterError, SharedCount, SharedValue, VersionedValue};
use zk_recipes_framework::zookeeper_client::Error as ZkError;
use zk_recipes_framework::{Error as FrameworkError, ParentMode};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, RequestMatch, TestingServer};

#[tokio::test]
async fn a_shared_count_is_seeded_once_set_and_followed_by_every_client() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");

    let first =
        within("start", SharedCount::start(&framework, "/shared/a/count", 7, step())).await.expect("start");
    assert_eq!(first.get().expect("count"), VersionedValue { version: 0, value: 7 });
    assert_eq!(on_server(&other, "/shared/a/count").await, Some((vec![0, 0, 0, 7], 0)), "4-byte big-endian");
    // A second client's seed does not overwrite the existing node.
    let second =
        within("start", SharedCount::start(&other, "/shared/a/count", 99, step())).await.expect("start");
    assert_eq!(second.count().expect("count"), 7);

    let mut changes = second.changes();
    let version = within("set", first.set(10, step())).await.expect("set");
    assert_eq!(version, 1);
    assert_eq!(
        within("change", changes.next()).await.expect("a change").expect("a count"),
        VersionedValue { version: 1, value: 10 }
    );
    assert_eq!(second.get().expect("count"), VersionedValue { version: 1, value: 10 });

    // A stale version loses, and the loser's view is brought up to date.
    assert!(within("try_set", second.try_set(1, 11, step())).await.expect("try_set"));
    assert!(!within("stale try_set", first.try_set(1, 12, step())).await.expect("try_set"));
    assert_eq!(first.get().expect("count"), VersionedValue { version: 2, value: 11 });
    assert_eq!(on_server(&other, "/shared/a/count").await, Some((vec![0, 0, 0, 11], 2)));
    let read = within("read", first.read(step())).await.expect("read");
    assert_eq!(read, VersionedValue { version: 2, value: 11 });

    first.close();
    assert_eq!(within("closed", changes.next()).await.expect("still open").expect("count").value, 11);
    second.close();
    assert!(within("closed", changes.next()).await.is_none(), "closed: the stream ends");
    close_all([framework, other]).await;
}

#[tokio::test]
async fn a_deleted_node_created_again_is_followed() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let value =
        within("start", SharedValue::start(&framework, "/shared/b", b"seed", step())).await.expect("start");
    within("set", value.set(b"v1", step())).await.expect("set");
    let mut changes = value.changes();

    within("delete", other.delete("/shared/b")).await.expect("delete");
    within("create", other.create("/shared/b").data(b"again")).await.expect("create");
    // Version 0 again, but a newer node: taken (Curator would keep version 1's value).
    eventually("the new node is seen", || async {
        value.get() == VersionedValue { version: 0, value: b"again".to_vec() }
    })
    .await;
    assert_eq!(within("change", changes.next()).await.expect("change").value, b"again".to_vec());
    close_all([framework, other]).await;
}

#[tokio::test]
async fn bad_input_fails_with_a_typed_error_before_anything_is_written() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(20)).start().expect("framework");
    let value =
        within("start", SharedValue::start(&framework, "/shared/c", b"x", step())).await.expect("start");
    let before = proxy.stats().writes_to_server;

    let invalid = SharedValue::start(&framework, "/shared/c/", b"x", step()).await;
    assert!(
        matches!(invalid, Err(CounterError::Framework(FrameworkError::InvalidPath { .. }))),
        "{invalid:?}"
    );
    let invalid = SharedCount::start(&framework, "no-slash", 0, step()).await;
    assert!(
        matches!(invalid, Err(CounterError::Framework(FrameworkError::InvalidPath { .. }))),
        "{invalid:?}"
    );
    let root = SharedValue::start(&framework, "/", b"x", step()).await;
    assert!(matches!(root, Err(CounterError::InvalidArgument(_))), "{root:?}");
    let huge = vec![7u8; 2 << 20];
    let seed = SharedValue::start(&framework, "/shared/huge", &huge, step()).await;
    assert!(matches!(seed, Err(CounterError::Framework(FrameworkError::DataTooLarge { .. }))), "{seed:?}");
    let set = value.set(&huge, step()).await;
    assert!(matches!(set, Err(CounterError::Framework(FrameworkError::DataTooLarge { .. }))), "{set:?}");
    let try_set = value.try_set(0, &huge, step()).await;
    assert!(
        matches!(try_set, Err(CounterError::Framework(FrameworkError::DataTooLarge { .. }))),
        "{try_set:?}"
    );
    let any_version = value.try_set(-1, b"y", step()).await;
    assert!(matches!(any_version, Err(CounterError::InvalidArgument(_))), "{any_version:?}");

    assert_eq!(proxy.stats().writes_to_server, before, "bad input wrote something");
    assert_eq!(on_server(&framework, "/shared/c").await, Some((b"x".to_vec(), 0)));
    assert_eq!(on_server(&framework, "/shared/huge").await, None);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_try_set_whose_reply_is_lost_reports_an_unknown_outcome_and_is_not_repeated() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    let count = within("start", SharedCount::start(&framework, "/shared/d", 1, step())).await.expect("start");

    let cut = proxy.cut_after_next_reply(RequestMatch::set_data().under("/shared/d"));
    let outcome = within("try_set", count.try_set(0, 2, step())).await;
    let cut = within("cut", cut).await.expect("the reply was cut");
    assert_eq!(cut.server_error, 0, "the server applied it");
    match outcome {
        Err(CounterError::OutcomeUnknown { path, likely_applied: true }) => assert_eq!(path, "/shared/d"),
        other => panic!("expected an unknown (likely applied) outcome, got {other:?}"),
    }
    assert_eq!(on_server(&observer, "/shared/d").await, Some((vec![0, 0, 0, 2], 1)), "applied once");

    // Contrast: the framework's own versioned set_data is retried after the lost reply and then
    // misreads its own write as someone else's (BadVersion) — why try_set sends its write once.
    let cut = proxy.cut_after_next_reply(RequestMatch::set_data().under("/shared/d"));
    let retried = within("set_data", framework.set_data("/shared/d", &[0, 0, 0, 3], Some(1), step())).await;
    assert_eq!(within("cut", cut).await.expect("cut").server_error, 0, "applied");
    assert!(
        matches!(&retried, Err(err) if err.zookeeper() == Some(&ZkError::BadVersion)),
        "a retried versioned set reports BadVersion for its own write: {retried:?}"
    );

    // An unconditional set whose reply is lost is retried and reported as done: the value is ours.
    let cut = proxy.cut_after_next_reply(RequestMatch::set_data().under("/shared/d"));
    let version = within("set", count.set(5, step())).await.expect("set, retried");
    within("cut", cut).await.expect("cut");
    assert_eq!(on_server(&observer, "/shared/d").await, Some((vec![0, 0, 0, 5], version)));
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn a_value_changed_while_the_session_was_lost_is_seen_on_the_new_session() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(2)).await;
    let count =
        within("start", SharedCount::start(&framework, "/shared/expiry", 0, step())).await.expect("start");
    let mut changes = count.changes();
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");

    proxy.black_hole(negotiated * 3);
    let other =
        within("start", SharedCount::start(&observer, "/shared/expiry", 0, step())).await.expect("start");
    within("set", other.set(41, step())).await.expect("set");
    lost_then_reconnected(&mut events).await;
    let seen = within("change", changes.next()).await.expect("a change").expect("a count");
    assert_eq!(seen, VersionedValue { version: 1, value: 41 }, "read again on the new session");
    // And it keeps following on the new session.
    within("set", other.set(42, step())).await.expect("set");
    let seen = within("change", changes.next()).await.expect("a change").expect("a count");
    assert_eq!(seen.value, 42);
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn a_try_set_held_back_by_a_partition_is_sent_again_once() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(4)).await;
    let value =
        within("start", SharedValue::start(&framework, "/shared/e", b"a", step())).await.expect("start");

    // The request never reaches the server; the connection closes when the hole ends.
    let held = proxy
        .black_hole_at_next_request(RequestMatch::set_data().under("/shared/e"), Duration::from_millis(800));
    let set =
        within("try_set", value.try_set(0, b"b", step())).await.expect("resolved: not applied, sent again");
    assert!(set);
    assert_eq!(within("held", held).await.expect("held").path, "/shared/e");
    assert_eq!(on_server(&observer, "/shared/e").await, Some((b"b".to_vec(), 1)), "applied exactly once");
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn parents_are_created_as_containers_and_an_existing_node_is_kept() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    within(
        "create",
        framework.create("/shared/f/kept").data(b"old").creating_parents(ParentMode::Persistent),
    )
    .await
    .expect("create");
    let kept = within("start", SharedValue::start(&framework, "/shared/f/kept", b"seed", step()))
        .await
        .expect("start");
    assert_eq!(kept.get(), VersionedValue { version: 0, value: b"old".to_vec() });
    let fresh = within("start", SharedValue::start(&framework, "/shared/g/h/fresh", b"seed", step()))
        .await
        .expect("start");
    assert_eq!(fresh.get().value, b"seed".to_vec());
    // Curator's creatingParentContainersIfNeeded: the parents are containers, reaped once empty.
    fresh.close();
    within("delete", framework.delete("/shared/g/h/fresh")).await.expect("delete");
    eventually("the emptied container parents reaped", || async {
        framework.exists("/shared/g", step()).await.expect("exists").is_none()
    })
    .await;
    within("close", framework.close()).await;
}
