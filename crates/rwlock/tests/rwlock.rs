//! The read-write lock against a real ZooKeeper.

use std::sync::atomic::{AtomicI32, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{path, Deadline, Error as FrameworkError};
use zk_recipes_rwlock::{Hold, LockError, RwLock, TransactionOp, READ_LOCK_NAME, WRITE_LOCK_NAME};
use zk_recipes_test_support::*;
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

    // The queued writer stays out while the downgraded read is held: it saw the write node go,
    // and waits on the read node that took its place.
    let other_session = format!("{:#x}", other.current().session_id.expect("a session").0);
    eventually("the queued writer watches the read node", || async {
        let watches = within("wchc", server.watches()).await.expect("wchc");
        watches
            .get(&other_session)
            .is_some_and(|paths| paths.iter().any(|watched| watched == reader.node_path()))
    })
    .await;
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

/// Each write attempt is dropped at another point of its way (its create's reply not read yet,
/// while it lists, while it watches); every fifth only once its node is on the server, so the
/// sweep is shown to drop attempts whose node the server has. Each must leave nothing.
#[tokio::test]
async fn upgrade_is_refused_and_cancelled_calls_leave_nothing() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let dir = "/sweep/lock";
    let lock = RwLock::new(&framework, dir).expect("rwlock");
    let reader = within("read", lock.read()).await.expect("read");
    let refused = reader.upgrade().expect_err("upgrade is refused");
    let reader = refused.guard;
    let held = path::name(reader.node_path()).to_owned();
    let others = || async {
        children(&framework, dir).await.into_iter().filter(|child| *child != held).collect::<Vec<_>>()
    };
    let (mut on_the_server, mut swept_on_the_server) = (0, 0);
    for step in 0..30u64 {
        let mut attempt = Box::pin(lock.write());
        let drop_point = async {
            if step % 5 == 4 {
                eventually("the write attempt's node is on the server", || async {
                    !others().await.is_empty()
                })
                .await;
            } else {
                tokio::time::sleep(Duration::from_micros(step * 150)).await;
            }
        };
        tokio::select! {
            biased;
            outcome = &mut attempt => {
                panic!("the write lock is not free while we read, yet an attempt ended: {:?}", outcome.map(drop))
            }
            () = drop_point => {}
        }
        // Nothing else makes nodes here (the last attempt's are gone): a node besides the
        // reader's is this attempt's, on the server before the drop.
        let node = others().await;
        assert!(node.len() <= 1, "one attempt, one node: {node:?}");
        if !node.is_empty() {
            on_the_server += 1;
            swept_on_the_server += usize::from(step % 5 != 4);
        }
        drop(attempt);
        within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
        assert_eq!(
            children(&framework, dir).await,
            vec![held.clone()],
            "attempt {step} (node {node:?}) dropped"
        );
    }
    eprintln!("{on_the_server} of 30 attempts had their node on the server when dropped ({swept_on_the_server} swept)");
    assert!(on_the_server >= 6, "every fifth attempt was dropped with its node on the server");
    within("release", reader.release()).await.expect("release");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert!(children(&framework, dir).await.is_empty());
    eventually("no watches left", || async { server.watch_count().await.expect("wchc") == 0 }).await;
    within("close", framework.close()).await;
}

/// Bad input fails with a typed error and writes nothing: invalid paths (in both node layouts)
/// before anything is sent, node data too large for one request (reads, writes, tries, a guarded
/// write), a closed framework.
#[tokio::test]
async fn bad_input_fails_with_a_typed_error_and_writes_nothing() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    let nothing_at = |path: &'static str| {
        let framework = &framework;
        async move {
            let stat = within("exists", framework.exists(path, Deadline::after(STEP))).await.expect("exists");
            assert!(stat.is_none(), "nothing was written at {path}: {stat:?}");
        }
    };
    let znodes = within("znodes", server.znode_count()).await.expect("znode count");

    let bad_paths = [
        ("", "empty"),
        ("no-slash", "not absolute"),
        ("/trailing/", "a trailing slash"),
        ("/bad-input//lock", "an empty name"),
        ("/bad-input/../lock", "a relative name"),
        ("/bad-input/\u{1}lock", "a control character"),
    ];
    for (bad, why) in bad_paths {
        for (layout, made) in
            [("curator", RwLock::new(&framework, bad)), ("kazoo", RwLock::kazoo(&framework, bad))]
        {
            let err = made.expect_err(why);
            assert!(
                matches!(&err, LockError::Framework(FrameworkError::InvalidPath { path, .. }) if path == bad),
                "{layout} layout, {why}: {err:?}"
            );
        }
    }
    nothing_at("/trailing").await;
    nothing_at("/bad-input").await;

    let huge = vec![1u8; 2 << 20];
    let too_large = |result: Result<(), LockError>| {
        matches!(result, Err(LockError::Framework(FrameworkError::DataTooLarge { .. })))
    };
    let oversized = RwLock::new(&framework, "/bad-input/oversized").expect("rwlock").node_data(huge.clone());
    let read = within("read", oversized.read()).await.map(drop);
    assert!(too_large(read.clone()), "read: {read:?}");
    let write = within("write", oversized.write()).await.map(drop);
    assert!(too_large(write.clone()), "write: {write:?}");
    let read = within("read_timeout", oversized.read_timeout(STEP)).await.map(drop);
    assert!(too_large(read.clone()), "read_timeout: {read:?}");
    let tried = within("try_read", oversized.try_read()).await.map(drop);
    assert!(too_large(tried.clone()), "try_read: {tried:?}");
    let tried = within("try_write", oversized.try_write()).await.map(drop);
    assert!(too_large(tried.clone()), "try_write: {tried:?}");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    nothing_at("/bad-input/oversized").await;
    nothing_at("/bad-input").await;
    assert_eq!(within("znodes", server.znode_count()).await.expect("znode count"), znodes, "nothing created");

    // A guarded write whose data is too large is refused, and the write lock stays held.
    let lock = RwLock::new(&framework, "/bad-input/guarded").expect("rwlock");
    let writer = within("write", lock.write()).await.expect("write");
    let ops =
        [TransactionOp::Create { path: "/bad-input/data".into(), data: huge, mode: CreateMode::Persistent }];
    let written = within("write_guarded", writer.write_guarded(&ops, Deadline::after(STEP))).await.map(drop);
    assert!(too_large(written.clone()), "write_guarded: {written:?}");
    nothing_at("/bad-input/data").await;
    within("release", writer.release()).await.expect("still held, released");

    // A closed framework: a typed error, and nothing sent.
    within("close", framework.close()).await;
    let closed = RwLock::new(&framework, "/bad-input/closed").expect("rwlock");
    let read = within("read on a closed framework", closed.read()).await.map(drop);
    assert!(matches!(&read, Err(LockError::Framework(FrameworkError::Closed))), "{read:?}");
    let write = within("write on a closed framework", closed.write()).await.map(drop);
    assert!(matches!(&write, Err(err) if err.is_closed()), "{write:?}");
    let observer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let stat =
        within("exists", observer.exists("/bad-input/closed", Deadline::after(STEP))).await.expect("exists");
    assert!(stat.is_none(), "nothing was written at /bad-input/closed: {stat:?}");
    within("close", observer.close()).await;
}
