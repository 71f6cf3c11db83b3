//! The single-node lock against a real ZooKeeper server: one holder, the holder reported,
//! release and drop never deleting another holder's node, a cut create found again, cancelled
//! tries leaving nothing, expiry, bad input.

use std::time::Duration;

use zk_recipes_framework::{Deadline, Error as FrameworkError, Framework};
use zk_recipes_mutex::{Hold, Holder, LockError, LostReason, SingleNodeGuard, SingleNodeLock, TryLock};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, TestingServer};

async fn server() -> TestingServer {
    within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server")
}

fn framework(connect: &str, session_timeout: Duration) -> Framework {
    builder(connect, session_timeout).start().expect("framework")
}

async fn acquire(lock: &SingleNodeLock) -> SingleNodeGuard {
    match within("try_lock", lock.try_lock()).await.expect("try_lock") {
        TryLock::Acquired(guard) => guard,
        TryLock::Held(holder) => panic!("{} is held by {holder:?}", lock.path()),
    }
}

async fn held_by(lock: &SingleNodeLock) -> Holder {
    match within("try_lock", lock.try_lock()).await.expect("try_lock") {
        TryLock::Held(holder) => holder,
        TryLock::Acquired(guard) => panic!("{} was free: {guard:?}", guard.node_path()),
    }
}

/// The lock node's data and owner, if it exists.
async fn node(framework: &Framework, path: &str) -> Option<(Vec<u8>, i64)> {
    match within("get", framework.get_data(path, step())).await {
        Ok(read) => Some((read.data, read.stat.ephemeral_owner)),
        Err(err) if err.is_no_node() => None,
        Err(err) => panic!("get {path}: {err}"),
    }
}

#[tokio::test]
async fn one_holder_at_a_time_and_the_holder_is_reported() {
    init_tracing();
    let server = server().await;
    let (a, b) = (framework(&server.connect_string(), STEP), framework(&server.connect_string(), STEP));
    let lock_a = SingleNodeLock::new(&a, "/single/job/lock").expect("lock");
    let lock_b = SingleNodeLock::new(&b, "/single/job/lock").expect("lock");
    let guard = acquire(&lock_a).await;
    assert_eq!(guard.node_path(), "/single/job/lock");
    let owner_id = guard.owner_id().to_vec();
    assert!(
        owner_id.starts_with(lock_a.owner()) && owner_id.len() == lock_a.owner().len() + 37,
        "<owner>#<uuid>"
    );
    assert_eq!(node(&b, "/single/job/lock").await, Some((owner_id.clone(), session_of(&a))));
    let holder = held_by(&lock_b).await;
    assert_eq!(holder, Holder { owner_id, session_id: session_of(&a), fencing_token: guard.fencing_token() });
    assert_eq!(holder.owner(), zk_recipes_framework::local_address());
    assert_eq!(within("holder", lock_b.holder(step())).await.expect("holder"), Some(holder));
    let again = held_by(&lock_a).await;
    assert_eq!(again.session_id, session_of(&a), "a second try of the holder's instance reports it held");

    let first_token = guard.fencing_token();
    within("release", guard.release()).await.expect("release");
    assert_eq!(node(&b, "/single/job/lock").await, None, "released: deleted");
    let guard = acquire(&lock_b).await;
    assert!(guard.fencing_token() > first_token, "the next holder's token is larger");
    within("release", guard.release()).await.expect("release");
    assert_eq!(within("holder", lock_a.holder(step())).await.expect("holder"), None);
    within("close", a.close()).await;
    within("close", b.close()).await;
}

#[tokio::test]
async fn release_and_drop_never_delete_another_holders_node() {
    init_tracing();
    let server = server().await;
    let (a, b) = (framework(&server.connect_string(), STEP), framework(&server.connect_string(), STEP));
    let lock_a = SingleNodeLock::new(&a, "/single/stolen").expect("lock");
    let lock_b = SingleNodeLock::new(&b, "/single/stolen").expect("lock");

    // Released: our node was deleted by someone else, and B took the lock meanwhile.
    let guard_a = acquire(&lock_a).await;
    within("admin delete", b.delete("/single/stolen")).await.expect("delete");
    assert_eq!(within("lost", guard_a.lost()).await, LostReason::NodeDeleted);
    let guard_b = acquire(&lock_b).await;
    match within("release", guard_a.release()).await {
        Err(LockError::NodeLost { path }) => assert_eq!(path, "/single/stolen"),
        other => panic!("expected NodeLost, got {other:?}"),
    }
    assert_eq!(
        node(&a, "/single/stolen").await,
        Some((guard_b.owner_id().to_vec(), session_of(&b))),
        "B's node stays"
    );

    // Dropped: the same, through the cleanup worker.
    let other_a = SingleNodeLock::new(&a, "/single/stolen-drop").expect("lock");
    let other_b = SingleNodeLock::new(&b, "/single/stolen-drop").expect("lock");
    let dropped = acquire(&other_a).await;
    within("admin delete", b.delete("/single/stolen-drop")).await.expect("delete");
    let kept = acquire(&other_b).await;
    drop(dropped);
    within("cleanups", a.wait_for_cleanups(step())).await.expect("cleanups");
    assert_eq!(
        node(&a, "/single/stolen-drop").await,
        Some((kept.owner_id().to_vec(), session_of(&b))),
        "B's node stays"
    );
    // A dropped guard that is still ours is released.
    drop(kept);
    within("cleanups", b.wait_for_cleanups(step())).await.expect("cleanups");
    assert_eq!(node(&a, "/single/stolen-drop").await, None);
    within("release", guard_b.release()).await.expect("release");
    within("close", a.close()).await;
    within("close", b.close()).await;
}

#[tokio::test]
async fn a_create_whose_reply_was_cut_is_found_again_not_duplicated() {
    init_tracing();
    let server = server().await;
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let cut_off = framework(&proxy.connect_string(), Duration::from_secs(8));
    let observer = framework(&server.connect_string(), STEP);
    within("parent", cut_off.ensure_path("/single/cut", step())).await.expect("parent");
    let lock = SingleNodeLock::new(&cut_off, "/single/cut/lock").expect("lock");

    let cut = proxy.cut_after_next_create();
    let guard = acquire(&lock).await;
    let cut = within("the cut", cut).await.expect("the proxy cut the create's reply");
    assert_eq!(cut.path, "/single/cut/lock");
    assert_eq!(
        node(&observer, "/single/cut/lock").await,
        Some((guard.owner_id().to_vec(), session_of(&cut_off)))
    );
    assert_eq!(children(&observer, "/single/cut").await, vec!["lock".to_owned()]);
    within("release", guard.release()).await.expect("release");
    assert_eq!(node(&observer, "/single/cut/lock").await, None);
    within("close", cut_off.close()).await;
    within("close", observer.close()).await;
}

#[tokio::test]
async fn cancelled_tries_leave_no_node() {
    init_tracing();
    let server = server().await;
    let a = framework(&server.connect_string(), STEP);
    let lock = SingleNodeLock::new(&a, "/single/cancel/lock").expect("lock");
    let mut completed = 0;
    for step in 0..40u64 {
        let delay = Duration::from_micros(step * 100);
        // Err: dropped mid-flight.
        if let Ok(tried) = tokio::time::timeout(delay, lock.try_lock()).await {
            completed += 1;
            match tried.expect("try_lock") {
                TryLock::Acquired(guard) => within("release", guard.release()).await.expect("release"),
                TryLock::Held(holder) => panic!("nobody else holds it: {holder:?}"),
            }
        }
    }
    assert!(completed < 40, "some tries must have been dropped mid-flight");
    eventually("no node left", || async { node(&a, "/single/cancel/lock").await.is_none() }).await;
    within("cleanups", a.wait_for_cleanups(step())).await.expect("cleanups");
    assert_eq!(node(&a, "/single/cancel/lock").await, None);
    within("close", a.close()).await;
}

#[tokio::test]
async fn an_expired_holder_loses_the_lock_and_its_release_reports_it() {
    init_tracing();
    let server = server().await;
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let cut_off = framework(&proxy.connect_string(), Duration::from_secs(2));
    let other = framework(&server.connect_string(), STEP);
    let lock = SingleNodeLock::new(&cut_off, "/single/expiry").expect("lock");
    let guard = acquire(&lock).await;
    let mut events = cut_off.connection_events();
    let negotiated = cut_off.current().session_timeout.expect("session");

    proxy.black_hole(negotiated * 3);
    assert!(matches!(within("lost", guard.lost()).await, LostReason::Connection(_)));
    lost_then_reconnected(&mut events).await;
    let theirs = SingleNodeLock::new(&other, "/single/expiry").expect("lock");
    let their_guard = acquire(&theirs).await;
    match within("release", guard.release()).await {
        Err(LockError::NodeLost { .. }) => {}
        other => panic!("expected NodeLost, got {other:?}"),
    }
    assert_eq!(node(&other, "/single/expiry").await.map(|(_, owner)| owner), Some(session_of(&other)));
    within("release", their_guard.release()).await.expect("release");
    within("close", cut_off.close()).await;
    within("close", other.close()).await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    init_tracing();
    let a = framework("127.0.0.1:1", STEP);
    for path in ["relative", "/trailing/", "/"] {
        let made = SingleNodeLock::new(&a, path);
        assert!(matches!(made, Err(LockError::Framework(_))), "{path}: {made:?}");
    }
    let lock = SingleNodeLock::new(&a, "/single/big").expect("lock").owned_by(vec![b'x'; 2 << 20]);
    match within("try_lock", lock.try_lock()).await {
        Err(LockError::Framework(FrameworkError::DataTooLarge { .. })) => {}
        other => panic!("expected DataTooLarge, got {other:?}"),
    }
    within("close", a.close()).await;
}

#[tokio::test]
async fn a_try_that_times_out_after_its_create_landed_leaves_no_node() {
    init_tracing();
    let server = server().await;
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let cut_off = framework(&proxy.connect_string(), Duration::from_secs(10));
    let observer = framework(&server.connect_string(), STEP);
    within("parent", cut_off.ensure_path("/single/timeout", step())).await.expect("parent");
    let lock = SingleNodeLock::new(&cut_off, "/single/timeout/lock").expect("lock");
    let session = session_of(&cut_off);
    let mut timed_out = false;
    // The create lands, its reply is cut, and the connection stays silent past the deadline. (If
    // the client gets back in before the silence starts, it finds its node: try again.)
    for _ in 0..5 {
        let cut = proxy.cut_after_next_create();
        let trying = tokio::spawn({
            let lock = lock.clone();
            async move { lock.try_lock_until(Deadline::after(Duration::from_millis(1500))).await }
        });
        within("the cut", cut).await.expect("the proxy cut the create's reply");
        proxy.black_hole(Duration::from_secs(3));
        match within("try_lock", trying).await.expect("task") {
            Err(err) if err.is_timeout() => {
                timed_out = true;
                break;
            }
            Ok(TryLock::Acquired(guard)) => within("release", guard.release()).await.expect("release"),
            other => panic!("expected a timeout or the lock, got {other:?}"),
        }
        eventually("the connection is back", || async { !proxy.is_black_holed() }).await;
    }
    assert!(timed_out, "no try timed out with its create landed");
    let (_, owner) = node(&observer, "/single/timeout/lock").await.expect("the lost reply's create landed");
    assert_eq!(owner, session, "on the session that is still alive");
    eventually("the timed-out try's node is deleted", || async {
        node(&observer, "/single/timeout/lock").await.is_none()
    })
    .await;
    assert_eq!(session_of(&cut_off), session, "the same session throughout: nothing went with an expiry");
    within("close", cut_off.close()).await;
    within("close", observer.close()).await;
}
