//! Double barrier members whose session expires (a `FaultProxy` black hole past a 2 s session
//! timeout): a member lost while entering no longer counts and is told so; a member lost inside
//! does not hold the others in `leave`.

mod common;

use std::time::Duration;

use common::*;
use zk_recipes_barrier::{BarrierError, DistributedDoubleBarrier};
use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_testing::{FaultProxy, TestingServer};

/// The session timeout of the member that expires.
const SHORT_SESSION: Duration = Duration::from_secs(2);

/// A server, a proxy in front of it, and three frameworks: one through the proxy with a short
/// session (the member that expires), one healthy member and an observer on the server.
struct Setup {
    _server: TestingServer,
    proxy: FaultProxy,
    doomed: Framework,
    healthy: Framework,
    observer: Framework,
}

impl Setup {
    async fn start() -> Setup {
        let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
        let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
        let doomed = framework(&proxy.connect_string(), SHORT_SESSION);
        let healthy = framework(&server.connect_string(), Duration::from_secs(10));
        let observer = framework(&server.connect_string(), Duration::from_secs(10));
        Setup { _server: server, proxy, doomed, healthy, observer }
    }

    /// Black-holes the doomed member's connection past its session timeout; returns its
    /// connection events from before, to see the session lost and a new one.
    fn expire_doomed(&self) -> zk_recipes_framework::ConnectionEvents {
        let events = self.doomed.connection_events();
        let negotiated = self.doomed.current().session_timeout.expect("session");
        self.proxy.black_hole(negotiated * 3);
        events
    }

    async fn close(self) {
        for framework in [self.doomed, self.healthy, self.observer] {
            within("close", framework.close()).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_expired_while_entering_no_longer_counts_and_is_told() {
    init_tracing();
    let setup = Setup::start().await;
    let (doomed, healthy, observer) = (&setup.doomed, &setup.healthy, &setup.observer);
    let barrier_path = "/faults/entering";
    let doomed_barrier = DistributedDoubleBarrier::new(doomed, barrier_path, 3).expect("barrier");
    let barrier = DistributedDoubleBarrier::new(healthy, barrier_path, 3).expect("barrier");

    let mut doomed_enter = spawn_enter(&doomed_barrier);
    let mut second = spawn_enter(&barrier);
    eventually("two members", || async { members(observer, barrier_path).await.len() == 2 }).await;
    let before_expiry = members(observer, barrier_path).await;

    let mut events = setup.expire_doomed();
    eventually("the expired member's node gone", || async {
        members(observer, barrier_path).await.len() == 1
    })
    .await;
    let survivor = members(observer, barrier_path).await;
    let expired: Vec<_> = before_expiry.iter().filter(|name| !survivor.contains(name)).collect();
    assert_eq!(expired.len(), 1, "{before_expiry:?} then {survivor:?}");

    // Two live members of three: nobody goes in, although three nodes were created.
    let mut third = spawn_enter(&barrier);
    eventually("two live members", || async { members(observer, barrier_path).await.len() == 2 }).await;
    assert_still_waiting("the second, with a dead member counted out", &mut second).await;
    assert_still_waiting("the third, with a dead member counted out", &mut third).await;

    lost_then_reconnected(&mut events).await;
    let err = within("the expired member's enter", &mut doomed_enter).await.expect("task").expect_err("lost");
    assert!(matches!(err, BarrierError::MemberLost { .. }), "{err:?}");
    assert!(err.is_retryable());
    let now = members(observer, barrier_path).await;
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
    assert!(children(observer, barrier_path).await.is_empty());
    setup.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_expired_inside_does_not_hold_the_others_in_leave() {
    init_tracing();
    let setup = Setup::start().await;
    let (doomed, healthy, observer) = (&setup.doomed, &setup.healthy, &setup.observer);
    let barrier_path = "/faults/inside";
    let doomed_enter = spawn_enter(&DistributedDoubleBarrier::new(doomed, barrier_path, 2).expect("barrier"));
    let healthy_enter =
        spawn_enter(&DistributedDoubleBarrier::new(healthy, barrier_path, 2).expect("barrier"));
    let doomed_member = finished("in", doomed_enter).await;
    let healthy_member = finished("in", healthy_enter).await;

    let mut leaving = spawn_leave(healthy_member);
    assert_still_waiting("leaving while the other member is inside", &mut leaving).await;
    let mut events = setup.expire_doomed();
    // The dead member's node goes with its session: the other one is out.
    finished("out once the dead member's session expired", leaving).await;
    assert!(children(observer, barrier_path).await.is_empty(), "ready deleted, no member left");

    // The expired member's own leave finds its node gone and nobody left.
    lost_then_reconnected(&mut events).await;
    within("the expired member leaves", doomed_member.leave(Deadline::after(STEP))).await.expect("leave");
    setup.close().await;
}
