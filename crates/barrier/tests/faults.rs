//! Double barrier members whose session expires (a `FaultProxy` black hole past a 2 s session
//! timeout): a member lost while entering no longer counts and is told so; a member lost inside
//! does not hold the others in `leave`.

mod common;

use std::time::Duration;

use common::*;
use tokio::task::JoinHandle;
use zk_recipes_barrier::{BarrierError, DistributedDoubleBarrier, Entered, READY_NODE};
use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_testing::{FaultProxy, TestingServer};

/// How long an enter or leave that must not end is given before the test says it did not.
const STILL_WAITING: Duration = Duration::from_millis(300);

/// The session timeout of the member that expires.
const SHORT_SESSION: Duration = Duration::from_secs(2);

fn framework(connect: &str, session_timeout: Duration) -> Framework {
    builder(connect, session_timeout).start().expect("framework")
}

async fn members(framework: &Framework, barrier_path: &str) -> Vec<String> {
    children(framework, barrier_path).await.into_iter().filter(|child| child != READY_NODE).collect()
}

fn spawn_enter(barrier: &DistributedDoubleBarrier) -> JoinHandle<Result<Entered, BarrierError>> {
    let barrier = barrier.clone();
    tokio::spawn(async move { barrier.enter(Deadline::after(STEP)).await })
}

fn spawn_leave(entered: Entered) -> JoinHandle<Result<(), BarrierError>> {
    tokio::spawn(async move { entered.leave(Deadline::after(STEP)).await })
}

async fn assert_still_waiting<T>(what: &str, task: &mut JoinHandle<T>) {
    assert!(tokio::time::timeout(STILL_WAITING, task).await.is_err(), "{what}: ended early");
}

async fn finished<T>(what: &str, task: JoinHandle<Result<T, BarrierError>>) -> T {
    within(what, task).await.expect("task").unwrap_or_else(|err| panic!("{what}: {err}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_expired_while_entering_no_longer_counts_and_is_told() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let doomed = framework(&proxy.connect_string(), SHORT_SESSION);
    let healthy = framework(&server.connect_string(), Duration::from_secs(10));
    let observer = framework(&server.connect_string(), Duration::from_secs(10));
    let barrier_path = "/faults/entering";
    let doomed_barrier = DistributedDoubleBarrier::new(&doomed, barrier_path, 3).expect("barrier");
    let barrier = DistributedDoubleBarrier::new(&healthy, barrier_path, 3).expect("barrier");

    let mut doomed_enter = spawn_enter(&doomed_barrier);
    let mut second = spawn_enter(&barrier);
    eventually("two members", || async { members(&observer, barrier_path).await.len() == 2 }).await;
    let before_expiry = members(&observer, barrier_path).await;

    let mut events = doomed.connection_events();
    let negotiated = doomed.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    eventually("the expired member's node gone", || async {
        members(&observer, barrier_path).await.len() == 1
    })
    .await;
    let survivor = members(&observer, barrier_path).await;
    let expired: Vec<_> = before_expiry.iter().filter(|name| !survivor.contains(name)).collect();
    assert_eq!(expired.len(), 1, "{before_expiry:?} then {survivor:?}");

    // Two live members of three: nobody goes in, although three nodes were created.
    let mut third = spawn_enter(&barrier);
    eventually("two live members", || async { members(&observer, barrier_path).await.len() == 2 }).await;
    assert_still_waiting("the second, with a dead member counted out", &mut second).await;
    assert_still_waiting("the third, with a dead member counted out", &mut third).await;

    lost_then_reconnected(&mut events).await;
    let err = within("the expired member's enter", &mut doomed_enter).await.expect("task").expect_err("lost");
    assert!(matches!(err, BarrierError::MemberLost { .. }), "{err:?}");
    assert!(err.is_retryable());
    let now = members(&observer, barrier_path).await;
    assert_eq!(now.len(), 2, "the expired member did not come back by itself: {now:?}");
    assert!(!now.contains(expired[0]), "{now:?}");
    assert_still_waiting("the second, after the expired member gave up", &mut second).await;

    // The expired member enters again on its new session: now three are there.
    let again = spawn_enter(&doomed_barrier);
    let entered = [finished("in", second).await, finished("in", third).await, finished("in", again).await];
    let leaving: Vec<_> = entered.into_iter().map(spawn_leave).collect();
    for leave in leaving {
        finished("out", leave).await;
    }
    assert!(children(&observer, barrier_path).await.is_empty());
    for framework in [doomed, healthy, observer] {
        within("close", framework.close()).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_expired_inside_does_not_hold_the_others_in_leave() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let doomed = framework(&proxy.connect_string(), SHORT_SESSION);
    let healthy = framework(&server.connect_string(), Duration::from_secs(10));
    let observer = framework(&server.connect_string(), Duration::from_secs(10));
    let barrier_path = "/faults/inside";
    let doomed_enter =
        spawn_enter(&DistributedDoubleBarrier::new(&doomed, barrier_path, 2).expect("barrier"));
    let healthy_enter =
        spawn_enter(&DistributedDoubleBarrier::new(&healthy, barrier_path, 2).expect("barrier"));
    let doomed_member = finished("in", doomed_enter).await;
    let healthy_member = finished("in", healthy_enter).await;

    let mut leaving = spawn_leave(healthy_member);
    assert_still_waiting("leaving while the other member is inside", &mut leaving).await;
    let mut events = doomed.connection_events();
    let negotiated = doomed.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    // The dead member's node goes with its session: the other one is out.
    finished("out once the dead member's session expired", leaving).await;
    assert!(children(&observer, barrier_path).await.is_empty(), "ready deleted, no member left");

    // The expired member's own leave finds its node gone and nobody left.
    lost_then_reconnected(&mut events).await;
    within("the expired member leaves", doomed_member.leave(Deadline::after(STEP))).await.expect("leave");
    for framework in [doomed, healthy, observer] {
        within("close", framework.close()).await;
    }
}
