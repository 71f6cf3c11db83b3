//! A lock-safe, at-least-once queue worker: items are taken under a lock node, acknowledged
//! after processing, and an item whose processing fails is put back and delivered again. Ends
//! with a graceful drain: stop taking, finish what is in hand, close.
//!
//! `cargo run -p zk-recipes --example queue_worker` (uses `ZK_CONNECT`, or an embedded ZooKeeper).

use std::collections::BTreeSet;
use std::time::Duration;

use zk_recipes::framework::{Deadline, Framework};
use zk_recipes::queue::{DistributedQueue, Utf8Serializer};

mod support;

const ITEMS: usize = 10;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    support::init_logging();
    let (connect, _embedded) = support::zookeeper().await?;
    let framework = Framework::builder(connect.as_str()).namespace("zk-recipes-example").start()?;
    framework.block_until_connected(Duration::from_secs(15)).await?;

    // Lock-safe: a consumer holds a lock node under /queues/emails-locks while it processes.
    let queue = DistributedQueue::builder(&framework, "/queues/emails")
        .lock_path("/queues/emails-locks")
        .serializer(Utf8Serializer)
        .build()?;
    for index in 0..ITEMS {
        queue.put(&format!("email-{index}")).await?;
    }

    let mut consumer = queue.consumer();
    let mut done = BTreeSet::new();
    let mut failed_once = false;
    while done.len() < ITEMS {
        let Some(delivery) = tokio::time::timeout(Duration::from_secs(10), consumer.next()).await? else {
            break;
        };
        let mut delivery = delivery?;
        let items = delivery.take_items();
        // The handler: "email-3" fails the first time (a flaky mail server).
        if items.iter().any(|item| item == "email-3") && !failed_once {
            failed_once = true;
            println!("{items:?}: failed, put back for another delivery");
            delivery.requeue().await?;
            continue;
        }
        delivery.ack().await?; // deleted, with our lock, in one multi
        println!("{items:?}: sent");
        done.extend(items);
    }
    // Graceful drain: no more takes; nothing is in hand; closing deletes our lock nodes.
    drop(consumer);
    println!("{} items delivered and acknowledged, one of them twice", done.len());
    assert_eq!(done.len(), ITEMS, "every item processed");
    framework.delete_recursive("/queues", Deadline::after(Duration::from_secs(10))).await?;
    framework.close().await;
    Ok(())
}
