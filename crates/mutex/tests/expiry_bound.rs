//! A held lock's `lost()` by the expiry clock, against a real ZooKeeper: under
//! `ErrorPolicy::Standard` (the default) it resolves before the server may expire the session
//! that holds the lock, even when the server stops hearing the holder while its watch
//! notifications keep the holder's connection up, so that no `Suspended` comes in time.

use std::time::Duration;

use tokio::time::Instant;
use zk_recipes_framework::{ConnectionState, ErrorPolicy};
use zk_recipes_mutex::{Hold, LostReason, Mutex};
use zk_recipes_test_support::*;

/// Short, so the test waits for an expiry; long against the server's 200 ms tick.
const SHORT_SESSION: Duration = Duration::from_secs(4);

/// The server stops hearing the holder at `cut`; notifications keep its connection up until the
/// expiry. Before the clock, `lost()` resolved only when the notification of the holder's own node's
/// deletion came, after the expiry, when another process could already hold the lock. The expiry
/// clock resolves it a tenth of the session timeout before the earliest expiry, connected.
#[tokio::test]
async fn a_hold_is_lost_before_the_expiry_while_watch_events_keep_the_connection_up() {
    init_tracing();
    let (server, proxy, holder, observer) = proxied(SHORT_SESSION).await;
    assert_eq!(holder.error_policy(), ErrorPolicy::Standard);
    let negotiated = holder.current().session_timeout.expect("a session");
    let busy = BusyNotifications::start(&holder, &observer, "/mutex-expiry-bound-busy").await;
    let mutex = Mutex::new(&holder, "/mutex-expiry-bound/lock").expect("mutex");
    let guard = within("lock", mutex.lock()).await.expect("held");
    let session = within("observer session", observer.session(step())).await.expect("session");
    let (stat, deleted) =
        within("watch", session.client().check_and_watch_stat(guard.node_path())).await.expect("watch");
    assert!(stat.is_some(), "the holder's node is there");
    let mut connection = holder.connection_events();

    let cut = Instant::now();
    proxy.black_hole_requests(negotiated * 3);
    let ((reason, lost_at), expired_at, suspended_at) =
        within_for(negotiated * 3, "lost, expiry and Suspended", async {
            tokio::join!(
                async { (guard.lost().await, Instant::now()) },
                when_deleted(deleted),
                when_state(&mut connection, ConnectionState::Suspended)
            )
        })
        .await;
    drop(busy);
    let race = ExpiryRace { cut, ended_at: lost_at, suspended_at, expired_at };
    race.report(&format!("lost ({reason:?})"));
    race.assert_connection_stayed_up(negotiated);
    assert_eq!(reason, LostReason::SessionMayExpire, "the expiry clock ended the hold");
    race.assert_ended_before_the_expiry(negotiated, "lost() resolved");

    proxy.heal();
    drop(guard);
    close_all([holder, observer]).await;
    drop(server);
}
