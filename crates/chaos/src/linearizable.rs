//! The counters' histories checked for linearizability ([`zk_recipes_history`]), beside the range
//! check of [`crate::counters::check_counter`].
//!
//! The range check only bounds the final value; this check asks whether one order of the
//! increments, each taking effect between its `W` and its `I`, gives every value a contender
//! reported writing and the value read at the end. It catches what the bounds cannot see: two
//! increments that reported the same value, a value reported before the increments under it
//! could have happened, an increment applied twice and reported once (the negative control).
//!
//! # From the counter log to a history
//! One history per counter, against [`Counter`] starting at zero; every increment is an
//! `Add(1)` that answers the value after it:
//!
//! | log | operation |
//! |---|---|
//! | `W` then `I ok <v>` | `Ok`, answering `v`, from the `W`'s micros to the `I`'s |
//! | `W` then `I no` | `Fail` (not applied) |
//! | `W` then `I unc` / `I err` | `Info`: may have been applied, at any point after the `W` |
//! | `W` with no `I` (the process was killed) | `Info` with no end |
//! | `I no` with no `W` | nothing was sent (a Rust `SharedCount` whose read failed): left out |
//! | another `I` with no `W` | as above, invoked at the holder's previous event |
//!
//! The value the run reads after every contender stopped is an `Ok` `Get`, invoked after the
//! last contender's event. Each holder is one process of the history.
//!
//! # Curator's retried increments
//! Curator's `DistributedAtomicLong.increment()` retries its versioned `setData` after a
//! connection loss; when the first try had committed, the retry fails with `BadVersion`, and the
//! increment reads again and writes again: one call, two increments, one reported value (the
//! range check's `curator_double_applied`). A Curator `atomic-long` call that reports `v` while
//! no call reports `v - 1`, or that lasted [`CURATOR_RETRY_SPAN`] or more (long enough for a
//! connection loss and a retry, between whose tries other calls' increments may land), is
//! therefore recorded as its `Ok` increment plus one `Info` increment in the same interval: the
//! call may have applied one more increment, which the search takes only where the rest of the
//! history needs it. Nothing else is excused: not a Rust call
//! (whose library reports `OutcomeUnknown` instead), not Curator's `SharedCount` (whose retried
//! `trySetCount` reports failure, never a second write), not a second extra increment in one call.
//! The allowance is blind to one thing: a double apply by a Rust call just before a Curator
//! call's reported value is put down to Curator (as in the range check).
//!
//! # Bounds
//! The search is bounded by [`TIME_LIMIT`] and by the states that fit in [`MEMORY`] (at most
//! [`MAX_STATES`]); a search that reaches a bound answers [`Verdict::Unknown`], which is reported
//! and is not a violation.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::json;
use zk_recipes_history::models::{Counter as CounterModel, CounterInput, CounterOutput};
use zk_recipes_history::{Checker, Completion, History, Outcome, ProcessId, Stamp};

use crate::counter::Counter;
use crate::holders::is_curator_member as is_curator;

/// How long the check of one counter may search.
pub const TIME_LIMIT: Duration = Duration::from_secs(15);
/// The memory the search of one counter may take for the states it remembers (each costs a bit
/// per operation).
pub const MEMORY: usize = 256 << 20;
/// At most this many states per search, however small the history.
pub const MAX_STATES: usize = 2_000_000;
/// How long, in microseconds, a Curator `atomic-long` call must last to have room for a
/// connection loss and the retry after it: its first try may have committed, with other calls'
/// increments landing before the one it reports. A second: shorter calls are many on a busy
/// machine, and each excused call widens the search.
pub const CURATOR_RETRY_SPAN: Stamp = 1_000_000;

/// One counter's history.
pub type CounterHistory = History<CounterInput, CounterOutput>;

/// The value read after everything stopped, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FinalRead {
    pub value: i64,
    /// Epoch micros before the read was sent and after its reply.
    pub invoked: i64,
    pub completed: i64,
}

/// A counter's log as a history, with what it took to build it.
#[derive(Debug, Clone, Default)]
pub struct Recorded {
    pub history: CounterHistory,
    /// Holder names by process id.
    pub holders: Vec<String>,
    /// Curator calls recorded with one more `Info` increment (see the module docs).
    pub curator_retries: u64,
    /// The epoch micros of the first event: the history's stamps count from it.
    pub origin: Stamp,
}

/// Builds `counter`'s history from the contenders' log lines (every file) and the final read.
pub fn record<'a>(
    counter: Counter,
    lines: impl Iterator<Item = &'a str>,
    read: Option<FinalRead>,
) -> Recorded {
    /// A `W` or an `I` of `counter`, in log order.
    struct Line<'l> {
        holder: &'l str,
        micros: Stamp,
        /// `None` for a `W`; the outcome word and value for an `I`.
        outcome: Option<(&'l str, Option<i64>)>,
    }
    let mut parsed: Vec<Line<'a>> = lines
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (kind, name, holder, micros) =
                (fields.first()?, fields.get(1)?, fields.get(2)?, fields.get(3)?);
            if *name != counter.name() {
                return None;
            }
            let micros = micros.parse::<i64>().ok()?.max(0) as Stamp;
            let outcome = match *kind {
                "W" => None,
                "I" => Some((*fields.get(4)?, fields.get(5).and_then(|value| value.parse().ok()))),
                _ => return None,
            };
            Some(Line { holder, micros, outcome })
        })
        .collect();
    // Stamps count from the first event, so that explanations stay readable.
    let origin =
        parsed.iter().map(|line| line.micros).chain(read.map(|read| read.invoked.max(0) as Stamp)).min();
    let origin = origin.unwrap_or(0);
    for line in &mut parsed {
        line.micros -= origin;
    }
    // The values some call reported writing: a Curator call whose value's predecessor is not
    // among them may have applied twice.
    let claimed: BTreeSet<i64> = parsed
        .iter()
        .filter_map(|line| match line.outcome {
            Some(("ok", value)) => value,
            _ => None,
        })
        .collect();
    let mut recorded = Recorded { origin, ..Recorded::default() };
    let mut processes: BTreeMap<&str, ProcessId> = BTreeMap::new();
    // Per holder: the pending `W`'s micros, and the holder's last stamp.
    let mut pending: BTreeMap<&str, Stamp> = BTreeMap::new();
    let mut last_seen: BTreeMap<&str, Stamp> = BTreeMap::new();
    for line in &parsed {
        let process = *processes.entry(line.holder).or_insert_with(|| {
            recorded.holders.push(line.holder.to_owned());
            (recorded.holders.len() - 1) as ProcessId
        });
        let history = &mut recorded.history;
        let Some((word, value)) = line.outcome else {
            // A `W` while one is pending: the earlier call's outcome was never logged.
            if let Some(invoked) = pending.insert(line.holder, line.micros) {
                let _ = history.info(process, invoked, None, CounterInput::Add(1));
            }
            last_seen.insert(line.holder, line.micros);
            continue;
        };
        let completed = line.micros;
        let sent = pending.remove(line.holder);
        if sent.is_none() && word == "no" {
            // Nothing was sent: a `SharedCount` whose read failed.
            last_seen.insert(line.holder, completed);
            continue;
        }
        // An outcome with no `W` (neither side logs one): the call began after the holder's
        // previous event. Every call ends no earlier than it began (a clock stepped back between
        // the two lines shrinks it to a point), so the history refuses none.
        let invoked = sent.or_else(|| last_seen.get(line.holder).copied()).unwrap_or(0).min(completed);
        match (word, value) {
            ("no", _) => {
                let _ = history.fail(process, invoked, completed, CounterInput::Add(1));
            }
            ("ok", Some(value)) => {
                let _ = history.ok(
                    process,
                    invoked,
                    completed,
                    CounterInput::Add(1),
                    CounterOutput::Value(value),
                );
                let hidden_before = value > 1 && !claimed.contains(&(value - 1));
                let spans_a_retry = completed.saturating_sub(invoked) >= CURATOR_RETRY_SPAN;
                if counter == Counter::AtomicLong
                    && is_curator(line.holder)
                    && (hidden_before || spans_a_retry)
                {
                    let _ = history.info(process, invoked, Some(completed), CounterInput::Add(1));
                    recorded.curator_retries += 1;
                }
            }
            // `unc`, `err`, or an `ok` without its value: may have been applied.
            _ => {
                let _ = history.info(process, invoked, Some(completed), CounterInput::Add(1));
            }
        }
        last_seen.insert(line.holder, completed);
    }
    // The calls whose process was killed before it logged their outcome.
    for (holder, invoked) in pending {
        let _ = recorded.history.info(processes[holder], invoked, None, CounterInput::Add(1));
    }
    if let Some(read) = read {
        recorded.holders.push("the run's final read".to_owned());
        let process = (recorded.holders.len() - 1) as ProcessId;
        let invoked = (read.invoked.max(0) as Stamp).saturating_sub(origin);
        let completed = (read.completed.max(0) as Stamp).saturating_sub(origin).max(invoked);
        let _ = recorded.history.ok(
            process,
            invoked,
            completed,
            CounterInput::Get,
            CounterOutput::Value(read.value),
        );
    }
    recorded
}

/// What the check decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Linearizable,
    /// The checker's explanation, processes named by holder.
    NotLinearizable(String),
    /// The search reached a bound (not a violation).
    Unknown(String),
}

/// One counter's linearizability check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinearReport {
    pub verdict: Verdict,
    /// The operations recorded, by how they ended.
    pub ok: u64,
    pub failed: u64,
    pub unknown: u64,
    /// Curator calls allowed one more increment (see the module docs).
    pub curator_retries: u64,
    /// Whether the final read is in the history.
    pub final_read: bool,
    /// The epoch micros the history's stamps count from.
    pub origin: Stamp,
    pub elapsed: Duration,
}

impl LinearReport {
    /// The violation it counts as, if any.
    pub fn violation(&self) -> Option<String> {
        match &self.verdict {
            Verdict::NotLinearizable(explanation) => {
                Some(explanation.lines().next().unwrap_or("not linearizable").to_owned())
            }
            Verdict::Linearizable | Verdict::Unknown(_) => None,
        }
    }

    /// The verdict in one word, as the summary has it.
    pub fn word(&self) -> &'static str {
        match self.verdict {
            Verdict::Linearizable => "linearizable",
            Verdict::NotLinearizable(_) => "not linearizable",
            Verdict::Unknown(_) => "unknown",
        }
    }

    /// The table's row for `name` (the explanation indented under it).
    pub fn row(&self, name: &str) -> String {
        let mut row = format!(
            "{:<16} linearizability: {} ({} operations: {} ok, {} not applied, {} of unknown outcome, {} Curator calls allowed a retried increment; final read {}; {} ms)",
            name,
            match &self.verdict {
                Verdict::Unknown(why) => format!("unknown, not a violation ({why})"),
                _ => self.word().to_owned(),
            },
            self.ok + self.failed + self.unknown,
            self.ok,
            self.failed,
            self.unknown,
            self.curator_retries,
            if self.final_read { "included" } else { "missing" },
            self.elapsed.as_millis(),
        );
        if let Verdict::NotLinearizable(explanation) = &self.verdict {
            let _ = write!(row, "\n{:<16}   (times in µs after {} µs since the epoch)", "", self.origin);
            for line in explanation.lines() {
                let _ = write!(row, "\n{:<16}   {line}", "");
            }
        }
        row
    }

    pub fn json(&self) -> serde_json::Value {
        json!({
            "verdict": self.word(),
            "explanation": match &self.verdict {
                Verdict::Linearizable => None,
                Verdict::NotLinearizable(text) | Verdict::Unknown(text) => Some(text),
            },
            "ok": self.ok,
            "not_applied": self.failed,
            "unknown_outcome": self.unknown,
            "curator_retries_allowed": self.curator_retries,
            "final_read": self.final_read,
            "elapsed_ms": self.elapsed.as_millis() as u64,
            "origin_micros": self.origin,
        })
    }
}

/// Checks `counter`'s log lines and final read, within [`TIME_LIMIT`] and [`MEMORY`].
pub fn check_linearizable<'a>(
    counter: Counter,
    lines: impl Iterator<Item = &'a str>,
    read: Option<FinalRead>,
) -> LinearReport {
    let recorded = record(counter, lines, read);
    let operations = recorded.history.len().max(1);
    let max_states = (MEMORY / (operations.div_ceil(64) * 8 + 32)).min(MAX_STATES);
    check_recorded(
        &recorded,
        Checker::new(CounterModel::new(0)).max_states(max_states).time_limit(TIME_LIMIT),
    )
}

/// Checks a recorded history with `checker`.
pub fn check_recorded(recorded: &Recorded, checker: Checker<CounterModel>) -> LinearReport {
    let started = Instant::now();
    let outcome = checker.check(&recorded.history);
    let elapsed = started.elapsed();
    let count = |kind: fn(&Completion<CounterOutput>) -> bool| {
        recorded.history.operations().iter().filter(|operation| kind(operation.completion())).count() as u64
    };
    let verdict = match &outcome {
        Outcome::Linearizable(_) => Verdict::Linearizable,
        Outcome::NotLinearizable(violation) => {
            Verdict::NotLinearizable(name_processes(&violation.to_string(), &recorded.holders))
        }
        Outcome::Unknown(undecided) => Verdict::Unknown(undecided.to_string()),
    };
    LinearReport {
        verdict,
        ok: count(|completion| matches!(completion, Completion::Ok(_))),
        failed: count(|completion| matches!(completion, Completion::Fail)),
        unknown: count(|completion| matches!(completion, Completion::Info)),
        curator_retries: recorded.curator_retries,
        final_read: recorded
            .history
            .operations()
            .iter()
            .any(|operation| *operation.input() == CounterInput::Get),
        elapsed,
        origin: recorded.origin,
    }
}

/// `(process 3)` becomes `(r0x1-1)` in the checker's explanation.
fn name_processes(explanation: &str, holders: &[String]) -> String {
    let mut named = explanation.to_owned();
    for (process, holder) in holders.iter().enumerate() {
        named = named.replace(&format!("(process {process})"), &format!("({holder})"));
    }
    named
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::counters::check_counter;

    fn read(value: i64, at: i64) -> Option<FinalRead> {
        Some(FinalRead { value, invoked: at, completed: at + 1 })
    }

    fn check(counter: Counter, log: &str, read: Option<FinalRead>) -> LinearReport {
        check_linearizable(counter, log.lines(), read)
    }

    #[test]
    fn each_outcome_becomes_its_operation() {
        let log = "W shared-count r0x1-0 10\n\
                   I shared-count r0x1-0 20 ok 1\n\
                   W atomic-long r0x1-0 21\n\
                   I atomic-long r0x1-0 22 ok 1\n\
                   W shared-count J0x1-1 30\n\
                   I shared-count J0x1-1 40 no\n\
                   I shared-count r0x1-0 41 no\n\
                   W shared-count J0x1-1 50\n\
                   I shared-count J0x1-1 60 unc\n\
                   E shared-count r0x1-1 61 starting: connection loss\n\
                   W shared-count r0x1-1 70\n\
                   I shared-count r0x1-1 80 err\n\
                   I shared-count r0x1-1 85 unc\n\
                   W shared-count r0x1-0 90";
        let recorded = record(Counter::SharedCount, log.lines(), read(2, 1000));
        let mut expected = CounterHistory::new();
        let add = CounterInput::Add(1);
        // Stamps count from the first event, at 10.
        expected.ok(0, 0, 10, add, CounterOutput::Value(1)).unwrap();
        expected.fail(1, 20, 30, add).unwrap();
        // r0x1-0's `no` at 41 has no `W`: its read failed and nothing was sent.
        expected.info(1, 40, Some(50), add).unwrap();
        expected.info(2, 60, Some(70), add).unwrap();
        // An outcome with no `W` (not logged by either side) began after the holder's last event.
        expected.info(2, 70, Some(75), add).unwrap();
        expected.info(0, 80, None, add).unwrap();
        expected.ok(3, 990, 991, CounterInput::Get, CounterOutput::Value(2)).unwrap();
        assert_eq!(recorded.history, expected);
        assert_eq!(recorded.origin, 10);
        assert_eq!(recorded.holders, ["r0x1-0", "J0x1-1", "r0x1-1", "the run's final read"]);
        assert_eq!(recorded.curator_retries, 0);
        let report = check_recorded(&recorded, Checker::new(CounterModel::new(0)));
        assert_eq!(report.verdict, Verdict::Linearizable, "{}", report.row("shared-count"));
        assert_eq!((report.ok, report.failed, report.unknown, report.final_read), (2, 1, 4, true));
    }

    #[test]
    fn increments_that_fit_one_order_are_linearizable() {
        // Two overlapping increments answering 1 and 2 in the order opposite to their `W`s, an
        // unknown one the final read needs, and a refused one.
        let log = "W atomic-long r0x1-0 10\n\
                   W atomic-long J0x1-0 12\n\
                   I atomic-long J0x1-0 20 ok 1\n\
                   I atomic-long r0x1-0 25 ok 2\n\
                   W atomic-long r0x1-1 30\n\
                   I atomic-long r0x1-1 40 unc\n\
                   W atomic-long J0x1-0 50\n\
                   I atomic-long J0x1-0 60 no";
        let report = check(Counter::AtomicLong, log, read(3, 100));
        assert_eq!(report.verdict, Verdict::Linearizable, "{}", report.row("atomic-long"));
        assert_eq!(report.violation(), None);
        // Without the unknown increment's effect, the final read is what it must be.
        let report = check(Counter::AtomicLong, log, read(2, 100));
        assert_eq!(report.verdict, Verdict::Linearizable, "{}", report.row("atomic-long"));
        // But not more than every increment could have made.
        let report = check(Counter::AtomicLong, log, read(4, 100));
        assert!(report.violation().is_some(), "{}", report.row("atomic-long"));
    }

    /// The negative control's shape: applied twice (writing 1, then 2), reported once.
    #[test]
    fn a_double_applied_increment_is_not_linearizable() {
        let log = "W shared-count r0x1-0 10\nI shared-count r0x1-0 20 ok 2";
        let report = check(Counter::SharedCount, log, read(2, 100));
        let Verdict::NotLinearizable(explanation) = &report.verdict else {
            panic!("{}", report.row("shared-count"));
        };
        assert!(explanation.contains("(r0x1-0) Add(1) -> Value(2), 0..10"), "{explanation}");
        assert!(report.violation().is_some_and(|first| first.starts_with("not linearizable")));
        // As a violation of the counter's report, beside the range check's own.
        let range = check_counter(Counter::SharedCount, log.lines(), Some(2));
        assert_eq!(range.not_caught(Counter::SharedCount), ["shared-count (blind retry, linearizability)"]);
        let both = range.with_linearizability(report);
        assert_eq!(both.violations.len(), 2, "{both:?}");
        assert!(both.not_caught(Counter::SharedCount).is_empty(), "{both:?}");
        // Caught by the linearizability check alone, the control's row for the range check stays.
        let clean_range = check_counter(Counter::SharedCount, "".lines(), Some(0));
        let alone = clean_range.with_linearizability(check(Counter::SharedCount, log, read(2, 100)));
        assert_eq!(alone.not_caught(Counter::SharedCount), ["shared-count (blind retry)"]);
        // The same call from Rust on the atomic long is no more excused.
        let log = "W atomic-long r0x1-0 10\nI atomic-long r0x1-0 20 ok 2";
        assert!(check(Counter::AtomicLong, log, read(2, 100)).violation().is_some());
    }

    /// What the range check cannot see: every bound holds, but a value was reported before
    /// the increment under it was sent.
    #[test]
    fn a_value_reported_out_of_order_is_not_linearizable() {
        let log = "W atomic-long r0x1-0 10\nI atomic-long r0x1-0 20 ok 2\n\
                   W atomic-long r0x1-1 30\nI atomic-long r0x1-1 40 ok 1";
        let range = check_counter(Counter::AtomicLong, log.lines(), Some(2));
        assert!(range.violations.is_empty(), "{range:?}");
        assert!(check(Counter::AtomicLong, log, read(2, 100)).violation().is_some());
    }

    /// Curator's retried `DistributedAtomicLong` increment wrote 2 and 3 and reported 3.
    #[test]
    fn a_curator_atomic_long_call_may_apply_one_more_increment() {
        let log = "W atomic-long r0x1-0 10\nI atomic-long r0x1-0 20 ok 1\n\
                   W atomic-long J0x1-0 30\nI atomic-long J0x1-0 40 ok 3";
        let report = check(Counter::AtomicLong, log, read(3, 100));
        assert_eq!(report.verdict, Verdict::Linearizable, "{}", report.row("atomic-long"));
        assert_eq!((report.curator_retries, report.unknown), (1, 1));
        // One more, not two.
        let log = "W atomic-long r0x1-0 10\nI atomic-long r0x1-0 20 ok 1\n\
                   W atomic-long J0x1-0 30\nI atomic-long J0x1-0 40 ok 4";
        assert!(check(Counter::AtomicLong, log, read(4, 100)).violation().is_some());
        // A call that spans a retry: its first try wrote 1, a Rust call wrote 2, its retry wrote
        // 3. Excused only because it lasted long enough for a connection loss and a retry.
        let log = "W atomic-long J0x1-0 10\nW atomic-long r0x1-0 100000\nI atomic-long r0x1-0 110000 ok 2\n\
                   I atomic-long J0x1-0 1200000 ok 3";
        let report = check(Counter::AtomicLong, log, read(3, 1_300_000));
        assert_eq!(report.verdict, Verdict::Linearizable, "{}", report.row("atomic-long"));
        let quick = log.replace("1200000", "800000");
        assert!(check(Counter::AtomicLong, &quick, read(3, 1_300_000)).violation().is_some());
        // Curator's `SharedCount` reports its retried write as failed: it is not excused.
        let log = "W shared-count r0x1-0 10\nI shared-count r0x1-0 20 ok 1\n\
                   W shared-count J0x1-0 30\nI shared-count J0x1-0 40 ok 3";
        let report = check(Counter::SharedCount, log, read(3, 100));
        assert_eq!(report.curator_retries, 0);
        assert!(report.violation().is_some(), "{}", report.row("shared-count"));
    }

    #[test]
    fn a_search_out_of_its_bounds_is_unknown_and_no_violation() {
        let log = "W atomic-long r0x1-0 10\nI atomic-long r0x1-0 20 ok 2";
        let recorded = record(Counter::AtomicLong, log.lines(), read(2, 100));
        let report = check_recorded(&recorded, Checker::new(CounterModel::new(0)).time_limit(Duration::ZERO));
        assert!(matches!(report.verdict, Verdict::Unknown(_)), "{report:?}");
        assert_eq!(report.violation(), None);
        assert!(
            report.row("atomic-long").contains("unknown, not a violation"),
            "{}",
            report.row("atomic-long")
        );
    }
}
