//! The semaphore and semaphore mutex against a real ZooKeeper.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::{path, Deadline};
use zk_recipes_semaphore::{Hold, LockError, Semaphore, SemaphoreError, SemaphoreMutex};
use zk_recipes_test_support::*;
use zk_recipes_testing::TestingServer;

#[tokio::test]
async fn never_more_holders_than_leases() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let max_leases = 3;
    let inside = Arc::new(AtomicU32::new(0));
    let most_inside = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let framework =
            builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
        let (inside, most_inside) = (inside.clone(), most_inside.clone());
        tasks.push(tokio::spawn(async move {
            let semaphore = Semaphore::new(&framework, "/bounded", max_leases).expect("semaphore");
            for _ in 0..10 {
                let lease = within("acquire", semaphore.acquire_timeout(STEP)).await.expect("lease");
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most_inside.fetch_max(now, Ordering::SeqCst);
                tokio::time::sleep(Duration::from_millis(5)).await;
                inside.fetch_sub(1, Ordering::SeqCst);
                within("release", lease.release()).await.expect("release");
            }
            within("close", framework.close()).await;
        }));
    }
    for task in tasks {
        within_for(Duration::from_secs(120), "holder", task).await.expect("task");
    }
    let most = most_inside.load(Ordering::SeqCst);
    assert!(most <= max_leases, "{most} holders at once with {max_leases} leases");
    // Up to `max_leases` hold at once: as many sessions each take a lease and keep it, and all
    // get theirs while the others hold. (How many overlapped in the loop above depends on the
    // machine's load, so it is not asserted.)
    let mut held = Vec::new();
    for _ in 0..max_leases {
        let framework =
            builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
        let semaphore = Semaphore::new(&framework, "/bounded", max_leases).expect("semaphore");
        let lease =
            within("a lease while the others hold", semaphore.acquire_timeout(STEP)).await.expect("lease");
        held.push((framework, lease));
    }
    for (framework, lease) in held {
        within("release", lease.release()).await.expect("release");
        within("close", framework.close()).await;
    }
}

#[tokio::test]
async fn acquire_many_is_all_or_nothing_and_callers_do_not_starve() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let semaphore = Semaphore::new(&framework, "/many", 4).expect("semaphore");
    let inside = Arc::new(AtomicU32::new(0));
    let mut tasks = Vec::new();
    for _ in 0..2 {
        let (semaphore, inside) = (semaphore.clone(), inside.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..5 {
                let leases =
                    within("acquire_many_until", semaphore.acquire_many_until(3, Deadline::after(STEP)))
                        .await
                        .expect("3 leases");
                assert_eq!(leases.len(), 3);
                assert_eq!(inside.fetch_add(3, Ordering::SeqCst), 0, "two callers held 3 of 4 leases each");
                tokio::time::sleep(Duration::from_millis(2)).await;
                inside.fetch_sub(3, Ordering::SeqCst);
                for lease in leases {
                    within("release", lease.release()).await.expect("release");
                }
            }
        }));
    }
    for task in tasks {
        within_for(Duration::from_secs(60), "acquire_many caller", task).await.expect("task");
    }
    assert!(children(&framework, "/many/leases").await.is_empty());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn wire_layout_matches_curators_semaphore_v2() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let semaphore = Semaphore::new(&framework, "/layout", 2).expect("semaphore");
    let lease = within("acquire", semaphore.acquire()).await.expect("lease");
    let name = path::name(lease.node_path()).to_string();
    assert_eq!(path::parent(lease.node_path()), Some("/layout/leases"));
    assert!(path::is_protected(&name) && path::strip_protected(&name).starts_with("lease-"), "{name}");
    assert!(path::sequence_after(&name, "lease-").is_some());
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let (data, stat) = within("get", session.client().get_data(lease.node_path())).await.expect("lease node");
    assert_eq!(data, zk_recipes_framework::local_address(), "lease data defaults to the host address");
    assert!(session.owns(stat.ephemeral_owner));
    assert!(
        within("stat", session.client().check_stat("/layout/locks")).await.expect("stat").is_some(),
        "the internal lock's directory exists"
    );
    drop(session);
    assert!(
        children(&framework, "/layout/locks").await.is_empty(),
        "the internal lock is released once held"
    );
    assert_eq!(
        within("participant_nodes", semaphore.participant_nodes()).await.expect("participants"),
        vec![lease.node_path().to_string()]
    );
    within("release", lease.release()).await.expect("release");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    let before = within("znodes", server.znode_count()).await.expect("znode count");
    assert!(matches!(
        Semaphore::new(&framework, "/zero", 0),
        Err(SemaphoreError::Lock(LockError::ZeroLeases))
    ));
    assert!(matches!(Semaphore::new(&framework, "bad", 1), Err(SemaphoreError::Lock(_))));
    let semaphore = Semaphore::new(&framework, "/input", 2).expect("semaphore");
    let zero = within("acquire_many(0)", semaphore.acquire_many(0)).await;
    assert!(matches!(zero, Err(SemaphoreError::Lock(LockError::ZeroLeases))), "{zero:?}");
    let too_many = within("acquire_many(3)", semaphore.acquire_many(3)).await;
    assert!(
        matches!(too_many, Err(SemaphoreError::TooManyLeases { requested: 3, max_leases: 2 })),
        "{too_many:?}"
    );
    let after = within("znodes", server.znode_count()).await.expect("znode count");
    assert_eq!(before, after, "nothing was created");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_timed_out_or_refused_acquire_leaves_no_node() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let semaphore = Semaphore::new(&framework, "/full", 1).expect("semaphore");
    let held = within("acquire", semaphore.acquire()).await.expect("lease");
    let result = within("acquire_timeout", semaphore.acquire_timeout(Duration::from_millis(300))).await;
    assert!(result.as_ref().is_err_and(SemaphoreError::is_timeout), "{result:?}");
    let tried = within("try_acquire", semaphore.try_acquire()).await.expect("try");
    assert!(tried.is_none(), "full");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_eq!(children(&framework, "/full/leases").await.len(), 1, "only the holder's lease");
    assert!(children(&framework, "/full/locks").await.is_empty(), "no internal lock node left");
    within("release", held.release()).await.expect("release");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_dead_holders_lease_is_freed_by_its_session() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let holder = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let waiter = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let lease =
        within("acquire", SemaphoreMutex::new(&holder, "/crash").expect("mutex").lock()).await.expect("held");
    let path = lease.node_path().to_string();
    std::mem::forget(lease); // the holder never releases: only its session's end frees the lease
    let contender = SemaphoreMutex::new(&waiter, "/crash").expect("mutex");
    assert!(within("try_lock", contender.try_lock()).await.expect("try").is_none());
    within("holder dies", holder.close()).await;
    let taken = within("lock", contender.lock()).await.expect("the waiter gets the lease");
    assert_ne!(taken.node_path(), path);
    within("release", taken.release()).await.expect("release");
    within("close", waiter.close()).await;
}

#[tokio::test]
async fn the_semaphore_mutex_is_not_reentrant() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mutex = SemaphoreMutex::new(&framework, "/nonreentrant").expect("mutex");
    let guard = within("lock", mutex.lock()).await.expect("lock");
    assert!(
        within("again", mutex.try_lock()).await.expect("try").is_none(),
        "a second lock waits, even ours"
    );
    within("release", guard.release()).await.expect("release");
    let again = within("again", mutex.try_lock()).await.expect("try");
    assert!(again.is_some(), "free after release");
    within("close", framework.close()).await;
}

/// the semaphore mutex's timed lock agrees with the other locks: `lock_timeout` and
/// `lock_until` (a `Duration` or a `Deadline`) end in `Err` with `is_timeout()` and leave no node.
#[tokio::test]
async fn the_semaphore_mutex_times_out_with_an_error_and_leaves_no_node() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mutex = SemaphoreMutex::new(&framework, "/mutex-timeout").expect("mutex");
    let held = within("lock_until", mutex.lock_until(STEP)).await.expect("free: taken");
    let contender = SemaphoreMutex::new(&framework, "/mutex-timeout").expect("mutex");
    let timed_out = within("lock_timeout", contender.lock_timeout(Duration::from_millis(300))).await;
    assert!(timed_out.as_ref().is_err_and(SemaphoreError::is_timeout), "{timed_out:?}");
    let timed_out = within("lock_until", contender.lock_until(Duration::from_millis(300))).await;
    assert!(timed_out.as_ref().is_err_and(SemaphoreError::is_timeout), "{timed_out:?}");
    let timed_out =
        within("lock_until", contender.lock_until(Deadline::after(Duration::from_millis(300)))).await;
    assert!(timed_out.as_ref().is_err_and(SemaphoreError::is_timeout), "{timed_out:?}");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_eq!(children(&framework, "/mutex-timeout/leases").await.len(), 1, "only the holder's lease");
    assert!(children(&framework, "/mutex-timeout/locks").await.is_empty(), "no internal lock node left");
    within("release", held.release()).await.expect("release");
    within("close", framework.close()).await;
}

/// `participants()` tells holders from the acquirer waiting for a lease; leases carry increasing
/// fencing tokens; `acquire_until` takes a Duration; `path()` is the semaphore's path.
#[tokio::test]
async fn participants_split_holders_from_waiters_and_leases_carry_fencing_tokens() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let semaphore = Semaphore::new(&framework, "/participants", 2).expect("semaphore");
    assert_eq!(semaphore.path(), "/participants");
    let first = within("first", semaphore.acquire_until(STEP)).await.expect("lease");
    let second = within("second", semaphore.acquire_until(Deadline::after(STEP))).await.expect("lease");
    assert!(second.fencing_token() > first.fencing_token(), "a later lease has a larger token");

    let waiter_framework =
        builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let waiter_semaphore = Semaphore::new(&waiter_framework, "/participants", 2).expect("semaphore");
    let waiter = tokio::spawn(async move { waiter_semaphore.acquire_until(Duration::from_secs(60)).await });
    eventually("the third acquirer's lease node is there", || async {
        within("participants", semaphore.participants()).await.expect("participants").waiting.len() == 1
    })
    .await;
    let participants = within("participants", semaphore.participants()).await.expect("participants");
    assert_eq!(participants.holders, vec![first.node_path().to_owned(), second.node_path().to_owned()]);
    assert!(!waiter.is_finished(), "the third waits while two leases are held");

    within("release", first.release()).await.expect("release");
    let third = within("the waiter gets the freed lease", waiter).await.expect("task").expect("lease");
    assert!(third.fencing_token() > second.fencing_token());
    let participants = within("participants", semaphore.participants()).await.expect("participants");
    assert_eq!(participants.holders, vec![second.node_path().to_owned(), third.node_path().to_owned()]);
    assert!(participants.waiting.is_empty());
    within("release", second.release()).await.expect("release");
    within("release", third.release()).await.expect("release");
    for framework in [framework, waiter_framework] {
        within("close", framework.close()).await;
    }
}
