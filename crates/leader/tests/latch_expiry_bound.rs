//! The leader latch's step-down by the expiry clock, against a real ZooKeeper: under
//! `ErrorPolicy::Standard` a latch stops leading before the server may expire its session even
//! when the connection stays up until the expiry (no `Suspended` in time), and leads again with
//! the same node when the server's late answers come back in time.

use std::time::Duration;

use tokio::time::Instant;
use zk_recipes_framework::{ConnectionState, ErrorPolicy, Framework};
use zk_recipes_leader::{LeaderLatch, LeadershipEvent, LeadershipEvents, NotLeaderReason};
use zk_recipes_test_support::*;

/// Short, so the test waits for an expiry; long against the server's 200 ms tick.
const SHORT_SESSION: Duration = Duration::from_secs(4);

/// A started latch on `path` that leads, with its events subscribed before it started.
async fn leading_latch(framework: &Framework, path: &str, id: &str) -> (LeaderLatch, LeadershipEvents, i64) {
    let latch = LeaderLatch::new(framework, path, id).expect("latch");
    let events = latch.subscribe();
    latch.start().expect("start");
    let token = within("leadership", latch.await_leadership()).await.expect("leads");
    (latch, events, token)
}

/// The next `NotLeader` event and when it came.
async fn next_step_down(events: &mut LeadershipEvents) -> (NotLeaderReason, Instant) {
    loop {
        match events.next().await {
            Some(LeadershipEvent::NotLeader { reason }) => return (reason, Instant::now()),
            Some(_) => {}
            None => panic!("the latch's events ended"),
        }
    }
}

/// The server stops hearing the leader at `cut` and goes on sending it watch notifications (a
/// persistent watch on a node another client changes every 100 ms), so zookeeper-client never
/// reports `Suspended` before the server expires the session and closes the connection. A latch
/// that stepped down only on an error state led until it heard of its own node's deletion, after
/// the expiry, while the next participant could already lead. The expiry clock steps it down
/// before the expiry, with the connection still up.
#[tokio::test]
async fn a_latch_steps_down_before_the_expiry_while_watch_events_keep_the_connection_up() {
    init_tracing();
    let (server, proxy, leader, observer) = proxied(SHORT_SESSION).await;
    assert_eq!(leader.error_policy(), ErrorPolicy::Standard);
    let negotiated = leader.current().session_timeout.expect("a session");
    let busy = BusyNotifications::start(&leader, &observer, "/latch-expiry-bound-events-busy").await;
    let (latch, mut latch_events, _) = leading_latch(&leader, "/latch-expiry-bound-events/leader", "a").await;
    let node = latch.our_node_path().expect("our node");
    let session = within("observer session", observer.session(step())).await.expect("session");
    let (stat, deleted) = within("watch", session.client().check_and_watch_stat(&node)).await.expect("watch");
    assert!(stat.is_some(), "the leader's node is there");
    let mut connection = leader.connection_events();

    let cut = Instant::now();
    proxy.black_hole_requests(negotiated * 3);
    let ((reason, stepped_down_at), expired_at, suspended_at) =
        within_for(negotiated * 3, "step-down, expiry and Suspended", async {
            tokio::join!(
                next_step_down(&mut latch_events),
                when_deleted(deleted),
                when_state(&mut connection, ConnectionState::Suspended)
            )
        })
        .await;
    drop(busy);
    let race = ExpiryRace { cut, ended_at: stepped_down_at, suspended_at, expired_at };
    race.report(&format!("stepped down ({reason:?})"));
    race.assert_connection_stayed_up(negotiated);
    assert_eq!(reason, NotLeaderReason::SessionMayExpire, "the expiry clock ended the leadership");
    race.assert_ended_before_the_expiry(negotiated, "the latch stepped down");

    proxy.heal();
    // The session expired: the close may find the latch's node gone with it.
    match within("close", latch.close(zk_recipes_leader::CloseMode::Silent)).await {
        Ok(()) => {}
        Err(err) => assert!(err.is_node_lost(), "close: {err}"),
    }
    close_all([leader, observer]).await;
    drop(server);
}

/// The server hears the leader throughout, but its answers come ever later (raised in steps, so
/// the client never goes long without a byte and keeps the connection), until the latest answer
/// the clock knows of was sent more than `T − T/10` ago: the latch steps down, connected, because
/// it cannot tell a server that answers late from one that stopped hearing it. When the answers
/// come on time again, the latch leads again with the same node (its session was never expired):
/// the same fencing token, no new node.
#[tokio::test]
async fn a_latch_whose_answers_come_late_steps_down_and_leads_again_with_the_same_node() {
    init_tracing();
    let (server, proxy, leader, observer) = proxied(SHORT_SESSION).await;
    let negotiated = leader.current().session_timeout.expect("a session");
    let (latch, mut latch_events, token) =
        leading_latch(&leader, "/latch-expiry-bound-late/leader", "late").await;
    let node = latch.our_node_path().expect("our node");

    // Raise the delay by at most 0.8 s at a time (the client gives a silent connection up after
    // `2/5 × T`, 1.6 s), to past `T − T/10` (3.6 s).
    let mut delay = Duration::ZERO;
    let step_down = within_for(negotiated * 4, "the step-down", async {
        let mut step_down = std::pin::pin!(next_step_down(&mut latch_events));
        loop {
            delay = (delay + Duration::from_millis(800)).min(negotiated - negotiated / 20);
            proxy.delay_replies(delay);
            let forwarded = proxy.stats().bytes_to_client;
            tokio::select! {
                stepped = &mut step_down => break stepped,
                () = tokio::time::sleep(delay) => {}
            }
            tokio::select! {
                stepped = &mut step_down => break stepped,
                () = eventually("a late reply reached the leader", || async {
                    proxy.stats().bytes_to_client > forwarded
                }) => {}
            }
        }
    })
    .await;
    assert_eq!(step_down.0, NotLeaderReason::SessionMayExpire, "stepped down by the clock");
    assert_eq!(leader.current().state, Some(ConnectionState::Connected), "late answers kept the connection");
    assert!(!latch.has_leadership(), "has_leadership follows the clock");
    assert_eq!(latch.fencing_token(), None);

    proxy.delay_replies(Duration::ZERO);
    let again = within_for(negotiated * 2, "leading again", latch.await_leadership()).await.expect("leads");
    assert_eq!(again, token, "the same node leads again: its session was never expired");
    assert_eq!(latch.our_node_path().as_deref(), Some(node.as_str()), "no new node");
    let participants = within("participants", latch.participants()).await.expect("participants");
    assert_eq!(participants.len(), 1, "one node of ours: {participants:?}");

    within("close", latch.close(zk_recipes_leader::CloseMode::Silent)).await.expect("close");
    close_all([leader, observer]).await;
    drop(server);
}
