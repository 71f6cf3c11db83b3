//! Queues under connection faults at the worst moments, against a real server: a [`FaultProxy`]
//! between the consumer and the server drops the reply to the one request that matters (the
//! ack's multi, the lock create, the take's delete), cuts the connection while a handler runs, or
//! black-holes the consumer until its session expires. Items are never lost in lock-safe mode,
//! never delivered twice by a live consumer, and at most once means at most once.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use zk_recipes_framework::{ConnectionState, Deadline, Framework};
use zk_recipes_queue::{Consumer, Delivery, DistributedQueue, QueueError, Utf8Serializer};
use zk_recipes_testing::{CutReply, FaultProxy, RequestMatch, TestingServer};

/// ZooKeeper op codes in a multi's operations ([`zk_recipes_testing::CutReply::ops`]).
const CHECK: i32 = 13;
const DELETE: i32 = 2;
/// zookeeper-client's create in a multi (create2 or create, by server version).
const CREATE: i32 = 1;
const CREATE2: i32 = 15;
const GET_DATA: i32 = 4;

fn queue_on(framework: &Framework, path: &str, lock_path: Option<&str>) -> DistributedQueue<String> {
    let builder = DistributedQueue::builder(framework, path).serializer(Utf8Serializer);
    match lock_path {
        Some(lock_path) => builder.lock_path(lock_path).build(),
        None => builder.build(),
    }
    .expect("queue")
}

/// A proxy in front of `server` and a framework connected through it.
async fn proxied(server: &TestingServer, session_timeout: Duration) -> (FaultProxy, Framework) {
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), session_timeout).start().expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    (proxy, framework)
}

async fn session_id(framework: &Framework) -> i64 {
    within("session", framework.session(Deadline::after(STEP))).await.expect("session").id().0
}

/// The next delivery, which must come within [`STEP`] (the consumer reports connection trouble and
/// goes on: those errors are skipped).
async fn next_delivery(consumer: &mut Consumer<String>) -> Delivery<String> {
    within("next delivery", async {
        loop {
            match consumer.next().await.expect("consumer open") {
                Ok(delivery) => return delivery,
                Err(err) if err.is_retryable() => continue,
                Err(err) => panic!("consumer: {err}"),
            }
        }
    })
    .await
}

/// How many times the handler saw each item.
#[derive(Clone, Default)]
struct Handled(Arc<Mutex<BTreeMap<String, usize>>>);

impl Handled {
    fn record(&self, item: &str) {
        *self.0.lock().entry(item.to_owned()).or_default() += 1;
    }

    fn count(&self, item: &str) -> usize {
        self.0.lock().get(item).copied().unwrap_or(0)
    }

    fn snapshot(&self) -> BTreeMap<String, usize> {
        self.0.lock().clone()
    }

    /// Waits until every one of `items` was handled at least once.
    async fn wait_for(&self, items: &[&str]) {
        let what = format!("{items:?} handled");
        eventually(&what, || async { items.iter().all(|item| self.count(item) > 0) }).await;
    }
}

/// Waits until the queue at `path` and the lock path are both empty (seen by `observer`).
async fn drained(observer: &Framework, path: &str, lock_path: &str) {
    no_children_left(observer, path).await;
    no_children_left(observer, lock_path).await;
}

#[tokio::test]
async fn lock_safe_an_ack_committed_whose_reply_was_cut_is_done_once_and_consuming_goes_on() {
    const QUEUE: &str = "/faults-ack/queue";
    const LOCKS: &str = "/faults-ack/locks";
    let (server, observer) = server_and_framework().await;
    let (proxy, framework) = proxied(&server, Duration::from_secs(10)).await;
    let producer = queue_on(&observer, QUEUE, Some(LOCKS));
    let first = within("put", producer.put(&"first".to_string())).await.expect("put");
    let session = session_id(&framework).await;

    let mut consumer = queue_on(&framework, QUEUE, Some(LOCKS)).consumer().prefetch(1);
    let delivery = next_delivery(&mut consumer).await;
    assert_eq!((delivery.name(), delivery.items()), (first.as_str(), &["first".to_string()][..]));
    assert_eq!(children(&observer, LOCKS).await, vec![first.clone()], "we hold the lock");

    let cut = proxy.cut_after_next_reply(RequestMatch::multi().under(LOCKS));
    // The server commits the ack's multi; its reply is dropped and the connection closed. The ack
    // retries on the same session, finds its lock and the item gone, and knows its try committed.
    within("ack", delivery.ack()).await.expect("the interrupted ack reports success");
    let cut = within("the cut", cut).await.expect("the proxy cut the ack's reply");
    let (lock_node, item_node) = (format!("{LOCKS}/{first}"), format!("{QUEUE}/{first}"));
    assert_eq!(
        cut.ops,
        vec![(CHECK, lock_node.clone()), (DELETE, item_node), (DELETE, lock_node)],
        "the cut request was the ack: check our lock, delete the item, delete our lock"
    );
    assert_eq!(proxy.stats().cut, 1);
    assert_eq!(session_id(&framework).await, session, "the same session throughout");
    drained(&observer, QUEUE, LOCKS).await;

    // The consumer goes on with later items, in order, and never sees the first one again (it is
    // gone from the server, so it cannot come back later either).
    within("put later", producer.put_batch(&["second".to_string(), "third".to_string()])).await.expect("put");
    let mut later = Vec::new();
    for _ in 0..2 {
        let delivery = next_delivery(&mut consumer).await;
        later.extend(delivery.items().to_vec());
        within("ack", delivery.ack()).await.expect("ack");
    }
    assert_eq!(later, ["second", "third"]);
    drained(&observer, QUEUE, LOCKS).await;
    within("close", framework.close()).await;
}

/// A lock-safe consumer (through a proxy, handler counting) takes `items` while the proxy cuts
/// the connection after the reply to the request `cut_request` matches; then it takes two later
/// items. Every item is handled exactly once, and no lock node is left. Returns the cut request.
async fn each_item_once_despite_a_cut(
    queue_path: &str,
    lock_path: &str,
    items: &[&str],
    prefetch: usize,
    cut_request: RequestMatch,
) -> CutReply {
    let (server, observer) = server_and_framework().await;
    let (proxy, framework) = proxied(&server, Duration::from_secs(10)).await;
    let producer = queue_on(&observer, queue_path, Some(lock_path));
    let owned: Vec<String> = items.iter().map(|item| item.to_string()).collect();
    within("put", producer.put_batch(&owned)).await.expect("put");

    let cut = proxy.cut_after_next_reply(cut_request);
    let handled = Handled::default();
    let consumer = queue_on(&framework, queue_path, Some(lock_path)).consumer().prefetch(prefetch);
    let recorder = handled.clone();
    let running = tokio::spawn(consumer.run(move |item: String| {
        recorder.record(&item);
        async { Ok::<(), std::io::Error>(()) }
    }));
    let cut = within("the cut", cut).await.expect("the proxy cut a reply");
    assert_eq!(cut.server_error, 0, "the server did what was asked: {cut:?}");

    // The consumer finds out what its lost request did, lets go of what it did not take, and
    // takes it again.
    handled.wait_for(items).await;
    drained(&observer, queue_path, lock_path).await;
    let later = ["later-1", "later-2"];
    within("put later", producer.put_batch(&later.map(str::to_owned))).await.expect("put");
    handled.wait_for(&later).await;
    drained(&observer, queue_path, lock_path).await;
    let expected: BTreeMap<String, usize> =
        items.iter().chain(&later).map(|item| (item.to_string(), 1)).collect();
    assert_eq!(handled.snapshot(), expected, "each item handled exactly once");
    assert_eq!(proxy.stats().cut, 1);
    within("close", framework.close()).await;
    within("consumer stops", running).await.expect("task").expect("run");
    cut
}

#[tokio::test]
async fn lock_safe_a_handlers_ack_committed_whose_reply_was_cut_is_handled_once() {
    const QUEUE: &str = "/faults-run-ack/queue";
    const LOCKS: &str = "/faults-run-ack/locks";
    // With room for one item, the consumer's first multi under the lock path is the ack.
    let cut =
        each_item_once_despite_a_cut(QUEUE, LOCKS, &["first"], 1, RequestMatch::multi().under(LOCKS)).await;
    let (lock_node, item_node) = (format!("{LOCKS}/queue-0000000000"), format!("{QUEUE}/queue-0000000000"));
    assert_eq!(cut.ops, vec![(CHECK, lock_node.clone()), (DELETE, item_node), (DELETE, lock_node)]);
}

#[tokio::test]
async fn lock_safe_a_lock_create_whose_reply_was_cut_still_delivers_the_item_once() {
    const LOCKS: &str = "/faults-lock/locks";
    // Only the lock node's create (not the queue and lock paths the consumer makes sure of).
    let cut_request = RequestMatch::create().under(format!("{LOCKS}/"));
    let cut = each_item_once_despite_a_cut("/faults-lock/queue", LOCKS, &["first"], 1, cut_request).await;
    assert_eq!(cut.path, format!("{LOCKS}/queue-0000000000"), "our lock node was created");
}

#[tokio::test]
async fn lock_safe_a_lock_multi_whose_reply_was_cut_still_delivers_each_item_once() {
    const LOCKS: &str = "/faults-lock-multi/locks";
    // A consumer with room for several items locks them in one multi of creates.
    let cut_request = RequestMatch::multi().under(LOCKS);
    let cut =
        each_item_once_despite_a_cut("/faults-lock-multi/queue", LOCKS, &["a", "b", "c"], 4, cut_request)
            .await;
    assert!(
        cut.ops.len() > 1
            && cut
                .ops
                .iter()
                .all(|(op_code, path)| [CREATE, CREATE2].contains(op_code) && path.starts_with(LOCKS)),
        "the cut request locked a batch: {:?}",
        cut.ops
    );
}

#[tokio::test]
async fn lock_safe_a_locked_items_read_whose_reply_was_cut_still_delivers_it_once() {
    const QUEUE: &str = "/faults-read/queue";
    // The lock create's reply arrives; the reply to the item's read (sent right behind it) is cut.
    let cut_request = RequestMatch::op_codes([GET_DATA]).under(format!("{QUEUE}/"));
    let cut = each_item_once_despite_a_cut(QUEUE, "/faults-read/locks", &["first"], 1, cut_request).await;
    assert_eq!(cut.path, format!("{QUEUE}/queue-0000000000"));
}

#[tokio::test]
async fn lock_safe_a_cut_while_the_handler_runs_keeps_the_lock_and_acks_once() {
    const QUEUE: &str = "/faults-handler/queue";
    const LOCKS: &str = "/faults-handler/locks";
    let (server, observer) = server_and_framework().await;
    let (proxy, framework) = proxied(&server, Duration::from_secs(10)).await;
    let producer = queue_on(&observer, QUEUE, Some(LOCKS));
    let first = within("put", producer.put(&"first".to_string())).await.expect("put");
    let session = session_id(&framework).await;

    // The handler tells us it started, then waits until we let it finish.
    let (started, mut handler_started) = mpsc::unbounded_channel::<String>();
    let (finish, finish_handler) = oneshot::channel::<()>();
    let finish_handler = Arc::new(Mutex::new(Some(finish_handler)));
    let handled = Handled::default();
    let consumer = queue_on(&framework, QUEUE, Some(LOCKS)).consumer().prefetch(1);
    let recorder = handled.clone();
    let running = tokio::spawn(consumer.run(move |item: String| {
        recorder.record(&item);
        let _ = started.send(item);
        let wait = finish_handler.lock().take();
        async move {
            if let Some(wait) = wait {
                let _ = wait.await;
            }
            Ok::<(), std::io::Error>(())
        }
    }));
    let mut events = framework.connection_events();
    assert_eq!(within("handler starts", handler_started.recv()).await.as_deref(), Some("first"));

    assert_eq!(proxy.cut_now(), 1, "one connection was open");
    until_state(&mut events, ConnectionState::Reconnected).await;
    assert_eq!(session_id(&framework).await, session, "the session survived the cut");
    assert_eq!(children(&observer, LOCKS).await, vec![first.clone()], "we still hold the lock");
    assert_eq!(children(&observer, QUEUE).await, vec![first], "the item waits for our ack");

    finish.send(()).expect("handler waiting");
    drained(&observer, QUEUE, LOCKS).await;
    within("put later", producer.put(&"second".to_string())).await.expect("put");
    handled.wait_for(&["second"]).await;
    drained(&observer, QUEUE, LOCKS).await;
    let expected: BTreeMap<String, usize> = ["first", "second"].map(|item| (item.to_owned(), 1)).into();
    assert_eq!(handled.snapshot(), expected, "each item handled exactly once");
    within("close", framework.close()).await;
    within("consumer stops", running).await.expect("task").expect("run");
}

/// Warnings logged on this thread while capturing: every task of a `#[tokio::test]` (one
/// thread), so the consumer's too.
#[derive(Clone, Default)]
struct Warnings(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Warnings {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.lock().extend_from_slice(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Warnings {
    fn capture(&self) -> tracing::subscriber::DefaultGuard {
        let writer = self.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_max_level(tracing::Level::WARN)
            .with_ansi(false)
            .without_time()
            .with_writer(move || writer.clone())
            .finish();
        tracing::subscriber::set_default(subscriber)
    }

    /// The captured lines that contain `needle`.
    fn lines_with(&self, needle: &str) -> Vec<String> {
        let text = String::from_utf8_lossy(&self.0.lock()).into_owned();
        text.lines().filter(|line| line.contains(needle)).map(str::to_owned).collect()
    }
}

/// At most once: a consumer (through a proxy) takes `items`, put as one node each, while the
/// proxy cuts the connection after the reply to the take's delete (`cut_request`: a delete, or
/// a multi of deletes for a batch). The server deleted them, the consumer never learnt it won:
/// it hands none of them out (another consumer might have won), warns that each may be lost, and
/// goes on with later items. Returns the cut request.
async fn at_most_once_take_cut(
    queue_path: &str,
    items: &[&str],
    prefetch: usize,
    cut_request: RequestMatch,
) -> CutReply {
    let warnings = Warnings::default();
    let _capture = warnings.capture();
    let (server, observer) = server_and_framework().await;
    let (proxy, framework) = proxied(&server, Duration::from_secs(10)).await;
    let producer = queue_on(&observer, queue_path, None);
    let owned: Vec<String> = items.iter().map(|item| item.to_string()).collect();
    let names = within("put", producer.put_batch(&owned)).await.expect("put");

    let cut = proxy.cut_after_next_reply(cut_request);
    let mut consumer = queue_on(&framework, queue_path, None).consumer().prefetch(prefetch);
    let (deliveries, mut delivered) = mpsc::unbounded_channel::<Vec<String>>();
    let running = tokio::spawn(async move {
        while let Some(delivery) = consumer.next().await {
            match delivery {
                Ok(delivery) => {
                    let _ = deliveries.send(delivery.items().to_vec());
                }
                Err(err) if err.is_closed() => break,
                Err(err) => assert!(err.is_retryable(), "consumer: {err}"),
            }
        }
    });
    let cut = within("the cut", cut).await.expect("the proxy cut the take's reply");
    assert_eq!(cut.server_error, 0, "the server took the items: {cut:?}");
    no_children_left(&observer, queue_path).await;
    for name in &names {
        let what = format!("a warning that {name} may be lost");
        eventually(&what, || async {
            warnings.lines_with(name).iter().any(|line| line.contains("take interrupted"))
        })
        .await;
    }

    // The consumer goes on; what it hands out next is the next item, never a cut one.
    within("put later", producer.put(&"later".to_string())).await.expect("put");
    let next = within("next delivery", delivered.recv()).await.expect("consumer running");
    assert_eq!(next, ["later"], "the cut items are not delivered (at most once: lost)");
    no_children_left(&observer, queue_path).await;
    assert!(delivered.try_recv().is_err(), "nothing else was delivered");
    assert_eq!(proxy.stats().cut, 1);
    within("close", framework.close()).await;
    within("consumer stops", running).await.expect("task");
    cut
}

#[tokio::test]
async fn at_most_once_a_take_whose_delete_reply_was_cut_is_never_delivered_twice() {
    const QUEUE: &str = "/faults-take/queue";
    let cut =
        at_most_once_take_cut(QUEUE, &["first"], 1, RequestMatch::delete().under(format!("{QUEUE}/"))).await;
    assert_eq!(cut.path, format!("{QUEUE}/queue-0000000000"));
}

#[tokio::test]
async fn at_most_once_a_batch_take_whose_multi_reply_was_cut_is_never_delivered_twice() {
    const QUEUE: &str = "/faults-take-batch/queue";
    let cut = at_most_once_take_cut(QUEUE, &["a", "b", "c"], 4, RequestMatch::multi().under(QUEUE)).await;
    let deleted: Vec<String> = (0..3).map(|index| format!("{QUEUE}/queue-{index:010}")).collect();
    let expected: Vec<(i32, String)> = deleted.into_iter().map(|path| (DELETE, path)).collect();
    assert_eq!(cut.ops, expected, "one multi took the batch");
}

#[tokio::test]
async fn lock_safe_an_expired_consumers_item_goes_to_another_and_its_late_ack_is_refused() {
    const QUEUE: &str = "/faults-expiry/queue";
    const LOCKS: &str = "/faults-expiry/locks";
    let (server, observer) = server_and_framework().await;
    let (proxy, doomed) = proxied(&server, Duration::from_secs(2)).await;
    let producer = queue_on(&observer, QUEUE, Some(LOCKS));
    let first = within("put", producer.put(&"first".to_string())).await.expect("put");
    let lock_node = format!("{LOCKS}/{first}");

    let mut doomed_consumer = queue_on(&doomed, QUEUE, Some(LOCKS)).consumer().prefetch(1);
    let held = next_delivery(&mut doomed_consumer).await;
    assert_eq!(held.items(), ["first"]);
    let doomed_session = session_id(&doomed).await;
    let (_, stat) = data_and_stat(&observer, &lock_node).await;
    assert_eq!(stat.ephemeral_owner, doomed_session, "the doomed consumer holds the lock");

    // Another consumer waits for the item (it meets the lock and watches it).
    let survivor = connect(&server).await;
    let survivor_session = session_id(&survivor).await;
    let mut survivor_consumer = queue_on(&survivor, QUEUE, Some(LOCKS)).consumer().prefetch(1);
    let waiting = tokio::spawn(async move {
        let delivery = survivor_consumer.next().await.expect("open").expect("delivery");
        (delivery, survivor_consumer)
    });

    // Mid-processing, the doomed consumer goes silent past its session timeout: the server
    // expires the session and deletes its lock node.
    proxy.black_hole(Duration::from_secs(15));
    let lost = within("the holder learns its lock is not to be trusted", held.lost()).await;
    assert!(matches!(lost, ConnectionState::Suspended | ConnectionState::Lost), "{lost:?}");
    let (taken, survivor_consumer) = within("the other consumer gets the item", waiting).await.expect("task");
    assert_eq!((taken.name(), taken.items()), (first.as_str(), &["first".to_string()][..]));
    let (_, stat) = data_and_stat(&observer, &lock_node).await;
    assert_eq!(stat.ephemeral_owner, survivor_session, "the lock is the survivor's now");
    proxy.heal();

    // The doomed handler finishes and acks: refused, nothing committed, the survivor's lock and the
    // item untouched.
    let late = within("the late ack", held.ack()).await;
    assert!(matches!(late, Err(QueueError::LockLost { .. })), "{late:?}");
    assert_eq!(children(&observer, QUEUE).await, vec![first.clone()], "the item is still there");
    let (_, stat) = data_and_stat(&observer, &lock_node).await;
    assert_eq!(stat.ephemeral_owner, survivor_session, "the survivor still holds the lock");
    assert_ne!(session_id(&doomed).await, doomed_session, "the doomed framework has a new session");

    within("the survivor's ack", taken.ack()).await.expect("the survivor acks");
    drained(&observer, QUEUE, LOCKS).await;
    drop((survivor_consumer, doomed_consumer));
    within("close", doomed.close()).await;
    within("close", survivor.close()).await;
}

/// Session timeout and silence for the two tests below: the silence outlasts the session.
const SHORT_SESSION: Duration = Duration::from_secs(2);
const PAST_THE_SESSION: Duration = Duration::from_secs(5);

/// A lock-safe consumer behind a proxy, with a short session, holding the one item in the queue.
struct HoldingOne {
    _server: TestingServer,
    observer: Framework,
    proxy: FaultProxy,
    framework: Framework,
    consumer: Consumer<String>,
    delivery: Delivery<String>,
    /// The item's node name.
    first: String,
    /// The consumer's session.
    session: i64,
}

async fn holding_one(queue: &str, locks: &str) -> HoldingOne {
    let (server, observer) = server_and_framework().await;
    let (proxy, framework) = proxied(&server, SHORT_SESSION).await;
    let producer = queue_on(&observer, queue, Some(locks));
    let first = within("put", producer.put(&"first".to_string())).await.expect("put");
    let session = session_id(&framework).await;
    let mut consumer = queue_on(&framework, queue, Some(locks)).consumer().prefetch(1);
    let delivery = next_delivery(&mut consumer).await;
    assert_eq!(delivery.name(), first);
    HoldingOne { _server: server, observer, proxy, framework, consumer, delivery, first, session }
}

#[tokio::test]
async fn lock_safe_an_ack_that_committed_before_its_session_expired_reports_an_unknown_outcome() {
    const QUEUE: &str = "/faults-ack-unknown/queue";
    const LOCKS: &str = "/faults-ack-unknown/locks";
    let HoldingOne { _server, observer, proxy, framework, consumer, delivery, first, session } =
        holding_one(QUEUE, LOCKS).await;

    // The server commits the ack's multi; its reply is dropped, and the client hears nothing more
    // until its session has expired. The ack's retry comes up on a new session, which must not
    // touch the old hold, and cannot tell our commit from another consumer's.
    let cut =
        proxy.cut_after_next_reply_then_black_hole(RequestMatch::multi().under(LOCKS), PAST_THE_SESSION);
    let acked = within_for(Duration::from_secs(40), "ack", delivery.ack()).await;
    let cut = within("the cut", cut).await.expect("the proxy cut the ack's reply");
    assert_eq!(cut.server_error, 0, "the server committed the ack: {cut:?}");
    assert_ne!(session_id(&framework).await, session, "the session expired during the silence");
    match acked {
        Err(QueueError::OutcomeUnknown { ref item }) if *item == first => {}
        other => panic!("an ack that may have committed must not say it did not: {other:?}"),
    }
    let err = acked.unwrap_err();
    assert!(err.is_node_lost() && !err.is_retryable(), "{err}");
    // It did commit: the item is gone and never comes back.
    drained(&observer, QUEUE, LOCKS).await;
    drop(consumer);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn lock_safe_an_ack_that_never_reached_the_server_before_its_session_expired_reports_lock_lost() {
    const QUEUE: &str = "/faults-ack-held/queue";
    const LOCKS: &str = "/faults-ack-held/locks";
    let HoldingOne { _server, observer, proxy, framework, mut consumer, delivery, first, session } =
        holding_one(QUEUE, LOCKS).await;

    // The ack's multi leaves the client but never reaches the server; the session expires in the
    // silence. On the new session the item is still there: the ack did not commit, and says so.
    let held = proxy.black_hole_at_next_request(RequestMatch::multi().under(LOCKS), PAST_THE_SESSION);
    let acked = within_for(Duration::from_secs(40), "ack", delivery.ack()).await;
    within("the held request", held).await.expect("the proxy held the ack");
    assert_ne!(session_id(&framework).await, session, "the session expired during the silence");
    assert!(matches!(acked, Err(QueueError::LockLost { ref item }) if *item == first), "{acked:?}");
    assert_eq!(children(&observer, QUEUE).await, vec![first.clone()], "the item is still queued");

    // And it is delivered again.
    let again = next_delivery(&mut consumer).await;
    assert_eq!((again.name(), again.items()), (first.as_str(), &["first".to_string()][..]));
    within("ack", again.ack()).await.expect("ack");
    drained(&observer, QUEUE, LOCKS).await;
    drop(consumer);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn an_id_queue_remove_cancelled_with_its_finish_in_flight_holds_no_item_back() {
    const QUEUE: &str = "/faults-remove/queue";
    const LOCKS: &str = "/faults-remove/locks";
    let (server, observer) = server_and_framework().await;
    // A session that outlives the test: a lock left behind would stay for all of it.
    let (proxy, framework) = proxied(&server, Duration::from_secs(60)).await;
    let session = session_id(&framework).await;
    let id_queue = |framework: &Framework| {
        DistributedQueue::builder(framework, QUEUE)
            .serializer(Utf8Serializer)
            .lock_path(LOCKS)
            .build_id()
            .expect("queue")
    };
    let (remover, producer) = (id_queue(&framework), id_queue(&observer));
    let item = within("put", producer.put(&"kept".to_string(), "kept")).await.expect("put");

    // The remove locks the item, then its finish multi {check lock, delete item, delete lock}
    // never reaches the server: the remove is dropped right then, with its lock node made.
    let held =
        proxy.black_hole_at_next_request(RequestMatch::multi().under(LOCKS), Duration::from_millis(500));
    tokio::select! {
        removed = within("remove", remover.remove("kept")) => panic!("the remove returned: {removed:?}"),
        held = within("the held finish", held) => {
            let held = held.expect("the proxy held the remove's finish multi");
            assert_eq!(held.ops.first(), Some(&(CHECK, format!("{LOCKS}/{item}"))), "{held:?}");
        }
    }

    // On the same session (it outlives the test), the lock goes, and the item is delivered, to a
    // consumer on that session too (nothing of the cancelled remove's is left in this process).
    within("the lock released", async {
        while !children(&observer, LOCKS).await.is_empty() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(session_id(&framework).await, session, "the same session throughout");
    let mut consumer = remover.consumer().prefetch(1);
    let delivery = next_delivery(&mut consumer).await;
    assert_eq!((delivery.name(), delivery.items()), (item.as_str(), &["kept".to_string()][..]));
    within("ack", delivery.ack()).await.expect("ack");
    drained(&observer, QUEUE, LOCKS).await;
    drop(consumer);
    within("close", framework.close()).await;
}
