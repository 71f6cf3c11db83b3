//! The counters under chaos: one `SharedCount` (versioned `try_set`) and one
//! `DistributedAtomicLong` (promoted to a mutex), incremented by Rust contenders (`zkr-chaos
//! count`) and Curator contenders (`crates/chaos/java/CuratorMixChaos.java contend-counters`) at once.
//!
//! Each contender logs to `counters-<tag>.log`, one line per event:
//!
//! ```text
//! W <counter> <holder> <micros>                 an increment's write is about to be sent
//! I <counter> <holder> <micros> ok <value>|no|unc|err
//!                                               its outcome: applied (writing <value>), not
//!                                               applied, OutcomeUnknown, another error (the write
//!                                               may have been applied)
//! ```
//!
//! The checker ([`check_counter`]): the final value lies between the increments each client says
//! succeeded (`ok`) and those plus every call whose outcome is not known (`unc`, `err`, and a `W`
//! without its `I`: the process was killed in between). The negative control (`--blind`) is an
//! increment that, after a reply it treats as lost, retries blindly: it is applied twice and
//! reported once, so the final value passes the upper bound.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zk_recipes_counter::{CounterError, DistributedAtomicLong, PromotedToLock, SharedCount};
use zk_recipes_framework::retry::RetryNTimes;
use zk_recipes_framework::{Deadline, Framework};

use crate::counter::Counter;
use crate::events::epoch_micros;
use crate::holders::is_curator_member as is_curator;
use crate::linearizable::{LinearReport, CURATOR_RETRY_SPAN};
use crate::rng::Rng;
use crate::setup::ProcessSetup;

/// The deadline of one increment.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Pause after a failed step, so a partitioned client does not spin.
const BACKOFF: Duration = Duration::from_millis(100);
/// Pause between two increments of one client (the counters are hot spots; a few per second and
/// client keeps the promoted lock busy without starving the lock rows of the two cores).
const PACE: Duration = Duration::from_millis(20);
/// How long the promoted lock may be waited for.
const MAX_LOCK_TIME: Duration = Duration::from_secs(5);
/// One blind (control) increment in this many treats its reply as lost and retries.
const BLIND_ONE_IN: u64 = 4;

/// The atomic long's promoted lock under `check_root`.
pub fn promoted_lock_path(check_root: &str) -> String {
    format!("{check_root}/atomic-long-lock")
}

/// What a counter contender process runs.
#[derive(Debug, Clone, clap::Args)]
pub struct CounterConfig {
    /// Where it connects, its name, its event log, its sessions' timeout.
    #[command(flatten)]
    pub setup: ProcessSetup,
    #[arg(long, default_value_t = 2)]
    pub clients: usize,
    #[arg(long)]
    pub check_root: String,
    /// The negative control: after one reply in [`BLIND_ONE_IN`], retry as if it were lost.
    #[arg(long)]
    pub blind: bool,
}

/// Runs a Rust counter contender until `stop` (exit 0) or EOF on stdin (exit 3).
pub async fn run(config: CounterConfig) -> std::io::Result<i32> {
    let log = config.setup.open_log()?;
    let stop = crate::commands::listen().stop;
    let mut loops = Vec::new();
    for client in 0..config.clients {
        let framework = config.setup.framework()?;
        let holder = config.setup.holder(client);
        loops.push(tokio::spawn(client_loop(framework, holder, config.clone(), log.clone(), stop.clone())));
    }
    println!("READY");
    for handle in loops {
        let _ = handle.await;
    }
    println!("DONE");
    Ok(0)
}

async fn client_loop(
    framework: Framework,
    holder: String,
    config: CounterConfig,
    log: Arc<crate::events::EventLog>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = Rng::with_seed(epoch_micros() as u64 ^ holder.len() as u64);
    let shared_path = Counter::SharedCount.path(&config.check_root);
    let count = loop {
        let started = tokio::select! {
            started = SharedCount::start(&framework, &shared_path, 0, Deadline::after(STEP_TIMEOUT)) => started,
            () = until(&mut stop) => {
                framework.close().await;
                return;
            }
        };
        match started {
            Ok(count) => break count,
            Err(err) => {
                log.line(&format!("E shared-count {holder} {} starting: {err}", epoch_micros()));
                tokio::time::sleep(BACKOFF).await;
            }
        }
    };
    let atomic = DistributedAtomicLong::new(
        &framework,
        &Counter::AtomicLong.path(&config.check_root),
        RetryNTimes::new(3, Duration::from_millis(10)),
    )
    .and_then(|atomic| {
        atomic.promoted_to_lock(
            PromotedToLock::new(&promoted_lock_path(&config.check_root))
                .max_lock_time(MAX_LOCK_TIME)
                .retry_policy(RetryNTimes::new(3, Duration::from_millis(10))),
        )
    });
    let atomic = match atomic {
        Ok(atomic) => atomic,
        Err(err) => {
            log.line(&format!("E atomic-long {holder} {} making it: {err}", epoch_micros()));
            framework.close().await;
            return;
        }
    };
    let mut turn = 0_u64;
    while !*stop.borrow() {
        turn += 1;
        let counter = if turn.is_multiple_of(2) { Counter::SharedCount } else { Counter::AtomicLong };
        // The control's lost reply: the increment is applied, its reply treated as lost, and the
        // increment sent again; one `ok` is logged for the two.
        let blind_retry = config.blind && rng.u64(..BLIND_ONE_IN) == 0;
        let mut outcome = Outcome::No;
        // (The retry is the library's, unseen by the caller: it logs no `W` of its own.)
        for attempt in 0..=usize::from(blind_retry) {
            let announce = attempt == 0;
            outcome = match counter {
                Counter::SharedCount => increment_shared(&count, counter, &holder, &log, announce).await,
                Counter::AtomicLong => increment_atomic(&atomic, counter, &holder, &log, announce).await,
            };
        }
        let written = match outcome {
            Outcome::Ok(value) => format!(" {value}"),
            _ => String::new(),
        };
        log.line(&format!("I {} {holder} {} {}{written}", counter.name(), epoch_micros(), outcome.word()));
        let pause = if matches!(outcome, Outcome::Ok(_) | Outcome::No) { PACE } else { BACKOFF };
        tokio::select! {
            () = tokio::time::sleep(pause) => {}
            () = until(&mut stop) => break,
        }
    }
    count.close();
    framework.close().await;
}

/// How one increment ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Outcome {
    /// Applied, writing this value.
    Ok(i64),
    No,
    Unknown,
    Error,
}

impl Outcome {
    fn word(self) -> &'static str {
        match self {
            Outcome::Ok(_) => "ok",
            Outcome::No => "no",
            Outcome::Unknown => "unc",
            Outcome::Error => "err",
        }
    }

    fn of_error(err: &CounterError) -> Outcome {
        match err {
            CounterError::OutcomeUnknown { .. } => Outcome::Unknown,
            _ => Outcome::Error,
        }
    }
}

/// Reads the count, then `try_set`s it one higher at the version read (logging `W` first).
async fn increment_shared(
    count: &SharedCount,
    counter: Counter,
    holder: &str,
    log: &crate::events::EventLog,
    announce: bool,
) -> Outcome {
    let deadline = Deadline::after(STEP_TIMEOUT);
    let seen = match count.read(deadline).await {
        Ok(seen) => seen,
        // Nothing was written.
        Err(_) => return Outcome::No,
    };
    if announce {
        log.line(&format!("W {} {holder} {}", counter.name(), epoch_micros()));
    }
    match count.try_set(seen.version, seen.value.wrapping_add(1), deadline).await {
        Ok(true) => Outcome::Ok(i64::from(seen.value.wrapping_add(1))),
        Ok(false) => Outcome::No,
        Err(err) => Outcome::of_error(&err),
    }
}

/// `increment()` (optimistic tries, then the promoted lock), logging `W` first.
async fn increment_atomic(
    atomic: &DistributedAtomicLong,
    counter: Counter,
    holder: &str,
    log: &crate::events::EventLog,
    announce: bool,
) -> Outcome {
    if announce {
        log.line(&format!("W {} {holder} {}", counter.name(), epoch_micros()));
    }
    match atomic.increment(Deadline::after(STEP_TIMEOUT)).await {
        Ok(result) if result.succeeded() => Outcome::Ok(*result.post_value()),
        Ok(_) => Outcome::No,
        Err(err) => Outcome::of_error(&err),
    }
}

/// One counter's tally and verdict.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CounterReport {
    /// Increments reported applied (`ok`), by Rust and by Curator contenders.
    pub rust_ok: u64,
    pub curator_ok: u64,
    /// Increments reported not applied.
    pub not_applied: u64,
    /// `OutcomeUnknown` (Rust) or a call that overlapped a disconnection (Curator).
    pub outcome_unknown: u64,
    /// Other errors (the write may have been applied).
    pub errors: u64,
    /// Writes sent whose outcome was never logged (the process was killed).
    pub unlogged: u64,
    /// A finding about Curator, not a violation: of the increments beyond what the unknown
    /// outcomes explain, those whose value nobody reported writing and whose next value a Curator
    /// member did report writing. Curator retries a versioned
    /// `setData` after a connection loss; when the first try had committed, the retry fails with
    /// `BadVersion` and Curator's increment reads again and writes again: one call, two
    /// increments, one success.
    pub curator_double_applied: u64,
    /// The value read after everything stopped.
    pub value: Option<i64>,
    /// What is wrong, if anything.
    pub violations: Vec<String>,
    /// The history's linearizability check ([`crate::linearizable`]), when it ran.
    pub linearizability: Option<LinearReport>,
}

impl CounterReport {
    /// Increments known applied.
    pub fn definite(&self) -> u64 {
        self.rust_ok + self.curator_ok
    }

    /// Increments that may or may not have been applied.
    pub fn unknown(&self) -> u64 {
        self.outcome_unknown + self.errors + self.unlogged
    }

    /// Adds the linearizability check: a history that is not linearizable is a violation; one
    /// the search could not decide is not.
    pub fn with_linearizability(mut self, check: LinearReport) -> CounterReport {
        self.violations.extend(check.violation());
        self.linearizability = Some(check);
        self
    }

    /// In the negative control (increments applied twice, reported once), the checks that did
    /// not catch it: the range check, the linearizability check, both or none.
    pub fn not_caught(&self, counter: Counter) -> Vec<String> {
        let linearizability_caught =
            self.linearizability.as_ref().is_some_and(|check| check.violation().is_some());
        let mut rows = Vec::new();
        if self.violations.len() <= usize::from(linearizability_caught) {
            rows.push(format!("{} (blind retry)", counter.name()));
        }
        if !linearizability_caught {
            rows.push(format!("{} (blind retry, linearizability)", counter.name()));
        }
        rows
    }
}

/// Checks one counter: `definite <= value <= definite + unknown`. `lines` are the contenders' log
/// lines (every file); Curator holders start with an upper-case letter.
pub fn check_counter<'a>(
    counter: Counter,
    lines: impl Iterator<Item = &'a str>,
    value: Option<i64>,
) -> CounterReport {
    let mut report = CounterReport { value, ..CounterReport::default() };
    // Per holder: writes sent and outcomes logged (each holder runs one increment at a time).
    let mut sent: BTreeMap<String, (u64, u64)> = BTreeMap::new();
    // The values the `ok` increments wrote, and by whom.
    let mut written: BTreeMap<i64, Vec<String>> = BTreeMap::new();
    // Per holder: when its pending write was sent; and the Curator `atomic-long` calls that
    // lasted long enough to hold a retry (whose first try may have applied too).
    let mut sent_at: BTreeMap<String, u64> = BTreeMap::new();
    let mut long_curator_calls = 0u64;
    for line in lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let (Some(kind), Some(name), Some(holder)) = (fields.first(), fields.get(1), fields.get(2)) else {
            continue;
        };
        if Counter::parse(name) != Some(counter) {
            continue;
        }
        let entry = sent.entry((*holder).to_owned()).or_default();
        let micros = fields.get(3).and_then(|micros| micros.parse::<u64>().ok());
        match (*kind, fields.get(4).copied()) {
            ("W", _) => {
                entry.0 += 1;
                if let Some(micros) = micros {
                    sent_at.insert((*holder).to_owned(), micros);
                }
            }
            ("I", Some(word)) => {
                entry.1 += 1;
                let began = sent_at.remove(*holder);
                let lasted = micros.zip(began).map(|(ended, began)| ended.saturating_sub(began));
                if counter == Counter::AtomicLong
                    && word == "ok"
                    && is_curator(holder)
                    && lasted.is_some_and(|lasted| lasted >= CURATOR_RETRY_SPAN)
                {
                    long_curator_calls += 1;
                }
                if word == "ok" {
                    if let Some(value) = fields.get(5).and_then(|value| value.parse().ok()) {
                        written.entry(value).or_default().push((*holder).to_owned());
                    }
                }
                match word {
                    "ok" if is_curator(holder) => report.curator_ok += 1,
                    "ok" => report.rust_ok += 1,
                    "no" => report.not_applied += 1,
                    "unc" => report.outcome_unknown += 1,
                    _ => report.errors += 1,
                }
            }
            _ => {}
        }
    }
    // A Rust `I` whose read failed has no `W`: only writes beyond the outcomes are unlogged.
    report.unlogged = sent.values().map(|(writes, outcomes)| writes.saturating_sub(*outcomes)).sum();
    match value {
        None => report.violations.push("the counter could not be read".to_owned()),
        Some(value) => {
            let value = u64::try_from(value).unwrap_or(0);
            if value < report.definite() {
                report.violations.push(format!(
                    "lost increments: the value {value} is below the {} reported applied",
                    report.definite()
                ));
            }
            // Only what the unknown outcomes cannot explain is put down to Curator.
            let before_curator = (1..=value as i64)
                .filter(|at| !written.contains_key(at))
                .filter(|at| {
                    written
                        .get(&(at + 1))
                        .is_some_and(|holders| holders.iter().all(|holder| is_curator(holder)))
                })
                .count() as u64;
            let excess = value.saturating_sub(report.definite() + report.unknown());
            report.curator_double_applied = (before_curator + long_curator_calls).min(excess);
            if value > report.definite() + report.unknown() + report.curator_double_applied {
                report.violations.push(format!(
                    "increments applied but not reported: the value {value} is above {} applied + {} unknown (+ {} by Curator's retries){}",
                    report.definite(),
                    report.unknown(),
                    report.curator_double_applied,
                    unclaimed(&written, value as i64)
                ));
            }
            let twice: Vec<String> = written
                .iter()
                .filter(|(_, holders)| holders.len() > 1)
                .take(5)
                .map(|(value, holders)| format!("{value} by {}", holders.join(",")))
                .collect();
            if !twice.is_empty() {
                report.violations.push(format!("one value reported written twice: {}", twice.join("; ")));
            }
        }
    }
    report
}

/// Resolves once `flag` is true (or its sender is gone).
async fn until(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

/// The values in `1..=value` no `ok` increment reported writing (the first few, each with who
/// wrote the values next to it): where the unreported increments happened.
fn unclaimed(written: &BTreeMap<i64, Vec<String>>, value: i64) -> String {
    if written.is_empty() {
        return String::new();
    }
    let near = |at: i64| written.get(&at).map_or("-".to_owned(), |holders| holders.join(","));
    let gaps: Vec<String> = (1..=value)
        .filter(|at| !written.contains_key(at))
        .take(5)
        .map(|at| {
            format!("{at} (after {} by {}, before {} by {})", at - 1, near(at - 1), at + 1, near(at + 1))
        })
        .collect();
    if gaps.is_empty() {
        String::new()
    } else {
        format!("; values nobody reported writing: {}", gaps.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(text: &str) -> Vec<&str> {
        text.lines().collect()
    }

    #[test]
    fn a_value_within_the_bounds_is_clean() {
        let log = lines(
            "W shared-count r0x1-0 1\nI shared-count r0x1-0 2 ok\nW shared-count J0x1-1 3\nI shared-count J0x1-1 4 unc\n\
             W shared-count r0x1-1 5\nI shared-count r0x1-1 6 no\nW atomic-long r0x1-0 7\nI atomic-long r0x1-0 8 ok",
        );
        for value in [1, 2] {
            let report = check_counter(Counter::SharedCount, log.iter().copied(), Some(value));
            assert!(report.violations.is_empty(), "{report:?}");
            assert_eq!((report.definite(), report.unknown(), report.not_applied), (1, 1, 1));
        }
    }

    #[test]
    fn a_killed_writer_counts_as_unknown() {
        let log = lines("W atomic-long r0x1-0 1\nI atomic-long r0x1-0 2 ok\nW atomic-long r0x1-0 3");
        let report = check_counter(Counter::AtomicLong, log.iter().copied(), Some(2));
        assert_eq!(report.unlogged, 1);
        assert!(report.violations.is_empty(), "{report:?}");
    }

    /// The control's shape: applied twice, reported once.
    #[test]
    fn a_blind_retry_is_caught() {
        let log = lines("W shared-count r0x1-0 1\nI shared-count r0x1-0 3 ok 2");
        let report = check_counter(Counter::SharedCount, log.iter().copied(), Some(2));
        assert_eq!(report.violations.len(), 1, "{report:?}");
        assert!(
            report.violations[0].contains("nobody reported writing: 1 (after 0 by -, before 2 by r0x1-0)"),
            "{report:?}"
        );
        let report = check_counter(Counter::SharedCount, log.iter().copied(), Some(0));
        assert!(report.violations[0].starts_with("lost increments"), "{report:?}");
    }

    /// Curator's retried write: it wrote 2 and 3 in one call and reported 3.
    #[test]
    fn a_value_skipped_before_a_curator_write_is_a_finding_about_curator() {
        let log = lines("W atomic-long r0x1-0 1\nI atomic-long r0x1-0 2 ok 1\nW atomic-long J0x1-0 3\nI atomic-long J0x1-0 4 ok 3");
        let report = check_counter(Counter::AtomicLong, log.iter().copied(), Some(3));
        assert_eq!(report.curator_double_applied, 1);
        assert!(report.violations.is_empty(), "{report:?}");
        let log = lines("W atomic-long J0x1-0 1\nI atomic-long J0x1-0 2 ok 1\nW atomic-long r0x1-0 3\nI atomic-long r0x1-0 4 ok 3");
        let report = check_counter(Counter::AtomicLong, log.iter().copied(), Some(3));
        assert_eq!(report.curator_double_applied, 0);
        assert_eq!(report.violations.len(), 1, "{report:?}");
        // A Curator call long enough for a retry wrote 1, a Rust call 2, its retry 3.
        let log = lines(
            "W atomic-long J0x1-0 10\nW atomic-long r0x1-0 100000\nI atomic-long r0x1-0 110000 ok 2\n\
             I atomic-long J0x1-0 1200000 ok 3",
        );
        let report = check_counter(Counter::AtomicLong, log.iter().copied(), Some(3));
        assert_eq!(report.curator_double_applied, 1);
        assert!(report.violations.is_empty(), "{report:?}");
    }

    #[test]
    fn values_decode_as_curator_writes_them() {
        assert_eq!(Counter::SharedCount.decode(&Counter::SharedCount.zero()), Some(0));
        assert_eq!(Counter::AtomicLong.decode(&300_i64.to_be_bytes()), Some(300));
        assert_eq!(Counter::SharedCount.decode(&[0, 0, 1, 0]), Some(256));
        assert_eq!(Counter::AtomicLong.decode(&[1, 2]), None);
    }
}
