//! The report's service-discovery section (`benches/discovery.rs`).

use std::fmt::Write as _;

use super::cells::{cell, ratio_cell, RATIO_CELLS};
use crate::run::{Record, Run};

pub(super) fn discovery_section(run: &Run, out: &mut String) {
    let Some(instances) = run.values("discovery", "memory").last().copied() else {
        return;
    };
    let setting = |name: &str| {
        run.select("discovery", "follow-p99").find_map(|found| found.number(name)).unwrap_or(f64::NAN)
    };
    let _ = writeln!(
        out,
        "## Service discovery (`benches/discovery.rs`): a `ServiceCache` following {instances:.0} instances\n"
    );
    let _ = writeln!(
        out,
        "A writer re-registers {:.0} instances per second (unregister, then register) for {:.0} s per round; ours (a \
         `ServiceCache` subscriber), the floor (a bare persistent recursive watch that reads each created node, keeping \
         the raw bytes by name) and Curator's `ServiceCache` (a listener diffing `getInstances()`) follow the same \
         writes at the same time, each on its own session. Latency is from `register` returning to the instance being \
         seen; memory is what the loaded cache holds per instance (ours and the floor: live heap, counted by the \
         bench's allocator; Curator: Java heap after full GCs). **Lower is better in every column**: an ours / floor of \
         1.00 is at the floor.\n",
        setting("rate"),
        setting("secs")
    );
    let _ = writeln!(
        out,
        "| per instance | ours | floor | Curator | ours / floor | ours / Curator |\n|---|---:|---:|---:|---:|---:|"
    );
    for (label, scenario, scale, digits) in [
        ("latency p50 (ms)", "follow-p50", 1e-3, 2),
        ("latency p99 (ms)", "follow-p99", 1e-3, 2),
        ("memory (bytes)", "memory", 1.0, 0),
    ] {
        let found = |client: &str| run.find("discovery", scenario, client, Some(instances));
        let value = |client: &str| {
            cell(found(client).and_then(Record::ops), |value| format!("{:.digits$}", value * scale))
        };
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {} |",
            value("ours"),
            value("floor"),
            value("curator"),
            ratio_cell(found("ours"), found("floor")),
            ratio_cell(found("ours"), found("curator")),
        );
    }
    let missed = |client: &str| {
        run.find("discovery", "follow-p99", client, Some(instances))
            .and_then(|found| found.number("missed"))
            .map_or_else(|| "–".to_owned(), |missed| format!("{missed:.0}"))
    };
    let _ = writeln!(
        out,
        "\nRe-registrations never seen (within 10 s of the last write): ours {}, floor {}, Curator {}. {RATIO_CELLS}\n",
        missed("ours"),
        missed("floor"),
        missed("curator")
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_shows_each_side_and_both_ratios() {
        let line = |scenario: &str, client: &str, median: f64, rounds: &str| {
            format!(
                r#"{{"bench":"discovery","scenario":"{scenario}","client":"{client}","value":1000,"ops":{median},"per_round":{rounds},"missed":0,"rate":100,"secs":20}}"#
            )
        };
        let run = Run::parse(
            &[
                line("follow-p50", "ours", 200.0, "[200,180,220]"),
                line("follow-p50", "floor", 100.0, "[100,100,100]"),
                line("follow-p50", "curator", 400.0, "[400,360,440]"),
                line("follow-p99", "ours", 900.0, "[900]"),
                line("memory", "ours", 1800.0, "[1800,1800,1800]"),
                line("memory", "floor", 900.0, "[900,900,900]"),
            ]
            .join("\n"),
        )
        .expect("parse");
        let mut out = String::new();
        discovery_section(&run, &mut out);
        assert!(out.contains("following 1000 instances"), "{out}");
        assert!(
            out.contains("| latency p50 (ms) | 0.20 | 0.10 | 0.40 | 2.00 (2.00) | 0.50 (0.50) |"),
            "{out}"
        );
        assert!(out.contains("| memory (bytes) | 1800 | 900 | – | 2.00 (2.00) | – |"), "{out}");
        assert!(out.contains("ours 0, floor –, Curator –"), "{out}");
        assert!(
            out.contains("re-registers 100 instances per second (unregister, then register) for 20 s"),
            "{out}"
        );
    }

    #[test]
    fn no_discovery_results_no_section() {
        let mut out = String::new();
        discovery_section(&Run::default(), &mut out);
        assert!(out.is_empty());
    }
}
