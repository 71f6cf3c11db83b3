//! When the framework declares a cut-off session `Lost`, against a real ZooKeeper: no later than
//! the server expires it. Under `ErrorPolicy::SessionOnly` a hold is trusted until `Lost`, so a
//! `Lost` that comes after the server's expiry (which lets the next holder in) is a double holder.

use std::time::Duration;

use tokio::time::Instant;
use zk_recipes_framework::zookeeper_client::{CreateMode, EventType};
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
    let expired = async {
        let event = deleted.changed().await;
        assert_eq!(event.event_type, EventType::NodeDeleted, "{event:?}");
        Instant::now()
    };
    let lost = async {
        while let Some(update) = events.next().await {
            match update {
                ConnectionUpdate::Changed(event) if event.state == ConnectionState::Lost => return event.at,
                ConnectionUpdate::Changed(_) => {}
                ConnectionUpdate::Lagged { .. } => panic!("the subscriber fell behind"),
            }
        }
        panic!("the framework closed");
    };
    // The expiry comes a session timeout after the cut, and Lost before or after it.
    let (expired_at, lost_at) =
        within_for(negotiated * 3, "expiry and Lost", async { tokio::join!(expired, lost) }).await;

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
