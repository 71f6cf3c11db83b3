//! The leader selector's drop bound when the client hears the server after the server stopped
//! hearing it, against a real ZooKeeper: a leadership's future is dropped before the server may
//! expire its session, under `ErrorPolicy::Standard` too, however late the client learns (from
//! `Suspended`) that the server no longer hears it.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::mpsc;
use tokio::time::Instant;
use zk_recipes_framework::zookeeper_client::OneshotWatcher;
use zk_recipes_framework::{ConnectionEvents, ConnectionState, ErrorPolicy, Framework};
use zk_recipes_leader::LeaderSelector;
use zk_recipes_test_support::*;

/// Short, so the test waits for an expiry; long against the server's 200 ms tick.
const SHORT_SESSION: Duration = Duration::from_secs(4);

/// How late the server's bytes reach the leader, raised in steps: a raise leaves the client that
/// long without a byte, and zookeeper-client gives the connection up after `2/5 × T` (1.6 s).
const REPLY_DELAYS: [Duration; 3] =
    [Duration::from_millis(800), Duration::from_millis(1600), Duration::from_millis(2000)];

/// Records when it is dropped: when the selector dropped the leadership's future.
struct RecordDrop(Arc<Mutex<Option<Instant>>>);

impl Drop for RecordDrop {
    fn drop(&mut self) {
        self.0.lock().get_or_insert_with(Instant::now);
    }
}

/// A started selector whose `take_leadership` never returns and ignores its token (only dropping
/// it ends it), once it leads: the selector, its node, and when its future was dropped.
async fn stuck_leader(
    leader: &Framework,
    path: &str,
) -> (LeaderSelector, String, Arc<Mutex<Option<Instant>>>) {
    let dropped_at = Arc::new(Mutex::new(None::<Instant>));
    let (started, mut leading) = mpsc::unbounded_channel::<String>();
    let on_drop = dropped_at.clone();
    let selector = LeaderSelector::builder(leader, path)
        .build(move |leadership| {
            let recorder = RecordDrop(on_drop.clone());
            let _ = started.send(leadership.node_path().to_owned());
            async move {
                let _recorder = recorder;
                std::future::pending::<()>().await;
            }
        })
        .expect("selector");
    selector.start().expect("start");
    let node = within("leadership", leading.recv()).await.expect("a leadership");
    (selector, node, dropped_at)
}

/// Waits for the expiry, `Suspended` and the leadership's future dropped, after `cut`.
async fn after_the_cut(
    cut: Instant,
    deleted: OneshotWatcher,
    events: &mut ConnectionEvents,
    dropped_at: &Mutex<Option<Instant>>,
    negotiated: Duration,
) -> ExpiryRace {
    let (expired_at, suspended_at) = within_for(negotiated * 3, "expiry and Suspended", async {
        tokio::join!(when_deleted(deleted), when_state(events, ConnectionState::Suspended))
    })
    .await;
    within_for(negotiated * 2, "the leadership dropped", async {
        while dropped_at.lock().is_none() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let ended_at = dropped_at.lock().expect("dropped");
    let race = ExpiryRace { cut, ended_at, suspended_at, expired_at };
    race.report("dropped");
    race
}

/// The server stops hearing the leader at `cut`, while the leader still hears the server (its
/// replies come 2 s late) until `cut + 2 s`: zookeeper-client reports `Suspended` only 1.6–1.8 s
/// after that, about when the server expires the session (`cut + 4 s`, a tick more at most). The
/// early bound after `Suspended` (`7/20 × T − T/10`, 1 s) then drops the future after the expiry:
/// measured with the early bound alone, dropped at `cut + 4.79 s`, 0.65–0.74 s after the observer
/// saw the leader's node deleted (two runs).
/// The expiry clock (the send time of the latest answered heartbeat, plus `T`, less `T/10`) drops
/// it at `cut + 3.6 s` at the latest (measured: 3.58–3.59 s, Suspended at 3.79 s, the expiry seen at
/// 4.01–4.18 s): before the expiry, with at least `T/40` to spare, while the connection is still up.
#[tokio::test]
async fn a_leadership_is_dropped_before_the_expiry_when_the_server_answers_late() {
    init_tracing();
    let (server, proxy, leader, observer) = proxied(SHORT_SESSION).await;
    assert_eq!(leader.error_policy(), ErrorPolicy::Standard);
    let negotiated = leader.current().session_timeout.expect("a session");
    let (selector, node, dropped_at) = stuck_leader(&leader, "/expiry-bound-late/leader").await;
    let session = within("observer session", observer.session(step())).await.expect("session");
    let (stat, deleted) = within("watch", session.client().check_and_watch_stat(&node)).await.expect("watch");
    assert!(stat.is_some(), "the leader's node is there");
    drop(session);
    let mut events = leader.connection_events();

    // Late answers, the connection kept: after each raise, wait for a byte that was held.
    for delay in REPLY_DELAYS {
        proxy.delay_replies(delay);
        tokio::time::sleep_until(Instant::now() + delay).await;
        let forwarded = proxy.stats().bytes_to_client;
        eventually("a late reply reached the leader", || async { proxy.stats().bytes_to_client > forwarded })
            .await;
    }
    assert_eq!(leader.current().state, Some(ConnectionState::Connected), "late answers kept the connection");
    assert!(dropped_at.lock().is_none(), "the leadership ran on while the server heard the leader");

    let cut = Instant::now();
    proxy.black_hole_requests(negotiated * 3);
    let after = after_the_cut(cut, deleted, &mut events, &dropped_at, negotiated).await;
    // The scenario is the hard one: the early bound after Suspended alone comes too late.
    let grace = selector.grace_after_suspension();
    assert!(
        after.suspended_at + grace + negotiated / 20 > after.expired_at,
        "Suspended came {:?} after the cut: its early bound ({grace:?}) ends before the expiry \
         ({:?}), the server's answers were not late enough to test the clock",
        after.suspended_at - cut,
        after.expired_at - cut
    );
    after.assert_ended_before_the_expiry(negotiated, "the leadership was dropped");

    proxy.heal();
    within("close", selector.close()).await.expect("close");
    close_all([leader, observer]).await;
    drop(server);
}

/// The server stops hearing the leader at `cut`, and goes on sending it watch notifications (a
/// persistent watch, a node another client changes every 100 ms): zookeeper-client, which only
/// counts the silence from the server, never reports `Suspended` before the server expires the
/// session and closes the connection. Neither a whole `T` from `Suspended` (`Lost`) nor its early
/// bound can then stop the leadership in time: measured with the early bound alone, it was dropped
/// when the notification of its own node's deletion came, just after the expiry (`cut + 4.17 s`);
/// with the clock read only after `Suspended`, at `Suspended`, just after the expiry too
/// (`cut + 4.07 s`). The expiry clock, which does not wait for `Suspended`, drops it at
/// `cut + 3.6 s` at the latest (measured: 3.55 s), connected.
#[tokio::test]
async fn a_leadership_is_dropped_before_the_expiry_while_watch_events_keep_the_connection_up() {
    init_tracing();
    let (server, proxy, leader, observer) = proxied(SHORT_SESSION).await;
    let negotiated = leader.current().session_timeout.expect("a session");
    let busy = BusyNotifications::start(&leader, &observer, "/expiry-bound-events-busy").await;
    let (selector, node, dropped_at) = stuck_leader(&leader, "/expiry-bound-events/leader").await;
    let session = within("observer session", observer.session(step())).await.expect("session");
    let (stat, deleted) = within("watch", session.client().check_and_watch_stat(&node)).await.expect("watch");
    assert!(stat.is_some(), "the leader's node is there");
    let mut events = leader.connection_events();

    let cut = Instant::now();
    proxy.black_hole_requests(negotiated * 3);
    let after = after_the_cut(cut, deleted, &mut events, &dropped_at, negotiated).await;
    drop(busy);
    // The scenario: the connection stayed up until about the expiry.
    after.assert_connection_stayed_up(negotiated);
    after.assert_ended_before_the_expiry(negotiated, "the leadership was dropped");

    proxy.heal();
    within("close", selector.close()).await.expect("close");
    close_all([leader, observer]).await;
    drop(server);
}
