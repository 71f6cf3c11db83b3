//! Connection states and session re-creation against a real ZooKeeper.

use std::time::Duration;

use tokio::time::Instant;
use zk_recipes_framework::{ConnectionState, ConnectionUpdate, Deadline, Error, Framework, ProtectedCreate};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, TestingServer};

#[tokio::test]
async fn restart_suspends_and_reconnects_the_same_session() {
    init_tracing();
    let mut server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let session_timeout = Duration::from_secs(12);
    let framework = builder(&server.connect_string(), session_timeout).start().expect("framework");
    let mut events = framework.connection_events();

    let (state, session_id, generation) = next_connection_state(&mut events).await;
    assert_eq!((state, generation), (ConnectionState::Connected, 1));

    let restart_started = Instant::now();
    within("server stop", server.stop()).await.expect("stop");
    let suspended = next_connection_event(&mut events).await;
    assert_eq!(suspended.state, ConnectionState::Suspended);
    assert_eq!(suspended.session_id.0, session_id);
    assert!(suspended.at >= restart_started, "stamped when the framework saw it, after the stop began");
    let snapshot = framework.current();
    assert_eq!((snapshot.state, snapshot.since), (Some(ConnectionState::Suspended), Some(suspended.at)));
    within("server restart", server.restart()).await.expect("restart");
    let restart_time = restart_started.elapsed();
    assert!(
        session_timeout >= restart_time * 3,
        "the test needs a session timeout of at least 3x the restart time ({restart_time:?})"
    );

    let reconnected = next_connection_event(&mut events).await;
    assert_eq!(reconnected.state, ConnectionState::Reconnected);
    assert_eq!(reconnected.session_id.0, session_id, "the session survived the restart");
    assert_eq!(reconnected.generation, 1, "no new session");
    assert!(reconnected.at > suspended.at, "transitions are stamped in order");
    let snapshot = framework.current();
    assert_eq!(snapshot.state, Some(ConnectionState::Reconnected));
    assert_eq!(snapshot.since, Some(reconnected.at));
    assert_eq!(snapshot.session_id.map(|id| id.0), Some(session_id));
    within("close", framework.close()).await;
}

#[tokio::test]
async fn targeted_expiry_is_lost_then_a_new_session_reconnects() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy start", FaultProxy::start(server.address())).await.expect("proxy");
    let session_timeout = Duration::from_secs(2);
    let framework = builder(&proxy.connect_string(), session_timeout).start().expect("framework");
    let mut events = framework.connection_events();
    let (state, first_session, _) = next_connection_state(&mut events).await;
    assert_eq!(state, ConnectionState::Connected);
    let first_lost = framework.session_lost(1);
    let mut first_lost = std::pin::pin!(first_lost);
    assert!(futures::poll!(first_lost.as_mut()).is_pending(), "the first session is live");

    // Silence past the session timeout: the server expires the session while we cannot reach it.
    let negotiated = framework.current().session_timeout.expect("a session");
    proxy.black_hole(negotiated * 3);

    let (state, _, _) = next_connection_state(&mut events).await;
    assert_eq!(state, ConnectionState::Suspended);
    let (state, lost_session, lost_generation) = next_connection_state(&mut events).await;
    assert_eq!((state, lost_session, lost_generation), (ConnectionState::Lost, first_session, 1));
    within("the first session's loss", first_lost).await.expect("lost, not closed");
    let (state, new_session, generation) = next_connection_state(&mut events).await;
    assert_eq!(state, ConnectionState::Reconnected);
    assert_ne!(new_session, first_session, "a lost session never comes back");
    assert_eq!(generation, 2);
    // A later call about the first session hears at once that it is gone; the second is live.
    within("the first session, asked late", framework.session_lost(1)).await.expect("lost");
    let second_lost = framework.session_lost(2);
    let mut second_lost = std::pin::pin!(second_lost);
    assert!(futures::poll!(second_lost.as_mut()).is_pending(), "the second session is live");

    // The old session is really gone on the server: its id does not show among the connections.
    let session = within("new session", framework.session(Deadline::after(STEP))).await.expect("session");
    assert_eq!(session.id().0, new_session);
    within("close", framework.close()).await;
    let closed = within("the second session at close", second_lost).await;
    assert!(matches!(closed, Err(Error::Closed)), "{closed:?}");
}

#[tokio::test]
async fn start_before_the_server_exists_then_connect() {
    init_tracing();
    let port = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.local_addr().expect("address").port()
    };
    let framework =
        builder(&format!("127.0.0.1:{port}"), Duration::from_secs(6)).start().expect("start returns at once");
    assert_eq!(framework.current().state, None);
    let early = framework.block_until_connected(Duration::from_millis(300)).await;
    assert!(matches!(early, Err(Error::Timeout { .. })), "no server yet: {early:?}");

    let _server = within_for(SERVER_START, "server start", TestingServer::builder().port(port).start())
        .await
        .expect("server");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected once the server is up");
    assert_eq!(framework.current().state, Some(ConnectionState::Connected));
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_callers_timeout_covers_waiting_for_a_connection() {
    init_tracing();
    let mut server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10))
        .retry_policy(zk_recipes_framework::retry::RetryForever::new(Duration::from_millis(50)))
        .start()
        .expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    within("server stop", server.stop()).await.expect("stop");

    let limit = Duration::from_millis(700);
    let started = Instant::now();
    let result = within(
        "a bounded call",
        framework.retry(Deadline::after(limit), |session| async move {
            Ok(session.client().list_children("/").await?)
        }),
    )
    .await;
    let waited = started.elapsed();
    assert!(matches!(result, Err(Error::Timeout { .. })), "got {result:?}");
    assert!(waited >= limit, "returned before its deadline: {waited:?}");
    assert!(waited < limit + Duration::from_secs(2), "overran its deadline: {waited:?}");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_lagging_subscriber_is_told_it_lagged() {
    init_tracing();
    let mut server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10))
        .event_capacity(1)
        .start()
        .expect("framework");
    let mut slow = framework.connection_events();
    let mut fast = framework.connection_events();
    assert_eq!(next_connection_state(&mut fast).await.0, ConnectionState::Connected);
    within("stop", server.stop()).await.expect("stop");
    assert_eq!(next_connection_state(&mut fast).await.0, ConnectionState::Suspended);
    within("restart", server.restart()).await.expect("restart");
    assert_eq!(next_connection_state(&mut fast).await.0, ConnectionState::Reconnected);

    match within("slow subscriber", slow.next()).await {
        Some(update @ ConnectionUpdate::Lagged { missed }) => {
            assert_eq!(missed, 2, "three transitions through a buffer of one");
            assert_eq!(update.state(), ConnectionState::Lost, "a lag must be treated as Lost");
        }
        other => panic!("expected a lag, got {other:?}"),
    }
    let kept = within("slow subscriber", slow.next()).await;
    assert_eq!(kept.map(|update| update.state()), Some(ConnectionState::Reconnected));
    within("close", framework.close()).await;
    assert_eq!(within("end of stream", fast.next()).await, None, "the stream ends when the framework closes");
}

#[tokio::test]
async fn a_closed_framework_refuses_calls() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6)).start().expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    within("close", framework.close()).await;
    assert!(framework.current().closed);
    let result = framework.ensure_path("/closed/refuses", Deadline::after(STEP)).await;
    assert!(matches!(result, Err(Error::Closed)), "{result:?}");
    let result =
        framework.create_protected(ProtectedCreate::new("/closed", "lock-"), Deadline::after(STEP)).await;
    assert!(matches!(result, Err(Error::Closed)), "{result:?}");

    let checker = Framework::builder(server.connect_string()).start().expect("checker");
    let session = within("checker session", checker.session(Deadline::after(STEP))).await.expect("session");
    let exists = within("stat", session.client().check_stat("/closed")).await.expect("stat");
    assert!(exists.is_none(), "a closed framework wrote nothing");
    drop(session);
    within("close", checker.close()).await;
}

#[tokio::test]
async fn dropping_the_last_handle_closes_the_session() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(30)).start().expect("framework");
    let node = within(
        "create",
        framework.create_protected(ProtectedCreate::new("/dropped", "member-"), Deadline::after(STEP)),
    )
    .await
    .expect("node");
    let path = node.forget();
    drop(framework);

    let checker = Framework::builder(server.connect_string()).start().expect("checker");
    // The session (timeout 30 s) is closed at once, so its ephemeral node goes well before that.
    eventually("the dropped framework's ephemeral node is gone", || {
        let checker = checker.clone();
        let path = path.clone();
        async move {
            let session = checker.session(Deadline::after(STEP)).await.expect("session");
            session.client().check_stat(&path).await.expect("stat").is_none()
        }
    })
    .await;
    within("close", checker.close()).await;
}
