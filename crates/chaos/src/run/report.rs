//! What a phase found, as the tables the run prints and the JSON summary it writes.

use std::collections::BTreeMap;

use serde_json::json;

use crate::barriers::BarrierReport;
use crate::caches;
use crate::check::RecipeReport;
use crate::counter::Counter;
use crate::counters::CounterReport;
use crate::linearizable::LinearReport;
use crate::partitions::PartitionReport;
use crate::recipes::{Contenders, Recipe};
use crate::store::StoreReport;
use crate::tally::Counts;

/// What one phase found.
pub(super) struct Outcome {
    /// Every lock recipe's and queue's report.
    pub(super) reports: BTreeMap<Recipe, RecipeReport>,
    /// Faults injected, by kind (none in the control).
    pub(super) faults: BTreeMap<String, u64>,
    /// What the busy sessions' frameworks did.
    pub(super) busy: Counts,
    /// The mix's checks.
    pub(super) mix: Mix,
}

/// Each counter's report.
pub(super) type CounterReports = BTreeMap<Counter, CounterReport>;

/// The checks of the recipes besides the locks and queues.
pub(super) struct Mix {
    pub(super) counters: CounterReports,
    /// The member nodes' violations, when members ran.
    pub(super) members: Option<Vec<String>>,
    /// The barrier rounds, when barriers ran.
    pub(super) barriers: Option<BarrierReport>,
    /// The caches' verdicts (`<holder>/<view>`: ok, detail), when caches ran.
    pub(super) caches: Option<BTreeMap<String, (bool, String)>>,
    /// The partition workers' checks, when they ran.
    pub(super) partitions: Option<PartitionReport>,
    /// The fenced store's writes and overlaps of effect, per lock recipe.
    pub(super) store: BTreeMap<String, StoreReport>,
}

impl Mix {
    pub(super) fn violations(&self) -> u64 {
        counter_violations(&self.counters)
            + self.members.as_ref().map_or(0, |found| found.len() as u64)
            + self.barriers.as_ref().map_or(0, |report| report.violations.len() as u64)
            + self.caches.as_ref().map_or(0, |found| found.values().filter(|(ok, _)| !ok).count() as u64)
            + self.partitions.as_ref().map_or(0, |report| report.violations.len() as u64)
            + self.store.values().map(|report| report.effect_overlaps.len() as u64).sum::<u64>()
    }

    pub(super) fn store_json(&self) -> serde_json::Value {
        self.store
            .iter()
            .map(|(recipe, report)| {
                let value = json!({
                    "accepted": report.accepted,
                    "refused": report.refused,
                    "effect_overlaps": report.effect_overlaps,
                });
                (recipe.clone(), value)
            })
            .collect::<serde_json::Map<_, _>>()
            .into()
    }

    pub(super) fn caches_json(&self) -> serde_json::Value {
        self.caches.as_ref().map_or(serde_json::Value::Null, |found| {
            found
                .iter()
                .map(|(view, (ok, detail))| (view.clone(), json!({"ok": ok, "detail": detail})))
                .collect::<serde_json::Map<_, _>>()
                .into()
        })
    }

    pub(super) fn partitions_json(&self) -> serde_json::Value {
        self.partitions.as_ref().map_or(serde_json::Value::Null, |report| {
            json!({
                "starts": report.starts,
                "moves": report.moves,
                "holders": report.holders,
                "lost": report.lost,
                "max_concurrent": report.max_concurrent,
                "settled_ms": report.settled_ms,
                "violations": report.violations,
            })
        })
    }

    pub(super) fn barriers_json(&self) -> serde_json::Value {
        self.barriers.as_ref().map_or(serde_json::Value::Null, |report| {
            json!({
                "full_rounds": report.full_rounds,
                "rust_entries": report.rust_entries,
                "curator_entries": report.curator_entries,
                "failed": report.failed,
                "stuck": report.stuck,
                "violations": report.violations,
            })
        })
    }

    pub(super) fn print(&self) {
        print_counters(&self.counters);
        let overlaps: Vec<&String> = self.store.values().flat_map(|report| &report.effect_overlaps).collect();
        println!(
            "{:<16} writes accepted {}, refused as stale (fenced off) {}; overlap of effect {}{}",
            "fenced-store",
            self.store.values().map(|report| report.accepted).sum::<u64>(),
            self.store.values().map(|report| report.refused).sum::<u64>(),
            overlaps.len(),
            overlaps.iter().take(8).map(|overlap| format!("\n{:<16} {overlap}", "")).collect::<String>()
        );
        if let Some(found) = &self.members {
            println!(
                "{:<16} violations {}{}",
                "members",
                found.len(),
                found.iter().take(8).map(|violation| format!("\n{:<16} {violation}", "")).collect::<String>()
            );
        }
        if let Some(found) = &self.caches {
            let wrong: Vec<String> = found
                .iter()
                .filter(|(_, (ok, _))| !ok)
                .map(|(view, (_, detail))| format!("{view}: {detail}"))
                .collect();
            let slowest = found
                .values()
                .filter(|(ok, _)| *ok)
                .filter_map(|(_, detail)| detail.split(' ').next()?.parse::<u64>().ok())
                .max()
                .unwrap_or(0);
            println!(
                "{:<16} followers converged {} of {} (slowest {slowest} ms, bound {} ms); violations {}{}",
                "cache",
                found.len() - wrong.len(),
                found.len(),
                caches::CONVERGE.as_millis(),
                wrong.len(),
                wrong.iter().take(8).map(|violation| format!("\n{:<16} {violation}", "")).collect::<String>()
            );
        }
        if let Some(report) = &self.partitions {
            println!(
                "{:<16} {} item works started by {} workers, {} moved to another worker; lost {}; most owners of one item at once {}; settled {}; violations {}{}",
                "partition",
                report.starts,
                report.holders,
                report.moves,
                report.lost,
                report.max_concurrent,
                report.settled_ms.map_or("-".to_owned(), |ms| format!("in {ms} ms")),
                report.violations.len(),
                report.violations.iter().take(8).map(|violation| format!("\n{:<16} {violation}", "")).collect::<String>()
            );
        }
        if let Some(report) = &self.barriers {
            println!(
                "{:<16} rounds with every member in {}; entries rust {} curator {}; enters/leaves timed out or failed {} (Curator's stuck and interrupted {}); violations {}{}",
                "double-barrier",
                report.full_rounds,
                report.rust_entries,
                report.curator_entries,
                report.failed,
                report.stuck,
                report.violations.len(),
                report.violations.iter().take(8).map(|violation| format!("\n{:<16} {violation}", "")).collect::<String>()
            );
        }
    }

    /// The control's rows no checker caught.
    pub(super) fn blind(&self) -> Vec<String> {
        let mut blind: Vec<String> =
            self.counters.iter().flat_map(|(counter, report)| report.not_caught(*counter)).collect();
        if self.store.values().all(|report| report.effect_overlaps.is_empty()) {
            blind.push("fenced-store (stale effects accepted)".to_owned());
        }
        if self.caches.as_ref().is_some_and(|found| found.values().all(|(ok, _)| *ok)) {
            blind.push("cache (dropped events)".to_owned());
        }
        if self.barriers.as_ref().is_some_and(|report| report.violations.is_empty()) {
            blind.push("double-barrier (enters without waiting)".to_owned());
        }
        if self.members.as_ref().is_some_and(Vec::is_empty) {
            blind.push("members (not re-created)".to_owned());
        }
        if self.partitions.as_ref().is_some_and(|report| {
            !report.violations.iter().any(|violation| violation.starts_with("owned twice"))
        }) {
            blind.push("partition (work without the item lock)".to_owned());
        }
        blind
    }
}

fn counter_violations(reports: &CounterReports) -> u64 {
    reports.values().map(|report| report.violations.len() as u64).sum()
}

fn print_counters(reports: &CounterReports) {
    for (counter, report) in reports {
        println!(
            "{:<16} value {} = {} applied (rust {}, curator {}) + up to {} unknown (OutcomeUnknown {}, errors {}, killed mid-write {}); {} not applied; Curator retries that applied twice {}; violations {}",
            counter.name(),
            report.value.map_or("-".to_owned(), |value| value.to_string()),
            report.definite(),
            report.rust_ok,
            report.curator_ok,
            report.unknown(),
            report.outcome_unknown,
            report.errors,
            report.unlogged,
            report.not_applied,
            report.curator_double_applied,
            if report.violations.is_empty() { "0".to_owned() } else { report.violations.join("; ") }
        );
        if let Some(check) = &report.linearizability {
            println!("{}", check.row(counter.name()));
        }
    }
}

pub(super) fn counters_json(reports: &CounterReports) -> serde_json::Value {
    reports
        .iter()
        .map(|(counter, report)| {
            (
                counter.name().to_owned(),
                json!({
                    "value": report.value,
                    "rust_ok": report.rust_ok,
                    "curator_ok": report.curator_ok,
                    "not_applied": report.not_applied,
                    "outcome_unknown": report.outcome_unknown,
                    "errors": report.errors,
                    "killed_mid_write": report.unlogged,
                    "curator_double_applied": report.curator_double_applied,
                    "violations": report.violations,
                    "linearizability": report.linearizability.as_ref().map(LinearReport::json),
                }),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

/// One recipe's row of the JSON summary.
pub(super) fn report_json(report: &RecipeReport) -> serde_json::Value {
    json!({
        "acquisitions": report.acquisitions(),
        "rust_acquisitions": report.rust_acquisitions,
        "other_acquisitions": report.other_acquisitions,
        "gave_up": report.gave_up,
        "holders": report.holders,
        "lost_fired": report.lost_fired,
        "violations": report.violations_by_kind(),
        "rust_violations": report.rust_violations,
        "other_violations": report.other_violations,
        "max_token": report.max_token,
        "max_concurrent": report.max_concurrent,
        "max_late_lost_ms": report.max_late_lost_ms,
        "belief_overlaps": report.belief_overlaps,
        "increments": report.increments,
        "uncertain_increments": report.uncertain_increments,
        "counter": report.counter,
        "errors": report.errors,
        "stale_markers": report.stale_markers,
        "fenced_after_lost": report.fenced_after_lost,
        "leaked_nodes": report.leaked_nodes,
        "items": report.items,
        "items_acked": report.items_acked,
        "acks_unlogged": report.acks_unlogged,
        "deliveries": report.deliveries,
        "curator_redeliveries": report.curator_redeliveries,
        "curator_stranded_locks": report.curator_stranded_locks,
    })
}

/// `kind=count ...`, or `0`.
fn violations_text(report: &RecipeReport) -> String {
    let violations = report.violations_by_kind();
    if violations.is_empty() {
        "0".to_owned()
    } else {
        violations.iter().map(|(kind, count)| format!("{kind}={count}")).collect::<Vec<_>>().join(" ")
    }
}

/// The lock rows (two lines each) and the queue rows of a phase.
pub(super) fn print_table(reports: &BTreeMap<Recipe, RecipeReport>) {
    println!(
        "{:<16} {:>9} {:>7} {:>7} {:>7} {:>6} {:>8} {:>9} {:>6} {:>6}  violations",
        "recipe", "acquired", "rust", "other", "holders", "lost", "max-hold", "late-ms", "errors", "leaks",
    );
    for (recipe, report) in reports.iter().filter(|(recipe, _)| !recipe.is_queue()) {
        let violations = violations_text(report);
        println!(
            "{:<16} {:>9} {:>7} {:>7} {:>7} {:>6} {:>8} {:>9.1} {:>6} {:>6}  {}",
            recipe.name(),
            report.acquisitions(),
            report.rust_acquisitions,
            report.other_acquisitions,
            report.holders,
            report.lost_fired,
            report.max_concurrent,
            report.max_late_lost_ms,
            report.errors,
            report.leaked_nodes,
            violations
        );
        let counter = report.counter.map_or("-".to_owned(), |count| count.to_string());
        let gave_up = if recipe.contenders() == Contenders::PerRecipe {
            String::new()
        } else {
            format!("; gave up {}", report.gave_up)
        };
        println!(
            "{:<16} counter {counter} = {} committed (+{} unknown); max token {:#x}; stale markers {}; fenced after lost {}; overlap of belief {}{gave_up}",
            "",
            report.increments,
            report.uncertain_increments,
            report.max_token,
            report.stale_markers,
            report.fenced_after_lost,
            report.belief_overlaps
        );
    }
    for (queue, report) in reports.iter().filter(|(recipe, _)| recipe.is_queue()) {
        let violations = violations_text(report);
        println!(
            "{:<16} items {} acked {} (+{} whose ack was sent but not confirmed, then never redelivered); deliveries {} \
             (rust {}, curator {}); curator redeliveries {}; curator stranded locks {}; consumers {}; left {}; errors {}; violations {violations}",
            queue.name(),
            report.items,
            report.items_acked,
            report.acks_unlogged,
            report.deliveries,
            report.rust_acquisitions,
            report.other_acquisitions,
            report.curator_redeliveries,
            report.curator_stranded_locks,
            report.holders,
            report.leaked_nodes,
            report.errors,
        );
    }
}
