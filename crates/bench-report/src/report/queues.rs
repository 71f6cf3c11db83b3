//! The report's queues section (`benches/queues.rs`), and [`QUEUE_MODES`], the scenarios it and
//! the queues plot show.

use std::fmt::Write as _;

use serde_json::Value;

use super::cells::{
    cell, cpu_us, field_pair, format_rate, ratio_cell, round_ratios_cell, times, PlotLink, RATIO_CELLS,
};
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
    let _ = writeln!(
        out,
        "The floor is our queue's protocol on bare zookeeper-client calls at the same concurrency, with nothing \
         else (no handler channel, no serializer): one create per item, or 100 per multi as our `put_batch`; takes \
         of up to 16 items per round trip as our consumer's default prefetch (at most once: the reads and one \
         multi deleting them; lock-safe: one multi creating the lock nodes and the reads, then one finish multi). \
         Where ours batches, the floor batches the same way; the floor that does not (one item per round trip) \
         is shown beside it. A take is timed until every item is done: at most once, until the last \
         handler ran (its item was deleted before); lock-safe, until the last item's finish multi (ours: until \
         the queue holds no item, its last acks done). One untimed round of every side comes first. CPU: our \
         process's user + system time over the timed part, per item (the server and Curator's driver are \
         processes of their own); packets: the server's packets sent + received per item (`mntr`; takes and end \
         to end). Where ours costs more of either per item than the floor, that work is what the row's ratio \
         pays for: the clients and the server share this machine's cores.\n"
    );
    let _ = writeln!(
        out,
        "| mode | ours items/s | floor items/s | Curator items/s | ours / floor | ours / floor, each round | \
         ours / Curator | floor without batching, items/s | ours / that floor | CPU µs per item, ours / floor | \
         server packets per item, ours / floor | Curator's way |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for (scenario, label) in QUEUE_MODES {
        let found = |client: &str| run.find("queues", scenario, client, None);
        if found("ours").is_none() && found("curator").is_none() {
            continue;
        }
        let rate = |client: &str| cell(found(client).and_then(Record::ops), format_rate);
        let how =
            found("curator").and_then(|found| found.fields.get("how")).and_then(Value::as_str).unwrap_or("–");
        let unbatched = found("floor-1");
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {how} |",
            rate("ours"),
            rate("floor"),
            rate("curator"),
            ratio_cell(found("ours"), found("floor")),
            round_ratios_cell(found("ours"), found("floor")),
            ratio_cell(found("ours"), found("curator")),
            rate("floor-1"),
            if unbatched.is_some() { ratio_cell(found("ours"), unbatched) } else { "–".to_owned() },
            field_pair(found("ours"), found("floor"), "cpu_us_per_item", cpu_us),
            field_pair(found("ours"), found("floor"), "packets_per_item", times),
        );
    }
    let _ = writeln!(out, "\n{RATIO_CELLS}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(lines: &[String]) -> String {
        let run = Run::parse(&lines.join("\n")).expect("parse");
        let mut out = String::new();
        queues_section(&run, &mut out, &|_: &mut String, _: &str, _: &str| {});
        out
    }

    fn line(scenario: &str, client: &str, median: f64, rounds: &str) -> String {
        format!(
            r#"{{"bench":"queues","scenario":"{scenario}","client":"{client}","ops":{median},"per_round":{rounds},"how":"its way","cpu_us_per_item":{},"packets_per_item":{}}}"#,
            median / 100.0,
            median / 1000.0,
        )
    }

    #[test]
    fn the_section_shows_both_floors_and_every_ratio() {
        let out = section(&[
            line("take", "ours", 900.0, "[900,800]"),
            line("take", "floor", 1000.0, "[1000,1000]"),
            line("take", "floor-1", 300.0, "[300,200]"),
            line("take", "curator", 300.0, "[300,400]"),
            line("put", "ours", 500.0, "[500]"),
        ]);
        assert!(
            out.contains("| take, at most once | 900 | 1,000 | 300 | 0.90 (0.90) | 0.90 · 0.80 | 3.00 (3.00) | 300 | 3.00 (4.00) | 9.0 / 10.0 | 0.90 / 1.00 | its way |"),
            "{out}"
        );
        assert!(out.contains("| put, one per item | 500 | – | – | – | – | – | – | – | – | – | – |"), "{out}");
        assert!(!out.contains("put, batched"), "{out}");
    }

    #[test]
    fn no_queue_results_no_section() {
        assert!(section(&[]).is_empty());
    }
}
