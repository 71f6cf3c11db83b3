//! The report's queues section (`benches/queues.rs`), and [`QUEUE_MODES`], the scenarios it and
//! the queues plot show.

use std::fmt::Write as _;

use serde_json::Value;

use super::cells::{cell, format_rate, ratio, times, PlotLink};
use crate::run::{Record, Run};

/// Queue scenarios in report order: (scenario, label).
pub const QUEUE_MODES: [(&str, &str); 6] = [
    ("put", "put, one per item"),
    ("put-batch", "put, batched"),
    ("take", "take, at most once"),
    ("take-lock-safe", "take, lock-safe"),
    ("end-to-end", "end to end, at most once"),
    ("end-to-end-lock-safe", "end to end, lock-safe"),
];

pub(super) fn queues_section(run: &Run, out: &mut String, plot: &PlotLink<'_>) {
    if run.results.iter().all(|record| record.bench != "queues") {
        return;
    }
    let _ = writeln!(out, "## Queues (`benches/queues.rs`): 4 producers / 4 consumers, one session each\n");
    plot(out, "queues.svg", "queue items/s per mode");
    let _ = writeln!(out, "| mode | ours items/s | Curator items/s | ours / Curator | Curator's way |\n|---|---:|---:|---:|---|");
    for (scenario, label) in QUEUE_MODES {
        let ours = run.find("queues", scenario, "ours", None);
        let curator = run.find("queues", scenario, "curator", None);
        if ours.is_none() && curator.is_none() {
            continue;
        }
        let how = curator.and_then(|found| found.fields.get("how")).and_then(Value::as_str).unwrap_or("–");
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {how} |",
            cell(ours.and_then(Record::ops), format_rate),
            cell(curator.and_then(Record::ops), format_rate),
            cell(ratio(ours.and_then(Record::ops), curator.and_then(Record::ops)), times)
        );
    }
    let _ = writeln!(out);
}
