//! The report's metrics section (`benches/metrics.rs`): what recording metrics costs.

use std::fmt::Write as _;

use super::cells::{cell, format_rate, ratio_cell, RATIO_CELLS};
use crate::run::Run;

pub(super) fn metrics_section(run: &Run, out: &mut String) {
    let found = |client: &str| run.find("metrics", "uncontended", client, None);
    let (Some(recorded), Some(silent)) = (found("recorded"), found("not-recorded")) else {
        return;
    };
    let _ =
        writeln!(out, "## Metrics (`benches/metrics.rs`): what recording costs an uncontended lock cycle\n");
    let _ = writeln!(
        out,
        "Two mutexes on one server, one session each, in interleaved rounds of {} cycles: one built before any \
         recorder was installed (its handles are no-ops, as in an application without metrics), one after \
         Prometheus's recorder was installed (every acquire and hold recorded).\n",
        cell(recorded.number("cycles_per_round"), format_rate)
    );
    let _ = writeln!(
        out,
        "| | cycles/s | rounds |\n|---|---:|---:|\n| not recorded | {} | {} |\n| recorded | {} | {} |\n| recorded / not recorded | {} | |",
        cell(silent.ops(), format_rate),
        silent.per_round().len(),
        cell(recorded.ops(), format_rate),
        recorded.per_round().len(),
        ratio_cell(Some(recorded), Some(silent)),
    );
    let _ = writeln!(out, "\n{RATIO_CELLS}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cost_is_a_paired_ratio() {
        let run = Run::parse(concat!(
            r#"{"bench":"metrics","scenario":"uncontended","client":"not-recorded","ops":1000.0,"per_round":[1000.0,900.0,1100.0],"cycles_per_round":300}"#, "\n",
            r#"{"bench":"metrics","scenario":"uncontended","client":"recorded","ops":990.0,"per_round":[990.0,909.0,1100.0],"cycles_per_round":300}"#,
        ))
        .expect("parse");
        let mut out = String::new();
        metrics_section(&run, &mut out);
        assert!(out.contains("| recorded / not recorded | 0.99 (1.00) | |"), "{out}");
        assert!(out.contains("rounds of 300 cycles"), "{out}");
    }

    #[test]
    fn no_metrics_results_no_section() {
        let mut out = String::new();
        metrics_section(&Run::default(), &mut out);
        assert!(out.is_empty());
    }
}
