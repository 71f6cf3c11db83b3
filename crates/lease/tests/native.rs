//! The native layout against a real ZooKeeper server (TTL nodes enabled, the TTL reaper every
//! 500 ms): acquire, deny, expire, take again; fencing tokens; renew and release; bad input; a
//! cancelled acquire; the multi-lease.

use std::time::{Duration, Instant};

use zk_recipes_framework::{Framework, MAX_TTL};
use zk_recipes_lease::{Lease, LeaseError, LeaseLayout, LostReason, MAX_IDENTIFIER_LEN};
use zk_recipes_test_support::*;
use zk_recipes_testing::TestingServer;

mod common;
use common::take_when_free;

fn lease(framework: &Framework, path: &str, duration: Duration, identifier: &str) -> Lease {
    common::lease_in(LeaseLayout::Native, framework, path, duration, identifier)
}

/// A second process: its own framework (its own session) on the same server.
fn other_process(framework: &Framework, server_connect: &str) -> Framework {
    let _ = framework;
    builder(server_connect, Duration::from_secs(10)).start().expect("framework")
}

#[tokio::test]
async fn acquire_deny_expire_and_take_again_with_a_growing_fencing_token() {
    init_tracing();
    let (server, first) = server_and_framework().await;
    let second = other_process(&first, &server.connect_string());
    let path = "/native/basic/lease";
    let duration = Duration::from_millis(1500);
    let a = lease(&first, path, duration, "holder-a");
    let b = lease(&second, path, duration, "holder-b");

    let before = Instant::now();
    let held = within("a takes it", a.acquire()).await.expect("a takes the free lease");
    assert!(held.valid_until() <= before + duration + STEP && held.valid_until() > Instant::now());
    assert_eq!((held.path(), held.identifier(), held.slot(), held.end()), (path, "holder-a", None, None));
    let (data, stat) = data_and_stat(&first, path).await;
    assert_eq!(stat.czxid, held.fencing_token(), "the token is the node's czxid");
    assert_eq!(stat.ephemeral_owner, 0, "a lease is not a session's: a persistent (TTL) node");
    let record: serde_json::Value = serde_json::from_slice(&data).expect("json");
    assert_eq!((record["holder"].as_str(), record["duration_ms"].as_u64()), (Some("holder-a"), Some(1500)));

    // B is refused, told who holds it, and leaves nothing.
    match within("b refused", b.acquire()).await {
        Err(LeaseError::Held { path: held_path, holder }) => {
            assert_eq!((held_path.as_str(), holder.identifier.as_str()), (path, "holder-a"));
            assert_eq!((holder.fencing_token, holder.duration), (held.fencing_token(), Some(duration)));
        }
        other => panic!("b: {other:?}"),
    }
    assert_eq!(data_and_stat(&first, path).await.1, stat, "B's refusal changed nothing");
    assert_eq!(within("holder", b.holder()).await.expect("holder").expect("held").identifier, "holder-a");

    // A's lease ends by its clock; only then (once the server reaped the node) may B take it.
    assert_eq!(within("a's lease ends", held.lost()).await, LostReason::Expired);
    assert!(!held.is_valid() && Instant::now() >= held.valid_until());
    let a_until = held.valid_until();
    let taken = take_when_free(&b).await;
    assert!(Instant::now() >= a_until, "B took the lease before A's view of it ended");
    assert!(taken.fencing_token() > held.fencing_token(), "the fencing token grows across holders");
    assert!(matches!(held.renew().await, Err(LeaseError::Expired { .. })), "A cannot renew an ended lease");

    // And back to A after B releases: at once, without the reaper.
    let taken_token = taken.fencing_token();
    within("b releases", taken.release()).await.expect("release");
    assert!(
        within("exists", first.exists(path, step())).await.expect("exists").is_none(),
        "released: deleted"
    );
    let again = within("a again", a.acquire()).await.expect("a takes the released lease");
    assert!(again.fencing_token() > taken_token);
    within("release", again.release()).await.expect("release");
    close_all([first, second]).await;
}

#[tokio::test]
async fn renew_keeps_the_lease_and_its_token_and_fails_typed_once_another_holds() {
    init_tracing();
    let (server, first) = server_and_framework().await;
    let second = other_process(&first, &server.connect_string());
    let path = "/native/renew/lease";
    let duration = Duration::from_millis(1200);
    let a = lease(&first, path, duration, "holder-a");
    let b = lease(&second, path, duration, "holder-b");

    let held = within("a takes it", a.acquire()).await.expect("acquire");
    let token = held.fencing_token();
    // Renewed every 400 ms for three durations: still A's, same token, B refused throughout.
    let started = Instant::now();
    while started.elapsed() < duration * 3 {
        tokio::time::sleep(Duration::from_millis(400)).await;
        let before = Instant::now();
        within("renew", held.renew()).await.expect("renew while valid");
        assert!(held.valid_until() >= before + duration, "a renew restarts the duration from its send");
        assert_eq!(held.fencing_token(), token, "a renew keeps the fencing token");
        assert!(within("b refused", b.acquire()).await.unwrap_err().is_held(), "B refused while A renews");
    }
    assert!(held.is_valid(), "renewed past three durations");
    let (_, stat) = data_and_stat(&first, path).await;
    assert_eq!(stat.czxid, token);
    assert!(stat.version >= 3, "each renew is a write: version {}", stat.version);

    // A stops renewing: B takes it; A's renew then fails typed and changes nothing of B's.
    assert_eq!(within("a's lease ends", held.lost()).await, LostReason::Expired);
    let taken = take_when_free(&b).await;
    let theirs = data_and_stat(&first, path).await;
    let renewed = within("a renews too late", held.renew()).await;
    assert!(matches!(renewed, Err(LeaseError::Expired { .. })), "{renewed:?}");
    assert!(renewed.unwrap_err().is_lost());
    within("a releases too late", held.release()).await.expect("nothing to release is fine");
    assert_eq!(data_and_stat(&first, path).await, theirs, "B's lease untouched by A's renew and release");
    within("release", taken.release()).await.expect("release");
    close_all([first, second]).await;
}

#[tokio::test]
async fn a_renew_or_release_that_finds_the_node_gone_reports_it() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let path = "/native/gone/lease";
    let a = lease(&framework, path, Duration::from_secs(30), "holder-a");
    let held = within("acquire", a.acquire()).await.expect("acquire");
    // Somebody deletes it by hand, and another holder takes it (a node of version 0 again).
    within("delete", framework.delete(path)).await.expect("delete");
    let b = lease(&framework, path, Duration::from_secs(30), "holder-b");
    let taken = within("b", b.acquire()).await.expect("b takes the deleted lease");
    let theirs = data_and_stat(&framework, path).await;
    let renewed = within("renew", held.renew()).await;
    assert!(matches!(renewed, Err(LeaseError::Lost { .. })), "{renewed:?}");
    assert_eq!(within("lost", held.lost()).await, LostReason::Gone);
    assert!(!held.is_valid());
    within("release", held.release()).await.expect("release of a lost lease sends nothing");
    assert_eq!(data_and_stat(&framework, path).await, theirs, "B's node untouched");
    within("release", taken.release()).await.expect("release");
    close_all([framework]).await;
}

#[tokio::test]
async fn bad_input_is_refused_typed_before_anything_is_sent() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let nodes_before = server.znode_count().await.expect("znode count");
    let build = |path: &str, duration: Duration, identifier: &str| {
        Lease::builder(&framework, path, duration).identifier(identifier).build()
    };
    let second = Duration::from_secs(1);
    for path in ["bad/relative", "/", "/bad/trailing/", "/bad//double", "/bad/\u{0}"] {
        let err = build(path, second, "me").unwrap_err();
        assert!(matches!(err, LeaseError::InvalidPath { .. }), "{path:?}: {err:?}");
    }
    for duration in [Duration::ZERO, Duration::from_micros(500), MAX_TTL + Duration::from_millis(1)] {
        let err = build("/bad/duration", duration, "me").unwrap_err();
        assert!(matches!(err, LeaseError::InvalidDuration { .. }), "{duration:?}: {err:?}");
        assert!(!err.is_retryable());
    }
    for identifier in [String::new(), "x".repeat(MAX_IDENTIFIER_LEN + 1), "a\nb".into(), "a\u{7f}".into()] {
        let err = build("/bad/identifier", second, &identifier).unwrap_err();
        assert!(matches!(err, LeaseError::InvalidIdentifier { .. }), "{identifier:?}: {err:?}");
    }
    assert!(
        build("/bad/identifier", second, &"é".repeat(MAX_IDENTIFIER_LEN / 2)).is_ok(),
        "the limit is inclusive"
    );
    let multi = Lease::builder(&framework, "/bad/multi", second).layout(LeaseLayout::Kazoo).build_multi(0);
    assert!(matches!(multi, Err(LeaseError::ZeroCount)));
    let kazoo = Lease::builder(&framework, "/bad/kazoo/", second).layout(LeaseLayout::Kazoo).build();
    assert!(matches!(kazoo, Err(LeaseError::InvalidPath { .. })));
    // The default identifier is the host name, as kazoo's.
    let default = Lease::builder(&framework, "/bad/default", second).build().expect("lease");
    assert!(!default.identifier().is_empty());

    assert!(within("exists", framework.exists("/bad", step())).await.expect("exists").is_none());
    assert_eq!(server.znode_count().await.expect("znode count"), nodes_before, "nothing was created");
    close_all([framework]).await;
}

#[tokio::test]
async fn a_cancelled_acquire_leaves_no_node_behind() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let path = "/native/cancel/lease";
    // A long duration: a node left behind would stay for a minute, and the checks below see it.
    let a = lease(&framework, path, Duration::from_secs(60), "holder-a");
    let mut cancelled = 0;
    for delay_micros in [0, 100, 300, 600, 1000, 1500, 2000, 3000, 5000, 8000] {
        match tokio::time::timeout(Duration::from_micros(delay_micros), a.acquire()).await {
            Ok(Ok(held)) => within("release", held.release()).await.expect("release"),
            // An earlier cancelled acquire's task, still at work, holds it for a moment.
            Ok(Err(LeaseError::Held { .. })) => {}
            Ok(Err(err)) => panic!("acquire: {err}"),
            Err(_) => cancelled += 1,
        }
        let what = format!("no lease node after an acquire cancelled after {delay_micros} µs");
        eventually(&what, || async { framework.exists(path, step()).await.expect("exists").is_none() }).await;
    }
    assert!(cancelled > 0, "no acquire was cancelled: the test proved nothing");
    // Nothing lingers: each cancelled acquire's task finishes what it sent and deletes what it
    // wrote (a node seen gone above may have been created after the look), so a fresh acquire
    // takes the lease once those tasks are done, and its release leaves nothing.
    let held = within_for(Duration::from_secs(10), "the lease free again", async {
        loop {
            match a.acquire().await {
                Ok(held) => return held,
                Err(LeaseError::Held { .. }) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(err) => panic!("acquire: {err}"),
            }
        }
    })
    .await;
    within("release", held.release()).await.expect("release");
    eventually("no lease node at the end", || async {
        framework.exists(path, step()).await.expect("exists").is_none()
    })
    .await;
    close_all([framework]).await;
}

#[tokio::test]
async fn a_native_multi_lease_holds_at_most_its_count() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let multi = |identifier: &str| {
        Lease::builder(&framework, "/native/multi", Duration::from_secs(30))
            .identifier(identifier)
            .timeout(STEP)
            .build_multi(2)
            .expect("multi")
    };
    let first = within("first", multi("one").acquire()).await.expect("first");
    let second = within("second", multi("two").acquire()).await.expect("second");
    assert_eq!((first.slot(), second.slot()), (Some(0), Some(1)));
    assert_eq!((first.path(), second.path()), ("/native/multi/0", "/native/multi/1"));
    let third = within("third", multi("three").acquire()).await;
    assert!(matches!(third, Err(LeaseError::AllHeld { count: 2, .. })), "{third:?}");
    within("release", first.release()).await.expect("release");
    let third = within("third again", multi("three").acquire()).await.expect("a slot is free");
    assert_eq!(third.slot(), Some(0));
    assert_eq!(children(&framework, "/native/multi").await.len(), 2);
    within("release", third.release()).await.expect("release");
    within("release", second.release()).await.expect("release");
    close_all([framework]).await;
}

/// Compiled, never run: the futures of every public call are `Send` (spawnable).
#[allow(dead_code)]
fn futures_are_send(lease: &Lease, multi: &zk_recipes_lease::MultiLease, held: zk_recipes_lease::HeldLease) {
    fn send<T: Send>(_: T) {}
    send(lease.acquire());
    send(lease.holder());
    send(multi.acquire());
    send(held.renew());
    send(held.lost());
    send(held.release());
}

#[tokio::test]
async fn a_server_without_ttl_nodes_refuses_the_native_lease_clearly() {
    init_tracing();
    let server =
        within_for(SERVER_START, "server start", TestingServer::builder().without_extended_types().start())
            .await
            .expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let a = lease(&framework, "/no-ttl", Duration::from_secs(5), "holder-a");
    let err = within("acquire", a.acquire()).await.expect_err("no TTL nodes on this server");
    assert!(
        matches!(
            &err,
            LeaseError::Framework(zk_recipes_framework::Error::MissingFeature {
                feature: zk_recipes_framework::Feature::TtlNodes,
                server_version,
            }) if server_version.starts_with("3.")
        ),
        "{err:?}"
    );
    assert!(err.to_string().contains("extendedTypesEnabled"), "{err}");
    assert!(!err.is_retryable());
    assert!(within("exists", framework.exists("/no-ttl", step())).await.expect("exists").is_none());
    close_all([framework]).await;
}
