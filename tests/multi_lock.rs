//! MultiLock over a mix of lock kinds (a mutex and a semaphore mutex), against a real ZooKeeper:
//! all or nothing within one deadline, released in reverse order (seen in the order the server
//! deletes the nodes), and a timed-out acquire leaves no node of its own.

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::time::Duration;

use common::{children, descendants, read, session};
use zk_recipes::framework::zookeeper_client::{AddWatchMode, EventType, PersistentWatcher};
use zk_recipes::framework::{path, Deadline, Framework};
use zk_recipes::lock_internals::{Hold, LockError, MultiLock};
use zk_recipes::mutex::Mutex;
use zk_recipes::semaphore::SemaphoreMutex;
use zk_recipes_testing::{within, within_for, TestingServer, SERVER_START, STEP};

/// A framework of its own (its own session), connected.
async fn connected(server: &TestingServer) -> Framework {
    let framework = Framework::builder(server.connect_string()).start().expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    framework
}

/// Follows every node created and deleted under `root`, in the order the server made the
/// changes (one session's notifications arrive in that order).
async fn follow(observer: &Framework, root: &str) -> PersistentWatcher {
    let session = session(observer).await;
    within("watch", session.client().watch(root, AddWatchMode::PersistentRecursive)).await.expect("watch")
}

/// Takes events from `watcher` until `done` says the ones taken so far are enough; returns the
/// (type, path) of every node created or deleted.
async fn changes_until(
    watcher: &mut PersistentWatcher,
    done: impl Fn(&[(EventType, String)]) -> bool,
) -> Vec<(EventType, String)> {
    let mut changes = Vec::new();
    within("the changes to come", async {
        while !done(&changes) {
            let event = watcher.changed().await;
            if matches!(event.event_type, EventType::NodeCreated | EventType::NodeDeleted) {
                changes.push((event.event_type, event.path));
            }
        }
    })
    .await;
    changes
}

/// The nodes deleted among `changes`, in order.
fn deleted(changes: &[(EventType, String)]) -> Vec<&str> {
    changes
        .iter()
        .filter(|(kind, _)| *kind == EventType::NodeDeleted)
        .map(|(_, node)| node.as_str())
        .collect()
}

/// The lock nodes created among `changes` in the lock directory `dir` (not the directory itself).
fn created_in<'a>(changes: &'a [(EventType, String)], dir: &str) -> Vec<&'a str> {
    changes
        .iter()
        .filter(|(kind, node)| *kind == EventType::NodeCreated && path::parent(node) == Some(dir))
        .map(|(_, node)| node.as_str())
        .collect()
}

#[tokio::test]
async fn all_or_nothing_within_one_deadline_and_released_in_reverse() {
    let server = within_for(SERVER_START, "server", TestingServer::start()).await.expect("server");
    let framework = connected(&server).await;
    let observer = connected(&server).await;
    let multi = MultiLock::new(vec![
        Box::new(Mutex::new(&framework, "/multi/mutex").expect("mutex")),
        Box::new(SemaphoreMutex::new(&framework, "/multi/semaphore").expect("semaphore mutex")),
    ]);
    let guard = within("both", multi.acquire_until(Deadline::after(STEP))).await.expect("both locks");
    let paths: Vec<String> = guard.node_paths().into_iter().map(str::to_owned).collect();
    assert!(paths[0].starts_with("/multi/mutex/_c_") && paths[1].starts_with("/multi/semaphore/leases/_c_"));

    // Released in reverse: the semaphore's lease goes before the mutex's node.
    let mut watcher = follow(&observer, "/multi").await;
    within("release", guard.release()).await.expect("release");
    let changes = changes_until(&mut watcher, |changes| {
        paths.iter().all(|node| deleted(changes).contains(&node.as_str()))
    })
    .await;
    let released: Vec<&str> =
        deleted(&changes).into_iter().filter(|node| paths.contains(&node.to_string())).collect();
    assert_eq!(released, [paths[1].as_str(), paths[0].as_str()], "released in reverse order: {changes:?}");
    drop(watcher);

    // Someone else holds the second lock: the first is given back, nothing stays held. (A lock
    // directory is a container the server may reap once empty: no directory, no node.)
    let blocker =
        within("block", SemaphoreMutex::new(&framework, "/multi/semaphore").expect("semaphore mutex").lock())
            .await
            .expect("blocker");
    let result = within("blocked", multi.acquire_until(Deadline::after(Duration::from_millis(400)))).await;
    assert!(result.as_ref().is_err_and(LockError::is_timeout), "{result:?}");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_eq!(
        children(&observer, "/multi/mutex").await,
        Vec::<String>::new(),
        "the first lock was given back"
    );
    assert_eq!(
        children(&observer, "/multi/semaphore/leases").await,
        vec![path::name(blocker.node_path()).to_owned()],
        "only the blocker's lease"
    );
    within("release blocker", blocker.release()).await.expect("release");
    for framework in [framework, observer] {
        within("close", framework.close()).await;
    }
}

/// Two locks taken, the third held by another session: the acquire times out, gives back the two
/// it took (in reverse order), never tries the fourth, and leaves no node of its own anywhere.
#[tokio::test]
async fn a_timed_out_acquire_gives_back_in_reverse_and_leaves_no_node_of_its_own() {
    let server = within_for(SERVER_START, "server", TestingServer::start()).await.expect("server");
    let framework = connected(&server).await;
    let elsewhere = connected(&server).await;
    let observer = connected(&server).await;
    let root = "/multi-timeout";
    let (first, second, held, never) =
        ("/multi-timeout/first", "/multi-timeout/second", "/multi-timeout/held", "/multi-timeout/never");
    let blocker = within("block", SemaphoreMutex::new(&elsewhere, held).expect("semaphore mutex").lock())
        .await
        .expect("blocker");
    let multi = MultiLock::new(vec![
        Box::new(Mutex::new(&framework, first).expect("mutex")),
        Box::new(Mutex::new(&framework, second).expect("mutex")),
        Box::new(SemaphoreMutex::new(&framework, held).expect("semaphore mutex")),
        Box::new(Mutex::new(&framework, never).expect("mutex")),
    ]);

    let mut watcher = follow(&observer, root).await;
    let result = within("blocked", multi.acquire_until(Deadline::after(Duration::from_millis(400)))).await;
    assert!(result.as_ref().is_err_and(LockError::is_timeout), "{result:?}");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");

    // The two locks taken were given back, the second first.
    let changes = changes_until(&mut watcher, |changes| {
        [first, second].iter().all(|dir| {
            let created = created_in(changes, dir);
            created.len() == 1 && deleted(changes).contains(&created[0])
        })
    })
    .await;
    let taken = [created_in(&changes, first)[0], created_in(&changes, second)[0]];
    let given_back: Vec<&str> = deleted(&changes).into_iter().filter(|node| taken.contains(node)).collect();
    assert_eq!(given_back, [taken[1], taken[0]], "given back in reverse order: {changes:?}");
    drop(watcher);

    // No node of ours is left on any of its paths; the blocker's lease is still there.
    let ours = session(&framework).await.id().0;
    let mut left = Vec::new();
    for node in descendants(&observer, root).await {
        if let Some((_, stat)) = read(&observer, &node).await {
            if stat.ephemeral_owner == ours {
                left.push(node);
            }
        }
    }
    assert!(left.is_empty(), "nodes of the timed-out acquire left behind: {left:?}");
    assert!(read(&observer, never).await.is_none(), "the fourth lock was never tried");
    assert_eq!(
        children(&observer, &format!("{held}/leases")).await,
        vec![path::name(blocker.node_path()).to_owned()],
        "only the blocker's lease"
    );
    within("release blocker", blocker.release()).await.expect("release");
    for framework in [framework, elsewhere, observer] {
        within("close", framework.close()).await;
    }
}
