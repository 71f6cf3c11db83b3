//! Observers: a framework whose connect string names only an observer of a real ensemble (3
//! voters, 1 observer) acquires and releases a mutex, writes, reads its writes, and a framework on
//! a voter sees them; after the observer restarts it locks again.

use std::time::Duration;

use zk_recipes_mutex::Mutex;
use zk_recipes_test_support::*;
use zk_recipes_testing::{ServerMode, TestingCluster};

#[tokio::test]
async fn a_framework_on_an_observer_locks_writes_and_reads() {
    init_tracing();
    let mut cluster =
        within_for(SERVER_START, "ensemble start", TestingCluster::builder().observers(1).start())
            .await
            .expect("ensemble");
    assert_eq!(cluster.members().len(), 4);
    let observer = cluster.members().iter().position(|member| member.is_observer()).expect("an observer");
    assert_eq!(within("mode", cluster.mode(observer)).await.expect("srvr"), ServerMode::Observer);

    let on_observer = builder(&cluster.members()[observer].connect_string(), Duration::from_secs(10))
        .start()
        .expect("framework");
    within("connected", on_observer.block_until_connected(STEP)).await.expect("connected");

    let mutex = Mutex::new(&on_observer, "/observer/lock").expect("mutex");
    let guard = within("acquire", mutex.lock_timeout(STEP)).await.expect("lock");
    let lock_nodes = children(&on_observer, "/observer/lock").await;
    assert_eq!(lock_nodes.len(), 1, "{lock_nodes:?}");

    within("create", on_observer.create("/observer/data").data(b"written".to_vec())).await.expect("create");
    assert_eq!(on_server(&on_observer, "/observer/data").await, Some((b"written".to_vec(), 0)));

    // A voter has the observer's writes (forwarded to the leader).
    let on_voter =
        builder(&cluster.members()[0].connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("sync", on_voter.sync("/observer", step())).await.expect("sync");
    assert_eq!(on_server(&on_voter, "/observer/data").await, Some((b"written".to_vec(), 0)));
    assert_eq!(children(&on_voter, "/observer/lock").await, lock_nodes);

    within("release", guard.release()).await.expect("release");
    no_children_left(&on_observer, "/observer/lock").await;
    no_children_left(&on_voter, "/observer/lock").await;

    // The observer restarts (ready once it serves as an observer again): the framework on it comes
    // back and locks again.
    within_for(Duration::from_secs(120), "restart the observer", cluster.restart(observer))
        .await
        .expect("restart");
    assert_eq!(within("mode", cluster.mode(observer)).await.expect("srvr"), ServerMode::Observer);
    let guard = within("acquire again", mutex.lock_timeout(STEP)).await.expect("lock after restart");
    within("release", guard.release()).await.expect("release");
    no_children_left(&on_voter, "/observer/lock").await;
    close_all([on_observer, on_voter]).await;
}
