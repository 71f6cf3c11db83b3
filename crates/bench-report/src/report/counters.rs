//! The report's counters section (`benches/counters.rs`).

use std::fmt::Write as _;

use super::cells::{cell, format_rate, ratio_cell, RATIO_CELLS};
use crate::run::{Record, Run};

pub(super) fn counters_section(run: &Run, out: &mut String) {
    let Some(clients) = run
        .select("counters", "shared-count")
        .chain(run.select("counters", "atomic-long"))
        .chain(run.select("counters", "atomic-long-promoted"))
        .find_map(|found| found.value)
    else {
        return;
    };
    let _ = writeln!(
        out,
        "## Counters (`benches/counters.rs`): {clients:.0} sessions incrementing one counter\n"
    );
    let _ = writeln!(
        out,
        "Each session adds 1 a fixed number of times, every increment retried until it succeeds; increments/s over \
         the whole run, and the node's final value checked against the count. `SharedCount`: the cached value and \
         a versioned `try_set` (Curator: `getVersionedValue` + `trySetCount`); the floor keeps the value as a \
         `SharedCount` does (a persistent watch re-reading the node) and sends a versioned `set_data`, reading \
         again after a conflict. `DistributedAtomicLong::increment`, no retry policy and no promotion, called until \
         it succeeds (Curator likewise); the floor: `get_data`, then a versioned `set_data`. Promoted: the same \
         with a `PromotedToLock` (one optimistic try, then the mutex and up to 1,001 tries 2 ms apart holding it, \
         Curator's `RetryNTimes(1000, 2)`); the floor does the same on bare calls (the optimistic write; after a \
         conflict the lock recipe's protected create and list, an exists watch on the predecessor, the tries, the \
         delete). Ours and the floor both send each conditional write as a plain versioned `set_data`; ours sends \
         it once on the session and settles a lost reply by reading the node back (version and creation \
         compared).\n"
    );
    let _ = writeln!(
        out,
        "| counter | ours inc/s | floor inc/s | Curator inc/s | ours / floor | ours / Curator | retries: ours / floor / \
         Curator (promoted increments) |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for (scenario, label) in [
        ("shared-count", "`SharedCount`"),
        ("atomic-long", "`DistributedAtomicLong`"),
        ("atomic-long-promoted", "`DistributedAtomicLong`, promoted to a lock"),
    ] {
        let found = |client: &str| run.find("counters", scenario, client, Some(clients));
        if found("ours").is_none() && found("floor").is_none() && found("curator").is_none() {
            continue;
        }
        let rate = |client: &str| cell(found(client).and_then(Record::ops), format_rate);
        let retries = |client: &str| {
            cell(found(client).and_then(|found| found.number("retries")), |n| format!("{n:.0}"))
        };
        let promoted_note = if scenario == "atomic-long-promoted" {
            let count = |client: &str| {
                cell(found(client).and_then(|found| found.number("promoted")), |n| format!("{n:.0}"))
            };
            format!(" (promoted: {} / {} / {})", count("ours"), count("floor"), count("curator"))
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {} | {} / {} / {}{promoted_note} |",
            rate("ours"),
            rate("floor"),
            rate("curator"),
            ratio_cell(found("ours"), found("floor")),
            ratio_cell(found("ours"), found("curator")),
            retries("ours"),
            retries("floor"),
            retries("curator"),
        );
    }
    let _ = writeln!(out, "\n{RATIO_CELLS}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_shows_each_side_both_ratios_and_the_retries() {
        let line = |scenario: &str, client: &str, median: f64, rounds: &str| {
            format!(
                r#"{{"bench":"counters","scenario":"{scenario}","client":"{client}","param":"clients","value":8,"ops":{median},"per_round":{rounds},"retries":12,"promoted":5}}"#
            )
        };
        let run = Run::parse(
            &[
                line("shared-count", "ours", 900.0, "[900,950]"),
                line("shared-count", "floor", 1000.0, "[1000,1000]"),
                line("shared-count", "curator", 450.0, "[450,500]"),
                line("atomic-long", "ours", 1200.0, "[1200]"),
                line("atomic-long-promoted", "ours", 600.0, "[600,700]"),
                line("atomic-long-promoted", "floor", 500.0, "[500,500]"),
                line("atomic-long-promoted", "curator", 300.0, "[300,350]"),
            ]
            .join("\n"),
        )
        .expect("parse");
        let mut out = String::new();
        counters_section(&run, &mut out);
        assert!(out.contains("8 sessions incrementing one counter"), "{out}");
        assert!(
            out.contains("| `SharedCount` | 900 | 1,000 | 450 | 0.90 (0.95) | 2.00 (2.00) | 12 / 12 / 12 |"),
            "{out}"
        );
        assert!(out.contains("| `DistributedAtomicLong` | 1,200 | – | – | – | – | 12 / – / – |"), "{out}");
        assert!(
            out.contains(
                "| `DistributedAtomicLong`, promoted to a lock | 600 | 500 | 300 | 1.20 (1.40) | 2.00 (2.00) | \
                 12 / 12 / 12 (promoted: 5 / 5 / 5) |"
            ),
            "{out}"
        );
    }

    #[test]
    fn no_counter_results_no_section() {
        let mut out = String::new();
        counters_section(&Run::default(), &mut out);
        assert!(out.is_empty());
    }
}
