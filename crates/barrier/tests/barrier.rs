//! `DistributedBarrier` against a real ZooKeeper server: set, wait, remove, deadlines, a
//! reconnection, cancellation, and bad input refused before anything is sent.

use std::time::Duration;

use zk_recipes_barrier::{BarrierError, DistributedBarrier, DistributedDoubleBarrier};
use zk_recipes_framework::{local_address, Deadline, Error as FrameworkError};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, TestingServer};

#[tokio::test]
async fn a_set_barrier_holds_waiters_until_it_is_removed() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let barrier = DistributedBarrier::new(&framework, "/gates/one/barrier").expect("barrier");
    within("set", barrier.set(step())).await.expect("set");
    within("set again", barrier.set(step())).await.expect("setting a set barrier is no error");
    assert!(within("is set", barrier.is_set(step())).await.expect("is set"));
    // Curator 5.4's layout: the node PERSISTENT with this host's address, parents empty containers
    // (reaped below once the barrier is removed).
    assert_eq!(data_and_owner(&framework, "/gates/one/barrier").await, Some((local_address(), 0)));
    assert_eq!(data_and_owner(&framework, "/gates/one").await, Some((Vec::new(), 0)));
    assert_eq!(data_and_owner(&framework, "/gates").await, Some((Vec::new(), 0)));

    let waiters: Vec<_> = (0..3)
        .map(|_| {
            let barrier = barrier.clone();
            tokio::spawn(async move { barrier.wait(Deadline::after(STEP)).await })
        })
        .collect();
    let mut waiters = waiters;
    for waiter in &mut waiters {
        assert!(
            tokio::time::timeout(STILL_WAITING, waiter).await.is_err(),
            "a waiter went through a set barrier"
        );
    }
    within("remove", barrier.remove(step())).await.expect("remove");
    for waiter in waiters {
        within("waiter through", waiter).await.expect("task").expect("through once removed");
    }
    assert_eq!(data_and_owner(&framework, "/gates/one/barrier").await, None);
    within("remove again", barrier.remove(step())).await.expect("removing a removed barrier is no error");
    eventually("the emptied parent containers reaped", || async {
        data_and_owner(&framework, "/gates").await.is_none()
    })
    .await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn waiting_on_a_barrier_that_is_not_set_returns_at_once() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let barrier = DistributedBarrier::new(&framework, "/gates/never-set").expect("barrier");
    within("wait", barrier.wait(step())).await.expect("not set: through");
    assert!(!within("is set", barrier.is_set(step())).await.expect("is set"));
    assert_eq!(data_and_owner(&framework, "/gates").await, None, "waiting creates nothing");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_wait_past_its_deadline_is_a_timeout_error() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let barrier = DistributedBarrier::new(&framework, "/gates/deadline").expect("barrier");
    within("set", barrier.set(step())).await.expect("set");
    let err = within("wait", barrier.wait(Deadline::after(Duration::from_millis(200))))
        .await
        .expect_err("still set at the deadline");
    assert!(err.is_timeout(), "{err:?}");
    assert!(within("is set", barrier.is_set(step())).await.expect("is set"));
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_dropped_wait_leaves_no_node_and_no_watch() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let setter = DistributedBarrier::new(&framework, "/gates/dropped/barrier").expect("barrier");
    within("set", setter.set(step())).await.expect("set");
    let waiter_framework =
        builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let waiter = DistributedBarrier::new(&waiter_framework, "/gates/dropped/barrier").expect("barrier");
    {
        let wait = waiter.wait(step());
        tokio::pin!(wait);
        assert!(tokio::time::timeout(STILL_WAITING, &mut wait).await.is_err(), "went through a set barrier");
        eventually("the waiter's watch is on the server", || async {
            server.watch_count().await.expect("wchc") > 0
        })
        .await;
    }
    eventually("no watch left once the wait is dropped", || async {
        server.watch_count().await.expect("wchc") == 0
    })
    .await;
    assert_eq!(children(&framework, "/gates/dropped").await, vec!["barrier".to_owned()]);
    assert_eq!(data_and_owner(&framework, "/gates/dropped/barrier").await, Some((local_address(), 0)));
    within("close", waiter_framework.close()).await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_wait_goes_through_a_removal_made_while_its_connection_was_cut() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let waiter_framework =
        builder(&proxy.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let barrier = DistributedBarrier::new(&framework, "/gates/cut").expect("barrier");
    within("set", barrier.set(step())).await.expect("set");
    let waiter = DistributedBarrier::new(&waiter_framework, "/gates/cut").expect("barrier");
    let mut wait = tokio::spawn(async move { waiter.wait(Deadline::after(STEP)).await });
    assert!(tokio::time::timeout(STILL_WAITING, &mut wait).await.is_err(), "went through a set barrier");

    // Removed while the waiter's connection is down: its watch never sees the delete.
    proxy.black_hole(Duration::from_millis(1500));
    within("remove", barrier.remove(step())).await.expect("remove");
    within("through after the reconnection", wait).await.expect("task").expect("through");
    within("close", waiter_framework.close()).await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn bad_input_is_refused_with_a_typed_error_before_anything_is_written() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    let before = proxy.stats().writes_to_server;

    for bad in ["no-slash", "/trailing/", "/double//slash", ""] {
        let err = DistributedBarrier::new(&framework, bad).expect_err(bad);
        assert!(matches!(err, BarrierError::Framework(FrameworkError::InvalidPath { .. })), "{bad}: {err:?}");
        let err = DistributedDoubleBarrier::new(&framework, bad, 2).expect_err(bad);
        assert!(matches!(err, BarrierError::Framework(FrameworkError::InvalidPath { .. })), "{bad}: {err:?}");
    }
    let err = DistributedBarrier::new(&framework, "/").expect_err("root");
    assert!(matches!(err, BarrierError::InvalidPath { .. }), "{err:?}");
    let err = DistributedDoubleBarrier::new(&framework, "/", 2).expect_err("root");
    assert!(matches!(err, BarrierError::InvalidPath { .. }), "{err:?}");
    let err = DistributedDoubleBarrier::new(&framework, "/workers", 0).expect_err("no members");
    assert!(matches!(err, BarrierError::InvalidMemberCount(0)), "{err:?}");
    assert!(!err.is_retryable());

    assert_eq!(proxy.stats().writes_to_server, before, "bad input wrote something");
    within("close", framework.close()).await;
}
