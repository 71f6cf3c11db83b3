//! `Framework::earliest_session_expiry` under `ErrorPolicy::Standard`, against a real ZooKeeper:
//! the expiry clock runs, moves on while the server answers, stays put while it does not, is
//! never later than the server's expiry, and belongs to one session generation; `Lost` still
//! comes a whole session timeout after `Suspended`.

use std::time::Duration;

use tokio::time::Instant;
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{ConnectionState, ConnectionUpdate, ErrorPolicy};
use zk_recipes_test_support::*;

/// Short, so the test waits for an expiry; long against the server's 200 ms tick.
const SHORT_SESSION: Duration = Duration::from_secs(4);

#[tokio::test]
async fn the_clock_runs_under_standard_and_bounds_the_expiry_from_below() {
    init_tracing();
    let (server, proxy, framework, observer) = proxied(SHORT_SESSION).await;
    assert_eq!(framework.error_policy(), ErrorPolicy::Standard);
    let path = "/standard-clock-holder";
    within("create", framework.create(path).mode(CreateMode::Ephemeral).deadline(step()))
        .await
        .expect("create");
    let current = framework.current();
    let (generation, negotiated) = (current.generation, current.session_timeout.expect("a session"));
    let first = framework.earliest_session_expiry(generation).expect("the clock runs under Standard");
    assert!(first > Instant::now(), "the bound is ahead while the server answers");
    assert!(first <= Instant::now() + negotiated, "never later than a timeout from now");
    assert_eq!(framework.earliest_session_expiry(generation + 1), None, "another generation's");
    assert_eq!(framework.earliest_session_expiry(generation - 1), None, "another generation's");
    // The heartbeat moves it on.
    eventually("the clock moved on", || async {
        framework.earliest_session_expiry(generation).is_some_and(|bound| bound > first)
    })
    .await;

    let session = within("observer session", observer.session(step())).await.expect("session");
    let (_, deleted) = within("watch", session.client().check_and_watch_stat(path)).await.expect("watch");
    drop(session);
    let mut events = framework.connection_events();
    let cut = Instant::now();
    proxy.black_hole(negotiated * 3);
    let expired = when_deleted(deleted);
    let states = async {
        let (mut suspended, mut bound_when_suspended) = (None, None);
        while let Some(update) = events.next().await {
            match update {
                ConnectionUpdate::Changed(event) if event.state == ConnectionState::Suspended => {
                    suspended = Some(event.at);
                    bound_when_suspended = framework.earliest_session_expiry(generation);
                }
                ConnectionUpdate::Changed(event) if event.state == ConnectionState::Lost => {
                    return (suspended.expect("Suspended before Lost"), bound_when_suspended, event.at);
                }
                ConnectionUpdate::Changed(_) => {}
                ConnectionUpdate::Lagged { .. } => panic!("the subscriber fell behind"),
            }
        }
        panic!("the framework closed");
    };
    let (expired_at, (suspended_at, bound, lost_at)) =
        within_for(negotiated * 3, "expiry and Lost", async { tokio::join!(expired, states) }).await;
    let bound = bound.expect("a bound while suspended");
    eprintln!(
        "after the cut: bound {:?}, Suspended {:?}, expiry seen {:?}, Lost {:?}",
        bound.saturating_duration_since(cut),
        suspended_at - cut,
        expired_at - cut,
        lost_at - cut
    );
    // Nothing was answered after the cut: the bound stayed at most a timeout from it, and the
    // server expired the session no earlier.
    assert!(bound <= cut + negotiated, "the bound moved on in the silence");
    assert!(bound <= expired_at, "the server expired the session before the bound");
    // Standard keeps Curator's rule: Lost a whole timeout after Suspended, not at the clock.
    // (Lost's timer starts a moment before Suspended is published.)
    assert!(
        lost_at + Duration::from_millis(1) >= suspended_at + negotiated,
        "Lost came {:?} after Suspended",
        lost_at - suspended_at
    );
    assert_eq!(framework.earliest_session_expiry(generation), None, "a lost session has no bound");

    proxy.heal();
    within("a new session", framework.block_until_connected(STEP)).await.expect("connected");
    let next = framework.current().generation;
    assert_eq!(next, generation + 1);
    assert!(framework.earliest_session_expiry(next).is_some(), "the new session's clock runs");
    close_all([framework, observer]).await;
    drop(server);
}
