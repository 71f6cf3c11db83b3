//! The kazoo layout against a real ZooKeeper server, Rust on both sides: kazoo's lock and
//! `lease_holder` record, deny, expiry by the end written, renew, release, records of another
//! version or unreadable, a cancelled acquire, the multi-lease. kazoo itself is in
//! `kazoo_interop.rs`.

use std::time::{Duration, Instant, SystemTime};

use zk_recipes_framework::Framework;
use zk_recipes_lease::{Lease, LeaseError, LeaseLayout, LostReason};
use zk_recipes_mutex::{LockLayout, Mutex};
use zk_recipes_test_support::*;

mod common;
use common::{epoch_secs, take_when_free};

fn lease(framework: &Framework, path: &str, duration: Duration, identifier: &str) -> Lease {
    common::lease_in(LeaseLayout::Kazoo, framework, path, duration, identifier)
}

fn record_path(path: &str) -> String {
    format!("{path}/lease_holder")
}

/// The record's text, checked to be kazoo's `json.dumps` of version 1 for `identifier`; its end.
fn kazoo_record(data: &[u8], identifier: &str) -> String {
    let text = String::from_utf8(data.to_vec()).expect("utf-8");
    let prefix = format!("{{\"version\": 1, \"holder\": \"{identifier}\", \"end\": \"");
    let end = text.strip_prefix(&prefix).and_then(|rest| rest.strip_suffix("\"}")).unwrap_or_else(|| {
        panic!("not kazoo's record for {identifier}: {text}");
    });
    let shape = end.bytes().enumerate().all(|(index, byte)| match index {
        4 | 7 => byte == b'-',
        10 => byte == b'T',
        13 | 16 => byte == b':',
        _ => byte.is_ascii_digit(),
    });
    assert!(end.len() == 19 && shape, "end {end:?} is not %Y-%m-%dT%H:%M:%S");
    end.to_owned()
}

#[tokio::test]
async fn acquire_deny_expire_and_take_again_in_kazoos_record() {
    init_tracing();
    let (server, first) = server_and_framework().await;
    let second = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let path = "/kazoo/basic/lease";
    let duration = Duration::from_millis(1500);
    let a = lease(&first, path, duration, "holder-a");
    let b = lease(&second, path, duration, "holder-b");

    let wall_before = epoch_secs(SystemTime::now());
    let held = within("a takes it", a.acquire()).await.expect("a takes the free lease");
    let (data, stat) = data_and_stat(&first, &record_path(path)).await;
    kazoo_record(&data, "holder-a");
    assert_eq!(stat.czxid, held.fencing_token(), "the token is lease_holder's czxid");
    let wall_after = epoch_secs(SystemTime::now());
    let end = epoch_secs(held.end().expect("an end"));
    assert!((wall_before + 1..=wall_after + 2).contains(&end), "end {end} = now + 1.5 s, cut to seconds");
    assert_eq!(children(&first, path).await, ["lease_holder"], "kazoo's lock is released after the acquire");

    match within("b refused", b.acquire()).await {
        Err(LeaseError::Held { holder, .. }) => {
            assert_eq!((holder.identifier.as_str(), holder.end), ("holder-a", held.end()));
            assert_eq!(holder.fencing_token, held.fencing_token());
        }
        other => panic!("b: {other:?}"),
    }
    assert_eq!(data_and_stat(&first, &record_path(path)).await, (data, stat), "the refusal changed nothing");

    // Same identifier, another process: kazoo's renewal takes it back.
    let same = lease(&second, path, duration, "holder-a");
    let renewed_by_kazoo_rule = within("same identifier", same.acquire()).await.expect("kazoo's renewal");
    assert!(
        renewed_by_kazoo_rule.fencing_token() > held.fencing_token(),
        "kazoo's renewal re-creates the record"
    );

    assert_eq!(within("the lease ends", renewed_by_kazoo_rule.lost()).await, LostReason::Expired);
    let taken = take_when_free(&b).await;
    assert!(
        SystemTime::now() >= renewed_by_kazoo_rule.end().expect("end"),
        "taken only after the end written"
    );
    assert!(taken.fencing_token() > renewed_by_kazoo_rule.fencing_token(), "the token grows across holders");
    kazoo_record(&data_and_stat(&first, &record_path(path)).await.0, "holder-b");
    within("release", taken.release()).await.expect("release");
    assert!(children(&first, path).await.is_empty(), "released: no record, no lock node");
    close_all([first, second]).await;
}

#[tokio::test]
async fn renew_keeps_the_token_release_frees_and_a_taken_record_is_not_touched() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let path = "/kazoo/renew/lease";
    let a = lease(&framework, path, Duration::from_secs(3), "holder-a");
    let held = within("acquire", a.acquire()).await.expect("acquire");
    let (token, end) = (held.fencing_token(), held.end());
    tokio::time::sleep(Duration::from_millis(1100)).await;
    let before = Instant::now();
    within("renew", held.renew()).await.expect("renew");
    assert_eq!(held.fencing_token(), token, "a renew keeps the token");
    assert!(held.end() > end, "a renew writes a later end");
    assert!(
        held.valid_until() > before + Duration::from_secs(2),
        "valid for the duration, less the cut second"
    );
    let (data, stat) = data_and_stat(&framework, &record_path(path)).await;
    assert_eq!((stat.czxid, stat.version), (token, 1));
    assert_eq!(epoch_secs(held.end().unwrap()).to_string().len(), 10);
    kazoo_record(&data, "holder-a");

    // Release frees it at once.
    within("release", held.release()).await.expect("release");
    assert!(children(&framework, path).await.is_empty());
    let b = lease(&framework, path, Duration::from_secs(3), "holder-b");
    let taken = within("b", b.acquire()).await.expect("free after the release");

    // A kazoo client whose clock runs ahead takes B's lease early (as kazoo does: delete, create);
    // B's renew then finds the record another holder's: typed, lost, and the other record
    // untouched.
    let theirs = br#"{"version": 1, "holder": "early-bird", "end": "2100-01-01T00:00:00"}"#;
    let take_over = framework.transaction().delete(record_path(path), None).create(
        record_path(path),
        &theirs[..],
        zk_recipes_framework::zookeeper_client::CreateMode::Persistent,
    );
    within("take over", take_over).await.expect("take over");
    let stat = data_and_stat(&framework, &record_path(path)).await;
    let renewed = within("renew", taken.renew()).await;
    assert!(matches!(renewed, Err(LeaseError::Lost { .. })), "{renewed:?}");
    assert_eq!(within("lost", taken.lost()).await, LostReason::Gone);
    within("release", taken.release()).await.expect("nothing of ours to release");
    assert_eq!(data_and_stat(&framework, &record_path(path)).await, stat, "the other record untouched");
    assert_eq!(within("holder", b.holder()).await.expect("holder").expect("held").identifier, "early-bird");
    close_all([framework]).await;
}

#[tokio::test]
async fn records_of_another_version_or_unreadable_are_left_alone() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let a = lease(&framework, "/kazoo/version/0", Duration::from_secs(1), "holder-a");
    let newer = br#"{"version": 2, "holder": "future", "until": 0}"#;
    within(
        "create",
        framework
            .create("/kazoo/version/0/lease_holder")
            .creating_parents(zk_recipes_framework::ParentMode::Persistent)
            .data(&newer[..]),
    )
    .await
    .expect("create");
    let err = within("acquire", a.acquire()).await.unwrap_err();
    assert!(matches!(&err, LeaseError::UnknownVersion { version, .. } if version == "2"), "{err:?}");
    assert!(matches!(within("holder", a.holder()).await, Err(LeaseError::UnknownVersion { .. })));
    let multi = Lease::builder(&framework, "/kazoo/version", Duration::from_secs(1))
        .layout(LeaseLayout::Kazoo)
        .identifier("holder-a")
        .build_multi(1)
        .expect("multi");
    assert!(matches!(within("multi", multi.acquire()).await, Err(LeaseError::AllHeld { count: 1, .. })));
    assert_eq!(on_server(&framework, "/kazoo/version/0/lease_holder").await, Some((newer.to_vec(), 0)));

    let b = lease(&framework, "/kazoo/garbage/lease", Duration::from_secs(1), "holder-b");
    within(
        "create",
        framework
            .create("/kazoo/garbage/lease/lease_holder")
            .creating_parents(zk_recipes_framework::ParentMode::Persistent)
            .data(&b"not json"[..]),
    )
    .await
    .expect("create");
    let err = within("acquire", b.acquire()).await.unwrap_err();
    assert!(matches!(err, LeaseError::Malformed { .. }), "{err:?}");
    assert_eq!(
        on_server(&framework, "/kazoo/garbage/lease/lease_holder").await,
        Some((b"not json".to_vec(), 0))
    );
    for path in ["/kazoo/version/0", "/kazoo/garbage/lease"] {
        assert_eq!(children(&framework, path).await, ["lease_holder"], "no lock node left under {path}");
    }
    close_all([framework]).await;
}

#[tokio::test]
async fn a_cancelled_acquire_leaves_no_lock_node_and_no_record() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let path = "/kazoo/cancel/lease";
    let a = lease(&framework, path, Duration::from_secs(60), "holder-a");

    // Cancelled while it waits for kazoo's lock, which another process holds.
    let lock = Mutex::with_layout(&other, path, LockLayout::Kazoo).expect("mutex").node_data("other");
    let guard = within("lock", lock.lock()).await.expect("lock");
    assert!(tokio::time::timeout(STILL_WAITING, a.acquire()).await.is_err(), "waits for kazoo's lock");
    within("unlock", guard.release()).await.expect("release");
    no_children_left(&framework, path).await;

    // Cancelled at every point of a free acquire.
    let mut cancelled = 0;
    for delay_micros in [0, 200, 500, 1000, 2000, 3000, 4000, 6000, 9000, 15000] {
        match tokio::time::timeout(Duration::from_micros(delay_micros), a.acquire()).await {
            Ok(Ok(held)) => within("release", held.release()).await.expect("release"),
            Ok(Err(err)) => panic!("acquire: {err}"),
            Err(_) => cancelled += 1,
        }
        no_children_left(&framework, path).await;
    }
    assert!(cancelled > 0, "no acquire was cancelled: the test proved nothing");
    let held = within("acquire", a.acquire()).await.expect("the lease is free");
    within("release", held.release()).await.expect("release");
    close_all([framework, other]).await;
}

#[tokio::test]
async fn a_kazoo_multi_lease_holds_at_most_its_count() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let multi = |identifier: &str| {
        Lease::builder(&framework, "/kazoo/multi", Duration::from_secs(30))
            .layout(LeaseLayout::Kazoo)
            .identifier(identifier)
            .timeout(STEP)
            .build_multi(2)
            .expect("multi")
    };
    let first = within("first", multi("one").acquire()).await.expect("first");
    let second = within("second", multi("two").acquire()).await.expect("second");
    assert_eq!((first.slot(), second.slot()), (Some(0), Some(1)));
    assert_eq!(first.path(), "/kazoo/multi/0");
    assert!(matches!(
        within("third", multi("three").acquire()).await,
        Err(LeaseError::AllHeld { count: 2, .. })
    ));
    // kazoo's renewal: the first holder's identifier takes back its own slot 0.
    let again = within("one again", multi("one").acquire()).await.expect("renewal");
    assert_eq!(again.slot(), Some(0));
    within("release", again.release()).await.expect("release");
    within("release", second.release()).await.expect("release");
    drop(first);
    close_all([framework]).await;
}
