//! A contender's queue consumer.

use std::sync::Arc;

use tokio::sync::watch;
use zk_recipes_framework::Framework;
use zk_recipes_queue::{DistributedQueue, Utf8Serializer};

use super::ContenderConfig;
use crate::events::EventLog;
use crate::recipes::Recipe;

/// One queue consumer: logs `C` for each item delivered, processes it, acks it and logs `K` once
/// the ack succeeded (`N` when it failed: the item is delivered again).
pub(super) async fn consume(
    framework: Framework,
    queue: Recipe,
    config: ContenderConfig,
    log: Arc<EventLog>,
    mut stop: watch::Receiver<bool>,
) {
    let consumer_name = config.setup.holder("q");
    let path = queue.lock_path(&config.queue_root);
    let mut builder = DistributedQueue::builder(&framework, &path).serializer(Utf8Serializer);
    if config.locking {
        builder = builder.lock_path(queue.queue_lock_path(&config.queue_root));
    }
    let consumer = match queue {
        Recipe::PriorityQueue => builder.build_priority().map(|queue| queue.consumer()),
        _ => builder.build().map(|queue| queue.consumer()),
    };
    let mut consumer = match consumer {
        Ok(consumer) => consumer.prefetch(1),
        Err(err) => {
            log.event('E', queue, &consumer_name, &format!("making the consumer: {err}"));
            return;
        }
    };
    loop {
        let next = tokio::select! {
            next = consumer.next() => next,
            _ = stop.wait_for(|stopped| *stopped) => break,
        };
        let delivery = match next {
            Some(Ok(delivery)) => delivery,
            Some(Err(err)) => {
                log.event('E', queue, &consumer_name, &err.to_string());
                continue;
            }
            None => break,
        };
        let items = delivery.items().to_vec();
        for item in &items {
            log.event('C', queue, &consumer_name, item);
        }
        tokio::time::sleep(config.process).await;
        for item in &items {
            log.event('W', queue, &consumer_name, item);
        }
        match delivery.ack().await {
            Ok(()) => {
                for item in &items {
                    log.event('K', queue, &consumer_name, item);
                }
            }
            Err(err) => {
                for item in &items {
                    log.event('N', queue, &consumer_name, &format!("{item} {err}"));
                }
            }
        }
    }
    drop(consumer);
    framework.close().await;
}
