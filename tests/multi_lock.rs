//! MultiLock over a mix of lock kinds (a mutex and a semaphore mutex), against a real ZooKeeper.

use std::time::Duration;

use zk_recipes::framework::{Deadline, Framework};
use zk_recipes::lock_internals::{LockError, MultiLock};
use zk_recipes::mutex::Mutex;
use zk_recipes::semaphore::SemaphoreMutex;
use zk_recipes_testing::{within, within_for, TestingServer, SERVER_START, STEP};

async fn count(framework: &Framework, dir: &str) -> usize {
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    within("list", session.client().list_children(dir)).await.map(|children| children.len()).unwrap_or(0)
}

#[tokio::test]
async fn all_or_nothing_within_one_deadline_and_released_in_reverse() {
    let server = within_for(SERVER_START, "server", TestingServer::start()).await.expect("server");
    let framework = Framework::builder(server.connect_string()).start().expect("framework");
    let multi = MultiLock::new(vec![
        Box::new(Mutex::new(&framework, "/multi/mutex").expect("mutex")),
        Box::new(SemaphoreMutex::new(&framework, "/multi/semaphore").expect("semaphore mutex")),
    ]);
    let guard = within("both", multi.acquire_until(Deadline::after(STEP))).await.expect("both locks");
    let paths = guard.node_paths();
    assert!(paths[0].starts_with("/multi/mutex/_c_") && paths[1].starts_with("/multi/semaphore/leases/_c_"));

    // Someone else holds the second lock: the first is given back, nothing stays held.
    within("release", guard.release()).await.expect("release");
    let blocker =
        within("block", SemaphoreMutex::new(&framework, "/multi/semaphore").expect("semaphore mutex").lock())
            .await
            .expect("blocker");
    let result = within("blocked", multi.acquire_until(Deadline::after(Duration::from_millis(400)))).await;
    assert!(result.as_ref().is_err_and(LockError::is_timeout), "{result:?}");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_eq!(count(&framework, "/multi/mutex").await, 0, "the first lock was given back");
    assert_eq!(count(&framework, "/multi/semaphore/leases").await, 1, "only the blocker's lease");
    within("release blocker", blocker.release()).await.expect("release");
    framework.close().await;
}
