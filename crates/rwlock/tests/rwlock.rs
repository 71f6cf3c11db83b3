//! The read-write lock against a real ZooKeeper.

mod common;

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use zk_recipes_framework::{path, Deadline};
use zk_recipes_rwlock::{LockError, RwLock, READ_LOCK_NAME, WRITE_LOCK_NAME};
use zk_recipes_testing::TestingServer;

#[tokio::test]
async fn readers_share_and_writers_exclude_across_sessions() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    // Positive: readers inside; -1: a writer inside.
    let occupancy = Arc::new(AtomicI32::new(0));
    let violations = Arc::new(AtomicU32::new(0));
    let most_readers = Arc::new(AtomicI32::new(0));
    let mut tasks = Vec::new();
    for contender in 0..4 {
        let framework =
            builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
        let (occupancy, violations, most_readers) =
            (occupancy.clone(), violations.clone(), most_readers.clone());
        tasks.push(tokio::spawn(async move {
            let lock = RwLock::new(&framework, "/shared/lock").expect("rwlock");
            for round in 0..15 {
                if (contender + round) % 4 == 0 {
                    let guard = lock.write_timeout(STEP).await.expect("write");
                    if occupancy.compare_exchange(0, -1, Ordering::SeqCst, Ordering::SeqCst).is_err() {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    let _ = occupancy.compare_exchange(-1, 0, Ordering::SeqCst, Ordering::SeqCst);
                    guard.release().await.expect("release");
                } else {
                    let guard = lock.read_timeout(STEP).await.expect("read");
                    let before = occupancy.fetch_add(1, Ordering::SeqCst);
                    if before < 0 {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    most_readers.fetch_max(before + 1, Ordering::SeqCst);
                    tokio::time::sleep(Duration::from_millis(6)).await;
                    occupancy.fetch_sub(1, Ordering::SeqCst);
                    guard.release().await.expect("release");
                }
            }
            framework.close().await;
        }));
    }
    for task in tasks {
        within_for(Duration::from_secs(120), "contender", task).await.expect("task");
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0, "a writer shared the lock");
    assert!(most_readers.load(Ordering::SeqCst) >= 2, "readers held together at least once");
}

#[tokio::test]
async fn a_later_reader_never_overtakes_a_waiting_writer() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let lock = RwLock::new(&framework, "/fair/lock").expect("rwlock");
    let first_reader = within("read", lock.read()).await.expect("read");
    let writer_lock = lock.clone();
    let writer = tokio::spawn(async move { writer_lock.write_timeout(STEP).await });
    eventually("the writer queued", || async { children(&framework, "/fair/lock").await.len() == 2 }).await;

    assert!(within("try_read", lock.try_read()).await.expect("try").is_none(), "the reader would overtake");
    let late = within("read_timeout", lock.read_timeout(Duration::from_millis(300))).await;
    assert!(late.as_ref().is_err_and(LockError::is_timeout), "{late:?}");
    let late = within("read_until", lock.read_until(Duration::from_millis(300))).await;
    assert!(late.as_ref().is_err_and(LockError::is_timeout), "{late:?}");
    let late = within("write_until", lock.write_until(Deadline::after(Duration::from_millis(300)))).await;
    assert!(late.as_ref().is_err_and(LockError::is_timeout), "{late:?}");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_eq!(children(&framework, "/fair/lock").await.len(), 2, "the timed-out waits left no node");

    within("release", first_reader.release()).await.expect("release");
    let writer = within("writer", writer).await.expect("task").expect("the writer acquires");
    within("release", writer.release()).await.expect("release");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert!(children(&framework, "/fair/lock").await.is_empty());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_downgrade_keeps_queued_writers_out_until_the_read_is_released() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let lock = RwLock::new(&framework, "/downgrade/lock").expect("rwlock");
    let writer = within("write", lock.write()).await.expect("write");
    let write_name = path::name(writer.node_path()).to_string();
    let write_token = writer.fencing_token();

    let queued = RwLock::new(&other, "/downgrade/lock").expect("rwlock");
    let queued_writer = tokio::spawn(async move { queued.write_timeout(STEP).await });
    eventually("the second writer queued", || async {
        children(&framework, "/downgrade/lock").await.len() == 2
    })
    .await;

    let reader = within("downgrade", writer.downgrade()).await.expect("downgrade");
    let read_name = path::name(reader.node_path()).to_string();
    assert!(path::is_protected(&read_name));
    let write_sequence = write_name.rsplit(WRITE_LOCK_NAME).next().expect("sequence");
    assert_eq!(
        path::strip_protected(&read_name),
        format!("{READ_LOCK_NAME}{write_sequence}"),
        "the read node reuses the writer's sequence (Curator 5.5+)"
    );
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let (_, stat) = within("stat", session.client().get_data(reader.node_path())).await.expect("read node");
    assert!(session.owns(stat.ephemeral_owner), "EPHEMERAL, ours");
    drop(session);
    assert_eq!(reader.fencing_token(), write_token, "the downgraded read keeps the writer's token");
    let nodes = children(&framework, "/downgrade/lock").await;
    assert!(!nodes.contains(&write_name), "the write node is gone after the downgrade");

    // The queued writer stays out while the downgraded read is held.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!queued_writer.is_finished(), "a writer slipped in after the downgrade");
    within("release read", reader.release()).await.expect("release");
    let second =
        within("queued writer", queued_writer).await.expect("task").expect("acquires after the read");
    assert!(second.fencing_token() > write_token);
    within("release", second.release()).await.expect("release");
    within("close", framework.close()).await;
    within("close", other.close()).await;
}

#[tokio::test]
async fn readers_behind_one_writer_all_wake_on_its_release() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let lock = RwLock::new(&framework, "/wake/lock").expect("rwlock");
    let writer = within("write", lock.write()).await.expect("write");
    let holding = Arc::new(AtomicU32::new(0));
    let (release_all, _) = tokio::sync::broadcast::channel::<()>(1);
    let mut readers = Vec::new();
    for _ in 0..10 {
        let (lock, holding, mut release) = (lock.clone(), holding.clone(), release_all.subscribe());
        readers.push(tokio::spawn(async move {
            let guard = lock.read_timeout(STEP).await.expect("read");
            holding.fetch_add(1, Ordering::SeqCst);
            let _ = release.recv().await;
            guard.release().await.expect("release");
        }));
    }
    eventually("the readers queued", || async { children(&framework, "/wake/lock").await.len() == 11 }).await;
    assert_eq!(holding.load(Ordering::SeqCst), 0);
    within("release writer", writer.release()).await.expect("release");
    eventually("every reader holds at once", || async { holding.load(Ordering::SeqCst) == 10 }).await;
    release_all.send(()).expect("readers listening");
    for reader in readers {
        within("reader", reader).await.expect("task");
    }
    within("close", framework.close()).await;
}

#[tokio::test]
async fn upgrade_is_refused_and_cancelled_calls_leave_nothing() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let lock = RwLock::new(&framework, "/sweep/lock").expect("rwlock");
    let reader = within("read", lock.read()).await.expect("read");
    let refused = reader.upgrade().expect_err("upgrade is refused");
    let reader = refused.guard;
    for step in 0..30u64 {
        let attempt = tokio::time::timeout(Duration::from_micros(step * 150), lock.write());
        assert!(attempt.await.is_err(), "the write lock is not free while we read");
    }
    within("release", reader.release()).await.expect("release");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert!(children(&framework, "/sweep/lock").await.is_empty());
    eventually("no watches left", || async { server.watch_count().await.expect("wchc") == 0 }).await;
    within("close", framework.close()).await;
}
