//! When the framework declares a cut-off session `Lost`, against a real ZooKeeper: no later than
//! the server expires it. Under `ErrorPolicy::SessionOnly` a hold is trusted until `Lost`, so a
//! `Lost` that comes after the server's expiry (which lets the next holder in) is a double holder.

use std::time::Duration;

use tokio::time::Instant;
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{ConnectionState, ConnectionUpdate, ErrorPolicy};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, TestingServer};

/// Short, so the test waits for an expiry; long against the server's 200 ms tick.
const SHORT_SESSION: Duration = Duration::from_secs(4);

/// A session cut off by a black hole is declared `Lost` before the server expires it (its
/// ephemeral node deleted, as another session sees): under `SessionOnly` a tenth of the session
/// timeout before the server may, counted from the send time of the latest answered heartbeat.
/// When the framework counted a whole session timeout from `Suspended`, `Lost` came 1.58 s after
/// the expiry here. Not much earlier either: at most a heartbeat interval and the margin (a tenth
/// of the timeout each), the server's expiry rounding (one 200 ms tick) and slack.
#[tokio::test]
async fn a_cut_off_session_is_lost_no_later_than_the_server_expires_it() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let observer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("observer");
    let holder = builder(&proxy.connect_string(), SHORT_SESSION)
        .error_policy(ErrorPolicy::SessionOnly)
        .start()
        .expect("holder");
    let path = "/lost-clock-holder";
    within("create", holder.create(path).mode(CreateMode::Ephemeral).deadline(step())).await.expect("create");
    let negotiated = holder.current().session_timeout.expect("a session");
    let session = within("observer session", observer.session(step())).await.expect("session");
    let (stat, deleted) = within("watch", session.client().check_and_watch_stat(path)).await.expect("watch");
    assert!(stat.is_some(), "the holder's node is there");
    drop(session);
    let mut events = holder.connection_events();

    proxy.black_hole(negotiated * 3);
    // The expiry comes a session timeout after the cut, and Lost before or after it.
    let (expired_at, lost_at) = within_for(negotiated * 3, "expiry and Lost", async {
        tokio::join!(when_deleted(deleted), when_state(&mut events, ConnectionState::Lost))
    })
    .await;

    let margin = expired_at.checked_duration_since(lost_at);
    eprintln!("Lost came {margin:?} before the observer saw the expiry (None: after it)");
    // Before, with room: at least a twentieth of the timeout (the margin is a tenth, and the
    // observer learns of the expiry after the server).
    assert!(
        lost_at + negotiated / 20 <= expired_at,
        "Lost came {:?} before the server expired the session (None: after it; negotiated {negotiated:?})",
        expired_at.checked_duration_since(lost_at)
    );
    let early_bound = negotiated * 2 / 10 + Duration::from_millis(200) + Duration::from_millis(300);
    assert!(
        expired_at <= lost_at + early_bound,
        "Lost came {:?} before the server expired the session: more than {early_bound:?} early",
        expired_at - lost_at
    );

    proxy.heal();
    close_all([holder, observer]).await;
}

/// A session whose connect took most of the session timeout is not declared `Lost` at once: the
/// clock starts from a request answered once the session is up, not from when the connect began
/// (that alone would put the earliest expiry in the past). Every reply is held back 0.8 s while
/// the framework connects (the handshake, then five creates making a three-level namespace:
/// about 4.8 s of a 4 s session); once connected, replies are prompt again.
#[tokio::test]
async fn a_slow_connect_is_not_taken_for_a_lost_session() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    proxy.delay_replies(Duration::from_millis(800));
    let connecting_since = Instant::now();
    let holder = builder(&proxy.connect_string(), SHORT_SESSION)
        .namespace("lost-clock/slow/connect")
        .error_policy(ErrorPolicy::SessionOnly)
        .start()
        .expect("holder");
    let mut events = holder.connection_events();
    within_for(Duration::from_secs(15), "connected", holder.block_until_connected(Duration::from_secs(15)))
        .await
        .expect("connected");
    proxy.delay_replies(Duration::ZERO);
    let connected = holder.current();
    let negotiated = connected.session_timeout.expect("a session");
    assert!(
        connecting_since.elapsed() + negotiated / 10 >= negotiated,
        "the connect took {:?}: not most of the {negotiated:?} session",
        connecting_since.elapsed()
    );
    // The clock's first answer: the earliest expiry is then well ahead of the connect's start.
    let moved_on = async {
        loop {
            let expiry = holder.earliest_session_expiry(connected.generation);
            if expiry.is_some_and(|expiry| expiry > connecting_since + negotiated + negotiated / 2) {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    within_for(Duration::from_secs(5), "the clock's first answer", moved_on).await;
    while let Some(Some(update)) = futures::FutureExt::now_or_never(events.next()) {
        if let ConnectionUpdate::Changed(event) = update {
            assert_ne!(event.state, ConnectionState::Lost, "a slow connect was taken for a lost session");
        }
    }
    assert_eq!(holder.current().generation, connected.generation, "still the first session");
    close_all([holder]).await;
}
