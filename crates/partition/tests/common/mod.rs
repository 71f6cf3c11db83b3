//! Helpers for the partitioner's tests: workers on their own frameworks, an in-process log of
//! who works on which item (no item worked on twice at once), and what the server says.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex as SyncMutex;
use tokio::time::Instant;
use zk_recipes_framework::Framework;
use zk_recipes_partition::{PartitionEvent, PartitionLayout, Partitioner};
use zk_recipes_test_support::*;

/// `count` items `item-00`, `item-01`, ...
pub fn items(count: usize) -> Vec<String> {
    (0..count).map(|index| format!("item-{index:02}")).collect()
}

/// One event as a worker saw it, and when.
#[derive(Debug, Clone)]
pub struct Logged {
    pub at: Instant,
    pub worker: String,
    pub event: PartitionEvent,
}

/// What every worker of a test does and sees, in one place: the marker says who works on an item
/// now (a second worker starting on it is a violation), the log keeps every event with its time.
#[derive(Default)]
pub struct Ledger {
    marker: SyncMutex<HashMap<String, String>>,
    pub violations: SyncMutex<Vec<String>>,
    pub log: SyncMutex<Vec<Logged>>,
    /// Per item, the fencing tokens its work started with, in start order.
    pub tokens: SyncMutex<BTreeMap<String, Vec<i64>>>,
    /// Ownership as the events tell it: from a worker's `Acquired` (the lock is held by then) to
    /// the item's `ended()` (the lock is still held then).
    pub intervals: SyncMutex<Vec<Interval>>,
}

/// One ownership of one item by one worker, as its events tell it.
#[derive(Debug, Clone)]
pub struct Interval {
    pub item: String,
    pub worker: String,
    pub fencing_token: i64,
    pub acquired: Instant,
    pub ended: Option<Instant>,
}

/// Clears an item's marker when its work ends (its future dropped).
struct Working {
    ledger: Arc<Ledger>,
    item: String,
    worker: String,
}

impl Drop for Working {
    fn drop(&mut self) {
        let mut marker = self.ledger.marker.lock();
        if marker.get(&self.item) == Some(&self.worker) {
            marker.remove(&self.item);
        } else {
            self.ledger
                .violations
                .lock()
                .push(format!("{} ended {} it did not mark", self.worker, self.item));
        }
    }
}

impl Ledger {
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    fn start(self: &Arc<Self>, worker: &str, item: &str, token: i64) -> Working {
        let mut marker = self.marker.lock();
        if let Some(other) = marker.insert(item.to_owned(), worker.to_owned()) {
            self.violations.lock().push(format!("{worker} started {item} while {other} worked on it"));
        }
        let mut tokens = self.tokens.lock();
        let seen = tokens.entry(item.to_owned()).or_default();
        if seen.last().is_some_and(|last| *last >= token) {
            self.violations.lock().push(format!("{item}: token {token} after {seen:?}"));
        }
        seen.push(token);
        Working { ledger: self.clone(), item: item.to_owned(), worker: worker.to_owned() }
    }

    pub fn assert_no_violations(&self) {
        let violations = self.violations.lock();
        assert!(violations.is_empty(), "owned twice: {violations:?}");
        let overlaps = self.overlaps(None);
        assert!(overlaps.is_empty(), "ownerships overlap: {overlaps:?}");
    }

    /// Pairs of ownerships of one item that overlap in time (an ownership not ended yet lasts
    /// until now), leaving out `excluded`'s.
    pub fn overlaps(&self, excluded: Option<&str>) -> Vec<(Interval, Interval)> {
        let now = Instant::now();
        let intervals: Vec<Interval> = self
            .intervals
            .lock()
            .iter()
            .filter(|interval| Some(interval.worker.as_str()) != excluded)
            .cloned()
            .collect();
        let mut overlaps = Vec::new();
        for (index, first) in intervals.iter().enumerate() {
            for second in &intervals[index + 1..] {
                let (first_end, second_end) = (first.ended.unwrap_or(now), second.ended.unwrap_or(now));
                if first.item == second.item && first.acquired < second_end && second.acquired < first_end {
                    overlaps.push((first.clone(), second.clone()));
                }
            }
        }
        overlaps
    }

    /// The log's events of `worker`.
    pub fn events_of(&self, worker: &str) -> Vec<Logged> {
        self.log.lock().iter().filter(|logged| logged.worker == worker).cloned().collect()
    }
}

/// A worker: its framework and partitioner, its work in the ledger, its events logged.
pub struct Worker {
    pub name: String,
    pub framework: Framework,
    pub partitioner: Partitioner,
}

pub struct WorkerSpec<'a> {
    pub connect: &'a str,
    pub path: &'a str,
    pub items: &'a [String],
    pub settle: Duration,
    pub layout: PartitionLayout,
    pub session_timeout: Duration,
}

impl WorkerSpec<'_> {
    /// Starts worker `name` with its own framework (on `connect`).
    pub fn start(&self, name: &str, ledger: &Arc<Ledger>) -> Worker {
        let framework = builder(self.connect, self.session_timeout).start().expect("framework");
        self.start_on(name, framework, ledger)
    }

    /// Starts worker `name` on `framework`.
    pub fn start_on(&self, name: &str, framework: Framework, ledger: &Arc<Ledger>) -> Worker {
        let partitioner = Partitioner::builder(&framework, self.path, self.items.iter().cloned())
            .identifier(name)
            .settle(self.settle)
            .layout(self.layout)
            .start()
            .expect("partitioner");
        let mut events = partitioner.events();
        let (log_ledger, worker) = (ledger.clone(), name.to_owned());
        tokio::spawn(async move {
            while let Some(event) = events.next().await {
                let at = Instant::now();
                if let PartitionEvent::Acquired(acquired) = &event {
                    for owned in acquired {
                        let owned = owned.clone();
                        let index = {
                            let mut intervals = log_ledger.intervals.lock();
                            intervals.push(Interval {
                                item: owned.item().to_owned(),
                                worker: worker.clone(),
                                fencing_token: owned.fencing_token(),
                                acquired: at,
                                ended: None,
                            });
                            intervals.len() - 1
                        };
                        let interval_ledger = log_ledger.clone();
                        tokio::spawn(async move {
                            owned.ended().await;
                            interval_ledger.intervals.lock()[index].ended = Some(Instant::now());
                        });
                    }
                }
                log_ledger.log.lock().push(Logged { at, worker: worker.clone(), event });
            }
        });
        let (work_ledger, worker) = (ledger.clone(), name.to_owned());
        partitioner
            .run(move |item, token| {
                let working = work_ledger.start(&worker, &item, token);
                async move {
                    let _working = working;
                    std::future::pending::<()>().await;
                }
            })
            .expect("run");
        Worker { name: name.to_owned(), framework, partitioner }
    }
}

impl Worker {
    pub fn owned(&self) -> BTreeSet<String> {
        self.partitioner.owned().into_iter().map(|owned| owned.item().to_owned()).collect()
    }

    /// Closes the partitioner (releasing everything, leaving the party), then the framework.
    pub async fn close(self) {
        within("close the partitioner", self.partitioner.close(STEP)).await.expect("close");
        within("close the framework", self.framework.close()).await;
    }
}

/// Whether the workers own every item exactly once, each owning the same number give or take
/// one (the even split both layouts make).
pub fn split_exactly(workers: &[&Worker], items: &[String]) -> bool {
    let mut seen = BTreeSet::new();
    let mut sizes = Vec::new();
    for worker in workers {
        let owned = worker.owned();
        sizes.push(owned.len());
        for item in owned {
            if !seen.insert(item) {
                return false;
            }
        }
    }
    let even = sizes.iter().max().unwrap_or(&0) - sizes.iter().min().unwrap_or(&0) <= 1;
    even && seen == items.iter().cloned().collect()
}

/// Per item, the identifiers in the data of its lock nodes, as the server lists them.
pub async fn lock_nodes(observer: &Framework, path: &str, items: &[String]) -> BTreeMap<String, Vec<String>> {
    let mut nodes = BTreeMap::new();
    for item in items {
        let dir = format!("{path}/locks/{item}");
        let mut holders = Vec::new();
        for child in children(observer, &dir).await {
            if let Some((data, _)) = on_server(observer, &format!("{dir}/{child}")).await {
                holders.push(String::from_utf8_lossy(&data).into_owned());
            }
        }
        nodes.insert(item.clone(), holders);
    }
    nodes
}

/// Waits until the workers split the items exactly, each item with exactly one lock node on the
/// server, held by the worker that says it owns it.
pub async fn until_stable(observer: &Framework, path: &str, items: &[String], workers: &[&Worker]) {
    let what = format!("{} workers split {} items exactly, as the server shows", workers.len(), items.len());
    eventually(&what, || async {
        if !split_exactly(workers, items) {
            return false;
        }
        let owners: BTreeMap<String, String> = workers
            .iter()
            .flat_map(|worker| worker.owned().into_iter().map(|item| (item, worker.name.clone())))
            .collect();
        let nodes = lock_nodes(observer, path, items).await;
        nodes.iter().all(|(item, holders)| holders.len() == 1 && owners.get(item) == Some(&holders[0]))
    })
    .await;
}
