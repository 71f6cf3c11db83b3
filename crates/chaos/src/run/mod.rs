//! `zkr-chaos run`: the ensemble, the contenders, the fault scheduler, the negative control and
//! the checkers.
//!
//! Contender processes, by the first letter of their tags: `r` Rust, one session per recipe (one
//! acquire at a time each); `j` Curator; `b` Rust busy sessions (many acquires at once on one
//! session, some giving up early); `z` the Java client of ZooKeeper's lock recipe; `k` kazoo;
//! and the mix's ([`crate::counters`], [`crate::members`], [`crate::barriers`],
//! [`crate::caches`]): `c`/`J` counters (Rust/Curator), `m` persistent nodes and group members,
//! `g`/`G` double-barrier members (Rust/Curator), `a`/`A` cache writers and followers
//! (Rust/Curator), `M` Curator's persistent nodes and group members, `p` work partitioner workers
//! ([`crate::partitions`]).

mod checks;
mod config;
mod kind;
mod nemesis;
mod progress;
mod reading;
mod report;
mod settle;
mod silent;
mod slots;
mod workload;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use serde_json::json;
use zk_recipes_framework::Framework;
use zk_recipes_testing::{TestingCluster, TestingError};

use self::checks::{blind_rows, check_leaks, Settled};
pub use self::config::{RunArgs, RunConfig};
use self::kind::Kind;
use self::reading::watch_total;
use self::report::{counters_json, print_table, report_json, Outcome};

use crate::check::RecipeReport;
use crate::events::epoch_micros;
use crate::holders::Pauses;
use crate::interop::Launchers;
use crate::recipes::{CHECK_ROOT, LOCK_ROOT, QUEUE_ROOT};
use crate::rng::Rng;
use crate::store::FencedStore;

/// Roots of the negative control (locking off), apart from the real run's.
const CONTROL_LOCK_ROOT: &str = "/chaos-control";
const CONTROL_CHECK_ROOT: &str = "/chaos-control-check";
const CONTROL_QUEUE_ROOT: &str = "/chaos-control-queues";
/// A Rust contender silent this long before its kill is reported, with its stacks.
const SILENT: Duration = Duration::from_secs(25);
/// How long the consumers may take to drain the queues after the faults.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(180);
/// The deadline of one orchestration step (a node read or write, a restart).
const STEP: Duration = Duration::from_secs(60);
/// How long stopped contenders may take to exit.
const EXIT_TIMEOUT: Duration = Duration::from_secs(90);
/// How long a queue may go without an item leaving, after the faults, before the drain looks at
/// who holds the locks of the items left.
const STALL: Duration = Duration::from_secs(15);
/// How long the servers may take to reap what the contenders left (expired sessions, containers).
const LEAK_TIMEOUT: Duration = Duration::from_secs(60);

/// `zkr-chaos run`: sizes the run from its command line, runs it, and returns the exit code (0
/// clean, 1 not clean, 2 the run could not be made).
pub async fn run_command(args: RunArgs) -> i32 {
    let outcome = match RunConfig::from_args(args) {
        Ok(config) => run(config).await,
        Err(err) => Err(err),
    };
    match outcome {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(err) => {
            eprintln!("zkr-chaos: {err}");
            2
        }
    }
}

/// One phase of the run: the negative control (locking off, no faults) or the chaos run.
struct Phase<'a> {
    config: &'a RunConfig,
    launchers: &'a Launchers,
    locking: bool,
    lock_root: &'static str,
    check_root: &'static str,
    queue_root: &'static str,
    name: &'static str,
    /// The phase's fenced store ([`crate::store`]; unfenced in the control), where the Rust lock
    /// contenders write their effects.
    store: FencedStore,
    /// The client pauses of the phase, per process tag: when each SIGSTOP and SIGCONT was sent.
    paused: std::sync::Mutex<Pauses>,
}

/// Runs the negative control, then the chaos run; prints the tables and writes the JSON
/// summary. Returns whether the run was clean (and the control was not).
pub async fn run(config: RunConfig) -> Result<bool, String> {
    let started = Instant::now();
    std::fs::create_dir_all(&config.out_dir)
        .map_err(|err| format!("creating {}: {err}", config.out_dir.display()))?;
    println!(
        "zkr-chaos: mode={} seed={} (replay: --seed {}) duration={}s recipes={}",
        config.mode,
        config.seed,
        config.seed,
        config.duration.as_secs(),
        config.recipes.iter().map(|recipe| recipe.name()).collect::<Vec<_>>().join(",")
    );
    let mut launchers = Launchers::prepare(
        &config.out_dir,
        config.processes(Kind::ZooKeeperRecipe) > 0,
        config.processes(Kind::Kazoo) > 0,
    )?;
    let curator_mix = [Kind::CuratorCounter, Kind::CuratorBarrier, Kind::CuratorCache, Kind::CuratorMembers];
    if curator_mix.iter().any(|kind| config.processes(*kind) > 0) {
        launchers.prepare_curator_counters(&config.out_dir)?;
    }
    // Each member in its own network namespace, so the nemesis can cut and slow the links
    // between servers; where the machine has no namespaces (not root, no `ip`), those faults are
    // skipped, and the run says so.
    let builder = || TestingCluster::builder().size(3).min_session_timeout(Duration::from_secs(1));
    let mut cluster = match builder().partitionable(true).start().await {
        Ok(cluster) => cluster,
        Err(TestingError::NetworkUnavailable { reason }) => {
            println!(
                "WARNING: SKIPPING the faults between servers (partition-servers, isolate-leader, bridge, ring, \
                 degrade): the ensemble cannot be partitioned here: {reason}"
            );
            builder().start().await.map_err(|err| format!("starting the ensemble: {err}"))?
        }
        Err(err) => return Err(format!("starting the partitionable ensemble: {err}")),
    };
    println!("ensemble: {}", cluster.connect_string());
    let observer = Framework::builder(cluster.connect_string())
        .session_timeout(Duration::from_secs(30))
        .start()
        .map_err(|err| err.to_string())?;
    observer.block_until_connected(STEP).await.map_err(|err| format!("observer: {err}"))?;
    let baseline = watch_total(&cluster).await;

    // The negative control: the same contenders and checkers with locking off, no faults.
    let control = Phase::new(&config, &launchers, false).await?;
    let Outcome { reports: control_reports, mix: control_mix, .. } =
        control.execute(&mut cluster, &observer, None).await?;
    let control_violations: u64 =
        control_reports.values().map(RecipeReport::total_violations).sum::<u64>() + control_mix.violations();
    println!("\n== negative control (locking off, {} s, no faults)", config.control_duration.as_secs());
    print_table(&control_reports);
    control_mix.print();
    let mut blind = blind_rows(&control_reports);
    blind.extend(control_mix.blind());
    let control_caught_all = blind.is_empty();
    println!(
        "negative control: {control_violations} violations ({})",
        if control_caught_all {
            "every recipe's checkers fired, and on the ZooKeeper-recipe and kazoo rows against both sides, as they must"
                .to_owned()
        } else {
            format!("NOT CAUGHT: {}: the checkers are blind", blind.join(", "))
        }
    );

    let chaos = Phase::new(&config, &launchers, true).await?;
    let mut rng = Rng::with_seed(config.seed);
    let Outcome { reports, faults, busy, mix } =
        chaos.execute(&mut cluster, &observer, Some(&mut rng)).await?;

    // Leaks: every session is closed or expired now; nothing of the recipes may be left, and
    // the watches must be back to the baseline.
    let leaks = check_leaks(&cluster, &observer, baseline).await;
    let mut reports = reports;
    for (recipe, report) in &mut reports {
        report.leaked_nodes += leaks.nodes_by_recipe.get(recipe).copied().unwrap_or(0);
    }
    observer.close().await;

    println!("\n== chaos run (seed {}, {} s of faults)", config.seed, config.duration.as_secs());
    print_table(&reports);
    mix.print();
    let fault_total: u64 = faults.values().sum();
    println!(
        "faults injected: {fault_total} ({})",
        faults.iter().map(|(kind, count)| format!("{kind} {count}")).collect::<Vec<_>>().join(", ")
    );
    println!(
        "client pauses: overlap of belief {} (holders paused while the next came in: expected, no violation); \
         overlap of effect {} (must be 0)",
        reports.values().map(|report| report.belief_overlaps).sum::<u64>(),
        mix.store.values().map(|report| report.effect_overlaps.len()).sum::<usize>()
    );
    println!(
        "leaks: nodes left {}, ephemerals left {}, watches {} (baseline {}){}",
        leaks.nodes_by_recipe.values().sum::<u64>(),
        leaks.ephemerals,
        leaks.watches,
        baseline,
        if leaks.clean() { "" } else { " — LEAK" }
    );
    // The busy sessions must have met what they are there for: batched writes, and acquires
    // that gave up early (whose nodes the framework then deletes).
    let gave_up: u64 = reports.values().map(|report| report.gave_up).sum();
    let busy_met = config.processes(Kind::Busy) == 0
        || (busy.batches > 0 && (config.give_up_percent == 0 || gave_up > 0));
    if config.processes(Kind::Busy) > 0 {
        println!(
            "busy sessions: {} batches carrying {} creates and deletes ({} sent again one by one); {gave_up} acquires gave up early; \
             {} nodes deleted by the cleanup worker; {} nodes found again after a lost reply{}",
            busy.batches,
            busy.batched_writes,
            busy.fallbacks,
            busy.cleanups,
            busy.found_again,
            if busy_met { "" } else { " — NOT MET: the run did not see batches or give-ups" }
        );
    }
    let violations: u64 =
        reports.values().map(RecipeReport::total_violations).sum::<u64>() + mix.violations();
    let clean = violations == 0 && leaks.clean() && control_caught_all && busy_met;
    let wall = started.elapsed().as_secs();
    println!(
        "\nRESULT: {} — {} acquisitions, {} queue items, {violations} violations, control {control_violations} violations, wall time {wall} s",
        if clean { "CLEAN" } else { "FAILED" },
        reports.iter().filter(|(recipe, _)| !recipe.is_queue()).map(|(_, report)| report.acquisitions()).sum::<u64>(),
        reports.values().map(|report| report.items).sum::<u64>(),
    );
    let summary = json!({
        "mode": config.mode,
        "seed": config.seed,
        "wall_seconds": wall,
        "clean": clean,
        "recipes": reports.iter().map(|(recipe, report)| (recipe.name().to_owned(), report_json(report))).collect::<serde_json::Map<_, _>>(),
        "counters": counters_json(&mix.counters),
        "members": mix.members,
        "barriers": mix.barriers_json(),
        "caches": mix.caches_json(),
        "partitions": mix.partitions_json(),
        "store": mix.store_json(),
        "belief_overlaps": reports.values().map(|report| report.belief_overlaps).sum::<u64>(),
        "faults": faults,
        "partitionable": cluster.is_partitionable(),
        "busy_sessions": {
            "batches": busy.batches,
            "batched_writes": busy.batched_writes,
            "batch_fallbacks": busy.fallbacks,
            "cleanups": busy.cleanups,
            "found_again": busy.found_again,
            "gave_up": gave_up,
            "met": busy_met,
        },
        "leaks": { "nodes": leaks.nodes_by_recipe.values().sum::<u64>(), "ephemerals": leaks.ephemerals, "watches": leaks.watches, "watch_baseline": baseline, "details": leaks.details },
        "control": {
            "violations": control_violations,
            "every_recipe_caught": control_caught_all,
            "not_caught": blind,
            "counters": counters_json(&control_mix.counters),
            "members": control_mix.members,
            "barriers": control_mix.barriers_json(),
            "caches": control_mix.caches_json(),
            "partitions": control_mix.partitions_json(),
            "store": control_mix.store_json(),
            "recipes": control_reports.iter().map(|(recipe, report)| (recipe.name().to_owned(), report_json(report))).collect::<serde_json::Map<_, _>>(),
        },
    });
    let summary_path = config.out_dir.join("summary.json");
    let text = serde_json::to_string_pretty(&summary).map_err(|err| err.to_string())?;
    std::fs::write(&summary_path, &text)
        .map_err(|err| format!("writing {}: {err}", summary_path.display()))?;
    println!("summary: {}", summary_path.display());
    println!("SUMMARY-JSON {}", serde_json::to_string(&summary).map_err(|err| err.to_string())?);
    drop(cluster);
    Ok(clean)
}

impl<'a> Phase<'a> {
    /// The chaos phase (`locking`), or the negative control on roots of its own; each with its
    /// fenced store (unfenced in the control), logging to `<out dir>/<phase>/store.log`.
    async fn new(
        config: &'a RunConfig,
        launchers: &'a Launchers,
        locking: bool,
    ) -> Result<Phase<'a>, String> {
        let name = if locking { "chaos" } else { "control" };
        let dir = config.out_dir.join(name);
        std::fs::create_dir_all(&dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
        let store = FencedStore::start(dir.join("store.log"), locking).await?;
        let (lock_root, check_root, queue_root) = if locking {
            (LOCK_ROOT, CHECK_ROOT, QUEUE_ROOT)
        } else {
            (CONTROL_LOCK_ROOT, CONTROL_CHECK_ROOT, CONTROL_QUEUE_ROOT)
        };
        let paused = std::sync::Mutex::new(HashMap::new());
        Ok(Phase { config, launchers, locking, lock_root, check_root, queue_root, name, store, paused })
    }
}

impl Phase<'_> {
    /// The phase, in order: the workload's nodes and items, the contenders, the nemesis (faults,
    /// or the control's crashes) and the heal, the mix's settling against the servers, the
    /// queues' drain, an orderly stop, the checks.
    async fn execute(
        &self,
        cluster: &mut TestingCluster,
        observer: &Framework,
        rng: Option<&mut Rng>,
    ) -> Result<Outcome, String> {
        let config = self.config;
        let log_dir = config.out_dir.join(self.name);
        std::fs::create_dir_all(&log_dir).map_err(|err| err.to_string())?;
        let expected = self.prepare(observer, cluster).await?;
        let mut slots = self.start_slots(cluster, &log_dir).await?;
        let mut killed: HashMap<String, i64> = HashMap::new();
        let faults = self.schedule(rng, cluster, &mut slots, &log_dir, &mut killed).await?;
        let mut settled = Settled { members: None, caches: None, partitions: None, stranded: Vec::new() };
        if config.processes(Kind::Members) + config.processes(Kind::CuratorMembers) > 0 {
            settled.members = Some(self.settle_members(observer, &mut slots, &log_dir, &mut killed).await?);
        }
        if config.processes(Kind::Cache) + config.processes(Kind::CuratorCache) > 0 {
            settled.caches = Some(self.settle_caches(observer, &mut slots, &log_dir).await?);
        }
        if config.processes(Kind::Partition) > 0 && self.locking {
            settled.partitions = Some(self.settle_partitions(observer, &mut slots, &log_dir).await?);
        }
        if self.locking {
            settled.stranded = self.drain(observer, &mut slots, &log_dir, &mut killed).await;
        }
        for slot in &mut slots {
            self.stop(slot, &mut killed).await;
        }
        let run_end = epoch_micros();
        let (reports, busy, mix) =
            self.check(observer, &log_dir, &expected, &killed, run_end, settled).await?;
        drop(slots);
        Ok(Outcome { reports, faults, busy, mix })
    }
}
