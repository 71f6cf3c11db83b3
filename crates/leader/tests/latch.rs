//! The leader latch against a real ZooKeeper server.

mod checks;
mod common;
mod contender;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use checks::*;
use common::*;
use contender::*;
use zk_recipes_framework::{Deadline, ErrorPolicy, Framework};
use zk_recipes_leader::{
    CloseMode, KazooElection, LeaderError, LeaderLatch, LeadershipEvent, NotLeaderReason,
};
use zk_recipes_testing::{FaultProxy, TestingServer};

const SESSION: Duration = Duration::from_secs(10);

async fn watch_count(server: &TestingServer) -> usize {
    server.watch_count().await.expect("wchc")
}

/// The next event, within a step.
async fn next_event(events: &mut zk_recipes_leader::LeadershipEvents) -> Option<LeadershipEvent> {
    within("leadership event", events.next()).await
}

#[tokio::test]
async fn ten_latches_elect_exactly_one_leader_at_a_time() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let admin = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let (path, marker) = ("/ten/latch", "/ten/marker");
    let violations = Arc::new(AtomicU32::new(0));
    let mut contenders: Vec<Contender> = (0..10)
        .map(|index| {
            let framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
            Contender::start(framework, path, marker, &format!("p{index}"), violations.clone())
        })
        .collect();
    eventually("ten participants", || async { children(&admin, path).await.len() == 10 }).await;

    let mut hand_overs = Vec::new();
    let mut leader = exactly_one_leader(&admin, &contenders, marker).await;
    while !contenders.is_empty() {
        let participants =
            within("participants", contenders[leader].latch.participants()).await.expect("list");
        assert_eq!(participants.len(), contenders.len());
        assert!(participants[0].is_leader && participants.iter().skip(1).all(|p| !p.is_leader));
        assert_eq!(participants[0].id, contenders[leader].id, "the first node is the leader's");
        let named = within("leader", contenders[0].latch.leader()).await.expect("leader").expect("some");
        assert_eq!(named.id, contenders[leader].id);

        let leaving = contenders.remove(leader);
        let started = Instant::now();
        let closing = tokio::spawn(leaving.close(CloseMode::Silent));
        if !contenders.is_empty() {
            leader = exactly_one_leader(&admin, &contenders, marker).await;
            hand_overs.push(started.elapsed());
        }
        within("close", closing).await.expect("close task");
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0, "two leaders at once");
    eprintln!("hand-overs (close -> next leader marked, polled every 20 ms): {hand_overs:?}");
    assert!(hand_overs.iter().all(|took| *took < Duration::from_secs(2)), "{hand_overs:?}");
    assert_clean(&admin, &[path, "/ten"], || watch_count(&server)).await;
    within("close", admin.close()).await;
}

/// The two-leaders detector itself fails closed: only a marker of someone else is a violation,
/// and a check that cannot be made (a leader node missing, or another session's) is an error,
/// never a pass.
#[tokio::test]
async fn the_marker_check_reports_violations_and_errors_and_passes_only_a_clean_mark() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let (ours, theirs) = (
        framework(&server.connect_string(), SESSION, ErrorPolicy::Standard),
        framework(&server.connect_string(), SESSION, ErrorPolicy::Standard),
    );
    let (path, marker) = ("/marker-check/latch", "/marker-check/marker");
    let our_latch = LeaderLatch::new(&ours, path, "ours").expect("latch");
    our_latch.start().expect("start");
    within("ours leads", our_latch.await_leadership()).await.expect("leads");
    let our_node = our_latch.our_node_path().expect("a node");

    let missing = within("mark", try_mark(&ours, "/marker-check/latch/gone", marker, "ours")).await;
    assert!(missing.as_ref().is_err_and(|why| why.contains("does not exist")), "{missing:?}");
    let not_ours = within("mark", try_mark(&theirs, &our_node, marker, "theirs")).await;
    assert!(not_ours.as_ref().is_err_and(|why| why.contains("belongs to session")), "{not_ours:?}");
    assert_eq!(data(&ours, marker).await, None, "no check could be made: nothing marked");

    assert_eq!(within("mark", try_mark(&ours, &our_node, marker, "ours")).await, Ok(true));
    assert_eq!(within("mark again", try_mark(&ours, &our_node, marker, "ours")).await, Ok(true), "ours");
    let their_latch = LeaderLatch::new(&theirs, path, "theirs").expect("latch");
    their_latch.start().expect("start");
    eventually("theirs joined", || async { their_latch.our_node_path().is_some() }).await;
    let their_node = their_latch.our_node_path().expect("a node");
    let second = within("mark", try_mark(&theirs, &their_node, marker, "theirs")).await;
    assert_eq!(second, Ok(false), "someone else's marker: two leaders");

    within("unmark", try_unmark(&theirs, marker)).await.expect("nothing of theirs to delete");
    assert_eq!(data(&ours, marker).await.as_deref(), Some(&b"ours"[..]), "their unmark leaves ours");
    within("unmark", try_unmark(&ours, marker)).await.expect("unmark");
    assert_eq!(data(&ours, marker).await, None);
    for latch in [our_latch, their_latch] {
        within("close", latch.close(CloseMode::Silent)).await.expect("close");
    }
    assert_clean(&ours, &[path], || watch_count(&server)).await;
    for framework in [ours, theirs] {
        within("close", framework.close()).await;
    }
}

#[tokio::test]
async fn close_modes_notify_or_stay_silent_and_drop_guards_close_without_a_runtime() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let path = "/modes/latch";

    let first = LeaderLatch::new(&framework, path, "first").expect("latch");
    let not_started =
        within("await_leadership before start", first.await_leadership()).await.expect_err("not started");
    assert!(matches!(not_started, LeaderError::NotStarted(_)));
    assert_eq!(
        not_started.to_string(),
        "the leader latch on /modes/latch is not started: call start() first"
    );
    first.start().expect("start");
    assert!(matches!(first.start(), Err(LeaderError::AlreadyStarted(_))));
    let token = within("first leads", first.await_leadership()).await.expect("leads");
    assert_eq!(first.fencing_token(), Some(token));
    let second = LeaderLatch::new(&framework, path, "second").expect("latch");
    second.start().expect("start");
    let third = LeaderLatch::new(&framework, path, "third").expect("latch");
    third.start().expect("start");
    eventually("three participants", || async { children(&framework, path).await.len() == 3 }).await;

    // NotifyLeader on a leader: NotLeader { Closed }, then the end.
    let mut first_events = first.subscribe();
    within("close", first.close(CloseMode::NotifyLeader)).await.expect("close");
    assert_eq!(
        next_event(&mut first_events).await,
        Some(LeadershipEvent::NotLeader { reason: NotLeaderReason::Closed })
    );
    assert_eq!(next_event(&mut first_events).await, None);
    assert!(!first.has_leadership() && first.is_closed() && first.fencing_token().is_none());
    let closed =
        within("await_leadership on a closed latch", first.await_leadership()).await.expect_err("closed");
    assert!(matches!(closed, LeaderError::Closed(_)) && closed.is_closed());
    assert_eq!(closed.to_string(), "the leader latch on /modes/latch is closed");
    assert!(matches!(first.start(), Err(LeaderError::Closed(_))));
    within("close again", first.close(CloseMode::NotifyLeader)).await.expect("closing twice is fine");
    assert_eq!(next_event(&mut first.subscribe()).await, None, "a subscription after close ends at once");

    // Silent on a leader: the stream just ends.
    let second_token = within("second leads", second.await_leadership()).await.expect("leads");
    assert!(second_token > token, "fencing tokens grow from leader to leader");
    let mut second_events = second.subscribe();
    within("close", second.close(CloseMode::Silent)).await.expect("close");
    assert_eq!(next_event(&mut second_events).await, None);
    assert!(!second.has_leadership());

    // NotifyLeader on a participant that does not lead: nothing to tell.
    within("third leads", third.await_leadership()).await.expect("leads");
    let fourth = LeaderLatch::new(&framework, path, "fourth").expect("latch");
    fourth.start().expect("start");
    eventually("fourth queued", || async { children(&framework, path).await.len() == 2 }).await;
    let mut fourth_events = fourth.subscribe();
    within("close", fourth.close(CloseMode::NotifyLeader)).await.expect("close");
    assert_eq!(next_event(&mut fourth_events).await, None);

    // A drop guard closes (here with NotifyLeader) when dropped, even on a thread without a
    // runtime; the node is deleted by the framework's cleanup worker and the next one leads.
    let fifth = LeaderLatch::new(&framework, path, "fifth").expect("latch");
    fifth.start().expect("start");
    eventually("fifth queued", || async { children(&framework, path).await.len() == 2 }).await;
    let guard = third.clone().drop_guard(CloseMode::NotifyLeader);
    let mut third_events = third.subscribe();
    std::thread::spawn(move || drop(guard)).join().expect("drop on a plain thread");
    assert_eq!(
        next_event(&mut third_events).await,
        Some(LeadershipEvent::NotLeader { reason: NotLeaderReason::Closed })
    );
    assert_eq!(next_event(&mut third_events).await, None);
    within("fifth leads after the guard dropped", fifth.await_leadership()).await.expect("leads");

    // A disarmed guard leaves the latch running.
    let guard = fifth.clone().drop_guard(CloseMode::Silent);
    let fifth_again = guard.disarm();
    assert!(fifth_again.has_leadership() && !fifth.is_closed());
    within("close", fifth.close(CloseMode::Silent)).await.expect("close");

    assert_clean(&framework, &[path], || watch_count(&server)).await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_latch_recovers_when_its_path_was_reaped_meanwhile() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let admin = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let framework = framework(&proxy.connect_string(), SESSION, ErrorPolicy::Standard);
    let path = "/reaped/latch";
    let latch = LeaderLatch::new(&framework, path, "survivor").expect("latch");
    let mut events = latch.subscribe();
    latch.start().expect("start");
    within("leads", latch.await_leadership()).await.expect("leads");
    let old_node = latch.our_node_path().expect("a node");

    // Cut the latch off, delete its node behind its back, and let the server reap the containers.
    proxy.black_hole(Duration::from_secs(60));
    admin
        .retry(Deadline::after(STEP), |session| {
            let old_node = old_node.clone();
            async move { Ok(session.client().delete(&old_node, None).await?) }
        })
        .await
        .expect("delete the latch node");
    eventually("the container is reaped", || async {
        admin
            .retry(
                Deadline::after(STEP),
                |session| async move { Ok(session.client().check_stat(path).await?) },
            )
            .await
            .expect("stat")
            .is_none()
    })
    .await;
    proxy.heal();

    // The listener hears that leadership ended (the connection was cut, or the node found gone);
    // on the same session the listing finds no path, and the latch joins again with a new node.
    loop {
        match next_event(&mut events).await.expect("events") {
            LeadershipEvent::NotLeader { .. } => break,
            other => assert!(other.is_leader(), "{other:?}"),
        }
    }
    let token = loop {
        match next_event(&mut events).await.expect("events") {
            LeadershipEvent::IsLeader { fencing_token } => break fencing_token,
            LeadershipEvent::NotLeader { .. } => {}
            other => panic!("{other:?}"),
        }
    };
    let new_node = latch.our_node_path().expect("a node");
    assert_ne!(new_node, old_node);
    assert_eq!(latch.fencing_token(), Some(token));
    assert_eq!(children(&admin, path).await, vec![zk_recipes_framework::path::name(&new_node).to_owned()]);
    within("close", latch.close(CloseMode::Silent)).await.expect("close");
    assert_clean(&admin, &[path], || watch_count(&server)).await;
    within("close", framework.close()).await;
    within("close", admin.close()).await;
}

#[tokio::test]
async fn reconnections_never_make_latches_recreate_their_nodes() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let admin = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let path = "/livelock/latch";
    let mut proxies = Vec::new();
    let mut latches = Vec::new();
    for index in 0..2 {
        let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
        let framework = framework(&proxy.connect_string(), SESSION, ErrorPolicy::Standard);
        let latch = LeaderLatch::new(&framework, path, format!("l{index}")).expect("latch");
        latch.start().expect("start");
        proxies.push(proxy);
        latches.push((framework, latch));
    }
    eventually("both joined, one leads", || async {
        children(&admin, path).await.len() == 2
            && latches.iter().filter(|(_, latch)| latch.has_leadership()).count() == 1
    })
    .await;
    let nodes: Vec<_> = latches.iter().map(|(_, latch)| latch.our_node_path().expect("node")).collect();
    let stat = |admin: Framework| async move {
        admin
            .retry(
                Deadline::after(STEP),
                |session| async move { Ok(session.client().check_stat(path).await?) },
            )
            .await
            .expect("stat")
            .expect("the path exists")
    };
    let before = stat(admin.clone()).await;

    for _ in 0..5 {
        for proxy in &proxies {
            proxy.cut_now();
        }
        eventually("reconnected, one leader", || async {
            latches
                .iter()
                .all(|(framework, _)| framework.current().state.is_some_and(|state| state.is_connected()))
                && latches.iter().filter(|(_, latch)| latch.has_leadership()).count() == 1
        })
        .await;
    }
    // Let any (wrong) re-creation show up before looking.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let after = stat(admin.clone()).await;
    let nodes_after: Vec<_> = latches.iter().map(|(_, latch)| latch.our_node_path().expect("node")).collect();
    assert_eq!(nodes, nodes_after, "the same nodes after five reconnections");
    assert_eq!(after.cversion, before.cversion, "no child was created or deleted");
    assert_eq!(children(&admin, path).await.len(), 2);

    for (framework, latch) in latches {
        within("close", latch.close(CloseMode::Silent)).await.expect("close");
        within("close", framework.close()).await;
    }
    assert_clean(&admin, &[path], || watch_count(&server)).await;
    within("close", admin.close()).await;
}

#[tokio::test]
async fn rejects_bad_paths_before_sending_anything() {
    init_tracing();
    // No server needed: validation happens first. The framework needs a runtime only.
    let framework = Framework::builder("127.0.0.1:1").start().expect("framework");
    assert!(matches!(LeaderLatch::new(&framework, "no-slash", ""), Err(LeaderError::Framework(_))));
    assert!(matches!(LeaderLatch::new(&framework, "/trailing/", ""), Err(LeaderError::Framework(_))));
    assert!(zk_recipes_leader::LeaderSelector::builder(&framework, "/a//b").build(|_| async {}).is_err());
    within("close", framework.close()).await;
}

/// waiting for leadership times out the same way in the latch and in the kazoo
/// election — `Err` with `is_timeout()`. The latch stays in line (a membership) and leads once the
/// leader goes; the kazoo contender's node is deleted (an acquire).
#[tokio::test]
async fn waiting_for_leadership_times_out_with_an_error_in_the_latch_and_the_kazoo_election() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let path = "/timeouts/latch";
    let leader = LeaderLatch::new(&framework, path, "leader").expect("latch");
    leader.start().expect("start");
    within("the first leads", leader.await_leadership()).await.expect("leads");
    let follower = LeaderLatch::new(&framework, path, "follower").expect("latch");
    follower.start().expect("start");
    eventually("two participants", || async { children(&framework, path).await.len() == 2 }).await;

    let waited =
        within("await_leadership_timeout", follower.await_leadership_timeout(Duration::from_millis(300)))
            .await;
    assert!(matches!(&waited, Err(err @ LeaderError::Timeout { .. }) if err.is_timeout()), "{waited:?}");
    let waited =
        within("await_leadership_until", follower.await_leadership_until(Duration::from_millis(300))).await;
    assert!(waited.as_ref().is_err_and(LeaderError::is_timeout), "{waited:?}");
    let waited =
        within("an expired deadline", follower.await_leadership_until(Deadline::after(Duration::ZERO))).await;
    assert!(waited.as_ref().is_err_and(LeaderError::is_timeout), "{waited:?}");
    assert!(follower.our_node_path().is_some(), "the follower is still in line");
    assert_eq!(children(&framework, path).await.len(), 2, "its node stays");

    within("close", leader.close(CloseMode::Silent)).await.expect("close");
    let token = within("the follower leads", follower.await_leadership_until(Deadline::never())).await;
    assert!(token.is_ok(), "{token:?}");
    within("close", follower.close(CloseMode::Silent)).await.expect("close");

    let election_path = "/timeouts/kazoo";
    let first = KazooElection::new(&framework, election_path, "first").expect("election");
    let leadership = within("first leads", first.lead()).await.expect("leads");
    let second = KazooElection::new(&framework, election_path, "second").expect("election");
    let waited = within("lead_until", second.lead_until(Duration::from_millis(300))).await;
    assert!(waited.as_ref().is_err_and(LeaderError::is_timeout), "{waited:?}");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_eq!(
        within("contenders", second.contenders()).await.expect("contenders"),
        ["first"],
        "no node left"
    );
    within("release", leadership.release()).await.expect("release");
    within("close", framework.close()).await;
}
