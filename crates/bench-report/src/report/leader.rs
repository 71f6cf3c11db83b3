//! The report's leader failover section (`benches/leader.rs`).

use std::fmt::Write as _;

use super::cells::{cell, ratio, times, PlotLink};
use crate::run::Run;

pub(super) fn leader_section(run: &Run, out: &mut String, plot: &PlotLink<'_>) {
    if run.results.iter().all(|record| record.bench != "leader") {
        return;
    }
    let _ =
        writeln!(out, "## Leader failover (`benches/leader.rs`): two latches, time until the other leads\n");
    plot(out, "leader-failover.svg", "leader failover time after close and after crash");
    let _ = writeln!(out, "| after | ours | Curator | ours / Curator |\n|---|---:|---:|---:|");
    let ms = |value: f64| format!("{value:.2} ms");
    for (label, scenario, field) in [
        ("close, p50", "graceful", "p50_ms"),
        ("close, p90", "graceful", "p90_ms"),
        ("crash (SIGKILL), kill → leader", "crash", "kill_to_leader_ms"),
        ("crash, expiry seen → leader", "crash", "expiry_to_leader_ms"),
    ] {
        let value =
            |client: &str| run.find("leader", scenario, client, None).and_then(|found| found.number(field));
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} |",
            cell(value("ours"), ms),
            cell(value("curator"), ms),
            cell(ratio(value("ours"), value("curator")), times)
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
    let _ = writeln!(out);
}
