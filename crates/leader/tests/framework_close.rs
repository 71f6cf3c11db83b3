//! Closing the framework under a leader: the leadership and every hold end before
//! the session does, so the next leader (or holder) never starts while ours still acts.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use tokio::time::Instant;
use zk_recipes_framework::ErrorPolicy;
use zk_recipes_leader::{LeaderLatch, LeaderSelector, LeadershipEvent};
use zk_recipes_mutex::Hold;
use zk_recipes_testing::TestingServer;

/// When each leadership began and ended, by participant.
#[derive(Default)]
struct Timeline {
    first_ended: Option<Instant>,
    second_began: Option<Instant>,
}

#[tokio::test]
async fn closing_the_framework_under_a_selector_ends_its_leadership_before_the_next_one_begins() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    for attempt in 0..3 {
        let first = framework(&server.connect_string(), Duration::from_secs(10), ErrorPolicy::Standard);
        let second = framework(&server.connect_string(), Duration::from_secs(10), ErrorPolicy::Standard);
        let path = format!("/framework-close/selector/{attempt}");
        let timeline = Arc::new(Mutex::new(Timeline::default()));
        let leader = {
            let timeline = timeline.clone();
            LeaderSelector::builder(&first, &path)
                .id("first")
                .build(move |leadership| {
                    let timeline = timeline.clone();
                    async move {
                        leadership.cancelled().await;
                        // Winding down, well within the close grace (5 s).
                        tokio::time::sleep(Duration::from_millis(500)).await;
                        timeline.lock().first_ended = Some(Instant::now());
                    }
                })
                .expect("selector")
        };
        leader.start().expect("start");
        eventually("the first leads", || async { leader.has_leadership() }).await;
        let next = {
            let timeline = timeline.clone();
            LeaderSelector::builder(&second, &path)
                .id("second")
                .build(move |leadership| {
                    let timeline = timeline.clone();
                    async move {
                        timeline.lock().second_began = Some(Instant::now());
                        leadership.cancelled().await;
                    }
                })
                .expect("selector")
        };
        next.start().expect("start");
        eventually("the second waits", || async { children(&second, &path).await.len() == 2 }).await;

        within("close the first framework", first.close()).await;
        // close() returns once the leadership has wound down (not dropped: within its grace).
        let ended = timeline.lock().first_ended;
        let ended =
            ended.unwrap_or_else(|| panic!("attempt {attempt}: close returned while the first still led"));
        eventually("the second leads", || async { next.has_leadership() }).await;
        let began = timeline.lock().second_began.expect("the second leadership began");
        assert!(
            ended <= began,
            "attempt {attempt}: the second leader began {:?} before the first ended",
            ended - began
        );
        within("close", next.close()).await.expect("close");
        within("close", second.close()).await;
    }
}

#[tokio::test]
async fn closing_the_framework_under_a_latch_ends_its_leadership_before_the_next_one_begins() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    for attempt in 0..3 {
        let first = framework(&server.connect_string(), Duration::from_secs(10), ErrorPolicy::Standard);
        let second = framework(&server.connect_string(), Duration::from_secs(10), ErrorPolicy::Standard);
        let path = format!("/framework-close/latch/{attempt}");
        let leader = LeaderLatch::new(&first, &path, "first").expect("latch");
        leader.start().expect("start");
        within("the first leads", leader.await_leadership()).await.expect("leads");
        let mut leader_events = leader.subscribe();
        let next = LeaderLatch::new(&second, &path, "second").expect("latch");
        let mut next_events = next.subscribe();
        next.start().expect("start");
        eventually("the second waits", || async { children(&second, &path).await.len() == 2 }).await;

        let not_leader = tokio::spawn(async move {
            loop {
                match leader_events.next().await {
                    Some(LeadershipEvent::NotLeader { .. }) => return Some(Instant::now()),
                    Some(_) => {}
                    None => return None,
                }
            }
        });
        within("close the first framework", first.close()).await;
        // Once close has returned, the first latch says it no longer leads.
        assert!(!leader.has_leadership(), "attempt {attempt}: still leading after close");
        let began = within("the second leads", async {
            loop {
                match next_events.next().await {
                    Some(LeadershipEvent::IsLeader { .. }) => return Instant::now(),
                    Some(_) => {}
                    None => panic!("the second latch closed"),
                }
            }
        })
        .await;
        let ended = within("NotLeader", not_leader).await.expect("task").expect("the first said NotLeader");
        assert!(ended <= began, "attempt {attempt}: the second leader began before the first stopped");
        within("close", next.close(zk_recipes_leader::CloseMode::Silent)).await.expect("close");
        within("close", second.close()).await;
    }
}

#[tokio::test]
async fn closing_the_framework_resolves_every_held_locks_lost_before_another_process_takes_it() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let first = framework(&server.connect_string(), Duration::from_secs(10), ErrorPolicy::Standard);
    let second = framework(&server.connect_string(), Duration::from_secs(10), ErrorPolicy::Standard);
    let path = "/framework-close/mutex";
    let guard = within("lock", zk_recipes_mutex::Mutex::new(&first, path).expect("mutex").lock())
        .await
        .expect("lock");
    let guard = Arc::new(guard);
    let lost = {
        let guard = guard.clone();
        tokio::spawn(async move {
            let reason = guard.lost().await;
            (reason, Instant::now())
        })
    };
    let waiter = zk_recipes_mutex::Mutex::new(&second, path).expect("mutex");
    let acquired = tokio::spawn(async move {
        let guard = waiter.lock_timeout(STEP).await.expect("the waiter acquires");
        (guard, Instant::now())
    });
    eventually("the waiter queued", || async { children(&second, path).await.len() == 2 }).await;
    within("close the first framework", first.close()).await;
    let (reason, lost_at) = within("lost", lost).await.expect("task");
    assert_eq!(reason, zk_recipes_mutex::LostReason::Closed);
    let (their_guard, acquired_at) = within("acquire", acquired).await.expect("task");
    assert!(lost_at <= acquired_at, "the next holder acquired before our lost() resolved");
    within("release", their_guard.release()).await.expect("release");
    within("close", second.close()).await;
}
