//! The report's cache section (`benches/cache.rs`).

use std::fmt::Write as _;

use super::cells::{cell, format_rate, ratio_cell, RATIO_CELLS};
use crate::run::{Record, Run};

pub(super) fn cache_section(run: &Run, out: &mut String) {
    if run.results.iter().all(|record| record.bench != "cache") {
        return;
    }
    let _ = writeln!(out, "## Cache (`benches/cache.rs`): loading a subtree and following its changes\n");
    let _ = writeln!(
        out,
        "Ours (`Cache`), the floor (the cache's reads on bare zookeeper-client calls, 256 in flight: `get_data`, then \
         `get_children` where a node has children; for the follow, a bare persistent recursive watch reading each \
         changed node) and Curator's `CuratorCache` (a fresh JVM each round) on the same trees. Load: from start to \
         initialized (lower is better; ours / floor 1.00 is at the floor). Memory per node: ours, live heap counted by \
         the bench's allocator (RSS beside it); Curator's, Java heap after full GCs. A Curator load that reported \
         initialized holding fewer nodes than the tree is shown as such, not timed.\n"
    );
    let _ = writeln!(
        out,
        "| tree | nodes | ours load (s) | floor load (s) | Curator load (s) | ours / floor | ours / Curator | ours bytes/node (RSS) | Curator bytes/node |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (label, tree) in [("children of one parent", "flat"), ("a subtree of parents of 1,000", "tree")] {
        let load = format!("load-{tree}");
        let memory = format!("memory-{tree}");
        let found = |scenario: &str, client: &str| {
            run.results.iter().find(|record| {
                record.bench == "cache" && record.scenario == scenario && record.client == client
            })
        };
        let Some(ours) = found(&load, "ours") else { continue };
        let secs = |record: Option<&Record>| cell(record.and_then(Record::ops), |secs| format!("{secs:.2}"));
        let curator = found(&load, "curator");
        let incomplete = curator
            .and_then(|record| record.fields.get("incomplete"))
            .and_then(|counts| counts.as_array())
            .filter(|counts| !counts.is_empty())
            .map(|counts| {
                let counts: Vec<String> =
                    counts.iter().filter_map(|count| count.as_f64()).map(format_rate).collect();
                format!(
                    "initialized holding {} of {} nodes",
                    counts.join(", "),
                    cell(ours.value, format_rate)
                )
            });
        let curator_load =
            incomplete.clone().unwrap_or_else(|| secs(curator.filter(|record| record.ops().is_some())));
        let bytes =
            |record: Option<&Record>| cell(record.and_then(Record::ops), |bytes| format!("{bytes:.0}"));
        let ours_memory = found(&memory, "ours");
        let rss = ours_memory.and_then(|record| record.number("rss_bytes_per_node"));
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {curator_load} | {} | {} | {} ({}) | {} |",
            cell(ours.value, format_rate),
            secs(Some(ours)),
            secs(found(&load, "floor")),
            ratio_cell(Some(ours), found(&load, "floor")),
            ratio_cell(Some(ours), curator.filter(|record| record.ops().is_some())),
            bytes(ours_memory),
            cell(rss, |bytes| format!("{bytes:.0}")),
            bytes(found(&memory, "curator")),
        );
    }
    let follow: Vec<&Record> = run.select("cache", "follow").collect();
    if let Some(first) = follow.first() {
        let _ = writeln!(
            out,
            "\nFollowing a writer that sets the children of a {}-child parent, asked for {} sets/s for {} s (reached {} \
             sets/s); lag from a set being sent to its data being seen:\n",
            cell(first.value, format_rate),
            cell(first.number("asked_rate"), format_rate),
            cell(first.number("secs"), |secs| format!("{secs:.0}")),
            cell(first.number("achieved_rate"), format_rate),
        );
        let _ = writeln!(out, "| follower | changes seen | p50 (ms) | p99 (ms) |\n|---|---:|---:|---:|");
        let ms = |us: f64| format!("{:.2}", us / 1e3);
        for client in ["ours", "floor", "curator"] {
            let Some(record) = follow.iter().find(|record| record.client == client) else { continue };
            let _ = writeln!(
                out,
                "| {client} | {} | {} | {} |",
                cell(record.number("changes"), format_rate),
                cell(record.number("p50_us"), ms),
                cell(record.number("p99_us"), ms),
            );
        }
        let p99 = |client: &str| {
            follow.iter().find(|record| record.client == client).and_then(|record| record.number("p99_us"))
        };
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}", a / b),
            _ => "–".to_owned(),
        };
        let _ = writeln!(
            out,
            "\np99 ours / floor {}, ours / Curator {} (one follow per run: no per-round figure).",
            ratio(p99("ours"), p99("floor")),
            ratio(p99("ours"), p99("curator"))
        );
    }
    let _ = writeln!(out, "\n{RATIO_CELLS}\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incomplete_curator_load_is_shown_not_timed() {
        let run = Run::parse(concat!(
            r#"{"bench":"cache","scenario":"load-flat","client":"ours","value":100001,"ops":6.0,"per_round":[6.0,6.0]}"#, "\n",
            r#"{"bench":"cache","scenario":"load-flat","client":"floor","value":100001,"ops":6.6,"per_round":[6.6,6.6]}"#, "\n",
            r#"{"bench":"cache","scenario":"load-flat","client":"curator","value":100001,"incomplete":[1,1],"loads":2}"#, "\n",
            r#"{"bench":"cache","scenario":"memory-flat","client":"ours","value":100001,"ops":180.4,"per_round":[180.4],"rss_bytes_per_node":340.0}"#, "\n",
            r#"{"bench":"cache","scenario":"follow","client":"ours","value":10000,"asked_rate":2000,"achieved_rate":1998,"secs":5,"changes":9990,"p50_us":5890,"p99_us":83690}"#, "\n",
            r#"{"bench":"cache","scenario":"follow","client":"floor","value":10000,"changes":9990,"p50_us":5900,"p99_us":82040}"#,
        ))
        .expect("parse");
        let mut out = String::new();
        cache_section(&run, &mut out);
        assert!(
            out.contains(
                "| children of one parent | 100,001 | 6.00 | 6.60 | initialized holding 1, 1 of 100,001 nodes | 0.91 (0.91) | – | 180 (340) | – |"
            ),
            "{out}"
        );
        assert!(out.contains("| ours | 9,990 | 5.89 | 83.69 |"), "{out}");
        assert!(out.contains("p99 ours / floor 1.02, ours / Curator –"), "{out}");
        assert!(!out.contains("| a subtree of parents"), "no tree results, no tree row: {out}");
    }

    #[test]
    fn no_cache_results_no_section() {
        let mut out = String::new();
        cache_section(&Run::default(), &mut out);
        assert!(out.is_empty());
    }
}
