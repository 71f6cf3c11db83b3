//! The work partitioner under chaos: each `zkr-chaos partition` process runs `workers` workers,
//! each on its own session, sharing one set of [`ITEMS`] items under `<root>` with every other
//! process's workers through [`Partitioner`]s in our layout (settle [`SETTLE`]). A worker leaves
//! now and then (its partitioner closes) and joins again [`REJOIN_MS`] later under a new
//! identifier, so items move while the faults go on.
//!
//! Each worker's work for an item, started by [`Partitioner::run`], logs (`partition-<tag>.log`):
//!
//! ```text
//! S partition <holder> <micros> <item> <fencing token>   its work for the item started
//! E partition <holder> <micros> <item>                   that work ended (dropped: the item moved,
//!                                                        was lost, or the worker closed)
//! L partition <holder> <micros> <item>                   PartitionEvent::Lost for the item
//! F partition <holder> <micros>                          the worker froze (`freeze` on stdin: it
//!                                                        stays in the party from now on)
//! ```
//!
//! Holders are `<process tag>-<worker>-<incarnation>` (each incarnation is a worker of its own,
//! with that identifier).
//!
//! **Owned twice** ([`check_partitions`]): per item, the intervals `[S, E)` of different holders
//! must not overlap, with no tolerance. A holder killed by the run ends its open intervals at the
//! kill the run recorded; one never ended (its process did not log the end) at the end of the run.
//! Why this holds without tolerance: the next owner's lock is granted only once the old owner's
//! lock node is gone (released, or its session expired on the server), and the partitioner stops
//! an item's work before it releases the lock, and on a *suspected* session loss (the framework's
//! connection error state, well before the server can expire the session) before anything else.
//! Every process runs on this one machine, so the logged wall clock times compare. **Fencing**:
//! per item, the tokens of successive starts strictly increase.
//!
//! **Settled** ([`check_settled`]), once the faults stopped, the proxies healed and the workers
//! froze: within [`converge_bound`], the party is exactly the frozen workers, every item has
//! exactly one lock node on the server, its data the identifier of the one frozen worker whose
//! work for the item is running (from its log), and the items are split evenly.
//!
//! The negative control (`--no-lock`): workers that follow the party and deal the items alike but
//! start an item's work without waiting for its lock (the partition crate's hidden
//! [`PartitionerBuilder::without_item_locks_for_chaos_control`] hook: each worker locks a path of
//! its own); the checker must report owned-twice items.
//!
//! [`PartitionerBuilder::without_item_locks_for_chaos_control`]: zk_recipes_partition::PartitionerBuilder::without_item_locks_for_chaos_control

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zk_recipes_framework::Framework;
use zk_recipes_partition::{PartitionEvent, Partitioner};

use crate::events::{epoch_micros, EventLog};
use crate::holders::tag_of;
use crate::setup::ProcessSetup;

/// The items the workers share.
pub const ITEMS: usize = 24;
/// The partitioners' settle time.
pub const SETTLE: Duration = Duration::from_secs(1);
/// How long one incarnation of a worker stays in the party (random in this range, milliseconds).
const LIFETIME_MS: (u64, u64) = (3000, 10_000);
/// The negative control's workers: odd ones leave and join as in the run, but sooner (the control
/// runs for a few seconds only) and with a short settle time; even ones keep [`SETTLE`] and stay.
/// After a change the odd ones deal and start their new items' work 0.9 s before the even ones
/// stop theirs: with item locks they would wait for them; without, the item is owned twice.
const CONTROL_LIFETIME_MS: (u64, u64) = (2000, 4000);
/// See [`CONTROL_LIFETIME_MS`].
const CONTROL_FAST_SETTLE: Duration = Duration::from_millis(100);
/// How long a worker is out of the party between two incarnations (milliseconds).
const REJOIN_MS: (u64, u64) = (200, 1000);
/// How long closing a partitioner may take.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(10);

/// The items, `item-00` ...
pub fn items() -> Vec<String> {
    (0..ITEMS).map(|item| format!("item-{item:02}")).collect()
}

/// How long the items may take to settle once the workers froze: a session that expired meanwhile
/// must be noticed (the session timeout), a new one made and the member node created again, the
/// party must settle, and an expired session's lock nodes go (another session timeout).
pub fn converge_bound(session_timeout: Duration) -> Duration {
    session_timeout * 3 + SETTLE + Duration::from_secs(10)
}

/// What a partition process runs.
#[derive(Debug, Clone, clap::Args)]
pub struct PartitionConfig {
    /// Where it connects, its name, its event log, its sessions' timeout.
    #[command(flatten)]
    pub setup: ProcessSetup,
    /// Workers (each on its own session).
    #[arg(long, default_value_t = 2)]
    pub workers: usize,
    #[arg(long)]
    pub root: String,
    /// The negative control: work starts without waiting for the item's lock.
    #[arg(long)]
    pub no_lock: bool,
}

/// Runs a partition process until `stop` (exit 0) or EOF on stdin (exit 3).
pub async fn run(config: PartitionConfig) -> std::io::Result<i32> {
    let log = config.setup.open_log()?;
    let crate::commands::Commands { freeze, stop, .. } = crate::commands::listen();
    let mut workers = Vec::new();
    for worker_index in 0..config.workers {
        let framework = config.setup.framework()?;
        let name = config.setup.holder(worker_index);
        let (settle, lifetime) = match (config.no_lock, worker_index % 2) {
            (false, _) => (SETTLE, Some(LIFETIME_MS)),
            (true, 0) => (SETTLE, None),
            (true, _) => (CONTROL_FAST_SETTLE, Some(CONTROL_LIFETIME_MS)),
        };
        workers.push(tokio::spawn(worker(
            framework,
            name,
            Pace { settle, lifetime },
            config.clone(),
            log.clone(),
            freeze.clone(),
            stop.clone(),
        )));
    }
    println!("READY");
    for handle in workers {
        let _ = handle.await;
    }
    println!("DONE");
    Ok(0)
}

/// How a worker moves: its settle time, and how long each incarnation stays in the party
/// (random in this range, milliseconds; `None`: it stays).
#[derive(Debug, Clone, Copy)]
struct Pace {
    settle: Duration,
    lifetime: Option<(u64, u64)>,
}

/// One worker: incarnations of a partitioner on one session, until `stop`.
async fn worker(
    framework: Framework,
    name: String,
    pace: Pace,
    config: PartitionConfig,
    log: Arc<EventLog>,
    mut freeze: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = fastrand::Rng::new();
    let mut incarnation = 0_u32;
    'incarnations: loop {
        incarnation += 1;
        let holder = format!("{name}-{incarnation}");
        let mut builder =
            Partitioner::builder(&framework, &config.root, items()).identifier(&holder).settle(pace.settle);
        if config.no_lock {
            builder = builder.without_item_locks_for_chaos_control();
        }
        let partitioner = match builder.start() {
            Ok(partitioner) => partitioner,
            Err(err) => {
                log.line(&format!("X partition {holder} {} start: {err}", epoch_micros()));
                break;
            }
        };
        let mut events = partitioner.events();
        let work_log = log.clone();
        let work_holder = holder.clone();
        let started = partitioner.run(move |item, fencing_token| {
            let log = work_log.clone();
            let holder = work_holder.clone();
            async move {
                log.line(&format!("S partition {holder} {} {item} {fencing_token}", epoch_micros()));
                let _end = EndOnDrop { log, holder, item };
                std::future::pending::<()>().await;
            }
        });
        if let Err(err) = started {
            log.line(&format!("X partition {holder} {} run: {err}", epoch_micros()));
        }
        let stays = Duration::from_secs(365 * 24 * 3600);
        let leave_at = tokio::time::Instant::now()
            + pace
                .lifetime
                .map_or(stays, |(shortest, longest)| Duration::from_millis(rng.u64(shortest..=longest)));
        let mut frozen = false;
        let stopping = loop {
            tokio::select! {
                () = tokio::time::sleep_until(leave_at), if !frozen && pace.lifetime.is_some() => break false,
                () = until(&mut freeze), if !frozen => {
                    frozen = true;
                    log.line(&format!("F partition {holder} {}", epoch_micros()));
                }
                () = until(&mut stop) => break true,
                event = events.next() => match event {
                    Some(PartitionEvent::Lost(items)) => {
                        let now = epoch_micros();
                        for item in items {
                            log.line(&format!("L partition {holder} {now} {item}"));
                        }
                    }
                    Some(_) => {}
                    None => break false,
                },
            }
        };
        if let Err(err) = partitioner.close(CLOSE_TIMEOUT).await {
            log.line(&format!("X partition {holder} {} close: {err}", epoch_micros()));
        }
        if stopping {
            break;
        }
        let out = Duration::from_millis(rng.u64(REJOIN_MS.0..=REJOIN_MS.1));
        tokio::select! {
            () = tokio::time::sleep(out) => {}
            () = until(&mut stop) => break 'incarnations,
        }
    }
    framework.close().await;
}

/// Logs the end of an item's work when the work's future is dropped (the partitioner aborts the
/// task before it releases the item's lock).
struct EndOnDrop {
    log: Arc<EventLog>,
    holder: String,
    item: String,
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        self.log.line(&format!("E partition {} {} {}", self.holder, epoch_micros(), self.item));
    }
}

/// Resolves once `flag` is true (or its sender is gone).
async fn until(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

/// One item's work by one holder, from the logs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Interval {
    holder: String,
    start: i64,
    /// `None` while open.
    end: Option<i64>,
    token: i64,
}

/// One logged line.
enum Line<'a> {
    Start { holder: &'a str, micros: i64, item: &'a str, token: i64 },
    End { holder: &'a str, micros: i64, item: &'a str },
    Lost,
    Frozen { holder: &'a str },
}

fn parse(line: &str) -> Option<Line<'_>> {
    let fields: Vec<&str> = line.split_whitespace().collect();
    match fields.as_slice() {
        ["S", "partition", holder, micros, item, token] => {
            Some(Line::Start { holder, micros: micros.parse().ok()?, item, token: token.parse().ok()? })
        }
        ["E", "partition", holder, micros, item] => {
            Some(Line::End { holder, micros: micros.parse().ok()?, item })
        }
        ["L", "partition", _, _, _] => Some(Line::Lost),
        ["F", "partition", holder, _] => Some(Line::Frozen { holder }),
        _ => None,
    }
}

/// Per item, every holder's intervals in the order logged (each log in time order), and the
/// holders that started one while already working on the item.
fn intervals(text: &str) -> (BTreeMap<String, Vec<Interval>>, Vec<String>) {
    let mut by_item: BTreeMap<String, Vec<Interval>> = BTreeMap::new();
    let mut twice = Vec::new();
    for line in text.lines().filter_map(parse) {
        match line {
            Line::Start { holder, micros, item, token } => {
                let list = by_item.entry(item.to_owned()).or_default();
                if list.iter().any(|interval| interval.holder == holder && interval.end.is_none()) {
                    twice.push(format!("started twice: {holder} started {item} again without ending it"));
                }
                list.push(Interval { holder: holder.to_owned(), start: micros, end: None, token });
            }
            Line::End { holder, micros, item } => {
                if let Some(open) = by_item
                    .get_mut(item)
                    .and_then(|list| list.iter_mut().rev().find(|interval| interval.holder == holder))
                    .filter(|interval| interval.end.is_none())
                {
                    open.end = Some(micros);
                }
            }
            Line::Lost | Line::Frozen { .. } => {}
        }
    }
    (by_item, twice)
}

/// What the partition workers did and what the checkers found.
#[derive(Debug, Clone, Default)]
pub struct PartitionReport {
    /// Starts of an item's work (`S`).
    pub starts: u64,
    /// Starts by another holder than the item's previous one.
    pub moves: u64,
    /// Distinct holders (worker incarnations) that started any work.
    pub holders: u64,
    /// Items reported lost (`L`).
    pub lost: u64,
    /// The largest number of holders working on one item at once.
    pub max_concurrent: u64,
    /// How long the items took to settle at the end (ms), when checked.
    pub settled_ms: Option<u64>,
    /// Owned twice, fencing, and the end state's violations.
    pub violations: Vec<String>,
}

/// The "owned twice" and fencing checks over every partition log's text. `killed` maps a process
/// tag to when the run SIGKILLed it (its open intervals end then); `run_end` ends the others.
pub fn check_partitions(text: &str, killed: &HashMap<String, i64>, run_end: i64) -> PartitionReport {
    let mut report = PartitionReport {
        lost: text.lines().filter(|line| matches!(parse(line), Some(Line::Lost))).count() as u64,
        ..PartitionReport::default()
    };
    let (by_item, twice) = intervals(text);
    report.violations.extend(twice);
    let mut holders = BTreeSet::new();
    for (item, mut list) in by_item {
        list.sort_by_key(|interval| interval.start);
        report.starts += list.len() as u64;
        let ends: Vec<i64> = list
            .iter()
            .map(|interval| {
                interval
                    .end
                    .unwrap_or_else(|| killed.get(tag_of(&interval.holder)).copied().unwrap_or(run_end))
            })
            .collect();
        for (index, interval) in list.iter().enumerate() {
            holders.insert(interval.holder.clone());
            let mut concurrent = 1;
            if let Some(previous) = index.checked_sub(1).map(|previous| &list[previous]) {
                if previous.holder != interval.holder {
                    report.moves += 1;
                }
                if interval.token <= previous.token {
                    report.violations.push(format!(
                        "fencing: {item} started by {} with token {:#x}, not above {:#x} of {} before it",
                        interval.holder, interval.token, previous.token, previous.holder
                    ));
                }
            }
            for (earlier, end) in list[..index].iter().zip(&ends) {
                if *end > interval.start && earlier.holder != interval.holder {
                    concurrent += 1;
                    report.violations.push(format!(
                        "owned twice: {item} by {} from {} while {} owned it ({} to {}, {} ms overlap)",
                        interval.holder,
                        interval.start,
                        earlier.holder,
                        earlier.start,
                        end,
                        (end.min(&ends[index]) - interval.start) / 1000
                    ));
                }
            }
            report.max_concurrent = report.max_concurrent.max(concurrent);
        }
    }
    report.holders = holders.len() as u64;
    report
}

/// The holders that froze (`F`), from the logs' text.
pub fn frozen(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|line| match parse(line)? {
            Line::Frozen { holder } => Some(holder.to_owned()),
            _ => None,
        })
        .collect()
}

/// Per item, the holders whose work on it is running now (an `S` with no `E` after it), from the
/// logs' text.
pub fn running(text: &str) -> BTreeMap<String, Vec<String>> {
    let (by_item, _) = intervals(text);
    by_item
        .into_iter()
        .map(|(item, list)| {
            let open =
                list.into_iter().filter(|interval| interval.end.is_none()).map(|interval| interval.holder);
            (item, open.collect())
        })
        .collect()
}

/// What is wrong with the settled state: the party (`party`, member node names) must be exactly
/// the `frozen` workers; every item must have exactly one lock node (`lock_holders`: the data of
/// each of its lock nodes), naming a frozen worker whose work on the item is the only frozen
/// worker's one `running` (the others' open intervals are killed processes'); and the items must
/// be split evenly among the frozen workers.
pub fn check_settled(
    items: &[String],
    frozen: &BTreeSet<String>,
    party: &BTreeSet<String>,
    lock_holders: &BTreeMap<String, Vec<String>>,
    running: &BTreeMap<String, Vec<String>>,
) -> Vec<String> {
    let mut violations = Vec::new();
    if party != frozen {
        violations.push(format!("party {party:?} is not the frozen workers {frozen:?}"));
    }
    let mut shares: BTreeMap<&str, usize> = frozen.iter().map(|holder| (holder.as_str(), 0)).collect();
    for item in items {
        let holders = lock_holders.get(item).map(Vec::as_slice).unwrap_or_default();
        // Open intervals of holders that are not frozen are a killed process's: it works no more.
        let working: Vec<String> = running
            .get(item)
            .into_iter()
            .flatten()
            .filter(|holder| frozen.contains(*holder))
            .cloned()
            .collect();
        match holders {
            [holder] if frozen.contains(holder) => {
                *shares.entry(holder).or_default() += 1;
                if working != [holder.clone()] {
                    violations.push(format!("{item}: locked by {holder}, worked on by {working:?}"));
                }
            }
            [holder] => violations.push(format!("{item}: locked by {holder}, not a live worker")),
            [] => violations.push(format!("{item}: no lock node (worked on by {working:?})")),
            more => violations.push(format!("{item}: {} lock nodes ({more:?})", more.len())),
        }
    }
    let (least, most) = (shares.values().min().copied(), shares.values().max().copied());
    if let (Some(least), Some(most)) = (least, most) {
        if most - least > 1 {
            violations.push(format!("uneven split: {shares:?}"));
        }
    }
    violations
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|name| (*name).to_owned()).collect()
    }

    #[test]
    fn a_clean_handover_is_no_violation() {
        let log = "S partition p0x1-0-1 100 item-00 10\n\
                   S partition p0x1-0-1 100 item-01 11\n\
                   E partition p0x1-0-1 200 item-00\n\
                   S partition p1x1-1-1 200 item-00 20\n\
                   L partition p0x1-0-1 300 item-01\n\
                   E partition p0x1-0-1 300 item-01\n\
                   S partition p1x1-1-1 5000 item-01 30\n";
        let report = check_partitions(log, &HashMap::new(), 10_000);
        assert_eq!(report.violations, Vec::<String>::new());
        assert_eq!((report.starts, report.moves, report.holders, report.lost), (4, 2, 2, 1));
        assert_eq!(report.max_concurrent, 1);
    }

    #[test]
    fn an_overlap_of_two_holders_is_owned_twice() {
        // p1 starts item-00 before p0's work on it ended: the no-lock control's rebalance.
        let log = "S partition p0x1-0-1 100 item-00 10\n\
                   S partition p1x1-0-1 150 item-00 20\n\
                   E partition p0x1-0-1 160 item-00\n";
        let report = check_partitions(log, &HashMap::new(), 10_000);
        assert_eq!(report.violations.len(), 1, "{:?}", report.violations);
        assert!(
            report.violations[0].starts_with("owned twice: item-00 by p1x1-0-1"),
            "{:?}",
            report.violations
        );
        assert_eq!(report.max_concurrent, 2);
    }

    #[test]
    fn a_killed_holder_owns_until_its_kill_and_an_unended_one_until_the_run_end() {
        let log = "S partition p0x1-0-1 100 item-00 10\n\
                   S partition p1x1-0-1 500 item-00 20\n\
                   S partition p1x1-0-1 500 item-01 21\n\
                   S partition p2x1-0-1 900 item-01 22\n";
        // p0x1 killed at 400: item-00 moved cleanly. p1x1 was never killed and never ended its
        // work on item-01: it owns it until the run's end, so p2's start overlaps.
        let killed = HashMap::from([("p0x1".to_owned(), 400)]);
        let report = check_partitions(log, &killed, 10_000);
        assert_eq!(report.violations.len(), 1, "{:?}", report.violations);
        assert!(report.violations[0].contains("item-01 by p2x1-0-1"), "{:?}", report.violations);
        // Killed after the next owner came in: owned twice.
        let late = HashMap::from([("p0x1".to_owned(), 600), ("p1x1".to_owned(), 800)]);
        let report = check_partitions(log, &late, 10_000);
        assert!(
            report.violations.iter().any(|text| text.contains("item-00 by p1x1-0-1")),
            "{:?}",
            report.violations
        );
        assert!(!report.violations.iter().any(|text| text.contains("item-01")), "{:?}", report.violations);
    }

    #[test]
    fn tokens_must_grow_from_one_owner_to_the_next() {
        let log = "S partition p0x1-0-1 100 item-00 30\n\
                   E partition p0x1-0-1 200 item-00\n\
                   S partition p1x1-0-1 300 item-00 30\n\
                   E partition p1x1-0-1 400 item-00\n\
                   S partition p0x1-0-2 500 item-00 29\n";
        let report = check_partitions(log, &HashMap::new(), 10_000);
        assert_eq!(report.violations.len(), 2, "{:?}", report.violations);
        assert!(report.violations.iter().all(|text| text.starts_with("fencing: item-00")));
    }

    #[test]
    fn starting_twice_without_an_end_is_caught_and_torn_lines_are_skipped() {
        let log = "S partition p0x1-0-1 100 item-00 10\nS partition p0x1-0-1 200 item-00 11\nS partition p0";
        let report = check_partitions(log, &HashMap::new(), 10_000);
        assert!(
            report.violations.iter().any(|text| text.starts_with("started twice")),
            "{:?}",
            report.violations
        );
        assert_eq!(report.starts, 2);
    }

    #[test]
    fn the_settled_state_is_one_lock_node_per_item_held_by_the_one_working_frozen_worker() {
        let items: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let log = "S partition p0x1-0-1 1 a 1\nS partition p0x1-0-1 1 b 2\nS partition p1x1-0-1 1 c 3\n\
                   S partition p1x1-0-1 1 a 4\nE partition p1x1-0-1 2 a\n\
                   F partition p0x1-0-1 3\nF partition p1x1-0-1 3\n";
        let frozen_workers = frozen(log);
        assert_eq!(frozen_workers, set(&["p0x1-0-1", "p1x1-0-1"]));
        let working = running(log);
        let locks = |pairs: &[(&str, &[&str])]| -> BTreeMap<String, Vec<String>> {
            pairs
                .iter()
                .map(|(item, holders)| {
                    ((*item).to_owned(), holders.iter().map(|h| (*h).to_owned()).collect())
                })
                .collect()
        };
        let good = locks(&[("a", &["p0x1-0-1"]), ("b", &["p0x1-0-1"]), ("c", &["p1x1-0-1"])]);
        assert_eq!(
            check_settled(&items, &frozen_workers, &frozen_workers, &good, &working),
            Vec::<String>::new()
        );
        // A killed process's holder never logged the end of its work: not a live worker's.
        let with_killed = running(&format!("{log}S partition p9x1-0-1 1 c 9\n"));
        assert_eq!(
            check_settled(&items, &frozen_workers, &frozen_workers, &good, &with_killed),
            Vec::<String>::new()
        );

        let bad = locks(&[("a", &["p1x1-0-1"]), ("b", &["p0x1-0-1", "p1x1-0-1"]), ("c", &["p9x1-0-1"])]);
        let violations = check_settled(&items, &frozen_workers, &set(&["p0x1-0-1"]), &bad, &working);
        assert!(violations.iter().any(|text| text.starts_with("party")), "{violations:?}");
        assert!(
            violations.iter().any(|text| text.starts_with("a: locked by p1x1-0-1, worked on by")),
            "{violations:?}"
        );
        assert!(violations.iter().any(|text| text.starts_with("b: 2 lock nodes")), "{violations:?}");
        assert!(
            violations.iter().any(|text| text.starts_with("c: locked by p9x1-0-1, not a live")),
            "{violations:?}"
        );

        let uneven = locks(&[("a", &["p0x1-0-1"]), ("b", &["p0x1-0-1"]), ("c", &["p0x1-0-1"])]);
        let working_all =
            running("S partition p0x1-0-1 1 a 1\nS partition p0x1-0-1 1 b 2\nS partition p0x1-0-1 1 c 3\n");
        let violations = check_settled(&items, &frozen_workers, &frozen_workers, &uneven, &working_all);
        assert_eq!(violations.len(), 1, "{violations:?}");
        assert!(violations[0].starts_with("uneven split"), "{violations:?}");
    }
}
