//! A consumer's lifecycle against a real server: stopping on its own with a graceful drain, the
//! delivery-aware handler, and the redelivery limit with its dead-letter path. Every test keeps the
//! exactly-once tally: each item handled to completion once, none left, none doubled.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use tokio::sync::{mpsc, Notify};
use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_queue::{
    framing::{delivery_count, unframe},
    DistributedQueue, ErrorMode, QueueError, Utf8Serializer,
};

fn lock_safe(framework: &Framework, path: &str) -> DistributedQueue<String> {
    DistributedQueue::builder(framework, path)
        .serializer(Utf8Serializer)
        .lock_path(format!("{path}-locks"))
        .build()
        .expect("queue")
}

fn names(count: usize) -> Vec<String> {
    (0..count).map(|index| format!("item-{index:02}")).collect()
}

/// Consumes everything left in `queue` with a fresh consumer; returns the items in the order seen.
/// (Prefetch 1: nothing is taken ahead, so an empty queue means everything was handed out.)
async fn drain_rest(queue: &DistributedQueue<String>) -> Vec<String> {
    let mut seen = Vec::new();
    let mut consumer = queue.consumer().prefetch(1);
    while !within("len", queue.is_empty()).await.expect("len") {
        let delivery = within("next", consumer.next()).await.expect("open").expect("delivery");
        seen.extend(delivery.items().iter().cloned());
        within("ack", delivery.ack()).await.expect("ack");
    }
    seen
}

#[tokio::test]
async fn a_stopped_run_lets_the_handlers_at_work_finish_and_gives_back_what_it_took_ahead() {
    let (_server, framework) = server_and_framework().await;
    let queue = lock_safe(&framework, "/lifecycle/stop");
    let all = names(20);
    within("put", queue.put_batch(&all)).await.expect("put");

    let (started_tx, mut started) = mpsc::unbounded_channel();
    let go_on = Arc::new(Notify::new());
    let handled = Arc::new(Mutex::new(Vec::new()));
    let consumer = queue.consumer().prefetch(2);
    let stop = consumer.stop_token();
    let run = {
        let (go_on, handled) = (go_on.clone(), handled.clone());
        tokio::spawn(consumer.run(move |item: String| {
            let (started_tx, go_on, handled) = (started_tx.clone(), go_on.clone(), handled.clone());
            async move {
                started_tx.send(item.clone()).expect("test alive");
                go_on.notified().await;
                handled.lock().push(item);
                Ok::<_, String>(())
            }
        }))
    };
    // Two handlers at work (prefetch 2), then stop.
    let first = within("first handler", started.recv()).await.expect("started");
    let second = within("second handler", started.recv()).await.expect("started");
    stop.cancel();
    go_on.notify_waiters();
    within("run returns after the drain", run).await.expect("task").expect("drained in time");
    assert!(started.try_recv().is_err(), "no handler started after the stop");
    let mut handled = handled.lock().clone();
    handled.sort();
    let mut expected = vec![first, second];
    expected.sort();
    assert_eq!(handled, expected, "the two items at work were finished");

    within("flush", queue.flush_background(Deadline::after(STEP))).await.expect("flush");
    assert!(children(&framework, "/lifecycle/stop-locks").await.is_empty(), "no lock left behind");
    assert_eq!(
        within("len", queue.len()).await.expect("len"),
        18,
        "the finished two were acked, the rest is back"
    );
    let mut tally = handled;
    tally.extend(drain_rest(&queue).await);
    tally.sort();
    assert_eq!(tally, all, "every item handled exactly once");
}

#[tokio::test]
async fn past_the_drain_timeout_unfinished_items_are_given_back_for_redelivery() {
    let (_server, framework) = server_and_framework().await;
    let queue = lock_safe(&framework, "/lifecycle/drain-timeout");
    let all = names(3);
    within("put", queue.put_batch(&all)).await.expect("put");

    // A consumer stops on a token it was given, and close cancels that token.
    let token = tokio_util::sync::CancellationToken::new();
    let consumer = queue.consumer().stop_on(token.clone());
    assert!(!consumer.stop_token().is_cancelled());
    consumer.close();
    assert!(token.is_cancelled(), "close cancels the token the consumer was given");

    let consumer = queue.consumer().prefetch(1).drain_timeout(Duration::from_millis(300));
    let stop = consumer.stop_token();
    let (started_tx, mut started) = mpsc::unbounded_channel();
    let run = tokio::spawn(consumer.run(move |item: String| {
        let started_tx = started_tx.clone();
        async move {
            started_tx.send(item).expect("test alive");
            std::future::pending::<()>().await;
            Ok::<_, String>(())
        }
    }));
    let stuck = within("handler", started.recv()).await.expect("started");
    stop.cancel();
    let outcome = within("run returns at the drain timeout", run).await.expect("task");
    match outcome {
        Err(QueueError::DrainTimedOut { abandoned, timeout }) => {
            assert_eq!(abandoned, 1);
            assert_eq!(timeout, Duration::from_millis(300));
        }
        other => panic!("expected DrainTimedOut, got {other:?}"),
    }
    assert!(QueueError::DrainTimedOut { abandoned: 1, timeout: Duration::ZERO }.is_timeout());

    within("flush", queue.flush_background(Deadline::after(STEP))).await.expect("flush");
    no_children_left(&framework, "/lifecycle/drain-timeout-locks").await;
    assert_eq!(within("len", queue.len()).await.expect("len"), 3, "nothing was acked: all three are back");
    let mut tally = drain_rest(&queue).await;
    tally.sort();
    assert_eq!(tally, all, "each item once, the abandoned {stuck} included");
}

#[tokio::test]
async fn a_stopped_stream_ends_and_at_most_once_items_taken_ahead_are_put_back() {
    let (_server, framework) = server_and_framework().await;
    let queue = DistributedQueue::builder(&framework, "/lifecycle/stream")
        .serializer(Utf8Serializer)
        .build()
        .expect("queue");
    let all = names(10);
    within("put", queue.put_batch(&all)).await.expect("put");
    let mut consumer = queue.consumer().prefetch(5);
    let first = within("next", consumer.next()).await.expect("open").expect("delivery");
    let taken: Vec<String> = first.items().to_vec();
    within("ack", first.ack()).await.expect("ack");
    consumer.close();
    assert!(within("next after close", consumer.next()).await.is_none(), "a stopped stream ends");
    drop(consumer);
    within("flush", queue.flush_background(Deadline::after(STEP))).await.expect("flush");
    assert_eq!(within("len", queue.len()).await.expect("len"), 9, "the items taken ahead are back");
    let mut tally = taken;
    tally.extend(drain_rest(&queue).await);
    tally.sort();
    assert_eq!(tally, all);
}

#[tokio::test]
async fn run_items_gives_the_handler_the_node_its_delivery_count_and_the_lost_signal() {
    let (server, framework) = server_and_framework().await;
    let producer = lock_safe(&framework, "/lifecycle/items");
    let first = within("put", producer.put(&"a".to_string())).await.expect("put");
    let many = within("put_many", producer.put_many(&["b".to_string(), "c".to_string()])).await.expect("put");

    let consumer_framework = connect(&server).await;
    let queue = lock_safe(&consumer_framework, "/lifecycle/items");
    let consumer = queue.consumer().prefetch(1);
    let stop = consumer.stop_token();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let (lost_tx, mut lost_rx) = mpsc::unbounded_channel();
    let run = {
        let seen = seen.clone();
        tokio::spawn(consumer.run_items(move |item| {
            let (seen, lost_tx) = (seen.clone(), lost_tx.clone());
            async move {
                seen.lock().push((
                    item.id().to_owned(),
                    item.index(),
                    item.delivery_count(),
                    item.value().clone(),
                ));
                if item.value() == "c" {
                    // Waits for the lock to become untrustworthy: the framework is closed below.
                    let state = item.lost().await;
                    lost_tx.send(state).expect("test alive");
                }
                Ok::<_, String>(())
            }
        }))
    };
    let state = within_for(Duration::from_secs(10), "lost() while handling c", async {
        eventually("c is being handled", || async { seen.lock().len() == 3 }).await;
        // Still trusted while connected.
        assert!(lost_rx.try_recv().is_err());
        consumer_framework.close().await;
        lost_rx.recv().await
    })
    .await
    .expect("lost fired");
    assert_eq!(state, zk_recipes_framework::ConnectionState::Lost);
    stop.cancel();
    within("run", run).await.expect("task").expect("run");
    let seen = seen.lock().clone();
    assert_eq!(
        seen,
        vec![
            (first.clone(), 0, 1, "a".to_string()),
            (many.clone(), 0, 1, "b".to_string()),
            (many.clone(), 1, 1, "c".to_string()),
        ]
    );
}

/// `max_deliveries` 3 with a dead-letter path: an item whose handler always fails is handed out
/// three times (counts 1, 2, 3), then moved to the dead-letter queue with its bytes; the others are
/// handled once.
#[tokio::test]
async fn an_always_failing_item_goes_to_the_dead_letter_path_after_max_deliveries() {
    for lock_safe_mode in [true, false] {
        let (_server, framework) = server_and_framework().await;
        let base = if lock_safe_mode { "/lifecycle/poison-locked" } else { "/lifecycle/poison-plain" };
        let dead_letters = format!("{base}-dead");
        let mut builder = DistributedQueue::builder(&framework, base)
            .serializer(Utf8Serializer)
            .error_mode(ErrorMode::Requeue)
            .max_deliveries(3)
            .dead_letter_path(dead_letters.clone());
        if lock_safe_mode {
            builder = builder.lock_path(format!("{base}-locks"));
        }
        let queue = builder.build().expect("queue");
        let good = names(5);
        within("put", queue.put_batch(&good)).await.expect("put");
        within("put", queue.put(&"poison".to_string())).await.expect("put");

        let seen: Arc<Mutex<BTreeMap<String, Vec<u32>>>> = Arc::default();
        let consumer = queue.consumer().prefetch(2);
        let stop = consumer.stop_token();
        let run = {
            let seen = seen.clone();
            tokio::spawn(consumer.run_items(move |item| {
                let seen = seen.clone();
                async move {
                    seen.lock().entry(item.value().clone()).or_default().push(item.delivery_count());
                    if item.value() == "poison" {
                        Err("always fails")
                    } else {
                        Ok(())
                    }
                }
            }))
        };
        let dead = within_for(Duration::from_secs(20), "poison dead-lettered", async {
            eventually("one node in the dead-letter path", || async {
                children(&framework, &dead_letters).await.len() == 1
            })
            .await;
            children(&framework, &dead_letters).await
        })
        .await;
        eventually("the queue is empty", || async { within("len", queue.is_empty()).await.expect("len") })
            .await;
        stop.cancel();
        within("run", run).await.expect("task").expect("run");

        let seen = seen.lock().clone();
        assert_eq!(
            seen["poison"],
            vec![1, 2, 3],
            "mode lock-safe={lock_safe_mode}: three deliveries, counted"
        );
        for item in &good {
            assert_eq!(seen[item], vec![1], "{item} handled once");
        }
        assert!(dead[0].starts_with("queue-"), "a plain queue item: {dead:?}");
        let (bytes, _) = data_and_stat(&framework, &format!("{dead_letters}/{}", dead[0])).await;
        assert_eq!(unframe(&bytes).expect("framed"), vec![b"poison".to_vec()]);
        assert_eq!(delivery_count(&bytes), 3, "it keeps its count");
        // A queue on the dead-letter path reads it.
        let dead_queue = DistributedQueue::builder(&framework, &dead_letters)
            .serializer(Utf8Serializer)
            .build()
            .expect("queue");
        assert_eq!(drain_rest(&dead_queue).await, vec!["poison".to_string()]);
        if lock_safe_mode {
            no_children_left(&framework, &format!("{base}-locks")).await;
        }
    }
}

/// Lock-safe, the count is written before the item is handed out, so a consumer that dies with
/// the item counts: with `max_deliveries` 2, two crashed consumers are enough.
#[tokio::test]
async fn a_consumer_that_dies_with_the_item_counts_as_a_delivery() {
    let (server, framework) = server_and_framework().await;
    let path = "/lifecycle/crashes";
    let build = |framework: &Framework| {
        DistributedQueue::builder(framework, path)
            .serializer(Utf8Serializer)
            .lock_path(format!("{path}-locks"))
            .max_deliveries(2)
            .dead_letter_path(format!("{path}-dead"))
            .build()
            .expect("queue")
    };
    let queue = build(&framework);
    within("put", queue.put(&"crashes its consumer".to_string())).await.expect("put");
    for expected_count in 1..=2 {
        let doomed = connect(&server).await;
        let mut consumer = build(&doomed).consumer().prefetch(1);
        let delivery = within("doomed takes", consumer.next()).await.expect("open").expect("delivery");
        assert_eq!(delivery.delivery_count(), expected_count);
        std::mem::forget(delivery); // the process dies holding it: no release
        doomed.close().await;
        no_children_left(&framework, &format!("{path}-locks")).await;
    }
    // The third consumer never sees it: it goes to the dead letters, and the next item comes.
    within("put", queue.put(&"fine".to_string())).await.expect("put");
    let mut consumer = queue.consumer().prefetch(1);
    let delivery = within("next", consumer.next()).await.expect("open").expect("delivery");
    assert_eq!(delivery.items(), ["fine"]);
    within("ack", delivery.ack()).await.expect("ack");
    assert_eq!(children(&framework, &format!("{path}-dead")).await.len(), 1);
    assert!(within("len", queue.is_empty()).await.expect("len"));
}

#[tokio::test]
async fn redelivery_limits_are_checked_at_build_and_nothing_is_written() {
    let (server, framework) = server_and_framework().await;
    let before = server.znode_count().await.expect("znodes");
    let refused = |builder: zk_recipes_queue::QueueBuilder<Vec<u8>>| builder.build().expect_err("refused");
    let queue = || DistributedQueue::builder(&framework, "/lifecycle/bad").lock_path("/lifecycle/bad-locks");
    for (what, err) in [
        ("max_deliveries 0", refused(queue().max_deliveries(0))),
        ("a dead-letter path without a limit", refused(queue().dead_letter_path("/lifecycle/bad-dead"))),
        ("the queue path", refused(queue().max_deliveries(2).dead_letter_path("/lifecycle/bad"))),
        ("the lock path", refused(queue().max_deliveries(2).dead_letter_path("/lifecycle/bad-locks"))),
        ("inside the queue", refused(queue().max_deliveries(2).dead_letter_path("/lifecycle/bad/dead"))),
        ("around the locks", refused(queue().max_deliveries(2).dead_letter_path("/lifecycle"))),
    ] {
        assert!(matches!(err, QueueError::InvalidArgument(_)), "{what}: {err}");
    }
    assert!(matches!(
        refused(queue().max_deliveries(2).dead_letter_path("no-slash")),
        QueueError::Framework(zk_recipes_framework::Error::InvalidPath { .. })
    ));
    assert_eq!(server.znode_count().await.expect("znodes"), before, "nothing was written");
}
