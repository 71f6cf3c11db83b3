//! `FaultProxy::drop_watch_events` between a zookeeper-client session and a real
//! `TestingServer`: watchers fire with the mode off and stay silent with it on, while the session
//! stays connected and its requests work.

mod common;

use std::time::Duration;

use common::{connect, create};
use zk_recipes_testing::{
    eventually, within, within_for, FaultProxy, TestingError, TestingServer, SERVER_START,
};
use zookeeper_client::{AddWatchMode, EventType, SessionState};

/// How long a dropped notification must stay unseen by the client after the proxy counted it.
const QUIET: Duration = Duration::from_millis(700);

#[tokio::test]
async fn with_the_mode_off_watchers_fire() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(4)).await;
    let writer = connect(&server.connect_string(), Duration::from_secs(4)).await;
    create(&writer, "/watch-events-off", b"v0").await;

    let (_, _, data_watch) =
        within("watching data", client.get_and_watch_data("/watch-events-off")).await.expect("get");
    let mut tree_watch =
        within("watching the tree", client.watch("/watch-events-off", AddWatchMode::PersistentRecursive))
            .await
            .expect("watch");
    within("setting data", writer.set_data("/watch-events-off", b"v1", None)).await.expect("set");

    let event = within("the data watch firing", data_watch.changed()).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeDataChanged, "/watch-events-off"));
    let event = within("the persistent watch firing", tree_watch.changed()).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeDataChanged, "/watch-events-off"));
    assert_eq!(proxy.stats().watch_events_dropped, 0, "{:?}", proxy.stats());
}

#[tokio::test]
async fn with_every_notification_dropped_watchers_stay_silent_on_a_live_session() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(4)).await;
    let session = client.session_id();
    let writer = connect(&server.connect_string(), Duration::from_secs(4)).await;
    create(&writer, "/watch-events-on", b"v0").await;
    proxy.drop_watch_events(1.0).expect("a valid probability");

    let (_, _, data_watch) =
        within("watching data", client.get_and_watch_data("/watch-events-on")).await.expect("get");
    let mut tree_watch =
        within("watching the tree", client.watch("/watch-events-on", AddWatchMode::PersistentRecursive))
            .await
            .expect("watch");
    within("setting data", writer.set_data("/watch-events-on", b"v1", None)).await.expect("set");
    create(&writer, "/watch-events-on/child", b"").await;

    // One notification per change (the server sends one per connection and path): both dropped.
    eventually("the proxy dropping both notifications", || async { proxy.stats().watch_events_dropped >= 2 })
        .await;
    let data_fired = data_watch.changed();
    tokio::pin!(data_fired);
    assert!(
        tokio::time::timeout(QUIET, &mut data_fired).await.is_err(),
        "the data watch fired although its notification was dropped"
    );
    assert!(
        tokio::time::timeout(QUIET, tree_watch.changed()).await.is_err(),
        "the persistent watch fired although its notifications were dropped"
    );

    // No reset: the same connection and session, and requests work through it.
    assert_eq!(client.state(), SessionState::SyncConnected);
    assert_eq!(client.session_id(), session);
    let (data, _) =
        within("reading through the proxy", client.get_data("/watch-events-on")).await.expect("get");
    assert_eq!(data, b"v1", "the client reads the new data it was never told about");
    let stats = proxy.stats();
    assert_eq!((stats.accepted, stats.open, stats.cut), (1, 1, 0), "{stats:?}");
    assert_eq!(stats.watch_events_dropped, 2, "{stats:?}");

    // With the mode off again the persistent watch sees the next change, not the dropped ones.
    proxy.drop_watch_events(0.0).expect("a valid probability");
    create(&writer, "/watch-events-on/after", b"").await;
    let event = within("the persistent watch firing again", tree_watch.changed()).await;
    assert_eq!((event.event_type, event.path.as_str()), (EventType::NodeCreated, "/watch-events-on/after"));
    assert_eq!(proxy.stats().watch_events_dropped, 2);
}

#[tokio::test]
async fn a_probability_outside_zero_to_one_is_refused_and_changes_nothing() {
    // No server needed: the proxy only resolves its target here.
    let proxy = within("starting the proxy", FaultProxy::start("127.0.0.1:9")).await.expect("proxy");
    proxy.drop_watch_events(0.5).expect("a valid probability");
    for probability in [-0.1, 1.01, f64::NAN, f64::INFINITY] {
        let err = proxy.drop_watch_events_seeded(probability, 1).expect_err("out of range");
        assert!(matches!(err, TestingError::InvalidArgument(_)), "{probability}: {err:?}");
        assert!(err.to_string().contains("0.0..=1.0"), "{err}");
    }
    assert_eq!(proxy.stats().watch_events_dropped, 0);
}
