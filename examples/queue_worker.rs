//! A lock-safe, at-least-once queue worker: items are taken under a lock node and acknowledged
//! after processing. An item whose processing fails is put back and delivered again; one that
//! always fails goes to a dead-letter queue after three deliveries. Ends with a graceful drain:
//! the worker is stopped by its token, finishes what is in hand, and returns.
//!
//! `cargo run -p zk-recipes-examples --example queue_worker` (uses `ZK_CONNECT`, or an embedded ZooKeeper).

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use zk_recipes::framework::{Deadline, Framework};
use zk_recipes::queue::{DistributedQueue, ErrorMode, Utf8Serializer};

mod support;

const ITEMS: usize = 10;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    support::init_logging();
    let (connect, _embedded) = support::zookeeper().await?;
    let framework = Framework::builder(connect.as_str()).namespace("zk-recipes-example").start()?;
    framework.block_until_connected(Duration::from_secs(15)).await?;

    // Lock-safe: a consumer holds a lock node under /queues/emails-locks while it processes. A
    // failed item is requeued; after three deliveries it goes to /queues/emails-dead.
    let queue = DistributedQueue::builder(&framework, "/queues/emails")
        .lock_path("/queues/emails-locks")
        .serializer(Utf8Serializer)
        .error_mode(ErrorMode::Requeue)
        .max_deliveries(3)
        .dead_letter_path("/queues/emails-dead")
        .build()?;
    for index in 0..ITEMS {
        queue.put(&format!("email-{index}")).await?;
    }
    queue.put(&"email-to-nobody".to_string()).await?;

    let sent = Arc::new(Mutex::new(BTreeSet::new()));
    let consumer = queue.consumer().prefetch(4).drain_timeout(Duration::from_secs(10));
    let stop = consumer.stop_token();
    let worker = {
        let sent = sent.clone();
        tokio::spawn(consumer.run_items(move |item| {
            let sent = sent.clone();
            async move {
                let email = item.value().clone();
                // "email-3" fails the first time (a flaky mail server); "email-to-nobody" always.
                if (email == "email-3" && item.delivery_count() == 1) || email == "email-to-nobody" {
                    println!("{email} ({}, delivery {}): failed", item.id(), item.delivery_count());
                    return Err(format!("could not send {email}"));
                }
                println!("{email} ({}, delivery {}): sent", item.id(), item.delivery_count());
                sent.lock().expect("not poisoned").insert(email);
                Ok(())
            }
        }))
    };

    // Wait until every good item was sent and the bad one is in the dead letters.
    let dead_letters = DistributedQueue::builder(&framework, "/queues/emails-dead").build()?;
    let started = Instant::now();
    loop {
        let all_sent = sent.lock().expect("not poisoned").len() == ITEMS;
        if all_sent && !dead_letters.is_empty().await? {
            break;
        }
        assert!(started.elapsed() < Duration::from_secs(60), "the worker is stuck");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Graceful drain: no more takes; what is in hand finishes; what was taken ahead goes back.
    stop.cancel();
    worker.await??;
    let sent_count = sent.lock().expect("not poisoned").len();
    let dead_count = dead_letters.len().await?;
    println!(
        "{sent_count} emails sent (one of them on its second delivery); {dead_count} in the dead letters"
    );
    assert!(queue.is_empty().await?, "every item processed or dead-lettered");
    framework.delete_recursive("/queues", Deadline::after(Duration::from_secs(10))).await?;
    framework.close().await;
    Ok(())
}
