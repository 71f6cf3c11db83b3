//! The report's double-barrier section (`benches/barriers.rs`).

use std::fmt::Write as _;

use super::cells::{cell, ratio_cell, RATIO_CELLS};
use crate::run::{Record, Run};

pub(super) fn barriers_section(run: &Run, out: &mut String) {
    let sizes = run.values("barriers", "double");
    if sizes.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Double barrier (`benches/barriers.rs`): rounds of enter + leave\n");
    let barrier_rounds = run
        .select("barriers", "double")
        .find_map(|found| found.number("barrier_rounds"))
        .map_or_else(|| "a fixed number of".to_owned(), |rounds| format!("{rounds:.0}"));
    let _ = writeln!(
        out,
        "N members (one session each) loop {barrier_rounds} rounds of enter + leave on one barrier of N, each starting \
         a round once all left the last one (an in-process barrier on every side: Curator 5.4's deadlocks when a \
         member enters the next round while others still leave). Curator: a new `DistributedDoubleBarrier` per \
         round (GH-1290). The floor is our double barrier's protocol on bare calls: a persistent watch on the \
         barrier path per enter and per leave, the member node, listings until `ready` is there or N members are \
         (then it creates `ready`); leave lists, deletes the member node in Curator's order (at once unless it is \
         the lowest listed; the lowest keeps it until it is alone) and lists until the round's members are gone \
         (the last deletes `ready`).\n"
    );
    let _ = writeln!(
        out,
        "| members | ours rounds/s | floor rounds/s | Curator rounds/s | ours / floor | ours / Curator |\n|---:|---:|---:|---:|---:|---:|"
    );
    let mut failures = Vec::new();
    for members in sizes {
        let found = |client: &str| run.find("barriers", "double", client, Some(members));
        let rate = |client: &str| cell(found(client).and_then(Record::ops), |rate| format!("{rate:.1}"));
        let curator_failed = found("curator").and_then(|record| record.number("failed_runs"));
        let curator_rate = match curator_failed {
            Some(failed) => format!("{} ({failed:.0} runs failed)", rate("curator")),
            None => rate("curator"),
        };
        if let (Some(failed), Some(reason)) =
            (curator_failed, found("curator").and_then(|record| record.fields.get("failure")?.as_str()))
        {
            failures
                .push(format!("{members:.0} members: {failed:.0} runs, e.g. \"{}\"", in_one_line(reason)));
        }
        let _ = writeln!(
            out,
            "| {members:.0} | {} | {} | {curator_rate} | {} | {} |",
            rate("ours"),
            rate("floor"),
            ratio_cell(found("ours"), found("floor")),
            ratio_cell(found("ours"), found("curator")),
        );
    }
    if !failures.is_empty() {
        let _ = writeln!(
            out,
            "\nCurator's double barrier failed some runs (those runs are left out of its figure, and its rounds no \
             longer pair up with ours; the bench's log has the driver's last lines): {}.",
            failures.join("; ")
        );
    }
    let _ = writeln!(out, "\n{RATIO_CELLS}\n");
}

/// A driver failure in one line: its first line, and the driver's own `failed:` line from the
/// stderr lines quoted after it (without their stack traces).
fn in_one_line(reason: &str) -> String {
    let mut lines = reason.lines();
    let first =
        lines.next().unwrap_or_default().trim_end_matches(':').trim_end_matches("; last stderr lines");
    match lines.find_map(|line| line.split_once("failed: ").map(|(_, what)| what)) {
        Some(what) => format!("{first}: {what}"),
        None => first.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_shows_each_size_and_both_ratios() {
        let line = |members: u32, client: &str, median: f64, rounds: &str| {
            format!(
                r#"{{"bench":"barriers","scenario":"double","client":"{client}","param":"members","value":{members},"ops":{median},"per_round":{rounds},"barrier_rounds":30}}"#
            )
        };
        let run = Run::parse(
            &[
                line(4, "ours", 45.0, "[45,40]"),
                line(4, "floor", 50.0, "[50,50]"),
                line(4, "curator", 15.0, "[15,20]"),
                line(16, "ours", 12.5, "[12.5]"),
            ]
            .join("\n"),
        )
        .expect("parse");
        let mut out = String::new();
        barriers_section(&run, &mut out);
        assert!(out.contains("loop 30 rounds"), "{out}");
        assert!(out.contains("| 4 | 45.0 | 50.0 | 15.0 | 0.90 (0.90) | 3.00 (3.00) |"), "{out}");
        assert!(out.contains("| 16 | 12.5 | – | – | – | – |"), "{out}");
    }

    #[test]
    fn a_driver_failure_is_quoted_in_one_line_without_its_stack_trace() {
        let reason = "the Curator driver failed while we waited for `RESULT` (pid 9320); last stderr lines:\n\
                      [CuratorDriver 2026-11-28T12:56:01Z] failed: java.lang.IllegalStateException: leave timed out\n\
                      java.lang.IllegalStateException: leave timed out\n\
                      \tat zkrecipes.interop.CuratorBarriers.run(CuratorBarriers.java:65)";
        assert_eq!(
            in_one_line(reason),
            "the Curator driver failed while we waited for `RESULT` (pid 9320): \
             java.lang.IllegalStateException: leave timed out"
        );
        assert_eq!(in_one_line("timed out after 300.0 s"), "timed out after 300.0 s");
    }

    #[test]
    fn no_barrier_results_no_section() {
        let mut out = String::new();
        barriers_section(&Run::default(), &mut out);
        assert!(out.is_empty());
    }
}
