//! The distributed queue family (plain, priority, delay, id, bounded) against a real server.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use common::*;
use parking_lot::Mutex;
use zk_recipes_framework::{local_address, Deadline, Error as FrameworkError};
use zk_recipes_queue::{
    names, Delivery, DistributedQueue, ErrorMode, FnSerializer, QueueError, Utf8Serializer,
};

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|item| item.to_string()).collect()
}

async fn next_delivery<T: Send + 'static>(consumer: &mut zk_recipes_queue::Consumer<T>) -> Delivery<T> {
    within("next delivery", consumer.next()).await.expect("consumer open").expect("delivery")
}

#[tokio::test]
async fn nodes_and_bytes_are_curators() {
    let (_server, framework) = server_and_framework().await;
    let queue = DistributedQueue::builder(&framework, "/dq/frame/queue")
        .lock_path("/dq/frame/locks")
        .build()
        .expect("queue");
    let first = within("put", queue.put(&b"hello".to_vec())).await.expect("put");
    assert_eq!(first, "queue-0000000000");
    let (bytes, stat) = data_and_stat(&framework, "/dq/frame/queue/queue-0000000000").await;
    assert_eq!(bytes, [0, 1, 0, 1, 1, 0, 0, 0, 5, b'h', b'e', b'l', b'l', b'o', 2], "Curator's framing");
    assert_eq!(stat.ephemeral_owner, 0, "items are persistent");

    let many = within("put_many", queue.put_many(&[b"a".to_vec(), b"bc".to_vec()])).await.expect("put_many");
    assert_eq!(many, "queue-0000000001", "several items, one node");
    let (bytes, _) = data_and_stat(&framework, "/dq/frame/queue/queue-0000000001").await;
    assert_eq!(bytes, [0, 1, 0, 1, 1, 0, 0, 0, 1, b'a', 1, 0, 0, 0, 2, b'b', b'c', 2]);

    let batch = within("put_batch", queue.put_batch(&[b"x".to_vec(), b"y".to_vec(), b"z".to_vec()]))
        .await
        .expect("put_batch");
    assert_eq!(
        batch,
        ["queue-0000000002", "queue-0000000003", "queue-0000000004"],
        "one node each, in one multi"
    );
    assert_eq!(within("len", queue.len()).await.expect("len"), 5);

    // The queue path and lock path are PERSISTENT with this host's address; their parent a container.
    for persistent in ["/dq/frame/queue", "/dq/frame/locks"] {
        let (bytes, stat) = data_and_stat(&framework, persistent).await;
        assert_eq!(bytes, local_address(), "{persistent} holds the host address");
        assert_eq!(stat.ephemeral_owner, 0, "{persistent} is persistent");
    }

    let mut consumer = queue.consumer().prefetch(1);
    let delivery = next_delivery(&mut consumer).await;
    assert_eq!(delivery.name(), "queue-0000000000");
    assert_eq!(delivery.items(), [b"hello".to_vec()]);
    assert_eq!(delivery.lock_node(), Some("/dq/frame/locks/queue-0000000000"));
    let (lock_data, lock_stat) = data_and_stat(&framework, "/dq/frame/locks/queue-0000000000").await;
    assert_eq!(lock_data, local_address(), "lock nodes hold the host address");
    let session = framework.session(Deadline::after(STEP)).await.expect("session");
    assert!(session.owns(lock_stat.ephemeral_owner), "the lock node is our session's ephemeral node");
    within("ack", delivery.ack()).await.expect("ack");
    assert!(!children(&framework, "/dq/frame/queue").await.contains(&"queue-0000000000".to_string()));

    let delivery = next_delivery(&mut consumer).await;
    assert_eq!(delivery.items(), [b"a".to_vec(), b"bc".to_vec()], "a multi-item node comes as one delivery");
    within("ack", delivery.ack()).await.expect("ack");
    for expected in ["x", "y", "z"] {
        let delivery = next_delivery(&mut consumer).await;
        assert_eq!(delivery.items(), [expected.as_bytes().to_vec()], "FIFO");
        within("ack", delivery.ack()).await.expect("ack");
    }
    drop(consumer);
    assert!(within("is_empty", queue.is_empty()).await.expect("len"));
    no_children_left(&framework, "/dq/frame/locks").await;
}

#[tokio::test]
async fn without_a_lock_path_items_are_deleted_before_delivery() {
    let (_server, framework) = server_and_framework().await;
    let queue =
        DistributedQueue::builder(&framework, "/dq/plain").serializer(Utf8Serializer).build().expect("queue");
    let items: Vec<String> = (0..40).map(|index| format!("item-{index:02}")).collect();
    within("put_batch", queue.put_batch(&items)).await.expect("put");
    let mut consumer = queue.consumer().prefetch(4);
    let delivery = next_delivery(&mut consumer).await;
    assert_eq!(delivery.items(), ["item-00"]);
    assert_eq!(delivery.lock_node(), None);
    assert!(
        !children(&framework, "/dq/plain").await.contains(&delivery.name().to_string()),
        "at most once: the node is gone before the item is handed out"
    );
    within("ack", delivery.ack()).await.expect("ack is a no-op");
    let mut seen = vec!["item-00".to_string()];
    for _ in 0..19 {
        let delivery = next_delivery(&mut consumer).await;
        seen.extend(delivery.items().iter().cloned());
        drop(delivery); // counts as consumed
    }
    assert_eq!(seen, items[..20], "one consumer sees FIFO order");
    // Items the consumer took ahead but never handed out go back when it is dropped.
    drop(consumer);
    within("flush", queue.flush_background(Deadline::after(STEP))).await.expect("flush");
    eventually("20 items left", || async { queue.len().await.expect("len") == 20 }).await;
    let mut consumer = queue.consumer();
    let mut rest = Vec::new();
    while rest.len() < 20 {
        let delivery = next_delivery(&mut consumer).await;
        rest.extend(delivery.items().iter().cloned());
        within("ack", delivery.ack()).await.expect("ack");
    }
    rest.sort();
    assert_eq!(rest, items[20..], "nothing lost, nothing doubled");
}

#[tokio::test]
async fn a_failed_handler_requeues_or_deletes() {
    let (server, framework) = server_and_framework().await;
    let checker = connect(&server).await;
    for mode in [ErrorMode::Requeue, ErrorMode::Delete] {
        let worker = connect(&server).await;
        let (queue_path, lock_path) =
            (format!("/dq/fail-{mode:?}/queue"), format!("/dq/fail-{mode:?}/locks"));
        let queue = DistributedQueue::builder(&worker, queue_path.clone())
            .serializer(Utf8Serializer)
            .lock_path(lock_path.clone())
            .error_mode(mode)
            .build()
            .expect("queue");
        within("put", queue.put_batch(&strings(&["good-1", "bad", "good-2"]))).await.expect("put");
        let calls: Arc<Mutex<HashMap<String, u32>>> = Arc::default();
        let handler_calls = calls.clone();
        let run = tokio::spawn(queue.consumer().prefetch(2).run(move |item: String| {
            let calls = handler_calls.clone();
            async move {
                let call = {
                    let mut calls = calls.lock();
                    let count = calls.entry(item.clone()).or_default();
                    *count += 1;
                    *count
                };
                if item == "bad" && call == 1 {
                    return Err(format!("{item} fails the first time"));
                }
                Ok(())
            }
        }));
        let expected_bad_calls = if mode == ErrorMode::Requeue { 2 } else { 1 };
        eventually("every item handled and the queue empty", || async {
            let handled = calls.lock().get("bad") == Some(&expected_bad_calls) && calls.lock().len() == 3;
            handled && children(&checker, &queue_path).await.is_empty()
        })
        .await;
        assert_eq!(calls.lock().get("good-1"), Some(&1));
        assert_eq!(calls.lock().get("good-2"), Some(&1));
        worker.close().await;
        within("run ends when the framework closes", run).await.expect("task").expect("run");
        no_children_left(&checker, &lock_path).await;
    }

    // Requeue by hand: a new node at the tail with the same bytes, in one multi with the delete.
    let queue = DistributedQueue::builder(&framework, "/dq/requeue")
        .lock_path("/dq/requeue-locks")
        .build()
        .expect("queue");
    within("put", queue.put_many(&[b"one".to_vec(), b"two".to_vec()])).await.expect("put");
    let mut consumer = queue.consumer().prefetch(1);
    let delivery = next_delivery(&mut consumer).await;
    let (old_name, old_bytes) = (delivery.name().to_string(), delivery.bytes().to_vec());
    let new_name = within("requeue", delivery.requeue()).await.expect("requeue").expect("new name");
    assert!(new_name > old_name, "{new_name} goes to the tail");
    assert_eq!(children(&framework, "/dq/requeue").await, std::slice::from_ref(&new_name));
    assert_eq!(data_and_stat(&framework, &format!("/dq/requeue/{new_name}")).await.0, old_bytes);
    let delivery = next_delivery(&mut consumer).await;
    assert_eq!(delivery.items(), [b"one".to_vec(), b"two".to_vec()]);
    within("reject", delivery.reject()).await.expect("reject");
    drop(consumer);
    assert!(within("empty", queue.is_empty()).await.expect("len"));
    no_children_left(&framework, "/dq/requeue-locks").await;
}

#[tokio::test]
async fn priority_queue_takes_lowest_priority_first() {
    let (_server, framework) = server_and_framework().await;
    let queue = DistributedQueue::builder(&framework, "/dq/priority")
        .serializer(Utf8Serializer)
        .lock_path("/dq/priority-locks")
        .build_priority()
        .expect("queue");
    let puts = [
        ("five-a", 5),
        ("minus-three", -3),
        ("zero", 0),
        ("hundred", 100),
        ("minus-hundred", -100),
        ("five-b", 5),
    ];
    for (item, priority) in puts {
        let name = within("put", queue.put(&item.to_string(), priority)).await.expect("put");
        assert!(name.starts_with(&names::priority_name(priority)), "{name}");
        assert_eq!(names::parse_priority(&name), Some(priority));
    }
    let mut consumer = queue.consumer().prefetch(1);
    let mut order = Vec::new();
    for _ in 0..3 {
        let delivery = next_delivery(&mut consumer).await;
        order.extend(delivery.items().iter().cloned());
        within("ack", delivery.ack()).await.expect("ack");
    }
    // An urgent item put now goes before the rest.
    within("put", queue.put(&"urgent".to_string(), i32::MIN)).await.expect("put");
    for _ in 0..4 {
        let delivery = next_delivery(&mut consumer).await;
        order.extend(delivery.items().iter().cloned());
        within("ack", delivery.ack()).await.expect("ack");
    }
    assert_eq!(
        order,
        strings(&["minus-hundred", "minus-three", "zero", "urgent", "five-a", "five-b", "hundred"])
    );
    drop(consumer);
    no_children_left(&framework, "/dq/priority-locks").await;
}

fn epoch_ms(time: SystemTime) -> i64 {
    time.duration_since(UNIX_EPOCH).expect("after 1970").as_millis() as i64
}

#[tokio::test]
async fn delay_queue_delivers_on_time() {
    let (_server, framework) = server_and_framework().await;
    let queue = DistributedQueue::builder(&framework, "/dq/delay")
        .serializer(Utf8Serializer)
        .lock_path("/dq/delay-locks")
        .build_delay()
        .expect("queue");
    let now = SystemTime::now();
    let plan = [("late", 1200u64), ("early", 400), ("now", 0), ("middle", 800)];
    for (item, delay_ms) in plan {
        let due = now + Duration::from_millis(delay_ms);
        let name = within("put", queue.put(&item.to_string(), due)).await.expect("put");
        assert!(name.starts_with(&names::delay_name(epoch_ms(due) as u64)), "{name}");
        assert_eq!(names::parse_due(&name), epoch_ms(due));
    }
    let mut consumer = queue.consumer();
    let mut order = Vec::new();
    for _ in 0..plan.len() {
        let delivery = next_delivery(&mut consumer).await;
        let received = epoch_ms(SystemTime::now());
        let due = names::parse_due(delivery.name());
        assert!(received >= due, "{} delivered {} ms early", delivery.name(), due - received);
        assert!(received - due < 1000, "{} delivered {} ms late", delivery.name(), received - due);
        order.extend(delivery.items().iter().cloned());
        within("ack", delivery.ack()).await.expect("ack");
    }
    assert_eq!(order, strings(&["now", "early", "middle", "late"]));
    drop(consumer);
    no_children_left(&framework, "/dq/delay-locks").await;
}

#[tokio::test]
async fn id_queue_removes_by_id() {
    let (server, framework) = server_and_framework().await;
    let queue = DistributedQueue::builder(&framework, "/dq/ids")
        .serializer(Utf8Serializer)
        .lock_path("/dq/ids-locks")
        .build_id()
        .expect("queue");
    let a = within("put", queue.put(&"a".to_string(), "x/1")).await.expect("put");
    within("put", queue.put(&"b".to_string(), "y")).await.expect("put");
    within("put", queue.put(&"c".to_string(), "x/1")).await.expect("put");
    within("put", queue.put(&"d".to_string(), "held")).await.expect("put");
    assert!(a.starts_with("queue-|x_1|"), "{a}");
    assert_eq!(names::parse_id(&a).map(|(id, _)| id.to_string()), Some("x_1".to_string()));

    // Another session holds "d": remove leaves it alone.
    let other = connect(&server).await;
    let other_queue = DistributedQueue::builder(&other, "/dq/ids")
        .serializer(Utf8Serializer)
        .lock_path("/dq/ids-locks")
        .build_id()
        .expect("queue");
    assert_eq!(within("remove", queue.remove("x/1")).await.expect("remove"), 2);
    let mut other_consumer = other_queue.consumer().prefetch(1);
    let held_b = next_delivery(&mut other_consumer).await;
    assert_eq!(held_b.items(), ["b"]);
    let held_d = next_delivery(&mut other_consumer).await;
    assert_eq!(held_d.items(), ["d"]);
    assert_eq!(
        within("remove", queue.remove("held")).await.expect("remove"),
        0,
        "a held item is not removed"
    );
    assert_eq!(within("remove", queue.remove("nobody")).await.expect("remove"), 0);
    within("ack", held_b.ack()).await.expect("ack");
    drop(held_d); // released: delivered again
    let mut consumer = queue.consumer().prefetch(1);
    let delivery = next_delivery(&mut consumer).await;
    assert_eq!(delivery.items(), ["d"]);
    within("ack", delivery.ack()).await.expect("ack");
    drop((consumer, other_consumer));
    assert!(within("empty", queue.is_empty()).await.expect("len"));
    no_children_left(&framework, "/dq/ids-locks").await;
}

#[tokio::test]
async fn bounded_queue_blocks_producers_and_overshoots_by_at_most_producers_minus_one() {
    let (server, framework) = server_and_framework().await;
    let queue = DistributedQueue::builder(&framework, "/dq/bounded").max_items(5).build().expect("queue");
    for index in 0..5u8 {
        within("put", queue.put(&vec![index])).await.expect("put");
    }
    let blocked_queue = queue.clone();
    let blocked = tokio::spawn(async move { blocked_queue.put(&vec![99]).await });
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert!(!blocked.is_finished(), "a producer waits while the queue is full");
    let mut consumer = queue.consumer().prefetch(1);
    let delivery = next_delivery(&mut consumer).await;
    within("the blocked producer goes on once there is room", blocked).await.expect("task").expect("put");
    drop(delivery);
    drop(consumer);
    within("flush", queue.flush_background(Deadline::after(STEP))).await.expect("flush");

    // Overshoot: producers that look at the same time all see room.
    let bounded =
        DistributedQueue::builder(&framework, "/dq/overshoot").max_items(10).build().expect("queue");
    within("put", bounded.put_batch(&(0..9u8).map(|index| vec![index]).collect::<Vec<_>>()))
        .await
        .expect("put");
    let producers = 4;
    let mut tasks = Vec::new();
    for producer in 0..producers {
        let framework = connect(&server).await;
        let queue = DistributedQueue::builder(&framework, "/dq/overshoot")
            .max_items(10)
            .put_timeout(Duration::from_millis(1500))
            .build()
            .expect("queue");
        tasks.push(tokio::spawn(async move {
            let mut stored = 0;
            for item in 0..3u8 {
                match queue.put(&vec![producer, item]).await {
                    Ok(_) => stored += 1,
                    Err(err) if err.is_timeout() => break,
                    Err(err) => panic!("put: {err}"),
                }
            }
            framework.close().await;
            stored
        }));
    }
    let mut stored = 0;
    for task in tasks {
        stored += within("producer", task).await.expect("task");
    }
    let len = within("len", bounded.len()).await.expect("len");
    assert_eq!(len, 9 + stored);
    assert!(len >= 10, "room was used");
    assert!(len < 10 + producers as usize, "overshoot {len} > max_items + producers - 1");
}

#[tokio::test]
async fn a_put_timeout_can_be_set_per_call() {
    let (_server, framework) = server_and_framework().await;
    let queue = DistributedQueue::builder(&framework, "/dq/per-call").max_items(1).build().expect("queue");
    within("put", queue.put(&vec![1])).await.expect("room for one");
    assert_eq!(queue.put_timeout(), None);
    let impatient = queue.with_put_timeout(Duration::from_millis(300));
    assert_eq!(impatient.put_timeout(), Some(Duration::from_millis(300)));
    let refused = within("put on a full queue", impatient.put(&vec![2])).await.expect_err("full");
    assert!(refused.is_timeout(), "{refused}");
    let refused = within("put_batch", impatient.put_batch(&[vec![3]])).await.expect_err("full");
    assert!(refused.is_timeout(), "{refused}");
    assert_eq!(queue.put_timeout(), None, "the original handle keeps its deadline");
    assert_eq!(within("len", queue.len()).await.expect("len"), 1, "nothing was added");

    let priorities = DistributedQueue::builder(&framework, "/dq/per-call-priority")
        .max_items(1)
        .build_priority()
        .expect("queue");
    within("put", priorities.put(&vec![1], 0)).await.expect("room for one");
    let refused =
        within("priority put", priorities.with_put_timeout(Duration::from_millis(300)).put(&vec![2], 0))
            .await
            .expect_err("full");
    assert!(refused.is_timeout(), "{refused}");
}

#[tokio::test]
async fn bad_input_is_refused_and_nothing_is_written() {
    let (server, framework) = server_and_framework().await;
    let before = server.znode_count().await.expect("znodes");
    let build_error = |result: Result<DistributedQueue<Vec<u8>>, QueueError>| result.expect_err("refused");
    assert!(matches!(
        build_error(DistributedQueue::builder(&framework, "relative").build()),
        QueueError::Framework(FrameworkError::InvalidPath { .. })
    ));
    assert!(matches!(
        build_error(DistributedQueue::builder(&framework, "/dq/bad").lock_path("/dq//locks").build()),
        QueueError::Framework(FrameworkError::InvalidPath { .. })
    ));
    assert!(matches!(
        build_error(DistributedQueue::builder(&framework, "/dq/bad").lock_path("/dq/bad").build()),
        QueueError::InvalidArgument(_)
    ));
    for (queue_path, lock_path) in [("/dq/bad", "/dq/bad/locks"), ("/dq/bad-outer/inner", "/dq/bad-outer")] {
        let refused =
            build_error(DistributedQueue::builder(&framework, queue_path).lock_path(lock_path).build());
        assert!(
            matches!(&refused, QueueError::InvalidArgument(reason) if reason.contains("inside")),
            "{queue_path} with locks at {lock_path}: {refused}"
        );
    }
    // A sibling whose name starts with the queue's is not nested.
    DistributedQueue::builder(&framework, "/dq/bad").lock_path("/dq/bad-locks").build().expect("siblings");
    assert!(matches!(
        build_error(DistributedQueue::builder(&framework, "/dq/bad").max_items(0).build()),
        QueueError::InvalidArgument(_)
    ));
    assert!(matches!(
        DistributedQueue::builder(&framework, "/dq/a|b").build_id().expect_err("refused"),
        QueueError::InvalidArgument(_)
    ));

    let queue =
        DistributedQueue::builder(&framework, "/dq/bad").lock_path("/dq/bad-locks").build().expect("queue");
    let huge = vec![1u8; 1024 * 1024];
    assert!(matches!(within("put", queue.put(&huge)).await, Err(QueueError::ItemTooLarge { .. })));
    let halves = [vec![1u8; 600 * 1024], vec![2u8; 600 * 1024]];
    assert!(matches!(
        within("put_many", queue.put_many(&halves)).await,
        Err(QueueError::ItemTooLarge { .. })
    ));
    let batch = [b"fine".to_vec(), huge.clone()];
    assert!(matches!(
        within("put_batch", queue.put_batch(&batch)).await,
        Err(QueueError::ItemTooLarge { .. })
    ));
    assert!(matches!(within("put_many", queue.put_many(&[])).await, Err(QueueError::InvalidArgument(_))));

    let refusing = DistributedQueue::builder(&framework, "/dq/bad")
        .serializer(FnSerializer::new(
            |item: &u32| if *item == 13 { Err("unlucky".into()) } else { Ok(item.to_be_bytes().to_vec()) },
            |bytes: &[u8]| Ok(u32::from_be_bytes(bytes.try_into()?)),
        ))
        .build()
        .expect("queue");
    assert!(matches!(within("put", refusing.put_batch(&[1, 13])).await, Err(QueueError::Serialize(_))));

    let ids = DistributedQueue::builder(&framework, "/dq/bad-ids").build_id().expect("queue");
    assert!(matches!(within("put", ids.put(&vec![1], "")).await, Err(QueueError::InvalidArgument(_))));
    let delays = DistributedQueue::builder(&framework, "/dq/bad-delay").build_delay().expect("queue");
    assert!(matches!(
        within("put", delays.put(&vec![1], UNIX_EPOCH)).await,
        Err(QueueError::InvalidArgument(_))
    ));

    let closing = connect(&server).await;
    let closed_queue = DistributedQueue::builder(&closing, "/dq/closed").build().expect("queue");
    closing.close().await;
    let closed = within("put", closed_queue.put(&vec![1])).await;
    assert!(matches!(&closed, Err(err) if err.is_closed()), "{closed:?}");
    let mut consumer = closed_queue.consumer();
    assert!(within("next", consumer.next()).await.is_none(), "a closed framework's consumer ends");

    assert_eq!(server.znode_count().await.expect("znodes"), before, "nothing was written");
}
