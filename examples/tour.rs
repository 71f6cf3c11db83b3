//! A tour of zk-recipes, every recipe family in about a minute: connect, watch the connection,
//! create nodes the Curator way, then a mutex, a semaphore, a read-write lock, leader election, a
//! lock-safe queue, a cache, a node kept present, counters and a double barrier.
//!
//! Run it with `scripts/demo.sh` (or `cargo run -p zk-recipes-examples --example tour`). It uses the
//! ZooKeeper at `ZK_CONNECT` (e.g. `ZK_CONNECT=127.0.0.1:2181`), or starts an embedded one from
//! the machine's Debian `zookeeper` package when `ZK_CONNECT` is unset.

use std::time::Duration;

use zk_recipes::barrier::DistributedDoubleBarrier;
use zk_recipes::cache::{Cache, CacheEvent};
use zk_recipes::counter::{DistributedAtomicLong, SharedCount};
use zk_recipes::framework::retry::RetryNTimes;
use zk_recipes::framework::{path, ConnectionUpdate, Deadline, Framework, ProtectedCreate};
use zk_recipes::leader::{CloseMode, LeaderLatch};
use zk_recipes::mutex::{Hold, Mutex};
use zk_recipes::nodes::PersistentNode;
use zk_recipes::queue::{DistributedQueue, Utf8Serializer};
use zk_recipes::rwlock::RwLock;
use zk_recipes::semaphore::Semaphore;

mod support;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::init_logging();

    // 1. A ZooKeeper to talk to.
    let (connect_string, _embedded) = support::zookeeper().await?;

    // 2. The framework owns the session; start() returns at once, the session comes up behind it.
    let framework = Framework::builder(connect_string.as_str())
        .session_timeout(Duration::from_secs(10))
        .namespace("zk-recipes-tour")
        .start()?;
    let mut events = framework.connection_events();
    framework.block_until_connected(Duration::from_secs(15)).await?;
    if let Some(ConnectionUpdate::Changed(event)) = events.next().await {
        println!(
            "connection: {:?} (session {}, generation {})",
            event.state, event.session_id, event.generation
        );
    }

    // 3. Paths are checked before anything is sent.
    let bad = framework.ensure_path("/no//empty/names", Deadline::after(Duration::from_secs(1))).await;
    println!(
        "an invalid path is refused locally: {}",
        bad.err().map(|err| err.to_string()).unwrap_or_default()
    );

    // 4. Curator's protected ephemeral-sequential nodes: the same names a Java service would see.
    let deadline = || Deadline::after(Duration::from_secs(5));
    let first = framework
        .create_protected(ProtectedCreate::new("/members", "member-").data(b"first"), deadline())
        .await?;
    let second = framework
        .create_protected(ProtectedCreate::new("/members", "member-").data(b"second"), deadline())
        .await?;
    let members = framework
        .retry(deadline(), |session| async move { Ok(session.client().list_children("/members").await?) })
        .await?;
    let mut by_sequence: Vec<_> =
        members.iter().map(|name| (path::sequence_after(name, "member-"), name)).collect();
    by_sequence.sort();
    println!("members, in sequence order:");
    for (sequence, name) in &by_sequence {
        println!("  {sequence:?}  {name}");
    }
    println!("first = sequence {:?}, second = sequence {:?}", first.sequence(), second.sequence());

    // 5. Owned nodes go away when released, or in the background when dropped.
    first.delete(deadline()).await?;
    drop(second);
    framework.wait_for_cleanups(deadline()).await?;
    let left = framework
        .retry(deadline(), |session| async move {
            match session.client().list_children("/members").await {
                Ok(children) => Ok(children.len()),
                Err(zk_recipes::framework::zookeeper_client::Error::NoNode) => Ok(0),
                Err(err) => Err(err.into()),
            }
        })
        .await?;
    println!("after release and drop, {left} members are left");

    framework.delete_recursive("/members", deadline()).await?;

    // 6. A mutex (Curator's InterProcessMutex): two contenders, one holder at a time.
    let mutex = Mutex::new(&framework, "/locks/orders")?;
    let guard = mutex.lock_timeout(Duration::from_secs(5)).await?;
    println!("mutex held at {} (fencing token {})", guard.node_path(), guard.fencing_token());
    let contender = mutex.clone();
    let waiting = tokio::spawn(async move { contender.try_lock().await });
    println!("a second try_lock while held gets: {:?}", waiting.await?.map(|guard| guard.is_some()));
    guard.release().await?;

    // 7. A semaphore of 2 leases (Curator's InterProcessSemaphoreV2).
    let semaphore = Semaphore::new(&framework, "/semaphores/workers", 2)?;
    let leases = semaphore.acquire_many(2).await?;
    println!(
        "took {} leases; a third is free now: {}",
        leases.len(),
        semaphore.try_acquire().await?.is_some()
    );
    for lease in leases {
        lease.release().await?;
    }

    // 8. A read-write lock (Curator's InterProcessReadWriteLock), with a downgrade.
    let rwlock = RwLock::new(&framework, "/rwlocks/config")?;
    let writer = rwlock.write_timeout(Duration::from_secs(5)).await?;
    let reader = writer.downgrade().await?;
    println!("downgraded to a read hold at {}", reader.node_path());
    let another_reader = rwlock.try_read().await?;
    println!("another reader gets in beside it: {}", another_reader.is_some());
    if let Some(another_reader) = another_reader {
        another_reader.release().await?;
    }
    reader.release().await?;

    // 9. Leader election (Curator's LeaderLatch): the first latch leads; when it closes, the next.
    let first_latch = LeaderLatch::new(&framework, "/leaders/reports", "reports-1")?;
    first_latch.start()?;
    let token = first_latch.await_leadership_timeout(Duration::from_secs(5)).await?;
    let second_latch = LeaderLatch::new(&framework, "/leaders/reports", "reports-2")?;
    second_latch.start()?;
    println!("reports-1 leads (fencing token {token}); reports-2 leads: {}", second_latch.has_leadership());
    first_latch.close(CloseMode::NotifyLeader).await?;
    second_latch.await_leadership_timeout(Duration::from_secs(5)).await?;
    println!("reports-1 closed; reports-2 leads: {}", second_latch.has_leadership());
    second_latch.close(CloseMode::Silent).await?;

    // 10. A lock-safe queue (Curator's DistributedQueue with a lock path): each item is taken by
    //     one consumer, and given back if that consumer dies before its ack.
    let queue = DistributedQueue::builder(&framework, "/queues/emails")
        .serializer(Utf8Serializer)
        .lock_path("/queues/emails-locks")
        .build()?;
    queue.put_batch(&["a@example.com".to_string(), "b@example.com".to_string()]).await?;
    let mut consumer = queue.consumer();
    for _ in 0..2 {
        let delivery = consumer.next().await.ok_or("the consumer stopped")??;
        println!("took {:?} from the queue", delivery.items());
        delivery.ack().await?;
    }
    consumer.close();

    // 11. A cache of a subtree (Curator's CuratorCache), kept by one persistent watch.
    framework
        .create("/config/feature-x")
        .creating_parents(zk_recipes::framework::ParentMode::Persistent)
        .data(b"off".to_vec())
        .deadline(deadline())
        .await?;
    let cache = Cache::builder(&framework, "/config").start()?;
    let mut changes = cache.events();
    cache.initialized(deadline()).await?;
    framework.set_data("/config/feature-x", b"on", None, deadline()).await?;
    while let Some(event) = changes.next().await {
        if let CacheEvent::Changed { path, new, .. } = event {
            println!(
                "the cache saw {path} change to {:?}",
                String::from_utf8_lossy(new.data.as_deref().unwrap_or_default())
            );
            break;
        }
    }
    drop(cache);
    framework.delete_recursive("/config", deadline()).await?;

    // 12. A node kept present (Curator's PersistentNode): created again if it is deleted.
    let member =
        PersistentNode::builder(&framework, "/services/api/worker-1").data(b"10.0.0.7:8080").start()?;
    member.wait_for_initial_create(deadline()).await?;
    println!("registered at {}", member.actual_path().unwrap_or_default());
    member.close().await?;

    // 13. Counters (Curator's DistributedAtomicLong and SharedCount).
    let hits = DistributedAtomicLong::new(
        &framework,
        "/counters/hits",
        RetryNTimes::new(10, Duration::from_millis(10)),
    )?;
    println!("hits is now {}", hits.increment(deadline()).await?.post_value());
    let slots = SharedCount::start(&framework, "/counters/slots", 0, deadline()).await?;
    let seen = slots.get()?;
    println!(
        "claimed a slot on version {}: {}",
        seen.version,
        slots.try_set(seen.version, seen.value + 1, deadline()).await?
    );

    // 14. A double barrier (Curator's DistributedDoubleBarrier): two members enter together and
    //     leave together.
    let members = (0..2).map(|_| {
        let framework = framework.clone();
        tokio::spawn(async move {
            let barrier = DistributedDoubleBarrier::new(&framework, "/barriers/nightly", 2)?;
            let entered = barrier.enter(Deadline::after(Duration::from_secs(10))).await?;
            entered.leave(Deadline::after(Duration::from_secs(10))).await?;
            Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
        })
    });
    for member in members.collect::<Vec<_>>() {
        member.await?.map_err(|err| err.to_string())?;
    }
    println!("two members entered the barrier together and left together");

    framework.close().await;
    println!("closed. The tour is over.");
    Ok(())
}
