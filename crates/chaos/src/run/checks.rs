//! The checks at the end of a phase: every recipe's checker over the logs and the servers' final
//! state, the mix's, and the leak check after the run.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_testing::TestingCluster;

use super::kind::Kind;
use super::reading::{children, descendants, read_events, read_logs, watch_total};
use super::report::Mix;
use super::workload::StrandedLock;
use super::{Phase, CONTROL_CHECK_ROOT, CONTROL_LOCK_ROOT, LEAK_TIMEOUT, STEP};
use crate::barriers::check_barriers;
use crate::check::{check_recipe, RecipeReport};
use crate::counter::Counter;
use crate::counters::check_counter;
use crate::events::epoch_micros;
use crate::linearizable::{check_linearizable, FinalRead};
use crate::partitions;
use crate::queue_check::check_queue;
use crate::recipes::{Contenders, CounterValue, Recipe, CHECK_ROOT, LOCK_ROOT};
use crate::store::{check_store, read_store_log};
use crate::tally::{busy_counts, Counts};

/// What the end of a phase settled before the contenders stopped.
pub(super) struct Settled {
    /// The members' violations, when members ran.
    pub(super) members: Option<Vec<String>>,
    /// The caches' verdicts, when caches ran.
    pub(super) caches: Option<BTreeMap<String, (bool, String)>>,
    /// How long the partition workers took to settle (ms), or the violations at the bound.
    pub(super) partitions: Option<(Option<u64>, Vec<String>)>,
    /// The queue items a Curator consumer's live session held locked during the drain.
    pub(super) stranded: Vec<StrandedLock>,
}

impl Phase<'_> {
    /// Checks a phase whose contenders all stopped: counters, partitions, every lock recipe and
    /// queue, the barriers.
    pub(super) async fn check(
        &self,
        observer: &Framework,
        log_dir: &Path,
        expected: &BTreeMap<Recipe, Vec<String>>,
        killed: &HashMap<String, i64>,
        run_end: i64,
        settled: Settled,
    ) -> Result<(BTreeMap<Recipe, RecipeReport>, Counts, Mix), String> {
        let config = self.config;
        let Settled { members, caches, partitions: partitions_settled, stranded } = settled;
        let events = read_events(log_dir);
        let mut counters = BTreeMap::new();
        if config.processes(Kind::Counter) + config.processes(Kind::CuratorCounter) > 0 {
            let text = read_logs(log_dir, "counters-");
            for counter in Counter::ALL {
                let invoked = epoch_micros();
                let value = observer
                    .get_data(&counter.path(self.check_root), Deadline::after(STEP))
                    .await
                    .ok()
                    .and_then(|node| counter.decode(&node.data));
                let read = value.map(|value| FinalRead { value, invoked, completed: epoch_micros() });
                let report = check_counter(counter, text.lines(), value);
                counters.insert(
                    counter,
                    report.with_linearizability(check_linearizable(counter, text.lines(), read)),
                );
            }
        }
        let partitions = (config.processes(Kind::Partition) > 0).then(|| {
            let text = read_logs(log_dir, "partition-");
            let mut report = partitions::check_partitions(&text, killed, run_end);
            if let Some((settled_ms, violations)) = partitions_settled {
                report.settled_ms = settled_ms;
                report.violations.extend(violations);
            }
            report
        });
        let paused = self.paused.lock().map(|pauses| pauses.clone()).unwrap_or_default();
        let mut reports = BTreeMap::new();
        for recipe in &config.recipes {
            let counter = observer
                .get_data(&recipe.counter_path(self.check_root), Deadline::after(STEP))
                .await
                .ok()
                .and_then(|node| CounterValue::parse(&node.data));
            let tolerance = config.lost_tolerance.as_micros() as i64;
            reports.insert(
                *recipe,
                check_recipe(*recipe, &events, killed, run_end, tolerance, counter.as_ref(), &paused),
            );
        }
        for (queue, items) in expected {
            let path = queue.lock_path(self.queue_root);
            let left = children(observer, &path).await.len()
                + children(observer, &queue.queue_lock_path(self.queue_root)).await.len();
            let mut report = check_queue(*queue, &events, items, killed, left as u64, &paused);
            report.curator_stranded_locks =
                stranded.iter().filter(|lock| lock.queue == *queue).count() as u64;
            reports.insert(*queue, report);
        }
        for lock in &stranded {
            println!(
                "finding about Curator: {} item {} stayed locked by the live session {:#x} of Curator's consumer {}, \
                 which was not working on it (its lock create, retried after a connection loss, found its own node \
                 and took it for another consumer's); that consumer was stopped, and the item was then {}",
                lock.queue.name(),
                lock.item,
                lock.owner,
                lock.consumer,
                if reports[&lock.queue].leaked_nodes == 0 { "taken by the others" } else { "still not taken" }
            );
        }
        let _ = observer
            .delete(self.queue_root)
            .deleting_children_if_needed()
            .quietly()
            .deadline(Deadline::after(STEP))
            .await;
        let barriers = (config.barrier_members() > 0)
            .then(|| check_barriers(read_logs(log_dir, "barrier-").lines(), config.barrier_members()));
        let store = check_store(&read_store_log(&log_dir.join("store.log")), &events);
        Ok((reports, busy_counts(&events), Mix { counters, members, barriers, caches, partitions, store }))
    }
}

/// The rows of the negative control that no checker caught: a row without violations, or a
/// ZooKeeper-recipe or kazoo row on which one side's holders were never caught.
pub(super) fn blind_rows(reports: &BTreeMap<Recipe, RecipeReport>) -> Vec<String> {
    let mut blind = Vec::new();
    for (recipe, report) in reports {
        if report.total_violations() == 0 {
            blind.push(recipe.name().to_owned());
            continue;
        }
        if matches!(recipe.contenders(), Contenders::BusyAndZooKeeperRecipe | Contenders::BusyAndKazoo) {
            if report.rust_violations.is_empty() {
                blind.push(format!("{} (rust holders)", recipe.name()));
            }
            if report.other_violations.is_empty() {
                blind.push(format!("{} (other holders)", recipe.name()));
            }
        }
    }
    blind
}

pub(super) struct Leaks {
    pub(super) nodes_by_recipe: BTreeMap<Recipe, u64>,
    pub(super) ephemerals: u64,
    pub(super) watches: u64,
    pub(super) baseline: u64,
    pub(super) details: Vec<String>,
}

impl Leaks {
    pub(super) fn clean(&self) -> bool {
        self.nodes_by_recipe.values().all(|count| *count == 0)
            && self.ephemerals == 0
            && self.watches <= self.baseline
    }
}

/// Polls (up to [`LEAK_TIMEOUT`]) until no recipe node, no ephemeral and no extra watch is left,
/// then deletes the checkers' own nodes.
pub(super) async fn check_leaks(cluster: &TestingCluster, observer: &Framework, baseline: u64) -> Leaks {
    let deadline = Instant::now() + LEAK_TIMEOUT;
    loop {
        let mut leaks = Leaks {
            nodes_by_recipe: BTreeMap::new(),
            ephemerals: 0,
            watches: 0,
            baseline,
            details: Vec::new(),
        };
        for root in [LOCK_ROOT, CONTROL_LOCK_ROOT] {
            // ZooKeeper's recipe and kazoo make missing lock dirs persistent: once empty, they go
            // (a dir that still holds a node stays, and is reported with it).
            for recipe in Recipe::ALL.into_iter().filter(|recipe| recipe.lock_dir_may_be_persistent()) {
                let _ =
                    observer.delete(&recipe.lock_path(root)).quietly().deadline(Deadline::after(STEP)).await;
            }
            let found = descendants(observer, root).await;
            for node in found {
                let recipe = Recipe::ALL.into_iter().find(|recipe| recipe.owns_node(root, &node));
                if let Some(recipe) = recipe {
                    *leaks.nodes_by_recipe.entry(recipe).or_default() += 1;
                }
                leaks.details.push(node);
            }
        }
        for root in [CHECK_ROOT, CONTROL_CHECK_ROOT] {
            for recipe in Recipe::ALL {
                for marker in children(observer, &recipe.guard_dir(root)).await {
                    *leaks.nodes_by_recipe.entry(recipe).or_default() += 1;
                    leaks.details.push(format!("{}/{marker}", recipe.guard_dir(root)));
                }
            }
        }
        for member in cluster.members() {
            if let Ok(stats) = member.mntr().await {
                let ephemerals: u64 =
                    stats.get("zk_ephemerals_count").and_then(|count| count.parse().ok()).unwrap_or(0);
                leaks.ephemerals = leaks.ephemerals.max(ephemerals);
            }
        }
        leaks.watches = watch_total(cluster).await;
        if leaks.clean() || Instant::now() >= deadline {
            if !leaks.clean() {
                for member in cluster.members() {
                    if let Ok(text) = member.four_letter_word("wchc").await {
                        leaks.details.push(format!("wchc server {}: {}", member.server_id(), text.trim()));
                    }
                }
            }
            for root in [CHECK_ROOT, CONTROL_CHECK_ROOT] {
                let _ = observer
                    .delete(root)
                    .deleting_children_if_needed()
                    .quietly()
                    .deadline(Deadline::after(STEP))
                    .await;
            }
            return leaks;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}
