//! The report's read-write lock section (`benches/rwlock.rs`).

use std::fmt::Write as _;

use super::cells::{cell, format_rate, ratio, times};
use crate::run::{Record, Run};

pub(super) fn rwlock_section(run: &Run, out: &mut String) {
    let mixes = run.values("rwlock", "mix");
    if mixes.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Read-write lock (`benches/rwlock.rs`): 8 sessions on one lock\n");
    let _ = writeln!(out, "| writes | ours acq/s | Curator acq/s | ours / Curator |\n|---:|---:|---:|---:|");
    for value in mixes {
        let rate = |client: &str| run.find("rwlock", "mix", client, Some(value)).and_then(Record::ops);
        let _ = writeln!(
            out,
            "| {value:.0} % | {} | {} | {} |",
            cell(rate("ours"), format_rate),
            cell(rate("curator"), format_rate),
            cell(ratio(rate("ours"), rate("curator")), times)
        );
    }
    let _ = writeln!(out);
}
