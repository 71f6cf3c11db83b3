//! Lock-safe (at-least-once) consumption against a real server: nothing lost, every ack commits
//! once, and only the items of a consumer that died before acking are delivered again.

mod common;

use std::collections::{BTreeSet, HashMap};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use common::*;
use futures::stream::{FuturesUnordered, StreamExt};
use parking_lot::Mutex;
use zk_recipes_framework::ConnectionState;
use zk_recipes_queue::{DistributedQueue, QueueError, Utf8Serializer};

const QUEUE: &str = "/lock-safe/queue";
const LOCKS: &str = "/lock-safe/locks";

fn queue_on(framework: &zk_recipes_framework::Framework) -> DistributedQueue<String> {
    DistributedQueue::builder(framework, QUEUE)
        .serializer(Utf8Serializer)
        .lock_path(LOCKS)
        .build()
        .expect("queue")
}

#[tokio::test]
async fn a_dead_consumers_item_is_redelivered_on_a_quiet_queue() {
    let (server, framework) = server_and_framework().await;
    let queue = queue_on(&framework);
    within("put", queue.put(&"only".to_string())).await.expect("put");

    let doomed = connect(&server).await;
    let mut doomed_consumer = queue_on(&doomed).consumer().prefetch(1);
    let held = within("doomed takes", doomed_consumer.next()).await.expect("open").expect("delivery");
    assert_eq!(held.items(), ["only"]);

    // A waiting consumer meets the lock, watches it, and gets the item when the holder dies, even
    // though the queue itself never changes.
    let states = Arc::new(Mutex::new(Vec::new()));
    let seen_states = states.clone();
    let survivor = connect(&server).await;
    let mut consumer = queue_on(&survivor)
        .consumer()
        .prefetch(1)
        .on_connection_state(move |state| seen_states.lock().push(state));
    let waiting = tokio::spawn(async move {
        let delivery = consumer.next().await.expect("open").expect("delivery");
        (delivery, consumer)
    });
    // The waiting consumer met the lock: it watches the doomed consumer's lock node.
    let lock_nodes = children(&framework, LOCKS).await;
    assert_eq!(lock_nodes.len(), 1, "the doomed consumer's lock: {lock_nodes:?}");
    let lock_node = format!("{LOCKS}/{}", lock_nodes[0]);
    let survivor_session = format!("{:#x}", survivor.current().session_id.expect("a session").0);
    eventually("the waiting consumer watches the lock node", || async {
        let watches = within("wchc", server.watches()).await.expect("wchc");
        watches.get(&survivor_session).is_some_and(|paths| paths.contains(&lock_node))
    })
    .await;
    assert!(!waiting.is_finished(), "the item is locked");
    let killed_at = Instant::now();
    within("close", doomed.close()).await; // the server deletes the doomed session's lock node
    let (delivery, consumer) = within("redelivery", waiting).await.expect("task");
    assert!(killed_at.elapsed() < Duration::from_secs(5), "redelivered at once, not at a poll");
    assert_eq!(delivery.items(), ["only"]);
    within("ack", delivery.ack()).await.expect("ack");
    // The dead consumer's ack is refused: its lock is gone, nothing committed twice.
    assert!(matches!(within("late ack", held.ack()).await, Err(QueueError::LockLost { .. })));
    drop((consumer, doomed_consumer));
    assert!(states.lock().iter().all(|state| *state != ConnectionState::Lost));
    assert!(within("empty", queue.is_empty()).await.expect("len"));
    no_children_left(&framework, LOCKS).await;
}

#[tokio::test]
async fn four_producers_four_consumers_nothing_lost_and_only_the_dead_consumers_items_redelivered() {
    let (server, framework) = server_and_framework().await;
    let started = Instant::now();
    let producers = 4;
    let per_producer = 2500;
    let total = producers * per_producer;
    let queue = queue_on(&framework);
    // Some items first, so the doomed consumer has something to hold.
    let first: Vec<String> = (0..100).map(|index| format!("p0-{index:04}")).collect();
    within("first put", queue.put_batch(&first)).await.expect("put");

    // The doomed consumer takes a few items and never acknowledges them.
    let doomed = connect(&server).await;
    let mut doomed_consumer = queue_on(&doomed).consumer().prefetch(4);
    let mut doomed_held = Vec::new();
    for _ in 0..4 {
        let delivery = within("doomed takes", doomed_consumer.next()).await.expect("open").expect("delivery");
        doomed_held.push(delivery);
    }
    let killed: BTreeSet<String> =
        doomed_held.iter().flat_map(|delivery| delivery.items().to_vec()).collect();

    let received: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let acked: Arc<Mutex<HashMap<String, usize>>> = Arc::default();
    let lock_lost = Arc::new(AtomicUsize::new(0));
    let mut consumers = Vec::new();
    let mut consumer_frameworks = Vec::new();
    for _ in 0..4 {
        let consumer_framework = connect(&server).await;
        let mut consumer = queue_on(&consumer_framework).consumer().prefetch(16);
        consumer_frameworks.push(consumer_framework);
        let (received, acked, lock_lost) = (received.clone(), acked.clone(), lock_lost.clone());
        consumers.push(tokio::spawn(async move {
            let mut acks = FuturesUnordered::new();
            loop {
                tokio::select! {
                    Some(()) = acks.next(), if !acks.is_empty() => {}
                    next = consumer.next(), if acks.len() < 16 => {
                        let Some(delivery) = next else { break };
                        let delivery = match delivery {
                            Ok(delivery) => delivery,
                            Err(err) if err.is_closed() => break,
                            Err(err) => panic!("consumer: {err}"),
                        };
                        let items = delivery.items().to_vec();
                        for item in &items {
                            *received.lock().entry(item.clone()).or_default() += 1;
                        }
                        let (acked, lock_lost) = (acked.clone(), lock_lost.clone());
                        acks.push(async move {
                            match within("ack", delivery.ack()).await {
                                Ok(()) => {
                                    for item in items {
                                        *acked.lock().entry(item).or_default() += 1;
                                    }
                                }
                                Err(QueueError::LockLost { .. }) => {
                                    lock_lost.fetch_add(1, Ordering::Relaxed);
                                }
                                Err(err) => panic!("ack: {err}"),
                            }
                        });
                    }
                }
            }
            while acks.next().await.is_some() {}
        }));
    }

    let mut producer_tasks = Vec::new();
    for producer in 0..producers {
        let producer_framework = connect(&server).await;
        producer_tasks.push(tokio::spawn(async move {
            let queue = queue_on(&producer_framework);
            let start = if producer == 0 { 100 } else { 0 };
            let items: Vec<String> =
                (start..per_producer).map(|index| format!("p{producer}-{index:04}")).collect();
            for (index, chunk) in items.chunks(50).enumerate() {
                if index % 4 == 3 {
                    // Some single puts among the batches.
                    for item in chunk {
                        within("put", queue.put(item)).await.expect("put");
                    }
                } else {
                    within("put_batch", queue.put_batch(chunk)).await.expect("put_batch");
                }
            }
            within("close", producer_framework.close()).await;
        }));
    }

    // Kill the doomed consumer while the others are busy.
    eventually("the others are busy", || async { acked.lock().len() >= 200 }).await;
    within("close", doomed.close()).await;
    drop(doomed_consumer);

    for task in producer_tasks {
        within_for(Duration::from_secs(60), "producer", task).await.expect("producer");
    }
    within_for(Duration::from_secs(60), "every item acknowledged", async {
        while acked.lock().len() < total {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // The doomed consumer's acks fail: its locks are gone, and the items went to the others.
    for delivery in doomed_held {
        let ack = within("the dead consumer's ack", delivery.ack()).await;
        assert!(matches!(ack, Err(QueueError::LockLost { .. })), "{ack:?}");
    }
    for consumer_framework in &consumer_frameworks {
        within("close", consumer_framework.close()).await;
    }
    for task in consumers {
        within("consumer", task).await.expect("consumer");
    }

    let received = received.lock().clone();
    let acked = acked.lock().clone();
    assert_eq!(acked.len(), total, "nothing lost");
    assert!(acked.values().all(|count| *count == 1), "every ack commits exactly once");
    assert_eq!(lock_lost.load(Ordering::Relaxed), 0, "live consumers never lose a lock");
    let redelivered: BTreeSet<String> =
        killed.iter().filter(|item| received.get(*item).copied().unwrap_or(0) == 1).cloned().collect();
    assert_eq!(redelivered, killed, "every item the dead consumer held went to another consumer");
    assert!(!killed.is_empty(), "at least one redelivery");
    let duplicates: Vec<&String> =
        received.iter().filter(|(_, count)| **count > 1).map(|(item, _)| item).collect();
    assert!(duplicates.is_empty(), "only the dead consumer's items are delivered twice: {duplicates:?}");
    // (The doomed consumer's receipts are not in `received`: each killed item was received once
    // more by a live consumer, and no other item was received twice.)
    assert!(within("empty", queue.is_empty()).await.expect("len"));
    no_children_left(&framework, LOCKS).await;
    eprintln!("{total} items, 4 producers, 4 consumers (+1 killed): {:?}", started.elapsed());
}

/// A priority consumer competing with another on a long queue must not list the whole queue again
/// for every item it takes: items the others took since its listing only shorten that listing (no
/// new item can have become the head). The chaos suite's Rust priority consumers fell far behind
/// Curator's on an 11,000-item queue because each take listed it again, often more than once.
/// A new item still goes first: a put changes the queue's child version, and the consumer lists.
#[tokio::test]
async fn a_priority_consumer_does_not_list_a_long_queue_again_for_every_item_others_take() {
    const PATH: &str = "/lock-safe/priority-listing/queue";
    const LOCK_PATH: &str = "/lock-safe/priority-listing/locks";
    const ITEMS: usize = 1500;
    const ROUNDS: u64 = 30;
    let priority_queue = |framework: &zk_recipes_framework::Framework| {
        DistributedQueue::builder(framework, PATH)
            .serializer(Utf8Serializer)
            .lock_path(LOCK_PATH)
            .build_priority()
            .expect("priority queue")
    };
    let (server, framework) = server_and_framework().await;
    let producer = priority_queue(&framework);
    let puts = futures::stream::iter(0..ITEMS)
        .map(|n| {
            let producer = &producer;
            async move { producer.put(&format!("p{n}"), (n % 7) as i32 - 3).await }
        })
        .buffer_unordered(64)
        .collect::<Vec<_>>();
    for put in within_for(Duration::from_secs(60), "puts", puts).await {
        put.expect("put");
    }

    let proxy =
        within("proxy", zk_recipes_testing::FaultProxy::start(server.address())).await.expect("proxy");
    let measured = builder(&proxy.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("connect", measured.block_until_connected(STEP)).await.expect("connected");
    let mut consumer = priority_queue(&measured).consumer().prefetch(1);
    let other_framework = connect(&server).await;
    let mut other = priority_queue(&other_framework).consumer().prefetch(1);

    // The first take lists the queue: that is what one listing costs.
    let first = within("first take", consumer.next()).await.expect("open").expect("delivery");
    within("ack", first.ack()).await.expect("ack");
    let one_listing = proxy.stats().bytes_to_client;
    assert!(one_listing > 30_000, "the listing of {ITEMS} items is big: {one_listing} bytes");

    let before = proxy.stats().bytes_to_client;
    for round in 0..ROUNDS {
        // Another consumer takes (the head) and acks, so the queue changes between our takes.
        let theirs = within("other take", other.next()).await.expect("open").expect("delivery");
        within("other ack", theirs.ack()).await.expect("other ack");
        let ours = within("take", consumer.next()).await.expect("open").expect("delivery");
        assert!(!ours.items().is_empty(), "round {round}");
        within("ack", ours.ack()).await.expect("ack");
    }
    let per_take = (proxy.stats().bytes_to_client - before) / ROUNDS;
    assert!(
        per_take * 10 < one_listing,
        "{per_take} bytes from the server per take, one listing is {one_listing}: the queue was listed again"
    );

    // An urgent item put now is the next one out.
    within("urgent put", producer.put(&"urgent".to_owned(), -100)).await.expect("put");
    let next = within("take after the put", consumer.next()).await.expect("open").expect("delivery");
    assert_eq!(next.items(), ["urgent"], "a new head is taken first");
    within("ack", next.ack()).await.expect("ack");
    drop(consumer);
    drop(other);
    within("close", measured.close()).await;
    within("close", other_framework.close()).await;
}

/// The zxid of a write made now (a probe node's `czxid`): the writes between two probes are the
/// transactions the server committed in between, a multi counting once.
async fn zxid_now(framework: &zk_recipes_framework::Framework, probe: &str) -> i64 {
    let session = within("session", framework.session(step())).await.expect("session");
    let options = zk_recipes_framework::zookeeper_client::CreateMode::PersistentSequential
        .with_acls(zk_recipes_framework::zookeeper_client::Acls::anyone_all());
    let (stat, _) = within("probe", session.client().create(probe, b"", &options)).await.expect("probe");
    stat.czxid
}

#[tokio::test]
async fn handlers_that_finish_at_once_are_acknowledged_in_one_multi() {
    const PATH: &str = "/lock-safe/group-ack/queue";
    const LOCK_PATH: &str = "/lock-safe/group-ack/locks";
    const PROBE: &str = "/lock-safe/group-ack/probe-";
    const ITEMS: usize = 16;
    let (_server, framework) = server_and_framework().await;
    let queue = DistributedQueue::builder(&framework, PATH)
        .serializer(Utf8Serializer)
        .lock_path(LOCK_PATH)
        .build()
        .expect("queue");
    let all: Vec<String> = (0..ITEMS).map(|index| format!("item-{index:02}")).collect();
    within("put", queue.put_batch(&all)).await.expect("put");

    // Every handler waits for all of them to have started: they finish at once.
    let started = Arc::new(tokio::sync::Barrier::new(ITEMS));
    let handled: Arc<Mutex<Vec<String>>> = Arc::default();
    let before = zxid_now(&framework, PROBE).await;
    let consumer = queue.consumer().prefetch(ITEMS);
    let stop = consumer.stop_token();
    let run = {
        let (started, handled) = (started.clone(), handled.clone());
        tokio::spawn(consumer.run(move |item: String| {
            let (started, handled) = (started.clone(), handled.clone());
            async move {
                started.wait().await;
                handled.lock().push(item);
                Ok::<_, String>(())
            }
        }))
    };
    eventually("every item acknowledged", || async {
        within("len", queue.len()).await.expect("len") == 0
            && children(&framework, LOCK_PATH).await.is_empty()
    })
    .await;
    let after = zxid_now(&framework, PROBE).await;
    stop.cancel();
    within("run returns", run).await.expect("task").expect("run");

    let mut handled = handled.lock().clone();
    handled.sort();
    assert_eq!(handled, all, "each item handled once");
    // One multi locking the 16 items (the reads commit nothing), one multi acknowledging them
    // (each ack alone, or the first alone and the rest together, would be more).
    assert_eq!(after - before - 1, 2, "transactions between the probes: the lock multi and one ack multi");
}
