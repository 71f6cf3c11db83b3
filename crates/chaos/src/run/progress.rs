//! A soak's progress: a row every so often (what the contenders did, the servers' ephemerals and
//! watches, each Rust process's resident set and descriptors) and the usage trend at the end.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use zk_recipes_testing::TestingCluster;

use super::reading::{read_events, read_logs, watch_total};
use super::slots::{Running, Slot};
use super::Phase;

impl Phase<'_> {
    /// One row of a soak's progress table: what the contenders logged so far, the faults, the
    /// servers' ephemerals and watches, and each Rust process's RSS and open file descriptors.
    pub(super) async fn print_progress(
        &self,
        cluster: &TestingCluster,
        slots: &[Slot],
        log_dir: &Path,
        faults: &BTreeMap<String, u64>,
        elapsed: Duration,
    ) -> Vec<(String, u64, usize)> {
        let events = read_events(log_dir);
        let count = |kind: char| events.iter().filter(|event| event.kind == kind).count();
        let mix = ["counters-", "barrier-", "members-", "cache-", "partition-"]
            .iter()
            .map(|prefix| {
                read_logs(log_dir, prefix)
                    .lines()
                    .filter(|line| {
                        line.starts_with("I ")
                            || line.starts_with("IN ")
                            || line.starts_with("D ")
                            || line.starts_with("S ")
                    })
                    .count()
            })
            .sum::<usize>();
        let mut ephemerals = 0_u64;
        for member in cluster.members() {
            if let Ok(stats) = member.mntr().await {
                ephemerals = ephemerals
                    .max(stats.get("zk_ephemerals_count").and_then(|count| count.parse().ok()).unwrap_or(0));
            }
        }
        let usage: Vec<(String, u64, usize)> = slots
            .iter()
            .filter(|slot| slot.kind.is_rust())
            .filter_map(|slot| match &slot.running {
                Some(Running::Child { child, .. }) => child.id().map(|pid| (slot.tag.as_str(), pid)),
                _ => None,
            })
            .map(|(tag, pid)| {
                let (rss_kb, fds) = process_usage(pid);
                (tag.to_owned(), rss_kb, fds)
            })
            .collect();
        let processes: Vec<String> =
            usage.iter().map(|(tag, rss_kb, fds)| format!("{tag}:{}M/{fds}fd", rss_kb / 1024)).collect();
        println!(
            "{:>7.1} {:>11} {:>9} {:>9} {:>7} {:>10} {:>10} {:>8}  {}",
            elapsed.as_secs_f64() / 60.0,
            count('A'),
            count('K'),
            mix,
            faults.values().sum::<u64>(),
            count('V'),
            ephemerals,
            watch_total(cluster).await,
            processes.join(" ")
        );
        usage
    }
}

/// One Rust process's resident set and open descriptors at one progress row.
pub(super) struct UsageSample {
    pub(super) elapsed: Duration,
    /// The process incarnation's tag (a restarted process has a new one).
    pub(super) tag: String,
    pub(super) rss_kb: u64,
    pub(super) fds: usize,
}

/// The least-squares slope of `points` (x, y), or `None` with fewer than two distinct x.
fn slope(points: &[(f64, f64)]) -> Option<f64> {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|(x, _)| x).sum::<f64>() / n;
    let mean_y = points.iter().map(|(_, y)| y).sum::<f64>() / n;
    let spread: f64 = points.iter().map(|(x, _)| (x - mean_x).powi(2)).sum();
    (spread > 0.0).then(|| points.iter().map(|(x, y)| (x - mean_x) * (y - mean_y)).sum::<f64>() / spread)
}

/// After a soak: for every Rust process incarnation seen in at least three progress rows from
/// `from` on (after the first half, so start-up growth does not count), the least-squares slope of
/// its resident set (kB per hour) and of its open descriptors (per hour), and the steepest of each.
pub(super) fn print_usage_trend(usage: &[UsageSample], from: Duration) {
    let mut by_tag: BTreeMap<&str, Vec<&UsageSample>> = BTreeMap::new();
    for sample in usage.iter().filter(|sample| sample.elapsed >= from) {
        by_tag.entry(sample.tag.as_str()).or_default().push(sample);
    }
    let hours = |sample: &UsageSample| sample.elapsed.as_secs_f64() / 3600.0;
    let mut trends = Vec::new();
    for (tag, samples) in by_tag.iter().filter(|(_, samples)| samples.len() >= 3) {
        let rss: Vec<(f64, f64)> = samples.iter().map(|s| (hours(s), s.rss_kb as f64)).collect();
        let fds: Vec<(f64, f64)> = samples.iter().map(|s| (hours(s), s.fds as f64)).collect();
        if let (Some(rss_slope), Some(fd_slope)) = (slope(&rss), slope(&fds)) {
            trends.push((*tag, samples.len(), rss_slope, fd_slope));
        }
    }
    println!(
        "\nusage trend from minute {:.0} on (processes seen in 3 or more rows; least-squares slope per hour):",
        from.as_secs_f64() / 60.0
    );
    for (tag, rows, rss_slope, fd_slope) in &trends {
        println!("  {tag:<8} rows {rows:>3}  RSS {rss_slope:>+9.0} kB/h  open fds {fd_slope:>+6.1}/h");
    }
    let steepest = |pick: fn(&(&str, usize, f64, f64)) -> f64| {
        trends
            .iter()
            .map(pick)
            .fold(0.0_f64, |most, slope| if slope.abs() > most.abs() { slope } else { most })
    };
    println!(
        "  steepest: RSS {:+.0} kB/h, open fds {:+.1}/h over {} processes",
        steepest(|trend| trend.2),
        steepest(|trend| trend.3),
        trends.len()
    );
}

/// The progress table's header (see [`Phase::print_progress`]).
pub(super) fn print_header() {
    println!(
        "{:>7} {:>11} {:>9} {:>9} {:>7} {:>10} {:>10} {:>8}  rust processes: RSS/open fds",
        "minutes", "acquisitions", "items", "mix-ops", "faults", "markers", "ephemerals", "watches",
    );
}

/// A process's resident set (kB, from `/proc/<pid>/status`) and open file descriptors.
fn process_usage(pid: u32) -> (u64, usize) {
    let rss = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix("VmRSS:")?.split_whitespace().next()?.parse().ok())
        })
        .unwrap_or(0);
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).map(|entries| entries.count()).unwrap_or(0);
    (rss, fds)
}

#[cfg(test)]
mod tests {
    use super::slope;

    /// The soak's trend is the least-squares slope: flat is 0, a steady climb its rate.
    #[test]
    fn the_usage_trend_is_the_least_squares_slope() {
        assert_eq!(slope(&[(1.0, 5.0), (2.0, 5.0), (3.0, 5.0)]), Some(0.0));
        assert_eq!(slope(&[(0.5, 100.0), (0.75, 110.0), (1.0, 120.0)]), Some(40.0));
        let noisy = slope(&[(0.5, 100.0), (0.75, 130.0), (1.0, 100.0)]).expect("a slope");
        assert!(noisy.abs() < 1e-9, "{noisy}");
        assert_eq!(slope(&[(1.0, 5.0), (1.0, 9.0)]), None, "no spread in time");
    }
}
