//! ZooKeeper's recipe layout names a session's nodes `x-<session id>-<seq>`, and a container parent
//! that was reaped and made again counts its sequences from 0 again: the same session can make a
//! name it made before. The lock model found two ways this took the wrong node; both against a
//! real ZooKeeper here.

use std::time::Duration;

use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{path, Framework};
use zk_recipes_mutex::{Hold, LockLayout, Mutex};
use zk_recipes_test_support::*;
use zk_recipes_testing::{eventually, RequestMatch};

/// The czxid of `node_path` as the observer reads it, if it exists.
async fn czxid_of(observer: &Framework, node_path: &str) -> Option<i64> {
    within("exists", observer.exists(node_path, step())).await.expect("exists").map(|stat| stat.czxid)
}

/// Deletes the empty parent, as the server's container reaper does, and makes it again as a
/// container: its children's sequences start from 0 again.
async fn make_parent_again(observer: &Framework, lock_path: &str) {
    within("delete the parent", observer.delete(lock_path).deadline(step())).await.expect("delete");
    let created = observer.create(lock_path).mode(CreateMode::Container).deadline(step());
    within("make the parent again", created).await.expect("create");
}

/// A create whose reply is lost under a parent made again: the lane's floor was counted under the
/// old parent (sequence 0), so the retry took the new node with sequence 0 for an older one, made
/// another, and waited behind its own first node until it timed out. Now the floor is void under
/// a parent made after it, and the retry adopts its node.
#[tokio::test]
async fn a_lost_create_under_a_parent_made_again_is_adopted() {
    init_tracing();
    let (server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    let lock_path = "/made-again/adopt";
    let mutex = Mutex::with_layout(&framework, lock_path, LockLayout::ZooKeeperRecipe).expect("mutex");
    let first = within("lock", mutex.lock()).await.expect("the first hold");
    assert!(first.node_path().ends_with("-0000000000"), "{}", first.node_path());
    within("release", first.release()).await.expect("release");
    make_parent_again(&observer, lock_path).await;

    let cut = proxy.cut_after_next_create();
    let acquiring = tokio::spawn(async move { mutex.lock_timeout(Duration::from_secs(5)).await });
    let cut = within("the cut", cut).await.expect("the proxy cut the create's reply");
    assert!(cut.path.starts_with(&format!("{lock_path}/x-")), "{cut:?}");
    let guard = within("acquire", acquiring).await.expect("task").expect("the lock after the lost reply");
    assert!(
        guard.node_path().ends_with("-0000000000"),
        "adopted the lost create's node: {}",
        guard.node_path()
    );
    assert_eq!(children(&observer, lock_path).await, vec![path::name(guard.node_path()).to_owned()]);
    within("release", guard.release()).await.expect("release");
    no_children_left(&observer, lock_path).await;
    close_all([framework, observer]).await;
    drop(server);
}

/// A guard dropped while its delete cannot get through leaves the delete to the cleanup worker.
/// If that node is gone meanwhile and the session holds the lock again under the parent made
/// again, the new node has the old one's name: the cleanup deleted it by name, and its holder held
/// a lock whose node was gone (a second holder could come in). Now the cleanup deletes only the
/// node its own create made (by czxid).
#[tokio::test]
async fn a_late_cleanup_never_deletes_a_newer_node_of_the_same_name() {
    init_tracing();
    let (server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    let lock_path = "/made-again/cleanup";
    let mutex = Mutex::with_layout(&framework, lock_path, LockLayout::ZooKeeperRecipe).expect("mutex");
    let first = within("lock", mutex.lock()).await.expect("the first hold");
    let name = first.node_path().to_owned();

    proxy.refuse_requests(RequestMatch::delete().under(lock_path));
    drop(first);
    // The delete the cleanup worker keeps trying is done by someone else (as a delete the server
    // did but whose reply was lost), and the parent is reaped and made again.
    eventually("the cleanup worker tried", || async { proxy.stats().refused > 0 }).await;
    within("delete", observer.delete(&name).deadline(step())).await.expect("delete the node");
    make_parent_again(&observer, lock_path).await;

    let second = within("lock again", mutex.lock()).await.expect("the second hold");
    assert_eq!(second.node_path(), name, "the same session makes the same name again");
    let czxid = czxid_of(&observer, &name).await.expect("the second hold's node");

    proxy.stop_refusing();
    within("cleanups", framework.wait_for_cleanups(step())).await.expect("cleanups");
    assert_eq!(czxid_of(&observer, &name).await, Some(czxid), "the cleanup deleted the second hold's node");
    within("release", second.release()).await.expect("release");
    no_children_left(&observer, lock_path).await;
    close_all([framework, observer]).await;
    drop(server);
}
