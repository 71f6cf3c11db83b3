//! The simple queue (ZooKeeper's own recipe, Curator's SimpleDistributedQueue) against a real server.

mod common;

use std::time::{Duration, Instant};

use common::*;
use zk_recipes_framework::{zookeeper_client, Deadline, Error as FrameworkError};
use zk_recipes_queue::{QueueError, SimpleQueue};

#[tokio::test]
async fn fifo_peek_poll_and_raw_bytes() {
    let (_server, framework) = server_and_framework().await;
    let queue = SimpleQueue::new(&framework, "/simple/fifo").expect("queue");
    assert_eq!(within("empty poll", queue.poll()).await.expect("poll"), None);
    assert_eq!(within("empty peek", queue.peek()).await.expect("peek"), None);
    let mut names = Vec::new();
    for index in 0..20 {
        names.push(within("offer", queue.offer(format!("item-{index}").as_bytes())).await.expect("offer"));
    }
    assert!(names.iter().all(|name| name.starts_with("qn-") && name.len() == 13), "{names:?}");
    assert_eq!(children(&framework, "/simple/fifo").await, names, "one qn-<seq> node per item");
    let (raw, _) = data_and_stat(&framework, &format!("/simple/fifo/{}", names[0])).await;
    assert_eq!(raw, b"item-0", "the simple queue stores raw bytes");
    // Foreign nodes are skipped.
    let session = framework.session(Deadline::after(STEP)).await.expect("session");
    let options = session.create_options(zookeeper_client::CreateMode::Persistent);
    within("foreign", session.client().create("/simple/fifo/aaa-foreign", b"x", &options))
        .await
        .expect("create");
    assert_eq!(within("peek", queue.peek()).await.expect("peek").as_deref(), Some(&b"item-0"[..]));
    for index in 0..20 {
        let expected = format!("item-{index}").into_bytes();
        let taken = if index % 2 == 0 {
            within("take", queue.take()).await.expect("take")
        } else {
            within("poll", queue.poll()).await.expect("poll").expect("an item")
        };
        assert_eq!(taken, expected, "FIFO");
    }
    assert_eq!(within("poll", queue.poll()).await.expect("poll"), None);
    assert_eq!(children(&framework, "/simple/fifo").await, ["aaa-foreign"]);
}

#[tokio::test]
async fn take_waits_and_wakes_on_offer_and_times_out() {
    let (server, framework) = server_and_framework().await;
    let queue = SimpleQueue::new(&framework, "/simple/wait").expect("queue");
    let started = Instant::now();
    let timed_out =
        within("take_timeout", queue.take_timeout(Duration::from_millis(300))).await.expect("take");
    assert_eq!(timed_out, None);
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(300) && waited < Duration::from_secs(5), "waited {waited:?}");

    // A second session's taker waits on a children watch and wakes on the offer.
    let other = connect(&server).await;
    let taker_queue = SimpleQueue::new(&other, "/simple/wait").expect("queue");
    let taker = tokio::spawn(async move { taker_queue.take().await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!taker.is_finished(), "take waits while the queue is empty");
    // No polling: the server sees (almost) no requests while the taker waits (pings only).
    let packets =
        || async { server.mntr().await.expect("mntr")["zk_packets_received"].parse::<u64>().expect("count") };
    let before = packets().await;
    tokio::time::sleep(Duration::from_secs(1)).await;
    let during = packets().await - before;
    assert!(during <= 8, "{during} requests while a take waited: polling?");
    assert!(!taker.is_finished());
    let offered_at = Instant::now();
    within("offer", queue.offer(b"wake up")).await.expect("offer");
    let taken = within("taker", taker).await.expect("task").expect("take");
    assert_eq!(taken, b"wake up");
    assert!(offered_at.elapsed() < Duration::from_secs(2), "woken by the watch, not by polling");

    // With a timeout, an offer in time is taken.
    let taker_queue = SimpleQueue::new(&other, "/simple/wait").expect("queue");
    let taker = tokio::spawn(async move { taker_queue.take_timeout(Duration::from_secs(10)).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    within("offer", queue.offer(b"in time")).await.expect("offer");
    assert_eq!(within("taker", taker).await.expect("task").expect("take").as_deref(), Some(&b"in time"[..]));
}

/// Whether some session watches `path` on `server`.
async fn watched(server: &zk_recipes_testing::TestingServer, path: &str) -> bool {
    let watches = within("wchc", server.watches()).await.expect("wchc");
    watches.values().any(|paths| paths.iter().any(|watched| watched == path))
}

async fn exists(framework: &zk_recipes_framework::Framework, path: &str) -> bool {
    let session = framework.session(Deadline::after(STEP)).await.expect("session");
    within("exists", session.client().check_stat(path)).await.expect("exists").is_some()
}

#[tokio::test]
async fn take_survives_the_container_being_reaped_and_never_recreates_it() {
    let (server, framework) = server_and_framework().await;
    let dir = "/simple/reaped/dir";
    let queue = SimpleQueue::new(&framework, dir).expect("queue");
    within("offer", queue.offer(b"one")).await.expect("offer");
    assert_eq!(within("take", queue.take()).await.expect("take"), b"one");
    // The directory (a container) had a child and is empty again: the server reaps it.
    eventually("the container is reaped", || async { !exists(&framework, dir).await }).await;

    // Readers never create a missing directory: an empty container that never had a child would
    // never be reaped. A poll finds nothing; a take waits (a watch on the directory's creation).
    assert_eq!(within("poll", queue.poll()).await.expect("poll"), None);
    let taker_queue = queue.clone();
    let taker = tokio::spawn(async move { taker_queue.take().await });
    // `wchc` shows exists watches: the taker waits on the directory's creation.
    eventually("the taker watches the missing directory", || watched(&server, dir)).await;
    assert!(!exists(&framework, dir).await, "the taker did not create the directory");
    within("offer", queue.offer(b"two")).await.expect("offer");
    assert_eq!(within("taker", taker).await.expect("task").expect("take"), b"two");

    // Reaped while a taker waits on it: the taker waits on and still gets the next item.
    let taker_queue = queue.clone();
    let taker = tokio::spawn(async move { taker_queue.take().await });
    eventually("the container is reaped", || async { !exists(&framework, dir).await }).await;
    // `wchc` shows exists watches, not children watches: this is the taker waiting on the
    // directory's creation, whether it first listed before or after the reaping.
    eventually("the taker watches the missing directory", || watched(&server, dir)).await;
    assert!(!taker.is_finished(), "nothing to take yet");
    within("offer", queue.offer(b"three")).await.expect("offer");
    assert_eq!(within("taker", taker).await.expect("task").expect("take"), b"three");
    // Nothing left behind: the emptied directory is reaped again.
    eventually("the container is reaped", || async { !exists(&framework, dir).await }).await;
}

#[tokio::test]
async fn bad_input_is_refused_and_nothing_is_written() {
    let (server, framework) = server_and_framework().await;
    let before = server.znode_count().await.expect("znodes");
    assert!(matches!(
        SimpleQueue::new(&framework, "no/leading/slash"),
        Err(QueueError::Framework(FrameworkError::InvalidPath { .. }))
    ));
    assert!(matches!(SimpleQueue::new(&framework, "/"), Err(QueueError::InvalidArgument(_))));
    let queue = SimpleQueue::new(&framework, "/simple/bad").expect("queue");
    let huge = vec![7u8; 2 * 1024 * 1024];
    assert!(matches!(within("offer", queue.offer(&huge)).await, Err(QueueError::ItemTooLarge { .. })));
    framework.close().await;
    let closed = within("offer", queue.offer(b"late")).await;
    assert!(matches!(closed, Err(QueueError::Framework(FrameworkError::Closed))), "{closed:?}");
    assert!(within("poll", queue.poll()).await.is_err());
    assert_eq!(server.znode_count().await.expect("znodes"), before, "nothing was written");
}
