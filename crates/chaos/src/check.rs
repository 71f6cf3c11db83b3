//! The checkers: from the contenders' event logs (and the counters' final values), per recipe.
//!
//! * **marker / counter / fencing**: violations the holders saw inside their holds (`V` events):
//!   another live holder's marker, a counter written by someone else during an exclusive hold, a
//!   fencing token not above the last committed one. A marker whose holder had already seen
//!   `lost()` fire is not a live holder's (its client gave the session up, e.g. after an ensemble
//!   restart revived it on the servers, and the framework's cleanup deleted its lock node from the
//!   new session): counted as a stale marker, not a violation. A SIGKILLed holder stays live.
//! * **overlap**: from the logged times, more holders at once than the recipe allows. A hold
//!   ends when its critical section ends (`R`, logged before the release is sent), when `lost()`
//!   fired (`L`), or when its process was SIGKILLed. A hold that ended by `lost()` may end up to
//!   the tolerance after the next holder came in (the machine may be slow to run the listener);
//!   later than that, `lost()` fired too late: an overlap. Likewise a hold whose own `lost()`
//!   fired within the tolerance of its start (its acquire returned as its session was being lost).
//! * **count**: the counter's final count must be the sum of increments that committed, give
//!   or take those whose outcome the contender could not know (`I unc`, or `W` with no `I`).
//!
//! Holders are attributed by their process tag's first letter: `r` (per-recipe) and `b` (busy
//! session) are Rust; `j` Curator, `z` the Java client of ZooKeeper's lock recipe and `k` kazoo
//! are the *other* side.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::events::Event;
use crate::holders::Pauses;
use crate::holders::{is_rust, tag_of};
use crate::recipes::{CounterValue, Recipe};

/// What one recipe did and what the checkers found.
#[derive(Debug, Clone, Default)]
pub struct RecipeReport {
    /// Acquisitions (`A` events), by Rust contenders.
    pub rust_acquisitions: u64,
    /// Acquisitions by the other side's contenders (Curator, ZooKeeper's recipe, kazoo); a
    /// queue's deliveries to Curator consumers.
    pub other_acquisitions: u64,
    /// Acquires that gave up early on purpose (`G` events: a short deadline, or dropped).
    pub gave_up: u64,
    /// Distinct sessions that held at least once.
    pub holders: u64,
    /// `lost()` fired while holding.
    pub lost_fired: u64,
    /// Violations by kind, Rust holders.
    pub rust_violations: BTreeMap<String, u64>,
    /// Violations by kind, the other side's holders.
    pub other_violations: BTreeMap<String, u64>,
    /// Markers seen whose holders had all seen `lost()` fire (not violations).
    pub stale_markers: u64,
    /// What holders saw after their own `lost()` had fired (not violations: they were fenced off).
    pub fenced_after_lost: u64,
    /// Violations no single holder is to blame for (the counter's count).
    pub shared_violations: BTreeMap<String, u64>,
    /// The largest fencing token handed out.
    pub max_token: i64,
    /// Most holders at once (by the logged times).
    pub max_concurrent: u64,
    /// Overlaps of belief: a later holder came in while an earlier holder's process was paused
    /// (SIGSTOP) during its hold, so two holders believed they held at once. Expected under
    /// client pauses and no violation: whether the paused holder had an *effect* is for its
    /// guarded writes and the fenced store ([`crate::store`]) to say.
    pub belief_overlaps: u64,
    /// Latest `lost()` after the next holder came in (ms; within the tolerance, else an overlap).
    pub max_late_lost_ms: f64,
    /// Increments that committed.
    pub increments: u64,
    /// Increments of unknown outcome.
    pub uncertain_increments: u64,
    /// The counter's final count.
    pub counter: Option<u64>,
    /// Errors the contenders logged (timeouts, connection losses).
    pub errors: u64,
    /// Recipe znodes left after the run (lock nodes, markers; a queue's items and lock nodes).
    pub leaked_nodes: u64,
    /// A queue's items put.
    pub items: u64,
    /// Items acknowledged (each counted once).
    pub items_acked: u64,
    /// Deliveries (`C` events), redeliveries included.
    pub deliveries: u64,
    /// Items a Curator consumer processed more than once (at least once: one died or lost its
    /// session before Curator deleted the item). Not a violation.
    pub curator_redeliveries: u64,
    /// Items a live Curator consumer session held the lock of without working on them, found by
    /// the drain (Curator's lock create retried after a connection loss; see `Phase::drain`). Not
    /// a violation: the item must still be acked by someone.
    pub curator_stranded_locks: u64,
    /// Items whose ack was sent but whose success was never logged (the consumer was SIGKILLed,
    /// or the ack's reply was lost), and that nobody got again and are not left: acked.
    pub acks_unlogged: u64,
}

impl RecipeReport {
    /// Every violation, Rust's and Curator's.
    pub fn total_violations(&self) -> u64 {
        self.violations_by_kind().values().sum()
    }

    /// Every violation by kind.
    pub fn violations_by_kind(&self) -> BTreeMap<String, u64> {
        let mut all = BTreeMap::new();
        for map in [&self.rust_violations, &self.other_violations, &self.shared_violations] {
            for (kind, count) in map {
                *all.entry(kind.clone()).or_default() += count;
            }
        }
        all
    }

    /// All acquisitions.
    pub fn acquisitions(&self) -> u64 {
        self.rust_acquisitions + self.other_acquisitions
    }

    pub(crate) fn violation(&mut self, holder: &str, kind: &str) {
        let map = if is_rust(holder) { &mut self.rust_violations } else { &mut self.other_violations };
        *map.entry(kind.to_owned()).or_default() += 1;
    }
}

/// One hold's interval.
#[derive(Debug, Clone)]
struct Interval {
    holder: String,
    start: i64,
    end: i64,
    /// Ended by `lost()`: may end up to the tolerance late.
    by_lost: bool,
}

/// Checks one recipe's events.
///
/// `killed` maps a process tag to when it was SIGKILLed; `run_end` closes holds still open;
/// `tolerance_micros` is how late `lost()` may fire; `counter` is the final counter value.
pub fn check_recipe(
    recipe: Recipe,
    events: &[Event],
    killed: &HashMap<String, i64>,
    run_end: i64,
    tolerance_micros: i64,
    counter: Option<&CounterValue>,
    paused: &Pauses,
) -> RecipeReport {
    let mut report = RecipeReport::default();
    let mut holds: BTreeMap<&str, Interval> = BTreeMap::new();
    let mut writes: HashMap<&str, Option<&str>> = HashMap::new();
    let mut sessions = BTreeSet::new();
    let mut seen: Vec<&Event> = Vec::new();
    let mut lost_at: HashMap<&str, i64> = HashMap::new();
    for event in events.iter().filter(|event| event.recipe == recipe) {
        let holder = event.holder.as_str();
        match event.kind {
            'A' => {
                if is_rust(holder) {
                    report.rust_acquisitions += 1;
                } else {
                    report.other_acquisitions += 1;
                }
                let token: i64 = event.rest.first().and_then(|token| token.parse().ok()).unwrap_or(0);
                report.max_token = report.max_token.max(token);
                sessions.insert(holder.rsplit_once('-').map_or(holder, |(session, _)| session));
                holds.insert(
                    holder,
                    Interval {
                        holder: holder.to_owned(),
                        start: event.micros,
                        end: i64::MAX,
                        by_lost: false,
                    },
                );
            }
            'R' | 'L' => {
                if event.kind == 'L' {
                    report.lost_fired += 1;
                    lost_at.entry(holder).or_insert(event.micros);
                }
                if let Some(interval) = holds.get_mut(holder) {
                    if interval.end == i64::MAX {
                        interval.end = event.micros;
                        interval.by_lost = event.kind == 'L';
                    }
                }
            }
            'W' => {
                writes.insert(holder, None);
            }
            'I' => {
                writes.insert(holder, event.rest.first().map(String::as_str));
            }
            'V' => seen.push(event),
            'E' => report.errors += 1,
            'G' => report.gave_up += 1,
            _ => {}
        }
    }
    report.holders = sessions.len() as u64;
    let mut markers = Vec::new();
    for event in seen {
        let kind = event.rest.first().map_or("unknown", String::as_str);
        if lost_at.get(event.holder.as_str()).is_some_and(|lost| *lost <= event.micros) {
            // A holder that had already seen lost() fire, still finishing a call: what it saw
            // (a newer token, someone's marker) is the next holder, and its own guarded write
            // cannot commit. Fenced off, as it should be.
            report.fenced_after_lost += 1;
        } else if kind == "marker" {
            markers.push(event);
        } else if kind == "fencing" && is_tie(&event.rest) {
            // Our token equals the last committed one: both lock nodes have one creation zxid,
            // which only one transaction (a multi) creating both gives them.
            report.violation(&event.holder, "fencing-tie");
        } else {
            report.violation(&event.holder, kind);
        }
    }
    for marker in markers {
        let others = marker.rest.get(1).and_then(|others| others.strip_prefix("others=")).unwrap_or_default();
        let live = others
            .split(',')
            .filter(|other| !other.is_empty() && *other != marker.holder)
            .filter(|other| lost_at.get(other).is_none_or(|lost| *lost > marker.micros));
        if recipe.too_many(&marker.holder, live) {
            report.violation(&marker.holder, "marker");
        } else {
            report.stale_markers += 1;
        }
    }
    for outcome in writes.values() {
        match outcome {
            Some("ok") => report.increments += 1,
            Some("no") => {}
            _ => report.uncertain_increments += 1,
        }
    }
    let mut intervals: Vec<Interval> = holds.into_values().collect();
    for interval in &mut intervals {
        if interval.end == i64::MAX {
            interval.end = killed.get(tag_of(&interval.holder)).copied().unwrap_or(run_end);
        }
    }
    check_overlaps(recipe, &mut intervals, tolerance_micros, paused, &mut report);
    if let Some(counter) = counter {
        report.counter = Some(counter.count);
        if counter.count < report.increments
            || counter.count > report.increments + report.uncertain_increments
        {
            *report.shared_violations.entry("count".to_owned()).or_default() += 1;
        }
    }
    report
}

/// Whether a `fencing last=<token> ours=<token> ...` violation's two tokens are equal.
fn is_tie(rest: &[String]) -> bool {
    let token = |name: &str| rest.iter().find_map(|field| field.strip_prefix(name));
    token("last=").is_some_and(|last| token("ours=") == Some(last))
}

/// Sweeps the holds in start order, comparing each with those still running when it starts.
fn check_overlaps(
    recipe: Recipe,
    intervals: &mut [Interval],
    tolerance_micros: i64,
    paused: &Pauses,
    report: &mut RecipeReport,
) {
    intervals.sort_by_key(|interval| interval.start);
    let mut running: Vec<&Interval> = Vec::new();
    for interval in intervals.iter() {
        running.retain(|earlier| earlier.end > interval.start);
        // A hold whose process was paused after it began and before we came in only believes it
        // holds: an overlap of belief, counted apart.
        let (believers, awake): (Vec<&Interval>, Vec<&Interval>) = running.iter().partition(|earlier| {
            paused.get(tag_of(&earlier.holder)).is_some_and(|pauses| {
                pauses.iter().any(|(from, to)| *from <= interval.start && *to >= earlier.start)
            })
        });
        if !believers.is_empty()
            && recipe.too_many(&interval.holder, running.iter().map(|hold| hold.holder.as_str()))
        {
            report.belief_overlaps += 1;
        }
        // Holds that ended by lost() within the tolerance after we came in may be forgiven.
        let (mut late, overlapping): (Vec<&Interval>, Vec<&Interval>) = awake
            .iter()
            .partition(|earlier| earlier.by_lost && earlier.end - interval.start <= tolerance_micros);
        let overlapping: Vec<&str> = overlapping.iter().map(|hold| hold.holder.as_str()).collect();
        // A late lost() matters only where it made too many holders: then the overlap lasted
        // until enough of those holds had ended, and that is how late lost() came. Holds within
        // the recipe's capacity (a semaphore's other lease) are no lateness at all.
        late.sort_by_key(|earlier| earlier.end);
        let still_too_many = |forgiven: usize| {
            let others =
                overlapping.iter().copied().chain(late[forgiven..].iter().map(|hold| hold.holder.as_str()));
            recipe.too_many(&interval.holder, others)
        };
        let forgiven = (0..=late.len()).find(|&forgiven| !still_too_many(forgiven)).unwrap_or(late.len());
        if forgiven > 0 {
            let late_ms = (late[forgiven - 1].end - interval.start) as f64 / 1000.0;
            report.max_late_lost_ms = report.max_late_lost_ms.max(late_ms);
        }
        let at_once = overlapping.len() + late.len() - forgiven + 1;
        report.max_concurrent = report.max_concurrent.max(at_once as u64);
        if !recipe.too_many(&interval.holder, overlapping.iter().copied()) {
            running.push(interval);
            continue;
        }
        // A hold lost within the tolerance of its own start (its acquire returned on a session
        // that was being lost) never got to act: forgiven, as an earlier one lost late is.
        if interval.by_lost && interval.end - interval.start <= tolerance_micros {
            let late_ms = (interval.end - interval.start) as f64 / 1000.0;
            report.max_late_lost_ms = report.max_late_lost_ms.max(late_ms);
        } else {
            report.violation(&interval.holder, "overlap");
        }
        running.push(interval);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(line: &str) -> Event {
        Event::parse(line).expect("event")
    }

    fn check(lines: &[&str], counter: Option<CounterValue>) -> RecipeReport {
        let events: Vec<Event> = lines.iter().map(|line| event(line)).collect();
        check_recipe(Recipe::Mutex, &events, &HashMap::new(), 10_000, 100, counter.as_ref(), &HashMap::new())
    }

    /// A holder whose process was paused (SIGSTOP) while the next came in overlaps it in belief
    /// only: counted apart, no violation. The same overlap without the pause is one.
    #[test]
    fn a_paused_holders_overlap_is_one_of_belief() {
        let lines = [
            "A mutex r0x1-0-1 10 5",
            "A mutex j0x1-0-1 5000 6",
            "R mutex j0x1-0-1 5100",
            "L mutex r0x1-0-1 9000",
        ];
        let events: Vec<Event> = lines.iter().map(|line| event(line)).collect();
        let paused = HashMap::from([("r0x1".to_owned(), vec![(20, 8000)])]);
        let report = check_recipe(Recipe::Mutex, &events, &HashMap::new(), 10_000, 100, None, &paused);
        assert_eq!(report.total_violations(), 0, "{report:?}");
        assert_eq!(report.belief_overlaps, 1);
        let other = HashMap::from([("r1x1".to_owned(), vec![(20, 8000)])]);
        let report = check_recipe(Recipe::Mutex, &events, &HashMap::new(), 10_000, 100, None, &other);
        assert_eq!(report.rust_violations.get("overlap"), None, "{report:?}");
        assert_eq!(report.other_violations.get("overlap"), Some(&1), "{report:?}");
        assert_eq!(report.belief_overlaps, 0);
    }

    #[test]
    fn sequential_holds_are_clean() {
        let report = check(
            &[
                "A mutex r0-0-1 10 5",
                "W mutex r0-0-1 11",
                "I mutex r0-0-1 12 ok",
                "R mutex r0-0-1 20",
                "A mutex j0-0-1 21 6",
                "W mutex j0-0-1 22",
                "I mutex j0-0-1 23 ok",
                "R mutex j0-0-1 30",
            ],
            Some(CounterValue { count: 2, token: 6, holder: "j0-0-1".into() }),
        );
        assert_eq!(report.total_violations(), 0, "{report:?}");
        assert_eq!(report.acquisitions(), 2);
        assert_eq!(report.max_token, 6);
        assert_eq!(report.max_concurrent, 1);
    }

    #[test]
    fn overlapping_holds_are_a_violation() {
        let report = check(
            &["A mutex r0-0-1 10 5", "A mutex r1-0-1 15 6", "R mutex r0-0-1 20", "R mutex r1-0-1 30"],
            None,
        );
        assert_eq!(report.rust_violations.get("overlap"), Some(&1));
    }

    #[test]
    fn a_late_lost_is_forgiven_only_within_the_tolerance() {
        let within = check(
            &["A mutex r0-0-1 10 5", "A mutex r1-0-1 1000 6", "L mutex r0-0-1 1050", "R mutex r1-0-1 2000"],
            None,
        );
        assert_eq!(within.total_violations(), 0, "{within:?}");
        let late = check(
            &["A mutex r0-0-1 10 5", "A mutex r1-0-1 1000 6", "L mutex r0-0-1 1200", "R mutex r1-0-1 2000"],
            None,
        );
        assert_eq!(late.rust_violations.get("overlap"), Some(&1));
    }

    #[test]
    fn a_late_lost_is_measured_by_the_mutex_and_counts_it_too() {
        let late = check(
            &["A mutex r0-0-1 10 5", "A mutex r1-0-1 1000 6", "L mutex r0-0-1 1050", "R mutex r1-0-1 2000"],
            None,
        );
        assert_eq!(late.total_violations(), 0, "{late:?}");
        assert_eq!(late.max_late_lost_ms, 0.05, "{late:?}");
    }

    #[test]
    fn a_read_lock_lost_late_is_late_for_a_writer_only() {
        // Holders whose last number is a multiple of 4 write (`is_writer`); the others read.
        let lines = |second: &str| {
            [
                "A rwlock r0-0-1 10 5".to_owned(),
                format!("A rwlock {second} 300 6"),
                "L rwlock r0-0-1 500".to_owned(),
            ]
            .into_iter()
            .chain([format!("R rwlock {second} 1000")])
            .collect::<Vec<_>>()
        };
        let check_rwlock = |lines: Vec<String>| {
            let events: Vec<Event> = lines.iter().map(|line| event(line)).collect();
            check_recipe(Recipe::RwLock, &events, &HashMap::new(), 10_000, 1_000, None, &HashMap::new())
        };
        let reader = check_rwlock(lines("r1-0-2"));
        assert_eq!((reader.total_violations(), reader.max_late_lost_ms), (0, 0.0), "{reader:?}");
        let writer = check_rwlock(lines("r1-0-4"));
        assert_eq!((writer.total_violations(), writer.max_late_lost_ms), (0, 0.2), "{writer:?}");
    }

    /// A semaphore of two leases, the tolerance 1 ms: `lines` checked.
    fn semaphore(lines: &[&str]) -> RecipeReport {
        let events: Vec<Event> = lines.iter().map(|line| event(line)).collect();
        check_recipe(Recipe::Semaphore, &events, &HashMap::new(), 10_000, 1_000, None, &HashMap::new())
    }

    #[test]
    fn a_lost_hold_within_the_semaphores_leases_is_no_lateness() {
        // r0 holds one lease until lost() at 900; r1 and r2 take turns on the other one.
        let report = semaphore(&[
            "A semaphore r0-0-1 10 5",
            "A semaphore r1-0-1 100 6",
            "R semaphore r1-0-1 200",
            "A semaphore r2-0-1 300 7",
            "L semaphore r0-0-1 900",
            "R semaphore r2-0-1 1000",
        ]);
        assert_eq!(report.total_violations(), 0, "{report:?}");
        assert_eq!(report.max_late_lost_ms, 0.0, "two holders at most: nothing was late");
        assert_eq!(report.max_concurrent, 2);
    }

    #[test]
    fn a_late_lost_beyond_the_semaphores_leases_is_as_late_as_the_excess_lasted() {
        // r0 and r1 hold both leases; r2 comes in at 300; r0's lost() fires at 500, r1's at 800:
        // three holders until 500, so lost() was 0.2 ms late (r1's, within the leases, was not).
        let report = semaphore(&[
            "A semaphore r0-0-1 10 5",
            "A semaphore r1-0-1 20 6",
            "A semaphore r2-0-1 300 7",
            "L semaphore r0-0-1 500",
            "L semaphore r1-0-1 800",
            "R semaphore r2-0-1 1000",
        ]);
        assert_eq!(report.total_violations(), 0, "{report:?}");
        assert_eq!(report.max_late_lost_ms, 0.2, "{report:?}");
        // Later than the tolerance: an overlap.
        let too_late = semaphore(&[
            "A semaphore r0-0-1 10 5",
            "A semaphore r1-0-1 20 6",
            "A semaphore r2-0-1 300 7",
            "L semaphore r0-0-1 1500",
            "L semaphore r1-0-1 1600",
            "R semaphore r2-0-1 2000",
        ]);
        assert_eq!(too_late.rust_violations.get("overlap"), Some(&1), "{too_late:?}");
    }

    #[test]
    fn a_hold_lost_at_once_is_forgiven_within_the_tolerance() {
        let at_once = check(
            &["A mutex r0-0-1 10 5", "A mutex j1-0-1 20 0", "L mutex j1-0-1 21", "R mutex r0-0-1 500"],
            None,
        );
        assert_eq!(at_once.total_violations(), 0, "{at_once:?}");
        let later = check(
            &["A mutex r0-0-1 10 5", "A mutex j1-0-1 20 0", "L mutex j1-0-1 400", "R mutex r0-0-1 500"],
            None,
        );
        assert_eq!(later.other_violations.get("overlap"), Some(&1), "{later:?}");
    }

    #[test]
    fn a_killed_holder_ends_at_its_kill() {
        let events: Vec<Event> = ["A mutex r0-0-1 10 5", "A mutex r1-0-1 5000 6", "R mutex r1-0-1 6000"]
            .iter()
            .map(|line| event(line))
            .collect();
        let killed = HashMap::from([("r0".to_owned(), 100)]);
        let report = check_recipe(Recipe::Mutex, &events, &killed, 10_000, 0, None, &HashMap::new());
        assert_eq!(report.total_violations(), 0, "{report:?}");
    }

    #[test]
    fn the_counter_must_match_the_committed_increments() {
        let lines =
            ["A mutex r0-0-1 10 5", "W mutex r0-0-1 11", "I mutex r0-0-1 12 unc", "R mutex r0-0-1 20"];
        let ok = check(&lines, Some(CounterValue { count: 1, token: 5, holder: "r0-0-1".into() }));
        assert_eq!(ok.total_violations(), 0);
        let too_many = check(&lines, Some(CounterValue { count: 2, token: 5, holder: "r0-0-1".into() }));
        assert_eq!(too_many.shared_violations.get("count"), Some(&1));
        let lost = check(
            &["A mutex r0-0-1 10 5", "W mutex r0-0-1 11", "I mutex r0-0-1 12 ok", "R mutex r0-0-1 20"],
            Some(CounterValue { count: 0, token: 0, holder: String::new() }),
        );
        assert_eq!(lost.shared_violations.get("count"), Some(&1));
    }

    #[test]
    fn a_marker_of_a_holder_that_saw_lost_is_stale() {
        let report = check(
            &[
                "A mutex r0-0-1 10 5",
                "L mutex r0-0-1 20",
                "A mutex r1-0-1 30 6",
                "V mutex r1-0-1 31 marker others=r0-0-1",
                "R mutex r1-0-1 40",
                "A mutex r2-0-1 50 7",
                "V mutex r2-0-1 51 marker others=r2-0-1,r9-0-1",
                "R mutex r2-0-1 60",
            ],
            None,
        );
        assert_eq!(report.stale_markers, 1);
        assert_eq!(report.rust_violations.get("marker"), Some(&1), "{report:?}");
    }

    #[test]
    fn what_a_holder_sees_after_its_own_lost_is_not_a_violation() {
        let report = check(
            &[
                "A selector j0-0-1 10 5",
                "L selector j0-0-1 20",
                "A selector r0-0-1 30 7",
                "V selector j0-0-1 40 fencing last=7 ours=5 by=r0-0-1",
                "V selector r0-0-1 31 fencing last=9 ours=7 by=x",
            ]
            .map(|line| line.replace("selector", "mutex"))
            .iter()
            .map(String::as_str)
            .collect::<Vec<_>>(),
            None,
        );
        assert_eq!(report.fenced_after_lost, 1);
        assert_eq!(report.rust_violations.get("fencing"), Some(&1), "{report:?}");
        let tie = check(&["V mutex b0x1-0-2.4 10 fencing last=9 ours=9 by=b0x1-0-1.5"], None);
        assert_eq!(tie.rust_violations.get("fencing-tie"), Some(&1), "{tie:?}");
    }

    #[test]
    fn inline_violations_are_attributed_to_the_holders_language() {
        let report =
            check(&["V mutex j0-1-3 10 marker others=a", "V mutex r0-1-3 10 fencing last=9 ours=3"], None);
        assert_eq!(report.other_violations.get("marker"), Some(&1));
        assert_eq!(report.rust_violations.get("fencing"), Some(&1));
        let report =
            check(&["V mutex k0x1-1-3 10 marker others=a", "V mutex b0x1-0-7.3 10 marker others=a"], None);
        assert_eq!(report.other_violations.get("marker"), Some(&1), "{report:?}");
        assert_eq!(report.rust_violations.get("marker"), Some(&1), "{report:?}");
    }

    #[test]
    fn busy_sessions_are_counted_by_session_and_their_give_ups_apart() {
        let report = check(
            &[
                "A mutex b0x1-0-3.1 10 5",
                "R mutex b0x1-0-3.1 20",
                "A mutex b0x1-0-4.1 21 6",
                "R mutex b0x1-0-4.1 30",
                "G mutex b0x1-0-4.2 31 deadline 300us",
                "A mutex b1x1-0-0.1 40 7",
                "R mutex b1x1-0-0.1 50",
            ],
            None,
        );
        assert_eq!(report.total_violations(), 0, "{report:?}");
        assert_eq!(report.holders, 2);
        assert_eq!(report.gave_up, 1);
        assert_eq!(report.errors, 0);
        assert_eq!(report.rust_acquisitions, 3);
    }
}
