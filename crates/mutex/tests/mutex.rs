//! The mutex against a real ZooKeeper.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{path, Deadline, Framework};
use zk_recipes_mutex::{Hold, LockError, LostReason, Mutex, MutexGuard, TransactionOp};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, TestingServer};

#[tokio::test]
async fn contenders_on_separate_sessions_exclude_each_other() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let contenders = 4;
    let rounds = 25;
    let violations = Arc::new(AtomicU32::new(0));
    let acquisitions = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..contenders {
        let framework =
            builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
        let (violations, acquisitions) = (violations.clone(), acquisitions.clone());
        tasks.push(tokio::spawn(async move {
            let mutex = Mutex::new(&framework, "/exclusion/lock").expect("mutex");
            for _ in 0..rounds {
                let guard = mutex.lock_timeout(STEP).await.expect("lock");
                // Inside: an ephemeral marker that must never exist already.
                let session = framework.session(Deadline::after(STEP)).await.expect("session");
                let options = session.create_options(CreateMode::Ephemeral);
                match session.client().create("/exclusion/marker", b"", &options).await {
                    Ok(_) => {}
                    Err(zookeeper_client::Error::NodeExists) => {
                        violations.fetch_add(1, Ordering::SeqCst);
                    }
                    Err(err) => panic!("marker: {err}"),
                }
                tokio::time::sleep(Duration::from_millis(1)).await;
                session.client().delete("/exclusion/marker", None).await.expect("delete marker");
                acquisitions.fetch_add(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
            framework.close().await;
        }));
    }
    for task in tasks {
        within_for(Duration::from_secs(120), "contender", task).await.expect("contender task");
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0, "two holders at once");
    assert_eq!(acquisitions.load(Ordering::SeqCst), contenders * rounds);
}

#[tokio::test]
async fn a_timed_out_lock_and_a_failed_try_lock_leave_no_node() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mutex = Mutex::new(&framework, "/timeout/lock").expect("mutex");
    let holder = within("lock", mutex.lock()).await.expect("lock");

    let waiter = Mutex::new(&framework, "/timeout/lock").expect("mutex");
    let timed_out = within("lock_timeout", waiter.lock_timeout(Duration::from_millis(300))).await;
    assert!(timed_out.as_ref().is_err_and(LockError::is_timeout), "{timed_out:?}");
    let tried = within("try_lock", waiter.try_lock()).await.expect("try_lock");
    assert!(tried.is_none(), "the lock is held");

    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    let left = children(&framework, "/timeout/lock").await;
    assert_eq!(left, vec![path::name(holder.node_path()).to_string()]);
    within("release", holder.release()).await.expect("release");
    assert!(children(&framework, "/timeout/lock").await.is_empty());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn waiters_acquire_in_queue_order_with_growing_fencing_tokens() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mutex = Arc::new(Mutex::new(&framework, "/order/lock").expect("mutex"));
    let first = within("lock", mutex.lock()).await.expect("lock");
    let order = Arc::new(parking_lot_free::Order::default());
    let mut waiters = Vec::new();
    for index in 0..5usize {
        let (mutex, order) = (mutex.clone(), order.clone());
        waiters.push(tokio::spawn(async move {
            let guard = mutex.lock_timeout(STEP).await.expect("lock");
            order.push(index, guard.fencing_token());
            guard.release().await.expect("release");
        }));
        // Queue them one after another.
        let framework = framework.clone();
        eventually("the waiter queued", || {
            let framework = framework.clone();
            async move { children(&framework, "/order/lock").await.len() == index + 2 }
        })
        .await;
    }
    let first_token = first.fencing_token();
    within("release", first.release()).await.expect("release");
    for waiter in waiters {
        within("waiter", waiter).await.expect("waiter");
    }
    let (indices, tokens) = order.take();
    assert_eq!(indices, vec![0, 1, 2, 3, 4], "one waiter woken per release, in queue order");
    let mut previous = first_token;
    for token in tokens {
        assert!(token > previous, "fencing tokens grow: {token} after {previous}");
        previous = token;
    }
    within("close", framework.close()).await;
}

mod parking_lot_free {
    #[derive(Default)]
    pub struct Order(std::sync::Mutex<(Vec<usize>, Vec<i64>)>);
    impl Order {
        pub fn push(&self, index: usize, token: i64) {
            let mut order = self.0.lock().expect("not poisoned");
            order.0.push(index);
            order.1.push(token);
        }
        pub fn take(&self) -> (Vec<usize>, Vec<i64>) {
            std::mem::take(&mut *self.0.lock().expect("not poisoned"))
        }
    }
}

#[tokio::test]
async fn reentered_guards_share_one_node_until_the_last_is_released() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mutex = Mutex::new(&framework, "/reenter/lock").expect("mutex");
    let outer = within("lock", mutex.lock()).await.expect("lock");
    let inner = outer.reenter();
    assert_eq!(inner.hold_count(), 2);
    assert_eq!(inner.node_path(), outer.node_path());
    assert_eq!(children(&framework, "/reenter/lock").await.len(), 1, "reentering sends nothing");
    within("release inner", inner.release()).await.expect("release");
    assert_eq!(children(&framework, "/reenter/lock").await.len(), 1, "still held by the outer guard");
    drop(outer);
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert!(children(&framework, "/reenter/lock").await.is_empty(), "a dropped guard releases");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn node_data_defaults_to_the_host_address_and_participants_are_in_order() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mutex = Mutex::new(&framework, "/data/lock").expect("mutex");
    let holder = within("lock", mutex.lock()).await.expect("lock");
    let custom = Mutex::new(&framework, "/data/lock").expect("mutex").node_data(b"custom".to_vec());
    let waiting = tokio::spawn(async move { custom.lock_timeout(STEP).await.map(drop) });
    eventually("the second contender queued", || async {
        children(&framework, "/data/lock").await.len() == 2
    })
    .await;
    let participants = within("participants", mutex.participants()).await.expect("participants");
    assert_eq!(participants.len(), 2);
    assert_eq!(participants[0].0, holder.node_path(), "the holder comes first");
    assert_eq!(participants[0].1, zk_recipes_framework::local_address());
    assert_eq!(participants[1].1, b"custom");
    assert!(path::name(&participants[0].0).starts_with("_c_"));
    assert!(path::name(&participants[0].0).contains("-lock-"));
    within("release", holder.release()).await.expect("release");
    within("waiter", waiting).await.expect("task").expect("the waiter got the lock");
    within("close", framework.close()).await;
}

/// Polls every attempt, all on this task, until `stop` resolves; panics if one ends (the lock is
/// held elsewhere: none may). Polls the attempts before `stop`, as `tokio::time::timeout` does.
async fn drive_until<F>(attempts: &mut [Pin<Box<F>>], stop: impl Future<Output = ()>)
where
    F: Future<Output = Result<MutexGuard, LockError>>,
{
    let drive = std::future::poll_fn(|cx| {
        for attempt in attempts.iter_mut() {
            if let Poll::Ready(outcome) = attempt.as_mut().poll(cx) {
                panic!("the lock is held, yet an attempt ended: {:?}", outcome.map(drop));
            }
        }
        Poll::<()>::Pending
    });
    tokio::select! {
        biased;
        () = drive => {}
        () = stop => {}
    }
}

/// The nodes in `dir` that are not `held` (the holder's).
async fn others(framework: &Framework, dir: &str, held: &str) -> Vec<String> {
    children(framework, dir).await.into_iter().filter(|child| child != held).collect()
}

/// Waits for the cleanups and asserts that only the holder's node is left in `dir`.
async fn only_the_holder_left(framework: &Framework, dir: &str, held: &str, after: &str) {
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_eq!(children(framework, dir).await, vec![held.to_owned()], "{after}: only the holder's node");
}

/// Each attempt is dropped at another point of its way (its create's reply not read yet, while
/// it lists, while it watches); every fifth only once its node is on the server, so the sweep is
/// shown to drop attempts whose node the server has. Each must leave nothing. (An attempt dropped
/// while its create waits for a batch, never sent: the next test.)
#[tokio::test]
async fn cancelled_lock_calls_leave_no_nodes_and_no_watches() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let dir = "/sweep/lock";
    let mutex = Mutex::new(&framework, dir).expect("mutex");
    let holder = within("lock", mutex.lock()).await.expect("lock");
    let held = path::name(holder.node_path()).to_owned();
    let contender = Mutex::new(&framework, dir).expect("mutex");
    let (mut on_the_server, mut swept_on_the_server) = (0, 0);
    for step in 0..50u64 {
        let mut attempt = [Box::pin(contender.lock())];
        if step % 5 == 4 {
            let appeared = eventually("the attempt's node is on the server", || async {
                !others(&framework, dir, &held).await.is_empty()
            });
            drive_until(&mut attempt, appeared).await;
        } else {
            drive_until(&mut attempt, tokio::time::sleep(Duration::from_micros(step * 100))).await;
        }
        // Nothing else makes nodes here (the last attempt's are gone): a node besides the
        // holder's is this attempt's, on the server before the drop.
        let node = others(&framework, dir, &held).await;
        assert!(node.len() <= 1, "one attempt, one node: {node:?}");
        if !node.is_empty() {
            on_the_server += 1;
            swept_on_the_server += usize::from(step % 5 != 4);
        }
        drop(attempt);
        only_the_holder_left(&framework, dir, &held, &format!("attempt {step} (node {node:?}) dropped"))
            .await;
    }
    eprintln!("{on_the_server} of 50 attempts had their node on the server when dropped ({swept_on_the_server} swept)");
    assert!(on_the_server >= 10, "every fifth attempt was dropped with its node on the server");
    within("release", holder.release()).await.expect("release");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert!(children(&framework, dir).await.is_empty());
    eventually("no watches left on the server", || async { server.watch_count().await.expect("wchc") == 0 })
        .await;
    within("close", framework.close()).await;
}

/// As above, with several acquires of one framework queueing at once for each drop point: all
/// but the first create their node alone and wait for a shared listing round (see
/// `zk-recipes-lock-internals`), and creates beyond the first two wait for a batch (see the
/// framework's batcher); dropping them anywhere must leave nothing behind either.
#[tokio::test]
async fn cancelled_lock_calls_queueing_together_leave_no_nodes_and_no_watches() {
    const TOGETHER: usize = 8;
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let dir = "/sweep-together/lock";
    let holder = within("lock", Mutex::new(&framework, dir).expect("mutex").lock()).await.expect("lock");
    let held = path::name(holder.node_path()).to_owned();
    let (mut on_the_server, mut swept_on_the_server) = (0, 0);
    for step in 0..30u64 {
        let contenders: Vec<Mutex> =
            (0..TOGETHER).map(|_| Mutex::new(&framework, dir).expect("mutex")).collect();
        let mut attempts: Vec<_> = contenders.iter().map(|contender| Box::pin(contender.lock())).collect();
        if step % 5 == 4 {
            let appeared = eventually("every attempt's node is on the server", || async {
                others(&framework, dir, &held).await.len() == TOGETHER
            });
            drive_until(&mut attempts, appeared).await;
        } else {
            drive_until(&mut attempts, tokio::time::sleep(Duration::from_micros(step * 200))).await;
        }
        // The last round's nodes are gone: those besides the holder's are this round's.
        let nodes = others(&framework, dir, &held).await;
        assert!(nodes.len() <= TOGETHER, "one node per attempt: {nodes:?}");
        on_the_server += nodes.len();
        if step % 5 != 4 {
            swept_on_the_server += nodes.len();
        }
        drop(attempts);
        only_the_holder_left(&framework, dir, &held, &format!("round {step} ({nodes:?}) dropped")).await;
    }
    eprintln!(
        "{on_the_server} of {} attempts had their node on the server when dropped ({swept_on_the_server} swept)",
        30 * TOGETHER
    );
    assert!(on_the_server >= 6 * TOGETHER, "every fifth round was dropped with its nodes on the server");
    within("release", holder.release()).await.expect("release");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert!(children(&framework, dir).await.is_empty());
    eventually("no watches left on the server", || async { server.watch_count().await.expect("wchc") == 0 })
        .await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn an_expired_holder_loses_the_lock_to_a_waiter() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let holder_framework =
        builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let waiter_framework =
        builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let holder = within("lock", Mutex::new(&holder_framework, "/expiry/lock").expect("mutex").lock())
        .await
        .expect("lock");
    let waiter = Mutex::new(&waiter_framework, "/expiry/lock").expect("mutex");
    let got_it = Arc::new(AtomicBool::new(false));
    let waiting = {
        let got_it = got_it.clone();
        tokio::spawn(async move {
            let guard = waiter.lock_timeout(STEP).await.expect("the waiter acquires");
            got_it.store(true, Ordering::SeqCst);
            guard
        })
    };
    let negotiated = holder_framework.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    let reason = within("lost", holder.lost()).await;
    assert!(matches!(reason, LostReason::Connection(_) | LostReason::NodeDeleted), "{reason:?}");
    let guard = within("waiter", waiting).await.expect("task");
    assert!(got_it.load(Ordering::SeqCst));
    assert!(guard.fencing_token() > holder.fencing_token(), "the new holder's token is larger");
    within("release", guard.release()).await.expect("release");
    drop(holder);
    within("close", waiter_framework.close()).await;
    within("close", holder_framework.close()).await;
}

#[tokio::test]
async fn bad_input_is_refused() {
    init_tracing();
    let framework = Framework::builder("127.0.0.1:1").start().expect("framework");
    for bad in ["", "no-slash", "/a//b", "/trailing/"] {
        assert!(matches!(Mutex::new(&framework, bad), Err(LockError::Framework(_))), "{bad:?}");
    }
    framework.close().await;
    let mutex = Mutex::new(&framework, "/closed/lock").expect("mutex");
    let result = within("lock on a closed framework", mutex.lock()).await;
    assert!(matches!(result, Err(LockError::Framework(zk_recipes_framework::Error::Closed))), "{result:?}");
}

#[tokio::test]
async fn oversized_data_is_refused_before_anything_is_sent() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    let before = within("mntr", server.znode_count()).await.expect("znode count");
    let huge = vec![1u8; 2 << 20];
    let mutex = Mutex::new(&framework, "/oversized/lock").expect("mutex").node_data(huge.clone());
    let result = within("lock", mutex.lock()).await;
    assert!(
        matches!(result, Err(LockError::Framework(zk_recipes_framework::Error::DataTooLarge { .. }))),
        "{result:?}"
    );
    assert_eq!(within("mntr", server.znode_count()).await.expect("znode count"), before, "nothing created");

    // A guarded write whose data is too large is refused too, and the lock stays held.
    let mutex = Mutex::new(&framework, "/oversized/lock").expect("mutex");
    let guard = within("lock", mutex.lock()).await.expect("lock");
    let ops =
        [TransactionOp::Create { path: "/oversized/data".into(), data: huge, mode: CreateMode::Persistent }];
    let result = within("write_guarded", guard.write_guarded(&ops, Deadline::after(STEP))).await;
    assert!(
        matches!(result, Err(LockError::Framework(zk_recipes_framework::Error::DataTooLarge { .. }))),
        "{result:?}"
    );
    assert!(children(&framework, "/oversized").await.iter().all(|child| child != "data"), "nothing written");
    within("release", guard.release()).await.expect("still held, released");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_revoked_holder_is_told_and_a_revoked_waiter_gives_up_its_place() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mutex = Mutex::new(&framework, "/revoke/lock").expect("mutex").make_revocable();
    let holder = within("lock", mutex.lock()).await.expect("lock");
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let (data, _) = within("get", session.client().get_data(holder.node_path())).await.expect("node");
    assert!(data.is_empty(), "a revocable node has empty data, as in Curator");
    drop(session);

    // A waiter asked to let go gives up its place and leaves no node.
    let waiter_mutex = mutex.clone();
    let waiter = tokio::spawn(async move { waiter_mutex.lock_timeout(STEP).await });
    eventually("the waiter queued", || async { children(&framework, "/revoke/lock").await.len() == 2 }).await;
    let holder_name = path::name(holder.node_path()).to_string();
    let waiting_node = children(&framework, "/revoke/lock")
        .await
        .into_iter()
        .find(|name| *name != holder_name)
        .expect("the waiter's node");
    let waiting_path = format!("/revoke/lock/{waiting_node}");
    within(
        "revoke waiter",
        zk_recipes_lock_internals::revoke(&framework, &waiting_path, Deadline::after(STEP)),
    )
    .await
    .expect("revoke");
    let result = within("waiter", waiter).await.expect("task");
    assert!(matches!(result, Err(LockError::Revoked { .. })), "{result:?}");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_eq!(children(&framework, "/revoke/lock").await.len(), 1, "the revoked waiter's node is gone");

    // A holder hears the request and decides to release.
    let asked = tokio::time::timeout(Duration::from_millis(200), holder.revocation_requested()).await;
    assert!(asked.is_err(), "nobody asked yet");
    let path = holder.node_path().to_string();
    within("revoke holder", zk_recipes_lock_internals::revoke(&framework, &path, Deadline::after(STEP)))
        .await
        .expect("revoke");
    within("revocation heard", holder.revocation_requested()).await.expect("asked to let go");
    within("release", holder.release()).await.expect("release");
    assert!(children(&framework, "/revoke/lock").await.is_empty());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn guarded_writes_commit_only_while_our_lock_node_exists() {
    use zk_recipes_mutex::TransactionOp;
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let options = session.create_options(CreateMode::Persistent);
    within("create", session.client().create("/guarded-data", b"v0", &options)).await.expect("data node");

    let mutex = Mutex::new(&framework, "/guarded/lock").expect("mutex");
    let guard = within("lock", mutex.lock()).await.expect("lock");
    let write = |value: &str| TransactionOp::SetData {
        path: "/guarded-data".into(),
        data: value.into(),
        version: None,
    };
    within("guarded write", guard.write_guarded(&[write("v1")], Deadline::after(STEP)))
        .await
        .expect("committed while we hold the lock");
    let failing = [write("v1b"), TransactionOp::Delete { path: "/no/such/node".into(), version: None }];
    let result = within("failing write", guard.write_guarded(&failing, Deadline::after(STEP))).await;
    assert!(matches!(result, Err(LockError::GuardedWriteFailed { index: 1, .. })), "{result:?}");

    // Our lock node goes (an operator, or our session's expiry): a late write must not land.
    within("delete lock node", session.client().delete(guard.node_path(), None)).await.expect("delete");
    let result = within("stale write", guard.write_guarded(&[write("v2")], Deadline::after(STEP))).await;
    assert!(matches!(result, Err(LockError::NodeLost { .. })), "{result:?}");
    let (data, _) = within("get", session.client().get_data("/guarded-data")).await.expect("data");
    assert_eq!(data, b"v1", "neither the failed nor the stale write changed anything");
    drop(session);
    drop(guard);
    within("close", framework.close()).await;
}
