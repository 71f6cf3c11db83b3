//! The workload of a phase: the checkers' nodes, the queues' items, where each part of the mix
//! works, and the queues' drain after the faults.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_testing::{CuratorProcess, TestingCluster};

use super::kind::Kind;
use super::reading::{cache_root, children, read_events};
use super::slots::Slot;
use super::{Phase, DRAIN_TIMEOUT, STALL, STEP};
use crate::counter::Counter;
use crate::events::Event;
use crate::holders::{is_curator, is_rust};
use crate::recipes::Recipe;

/// An item a Curator consumer's live session held the lock of without working on it.
pub(super) struct StrandedLock {
    pub(super) queue: Recipe,
    /// The item node's name.
    pub(super) item: String,
    /// The lock node's ephemeral owner.
    pub(super) owner: i64,
    /// The Curator consumer (`<tag>-q`) that logged that session as its own.
    pub(super) consumer: String,
}

impl Phase<'_> {
    /// Creates the checkers' nodes and puts the queues' items (a tenth in the control); returns
    /// the items put into each queue.
    pub(super) async fn prepare(
        &self,
        observer: &Framework,
        cluster: &TestingCluster,
    ) -> Result<BTreeMap<Recipe, Vec<String>>, String> {
        let config = self.config;
        if config.processes(Kind::Cache) + config.processes(Kind::CuratorCache) > 0 {
            create_persistent(observer, &cache_root(self.check_root)).await?;
        }
        if config.processes(Kind::Counter) + config.processes(Kind::CuratorCounter) > 0 {
            create_persistent(observer, self.check_root).await?;
            for counter in Counter::ALL {
                let path = counter.path(self.check_root);
                match observer
                    .create(&path)
                    .data(counter.zero())
                    .mode(CreateMode::Persistent)
                    .deadline(Deadline::after(STEP))
                    .await
                {
                    Ok(_) => {}
                    Err(err) => return Err(format!("creating {path}: {err}")),
                }
            }
        }
        for recipe in &config.recipes {
            create_persistent(observer, &recipe.guard_dir(self.check_root)).await?;
            create_persistent(observer, &recipe.counter_path(self.check_root)).await?;
        }
        let items = if self.locking { config.queue_items } else { config.queue_items / 10 };
        let mut expected = BTreeMap::new();
        for queue in &config.queues {
            expected.insert(*queue, self.produce(observer, cluster, *queue, items).await?);
        }
        Ok(expected)
    }

    /// Puts `items` items into `queue` before the contenders start: the plain queue half from
    /// Rust (`r<n>`) and half from Curator (`j<n>`), the priority queue from Rust with priorities
    /// -3..=3. Puts made before any fault are never ambiguous, so each item is put exactly once.
    async fn produce(
        &self,
        observer: &Framework,
        cluster: &TestingCluster,
        queue: Recipe,
        items: usize,
    ) -> Result<Vec<String>, String> {
        let path = queue.lock_path(self.queue_root);
        let builder = zk_recipes_queue::DistributedQueue::builder(observer, &path)
            .serializer(zk_recipes_queue::Utf8Serializer);
        let curator_items = if queue == Recipe::Queue { items / 2 } else { 0 };
        let rust_items: Vec<String> = (0..items - curator_items).map(|n| format!("r{n}")).collect();
        if queue == Recipe::PriorityQueue {
            let priority_queue = builder.build_priority().map_err(|err| err.to_string())?;
            for (n, item) in rust_items.iter().enumerate() {
                priority_queue
                    .put(item, (n % 7) as i32 - 3)
                    .await
                    .map_err(|err| format!("putting {item}: {err}"))?;
            }
        } else {
            let plain = builder.build().map_err(|err| err.to_string())?;
            for item in &rust_items {
                plain.put(item).await.map_err(|err| format!("putting {item}: {err}"))?;
            }
        }
        let mut all = rust_items;
        if curator_items > 0 {
            let mut producer = CuratorProcess::spawn([
                "queue-produce".to_owned(),
                cluster.connect_string(),
                path.clone(),
                curator_items.to_string(),
                "1".to_owned(),
                "j".to_owned(),
            ])
            .map_err(|err| format!("spawning the Curator producer: {err}"))?;
            producer
                .expect_line("RESULT", STEP * 3)
                .await
                .map_err(|err| format!("Curator producer: {err}"))?;
            all.extend((0..curator_items).map(|n| format!("j{n}")));
        }
        Ok(all)
    }

    /// Waits until every queue is empty (the consumers acked everything), up to
    /// [`DRAIN_TIMEOUT`]; what is left is reported by the checker.
    ///
    /// A queue that stops moving for [`STALL`] with items left is looked into: an item whose lock
    /// node belongs to the live session of a Curator consumer (from its `S` events) is a lock that
    /// consumer holds without working on it. Curator 5.4's lock-safe consumer creates its lock
    /// node with a plain create; retried after a connection loss, the create finds the node its
    /// first try made, takes it for another consumer's and skips the item, and the node stays
    /// until that session ends. Nothing else can take the item meanwhile, so that Curator
    /// contender is stopped (its session ends, its locks go) and the drain goes on: our consumers
    /// must then take the item, or it is reported `left`.
    pub(super) async fn drain(
        &self,
        observer: &Framework,
        slots: &mut [Slot],
        log_dir: &Path,
        killed: &mut HashMap<String, i64>,
    ) -> Vec<StrandedLock> {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        let mut stranded = Vec::new();
        for queue in &self.config.queues {
            let path = queue.lock_path(self.queue_root);
            let mut last = (usize::MAX, Instant::now());
            loop {
                let left = children(observer, &path).await;
                if left.is_empty() || Instant::now() >= deadline {
                    break;
                }
                if left.len() != last.0 {
                    last = (left.len(), Instant::now());
                } else if last.1.elapsed() >= STALL {
                    last.1 = Instant::now();
                    for lock in self.stranded_locks(observer, *queue, &left, log_dir).await {
                        if stranded
                            .iter()
                            .any(|seen: &StrandedLock| seen.queue == lock.queue && seen.item == lock.item)
                        {
                            continue;
                        }
                        if let Some(slot) = slots.iter_mut().find(|slot| {
                            slot.kind == Kind::Curator && lock.consumer.starts_with(&format!("{}-", slot.tag))
                        }) {
                            println!(
                                "drain: {} item {} is locked by the live session {:#x} of Curator's consumer {}; stopping {}",
                                queue.name(),
                                lock.item,
                                lock.owner,
                                lock.consumer,
                                slot.tag
                            );
                            self.stop(slot, killed).await;
                        }
                        stranded.push(lock);
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        stranded
    }

    /// The items of `left` whose lock node belongs to a session a Curator consumer of this run
    /// logged as its own.
    async fn stranded_locks(
        &self,
        observer: &Framework,
        queue: Recipe,
        left: &[String],
        log_dir: &Path,
    ) -> Vec<StrandedLock> {
        let curator_sessions: HashMap<i64, String> = read_events(log_dir)
            .into_iter()
            .filter(|event| event.kind == 'S' && is_curator(&event.holder))
            .filter_map(|event| Some((event.rest.first()?.parse().ok()?, event.holder)))
            .collect();
        let lock_dir = queue.queue_lock_path(self.queue_root);
        let mut found = Vec::new();
        for item in left {
            let lock_node = format!("{lock_dir}/{item}");
            let Ok(Some(stat)) = observer.exists(&lock_node, Deadline::after(STEP)).await else { continue };
            if let Some(consumer) = curator_sessions.get(&stat.ephemeral_owner) {
                found.push(StrandedLock {
                    queue,
                    item: item.clone(),
                    owner: stat.ephemeral_owner,
                    consumer: consumer.clone(),
                });
            }
        }
        found
    }
}

/// Creates a persistent node (and its parents); one that exists already is fine.
pub(super) async fn create_persistent(framework: &Framework, path: &str) -> Result<(), String> {
    match framework
        .create(path)
        .mode(CreateMode::Persistent)
        .creating_parents(zk_recipes_framework::ParentMode::Persistent)
        .deadline(Deadline::after(STEP))
        .await
    {
        Ok(_) => Ok(()),
        Err(err) if err.is_node_exists() => Ok(()),
        Err(err) => Err(format!("creating {path}: {err}")),
    }
}

/// The Rust consumers of `queue` that hold an item they have not processed yet, delivered
/// (`C`) at `since` (epoch µs) or later, with no ack sent (`W`) by the same consumer since. (A
/// Curator consumer killed while it holds one proves nothing: Curator logs only after
/// `consumeMessage` returned, so the checker cannot tell its loss from a delete that went
/// through.)
pub(super) fn consumers_holding_an_item(events: &[Event], queue: Recipe, since: i64) -> Vec<&str> {
    let mut held: HashMap<(&str, &str), i64> = HashMap::new();
    for event in events.iter().filter(|event| event.recipe == queue && is_rust(&event.holder)) {
        let Some(item) = event.rest.first() else { continue };
        match event.kind {
            'C' => {
                held.insert((event.holder.as_str(), item.as_str()), event.micros);
            }
            'W' => {
                held.remove(&(event.holder.as_str(), item.as_str()));
            }
            _ => {}
        }
    }
    let mut holders: Vec<&str> = held
        .into_iter()
        .filter(|(_, delivered)| *delivered >= since)
        .map(|((holder, _), _)| holder)
        .collect();
    holders.sort_unstable();
    holders.dedup();
    holders
}

#[cfg(test)]
mod tests {
    use super::consumers_holding_an_item;
    use crate::events::Event;
    use crate::recipes::Recipe;

    /// The queue control crashes its consumers only while one holds an unprocessed item it took
    /// recently: a crash between items, or just before an item's ack, loses nothing and the
    /// control would catch nothing.
    #[test]
    fn a_consumer_holds_an_item_from_delivery_until_processed() {
        let events = |lines: &[&str]| -> Vec<Event> {
            lines.iter().map(|line| Event::parse(line).expect("event")).collect()
        };
        let holding = |lines: &[&str], queue: Recipe, since: i64| -> Vec<String> {
            consumers_holding_an_item(&events(lines), queue, since).into_iter().map(str::to_owned).collect()
        };
        assert!(holding(&[], Recipe::Queue, 0).is_empty());
        let rust = ["C queue r0x1-q 10 q0", "W queue r0x1-q 11 q0", "K queue r0x1-q 12 q0"];
        assert_eq!(holding(&rust[..1], Recipe::Queue, 0), ["r0x1-q"]);
        assert_eq!(holding(&rust[..1], Recipe::Queue, 10), ["r0x1-q"], "delivered at `since`");
        assert!(holding(&rust[..1], Recipe::Queue, 11).is_empty(), "delivered before `since`");
        assert!(holding(&rust[..2], Recipe::Queue, 0).is_empty(), "its ack is sent");
        assert!(holding(&rust, Recipe::Queue, 0).is_empty());
        let curator = ["C queue j0x1-q 10 q1"];
        assert!(holding(&curator, Recipe::Queue, 0).is_empty(), "a Curator consumer's proves nothing");
        assert!(holding(&rust[..1], Recipe::PriorityQueue, 0).is_empty(), "another queue's");
        let other_consumer = ["C queue r0x1-q 10 q0", "W queue r1x1-q 11 q0"];
        assert_eq!(holding(&other_consumer, Recipe::Queue, 0), ["r0x1-q"]);
        let two = ["C queue r1x1-q 10 q0", "C queue r0x1-q 11 q1", "C queue r0x1-q 12 q2"];
        assert_eq!(holding(&two, Recipe::Queue, 0), ["r0x1-q", "r1x1-q"], "each consumer once");
    }
}
