//! Double barriers under chaos: Rust members (`zkr-chaos barrier`) and Curator members
//! (`crates/chaos/java/CuratorMixChaos.java contend-barrier`, a fresh `DistributedDoubleBarrier`
//! each round) meet in rounds of [`PERIOD`] on the wall clock: round `r` is the barrier
//! `<root>/round-<r>` for `member_count` members, entered 0–300 ms after the round starts, with
//! [`ENTER_WINDOW`] to get in and until [`LEAVE_BY`] to get out. A member that misses a round
//! (partitioned, killed, late) waits for the next; the others time out, which is no violation.
//!
//! Each member's log (`barrier-<tag>.log`):
//!
//! ```text
//! N barrier <holder> <micros> <round>                  enter is called (its node may exist from now)
//! IN barrier <holder> <micros> <round> ok|timeout|err  enter returned ("err stuck": a Curator
//!                                                      call interrupted 2 s after its timeout)
//! O barrier <holder> <micros> <round>                  leave is called
//! X barrier <holder> <micros> <round> ok|timeout|err   leave returned
//! ```
//!
//! The checker ([`check_barriers`]): no member's enter returns `ok` before `member_count` members
//! of its round have called enter; in a round where every member that got in also got out `ok`,
//! no member's leave returns before every member that got in has called leave. The negative
//! control (`--no-wait`) is a member that logs its entry as soon as it calls enter.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zk_recipes_barrier::DistributedDoubleBarrier;
use zk_recipes_framework::{Deadline, Framework};

use crate::events::{epoch_micros, EventLog};
use crate::rng::Rng;
use crate::setup::ProcessSetup;

/// A round's length on the wall clock.
pub const PERIOD: Duration = Duration::from_millis(3000);
/// How long after its start a round may be entered.
pub const ENTER_WINDOW: Duration = Duration::from_millis(1500);
/// How long after its start a round must be left.
pub const LEAVE_BY: Duration = Duration::from_millis(2800);
/// The most a member waits after a round starts before it enters.
const MAX_JITTER_MS: u64 = 300;
/// How long a member stays in before it leaves.
const INSIDE: Duration = Duration::from_millis(20);

/// What a barrier member process runs.
#[derive(Debug, Clone, clap::Args)]
pub struct BarrierConfig {
    /// Where it connects, its name, its event log, its sessions' timeout.
    #[command(flatten)]
    pub setup: ProcessSetup,
    #[arg(long, default_value_t = 2)]
    pub clients: usize,
    #[arg(long)]
    pub root: String,
    /// How many members each round waits for (all processes').
    #[arg(long)]
    pub member_count: usize,
    /// The negative control: enter without waiting for the others.
    #[arg(long)]
    pub no_wait: bool,
}

/// Runs barrier members until `stop` (exit 0) or EOF on stdin (exit 3).
pub async fn run(config: BarrierConfig) -> std::io::Result<i32> {
    let log = config.setup.open_log()?;
    let stop = crate::commands::listen().stop;
    let mut loops = Vec::new();
    for client in 0..config.clients {
        let framework = config.setup.framework()?;
        let holder = config.setup.holder(client);
        loops.push(tokio::spawn(member(framework, holder, config.clone(), log.clone(), stop.clone())));
    }
    println!("READY");
    for handle in loops {
        let _ = handle.await;
    }
    println!("DONE");
    Ok(0)
}

/// The next round to start after `micros`, and when it starts (epoch microseconds).
pub fn next_round(micros: i64) -> (i64, i64) {
    let period = PERIOD.as_micros() as i64;
    let round = micros / period + 1;
    (round, round * period)
}

async fn member(
    framework: Framework,
    holder: String,
    config: BarrierConfig,
    log: Arc<EventLog>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = Rng::with_seed(epoch_micros() as u64 ^ (holder.len() as u64) << 32);
    loop {
        let (round, starts) = next_round(epoch_micros());
        let enter_at = starts + rng.u64(..=MAX_JITTER_MS) as i64 * 1000;
        let wait = Duration::from_micros(enter_at.saturating_sub(epoch_micros()).max(0) as u64);
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            () = until(&mut stop) => break,
        }
        let barrier = match DistributedDoubleBarrier::new(
            &framework,
            &format!("{}/round-{round}", config.root),
            config.member_count,
        ) {
            Ok(barrier) => barrier,
            Err(err) => {
                log.line(&format!("E barrier {holder} {} {err}", epoch_micros()));
                break;
            }
        };
        let window = |after: Duration| {
            let left = starts + after.as_micros() as i64 - epoch_micros();
            Deadline::after(Duration::from_micros(left.max(0) as u64))
        };
        log.line(&format!("N barrier {holder} {} {round}", epoch_micros()));
        if config.no_wait {
            log.line(&format!("IN barrier {holder} {} {round} ok", epoch_micros()));
            tokio::time::sleep(INSIDE).await;
            log.line(&format!("O barrier {holder} {} {round}", epoch_micros()));
            log.line(&format!("X barrier {holder} {} {round} ok", epoch_micros()));
            continue;
        }
        let entered = barrier.enter(window(ENTER_WINDOW)).await;
        let entered = match entered {
            Ok(entered) => {
                log.line(&format!("IN barrier {holder} {} {round} ok", epoch_micros()));
                entered
            }
            Err(err) => {
                let word = if err.is_timeout() { "timeout" } else { "err" };
                log.line(&format!("IN barrier {holder} {} {round} {word} {err}", epoch_micros()));
                continue;
            }
        };
        tokio::time::sleep(INSIDE).await;
        log.line(&format!("O barrier {holder} {} {round}", epoch_micros()));
        match entered.leave(window(LEAVE_BY)).await {
            Ok(()) => log.line(&format!("X barrier {holder} {} {round} ok", epoch_micros())),
            Err(err) => {
                let word = if err.is_timeout() { "timeout" } else { "err" };
                log.line(&format!("X barrier {holder} {} {round} {word} {err}", epoch_micros()));
            }
        }
    }
    framework.close().await;
}

/// One round's events.
#[derive(Debug, Default)]
struct Round {
    /// When each member called enter.
    called: BTreeMap<String, i64>,
    /// When each member's enter returned `ok`.
    entered: BTreeMap<String, i64>,
    /// When each member called leave.
    leaving: BTreeMap<String, i64>,
    /// When each member's leave returned, and whether `ok`.
    left: BTreeMap<String, (i64, bool)>,
}

/// The barrier rounds' tally and violations.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct BarrierReport {
    /// Rounds in which every member got in.
    pub full_rounds: u64,
    /// Entries and exits that returned `ok`, by Rust and by Curator members.
    pub rust_entries: u64,
    pub curator_entries: u64,
    /// Enters and leaves that timed out or failed.
    pub failed: u64,
    /// Of those, Curator calls that had not returned 2 s after their timeout and were
    /// interrupted (`err stuck`: Curator 5.4's `enter` can wait forever, see
    /// `CuratorMixChaos.bounded`).
    pub stuck: u64,
    pub violations: Vec<String>,
}

/// Checks the rounds in `lines` (every member's log; Curator holders start with an upper-case letter).
pub fn check_barriers<'a>(lines: impl Iterator<Item = &'a str>, member_count: usize) -> BarrierReport {
    let mut rounds: BTreeMap<i64, Round> = BTreeMap::new();
    let mut report = BarrierReport::default();
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let [kind, "barrier", holder, micros, round, rest @ ..] = fields.as_slice() else { continue };
        let (Ok(micros), Ok(round)) = (micros.parse::<i64>(), round.parse::<i64>()) else { continue };
        let entry = rounds.entry(round).or_default();
        let holder = (*holder).to_owned();
        let ok = rest.first() == Some(&"ok");
        report.stuck += u64::from(matches!(rest, ["err", "stuck", ..]) && matches!(*kind, "IN" | "X"));
        match *kind {
            "N" => {
                entry.called.insert(holder, micros);
            }
            "IN" if ok => {
                if crate::holders::is_curator_member(&holder) {
                    report.curator_entries += 1;
                } else {
                    report.rust_entries += 1;
                }
                entry.entered.insert(holder, micros);
            }
            "IN" => report.failed += 1,
            "O" => {
                entry.leaving.insert(holder, micros);
            }
            "X" => {
                report.failed += u64::from(!ok);
                entry.left.insert(holder, (micros, ok));
            }
            _ => {}
        }
    }
    for (number, round) in &rounds {
        if round.entered.len() >= member_count {
            report.full_rounds += 1;
        }
        for (holder, at) in &round.entered {
            let inside = round.called.values().filter(|called| *called <= at).count();
            if inside < member_count {
                report.violations.push(format!(
                    "round {number}: {holder} got in when {inside} of {member_count} members had called enter"
                ));
            }
        }
        let all_out = round.entered.keys().all(|holder| round.left.get(holder).is_some_and(|(_, ok)| *ok));
        if !all_out {
            continue;
        }
        for (holder, (at, _)) in &round.left {
            let still_in: Vec<&String> = round
                .entered
                .keys()
                .filter(|other| round.leaving.get(*other).is_none_or(|leaving| leaving > at))
                .collect();
            if !still_in.is_empty() {
                report.violations.push(format!(
                    "round {number}: {holder} got out while {} had not called leave",
                    still_in.iter().map(|other| other.as_str()).collect::<Vec<_>>().join(",")
                ));
            }
        }
    }
    report
}

/// Resolves once `flag` is true (or its sender is gone).
async fn until(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn round(events: &[(&str, &str, i64, &str)]) -> String {
        events
            .iter()
            .map(|(kind, holder, at, outcome)| format!("{kind} barrier {holder} {at} 7 {outcome}\n"))
            .collect()
    }

    #[test]
    fn a_proper_round_is_clean() {
        let log = round(&[
            ("N", "r0x1-0", 1, ""),
            ("N", "J0x1-0", 2, ""),
            ("IN", "r0x1-0", 3, "ok"),
            ("IN", "J0x1-0", 3, "ok"),
            ("O", "r0x1-0", 4, ""),
            ("O", "J0x1-0", 5, ""),
            ("X", "J0x1-0", 6, "ok"),
            ("X", "r0x1-0", 6, "ok"),
        ]);
        let report = check_barriers(log.lines(), 2);
        assert_eq!(report.violations, Vec::<String>::new());
        assert_eq!((report.full_rounds, report.rust_entries, report.curator_entries), (1, 1, 1));
    }

    #[test]
    fn early_entries_and_exits_are_caught() {
        let log = round(&[
            ("N", "r0x1-0", 1, ""),
            ("IN", "r0x1-0", 2, "ok"),
            ("N", "J0x1-0", 3, ""),
            ("IN", "J0x1-0", 4, "ok"),
            ("O", "r0x1-0", 5, ""),
            ("X", "r0x1-0", 6, "ok"),
            ("O", "J0x1-0", 7, ""),
            ("X", "J0x1-0", 8, "ok"),
        ]);
        let report = check_barriers(log.lines(), 2);
        assert_eq!(report.violations.len(), 2, "{:?}", report.violations);
        assert!(report.violations[0].contains("r0x1-0 got in when 1 of 2"));
        assert!(report.violations[1].contains("r0x1-0 got out while J0x1-0"));
    }

    #[test]
    fn stuck_curator_calls_are_counted_as_failed_and_stuck() {
        let log = round(&[
            ("N", "r0x1-0", 1, ""),
            ("N", "J0x1-0", 2, ""),
            ("IN", "r0x1-0", 3, "timeout timed out after 1.3 s"),
            ("IN", "J0x1-0", 4, "err stuck"),
            ("N", "J0x1-1", 5, ""),
            ("IN", "J0x1-1", 6, "err ConnectionLossException"),
        ]);
        let report = check_barriers(log.lines(), 2);
        assert_eq!(report.violations, Vec::<String>::new());
        assert_eq!((report.failed, report.stuck, report.full_rounds), (3, 1, 0));
    }

    #[test]
    fn rounds_follow_the_clock() {
        let period = PERIOD.as_micros() as i64;
        assert_eq!(next_round(0), (1, period));
        assert_eq!(next_round(period * 5 + 1), (6, period * 6));
    }
}
