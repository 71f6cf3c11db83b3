//! The report's locks section (`benches/locks.rs`): uncontended, contended, many distinct locks,
//! waiters and held locks at scale.

use std::fmt::Write as _;

use super::cells::{
    cell, cpu_pair, cycle_cells, format_rate, ratio_cell, remade_pair, round_ratios_cell, times, PlotLink,
    RATIO_CELLS,
};
use crate::run::{Record, Run};

pub(super) fn locks_section(run: &Run, out: &mut String, plot: &PlotLink<'_>) {
    let _ = writeln!(out, "## Locks (`benches/locks.rs`)\n\n{RATIO_CELLS}\n");
    let ops = |scenario: &str, client: &str, value: Option<f64>| {
        run.find("locks", scenario, client, value).and_then(Record::ops)
    };
    let record =
        |scenario: &str, client: &str, value: Option<f64>| run.find("locks", scenario, client, value);
    if record("uncontended", "ours", None).is_some() {
        let _ = writeln!(out, "### Uncontended: lock + release on one path, one session\n");
        let _ = writeln!(
            out,
            "| client | cycles/s | p50 µs | p99 µs | CPU µs per cycle | / floor | ours / this |\n|---|---:|---:|---:|---:|---:|---:|"
        );
        let floor = record("uncontended", "floor", None);
        let ours = record("uncontended", "ours", None);
        for (label, scenario, client) in [
            ("zk-recipes", "uncontended", "ours"),
            ("Curator", "uncontended", "curator"),
            ("raw floor (create + list pipelined)", "uncontended", "floor"),
            ("raw one-by-one (Curator's protocol on bare calls)", "uncontended-one-by-one", "floor"),
        ] {
            let Some(found) = record(scenario, client, None) else { continue };
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {} |",
                cycle_cells(found),
                ratio_cell(Some(found), floor),
                ratio_cell(ours, Some(found)),
            );
        }
        let _ = writeln!(
            out,
            "\nCPU: our process's user + system time over the timed cycles, per cycle (Curator's driver and the \
             server are processes of their own).\n"
        );
        let ours = record("uncontended-interleaved", "ours", None);
        let floor = record("uncontended-interleaved", "floor", None);
        if let (Some(ours), Some(floor)) = (ours, floor) {
            let block = ours.number("block").map_or_else(|| "?".to_owned(), |block| format!("{block:.0}"));
            let _ = writeln!(
                out,
                "Ours and the floor interleaved: each on a session and path of its own, cycling in alternating \
                 blocks of {block} cycles (which goes first alternates too), so both are timed over the same \
                 stretch of the machine's time.\n\n| client | cycles/s | p50 µs | p99 µs | CPU µs per cycle | / floor |\n|---|---:|---:|---:|---:|---:|"
            );
            for (label, found) in [("zk-recipes", ours), ("raw floor (create + list pipelined)", floor)] {
                let _ = writeln!(
                    out,
                    "| {label} | {} | {} |",
                    cycle_cells(found),
                    ratio_cell(Some(found), Some(floor)),
                );
            }
            let _ = writeln!(out);
        }
    }

    let sessions = run.values("locks", "contended");
    if !sessions.is_empty() {
        let _ = writeln!(out, "### Contended: N sessions looping lock + release on one lock\n");
        plot(out, "locks-contended.svg", "acquisitions/s vs sessions");
        plot(out, "locks-handoff.svg", "hand-off latency vs sessions");
        let _ = writeln!(
            out,
            "| sessions | ours acq/s | Curator acq/s | floor acq/s | ours / floor | ours / Curator | Curator / floor | \
             hand-off p50/p99 µs, ours | hand-off, Curator | hand-off, floor | ours / floor, interleaved windows | \
             CPU µs per acquisition, interleaved, ours / floor |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for value in sessions {
            let [ours, curator, floor] =
                ["ours", "curator", "floor"].map(|client| record("contended", client, Some(value)));
            let interleaved = |client: &str| record("contended-interleaved", client, Some(value));
            let rate = |found: Option<&Record>| found.and_then(Record::ops);
            let hand_off = |found: Option<&Record>| match found
                .map(|found| (found.number("p50_us"), found.number("p99_us")))
            {
                Some((Some(p50), Some(p99))) => format!("{p50:.0} / {p99:.0}"),
                _ => "–".to_owned(),
            };
            let _ = writeln!(
                out,
                "| {value:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(rate(ours), format_rate),
                cell(rate(curator), format_rate),
                cell(rate(floor), format_rate),
                ratio_cell(ours, floor),
                ratio_cell(ours, curator),
                ratio_cell(curator, floor),
                hand_off(ours),
                hand_off(curator),
                hand_off(floor),
                ratio_cell(interleaved("ours"), interleaved("floor")),
                cpu_pair(interleaved("ours"), interleaved("floor")),
            );
        }
        let _ = writeln!(
            out,
            "\nHand-off: from one holder's release returning to the next holder's lock returning (one clock per \
             side: ours and the floor in this process, Curator's contenders in one JVM with `System.nanoTime`). It \
             can be negative: the next holder's watch event may be read before the releaser's delete reply. The \
             raw floor is our lock's protocol on bare calls: protected ephemeral-sequential create and list \
             pipelined, watch the predecessor, no re-list when the predecessor was first. Interleaved windows: \
             ours and the floor, each with N sessions on a lock of its own, cycle in alternating windows (which \
             goes first alternates), each opening only once the other's queue has drained, so that a drift of \
             the machine falls on both alike; CPU is our process's user + system time while a side's window was \
             open, per acquisition.\n"
        );
    }

    let locks = run.values("locks", "distinct");
    if !locks.is_empty() {
        let _ =
            writeln!(out, "### Many distinct locks in one process: N locks cycled at once on one session\n");
        plot(out, "locks-distinct.svg", "cycles/s vs distinct locks");
        let _ = writeln!(
            out,
            "| locks | untimed cycles per lock first | cycles per lock | ours cycles/s | Curator cycles/s | floor cycles/s | \
             ours / floor | ours / floor, each round | ours / Curator | Curator / floor | Curator threads | \
             CPU µs per cycle, ours / floor | ours / floor, interleaved passes | \
             CPU µs per cycle, interleaved, ours / floor | \
             ours' cycles that made a reaped directory again, back to back / interleaved |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for value in locks {
            let rate = |client: &str| ops("distinct", client, Some(value));
            let found = |client: &str| record("distinct", client, Some(value));
            let interleaved = |client: &str| record("distinct-interleaved", client, Some(value));
            let threads =
                record("distinct", "curator", Some(value)).and_then(|found| found.number("threads"));
            let per_lock = |field: &str| {
                run.select("locks", "distinct")
                    .find(|found| found.value == Some(value))
                    .and_then(|found| found.number(field))
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                format_rate(value),
                cell(per_lock("warm_up_each"), format_rate),
                cell(per_lock("cycles_each"), format_rate),
                cell(rate("ours"), format_rate),
                cell(rate("curator"), format_rate),
                cell(rate("floor"), format_rate),
                ratio_cell(found("ours"), found("floor")),
                round_ratios_cell(found("ours"), found("floor")),
                ratio_cell(found("ours"), found("curator")),
                ratio_cell(found("curator"), found("floor")),
                cell(threads, format_rate),
                cpu_pair(found("ours"), found("floor")),
                ratio_cell(interleaved("ours"), interleaved("floor")),
                cpu_pair(interleaved("ours"), interleaved("floor")),
                remade_pair(found("ours"), interleaved("ours")),
            );
        }
        let _ = writeln!(
            out,
            "\nOurs: a task per lock on one session; with many locks at once it sends its creates and releases \
             together as multis (`FrameworkBuilder::batch_writes`, on by default; docs/framework.md), with a few \
             (10) each as a request of its own, as the floor does. Curator: a thread per lock on one client (JVM `-Xss256k`), as \
             many as the driver was allowed (the Curator threads column). The floor: the same create + list + delete on bare \
             calls at the same concurrency, each a request of its own (the protocol as Curator and a single lock of ours send it). CPU: our process's user + system time over the timed part, per \
             cycle (the server and Curator's driver are processes of their own). Each client first cycles the same locks untimed: their directories exist, \
             Curator's threads run and its JVM has compiled its hot paths before the clock starts (a run without that \
             column timed Curator's start-up too). Interleaved passes: ours and the floor on locks of their own, \
             warmed up alike, then timed in alternating passes (every lock cycled once per pass, which client goes \
             first alternating), so that a drift of the machine falls on both alike: where the back-to-back ratios \
             of the rounds (the each-round column) spread wider than a row's distance from a target, the machine \
             bounds that row's back-to-back figure, and the interleaved passes are the comparison. Our lock directories are \
             containers, as Curator's are: the server reaps one found empty (`znode.container.checkIntervalMs`, \
             60 s by default, up to 10,000 a minute), and the lock's next create fails and makes it again — a failed \
             create and listing and one round trip more. The floor's directories are persistent and never reaped; \
             the last column is the share of our timed cycles that paid this (from the parent's children version).\n"
        );
    }

    let waiters = run.values("locks", "waiters");
    if !waiters.is_empty() {
        let _ = writeln!(out, "### Scale: waiters on one lock, one session (ours)\n");
        plot(out, "locks-waiters.svg", "server packets per hand-off vs waiters");
        let _ = writeln!(
            out,
            "| waiters | live heap per waiter (bytes) | RSS per waiter (bytes) | server packets per hand-off | hand-offs/s \
             while draining | queued in (s) |\n|---:|---:|---:|---:|---:|---:|"
        );
        for value in waiters {
            let Some(found) = record("waiters", "ours", Some(value)) else { continue };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                format_rate(value),
                cell(found.number("live_heap_per_waiter_bytes"), |bytes| format!("{bytes:.0}")),
                cell(found.number("rss_per_waiter_bytes"), |bytes| format!("{bytes:.0}")),
                cell(found.number("packets_per_handoff"), times),
                cell(found.number("handoffs_per_sec"), format_rate),
                cell(found.number("queue_secs"), |secs| format!("{secs:.1}")),
            );
        }
        let _ = writeln!(
            out,
            "\nLive heap: bytes allocated and not freed (counted by the bench's global allocator) after the waiters \
             queued minus before, divided by the waiters: what a waiter holds, whatever ran before (target: at most \
             4 KiB at 10,000 waiters). RSS: the process's `VmRSS` after the waiters queued minus before (after \
             `malloc_trim`), divided by the waiters; it depends on the heap's history (freed pages kept from earlier \
             scenarios are reused first). Packets: the server's `mntr` `zk_packets_sent` + `zk_packets_received` over the drain, divided \
             by the releases; flat from the smallest to the largest line means every release wakes exactly one \
             waiter.\n"
        );
    }
    for found in run.select("locks", "held") {
        let _ = writeln!(out, "### Scale: held locks on one session, then the session expires (ours)\n");
        let ms = |name: &str| cell(found.number(name), |ms| format!("{ms:.0} ms"));
        let _ = writeln!(out, "| | |\n|---|---:|");
        let _ = writeln!(out, "| locks held | {} |", cell(found.value, format_rate));
        let _ = writeln!(
            out,
            "| set up in | {} |",
            cell(found.number("set_up_secs"), |secs| format!("{secs:.1} s"))
        );
        let _ = writeln!(
            out,
            "| live heap per held lock | {} |\n| RSS per held lock | {} |",
            cell(found.number("live_heap_per_hold_bytes"), |bytes| format!("{bytes:.0} bytes")),
            cell(found.number("rss_per_hold_bytes"), |bytes| format!("{bytes:.0} bytes"))
        );
        let _ = writeln!(out, "| server back → `Lost` | {} |", ms("lost_event_ms"));
        let _ = writeln!(out, "| server back → first `lost()` | {} |", ms("first_lost_ms"));
        let _ = writeln!(out, "| server back → every `lost()` | {} |", ms("all_lost_ms"));
        let _ = writeln!(out, "| server back → `Reconnected` (new session) | {} |", ms("reconnected_ms"));
        let _ = writeln!(
            out,
            "\nExpiry: a fault proxy cuts our client off, a second connection resumes the session (its id and \
             password) and closes it, so the server ends it at once; then the proxy lets our client through again \
             and it finds its session expired. Times run from that moment (\"server back\"). The framework runs \
             with `ErrorPolicy::SessionOnly`, so a hold is lost with its session, not on the disconnection.\n"
        );
    }
}
