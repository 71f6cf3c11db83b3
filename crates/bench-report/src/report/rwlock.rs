//! The report's read-write lock section (`benches/rwlock.rs`).

use std::fmt::Write as _;

use super::cells::{cell, format_rate, ratio_cell, RATIO_CELLS};
use crate::run::{Record, Run};

pub(super) fn rwlock_section(run: &Run, out: &mut String) {
    let mixes = run.values("rwlock", "mix");
    if mixes.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Read-write lock (`benches/rwlock.rs`): 8 sessions on one lock\n");
    let _ = writeln!(
        out,
        "Each session loops acquire + release, a write with the given probability, else a read. The floor is our \
         read-write lock's protocol on bare zookeeper-client calls (create and list sent back to back; a read holds \
         when no write node is before it, else watches the first one; a write watches its predecessor), on sessions \
         of its own; ours, the floor and Curator take turns going first.\n"
    );
    let _ = writeln!(
        out,
        "| writes | ours acq/s | floor acq/s | Curator acq/s | ours / floor | ours / Curator |\n|---:|---:|---:|---:|---:|---:|"
    );
    for value in mixes {
        let found = |client: &str| run.find("rwlock", "mix", client, Some(value));
        let rate = |client: &str| cell(found(client).and_then(Record::ops), format_rate);
        let _ = writeln!(
            out,
            "| {value:.0} % | {} | {} | {} | {} | {} |",
            rate("ours"),
            rate("floor"),
            rate("curator"),
            ratio_cell(found("ours"), found("floor")),
            ratio_cell(found("ours"), found("curator")),
        );
    }
    let _ = writeln!(out, "\n{RATIO_CELLS}\n");
}
