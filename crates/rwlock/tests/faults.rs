//! The read-write lock under faults, against real ZooKeeper servers.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_rwlock::{Hold, LockError, LostReason, RwLock, READ_LOCK_NAME};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, TestingServer};

#[tokio::test]
async fn an_expired_writer_lets_the_queued_readers_in() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let writer_framework =
        builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let reader_framework =
        builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let writer = within("write", RwLock::new(&writer_framework, "/expired/lock").expect("rwlock").write())
        .await
        .expect("write");
    let readers = RwLock::new(&reader_framework, "/expired/lock").expect("rwlock");
    let waiting: Vec<_> = (0..3)
        .map(|_| {
            let readers = readers.clone();
            tokio::spawn(async move { readers.read_timeout(STEP).await })
        })
        .collect();
    let negotiated = writer_framework.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    let reason = within("lost", writer.lost()).await;
    assert!(matches!(reason, LostReason::Connection(_) | LostReason::NodeDeleted), "{reason:?}");
    for reader in waiting {
        let guard = within("reader", reader).await.expect("task").expect("the readers get in");
        within("release", guard.release()).await.expect("release");
    }
    drop(writer);
    within("close", reader_framework.close()).await;
    within("close", writer_framework.close()).await;
}

#[tokio::test]
async fn a_server_restart_with_readers_and_writers_queued_keeps_exclusion() {
    init_tracing();
    let mut server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let session_timeout = Duration::from_secs(12);
    // Positive: readers inside; -1: a writer inside.
    let occupancy = Arc::new(AtomicI32::new(0));
    let violations = Arc::new(AtomicU32::new(0));
    let done = Arc::new(AtomicU32::new(0));
    let holder_framework = builder(&server.connect_string(), session_timeout).start().expect("framework");
    let holder = within("write", RwLock::new(&holder_framework, "/restart/lock").expect("rwlock").write())
        .await
        .expect("write");
    occupancy.store(-1, Ordering::SeqCst);
    let mut tasks = Vec::new();
    for index in 0..4 {
        let framework = builder(&server.connect_string(), session_timeout).start().expect("framework");
        let (occupancy, violations, done) = (occupancy.clone(), violations.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let lock = RwLock::new(&framework, "/restart/lock").expect("rwlock");
            if index % 2 == 0 {
                let guard = lock.write_timeout(Duration::from_secs(60)).await.expect("write");
                if occupancy.compare_exchange(0, -1, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                let _ = occupancy.compare_exchange(-1, 0, Ordering::SeqCst, Ordering::SeqCst);
                guard.release().await.expect("release");
            } else {
                let guard = lock.read_timeout(Duration::from_secs(60)).await.expect("read");
                if occupancy.fetch_add(1, Ordering::SeqCst) < 0 {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                occupancy.fetch_sub(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
            done.fetch_add(1, Ordering::SeqCst);
            framework.close().await;
        }));
    }
    let lock = RwLock::new(&holder_framework, "/restart/lock").expect("rwlock");
    eventually("everyone queued", || async {
        lock.participants().await.map(|participants| participants.len() == 5).unwrap_or(false)
    })
    .await;
    within("stop", server.stop()).await.expect("stop");
    within("restart", server.restart()).await.expect("restart");
    within("reconnect", holder_framework.block_until_connected(STEP)).await.expect("reconnected");
    occupancy.store(0, Ordering::SeqCst);
    within("release", holder.release()).await.expect("the writer's session survived the restart");
    for task in tasks {
        within_for(Duration::from_secs(90), "contender", task).await.expect("task");
    }
    assert_eq!(done.load(Ordering::SeqCst), 4, "everyone acquired eventually");
    assert_eq!(violations.load(Ordering::SeqCst), 0, "a writer shared the lock");
    within("close", holder_framework.close()).await;
}

/// a downgrade builds on the write hold, so it runs on the write node's session or
/// not at all. After that session expired and another writer got in, it must fail with `NodeLost`
/// and create no read node (which would sort before the new writer: a reader beside a writer).
#[tokio::test]
async fn a_downgrade_after_the_write_session_expired_fails_and_creates_no_read_node() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let first_framework =
        builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let second_framework =
        builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let path = "/downgrade-after-expiry/lock";
    let first =
        within("write", RwLock::new(&first_framework, path).expect("rwlock").write()).await.expect("write");
    let mut events = first_framework.connection_events();
    let negotiated = first_framework.current().session_timeout.expect("session");

    proxy.black_hole(negotiated * 3);
    lost_then_reconnected(&mut events).await;
    let second = within(
        "the second writer",
        RwLock::new(&second_framework, path).expect("rwlock").write_timeout(STEP),
    )
    .await
    .expect("the expired writer's node is gone, so the second writer gets in");

    let downgraded = within("downgrade", first.downgrade()).await;
    assert!(
        matches!(downgraded, Err(LockError::NodeLost { .. })),
        "a downgrade of a hold whose session is gone must fail with NodeLost: {downgraded:?}"
    );
    let nodes = children(&second_framework, path).await;
    assert!(
        nodes.iter().all(|node| !node.contains(READ_LOCK_NAME)),
        "no read node may exist beside the second writer: {nodes:?}"
    );
    within("release", second.release()).await.expect("release");
    within("close", first_framework.close()).await;
    within("close", second_framework.close()).await;
}
