//! The report's leader failover section (`benches/leader.rs`).

use std::fmt::Write as _;

use serde_json::Value;

use super::cells::{cell, ratio, times, PlotLink, RATIO_CELLS};
use crate::run::{Record, Run};

/// The median of the per-round ratios of `field` (an array per record), when the rounds pair up.
fn paired(a: Option<&Record>, b: Option<&Record>, field: &str) -> Option<f64> {
    let rounds = |found: Option<&Record>| -> Option<Vec<f64>> {
        found?.fields.get(field)?.as_array()?.iter().map(Value::as_f64).collect()
    };
    let (a, b) = (rounds(a)?, rounds(b)?);
    if a.is_empty() || a.len() != b.len() || b.contains(&0.0) {
        return None;
    }
    let mut ratios: Vec<f64> = a.iter().zip(&b).map(|(a, b)| a / b).collect();
    ratios.sort_by(f64::total_cmp);
    Some(ratios[ratios.len() / 2])
}

pub(super) fn leader_section(run: &Run, out: &mut String, plot: &PlotLink<'_>) {
    if run.results.iter().all(|record| record.bench != "leader") {
        return;
    }
    let _ =
        writeln!(out, "## Leader failover (`benches/leader.rs`): two latches, time until the other leads\n");
    plot(out, "leader-failover.svg", "leader failover time after close and after crash");
    let _ = writeln!(
        out,
        "The floor (close only) is the latch's protocol on two bare sessions: protected ephemeral-sequential \
         `latch-` nodes, the follower's data watch on the leader's node; the leader deletes its node, timed until \
         the follower's watch fired and its listing again (which ours makes before it declares leadership) \
         returned. **Lower is better**: an ours / floor of 1.00 is at the floor.\n"
    );
    let _ = writeln!(
        out,
        "| after | ours | floor | Curator | ours / floor | ours / Curator |\n|---|---:|---:|---:|---:|---:|"
    );
    let ms = |value: f64| format!("{value:.2} ms");
    for (label, scenario, field, rounds) in [
        ("close, p50", "graceful", "p50_ms", Some("per_round_p50_ms")),
        ("close, p90", "graceful", "p90_ms", Some("per_round_p90_ms")),
        ("crash (SIGKILL), kill → leader", "crash", "kill_to_leader_ms", None),
        ("crash, expiry seen → leader", "crash", "expiry_to_leader_ms", None),
    ] {
        let found = |client: &str| run.find("leader", scenario, client, None);
        let value = |client: &str| found(client).and_then(|found| found.number(field));
        let ratio_of = |other: &str| {
            let of_medians = cell(ratio(value("ours"), value(other)), times);
            match rounds.and_then(|rounds| paired(found("ours"), found(other), rounds)) {
                Some(paired) => format!("{of_medians} ({})", times(paired)),
                None => of_medians,
            }
        };
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {} |",
            cell(value("ours"), ms),
            cell(value("floor"), ms),
            cell(value("curator"), ms),
            ratio_of("floor"),
            ratio_of("curator"),
        );
    }
    if let Some(timeout) = run.select("leader", "crash").find_map(|found| found.number("session_timeout_ms"))
    {
        let _ = writeln!(
            out,
            "\nCrash: a Curator leader's JVM is SIGKILLed; the server expires its session one session timeout ({timeout:.0} \
             ms) after it last heard from it, so kill → leader is bounded below by about that; the follower (ours or \
             a Curator latch) adds its reaction (expiry seen → leader)."
        );
    }
    let _ = writeln!(out, "\n{RATIO_CELLS}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_shows_the_floor_and_paired_ratios() {
        let line = |client: &str, p50: f64, rounds: &str| {
            format!(
                r#"{{"bench":"leader","scenario":"graceful","client":"{client}","p50_ms":{p50},"p90_ms":{p50},"per_round_p50_ms":{rounds},"per_round_p90_ms":{rounds}}}"#
            )
        };
        let run = Run::parse(
            &[line("ours", 2.0, "[2.0,3.0]"), line("floor", 1.0, "[1.0,1.0]"), line("curator", 4.0, "[4.0]")]
                .join("\n"),
        )
        .expect("parse");
        let mut out = String::new();
        leader_section(&run, &mut out, &|_: &mut String, _: &str, _: &str| {});
        assert!(out.contains("| close, p50 | 2.00 ms | 1.00 ms | 4.00 ms | 2.00 (3.00) | 0.50 |"), "{out}");
        assert!(out.contains("| crash, expiry seen → leader | – | – | – | – | – |"), "{out}");
    }

    #[test]
    fn no_leader_results_no_section() {
        let mut out = String::new();
        leader_section(&Run::default(), &mut out, &|_: &mut String, _: &str, _: &str| {});
        assert!(out.is_empty());
    }
}
