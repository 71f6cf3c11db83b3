//! `Framework::write_once` against a real ZooKeeper server: conditional writes applied or refused
//! once, a lost reply reported as an unknown outcome (never repeated), a request held back by a
//! partition sent again exactly once, bad input refused before anything is sent, and plain
//! requests (never a multi) on the wire.

use std::time::Duration;

use zk_recipes_framework::zookeeper_client::Error as ZkError;
use zk_recipes_framework::{ConditionalWrite, Error, ParentMode, WriteOutcome};
use zk_recipes_test_support::*;
use zk_recipes_testing::RequestMatch;

#[tokio::test]
async fn a_conditional_write_is_applied_once_or_refused_with_nothing_changed() {
    init_tracing();
    let (_server, _proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    const PATH: &str = "/write-once/a/value";

    // A create makes the missing parents as containers.
    let created = within("create", framework.write_once(PATH, ConditionalWrite::create(b"1"), step())).await;
    assert!(matches!(created, Ok(WriteOutcome::Applied(_))), "{created:?}");
    assert_eq!(on_server(&observer, PATH).await, Some((b"1".to_vec(), 0)));

    let again =
        within("create again", framework.write_once(PATH, ConditionalWrite::create(b"2"), step())).await;
    assert_eq!(again.expect("answered"), WriteOutcome::Refused(ZkError::NodeExists));

    let read = within("read", framework.get_data(PATH, step())).await.expect("read");
    let set = ConditionalWrite::set_if_unchanged(b"3", &read.stat);
    let applied = within("set", framework.write_once(PATH, set, step())).await.expect("answered");
    match applied {
        WriteOutcome::Applied(Some(stat)) => assert_eq!(stat.version, 1),
        other => panic!("a set sends its new stat: {other:?}"),
    }
    // The same expectation once more: someone (us) wrote since.
    let stale = within("stale set", framework.write_once(PATH, set, step())).await.expect("answered");
    assert_eq!(stale, WriteOutcome::Refused(ZkError::BadVersion));

    let missing = ConditionalWrite::set_if_unchanged(b"5", &read.stat);
    let gone = within("set", framework.write_once("/write-once/a/missing", missing, step())).await;
    assert_eq!(gone.expect("answered"), WriteOutcome::Refused(ZkError::NoNode));
    assert_eq!(on_server(&observer, PATH).await, Some((b"3".to_vec(), 1)), "no refused write changed it");
    // Curator's creatingParentContainersIfNeeded: the parent is a container, reaped once empty.
    within("delete", observer.delete(PATH).deadline(step())).await.expect("deleted");
    eventually("the emptied container parent reaped", || async {
        observer.exists("/write-once/a", step()).await.expect("exists").is_none()
    })
    .await;
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn bad_input_fails_with_a_typed_error_before_anything_is_written() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    let create = observer.create("/write-once/b").data(&b"v"[..]).creating_parents(ParentMode::Container);
    within("create", create.deadline(step())).await.expect("created");
    let read = within("read", framework.get_data("/write-once/b", step())).await.expect("read");
    let before = proxy.stats().writes_to_server;

    let invalid =
        within("invalid path", framework.write_once("/write-once/b/", ConditionalWrite::create(b""), step()))
            .await;
    assert!(matches!(invalid, Err(Error::InvalidPath { .. })), "{invalid:?}");
    let root = within("root", framework.write_once("/", ConditionalWrite::create(b""), step())).await;
    assert!(matches!(root, Err(Error::InvalidArgument(_))), "{root:?}");
    let any_version = ConditionalWrite::SetIfUnchanged { data: b"w", version: -1, czxid: read.stat.czxid };
    let any_version = within("any version", framework.write_once("/write-once/b", any_version, step())).await;
    assert!(matches!(any_version, Err(Error::InvalidArgument(_))), "{any_version:?}");
    let huge = vec![7u8; 2 << 20];
    let too_large =
        framework.write_once("/write-once/b", ConditionalWrite::set_if_unchanged(&huge, &read.stat), step());
    assert!(matches!(within("too large", too_large).await, Err(Error::DataTooLarge { .. })));

    assert_eq!(proxy.stats().writes_to_server, before, "bad input wrote something");
    assert_eq!(on_server(&observer, "/write-once/b").await, Some((b"v".to_vec(), 0)));
    let closed = builder(&proxy.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("close", closed.close()).await;
    let after_close =
        closed.write_once("/write-once/b", ConditionalWrite::set_if_unchanged(b"w", &read.stat), step());
    assert!(matches!(within("after close", after_close).await, Err(Error::Closed)));
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn a_write_whose_reply_is_lost_reports_an_unknown_outcome_and_is_not_repeated() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    const PATH: &str = "/write-once/c";
    // The parent exists: the cut hits the create itself, not a create refused for a missing parent.
    within("parent", observer.ensure_path("/write-once", step())).await.expect("parent");

    let cut = proxy.cut_after_next_reply(RequestMatch::create().under(PATH));
    let created = within("create", framework.write_once(PATH, ConditionalWrite::create(b"1"), step())).await;
    assert_eq!(within("cut", cut).await.expect("the reply was cut").server_error, 0, "the server applied it");
    match created {
        Err(Error::OutcomeUnknown { path, likely_applied: true }) => assert_eq!(path, PATH),
        other => panic!("expected an unknown (likely applied) outcome, got {other:?}"),
    }

    let read = within("read", framework.get_data(PATH, step())).await.expect("read");
    let cut = proxy.cut_after_next_reply(RequestMatch::set_data().under(PATH));
    let set = ConditionalWrite::set_if_unchanged(b"2", &read.stat);
    let outcome = within("set", framework.write_once(PATH, set, step())).await;
    assert_eq!(within("cut", cut).await.expect("the reply was cut").server_error, 0, "the server applied it");
    assert!(matches!(outcome, Err(Error::OutcomeUnknown { likely_applied: true, .. })), "{outcome:?}");
    assert_eq!(on_server(&observer, PATH).await, Some((b"2".to_vec(), 1)), "applied once, not repeated");

    // Another writer changes the node to other bytes before we can read it back (we are cut off
    // until it has): not likely ours.
    let read = within("read", framework.get_data(PATH, step())).await.expect("read");
    let cut = proxy.cut_after_next_reply_then_black_hole(RequestMatch::set_data().under(PATH), STEP);
    let set = ConditionalWrite::set_if_unchanged(b"3", &read.stat);
    let racing = async {
        let cut = within("cut", cut).await.expect("the reply was cut");
        within("other write", observer.set_data(PATH, b"other", None, step())).await.expect("written");
        proxy.heal();
        cut
    };
    let (outcome, cut) = tokio::join!(within("set", framework.write_once(PATH, set, step())), racing);
    assert_eq!(cut.server_error, 0, "the server applied ours first");
    assert!(matches!(outcome, Err(Error::OutcomeUnknown { likely_applied: false, .. })), "{outcome:?}");
    assert_eq!(on_server(&observer, PATH).await, Some((b"other".to_vec(), 3)));
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn a_write_held_back_by_a_partition_is_sent_again_exactly_once() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(4)).await;
    const PATH: &str = "/write-once/d";

    // The create never reaches the server; the connection closes when the hole ends.
    let held =
        proxy.black_hole_at_next_request(RequestMatch::create().under(PATH), Duration::from_millis(800));
    let created = within("create", framework.write_once(PATH, ConditionalWrite::create(b"1"), step())).await;
    assert!(
        matches!(created, Ok(WriteOutcome::Applied(_))),
        "resolved: not applied, sent again: {created:?}"
    );
    assert_eq!(within("held", held).await.expect("held").path, PATH);

    let read = within("read", framework.get_data(PATH, step())).await.expect("read");
    let held =
        proxy.black_hole_at_next_request(RequestMatch::set_data().under(PATH), Duration::from_millis(800));
    let set = ConditionalWrite::set_if_unchanged(b"2", &read.stat);
    let outcome = within("set", framework.write_once(PATH, set, step())).await;
    assert!(matches!(outcome, Ok(WriteOutcome::Applied(Some(_)))), "{outcome:?}");
    assert_eq!(within("held", held).await.expect("held").path, PATH);
    assert_eq!(on_server(&observer, PATH).await, Some((b"2".to_vec(), 1)), "applied exactly once");
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn a_conditional_write_is_a_plain_request_never_a_multi() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    const PATH: &str = "/write-once/e/value";
    // A server that closes the connection on a multi: write_once must never need one.
    proxy.refuse_requests(RequestMatch::multi());

    let created = within("create", framework.write_once(PATH, ConditionalWrite::create(b"1"), step())).await;
    match created {
        // create2 answers with the new node's stat, on every server since 3.5.
        Ok(WriteOutcome::Applied(Some(stat))) => assert_eq!((stat.version, stat.data_length), (0, 1)),
        other => panic!("a plain create is applied and sends its stat: {other:?}"),
    }
    assert_eq!(on_server(&observer, PATH).await, Some((b"1".to_vec(), 0)));

    let read = within("read", framework.get_data(PATH, step())).await.expect("read");
    let set = ConditionalWrite::set_if_unchanged(b"2", &read.stat);
    match within("set", framework.write_once(PATH, set, step())).await {
        Ok(WriteOutcome::Applied(Some(stat))) => assert_eq!(stat.version, 1),
        other => panic!("a plain versioned set is applied: {other:?}"),
    }
    let stale = within("stale set", framework.write_once(PATH, set, step())).await;
    assert_eq!(stale.expect("answered"), WriteOutcome::Refused(ZkError::BadVersion));
    assert_eq!(on_server(&observer, PATH).await, Some((b"2".to_vec(), 1)), "applied once each");
    assert_eq!(proxy.stats().refused, 0, "no multi was sent");
    close_all([framework, observer]).await;
}
