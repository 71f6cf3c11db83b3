//! Observing an election without joining it (`ElectionObserver`), and a leader proclaiming its
//! data (`LeaderLatch::proclaim`, `Leadership::proclaim`), against a real ZooKeeper server.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use tokio::sync::{mpsc, Notify};
use zk_recipes_framework::{ConnectionState, Deadline, Error as FrameworkError, ErrorPolicy, Framework};
use zk_recipes_leader::{
    CloseMode, ElectionObserver, LeaderChange, LeaderError, LeaderLatch, LeaderSelector, Leadership,
};
use zk_recipes_testing::{FaultProxy, TestingServer};

const SESSION: Duration = Duration::from_secs(10);
/// Short enough for a test to wait for its expiry.
const SHORT_SESSION: Duration = Duration::from_secs(2);
/// How long an observer is given to report nothing (a duplicate, a change that did not happen).
const QUIET: Duration = Duration::from_millis(500);

/// The observer's next report, within a step.
async fn next_change(observer: &mut ElectionObserver) -> LeaderChange {
    within("the next leader change", observer.next()).await.expect("the framework is open")
}

/// Asserts the observer reports nothing within [`QUIET`].
async fn no_change(observer: &mut ElectionObserver) {
    if let Ok(change) = tokio::time::timeout(QUIET, observer.next()).await {
        panic!("expected no report, got {change:?}");
    }
}

/// The reported leader's id, data and node.
fn leader(change: &LeaderChange) -> (&str, &[u8], &str) {
    match change {
        LeaderChange::Leader { participant_id, data, node_path } => (participant_id, data, node_path),
        other => panic!("expected a leader, got {other:?}"),
    }
}

/// A started latch on its own framework.
fn latch(framework: &Framework, path: &str, id: &str) -> LeaderLatch {
    let latch = LeaderLatch::new(framework, path, id).expect("latch");
    latch.start().expect("start");
    latch
}

/// How many watches (of any session) the server holds on `path` and below (the frameworks' own
/// watches elsewhere do not count).
async fn watched_under(server: &TestingServer, path: &str) -> usize {
    let watches = server.watches().await.expect("wchc");
    watches.values().flatten().filter(|watched| watched.starts_with(path)).count()
}

/// The data of every node under `path`.
async fn data_under(framework: &Framework, path: &str) -> Vec<Vec<u8>> {
    let mut all = Vec::new();
    for child in children(framework, path).await {
        if let Some((data, _)) = on_server(framework, &format!("{path}/{child}")).await {
            all.push(data);
        }
    }
    all
}

/// An observer on an election that does not exist reports no leader, creates nothing, and then
/// reports the first leader once one joins.
#[tokio::test]
async fn an_observer_reports_no_leader_then_the_first_leader_and_creates_no_node() {
    init_tracing();
    let (server, admin) = server_and_framework().await;
    let path = "/observe-empty/leader";
    let mut observer = ElectionObserver::latch(&admin, path).expect("observer");
    assert_eq!(next_change(&mut observer).await, LeaderChange::NoLeader);
    no_change(&mut observer).await;
    assert!(children(&admin, "/observe-empty").await.is_empty(), "the observer created nothing");

    let framework = builder(&server.connect_string(), SESSION).start().expect("framework");
    let first = latch(&framework, path, "first");
    let change = next_change(&mut observer).await;
    let (id, data, node) = leader(&change);
    assert_eq!((id, data), ("first", &b"first"[..]));
    within("leads", first.await_leadership()).await.expect("leads");
    assert_eq!(Some(node.to_owned()), first.our_node_path());
    assert_eq!(observer.last(), Some(&change));
    // Only the latch's node: the observer joined nothing.
    assert_eq!(children(&admin, path).await.len(), 1);

    within("close", first.close(CloseMode::Silent)).await.expect("close");
    assert_eq!(next_change(&mut observer).await, LeaderChange::NoLeader);
    assert!(watched_under(&server, path).await > 0, "the observer's watch is on the server");
    drop(observer);
    eventually("no watch left", || async { watched_under(&server, path).await == 0 }).await;
    close_all([framework, admin]).await;
}

/// Leaders change as latches close and lose their sessions: the observer reports each, in order,
/// once.
#[tokio::test]
async fn the_observer_reports_each_leader_in_order_as_latches_close_and_lose_sessions() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let admin = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let path = "/observe-order/leader";
    let mut observer = ElectionObserver::latch(&admin, path).expect("observer");
    assert_eq!(next_change(&mut observer).await, LeaderChange::NoLeader);

    let a_framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let a = latch(&a_framework, path, "a");
    within("a leads", a.await_leadership()).await.expect("a leads");
    // b loses its session through the proxy.
    let b_framework = framework(&proxy.connect_string(), SHORT_SESSION, ErrorPolicy::Standard);
    let b = latch(&b_framework, path, "b");
    eventually("b joined", || async { b.our_node_path().is_some() }).await;
    let c_framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let c = latch(&c_framework, path, "c");
    eventually("c joined", || async { children(&admin, path).await.len() == 3 }).await;

    let mut seen = vec![next_change(&mut observer).await];
    within("close a", a.close(CloseMode::Silent)).await.expect("close a");
    seen.push(next_change(&mut observer).await);

    // b's session expires: c leads, and b joins again behind c.
    let mut b_events = b_framework.connection_events();
    let negotiated = b_framework.current().session_timeout.expect("b's session");
    proxy.black_hole(negotiated * 3);
    seen.push(next_change(&mut observer).await);
    lost_then_reconnected(&mut b_events).await;
    proxy.heal();
    eventually("b joined again", || async { children(&admin, path).await.len() == 2 }).await;
    within("close c", c.close(CloseMode::Silent)).await.expect("close c");
    seen.push(next_change(&mut observer).await);
    within("close b", b.close(CloseMode::Silent)).await.expect("close b");
    seen.push(next_change(&mut observer).await);

    let ids: Vec<Option<&str>> = seen.iter().map(LeaderChange::participant_id).collect();
    assert_eq!(ids, [Some("a"), Some("b"), Some("c"), Some("b"), None], "{seen:#?}");
    // b led twice, with two nodes.
    assert_ne!(seen[1].node_path(), seen[3].node_path());
    no_change(&mut observer).await;
    drop(observer);
    close_all([a_framework, b_framework, c_framework]).await;
    eventually("no watch left", || async { watched_under(&server, path).await == 0 }).await;
    within("close", admin.close()).await;
}

/// The leader proclaims: the observer, `participants()` and `leader()` see the data; the same data
/// again reports nothing; a follower, a latch not started and a closed one are refused and change
/// nothing; data that is too large is refused before anything is sent.
#[tokio::test]
async fn a_latch_leader_proclaims_and_the_observer_sees_each_value_once() {
    init_tracing();
    let (server, admin) = server_and_framework().await;
    let path = "/observe-proclaim/leader";
    let leader_framework = builder(&server.connect_string(), SESSION).start().expect("framework");
    let follower_framework = builder(&server.connect_string(), SESSION).start().expect("framework");
    let not_started = LeaderLatch::new(&leader_framework, path, "idle").expect("latch");
    let refused = within("proclaim", not_started.proclaim("x", step())).await.expect_err("not started");
    assert!(matches!(refused, LeaderError::NotStarted(_)), "{refused}");

    let leading = latch(&leader_framework, path, "leader-1");
    within("leads", leading.await_leadership()).await.expect("leads");
    let following = latch(&follower_framework, path, "follower-1");
    eventually("the follower joined", || async { children(&admin, path).await.len() == 2 }).await;
    let mut observer = ElectionObserver::latch(&admin, path).expect("observer");
    let first = next_change(&mut observer).await;
    assert_eq!(leader(&first).0, "leader-1");
    let node = leader(&first).2.to_owned();

    within("proclaim", leading.proclaim("leader-1 at 10.0.0.1", step())).await.expect("proclaim");
    let change = next_change(&mut observer).await;
    assert_eq!(leader(&change), ("leader-1 at 10.0.0.1", &b"leader-1 at 10.0.0.1"[..], node.as_str()));
    assert_eq!(on_server(&admin, &node).await.expect("node").0, b"leader-1 at 10.0.0.1");
    let named = within("leader", following.leader()).await.expect("leader").expect("a leader");
    assert_eq!(named.id, "leader-1 at 10.0.0.1");

    // The same data again: the node's version moves, the leader does not change: no report.
    within("proclaim", leading.proclaim("leader-1 at 10.0.0.1", step())).await.expect("proclaim");
    assert_eq!(on_server(&admin, &node).await.expect("node").1, 2, "written twice");
    no_change(&mut observer).await;

    // A follower may not proclaim; nothing changes.
    let refused = within("proclaim", following.proclaim("usurper", step())).await.expect_err("follower");
    assert!(refused.is_not_leader(), "{refused}");
    assert_eq!(refused.to_string(), format!("the leader latch on {path} is not leading"));
    // Too large: refused before anything is sent.
    let too_large = vec![b'x'; 2 << 20];
    let refused = within("proclaim", leading.proclaim(too_large, step())).await.expect_err("too large");
    assert!(matches!(refused, LeaderError::Framework(FrameworkError::DataTooLarge { .. })), "{refused}");
    assert_eq!(on_server(&admin, &node).await.expect("node"), (b"leader-1 at 10.0.0.1".to_vec(), 2));

    within("proclaim", leading.proclaim("leader-1 v3", step())).await.expect("proclaim");
    // The next report is the new value: never the earlier one again.
    assert_eq!(leader(&next_change(&mut observer).await).0, "leader-1 v3");
    within("close", leading.close(CloseMode::Silent)).await.expect("close");
    let refused = within("proclaim", leading.proclaim("late", step())).await.expect_err("closed");
    assert!(refused.is_closed(), "{refused}");
    assert_eq!(leader(&next_change(&mut observer).await).0, "follower-1");
    assert!(!data_under(&admin, path).await.contains(&b"usurper".to_vec()));

    within("close", following.close(CloseMode::Silent)).await.expect("close");
    assert_eq!(next_change(&mut observer).await, LeaderChange::NoLeader);
    close_all([leader_framework, follower_framework, admin]).await;
}

/// A leader whose session is lost while its proclaim waits for the connection: the proclaim fails
/// with `NodeLost`, is never sent on the new session, and writes nothing anywhere.
#[tokio::test]
async fn a_proclaim_on_a_lost_session_fails_with_node_lost_and_writes_nothing() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let admin = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    // SessionOnly: the latch believes it leads until the session is declared lost.
    let framework = framework(&proxy.connect_string(), SHORT_SESSION, ErrorPolicy::SessionOnly);
    let path = "/observe-lost/leader";
    let leading = latch(&framework, path, "lost-leader");
    within("leads", leading.await_leadership()).await.expect("leads");
    let old_node = leading.our_node_path().expect("our node");
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");

    proxy.black_hole(negotiated * 3);
    // Suspended first, so the proclaim waits for the session instead of being sent into the void.
    until_state(&mut events, ConnectionState::Suspended).await;
    assert!(leading.has_leadership(), "SessionOnly: still leading while cut off");
    let proclaiming = tokio::spawn({
        let leading = leading.clone();
        async move { leading.proclaim("must never be written", Deadline::after(negotiated * 4)).await }
    });
    lost_then_reconnected(&mut events).await;
    let refused = within("the proclaim's end", proclaiming).await.expect("task").expect_err("node lost");
    assert!(refused.is_node_lost(), "{refused}");
    assert_eq!(
        refused.to_string(),
        format!("our node {old_node} is gone (its session was lost or it was deleted)")
    );
    assert!(matches!(refused, LeaderError::NodeLost { ref path } if *path == old_node));

    proxy.heal();
    within("leads again", leading.await_leadership()).await.expect("leads again");
    let new_node = leading.our_node_path().expect("a new node");
    assert_ne!(new_node, old_node);
    assert_eq!(on_server(&admin, &old_node).await, None, "the old node went with its session");
    assert_eq!(data_under(&admin, path).await, vec![b"lost-leader".to_vec()], "nothing was written");
    // The new leadership proclaims on its own node.
    within("proclaim", leading.proclaim("found again", step())).await.expect("proclaim");
    assert_eq!(on_server(&admin, &new_node).await.expect("node").0, b"found again");

    within("close", leading.close(CloseMode::Silent)).await.expect("close");
    close_all([framework, admin]).await;
}

/// The observer's own session expires while the leader changes: afterwards it reports the
/// current leader (once), and its watch is set on the new session.
#[tokio::test]
async fn an_observer_reports_the_current_leader_after_its_own_session_expired() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let admin = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let watching = framework(&proxy.connect_string(), SHORT_SESSION, ErrorPolicy::Standard);
    within("connected", watching.block_until_connected(STEP)).await.expect("connected");
    let path = "/observe-expiry/leader";
    let first = latch(&admin, path, "first");
    within("leads", first.await_leadership()).await.expect("leads");
    let second_framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let second = latch(&second_framework, path, "second");
    eventually("second joined", || async { children(&admin, path).await.len() == 2 }).await;

    let mut observer = ElectionObserver::latch(&watching, path).expect("observer");
    assert_eq!(leader(&next_change(&mut observer).await).0, "first");
    let mut events = watching.connection_events();
    let negotiated = watching.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    // Changed while the observer is cut off: it cannot hear of it now.
    within("close first", first.close(CloseMode::Silent)).await.expect("close");
    within("second leads", second.await_leadership()).await.expect("second leads");
    lost_then_reconnected(&mut events).await;
    proxy.heal();

    let change = next_change(&mut observer).await;
    assert_eq!(leader(&change).0, "second");
    assert_eq!(leader(&change).2, second.our_node_path().expect("second's node"));
    no_change(&mut observer).await;
    // The watch lives on the new session: a proclaim is heard.
    within("proclaim", second.proclaim("second, proclaimed", step())).await.expect("proclaim");
    assert_eq!(leader(&next_change(&mut observer).await).0, "second, proclaimed");

    within("close", second.close(CloseMode::Silent)).await.expect("close");
    assert_eq!(next_change(&mut observer).await, LeaderChange::NoLeader);
    drop(observer);
    close_all([watching, second_framework]).await;
    eventually("no watch left", || async { watched_under(&server, path).await == 0 }).await;
    within("close", admin.close()).await;
}

/// A selector's leadership proclaims: a selector observer sees the id, then the proclaimed data;
/// the leadership's token refuses once the leadership is over.
#[tokio::test]
async fn a_selector_leadership_proclaims_and_is_refused_once_over() {
    init_tracing();
    let (server, admin) = server_and_framework().await;
    let path = "/observe-selector/leader";
    let framework = builder(&server.connect_string(), SESSION).start().expect("framework");
    let go = Arc::new(Notify::new());
    let (leaderships, mut leadership_rx) = mpsc::unbounded_channel::<Leadership>();
    let selector = LeaderSelector::builder(&framework, path)
        .id("selector-1")
        .build({
            let go = go.clone();
            move |leadership: Leadership| {
                let (go, leaderships) = (go.clone(), leaderships.clone());
                async move {
                    let _ = leaderships.send(leadership.clone());
                    go.notified().await;
                    leadership.proclaim("selector-1, proclaimed", step()).await.expect("proclaim");
                    leadership.cancelled().await;
                }
            }
        })
        .expect("selector");
    let mut observer = ElectionObserver::selector(&admin, path).expect("observer");
    assert_eq!(next_change(&mut observer).await, LeaderChange::NoLeader);
    selector.start().expect("start");
    let leadership = within("leadership", leadership_rx.recv()).await.expect("leads");
    let change = next_change(&mut observer).await;
    assert_eq!(leader(&change), ("selector-1", &b"selector-1"[..], leadership.node_path()));
    go.notify_one();
    assert_eq!(leader(&next_change(&mut observer).await).0, "selector-1, proclaimed");

    within("close", selector.close()).await.expect("close");
    assert_eq!(next_change(&mut observer).await, LeaderChange::NoLeader);
    let refused = within("proclaim", leadership.proclaim("late", step())).await.expect_err("over");
    assert!(refused.is_not_leader(), "{refused}");
    assert!(children(&admin, path).await.is_empty(), "the late proclaim created nothing");
    close_all([framework, admin]).await;
}

/// A selector's leadership proclaims from a task of its own while the session is cut off: the
/// leadership is dropped meanwhile, the session is then lost, and the proclaim fails with
/// `NodeLost`, never sent on the new session, writing nothing.
#[tokio::test]
async fn a_selector_proclaim_on_a_lost_session_fails_with_node_lost_and_writes_nothing() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let admin = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    // Long enough for the proclaim to start before the leadership's future is dropped (about a
    // quarter of the session timeout after Suspended).
    let framework = framework(&proxy.connect_string(), Duration::from_secs(4), ErrorPolicy::Standard);
    let path = "/observe-selector-lost/leader";
    let (leaderships, mut leadership_rx) = mpsc::unbounded_channel::<Leadership>();
    let selector = LeaderSelector::builder(&framework, path)
        .id("selector-lost")
        .build(move |leadership: Leadership| {
            let leaderships = leaderships.clone();
            async move {
                let _ = leaderships.send(leadership);
                // Ignores its token: only dropping it ends it.
                std::future::pending::<()>().await;
            }
        })
        .expect("selector");
    selector.start().expect("start");
    let leadership = within("leadership", leadership_rx.recv()).await.expect("leads");
    let node = leadership.node_path().to_owned();
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");

    proxy.black_hole(negotiated * 3);
    until_state(&mut events, ConnectionState::Suspended).await;
    let proclaiming = tokio::spawn({
        let leadership = leadership.clone();
        async move { leadership.proclaim("must never be written", Deadline::after(negotiated * 4)).await }
    });
    lost_then_reconnected(&mut events).await;
    let refused = within("the proclaim's end", proclaiming).await.expect("task").expect_err("node lost");
    assert!(matches!(refused, LeaderError::NodeLost { ref path } if *path == node), "{refused}");
    assert!(leadership.is_cancelled());

    proxy.heal();
    eventually("the old node went with its session", || async { on_server(&admin, &node).await.is_none() })
        .await;
    assert!(
        !data_under(&admin, path).await.contains(&b"must never be written".to_vec()),
        "nothing was written"
    );
    // Over: refused at once.
    let refused = within("proclaim", leadership.proclaim("late", step())).await.expect_err("over");
    assert!(refused.is_not_leader(), "{refused}");
    within("close", selector.close()).await.expect("close");
    close_all([framework, admin]).await;
}
