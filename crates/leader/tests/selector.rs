//! The leader selector against a real ZooKeeper server.

mod checks;
mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use checks::*;
use common::*;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use zk_recipes_framework::{local_address, ConnectionEvents, ConnectionState, Deadline, ErrorPolicy};
use zk_recipes_leader::{CancelReason, LeaderError, LeaderSelector};
use zk_recipes_mutex::{Hold, Mutex as ZkMutex};
use zk_recipes_testing::{capture_warnings, FaultProxy, TestingServer};

const SESSION: Duration = Duration::from_secs(10);

async fn watch_count(server: &TestingServer) -> usize {
    server.watch_count().await.expect("wchc")
}

#[tokio::test]
async fn auto_requeue_rotates_leadership_through_every_participant() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let admin = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let (path, marker) = ("/rotate/leader", "/rotate/marker");
    let turns = Arc::new(Mutex::new(Vec::<String>::new()));
    let violations = Arc::new(AtomicU32::new(0));
    // Checks that could not be made. Not panics: the selector catches a panicking
    // take_leadership and goes on, so a panic there would not fail the test.
    let failures = Arc::new(Mutex::new(Vec::<String>::new()));
    let running = Arc::new(AtomicU32::new(0));
    let mut selectors = Vec::new();
    for index in 0..3 {
        let framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
        let id = format!("s{index}");
        let (turns, violations, failures, running, task_framework, task_id) = (
            turns.clone(),
            violations.clone(),
            failures.clone(),
            running.clone(),
            framework.clone(),
            id.clone(),
        );
        let selector = LeaderSelector::builder(&framework, path)
            .id(id)
            .auto_requeue(true)
            .build(move |leadership| {
                let (turns, violations, failures, running, framework, id) = (
                    turns.clone(),
                    violations.clone(),
                    failures.clone(),
                    running.clone(),
                    task_framework.clone(),
                    task_id.clone(),
                );
                async move {
                    if running.fetch_add(1, Ordering::SeqCst) != 0 {
                        violations.fetch_add(1, Ordering::SeqCst); // two at once in this process
                    }
                    match try_mark(&framework, leadership.node_path(), marker, &id).await {
                        Ok(true) => {}
                        Ok(false) => {
                            violations.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(why) => failures.lock().push(why),
                    }
                    turns.lock().push(id);
                    tokio::time::sleep(Duration::from_millis(30)).await;
                    if let Err(why) = try_unmark(&framework, marker).await {
                        failures.lock().push(why);
                    }
                    running.fetch_sub(1, Ordering::SeqCst);
                }
            })
            .expect("selector");
        selectors.push((framework, selector));
    }
    for (_, selector) in &selectors {
        selector.start().expect("start");
    }
    eventually("four rounds of leadership", || async { turns.lock().len() >= 12 }).await;
    // The turns taken while all three are queued; closing one lets the others lead out of turn.
    let all_queued = turns.lock().clone();
    for (_, selector) in &selectors {
        within("close", selector.close()).await.expect("close");
    }
    let turns = all_queued;
    let failures = failures.lock().clone();
    assert!(failures.is_empty(), "the marker protocol could not check every leadership: {failures:?}");
    assert_eq!(violations.load(Ordering::SeqCst), 0, "two leaders at once");
    // Once everyone queued, leadership goes round: every three turns in a row are three ids.
    for window in turns[3..].windows(3) {
        let mut ids = window.to_vec();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 3, "leadership rotates through all participants: {turns:?}");
    }
    // A requeue whose create was in flight at the close gives its node back through the cleanup
    // worker, which may finish just after the close returned.
    eventually("no participant left", || async {
        within("participants", selectors[0].1.participants()).await.expect("participants").is_empty()
    })
    .await;
    for (framework, _) in selectors {
        within("close", framework.close()).await;
    }
    assert_clean(&admin, &[path], || watch_count(&server)).await;
    within("close", admin.close()).await;
}

#[tokio::test]
async fn interrupting_cancels_the_leadership_and_requeue_leads_again() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let path = "/interrupt/leader";
    let (reasons, mut reasons_received) = mpsc::unbounded_channel();
    let selector = LeaderSelector::builder(&framework, path)
        .id("interrupted")
        .build(move |leadership| {
            let reasons = reasons.clone();
            async move {
                let reason = leadership.cancelled().await;
                assert!(leadership.is_cancelled());
                let _ = reasons.send((reason, leadership.fencing_token()));
            }
        })
        .expect("selector");
    assert!(!selector.interrupt_leadership(), "nothing to interrupt yet");
    assert!(matches!(selector.requeue(), Err(LeaderError::NotStarted(_))));
    selector.start().expect("start");
    assert!(matches!(selector.start(), Err(LeaderError::AlreadyStarted(_))));
    eventually("leads", || async { selector.has_leadership() }).await;
    let participants = within("participants", selector.participants()).await.expect("participants");
    assert_eq!(participants.len(), 1);
    assert!(participants[0].is_leader && participants[0].id == "interrupted");
    assert!(!selector.requeue().expect("requeue"), "already queued");

    assert!(selector.interrupt_leadership());
    let (reason, first_token) = within("cancelled", reasons_received.recv()).await.expect("reason");
    assert_eq!(reason, CancelReason::Interrupted);
    assert!(!selector.has_leadership());
    eventually("the lock is released", || async { children(&framework, path).await.is_empty() }).await;

    // Without auto-requeue, one leadership per requeue.
    eventually("the round is over", || async { selector.requeue().expect("requeue") }).await;
    eventually("leads again", || async { selector.has_leadership() }).await;
    within("close", selector.close()).await.expect("close");
    let (reason, second_token) = within("cancelled", reasons_received.recv()).await.expect("reason");
    assert_eq!(reason, CancelReason::Closed);
    assert!(second_token > first_token);
    assert!(matches!(selector.requeue(), Err(LeaderError::Closed(_))));
    assert_clean(&framework, &[path], || watch_count(&server)).await;
    within("close", framework.close()).await;
}

/// When a leadership's future was dropped, and whether the task watching its token had seen the
/// cancellation by then.
#[derive(Debug, Clone, Copy)]
struct Dropped {
    at: Instant,
    cancellation_seen: bool,
}

/// Records [`Dropped`] when a leadership's future is dropped.
struct OnDrop {
    dropped: Arc<Mutex<Option<Dropped>>>,
    cancelled: Arc<Mutex<Option<(Instant, CancelReason)>>>,
}

impl Drop for OnDrop {
    fn drop(&mut self) {
        let cancellation_seen = self.cancelled.lock().is_some();
        *self.dropped.lock() = Some(Dropped { at: Instant::now(), cancellation_seen });
    }
}

/// When the framework saw the next `Suspended` that reaches `events` (the instant the selector
/// counts its grace from).
async fn next_suspension(events: &mut ConnectionEvents) -> Instant {
    within("Suspended", async {
        loop {
            let update = events.next().await.expect("the framework is open");
            if update.state() == ConnectionState::Suspended {
                return update.at().expect("a transition, not a lag");
            }
        }
    })
    .await
}

/// A leader whose connection is black-holed (its task ignores the cancellation) while another
/// selector waits on a direct connection.
///
/// Everything is asserted on events and lower bounds, none on how quickly a loaded machine gets
/// there: this runtime has one thread, so a task woken by the selector's cancellation cannot run
/// before the selector's own task yields.
async fn suspended_leadership(server: &TestingServer, policy: ErrorPolicy, path: &str) {
    let session_timeout = Duration::from_secs(4);
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let admin = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let stuck_framework = framework(&proxy.connect_string(), session_timeout, policy);
    let cancelled_at = Arc::new(Mutex::new(None::<(Instant, CancelReason)>));
    let dropped_at = Arc::new(Mutex::new(None::<Dropped>));
    let (started, started_received) = oneshot::channel::<()>();
    let started = Arc::new(Mutex::new(Some(started)));
    let stuck = {
        let (cancelled_at, dropped_at) = (cancelled_at.clone(), dropped_at.clone());
        LeaderSelector::builder(&stuck_framework, path)
            .id("stuck")
            .build(move |leadership| {
                let (cancelled_at, dropped_at, started) =
                    (cancelled_at.clone(), dropped_at.clone(), started.clone());
                async move {
                    let _on_drop = OnDrop { dropped: dropped_at, cancelled: cancelled_at.clone() };
                    if let Some(started) = started.lock().take() {
                        let _ = started.send(());
                    }
                    // Observes the token from another task (under the session policy the future is
                    // dropped as the token is cancelled, before it could look), and ignores it: the
                    // selector must drop the future.
                    tokio::spawn(async move {
                        let reason = leadership.cancelled().await;
                        *cancelled_at.lock() = Some((Instant::now(), reason));
                    });
                    std::future::pending::<()>().await;
                }
            })
            .expect("selector")
    };
    stuck.start().expect("start");
    within("stuck leads", started_received).await.expect("started");

    let other_framework = framework(&server.connect_string(), session_timeout, policy);
    let other_started = Arc::new(Mutex::new(None));
    let other = {
        let other_started = other_started.clone();
        LeaderSelector::builder(&other_framework, path)
            .id("other")
            .build(move |leadership| {
                let other_started = other_started.clone();
                async move {
                    *other_started.lock() = Some(Instant::now());
                    leadership.cancelled().await;
                }
            })
            .expect("selector")
    };
    other.start().expect("start");
    eventually("both queued", || async { children(&admin, path).await.len() == 2 }).await;

    let grace = stuck.grace_after_suspension();
    assert_eq!(grace, session_timeout / 4, "7/20 of the session timeout less a tenth");
    if policy == ErrorPolicy::SessionOnly {
        // A short disconnection: under the session policy the leadership goes on. Had the
        // selector kept the suspension's timer, it would drop the future `grace` after the
        // suspension: look just after that moment (its timer fires before ours).
        let mut events = stuck_framework.connection_events();
        proxy.cut_now();
        let blip = next_suspension(&mut events).await;
        eventually("reconnected", || async {
            stuck_framework.current().state == Some(ConnectionState::Reconnected)
        })
        .await;
        let back = stuck_framework.current().since.expect("since");
        assert!(back < blip + grace, "the blip lasted {:?}, longer than the grace {grace:?}", back - blip);
        tokio::time::sleep_until(blip + grace + Duration::from_millis(100)).await;
        assert!(
            cancelled_at.lock().is_none() && dropped_at.lock().is_none() && stuck.has_leadership(),
            "a blip does not cancel"
        );
    }

    let mut events = stuck_framework.connection_events();
    let black_hole = Instant::now();
    proxy.black_hole(Duration::from_secs(120));
    let suspended = next_suspension(&mut events).await;
    eventually("cancelled", || async { cancelled_at.lock().is_some() }).await;
    eventually("dropped", || async { dropped_at.lock().is_some() }).await;
    let (cancelled, reason) = cancelled_at.lock().expect("cancelled");
    let dropped = dropped_at.lock().expect("dropped");
    eprintln!(
        "{policy:?}, session timeout {session_timeout:?}: suspended {:?}, cancelled {:?} and dropped {:?} after \
         the black hole (grace {grace:?})",
        suspended - black_hole,
        cancelled - black_hole,
        dropped.at - black_hole
    );
    assert_eq!(reason, CancelReason::Connection(ConnectionState::Suspended));
    assert!(!stuck.has_leadership());
    // The selector drops the future `grace` after the framework saw the suspension: the moment
    // the server may expire the session at the earliest, less a margin. Never sooner.
    assert!(
        dropped.at >= suspended + grace,
        "dropped {:?} after the suspension, before the grace {grace:?}",
        dropped.at - suspended
    );
    if policy == ErrorPolicy::Standard {
        // The token is cancelled at the suspension and the future runs on through the grace: the
        // task watching the token saw the cancellation while the future still ran.
        assert!(dropped.cancellation_seen, "the token was cancelled only as the future was dropped");
        assert!(cancelled >= suspended, "cancelled before the suspension");
    } else {
        // Cancelled and dropped together, at the bound: nobody could see the token cancelled
        // before the future was gone.
        assert!(!dropped.cancellation_seen, "the token was cancelled before the bound");
    }

    // The other selector leads only once the server expired the stuck one's session, and the
    // stuck one's future was gone before that.
    eventually("the other leads", || async { other_started.lock().is_some() }).await;
    let other_started_at = other_started.lock().expect("started");
    assert!(other_started_at > dropped.at, "never two leaderships at once");
    eprintln!("{policy:?}: the other selector led {:?} after the black hole", other_started_at - black_hole);

    proxy.heal();
    within("close", stuck.close()).await.expect("close");
    within("close", other.close()).await.expect("close");
    for framework in [stuck_framework, other_framework] {
        within("close", framework.close()).await;
    }
    eventually("no node left", || async { children(&admin, path).await.is_empty() }).await;
    within("close", admin.close()).await;
}

#[tokio::test]
async fn a_lost_connection_ends_the_leadership_before_the_server_may_expire_the_session() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    within_for(Duration::from_secs(60), "both policies", async {
        tokio::join!(
            suspended_leadership(&server, ErrorPolicy::Standard, "/suspended-standard/leader"),
            suspended_leadership(&server, ErrorPolicy::SessionOnly, "/suspended-session/leader"),
        )
    })
    .await;
    eventually("no watch left", || async { watch_count(&server).await == 0 }).await;
}

#[tokio::test]
async fn a_mutex_and_a_selector_on_one_path_contend_as_in_curator() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let path = "/contend/lock";
    let mutex = ZkMutex::new(&framework, path).expect("mutex");
    let guard = within("lock", mutex.lock()).await.expect("lock");
    let watched_by_anyone = |node: String| {
        let server = &server;
        async move {
            let watches = within("wchc", server.watches()).await.expect("wchc");
            watches.values().flatten().any(|watched| *watched == node)
        }
    };
    assert!(!watched_by_anyone(guard.node_path().to_owned()).await, "nobody waits on the mutex yet");

    let (done, done_received) = oneshot::channel::<()>();
    let done_received = Arc::new(Mutex::new(Some(done_received)));
    let selector = LeaderSelector::builder(&framework, path)
        .id("selector")
        .build(move |leadership| {
            let done_received = done_received.lock().take();
            async move {
                tokio::select! {
                    _ = async { if let Some(done) = done_received { let _ = done.await; } } => {}
                    _ = leadership.cancelled() => {}
                }
            }
        })
        .expect("selector");
    selector.start().expect("start");
    eventually("the selector queued behind the mutex", || async {
        children(&framework, path).await.len() == 2
    })
    .await;
    let participants = within("participants", selector.participants()).await.expect("participants");
    assert!(participants[0].is_leader, "{participants:?}");
    assert_eq!(participants[0].id.as_bytes(), local_address(), "the mutex holder shows its address");
    assert_eq!(participants[1].id, "selector");
    // The selector waits: it watches the mutex's node, its predecessor.
    eventually("the selector watches the mutex's node", || watched_by_anyone(guard.node_path().to_owned()))
        .await;
    assert!(!selector.has_leadership(), "the mutex holds the lock");

    within("release", guard.release()).await.expect("release");
    eventually("the selector leads", || async { selector.has_leadership() }).await;
    let waited = within("lock_timeout", mutex.lock_timeout(Duration::from_millis(300))).await;
    assert!(waited.is_err_and(|err| err.is_timeout()), "the selector holds the lock");
    let _ = done.send(());
    let guard = within("lock after the leadership", mutex.lock()).await.expect("lock");
    assert!(!selector.has_leadership());
    within("release", guard.release()).await.expect("release");
    within("close", selector.close()).await.expect("close");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_clean(&framework, &[path], || watch_count(&server)).await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_panicking_take_leadership_ends_its_leadership_and_the_selector_goes_on() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let path = "/panic/leader";
    let calls = Arc::new(AtomicU32::new(0));
    let selector = {
        let calls = calls.clone();
        LeaderSelector::builder(&framework, path)
            .auto_requeue(true)
            .build(move |leadership| {
                let call = calls.fetch_add(1, Ordering::SeqCst);
                async move {
                    if call == 0 {
                        panic!("the first leadership fails");
                    }
                    leadership.cancelled().await;
                }
            })
            .expect("selector")
    };
    selector.start().expect("start");
    eventually("leads a second time", || async {
        calls.load(Ordering::SeqCst) == 2 && selector.has_leadership()
    })
    .await;
    assert_eq!(children(&framework, path).await.len(), 1, "the first node was released");
    within("close", selector.close()).await.expect("close");
    assert_clean(&framework, &[path], || watch_count(&server)).await;
    within("close", framework.close()).await;
}

/// closing the framework closes the selector as `close` does: the token is cancelled
/// first and `take_leadership` is polled on (within the close grace), so code after
/// `leadership.cancelled().await` runs.
#[tokio::test]
async fn closing_the_framework_lets_take_leadership_finish_after_its_cancellation() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let (started, leading) = oneshot::channel();
    let (finished, finished_receiver) = oneshot::channel();
    let senders = Arc::new(Mutex::new(Some((started, finished))));
    let selector = LeaderSelector::builder(&framework, "/framework-close/leader")
        .close_grace(Duration::from_secs(5))
        .build(move |leadership| {
            let senders = senders.lock().take();
            async move {
                let Some((started, finished)) = senders else { return };
                let _ = started.send(());
                let reason = leadership.cancelled().await;
                // What a `finally` block does in Curator: runs after the interruption.
                let _ = finished.send(reason);
            }
        })
        .expect("selector");
    selector.start().expect("start");
    within("leading", leading).await.expect("take_leadership started");

    within("close the framework", framework.close()).await;
    let reason = within("the code after cancelled()", finished_receiver)
        .await
        .expect("take_leadership must run on after its cancellation, not be dropped");
    assert_eq!(reason, CancelReason::Closed);
    eventually("the selector closed with its framework", || async { selector.is_closed() }).await;
}

/// a selector is closed once its framework is, started or not.
#[tokio::test]
async fn a_selector_is_closed_once_its_framework_is() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let path = "/closed-with-framework/leader";
    let never_started = LeaderSelector::builder(&framework, path).build(|_| async {}).expect("selector");
    let leading = LeaderSelector::builder(&framework, path)
        .build(|leadership| async move {
            leadership.cancelled().await;
        })
        .expect("selector");
    leading.start().expect("start");
    eventually("leading", || async { leading.has_leadership() }).await;
    assert!(!never_started.is_closed() && !leading.is_closed());

    within("close the framework", framework.close()).await;
    assert!(never_started.is_closed(), "a selector never started is closed with its framework");
    assert!(leading.is_closed(), "a leading selector is closed with its framework");
    assert!(matches!(never_started.start(), Err(LeaderError::Closed(_))), "a closed selector does not start");
}

/// dropping the last handle of a started selector warns that it runs on — but not
/// once its framework was closed, which closed it.
#[tokio::test]
async fn dropping_a_selector_warns_only_while_its_framework_is_open() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let logs = capture_warnings();
    let warning = "dropped without close";

    let open = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let selector =
        LeaderSelector::builder(&open, "/drop-warning/open").build(|_| async {}).expect("selector");
    selector.start().expect("start");
    drop(selector);
    assert_eq!(logs.count(warning), 1, "the warning is logged while the framework is open: {logs:?}");
    within("close", open.close()).await;

    let closing = framework(&server.connect_string(), SESSION, ErrorPolicy::Standard);
    let selector = LeaderSelector::builder(&closing, "/drop-warning/closed")
        .build(|leadership| async move {
            leadership.cancelled().await;
        })
        .expect("selector");
    selector.start().expect("start");
    eventually("leading", || async { selector.has_leadership() }).await;
    within("close the framework", closing.close()).await;
    drop(selector);
    assert_eq!(logs.count(warning), 1, "no warning once the framework was closed: {logs:?}");
}
