//! A session's creates and deletes sent together when it has many at once
//! (`FrameworkBuilder::batch_writes`), against a real ZooKeeper: each caller still gets its own
//! node, stat, listing and outcome, through failed operations, lost replies and cancellations.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::future::join_all;
use futures::TryFutureExt;
use zk_recipes_framework::zookeeper_client::{Acl, AuthId, Permission};
use zk_recipes_framework::{AclProvider, Framework, OwnedNode, ProtectedCreate};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, RequestMatch, TestingServer};

/// The server's count of packets received so far.
async fn packets_received(server: &TestingServer) -> u64 {
    let counters = within("mntr", server.mntr()).await.expect("mntr");
    counters["zk_packets_received"].parse().expect("a count")
}

/// `count` parents under `base`, made (and so known to the framework) before anything else.
async fn parents(framework: &Framework, base: &str, count: usize) -> Vec<String> {
    let parents: Vec<String> = (0..count).map(|index| format!("{base}/lock-{index}")).collect();
    for parent in &parents {
        within("ensure path", framework.ensure_path(parent, step())).await.expect("parent");
    }
    parents
}

/// Protected creates with listings, all started at once: the `index`th under `parents[index %
/// parents.len()]`.
async fn create_many(
    framework: &Framework,
    parents: &[String],
    count: usize,
) -> Vec<(OwnedNode, Option<Vec<String>>)> {
    let creates = (0..count).map(|index| {
        let parent = &parents[index % parents.len()];
        framework.create_protected(ProtectedCreate::new(parent, "lock-").list_siblings(true), step()).map_ok(
            |mut node| {
                let siblings = node.take_siblings();
                (node, siblings)
            },
        )
    });
    within("creates", join_all(creates)).await.into_iter().map(|created| created.expect("created")).collect()
}

/// Every child of every parent.
async fn all_children(framework: &Framework, parents: &[String]) -> Vec<String> {
    let mut all = Vec::new();
    for parent in parents {
        all.extend(children(framework, parent).await.into_iter().map(|child| format!("{parent}/{child}")));
    }
    all
}

#[tokio::test]
async fn many_creates_and_deletes_at_once_go_together_and_each_gets_its_own_node_stat_and_listing() {
    init_tracing();
    const COUNT: usize = 200;
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let batched = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let one_by_one = builder(&server.connect_string(), Duration::from_secs(10))
        .batch_writes(false)
        .start()
        .expect("framework");
    let mut packets = Vec::new();
    for (framework, base) in [(&batched, "/batched-many/on"), (&one_by_one, "/batched-many/off")] {
        let parents = parents(framework, base, 10).await;
        let session = within("session", framework.session(step())).await.expect("session");
        let before = packets_received(&server).await;
        let created = create_many(framework, &parents, COUNT).await;
        let after_creates = packets_received(&server).await;

        let names: BTreeSet<&str> = created.iter().map(|(node, _)| node.path()).collect();
        assert_eq!(names.len(), COUNT, "a node of its own for each create");
        let mut listed = 0;
        for (node, siblings) in &created {
            let stat = within("stat", session.client().check_stat(node.path())).await.expect("stat");
            let stat = stat.unwrap_or_else(|| panic!("{} is on the server", node.path()));
            assert_eq!(node.stat().czxid, stat.czxid, "{}: the stat of the node created", node.path());
            assert_eq!(stat.ephemeral_owner, session.id().0, "{}: ephemeral, ours", node.path());
            assert_eq!(
                node.sequence(),
                zk_recipes_framework::path::sequence_after(node.name(), "lock-"),
                "{}",
                node.path()
            );
            if let Some(siblings) = siblings {
                listed += 1;
                assert!(
                    siblings.iter().any(|sibling| sibling == node.name()),
                    "the listing holds {}",
                    node.name()
                );
            }
        }
        assert!(
            listed >= parents.len(),
            "at least the first create of each parent got its listing: {listed}"
        );
        assert_eq!(all_children(framework, &parents).await.len(), COUNT, "nothing more was created");

        let before_deletes = packets_received(&server).await;
        let deletes = created.into_iter().map(|(node, _)| node.delete(step()));
        for deleted in within("deletes", join_all(deletes)).await {
            deleted.expect("deleted");
        }
        let after_deletes = packets_received(&server).await;
        assert_eq!(all_children(framework, &parents).await, Vec::<String>::new(), "every node is gone");
        packets.push((after_creates - before, after_deletes - before_deletes));
    }
    let (batched_packets, one_by_one_packets) = (packets[0], packets[1]);
    // One by one, each create and its listing are requests of their own, and each delete is: the
    // control shows the count tells the two apart.
    assert!(
        one_by_one_packets.0 >= 2 * COUNT as u64 && one_by_one_packets.1 >= COUNT as u64,
        "one by one: {one_by_one_packets:?} packets for {COUNT} creates and deletes"
    );
    assert!(
        batched_packets.0 < COUNT as u64 / 4 && batched_packets.1 < COUNT as u64 / 4,
        "batched: {batched_packets:?} packets for {COUNT} creates and deletes"
    );
    close_all([batched, one_by_one]).await;
}

#[tokio::test]
async fn a_batch_whose_delete_finds_its_node_gone_still_deletes_every_other_node() {
    init_tracing();
    const COUNT: usize = 60;
    let (_server, framework) = server_and_framework().await;
    let parents = parents(&framework, "/batched-gone", 1).await;
    let created: Vec<OwnedNode> =
        create_many(&framework, &parents, COUNT).await.into_iter().map(|(node, _)| node).collect();
    // The last node is deleted behind our back: its delete, queued behind the others, fails the
    // multi it is in.
    let gone = created.last().expect("a node").path().to_owned();
    let session = within("session", framework.session(step())).await.expect("session");
    within("delete behind our back", session.client().delete(&gone, None)).await.expect("deleted");
    let deletes = created.into_iter().map(|node| node.delete(step()));
    for deleted in within("deletes", join_all(deletes)).await {
        deleted.expect("a node already gone counts as deleted");
    }
    assert_eq!(children(&framework, &parents[0]).await, Vec::<String>::new(), "every node is gone");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_batch_with_a_reaped_parent_makes_that_parent_again_and_creates_the_rest() {
    init_tracing();
    const COUNT: usize = 50;
    let (_server, framework) = server_and_framework().await;
    let parents = parents(&framework, "/batched-reaped", 5).await;
    // The framework knows every parent; the last one goes behind its back (as the server reaps an
    // empty container), so its creates fail in whatever multi they are in.
    let session = within("session", framework.session(step())).await.expect("session");
    within("delete a parent", session.client().delete(&parents[4], None)).await.expect("deleted");
    let created = create_many(&framework, &parents, COUNT).await;
    let mut on_server = all_children(&framework, &parents).await;
    on_server.sort();
    let mut ours: Vec<String> = created.iter().map(|(node, _)| node.path().to_owned()).collect();
    ours.sort();
    assert_eq!(on_server, ours, "exactly one node per create, the reaped parent's included");
    drop(created);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_batch_whose_reply_is_lost_leaves_each_create_once_and_each_delete_done() {
    init_tracing();
    const COUNT: usize = 50;
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    let parents = parents(&framework, "/batched-cut", 5).await;
    // The server applies the first multi of creates; its reply is dropped and the connection
    // closed. Each create then looks for its node by its marker on the same session.
    let cut = proxy.cut_after_next_reply(RequestMatch::multi().under("/batched-cut"));
    let created = create_many(&framework, &parents, COUNT).await;
    let cut = within("cut", cut).await.expect("a multi's reply was cut");
    assert_eq!(cut.server_error, 0, "the server applied it");
    assert!(cut.ops.len() > 1, "it was a batch: {:?}", cut.ops);
    let mut on_server = all_children(&observer, &parents).await;
    on_server.sort();
    let mut ours: Vec<String> = created.iter().map(|(node, _)| node.path().to_owned()).collect();
    ours.sort();
    assert_eq!(on_server, ours, "exactly one node per create");

    let cut = proxy.cut_after_next_reply(RequestMatch::multi().under("/batched-cut"));
    let deletes = created.into_iter().map(|(node, _)| node.delete(step()));
    for deleted in within("deletes", join_all(deletes)).await {
        deleted.expect("deleted");
    }
    let cut = within("cut", cut).await.expect("a multi's reply was cut");
    assert!(cut.ops.len() > 1 && cut.ops.iter().all(|(op, _)| *op == 2), "a batch of deletes: {:?}", cut.ops);
    assert_eq!(all_children(&observer, &parents).await, Vec::<String>::new(), "every node is gone");
    close_all([framework, observer]).await;
}

/// Starts `count` protected creates under `parents`, each in a task that holds its node; gives
/// them all up once the first is answered (the rest queued, or in a batch on the wire); then,
/// once the cleanups have settled (batches still answering included), asserts that nothing is
/// left. Returns how many were answered.
async fn give_up_creates(framework: &Framework, parents: &[String], count: usize) -> usize {
    let done = Arc::new(AtomicUsize::new(0));
    let tasks: Vec<_> = (0..count)
        .map(|index| {
            let (framework, done) = (framework.clone(), done.clone());
            let parent = parents[index % parents.len()].clone();
            tokio::spawn(async move {
                let node = framework.create_protected(ProtectedCreate::new(&parent, "lock-"), step()).await;
                done.fetch_add(1, Ordering::SeqCst);
                // Held until the task is aborted.
                std::future::pending::<()>().await;
                drop(node);
            })
        })
        .collect();
    eventually("a first create answered", || async { done.load(Ordering::SeqCst) > 0 }).await;
    for task in &tasks {
        task.abort();
    }
    let _ = within("aborted", join_all(tasks)).await;
    within("cleanups", framework.wait_for_cleanups(step())).await.expect("cleanups settle");
    assert_eq!(all_children(framework, parents).await, Vec::<String>::new(), "no node left");
    done.load(Ordering::SeqCst)
}

#[tokio::test]
async fn creates_given_up_while_queued_or_in_flight_leave_no_node() {
    init_tracing();
    const COUNT: usize = 300;
    let (_server, framework) = server_and_framework().await;
    let parents = parents(&framework, "/batched-given-up", 10).await;
    let answered = give_up_creates(&framework, &parents, COUNT).await;
    assert!(answered < COUNT, "some creates were given up before their answer");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn creates_given_up_while_their_failed_batch_is_sent_again_leave_no_node() {
    init_tracing();
    for attempt in 0..5 {
        let (_server, framework) = server_and_framework().await;
        let parents = parents(&framework, &format!("/batched-given-up-failed-{attempt}"), 10).await;
        // A parent gone behind our back fails each multi it is in: the batch is sent again one by
        // one, after its callers may have given up (and their cleanup looked for their nodes).
        let session = within("session", framework.session(step())).await.expect("session");
        within("delete a parent", session.client().delete(&parents[9], None)).await.expect("deleted");
        give_up_creates(&framework, &parents, 300).await;
        within("close", framework.close()).await;
    }
}

/// Nodes named `_c_…` get an ACL without READ; everything else is open.
#[derive(Debug)]
struct NoReadOnProtectedNodes {
    open: Vec<Acl>,
    no_read: Vec<Acl>,
}

impl AclProvider for NoReadOnProtectedNodes {
    fn default_acl(&self) -> &[Acl] {
        &self.open
    }

    fn acl_for_path(&self, path: &str) -> &[Acl] {
        match zk_recipes_framework::path::name(path).starts_with("_c_") {
            true => &self.no_read,
            false => &self.open,
        }
    }
}

#[tokio::test]
async fn batched_creates_get_their_stat_even_without_read_permission_on_their_nodes() {
    init_tracing();
    const COUNT: usize = 100;
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let all_but_read = Permission::WRITE | Permission::CREATE | Permission::DELETE | Permission::ADMIN;
    let provider = NoReadOnProtectedNodes {
        open: vec![Acl::new(Permission::ALL, AuthId::anyone())],
        no_read: vec![Acl::new(all_but_read, AuthId::anyone())],
    };
    let framework = builder(&server.connect_string(), Duration::from_secs(10))
        .acl_provider(provider)
        .start()
        .expect("framework");
    let parents = parents(&framework, "/batched-no-read", 5).await;
    let session = within("session", framework.session(step())).await.expect("session");
    let created = create_many(&framework, &parents, COUNT).await;
    for (node, _) in &created {
        // `exists` needs no permission; reading the data does.
        let stat =
            within("stat", session.client().check_stat(node.path())).await.expect("stat").expect("there");
        assert_eq!(node.stat().czxid, stat.czxid, "{}: the stat of the node created", node.path());
        assert_eq!(stat.ephemeral_owner, session.id().0);
    }
    drop(created);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_lone_create_and_delete_are_plain_requests() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let parents = parents(&framework, "/batched-lone", 1).await;
    // A plain create's reply is cut: a batch would be a multi, which this does not match.
    let cut = proxy.cut_after_next_reply(RequestMatch::create().under("/batched-lone/lock-0/"));
    let node = within(
        "create",
        framework.create_protected(ProtectedCreate::new(&parents[0], "lock-"), Duration::from_secs(10)),
    )
    .await;
    let node = node.expect("found again after the lost reply");
    assert_eq!(within("cut", cut).await.expect("cut").op_code, 15, "a plain create2");
    let cut = proxy.cut_after_next_reply(RequestMatch::delete().under("/batched-lone/lock-0/"));
    within("delete", node.delete(step())).await.expect("deleted");
    assert_eq!(within("cut", cut).await.expect("cut").op_code, 2, "a plain delete");
    assert_eq!(children(&framework, &parents[0]).await, Vec::<String>::new());
    within("close", framework.close()).await;
}

/// Starts `count` protected creates on `framework`, each in a task of its own, spread over
/// `parents`: the first ones go at once, the rest queue for a batch.
fn spawn_creates(
    framework: &Framework,
    parents: &[String],
    count: usize,
) -> Vec<tokio::task::JoinHandle<zk_recipes_framework::Result<OwnedNode>>> {
    (0..count)
        .map(|index| {
            let framework = framework.clone();
            let parent = parents[index % parents.len()].clone();
            tokio::spawn(async move {
                framework.create_protected(ProtectedCreate::new(&parent, "lock-"), STEP * 2).await
            })
        })
        .collect()
}

/// A batch sent on a session the server has expired is answered with the session's loss, as each
/// of its creates alone would be, not with a connection loss: with a retry left, each starts over
/// on the next session; without one, each fails as its session's loss (before the fix: a
/// connection loss, which calls the dead session's create retryable and makes a caller that
/// retries on its own try it there again).
#[tokio::test]
async fn batched_creates_on_an_expired_session_are_answered_with_the_sessions_loss() {
    use zk_recipes_framework::retry::{NoRetry, RetryNTimes};
    use zk_recipes_framework::ConnectionState;
    init_tracing();
    const COUNT: usize = 100;
    /// Creates a session sends on their own before the next ones wait for a batch.
    const DIRECT_LIMIT: usize = 2;
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    // A try waits for a session at most the connection timeout: long enough here to outlast the
    // partition, so that only the error a create is answered with decides how it retries.
    let through_proxy = || builder(&proxy.connect_string(), Duration::from_secs(2)).connection_timeout(STEP);
    let retrying = through_proxy()
        .retry_policy(RetryNTimes::new(1, Duration::from_millis(10)))
        .start()
        .expect("framework");
    let not_retrying = through_proxy().retry_policy(NoRetry).start().expect("framework");
    let observer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    for framework in [&retrying, &not_retrying] {
        within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    }
    let retried_parents = parents(&retrying, "/batched-expired/retried", 5).await;
    let failed_parents = parents(&not_retrying, "/batched-expired/failed", 5).await;
    let first_session = retrying.current().session_id.expect("a session");
    let negotiated = retrying.current().session_timeout.expect("a session");
    let mut events = retrying.connection_events();

    // Every create starts on its framework's first session.
    let retried = spawn_creates(&retrying, &retried_parents, COUNT);
    let failed = spawn_creates(&not_retrying, &failed_parents, COUNT);
    // The tasks run once (each create sent, or queued for its batch) before the connections break.
    // Then nothing gets through until the server has expired both sessions: the batches go out on
    // their first sessions while those cannot reach the server, and are answered when the client
    // learns that its session expired.
    tokio::task::yield_now().await;
    proxy.cut_now();
    proxy.black_hole(negotiated * 3);

    let failed = within_for(STEP * 2, "creates without a retry", join_all(failed)).await;
    let failed: Vec<_> = failed.into_iter().map(|created| created.expect("task")).collect();
    let session_lost =
        failed.iter().filter(|created| matches!(created, Err(err) if err.is_session_lost())).count();
    // The creates sent alone before the cut had them in flight: those get a connection loss.
    assert!(
        session_lost >= COUNT - DIRECT_LIMIT,
        "only {session_lost} of {COUNT} failed as their session's loss: {:?}",
        failed.iter().filter_map(|created| created.as_ref().err()).collect::<Vec<_>>()
    );

    let retried = within_for(STEP * 2, "creates with a retry", join_all(retried)).await;
    let nodes: Vec<OwnedNode> = retried
        .into_iter()
        .map(|created| created.expect("task").expect("created on the next session within one retry"))
        .collect();
    lost_then_reconnected(&mut events).await;
    let second_session = retrying.current().session_id.expect("a session");
    assert_ne!(second_session, first_session, "the first session expired");
    for node in &nodes {
        assert_eq!(node.session_id(), second_session, "{} is on the next session", node.path());
    }
    let mut on_server = all_children(&observer, &retried_parents).await;
    on_server.sort();
    let mut ours: Vec<String> = nodes.iter().map(|node| node.path().to_owned()).collect();
    ours.sort();
    assert_eq!(on_server, ours, "exactly one node per create, all of the next session");
    assert_eq!(retrying.current().state, Some(ConnectionState::Reconnected));
    drop(nodes);
    close_all([retrying, not_retrying, observer]).await;
}

/// A multi is one transaction with one zxid: two nodes it creates share their `czxid`, the
/// fencing token of a hold. Many creates under one parent at once (waiters of one lock on one
/// session) must each get a `czxid` of its own, so that one lock's holders never share a token.
#[tokio::test]
async fn creates_under_one_parent_never_share_a_czxid() {
    init_tracing();
    const COUNT: usize = 60;
    let (_server, framework) = server_and_framework().await;
    let parents = parents(&framework, "/batched-one-parent", 1).await;
    let created = create_many(&framework, &parents, COUNT).await;
    let czxids: BTreeSet<i64> = created.iter().map(|(node, _)| node.stat().czxid).collect();
    assert_eq!(czxids.len(), COUNT, "each node its own czxid");
    let sequences: Vec<i32> = {
        let mut by_czxid: Vec<_> =
            created.iter().map(|(node, _)| (node.stat().czxid, node.sequence())).collect();
        by_czxid.sort();
        by_czxid.into_iter().map(|(_, sequence)| sequence.expect("sequential")).collect()
    };
    assert!(
        sequences.windows(2).all(|pair| pair[0] < pair[1]),
        "czxid order is sequence order: {sequences:?}"
    );
    let deletes = created.into_iter().map(|(node, _)| node.delete(step()));
    for deleted in within("deletes", join_all(deletes)).await {
        deleted.expect("deleted");
    }
    within("close", framework.close()).await;
}

/// The direct limit follows the batches: a session with a few creates and deletes at once starts
/// batching them (from a cold start it sends two on their own), soon sends each on its own (a
/// batched create costs a second round trip, for its stat, where one alone costs one), and goes
/// back to batching when many wait.
#[tokio::test]
async fn few_writes_at_once_soon_go_on_their_own_and_many_go_together_again() {
    init_tracing();
    /// Fewer than the most the direct limit grows to (16).
    const FEW: usize = 10;
    const MANY: usize = 200;
    const ROUNDS: usize = 10;
    // No parent is reaped between rounds: a reaped parent's creates would fail their multi and go
    // one by one (with the parent made again), which counts many packets more.
    let server = TestingServer::builder().container_check_interval(Duration::from_secs(600)).start();
    let server = within_for(SERVER_START, "server start", server).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    // Two creates per parent for the many: two layers, two multis.
    let parents = parents(&framework, "/batched-adaptive", MANY / 2).await;
    // Packets the server received for the creates and for the deletes of each round at once.
    let mut rounds = Vec::new();
    for (round, count) in std::iter::repeat_n(FEW, ROUNDS).chain([MANY, MANY]).enumerate() {
        let round_parents = &parents[..count.min(parents.len())];
        let before = packets_received(&server).await;
        let created = create_many(&framework, round_parents, count).await;
        let after_creates = packets_received(&server).await;
        assert_eq!(created.len(), count, "round {round}");
        let deletes = created.into_iter().map(|(node, _)| node.delete(step()));
        for deleted in within("deletes", join_all(deletes)).await {
            deleted.expect("deleted");
        }
        let after_deletes = packets_received(&server).await;
        assert_eq!(all_children(&framework, round_parents).await, Vec::<String>::new(), "round {round}");
        rounds.push((after_creates - before, after_deletes - after_creates));
    }
    let (few, many) = rounds.split_at(ROUNDS);
    // On its own, a create and its listing are two requests and a delete is one.
    let on_their_own = |&(creates, deletes): &(u64, u64)| creates >= 2 * FEW as u64 && deletes >= FEW as u64;
    assert!(!on_their_own(&few[0]), "from a cold start, some are batched: {few:?}");
    let first_on_their_own = few.iter().position(on_their_own);
    assert!(
        first_on_their_own.is_some_and(|first| first <= ROUNDS / 2 && few[first..].iter().all(on_their_own)),
        "a few at once soon go on their own, and stay so: {few:?}"
    );
    // The first round of many: the few in flight on their own, then the rest as two multis and
    // their reads; the big batch sets the limit back to two, so the second is batched from the
    // start.
    assert!(many[0].0 < MANY as u64 / 4 && many[0].1 < MANY as u64 / 4, "many at once go together: {many:?}");
    assert!(many[1].0 < MANY as u64 / 10 && many[1].1 < MANY as u64 / 10, "and again: {many:?}");
    within("close", framework.close()).await;
}
