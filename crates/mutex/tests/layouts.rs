//! The mutex on the other lock layouts (ZooKeeper's own recipe, kazoo's) and the eager-enqueue
//! API, against a real ZooKeeper.

use std::future::IntoFuture;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::{path, Deadline, Framework};
use zk_recipes_mutex::{Hold, LockError, LockLayout, Mutex};
use zk_recipes_test_support::*;
use zk_recipes_testing::{TestingServer, SERVER_START};

async fn session_id(framework: &Framework) -> i64 {
    within("session", framework.session(step())).await.expect("session").id().0
}

/// The node's data and ephemeral owner, read on `framework`'s session.
async fn data_and_owner(framework: &Framework, node_path: &str) -> (Vec<u8>, i64) {
    let session = within("session", framework.session(step())).await.expect("session");
    let (data, stat) = within("get", session.client().get_data(node_path)).await.expect("get");
    (data, stat.ephemeral_owner)
}

#[tokio::test]
async fn golden_node_names_data_and_modes_of_the_three_layouts() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let session = session_id(&framework).await;

    let recipe =
        Mutex::with_layout(&framework, "/golden/recipe", LockLayout::ZooKeeperRecipe).expect("mutex");
    let guard = within("lock", recipe.lock()).await.expect("lock");
    assert_eq!(guard.node_path(), format!("/golden/recipe/x-{session}-0000000000"));
    assert_eq!(data_and_owner(&framework, guard.node_path()).await, (vec![0x12, 0x34], session));
    within("release", guard.release()).await.expect("release");

    let kazoo = Mutex::with_layout(&framework, "/golden/kazoo", LockLayout::Kazoo)
        .expect("mutex")
        .node_data("rust-1");
    let guard = within("lock", kazoo.lock()).await.expect("lock");
    let name = path::name(guard.node_path());
    let (uuid_hex, sequence) = name.split_once("__lock__").expect("kazoo node name");
    assert_eq!(uuid_hex.len(), 32, "{name}");
    assert!(uuid_hex.bytes().all(|byte| matches!(byte, b'0'..=b'9' | b'a'..=b'f')), "{name}");
    assert_eq!(sequence, "0000000000");
    assert_eq!(data_and_owner(&framework, guard.node_path()).await, (b"rust-1".to_vec(), session));
    within("release", guard.release()).await.expect("release");

    // Curator's layout is unchanged: `_c_<hyphenated uuid>-lock-<seq>`.
    let curator = Mutex::with_layout(&framework, "/golden/curator", LockLayout::Curator)
        .expect("mutex")
        .node_data("10.0.0.7");
    let guard = within("lock", curator.lock()).await.expect("lock");
    let name = path::name(guard.node_path()).to_owned();
    assert_eq!(name.len(), 3 + 36 + 1 + "lock-".len() + 10, "{name}");
    assert!(name.starts_with("_c_") && name.ends_with("-lock-0000000000"), "{name}");
    assert_eq!(data_and_owner(&framework, guard.node_path()).await, (b"10.0.0.7".to_vec(), session));
    within("release", guard.release()).await.expect("release");
    within("close", framework.close()).await;
    drop(server);
}

/// ZOOKEEPER-2931: the original recipe ordered `x-<session id>-<seq>` by the text before the
/// sequence first, so a newcomer whose session id sorts lower took the lock beside its holder.
#[tokio::test]
async fn zookeeper_2931_a_newcomer_with_a_lower_session_id_waits_behind_the_holder() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let connect = server.connect_string();
    let first = builder(&connect, Duration::from_secs(10)).start().expect("framework");
    let second = builder(&connect, Duration::from_secs(10)).start().expect("framework");
    // The holder is the session whose `x-<id>` prefix sorts higher as text.
    let (holder, newcomer) =
        if format!("x-{}", session_id(&first).await) > format!("x-{}", session_id(&second).await) {
            (first, second)
        } else {
            (second, first)
        };
    let lock_path = "/zk2931/lock";
    let held = Mutex::with_layout(&holder, lock_path, LockLayout::ZooKeeperRecipe)
        .expect("mutex")
        .lock_timeout(STEP)
        .await
        .expect("holder locks");
    let pending = within(
        "enqueue",
        Mutex::with_layout(&newcomer, lock_path, LockLayout::ZooKeeperRecipe).expect("mutex").enqueue(),
    )
    .await
    .expect("newcomer enqueues");
    // The scenario is the defect's: by the original's prefix-first order the newcomer sorts first.
    let prefix =
        |name: &str| name.rsplit_once('-').map(|(prefix, _)| prefix.to_owned()).expect("x-<id>-<seq>");
    assert!(
        prefix(path::name(pending.node_path())) < prefix(path::name(held.node_path())),
        "{} vs {}",
        pending.node_path(),
        held.node_path()
    );
    assert!(!pending.is_owner(), "the newcomer jumped ahead of the holder");
    assert_eq!(pending.position(), 1);
    let waiting = tokio::spawn(pending.acquired(Deadline::after(STEP)));
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!waiting.is_finished(), "the newcomer acquired while the holder held");
    within("release", held.release()).await.expect("release");
    let guard = within("newcomer acquires", waiting).await.expect("task").expect("acquired");
    within("release", guard.release()).await.expect("release");
    within("close", holder.close()).await;
    within("close", newcomer.close()).await;
}

/// The lost wake-up of ZooKeeper's recipe: the predecessor is deleted between the listing and the
/// watch (`exists` answers null), and the original then waits for a notification that never comes.
/// Ours lists again and waits on the node now before it.
#[tokio::test]
async fn a_predecessor_deleted_between_listing_and_watch_does_not_lose_the_wake_up() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let connect = server.connect_string();
    let lock_path = "/lost-wake-up/lock";
    let start = || builder(&connect, Duration::from_secs(10)).start().expect("framework");
    let (holder_framework, middle_framework, waiter_framework) = (start(), start(), start());

    let holder =
        Mutex::with_layout(&holder_framework, lock_path, LockLayout::ZooKeeperRecipe).expect("mutex");
    let held = within("holder locks", holder.lock()).await.expect("lock");
    let middle =
        Mutex::with_layout(&middle_framework, lock_path, LockLayout::ZooKeeperRecipe).expect("mutex");
    let middle_pending = within("middle enqueues", middle.enqueue()).await.expect("enqueue");
    assert_eq!(middle_pending.position(), 1);
    let middle_path = middle_pending.node_path().to_owned();

    // In the window: the middle node (the waiter's predecessor) is deleted by its own session.
    let fired = Arc::new(AtomicBool::new(false));
    let hook = {
        let (fired, middle_framework, middle_path) =
            (fired.clone(), middle_framework.clone(), middle_path.clone());
        Arc::new(move |watched: String| {
            let (fired, middle_framework, middle_path) =
                (fired.clone(), middle_framework.clone(), middle_path.clone());
            Box::pin(async move {
                if watched == path::name(&middle_path) && !fired.swap(true, Ordering::SeqCst) {
                    let session = middle_framework.session(step()).await.expect("session");
                    session.client().delete(&middle_path, None).await.expect("delete the predecessor");
                }
            }) as zk_recipes_lock_internals::futures_compat::BoxFuture<'static, ()>
        })
    };
    let waiter = Mutex::with_layout(&waiter_framework, lock_path, LockLayout::ZooKeeperRecipe)
        .expect("mutex")
        .before_watch_hook(hook);
    let waiting = tokio::spawn(async move { waiter.lock_timeout(STEP).await });
    eventually("the predecessor was deleted in the window", || async { fired.load(Ordering::SeqCst) }).await;
    drop(middle_pending);
    assert!(!waiting.is_finished(), "the waiter acquired while the holder held");
    within("release", held.release()).await.expect("release");
    let guard = within("waiter acquires", waiting).await.expect("task").expect("the waiter acquires");
    within("release", guard.release()).await.expect("release");
    for framework in [holder_framework, middle_framework, waiter_framework] {
        within("close", framework.close()).await;
    }
}

#[tokio::test]
async fn enqueue_reports_the_place_and_a_dropped_or_timed_out_pending_lock_leaves_no_node() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    for (layout, lock_path) in [
        (LockLayout::Curator, "/enqueue/curator"),
        (LockLayout::Kazoo, "/enqueue/kazoo"),
        (LockLayout::ZooKeeperRecipe, "/enqueue/recipe"),
    ] {
        // The recipe's layout keeps one node per session: the waiters get sessions of their own.
        let waiter_framework =
            builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
        let mutex = Mutex::with_layout(&framework, lock_path, layout).expect("mutex");
        let first = within("enqueue", mutex.enqueue()).await.expect("enqueue");
        assert!(first.is_owner(), "{layout:?}");
        assert_eq!(first.position(), 0);
        let held = within("owner's guard", first.acquired(step())).await.expect("acquired");

        let waiter = Mutex::with_layout(&waiter_framework, lock_path, layout).expect("mutex");
        let second = within("enqueue", waiter.enqueue()).await.expect("enqueue");
        assert!(!second.is_owner(), "{layout:?}");
        assert_eq!(second.position(), 1);
        drop(second);
        within("cleanups", waiter_framework.wait_for_cleanups(step())).await.expect("cleanups");
        assert_eq!(children(&framework, lock_path).await, vec![path::name(held.node_path()).to_owned()]);

        let third = within("enqueue", waiter.enqueue()).await.expect("enqueue");
        let timed_out = within("acquired", third.acquired(Deadline::after(Duration::from_millis(300)))).await;
        assert!(timed_out.as_ref().is_err_and(LockError::is_timeout), "{timed_out:?}");
        within("cleanups", waiter_framework.wait_for_cleanups(step())).await.expect("cleanups");
        assert_eq!(children(&framework, lock_path).await, vec![path::name(held.node_path()).to_owned()]);

        let fourth = within("enqueue", waiter.enqueue()).await.expect("enqueue");
        let waiting = tokio::spawn(fourth.into_future());
        within("release", held.release()).await.expect("release");
        let guard = within("awaited", waiting).await.expect("task").expect("acquired");
        within("release", guard.release()).await.expect("release");
        within("close", waiter_framework.close()).await;
    }
    within("close", framework.close()).await;
}

/// an acquire that gives up while its create is in flight hands the unknown create to
/// the cleanup worker; a second acquire on the same session then takes the lock. The cleanup must
/// delete the node of the create that gave up, never the holder's: in ZooKeeper's recipe layout
/// both names start with `x-<session id>-`, so a cleanup by that prefix deleted the holder's node,
/// and a second framework took the lock beside the holder.
#[tokio::test]
async fn a_given_up_create_is_cleaned_up_without_touching_the_next_holder_in_every_layout() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    for layout in [LockLayout::ZooKeeperRecipe, LockLayout::Curator, LockLayout::Kazoo] {
        let mut gave_up_in_flight = 0;
        for iteration in 0..20 {
            let lock_path = format!("/gave-up/{layout:?}/{iteration}");
            let mutex = Mutex::with_layout(&framework, &lock_path, layout).expect("mutex");
            // Short enough to give up with the create on the wire (most iterations).
            match within("short lock", mutex.lock_timeout(Duration::from_micros(300))).await {
                Err(err) if err.is_timeout() => gave_up_in_flight += 1,
                Ok(guard) => within("release", guard.release()).await.expect("release"),
                Err(err) => panic!("{layout:?}: {err}"),
            }
            let guard = within("lock", mutex.lock_timeout(STEP)).await.expect("the second acquire");
            within("cleanups", framework.wait_for_cleanups(step())).await.expect("cleanups");
            let holder = path::name(guard.node_path()).to_owned();
            let listed = children(&framework, &lock_path).await;
            assert_eq!(
                listed,
                vec![holder.clone()],
                "{layout:?} iteration {iteration}: the holder's node only"
            );
            let rival = Mutex::with_layout(&other, &lock_path, layout).expect("mutex");
            let taken = within("try_lock", rival.try_lock()).await.expect("try_lock");
            assert!(taken.is_none(), "{layout:?} iteration {iteration}: a second holder beside {holder}");
            within("release", guard.release()).await.expect("release");
        }
        assert!(gave_up_in_flight > 0, "{layout:?}: no acquire gave up with its create in flight");
    }
    within("close", other.close()).await;
    within("close", framework.close()).await;
}

/// after a create's reply is lost, the create looks for its node among the session's.
/// In ZooKeeper's recipe layout every node of the session carries the same `x-<session id>-`, so
/// the search took the node of another hold of the same session (here a held guard's) for its
/// own, and acquired beside it. The search must find only the node its own create made.
#[tokio::test]
async fn a_create_whose_reply_was_cut_never_adopts_another_node_of_its_session() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy =
        within("proxy", zk_recipes_testing::FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(10)).start().expect("framework");
    for iteration in 0..10 {
        let lock_path = format!("/cut-adopt/{iteration}");
        let first = Mutex::with_layout(&framework, &lock_path, LockLayout::ZooKeeperRecipe).expect("mutex");
        let held = within("lock", first.lock()).await.expect("the first hold");
        let second = Mutex::with_layout(&framework, &lock_path, LockLayout::ZooKeeperRecipe).expect("mutex");
        let cut = proxy.cut_after_next_create();
        let mut waiting = tokio::spawn(async move { second.lock_timeout(STEP).await });
        let cut = within("the cut", cut).await.expect("the proxy cut the create's reply");
        assert!(cut.path.starts_with(&format!("{lock_path}/x-")), "{cut:?}");
        // Once the search after the reconnection is done, an acquire that adopted the held node
        // would hold at once; one that found its own node waits behind the holder.
        let early = tokio::time::timeout(Duration::from_secs(2), &mut waiting).await;
        assert!(early.is_err(), "iteration {iteration}: acquired beside {}: {early:?}", held.node_path());
        let held_name = path::name(held.node_path()).to_owned();
        within("release", held.release()).await.expect("release");
        let guard = within("second acquires", waiting).await.expect("task").expect("the second hold");
        assert_ne!(path::name(guard.node_path()), held_name, "iteration {iteration}: adopted the held node");
        within("cleanups", framework.wait_for_cleanups(step())).await.expect("cleanups");
        assert_eq!(children(&framework, &lock_path).await, vec![path::name(guard.node_path()).to_owned()]);
        within("release", guard.release()).await.expect("release");
    }
    within("close", framework.close()).await;
}
