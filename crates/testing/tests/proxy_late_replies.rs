//! `FaultProxy`'s one-way faults between a zookeeper-client session and a real `TestingServer`:
//! replies held back (`delay_replies`) and requests dropped while replies still flow
//! (`black_hole_requests`).

mod common;
mod states;

use std::time::Duration;

use common::{connect, create};
use states::wait_for_state;
use tokio::time::Instant;
use zk_recipes_testing::{within, within_for, FaultProxy, TestingServer, SERVER_START, STEP};
use zookeeper_client::{EventType, SessionState};

#[tokio::test]
async fn delay_replies_holds_the_server_bytes_in_order_and_zero_ends_it() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    for (path, data) in [("/late-1", b"one"), ("/late-2", b"two"), ("/late-3", b"thr")] {
        create(&client, path, data).await;
    }
    let delay = Duration::from_millis(600);

    proxy.delay_replies(delay);
    let asked = Instant::now();
    // Sent back to back: the answers come late, and in order.
    let (one, two, three) = within("late answers", async {
        tokio::join!(client.get_data("/late-1"), client.get_data("/late-2"), client.get_data("/late-3"))
    })
    .await;
    let answered_after = asked.elapsed();
    assert!(answered_after >= delay, "answered {answered_after:?} after asking, held {delay:?}");
    let data: Vec<Vec<u8>> = [one, two, three].into_iter().map(|answer| answer.expect("get").0).collect();
    assert_eq!(data, [b"one".to_vec(), b"two".to_vec(), b"thr".to_vec()]);

    proxy.delay_replies(Duration::ZERO);
    let asked = Instant::now();
    within("an answer on time", client.get_data("/late-1")).await.expect("get");
    let answered_after = asked.elapsed();
    assert!(answered_after < delay, "answered {answered_after:?} after asking with the delay off");
    let stats = proxy.stats();
    assert_eq!((stats.accepted, stats.cut), (1, 0), "one connection throughout: {stats:?}");
    assert_eq!(client.state(), SessionState::SyncConnected);
}

#[tokio::test]
async fn black_hole_requests_silences_the_client_while_the_server_still_reaches_it() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    let session = client.session_id();
    let bystander = connect(&server.connect_string(), Duration::from_secs(10)).await;
    let (stat, created) = within("watch", client.check_and_watch_stat("/one-way")).await.expect("watch");
    assert!(stat.is_none());
    let mut states = client.state_watcher();

    proxy.black_hole_requests(Duration::from_secs(30));
    assert!(proxy.is_requests_black_holed());
    // Sent into the black hole: never reaches the server, never answered.
    let unheard = client.create(
        "/from-the-client",
        b"",
        &zookeeper_client::CreateMode::Persistent.with_acls(zookeeper_client::Acls::anyone_all()),
    );
    create(&bystander, "/one-way", b"").await;
    // The server still reaches the client: the watch fires.
    let event = within("the watch notification", created.changed()).await;
    assert_eq!(event.event_type, EventType::NodeCreated, "{event:?}");
    assert!(
        within("check", bystander.check_stat("/from-the-client")).await.expect("check").is_none(),
        "the client's create reached the server"
    );
    assert_eq!(client.state(), SessionState::SyncConnected, "the client noticed nothing yet");

    // Healing closes the connection: the client comes back on the same session.
    proxy.heal();
    assert!(!proxy.is_requests_black_holed());
    wait_for_state(&mut states, SessionState::Disconnected, STEP).await;
    wait_for_state(&mut states, SessionState::SyncConnected, STEP).await;
    assert_eq!(client.session_id(), session);
    drop(unheard);
    create(&client, "/after-the-black-hole", b"").await;
    let stats = proxy.stats();
    assert_eq!((stats.accepted, stats.cut), (2, 1), "{stats:?}");
}
