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

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::json;
use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_testing::{CuratorProcess, FaultProxy, TestingCluster};

use crate::barriers::{check_barriers, BarrierReport};
use crate::caches::{self, Snapshot};
use crate::check::{busy_counts, check_queue, is_curator, is_rust};
use crate::check::{check_recipe, RecipeReport};
use crate::counters::{check_counter, Counter, CounterReport};
use crate::events::{epoch_micros, Event};
use crate::interop::{InteropArgs, Launchers};
use crate::linearizable::{check_linearizable, FinalRead, LinearReport};
use crate::members::{self, SeenNode};
use crate::partitions::{self, PartitionReport};
use crate::recipes::{Contenders, CounterValue, Recipe, CHECK_ROOT, LOCK_ROOT, QUEUE_ROOT};
use crate::rng::Rng;
use crate::tally::Counts;

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

/// How big a run is.
#[derive(Debug, Clone)]
pub struct RunConfig {
    /// The seed of the fault schedule (printed; pass it again to replay the same schedule).
    pub seed: u64,
    /// How long faults are injected.
    pub duration: Duration,
    /// How often the chaos phase prints a progress table (a soak: every ten minutes).
    pub report_every: Option<Duration>,
    /// How long the negative control runs.
    pub control_duration: Duration,
    /// Rust contender processes, and sessions per recipe in each.
    pub rust_processes: usize,
    pub rust_clients: usize,
    /// Curator contender processes, and sessions per recipe in each.
    pub curator_processes: usize,
    pub curator_clients: usize,
    /// Rust busy-session contender processes, their sessions, and the hold loops of every busy
    /// recipe (batch-0..3, zk-recipe, kazoo-lock) that each session runs at once.
    pub busy_processes: usize,
    pub busy_clients: usize,
    pub busy_loops: usize,
    /// The percentage of a busy session's acquires that give up early.
    pub give_up_percent: u64,
    /// ZooKeeper-recipe (Java) and kazoo contender processes, and sessions in each.
    pub zookeeper_recipe_processes: usize,
    pub kazoo_processes: usize,
    pub interop_clients: usize,
    /// Rust and Curator counter contender processes ([`crate::counters`]; 0: no counters), and
    /// sessions in each.
    pub counter_processes: usize,
    pub curator_counter_processes: usize,
    pub counter_clients: usize,
    /// Rust and Curator barrier member processes ([`crate::barriers`]; 0: none), and members
    /// (sessions) in each.
    pub barrier_processes: usize,
    pub curator_barrier_processes: usize,
    pub barrier_clients: usize,
    /// Cache processes ([`crate::caches`]; 0: none), and following sessions in each (each has
    /// one writer session besides).
    pub cache_processes: usize,
    pub cache_clients: usize,
    /// Curator cache processes (`CuratorMixChaos contend-cache`: one writer session and
    /// `curator_cache_clients` sessions following with a `CuratorCache`).
    pub curator_cache_processes: usize,
    pub curator_cache_clients: usize,
    /// Curator member processes (`CuratorMixChaos contend-members`), `member_clients` sessions each.
    pub curator_member_processes: usize,
    /// Member processes ([`crate::members`]; 0: none), and sessions in each.
    pub member_processes: usize,
    pub member_clients: usize,
    /// Partition processes ([`crate::partitions`]; 0: none), and workers (sessions) in each.
    pub partition_processes: usize,
    pub partition_workers: usize,
    /// The session timeout every contender asks for.
    pub session_timeout: Duration,
    /// How long each hold lasts besides its round trips.
    pub hold: Duration,
    /// Gap between faults (random in this range).
    pub fault_gap: (Duration, Duration),
    /// How late `lost()` may fire after the next holder came in before it counts as an overlap.
    pub lost_tolerance: Duration,
    /// The lock recipes (the table's rows): the per-recipe ones go to the Rust and Curator
    /// contenders, the busy ones to the busy-session contenders (and to the ZooKeeper-recipe and
    /// kazoo contenders: see [`Recipe::contenders`]).
    pub recipes: Vec<Recipe>,
    /// The queues, and the items put into each (half by Rust, half by Curator for the plain
    /// queue; the negative control puts a tenth).
    pub queues: Vec<Recipe>,
    pub queue_items: usize,
    /// How long a consumer processes one item.
    pub process: Duration,
    /// Where logs and the JSON summary go.
    pub out_dir: PathBuf,
    /// "quick" or "default", for the report.
    pub mode: String,
}

impl RunConfig {
    /// How many members each barrier round waits for (every Rust and Curator member).
    fn barrier_members(&self) -> usize {
        (self.processes(Kind::Barrier) + self.processes(Kind::CuratorBarrier)) * self.barrier_clients
    }

    /// The recipes `kind`'s processes take.
    fn recipes_of(&self, kind: Kind) -> Vec<Recipe> {
        let wanted = |recipe: &&Recipe| match kind {
            Kind::Rust | Kind::Curator => recipe.contenders() == Contenders::PerRecipe,
            Kind::Busy => recipe.contenders() != Contenders::PerRecipe,
            Kind::ZooKeeperRecipe => recipe.contenders() == Contenders::BusyAndZooKeeperRecipe,
            Kind::Kazoo => recipe.contenders() == Contenders::BusyAndKazoo,
            Kind::Counter
            | Kind::CuratorCounter
            | Kind::Members
            | Kind::Barrier
            | Kind::CuratorBarrier
            | Kind::Cache
            | Kind::CuratorCache
            | Kind::CuratorMembers
            | Kind::Partition => false,
        };
        self.recipes.iter().filter(wanted).copied().collect()
    }

    /// How many processes of `kind` the run starts (none when they would have nothing to do).
    fn processes(&self, kind: Kind) -> usize {
        let idle = self.recipes_of(kind).is_empty();
        match kind {
            Kind::Counter => self.counter_processes,
            Kind::CuratorCounter => self.curator_counter_processes,
            Kind::Members => self.member_processes,
            Kind::Barrier => self.barrier_processes,
            Kind::CuratorBarrier => self.curator_barrier_processes,
            Kind::Cache => self.cache_processes,
            Kind::Partition => self.partition_processes,
            Kind::CuratorCache => self.curator_cache_processes,
            Kind::CuratorMembers => self.curator_member_processes,
            Kind::Rust | Kind::Curator if idle && self.queues.is_empty() => 0,
            Kind::Rust => self.rust_processes,
            Kind::Curator => self.curator_processes,
            _ if idle => 0,
            Kind::Busy => self.busy_processes,
            Kind::ZooKeeperRecipe => self.zookeeper_recipe_processes,
            Kind::Kazoo => self.kazoo_processes,
        }
    }
}

/// The Rust consumers of `queue` that hold an item they have not processed yet, delivered
/// (`C`) at `since` (epoch µs) or later, with no ack sent (`W`) by the same consumer since. (A
/// Curator consumer killed while it holds one proves nothing: Curator logs only after
/// `consumeMessage` returned, so the checker cannot tell its loss from a delete that went
/// through.)
fn consumers_holding_an_item(events: &[Event], queue: Recipe, since: i64) -> Vec<&str> {
    let mut held: HashMap<(&str, &str), i64> = HashMap::new();
    for event in events.iter().filter(|event| event.recipe == queue && is_rust(&event.holder)) {
        let Some(item) = event.rest.first() else { continue };
        match event.kind {
            'C' => {
                held.insert((event.holder.as_str(), item.as_str()), event.micros);
            }
            'W' => {
                held.remove(&(event.holder.as_str(), item.as_str()));
            }
            _ => {}
        }
    }
    let mut holders: Vec<&str> = held
        .into_iter()
        .filter(|(_, delivered)| *delivered >= since)
        .map(|((holder, _), _)| holder)
        .collect();
    holders.sort_unstable();
    holders.dedup();
    holders
}

/// The rows of the negative control that no checker caught: a row without violations, or a
/// ZooKeeper-recipe or kazoo row on which one side's holders were never caught.
fn blind_rows(reports: &BTreeMap<Recipe, RecipeReport>) -> Vec<String> {
    let mut blind = Vec::new();
    for (recipe, report) in reports {
        if report.total_violations() == 0 {
            blind.push(recipe.name().to_owned());
            continue;
        }
        if matches!(recipe.contenders(), Contenders::BusyAndZooKeeperRecipe | Contenders::BusyAndKazoo) {
            if report.rust_violations.is_empty() {
                blind.push(format!("{} (rust holders)", recipe.name()));
            }
            if report.other_violations.is_empty() {
                blind.push(format!("{} (other holders)", recipe.name()));
            }
        }
    }
    blind
}

/// The kinds of fault, in the report's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fault {
    KillServer,
    KillLeader,
    PauseShort,
    PauseLong,
    Partition,
    KillRust,
    KillCurator,
    KillInterop,
    EnsembleRestart,
}

impl Fault {
    fn name(self) -> &'static str {
        match self {
            Fault::KillServer => "kill-server",
            Fault::KillLeader => "kill-leader",
            Fault::PauseShort => "pause-short",
            Fault::PauseLong => "pause-long",
            Fault::Partition => "partition",
            Fault::KillRust => "kill-rust-contender",
            Fault::KillCurator => "kill-curator-contender",
            Fault::KillInterop => "kill-interop-contender",
            Fault::EnsembleRestart => "ensemble-restart",
        }
    }

    /// Picks a fault by weight.
    fn pick(rng: &mut Rng) -> Fault {
        const WEIGHTED: [(Fault, u64); 9] = [
            (Fault::KillServer, 3),
            (Fault::KillLeader, 2),
            (Fault::PauseShort, 2),
            (Fault::PauseLong, 2),
            (Fault::Partition, 4),
            (Fault::KillRust, 2),
            (Fault::KillCurator, 2),
            (Fault::KillInterop, 2),
            (Fault::EnsembleRestart, 0),
        ];
        let total: u64 = WEIGHTED.iter().map(|(_, weight)| weight).sum();
        let mut roll = rng.u64(..total);
        for (fault, weight) in WEIGHTED {
            if roll < weight {
                return fault;
            }
            roll -= weight;
        }
        Fault::Partition
    }
}

/// What runs in a contender slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `zkr-chaos contend`: one session per recipe and client.
    Rust,
    /// The Curator driver's `chaos-contend`.
    Curator,
    /// `zkr-chaos contend --loops N`: busy sessions.
    Busy,
    /// `crates/chaos/java/ZkRecipeChaos.java`.
    ZooKeeperRecipe,
    /// `crates/chaos/python/kazoo_chaos.py`.
    Kazoo,
    /// `zkr-chaos count`: the counters ([`crate::counters`]).
    Counter,
    /// `crates/chaos/java/CuratorMixChaos.java contend-counters`.
    CuratorCounter,
    /// `zkr-chaos barrier`: double-barrier members ([`crate::barriers`]).
    Barrier,
    /// `crates/chaos/java/CuratorMixChaos.java contend-barrier`.
    CuratorBarrier,
    /// `zkr-chaos cache`: a writer and followers of one subtree ([`crate::caches`]).
    Cache,
    /// `zkr-chaos members`: persistent nodes and group membership ([`crate::members`]).
    Members,
    /// `zkr-chaos partition`: work partitioner workers ([`crate::partitions`]).
    Partition,
    /// `crates/chaos/java/CuratorMixChaos.java contend-cache`.
    CuratorCache,
    /// `crates/chaos/java/CuratorMixChaos.java contend-members`.
    CuratorMembers,
}

impl Kind {
    /// The first letter of its tags (and so of its holders' names).
    fn letter(self) -> char {
        match self {
            Kind::Rust => 'r',
            Kind::Curator => 'j',
            Kind::Busy => 'b',
            Kind::ZooKeeperRecipe => 'z',
            Kind::Kazoo => 'k',
            Kind::Counter => 'c',
            // The Curator mix processes' letters are upper-case (the mix checkers tell the sides
            // apart by it; `j` is the lock contenders').
            Kind::CuratorCounter => 'J',
            Kind::Barrier => 'g',
            Kind::CuratorBarrier => 'G',
            Kind::Cache => 'a',
            Kind::Members => 'm',
            Kind::Partition => 'p',
            Kind::CuratorCache => 'A',
            Kind::CuratorMembers => 'M',
        }
    }

    /// Whether it runs our recipes (`zkr-chaos contend`).
    fn is_rust(self) -> bool {
        matches!(
            self,
            Kind::Rust
                | Kind::Busy
                | Kind::Counter
                | Kind::Members
                | Kind::Barrier
                | Kind::Cache
                | Kind::Partition
        )
    }

    /// Whether it runs one of the recipes besides the locks and queues (counters, members,
    /// barriers, cache).
    fn is_mix(self) -> bool {
        matches!(
            self,
            Kind::Counter
                | Kind::CuratorCounter
                | Kind::Members
                | Kind::Barrier
                | Kind::CuratorBarrier
                | Kind::Cache
                | Kind::CuratorCache
                | Kind::CuratorMembers
                | Kind::Partition
        )
    }

    /// Whether it runs Curator.
    fn is_curator(self) -> bool {
        matches!(
            self,
            Kind::Curator
                | Kind::CuratorCounter
                | Kind::CuratorBarrier
                | Kind::CuratorCache
                | Kind::CuratorMembers
        )
    }
}

/// A contender process: ours, kazoo's and the ZooKeeper recipe's are driven alike (`stop` on
/// stdin); Curator's through its driver.
enum Running {
    Child { child: Box<Child>, stdin: Option<ChildStdin> },
    Curator(Box<CuratorProcess>),
}

/// One contender slot: its proxies (one per member) outlive its incarnations.
struct Slot {
    kind: Kind,
    index: usize,
    proxies: Vec<FaultProxy>,
    running: Option<Running>,
    incarnation: u32,
    /// The current incarnation's tag (holder ids start with it).
    tag: String,
}

/// An item a Curator consumer's live session held the lock of without working on it.
struct StrandedLock {
    queue: Recipe,
    /// The item node's name.
    item: String,
    /// The lock node's ephemeral owner.
    owner: i64,
    /// The Curator consumer (`<tag>-q`) that logged that session as its own.
    consumer: String,
}

struct Phase<'a> {
    config: &'a RunConfig,
    launchers: &'a Launchers,
    locking: bool,
    lock_root: &'static str,
    check_root: &'static str,
    queue_root: &'static str,
    name: &'static str,
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
    let mut cluster = TestingCluster::builder()
        .size(3)
        .min_session_timeout(Duration::from_secs(1))
        .start()
        .await
        .map_err(|err| format!("starting the ensemble: {err}"))?;
    println!("ensemble: {}", cluster.connect_string());
    let observer = Framework::builder(cluster.connect_string())
        .session_timeout(Duration::from_secs(30))
        .start()
        .map_err(|err| err.to_string())?;
    observer.block_until_connected(STEP).await.map_err(|err| format!("observer: {err}"))?;
    let baseline = watch_total(&cluster).await;

    // The negative control: the same contenders and checkers with locking off, no faults.
    let control = Phase {
        config: &config,
        launchers: &launchers,
        locking: false,
        lock_root: CONTROL_LOCK_ROOT,
        check_root: CONTROL_CHECK_ROOT,
        queue_root: CONTROL_QUEUE_ROOT,
        name: "control",
    };
    let (control_reports, _, _, control_mix) = control.execute(&mut cluster, &observer, None).await?;
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

    let chaos = Phase {
        config: &config,
        launchers: &launchers,
        locking: true,
        lock_root: LOCK_ROOT,
        check_root: CHECK_ROOT,
        queue_root: QUEUE_ROOT,
        name: "chaos",
    };
    let mut rng = Rng::with_seed(config.seed);
    let (reports, faults, busy, mix) = chaos.execute(&mut cluster, &observer, Some(&mut rng)).await?;

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
        "faults": faults,
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

impl Phase<'_> {
    /// Creates the checkers' nodes, runs the contenders (with faults when `rng` is given) for
    /// the phase's duration, stops them and checks their logs.
    async fn execute(
        &self,
        cluster: &mut TestingCluster,
        observer: &Framework,
        mut rng: Option<&mut Rng>,
    ) -> Result<(BTreeMap<Recipe, RecipeReport>, BTreeMap<String, u64>, Counts, Mix), String> {
        let config = self.config;
        if config.processes(Kind::Cache) + config.processes(Kind::CuratorCache) > 0 {
            create_persistent(observer, &cache_root(self.check_root)).await?;
        }
        if config.processes(Kind::Counter) + config.processes(Kind::CuratorCounter) > 0 {
            create_persistent(observer, self.check_root).await?;
            for counter in Counter::ALL {
                let path = counter.path(self.check_root);
                match observer
                    .create(&path)
                    .data(counter.zero())
                    .mode(CreateMode::Persistent)
                    .deadline(Deadline::after(STEP))
                    .await
                {
                    Ok(_) => {}
                    Err(err) => return Err(format!("creating {path}: {err}")),
                }
            }
        }
        for recipe in &config.recipes {
            create_persistent(observer, &recipe.guard_dir(self.check_root)).await?;
            create_persistent(observer, &recipe.counter_path(self.check_root)).await?;
        }
        let log_dir = config.out_dir.join(self.name);
        std::fs::create_dir_all(&log_dir).map_err(|err| err.to_string())?;
        let items = if self.locking { config.queue_items } else { config.queue_items / 10 };
        let mut expected = BTreeMap::new();
        for queue in &config.queues {
            expected.insert(*queue, self.produce(observer, cluster, *queue, items).await?);
        }
        let mut slots = Vec::new();
        for kind in [
            Kind::Rust,
            Kind::Curator,
            Kind::Busy,
            Kind::ZooKeeperRecipe,
            Kind::Kazoo,
            Kind::Counter,
            Kind::CuratorCounter,
            Kind::Members,
            Kind::Barrier,
            Kind::CuratorBarrier,
            Kind::Cache,
            Kind::CuratorCache,
            Kind::CuratorMembers,
            Kind::Partition,
        ] {
            for index in 0..config.processes(kind) {
                let mut proxies = Vec::new();
                for member in cluster.members() {
                    proxies.push(FaultProxy::start(member.address()).await.map_err(|err| err.to_string())?);
                }
                if kind == Kind::Cache && !self.locking {
                    // The cache control: followers whose notifications go missing without a reset.
                    let seed = config.seed ^ index as u64;
                    for proxy in &proxies {
                        proxy
                            .drop_watch_events_seeded(caches::CONTROL_DROPPED_WATCH_EVENTS, seed)
                            .map_err(|err| err.to_string())?;
                    }
                }
                slots.push(Slot { kind, index, proxies, running: None, incarnation: 0, tag: String::new() });
            }
        }
        for slot in &mut slots {
            self.spawn(slot, &log_dir)?;
        }
        let mut killed: HashMap<String, i64> = HashMap::new();
        let mut faults: BTreeMap<String, u64> = BTreeMap::new();
        let duration = if rng.is_some() { config.duration } else { config.control_duration };
        let end = Instant::now() + duration;
        let mut ensemble_restarted = false;
        let phase_started = Instant::now();
        let report_every = config.report_every.filter(|_| rng.is_some());
        let mut next_report = report_every.map(|every| phase_started + every);
        // Each progress row's Rust processes' resident sets and descriptors, for the trend at the end.
        let mut usage: Vec<UsageSample> = Vec::new();
        if report_every.is_some() {
            print_progress_header();
        }
        while Instant::now() < end {
            if let (Some(at), Some(every)) = (next_report, report_every) {
                if Instant::now() >= at {
                    let elapsed = phase_started.elapsed();
                    for (tag, rss_kb, fds) in
                        self.print_progress(cluster, &slots, &log_dir, &faults, elapsed).await
                    {
                        usage.push(UsageSample { elapsed, tag, rss_kb, fds });
                    }
                    next_report = Some(at + every);
                }
            }
            let Some(rng) = rng.as_deref_mut() else {
                if !config.queues.is_empty() {
                    // Consumers without a lock path (at most once) crashing lose what they hold.
                    // They crash once every queue has a consumer at work on an item (delivered,
                    // not yet processed: on a loaded machine the processes may take longer than
                    // half the phase to start, and a crash between two items loses nothing),
                    // bounded by the phase's length. An item counts only if it was delivered in
                    // the last half of its processing time (an older one may be acked before its
                    // process is killed: the kills take turns), and its process is killed first.
                    tokio::time::sleep(duration / 2).await;
                    let fresh = config.process.as_micros() as i64 / 2;
                    let mut holding = Vec::new();
                    while Instant::now() < end + duration {
                        let since = epoch_micros() - fresh;
                        let events = read_events(&log_dir);
                        let held: Vec<Vec<&str>> = config
                            .queues
                            .iter()
                            .map(|queue| consumers_holding_an_item(&events, *queue, since))
                            .collect();
                        if held.iter().all(|holders| !holders.is_empty()) {
                            holding = held.concat().into_iter().map(str::to_owned).collect();
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    let hosts = |slot: &Slot| {
                        holding.iter().any(|holder| holder.starts_with(&format!("{}-", slot.tag)))
                    };
                    let mut order: Vec<usize> =
                        (0..slots.len()).filter(|index| !slots[*index].kind.is_mix()).collect();
                    order.sort_by_key(|index| !hosts(&slots[*index]));
                    for index in order {
                        self.kill(&mut slots[index], &mut killed).await;
                        self.spawn(&mut slots[index], &log_dir)?;
                    }
                }
                tokio::time::sleep(end.saturating_duration_since(Instant::now())).await;
                break;
            };
            let (shortest_gap, longest_gap) = config.fault_gap;
            let gap = rng.u64(shortest_gap.as_millis() as u64..=longest_gap.as_millis() as u64);
            tokio::time::sleep(Duration::from_millis(gap)).await;
            if Instant::now() >= end {
                break;
            }
            // One whole-ensemble restart per run, in its middle; the rest by weight.
            let fault = if !ensemble_restarted && Instant::now() + duration / 2 >= end {
                ensemble_restarted = true;
                Fault::EnsembleRestart
            } else {
                Fault::pick(rng)
            };
            let injected_at = crate::events::epoch_micros();
            let detail = self.inject(fault, rng, cluster, &mut slots, &log_dir, &mut killed).await?;
            println!(
                "[{:>6.1}s] fault {}: {detail}",
                (duration - end.saturating_duration_since(Instant::now())).as_secs_f64(),
                fault.name()
            );
            record_fault(&log_dir, injected_at, fault.name(), &detail);
            *faults.entry(fault.name().to_owned()).or_default() += 1;
        }
        if report_every.is_some() {
            print_usage_trend(&usage, duration / 2);
        }
        // Everything back up, then an orderly stop.
        for slot in &slots {
            for proxy in &slot.proxies {
                proxy.heal();
            }
        }
        for index in 0..cluster.size() {
            if !cluster.members()[index].is_running() {
                cluster.restart(index).await.map_err(|err| format!("restarting server {index}: {err}"))?;
            }
        }
        cluster.wait_until_serving(STEP).await.map_err(|err| format!("ensemble after the faults: {err}"))?;
        let mut members = None;
        if config.processes(Kind::Members) + config.processes(Kind::CuratorMembers) > 0 {
            members = Some(self.settle_members(observer, &mut slots, &log_dir, &mut killed).await?);
        }
        let mut caches = None;
        if config.processes(Kind::Cache) + config.processes(Kind::CuratorCache) > 0 {
            caches = Some(self.settle_caches(observer, &mut slots, &log_dir).await?);
        }
        let mut partitions_settled = None;
        if config.processes(Kind::Partition) > 0 && self.locking {
            partitions_settled = Some(self.settle_partitions(observer, &mut slots, &log_dir).await?);
        }
        let mut stranded = Vec::new();
        if self.locking {
            stranded = self.drain(observer, &mut slots, &log_dir, &mut killed).await;
        }
        for slot in &mut slots {
            self.stop(slot, &mut killed).await;
        }
        let run_end = epoch_micros();
        let events = read_events(&log_dir);
        let mut counters = BTreeMap::new();
        if config.processes(Kind::Counter) + config.processes(Kind::CuratorCounter) > 0 {
            let text = read_logs(&log_dir, "counters-");
            for counter in Counter::ALL {
                let invoked = epoch_micros();
                let value = observer
                    .get_data(&counter.path(self.check_root), Deadline::after(STEP))
                    .await
                    .ok()
                    .and_then(|node| counter.decode(&node.data));
                let read = value.map(|value| FinalRead { value, invoked, completed: epoch_micros() });
                let report = check_counter(counter, text.lines(), value);
                counters.insert(
                    counter,
                    report.with_linearizability(check_linearizable(counter, text.lines(), read)),
                );
            }
        }
        let partitions = (config.processes(Kind::Partition) > 0).then(|| {
            let text = read_logs(&log_dir, "partition-");
            let mut report = partitions::check_partitions(&text, &killed, run_end);
            if let Some((settled_ms, violations)) = partitions_settled {
                report.settled_ms = settled_ms;
                report.violations.extend(violations);
            }
            report
        });
        let mut reports = BTreeMap::new();
        for recipe in &config.recipes {
            let counter = observer
                .get_data(&recipe.counter_path(self.check_root), Deadline::after(STEP))
                .await
                .ok()
                .and_then(|node| CounterValue::parse(&node.data));
            let tolerance = config.lost_tolerance.as_micros() as i64;
            reports.insert(
                *recipe,
                check_recipe(*recipe, &events, &killed, run_end, tolerance, counter.as_ref()),
            );
        }
        for (queue, items) in &expected {
            let path = queue.lock_path(self.queue_root);
            let left = children(observer, &path).await.len()
                + children(observer, &queue.queue_lock_path(self.queue_root)).await.len();
            let mut report = check_queue(*queue, &events, items, &killed, left as u64);
            report.curator_stranded_locks =
                stranded.iter().filter(|lock| lock.queue == *queue).count() as u64;
            reports.insert(*queue, report);
        }
        for lock in &stranded {
            println!(
                "finding about Curator: {} item {} stayed locked by the live session {:#x} of Curator's consumer {}, \
                 which was not working on it (its lock create, retried after a connection loss, found its own node \
                 and took it for another consumer's); that consumer was stopped, and the item was then {}",
                lock.queue.name(),
                lock.item,
                lock.owner,
                lock.consumer,
                if reports[&lock.queue].leaked_nodes == 0 { "taken by the others" } else { "still not taken" }
            );
        }
        let _ = observer
            .delete(self.queue_root)
            .deleting_children_if_needed()
            .quietly()
            .deadline(Deadline::after(STEP))
            .await;
        drop(slots);
        let barriers = (config.barrier_members() > 0)
            .then(|| check_barriers(read_logs(&log_dir, "barrier-").lines(), config.barrier_members()));
        Ok((reports, faults, busy_counts(&events), Mix { counters, members, barriers, caches, partitions }))
    }

    /// Puts `items` items into `queue` before the contenders start: the plain queue half from
    /// Rust (`r<n>`) and half from Curator (`j<n>`), the priority queue from Rust with priorities
    /// -3..=3. Puts made before any fault are never ambiguous, so each item is put exactly once.
    async fn produce(
        &self,
        observer: &Framework,
        cluster: &TestingCluster,
        queue: Recipe,
        items: usize,
    ) -> Result<Vec<String>, String> {
        let path = queue.lock_path(self.queue_root);
        let builder = zk_recipes_queue::DistributedQueue::builder(observer, &path)
            .serializer(zk_recipes_queue::Utf8Serializer);
        let curator_items = if queue == Recipe::Queue { items / 2 } else { 0 };
        let rust_items: Vec<String> = (0..items - curator_items).map(|n| format!("r{n}")).collect();
        if queue == Recipe::PriorityQueue {
            let priority_queue = builder.build_priority().map_err(|err| err.to_string())?;
            for (n, item) in rust_items.iter().enumerate() {
                priority_queue
                    .put(item, (n % 7) as i32 - 3)
                    .await
                    .map_err(|err| format!("putting {item}: {err}"))?;
            }
        } else {
            let plain = builder.build().map_err(|err| err.to_string())?;
            for item in &rust_items {
                plain.put(item).await.map_err(|err| format!("putting {item}: {err}"))?;
            }
        }
        let mut all = rust_items;
        if curator_items > 0 {
            let mut producer = CuratorProcess::spawn([
                "queue-produce".to_owned(),
                cluster.connect_string(),
                path.clone(),
                curator_items.to_string(),
                "1".to_owned(),
                "j".to_owned(),
            ])
            .map_err(|err| format!("spawning the Curator producer: {err}"))?;
            producer
                .expect_line("RESULT", STEP * 3)
                .await
                .map_err(|err| format!("Curator producer: {err}"))?;
            all.extend((0..curator_items).map(|n| format!("j{n}")));
        }
        Ok(all)
    }

    /// Waits until every queue is empty (the consumers acked everything), up to
    /// [`DRAIN_TIMEOUT`]; what is left is reported by the checker.
    ///
    /// A queue that stops moving for [`STALL`] with items left is looked into: an item whose lock
    /// node belongs to the live session of a Curator consumer (from its `S` events) is a lock that
    /// consumer holds without working on it. Curator 5.4's lock-safe consumer creates its lock
    /// node with a plain create; retried after a connection loss, the create finds the node its
    /// first try made, takes it for another consumer's and skips the item, and the node stays
    /// until that session ends. Nothing else can take the item meanwhile, so that Curator
    /// contender is stopped (its session ends, its locks go) and the drain goes on: our consumers
    /// must then take the item, or it is reported `left`.
    async fn drain(
        &self,
        observer: &Framework,
        slots: &mut [Slot],
        log_dir: &Path,
        killed: &mut HashMap<String, i64>,
    ) -> Vec<StrandedLock> {
        let deadline = Instant::now() + DRAIN_TIMEOUT;
        let mut stranded = Vec::new();
        for queue in &self.config.queues {
            let path = queue.lock_path(self.queue_root);
            let mut last = (usize::MAX, Instant::now());
            loop {
                let left = children(observer, &path).await;
                if left.is_empty() || Instant::now() >= deadline {
                    break;
                }
                if left.len() != last.0 {
                    last = (left.len(), Instant::now());
                } else if last.1.elapsed() >= STALL {
                    last.1 = Instant::now();
                    for lock in self.stranded_locks(observer, *queue, &left, log_dir).await {
                        if stranded
                            .iter()
                            .any(|seen: &StrandedLock| seen.queue == lock.queue && seen.item == lock.item)
                        {
                            continue;
                        }
                        if let Some(slot) = slots.iter_mut().find(|slot| {
                            slot.kind == Kind::Curator && lock.consumer.starts_with(&format!("{}-", slot.tag))
                        }) {
                            println!(
                                "drain: {} item {} is locked by the live session {:#x} of Curator's consumer {}; stopping {}",
                                queue.name(),
                                lock.item,
                                lock.owner,
                                lock.consumer,
                                slot.tag
                            );
                            self.stop(slot, killed).await;
                        }
                        stranded.push(lock);
                    }
                }
                tokio::time::sleep(Duration::from_millis(250)).await;
            }
        }
        stranded
    }

    /// The items of `left` whose lock node belongs to a session a Curator consumer of this run
    /// logged as its own.
    async fn stranded_locks(
        &self,
        observer: &Framework,
        queue: Recipe,
        left: &[String],
        log_dir: &Path,
    ) -> Vec<StrandedLock> {
        let curator_sessions: HashMap<i64, String> = read_events(log_dir)
            .into_iter()
            .filter(|event| event.kind == 'S' && is_curator(&event.holder))
            .filter_map(|event| Some((event.rest.first()?.parse().ok()?, event.holder)))
            .collect();
        let lock_dir = queue.queue_lock_path(self.queue_root);
        let mut found = Vec::new();
        for item in left {
            let lock_node = format!("{lock_dir}/{item}");
            let Ok(Some(stat)) = observer.exists(&lock_node, Deadline::after(STEP)).await else { continue };
            if let Some(consumer) = curator_sessions.get(&stat.ephemeral_owner) {
                found.push(StrandedLock {
                    queue,
                    item: item.clone(),
                    owner: stat.ephemeral_owner,
                    consumer: consumer.clone(),
                });
            }
        }
        found
    }

    fn spawn(&self, slot: &mut Slot, log_dir: &Path) -> Result<(), String> {
        let config = self.config;
        slot.incarnation += 1;
        slot.tag = format!("{}{}x{}", slot.kind.letter(), slot.index, slot.incarnation);
        let log = log_dir.join(format!("events-{}.log", slot.tag));
        let connect = slot.proxies.iter().map(FaultProxy::connect_string).collect::<Vec<_>>().join(",");
        let recipes = config.recipes_of(slot.kind);
        let recipe_names = recipes.iter().map(|recipe| recipe.name()).collect::<Vec<_>>().join(",");
        let locking = if self.locking { "on" } else { "off" };
        let hold_ms = config.hold.as_millis().to_string();
        let timeout_ms = config.session_timeout.as_millis().to_string();
        // Busy sessions consume no queue: the per-recipe contenders do.
        let queues = if slot.kind == Kind::Busy { "-".to_owned() } else { queues_arg(&config.queues) };
        let stderr = || {
            std::fs::File::create(log_dir.join(format!("stderr-{}.log", slot.tag)))
                .map_err(|err| err.to_string())
        };
        let mut command = match slot.kind {
            Kind::Cache => {
                let log = log_dir.join(format!("cache-{}.log", slot.tag));
                let exe = std::env::current_exe().map_err(|err| err.to_string())?;
                let mut command = Command::new(exe);
                command
                    .args(["cache", "--connect", &connect, "--clients", &config.cache_clients.to_string()])
                    .args(["--tag", &slot.tag, "--root", &cache_root(self.check_root)])
                    .arg("--log")
                    .arg(&log)
                    .args(["--session-timeout-ms", &timeout_ms])
                    .args((!self.locking).then_some("--drop-events"))
                    .stdin(Stdio::piped())
                    .kill_on_drop(true);
                command
            }
            Kind::CuratorCache | Kind::CuratorMembers => {
                let (mode, log, clients, root) = if slot.kind == Kind::CuratorCache {
                    ("contend-cache", "cache", config.curator_cache_clients, cache_root(self.check_root))
                } else {
                    ("contend-members", "members", config.member_clients, members_root(self.check_root))
                };
                self.launchers.curator_counters(&[
                    mode.to_owned(),
                    connect.clone(),
                    clients.to_string(),
                    slot.tag.clone(),
                    log_dir.join(format!("{log}-{}.log", slot.tag)).display().to_string(),
                    root,
                    timeout_ms.clone(),
                ])?
            }
            Kind::Barrier | Kind::CuratorBarrier => {
                let log = log_dir.join(format!("barrier-{}.log", slot.tag));
                let clients = config.barrier_clients.to_string();
                let members = config.barrier_members().to_string();
                let root = barrier_root(self.check_root);
                if slot.kind == Kind::CuratorBarrier {
                    self.launchers.curator_counters(&[
                        "contend-barrier".to_owned(),
                        connect.clone(),
                        clients,
                        slot.tag.clone(),
                        log.display().to_string(),
                        root,
                        members,
                        timeout_ms.clone(),
                    ])?
                } else {
                    let exe = std::env::current_exe().map_err(|err| err.to_string())?;
                    let mut command = Command::new(exe);
                    command
                        .args(["barrier", "--connect", &connect, "--clients", &clients, "--tag", &slot.tag])
                        .arg("--log")
                        .arg(&log)
                        .args(["--root", &root, "--member-count", &members])
                        .args(["--session-timeout-ms", &timeout_ms])
                        .args((!self.locking).then_some("--no-wait"))
                        .stdin(Stdio::piped())
                        .kill_on_drop(true);
                    command
                }
            }
            Kind::Partition => {
                let log = log_dir.join(format!("partition-{}.log", slot.tag));
                let exe = std::env::current_exe().map_err(|err| err.to_string())?;
                let mut command = Command::new(exe);
                command
                    .args([
                        "partition",
                        "--connect",
                        &connect,
                        "--workers",
                        &config.partition_workers.to_string(),
                    ])
                    .args(["--tag", &slot.tag, "--root", &partition_root(self.check_root)])
                    .arg("--log")
                    .arg(&log)
                    .args(["--session-timeout-ms", &timeout_ms])
                    .args((!self.locking).then_some("--no-lock"))
                    .stdin(Stdio::piped())
                    .kill_on_drop(true);
                command
            }
            Kind::Members => {
                let log = log_dir.join(format!("members-{}.log", slot.tag));
                let exe = std::env::current_exe().map_err(|err| err.to_string())?;
                let mut command = Command::new(exe);
                command
                    .args(["members", "--connect", &connect, "--clients", &config.member_clients.to_string()])
                    .args(["--tag", &slot.tag, "--root", &members_root(self.check_root)])
                    .arg("--log")
                    .arg(&log)
                    .args(["--session-timeout-ms", &timeout_ms])
                    .args((!self.locking).then_some("--no-recreate"))
                    .stdin(Stdio::piped())
                    .kill_on_drop(true);
                command
            }
            Kind::Counter | Kind::CuratorCounter => {
                let log = log_dir.join(format!("counters-{}.log", slot.tag));
                let clients = config.counter_clients.to_string();
                if slot.kind == Kind::CuratorCounter {
                    self.launchers.curator_counters(&[
                        "contend-counters".to_owned(),
                        connect.clone(),
                        clients,
                        slot.tag.clone(),
                        log.display().to_string(),
                        self.check_root.to_owned(),
                        timeout_ms.clone(),
                    ])?
                } else {
                    let exe = std::env::current_exe().map_err(|err| err.to_string())?;
                    let mut command = Command::new(exe);
                    command
                        .args(["count", "--connect", &connect, "--clients", &clients, "--tag", &slot.tag])
                        .arg("--log")
                        .arg(&log)
                        .args(["--check-root", self.check_root, "--session-timeout-ms", &timeout_ms])
                        .args((!self.locking).then_some("--blind"))
                        .stdin(Stdio::piped())
                        .kill_on_drop(true);
                    command
                }
            }
            Kind::Curator => {
                let clients = config.curator_clients.to_string();
                let process = CuratorProcess::spawn([
                    "--session-timeout-ms",
                    &timeout_ms,
                    "chaos-contend",
                    &connect,
                    &recipe_names,
                    &clients,
                    &slot.tag,
                    &log.display().to_string(),
                    locking,
                    self.lock_root,
                    self.check_root,
                    &hold_ms,
                    &queues,
                    self.queue_root,
                    &config.process.as_millis().to_string(),
                ])
                .map_err(|err| format!("spawning a Curator contender: {err}"))?;
                slot.running = Some(Running::Curator(Box::new(process)));
                return Ok(());
            }
            Kind::Rust | Kind::Busy => {
                let exe = std::env::current_exe().map_err(|err| err.to_string())?;
                let (clients, loops, give_up) = if slot.kind == Kind::Busy {
                    (config.busy_clients, config.busy_loops, config.give_up_percent)
                } else {
                    (config.rust_clients, 0, 0)
                };
                let mut command = Command::new(exe);
                command
                    .args(["contend", "--connect", &connect, "--recipes", &recipe_names])
                    .args(["--clients", &clients.to_string(), "--tag", &slot.tag])
                    .arg("--log")
                    .arg(&log)
                    .args([
                        "--session-timeout-ms",
                        &timeout_ms,
                        "--locking",
                        locking,
                        "--lock-root",
                        self.lock_root,
                    ])
                    .args(["--check-root", self.check_root, "--hold-ms", &hold_ms])
                    .args(["--queues", &queues, "--queue-root", self.queue_root])
                    .args(["--process-ms", &config.process.as_millis().to_string()])
                    .args(["--loops", &loops.to_string(), "--give-up-percent", &give_up.to_string()])
                    .stdin(Stdio::piped())
                    .kill_on_drop(true);
                command
            }
            Kind::ZooKeeperRecipe | Kind::Kazoo => {
                let Some(recipe) = recipes.first() else { return Err(format!("{} has no recipe", slot.tag)) };
                let args = InteropArgs {
                    connect: &connect,
                    recipe: recipe.name(),
                    clients: config.interop_clients,
                    tag: &slot.tag,
                    log: &log,
                    locking: self.locking,
                    lock_root: self.lock_root,
                    check_root: self.check_root,
                    hold_ms: config.hold.as_millis(),
                    session_timeout_ms: config.session_timeout.as_millis(),
                };
                if slot.kind == Kind::Kazoo {
                    self.launchers.kazoo(&args)?
                } else {
                    self.launchers.zookeeper_recipe(&args)?
                }
            }
        };
        let mut child = command
            .stdout(Stdio::null())
            .stderr(stderr()?)
            .spawn()
            .map_err(|err| format!("spawning contender {}: {err}", slot.tag))?;
        let stdin = child.stdin.take();
        slot.running = Some(Running::Child { child: Box::new(child), stdin });
        Ok(())
    }

    /// SIGKILLs a slot's process (a crash) and notes when. A process that had already exited by
    /// itself is reported with its exit status, and noted as ended at its last logged event: its
    /// holds ended when it died, not when we came to kill it.
    async fn kill(&self, slot: &mut Slot, killed: &mut HashMap<String, i64>) {
        match slot.running.take() {
            Some(Running::Child { mut child, .. }) => {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = self.config.out_dir.join(self.name).join(format!("events-{}.log", slot.tag));
                    let died_at = last_event_micros(&log).unwrap_or_else(epoch_micros);
                    println!(
                        "warning: contender {} had exited by itself ({status}); its holds end at its last \
                         event",
                        slot.tag
                    );
                    killed.insert(slot.tag.clone(), died_at);
                    return;
                }
                if slot.kind.is_rust() {
                    self.dump_if_silent(slot, child.id()).await;
                }
                let _ = child.start_kill();
                let _ = tokio::time::timeout(STEP, child.wait()).await;
            }
            Some(Running::Curator(mut process)) => {
                let _ = process.kill();
            }
            None => {}
        }
        killed.insert(slot.tag.clone(), epoch_micros());
    }

    /// A Rust contender whose event log has been silent for [`SILENT`] before we kill it has made
    /// no progress on any of its sessions (a lock acquire alone times out after 20 s): its threads'
    /// stacks go to `stack-<tag>.txt` (gdb, if installed) for the report.
    async fn dump_if_silent(&self, slot: &Slot, pid: Option<u32>) {
        let log = self.config.out_dir.join(self.name).join(format!("events-{}.log", slot.tag));
        let silent = std::fs::metadata(&log)
            .and_then(|meta| meta.modified())
            .ok()
            .and_then(|modified| modified.elapsed().ok())
            .unwrap_or_default();
        let Some(pid) = pid.filter(|_| silent >= SILENT) else { return };
        let stacks = self.config.out_dir.join(self.name).join(format!("stack-{}.txt", slot.tag));
        println!(
            "warning: contender {} (pid {pid}) logged nothing for {} s; stacks: {}",
            slot.tag,
            silent.as_secs(),
            stacks.display()
        );
        // Before gdb attaches (which stops every thread): a process stopped by a signal shows `T`
        // in every thread, a deadlock `S` with a futex wait channel, a starved one `R`.
        let states = thread_states(pid);
        println!("warning: contender {} threads before gdb: {}", slot.tag, states.replace('\n', "; "));
        let _ = std::fs::write(&stacks, format!("{states}\n"));
        let dump = Command::new("gdb")
            .args(["-p", &pid.to_string(), "-batch", "-ex", "thread apply all bt"])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output();
        if let Ok(Ok(output)) = tokio::time::timeout(Duration::from_secs(60), dump).await {
            let _ = std::fs::write(&stacks, [format!("{states}\n").into_bytes(), output.stdout].concat());
        }
    }

    /// The members' last act: one member process of each side (ours, Curator's) is SIGKILLed
    /// (and started again), and their nodes must be gone within the session timeout (+2 s for the server's expiry tick); then
    /// every member node is deleted (as a lost session's would be), the members freeze their
    /// data, and within [`members::converge_bound`] each live member's nodes must be back exactly
    /// once with its frozen data, with nothing left of a dead member.
    async fn settle_members(
        &self,
        observer: &Framework,
        slots: &mut [Slot],
        log_dir: &Path,
        killed: &mut HashMap<String, i64>,
    ) -> Result<Vec<String>, String> {
        let config = self.config;
        let root = members_root(self.check_root);
        let mut violations = Vec::new();
        let holders_of = |tag: &str| {
            (0..config.member_clients).map(|client| format!("{tag}-{client}")).collect::<Vec<_>>()
        };
        // One process of each side (ours, Curator's), killed together.
        let mut dead = Vec::new();
        let killed_at = Instant::now();
        for kind in [Kind::Members, Kind::CuratorMembers] {
            if let Some(slot) = slots.iter_mut().find(|slot| slot.kind == kind) {
                dead.extend(holders_of(&slot.tag));
                self.kill(slot, killed).await;
                self.spawn(slot, log_dir)?;
            }
        }
        if !dead.is_empty() {
            let bound = config.session_timeout + Duration::from_secs(2);
            loop {
                let left: Vec<SeenNode> = member_nodes(observer, &root)
                    .await
                    .into_iter()
                    .filter(|node| {
                        dead.iter().any(|holder| members::is_holders(&node.dir, &node.name, holder))
                    })
                    .collect();
                if left.is_empty() {
                    println!(
                        "members: the killed members' nodes ({}) went {} ms after their kill",
                        dead.join(", "),
                        killed_at.elapsed().as_millis()
                    );
                    break;
                }
                if killed_at.elapsed() >= bound {
                    violations.extend(left.iter().map(|node| {
                        format!(
                            "outlived its session: {}/{} of a killed member, {bound:?} after the kill",
                            node.dir, node.name
                        )
                    }));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        // Every member node deleted, as a lost session's would be.
        for node in member_nodes(observer, &root).await {
            let _ = observer
                .delete(&format!("{root}/{}/{}", node.dir, node.name))
                .quietly()
                .deadline(Deadline::after(STEP))
                .await;
        }
        let mut live_tags = Vec::new();
        let member_slot = |slot: &&mut Slot| matches!(slot.kind, Kind::Members | Kind::CuratorMembers);
        for slot in slots.iter_mut().filter(member_slot) {
            if let Some(Running::Child { stdin: Some(stdin), .. }) = slot.running.as_mut() {
                let _ = stdin.write_all(b"freeze\n").await;
                let _ = stdin.flush().await;
                live_tags.push(slot.tag.clone());
            }
        }
        let converge = members::converge_bound(config.session_timeout);
        let started = Instant::now();
        let wanted: Vec<String> = live_tags.iter().flat_map(|tag| holders_of(tag)).collect();
        let live = loop {
            let frozen = members::frozen(&read_logs(log_dir, "members-"));
            let live: BTreeMap<String, u64> =
                frozen.into_iter().filter(|(holder, _)| wanted.contains(holder)).collect();
            if live.len() == wanted.len() {
                break live;
            }
            if started.elapsed() >= STEP {
                violations.push(format!("members did not freeze: {} of {}", live.len(), wanted.len()));
                break live;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        loop {
            let found = members::check_members(&live, &member_nodes(observer, &root).await);
            if found.is_empty() {
                println!(
                    "members: {} live members' nodes converged {} ms after the freeze (bound {} ms)",
                    live.len(),
                    started.elapsed().as_millis(),
                    converge.as_millis()
                );
                break;
            }
            if started.elapsed() >= converge {
                violations.extend(found);
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(violations)
    }

    /// The caches' check: the writers freeze, the server's tree is read and written to a file,
    /// and every live follower (its `Cache` and its replaying subscriber) must hold exactly that
    /// within [`caches::CONVERGE`].
    async fn settle_caches(
        &self,
        observer: &Framework,
        slots: &mut [Slot],
        log_dir: &Path,
    ) -> Result<BTreeMap<String, (bool, String)>, String> {
        let config = self.config;
        let mut live = Vec::new();
        let mut curator_live = Vec::new();
        for slot in slots.iter_mut().filter(|slot| matches!(slot.kind, Kind::Cache | Kind::CuratorCache)) {
            if let Some(Running::Child { stdin: Some(stdin), .. }) = slot.running.as_mut() {
                let _ = stdin.write_all(b"freeze\n").await;
                let _ = stdin.flush().await;
                live.push(slot.tag.clone());
                if slot.kind == Kind::CuratorCache {
                    curator_live.push(slot.tag.clone());
                }
            }
        }
        let mut verdicts = BTreeMap::new();
        let started = Instant::now();
        loop {
            let text = read_logs(log_dir, "cache-");
            let frozen = live.iter().filter(|tag| text.contains(&format!("F cache {tag}-w "))).count();
            if frozen == live.len() {
                break;
            }
            if started.elapsed() >= STEP {
                verdicts.insert("writers".to_owned(), (false, format!("{frozen} of {} froze", live.len())));
                return Ok(verdicts);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A write whose reply came back is applied; give one sent by a killed writer a moment.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let root = cache_root(self.check_root);
        let mut server = Snapshot::new();
        for path in descendants(observer, &root).await {
            if let Ok(node) = observer.get_data(&path, Deadline::after(STEP)).await {
                server.insert(path, (node.stat.czxid, node.stat.mzxid, node.data));
            }
        }
        let file = log_dir.join("cache-expected.txt");
        std::fs::write(&file, caches::encode(&server))
            .map_err(|err| format!("writing {}: {err}", file.display()))?;
        for slot in slots.iter_mut().filter(|slot| live.contains(&slot.tag)) {
            if let Some(Running::Child { stdin: Some(stdin), .. }) = slot.running.as_mut() {
                let _ = stdin.write_all(format!("check {}\n", file.display()).as_bytes()).await;
                let _ = stdin.flush().await;
            }
        }
        let views: &[&str] = &["cache", "replay"];
        // Curator's followers (`A` processes) have one view each: their `CuratorCache`.
        let wanted: Vec<String> = live
            .iter()
            .flat_map(|tag| {
                let (clients, views): (usize, &[&str]) = if curator_live.contains(tag) {
                    (config.curator_cache_clients, &["curator"])
                } else {
                    (config.cache_clients, views)
                };
                (0..clients)
                    .flat_map(move |client| views.iter().map(move |view| format!("{tag}-{client}/{view}")))
            })
            .collect();
        let started = Instant::now();
        loop {
            let found = caches::verdicts(&read_logs(log_dir, "cache-"));
            if wanted.iter().all(|view| found.contains_key(view))
                || started.elapsed() >= caches::CONVERGE + STEP
            {
                for view in &wanted {
                    let verdict = found.get(view).cloned().unwrap_or((false, "no verdict".to_owned()));
                    verdicts.insert(view.clone(), verdict);
                }
                println!("cache: {} nodes on the server after the writers froze", server.len());
                return Ok(verdicts);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The partition workers' end state: they freeze (each stays in the party from now on), and
    /// within [`partitions::converge_bound`] the party must be exactly the frozen workers and
    /// every item locked by exactly one of them, the one working on it, the items split evenly
    /// ([`partitions::check_settled`]). Returns how long that took (ms), or the violations left at
    /// the bound.
    async fn settle_partitions(
        &self,
        observer: &Framework,
        slots: &mut [Slot],
        log_dir: &Path,
    ) -> Result<(Option<u64>, Vec<String>), String> {
        let config = self.config;
        let root = partition_root(self.check_root);
        let mut live = 0;
        for slot in slots.iter_mut().filter(|slot| slot.kind == Kind::Partition) {
            if let Some(Running::Child { stdin: Some(stdin), .. }) = slot.running.as_mut() {
                let _ = stdin.write_all(b"freeze\n").await;
                let _ = stdin.flush().await;
                live += 1;
            }
        }
        let wanted = live * config.partition_workers;
        let items = partitions::items();
        let bound = partitions::converge_bound(config.session_timeout);
        let started = Instant::now();
        loop {
            let text = read_logs(log_dir, "partition-");
            let frozen = partitions::frozen(&text);
            let violations = if frozen.len() < wanted {
                vec![format!("{} of {wanted} partition workers froze", frozen.len())]
            } else {
                let party = children(observer, &format!("{root}/{}", zk_recipes_partition::MEMBERS)).await;
                let mut lock_holders = BTreeMap::new();
                for item in &items {
                    let dir = format!("{root}/{}/{item}", zk_recipes_partition::LOCKS);
                    let mut holders = Vec::new();
                    for node in children(observer, &dir).await {
                        if let Ok(node) =
                            observer.get_data(&format!("{dir}/{node}"), Deadline::after(STEP)).await
                        {
                            holders.push(String::from_utf8_lossy(&node.data).into_owned());
                        }
                    }
                    lock_holders.insert(item.clone(), holders);
                }
                let party = party.into_iter().collect();
                partitions::check_settled(&items, &frozen, &party, &lock_holders, &partitions::running(&text))
            };
            if violations.is_empty() {
                let settled_ms = started.elapsed().as_millis() as u64;
                println!(
                    "partition: {} items settled on {wanted} frozen workers {settled_ms} ms after the freeze (bound {} ms)",
                    items.len(),
                    bound.as_millis()
                );
                return Ok((Some(settled_ms), Vec::new()));
            }
            if started.elapsed() >= bound {
                return Ok((
                    None,
                    violations.into_iter().map(|violation| format!("not settled: {violation}")).collect(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// One row of a soak's progress table: what the contenders logged so far, the faults, the
    /// servers' ephemerals and watches, and each Rust process's RSS and open file descriptors.
    async fn print_progress(
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

    /// Asks a slot's process to stop (release, close its sessions) and waits for it; SIGKILLs it
    /// after [`EXIT_TIMEOUT`].
    async fn stop(&self, slot: &mut Slot, killed: &mut HashMap<String, i64>) {
        let exited = match slot.running.as_mut() {
            Some(Running::Child { child, stdin }) => {
                if let Some(stdin) = stdin.as_mut() {
                    let _ = stdin.write_all(b"stop\n").await;
                    let _ = stdin.flush().await;
                }
                matches!(tokio::time::timeout(EXIT_TIMEOUT, child.wait()).await, Ok(Ok(status)) if status.success())
            }
            Some(Running::Curator(process)) => {
                let _ = process.send_line("stop").await;
                matches!(process.wait(EXIT_TIMEOUT).await, Ok(status) if status.success())
            }
            None => true,
        };
        if !exited {
            println!("warning: contender {} did not stop within {EXIT_TIMEOUT:?}; killed", slot.tag);
            self.kill(slot, killed).await;
        }
        slot.running = None;
    }

    async fn inject(
        &self,
        fault: Fault,
        rng: &mut Rng,
        cluster: &mut TestingCluster,
        slots: &mut [Slot],
        log_dir: &Path,
        killed: &mut HashMap<String, i64>,
    ) -> Result<String, String> {
        let session_ms = self.config.session_timeout.as_millis() as u64;
        let restart = |err: zk_recipes_testing::TestingError| format!("{}: {err}", fault.name());
        Ok(match fault {
            Fault::KillServer | Fault::KillLeader => {
                let index = if fault == Fault::KillLeader {
                    cluster.leader_index().await.map_err(restart)?
                } else {
                    rng.usize(..cluster.size())
                };
                cluster.kill(index).await.map_err(restart)?;
                let down = rng.u64(200..=3000);
                tokio::time::sleep(Duration::from_millis(down)).await;
                cluster.restart(index).await.map_err(restart)?;
                format!("server {} down {down} ms", index + 1)
            }
            Fault::PauseShort | Fault::PauseLong => {
                let index = rng.usize(..cluster.size());
                let paused = if fault == Fault::PauseShort {
                    rng.u64(300..=session_ms / 2)
                } else {
                    rng.u64(session_ms + 1000..=session_ms + 3000)
                };
                cluster.pause(index).map_err(restart)?;
                tokio::time::sleep(Duration::from_millis(paused)).await;
                cluster.resume(index).map_err(restart)?;
                cluster.wait_until_serving(STEP).await.map_err(restart)?;
                format!("server {} stopped {paused} ms (session timeout {session_ms} ms)", index + 1)
            }
            Fault::Partition => {
                let slot = &slots[rng.usize(..slots.len())];
                let cut = rng.u64(session_ms + 1000..=session_ms + 3000);
                for proxy in &slot.proxies {
                    proxy.black_hole(Duration::from_millis(cut));
                }
                tokio::time::sleep(Duration::from_millis(cut)).await;
                for proxy in &slot.proxies {
                    proxy.heal();
                }
                format!("contender {} black-holed {cut} ms", slot.tag)
            }
            Fault::KillRust | Fault::KillCurator | Fault::KillInterop => {
                let targets = |kind: Kind| match fault {
                    Fault::KillRust => kind.is_rust(),
                    Fault::KillCurator => kind.is_curator(),
                    _ => matches!(kind, Kind::ZooKeeperRecipe | Kind::Kazoo),
                };
                let candidates: Vec<usize> =
                    (0..slots.len()).filter(|index| targets(slots[*index].kind)).collect();
                if candidates.is_empty() {
                    return Ok("no such contender".to_owned());
                }
                let slot = &mut slots[candidates[rng.usize(..candidates.len())]];
                let old = slot.tag.clone();
                self.kill(slot, killed).await;
                let down = rng.u64(100..=2000);
                tokio::time::sleep(Duration::from_millis(down)).await;
                self.spawn(slot, log_dir)?;
                format!("contender {old} SIGKILLed, {} started {down} ms later", slot.tag)
            }
            Fault::EnsembleRestart => {
                cluster.restart_all().await.map_err(restart)?;
                "every server SIGKILLed and restarted".to_owned()
            }
        })
    }
}

/// One line per thread of `pid`: its id, name, state letter (`R`, `S`, `D`, `T` stopped, `t`
/// traced, ...) and kernel wait channel, from `/proc`.
fn thread_states(pid: u32) -> String {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return format!("pid {pid}: no /proc entry");
    };
    let mut lines: Vec<String> = tasks
        .flatten()
        .map(|task| {
            let dir = task.path();
            let read = |name: &str| std::fs::read_to_string(dir.join(name)).unwrap_or_default();
            let stat = read("stat");
            let state =
                stat.rfind(')').and_then(|end| stat[end + 1..].split_whitespace().next()).unwrap_or("?");
            format!(
                "tid {} {} state {state} wchan {}",
                task.file_name().to_string_lossy(),
                read("comm").trim(),
                read("wchan").trim()
            )
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

/// The queues as the contenders take them: comma-separated, `-` for none.
fn queues_arg(queues: &[Recipe]) -> String {
    if queues.is_empty() {
        "-".to_owned()
    } else {
        queues.iter().map(|queue| queue.name()).collect::<Vec<_>>().join(",")
    }
}

async fn create_persistent(framework: &Framework, path: &str) -> Result<(), String> {
    match framework
        .create(path)
        .mode(CreateMode::Persistent)
        .creating_parents(zk_recipes_framework::ParentMode::Persistent)
        .deadline(Deadline::after(STEP))
        .await
    {
        Ok(_) => Ok(()),
        Err(err) if err.is_node_exists() => Ok(()),
        Err(err) => Err(format!("creating {path}: {err}")),
    }
}

/// One Rust process's resident set and open descriptors at one progress row.
struct UsageSample {
    elapsed: Duration,
    /// The process incarnation's tag (a restarted process has a new one).
    tag: String,
    rss_kb: u64,
    fds: usize,
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
fn print_usage_trend(usage: &[UsageSample], from: Duration) {
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
fn print_progress_header() {
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

/// Where the cached subtree goes under a check root.
fn cache_root(check_root: &str) -> String {
    format!("{check_root}/cache")
}

/// Where the barrier rounds go under a check root.
fn barrier_root(check_root: &str) -> String {
    format!("{check_root}/barrier")
}

/// Where the partition workers share their items under a check root.
fn partition_root(check_root: &str) -> String {
    format!("{check_root}/partition")
}

/// Where the member nodes go under a check root.
fn members_root(check_root: &str) -> String {
    format!("{check_root}/members")
}

/// Every member node under `root` with its data.
async fn member_nodes(observer: &Framework, root: &str) -> Vec<SeenNode> {
    let mut nodes = Vec::new();
    for dir in members::DIRS {
        for name in children(observer, &format!("{root}/{dir}")).await {
            let path = format!("{root}/{dir}/{name}");
            if let Ok(node) = observer.get_data(&path, Deadline::after(STEP)).await {
                nodes.push(SeenNode { dir: dir.to_owned(), name, data: node.data.to_vec() });
            }
        }
    }
    nodes
}

/// The text of every log in `dir` whose name starts with `prefix`, concatenated.
fn read_logs(dir: &Path, prefix: &str) -> String {
    let mut text = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return text };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
            text.push('\n');
        }
    }
    text
}

/// Each counter's report.
type CounterReports = BTreeMap<Counter, CounterReport>;

/// The checks of the recipes besides the locks and queues.
struct Mix {
    counters: CounterReports,
    /// The member nodes' violations, when members ran.
    members: Option<Vec<String>>,
    /// The barrier rounds, when barriers ran.
    barriers: Option<BarrierReport>,
    /// The caches' verdicts (`<holder>/<view>`: ok, detail), when caches ran.
    caches: Option<BTreeMap<String, (bool, String)>>,
    /// The partition workers' checks, when they ran.
    partitions: Option<PartitionReport>,
}

impl Mix {
    fn violations(&self) -> u64 {
        counter_violations(&self.counters)
            + self.members.as_ref().map_or(0, |found| found.len() as u64)
            + self.barriers.as_ref().map_or(0, |report| report.violations.len() as u64)
            + self.caches.as_ref().map_or(0, |found| found.values().filter(|(ok, _)| !ok).count() as u64)
            + self.partitions.as_ref().map_or(0, |report| report.violations.len() as u64)
    }

    fn caches_json(&self) -> serde_json::Value {
        self.caches.as_ref().map_or(serde_json::Value::Null, |found| {
            found
                .iter()
                .map(|(view, (ok, detail))| (view.clone(), json!({"ok": ok, "detail": detail})))
                .collect::<serde_json::Map<_, _>>()
                .into()
        })
    }

    fn partitions_json(&self) -> serde_json::Value {
        self.partitions.as_ref().map_or(serde_json::Value::Null, |report| {
            json!({
                "starts": report.starts,
                "moves": report.moves,
                "holders": report.holders,
                "lost": report.lost,
                "max_concurrent": report.max_concurrent,
                "settled_ms": report.settled_ms,
                "violations": report.violations,
            })
        })
    }

    fn barriers_json(&self) -> serde_json::Value {
        self.barriers.as_ref().map_or(serde_json::Value::Null, |report| {
            json!({
                "full_rounds": report.full_rounds,
                "rust_entries": report.rust_entries,
                "curator_entries": report.curator_entries,
                "failed": report.failed,
                "stuck": report.stuck,
                "violations": report.violations,
            })
        })
    }

    fn print(&self) {
        print_counters(&self.counters);
        if let Some(found) = &self.members {
            println!(
                "{:<16} violations {}{}",
                "members",
                found.len(),
                found.iter().take(8).map(|violation| format!("\n{:<16} {violation}", "")).collect::<String>()
            );
        }
        if let Some(found) = &self.caches {
            let wrong: Vec<String> = found
                .iter()
                .filter(|(_, (ok, _))| !ok)
                .map(|(view, (_, detail))| format!("{view}: {detail}"))
                .collect();
            let slowest = found
                .values()
                .filter(|(ok, _)| *ok)
                .filter_map(|(_, detail)| detail.split(' ').next()?.parse::<u64>().ok())
                .max()
                .unwrap_or(0);
            println!(
                "{:<16} followers converged {} of {} (slowest {slowest} ms, bound {} ms); violations {}{}",
                "cache",
                found.len() - wrong.len(),
                found.len(),
                caches::CONVERGE.as_millis(),
                wrong.len(),
                wrong.iter().take(8).map(|violation| format!("\n{:<16} {violation}", "")).collect::<String>()
            );
        }
        if let Some(report) = &self.partitions {
            println!(
                "{:<16} {} item works started by {} workers, {} moved to another worker; lost {}; most owners of one item at once {}; settled {}; violations {}{}",
                "partition",
                report.starts,
                report.holders,
                report.moves,
                report.lost,
                report.max_concurrent,
                report.settled_ms.map_or("-".to_owned(), |ms| format!("in {ms} ms")),
                report.violations.len(),
                report.violations.iter().take(8).map(|violation| format!("\n{:<16} {violation}", "")).collect::<String>()
            );
        }
        if let Some(report) = &self.barriers {
            println!(
                "{:<16} rounds with every member in {}; entries rust {} curator {}; enters/leaves timed out or failed {} (Curator's stuck and interrupted {}); violations {}{}",
                "double-barrier",
                report.full_rounds,
                report.rust_entries,
                report.curator_entries,
                report.failed,
                report.stuck,
                report.violations.len(),
                report.violations.iter().take(8).map(|violation| format!("\n{:<16} {violation}", "")).collect::<String>()
            );
        }
    }

    /// The control's rows no checker caught.
    fn blind(&self) -> Vec<String> {
        let mut blind: Vec<String> =
            self.counters.iter().flat_map(|(counter, report)| report.not_caught(*counter)).collect();
        if self.caches.as_ref().is_some_and(|found| found.values().all(|(ok, _)| *ok)) {
            blind.push("cache (dropped events)".to_owned());
        }
        if self.barriers.as_ref().is_some_and(|report| report.violations.is_empty()) {
            blind.push("double-barrier (enters without waiting)".to_owned());
        }
        if self.members.as_ref().is_some_and(Vec::is_empty) {
            blind.push("members (not re-created)".to_owned());
        }
        if self.partitions.as_ref().is_some_and(|report| {
            !report.violations.iter().any(|violation| violation.starts_with("owned twice"))
        }) {
            blind.push("partition (work without the item lock)".to_owned());
        }
        blind
    }
}

fn counter_violations(reports: &CounterReports) -> u64 {
    reports.values().map(|report| report.violations.len() as u64).sum()
}

fn print_counters(reports: &CounterReports) {
    for (counter, report) in reports {
        println!(
            "{:<16} value {} = {} applied (rust {}, curator {}) + up to {} unknown (OutcomeUnknown {}, errors {}, killed mid-write {}); {} not applied; Curator retries that applied twice {}; violations {}",
            counter.name(),
            report.value.map_or("-".to_owned(), |value| value.to_string()),
            report.definite(),
            report.rust_ok,
            report.curator_ok,
            report.unknown(),
            report.outcome_unknown,
            report.errors,
            report.unlogged,
            report.not_applied,
            report.curator_double_applied,
            if report.violations.is_empty() { "0".to_owned() } else { report.violations.join("; ") }
        );
        if let Some(check) = &report.linearizability {
            println!("{}", check.row(counter.name()));
        }
    }
}

fn counters_json(reports: &CounterReports) -> serde_json::Value {
    reports
        .iter()
        .map(|(counter, report)| {
            (
                counter.name().to_owned(),
                json!({
                    "value": report.value,
                    "rust_ok": report.rust_ok,
                    "curator_ok": report.curator_ok,
                    "not_applied": report.not_applied,
                    "outcome_unknown": report.outcome_unknown,
                    "errors": report.errors,
                    "killed_mid_write": report.unlogged,
                    "curator_double_applied": report.curator_double_applied,
                    "violations": report.violations,
                    "linearizability": report.linearizability.as_ref().map(LinearReport::json),
                }),
            )
        })
        .collect::<serde_json::Map<_, _>>()
        .into()
}

fn read_events(dir: &Path) -> Vec<Event> {
    let mut events = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return events };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("events-") {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            events.extend(text.lines().filter_map(Event::parse));
        }
    }
    events
}

/// Watches registered on every member (`wchc`), summed.
async fn watch_total(cluster: &TestingCluster) -> u64 {
    let mut total = 0;
    for member in cluster.members() {
        total += member.watch_count().await.unwrap_or(0) as u64;
    }
    total
}

struct Leaks {
    nodes_by_recipe: BTreeMap<Recipe, u64>,
    ephemerals: u64,
    watches: u64,
    baseline: u64,
    details: Vec<String>,
}

impl Leaks {
    fn clean(&self) -> bool {
        self.nodes_by_recipe.values().all(|count| *count == 0)
            && self.ephemerals == 0
            && self.watches <= self.baseline
    }
}

/// Polls (up to [`LEAK_TIMEOUT`]) until no recipe node, no ephemeral and no extra watch is left,
/// then deletes the checkers' own nodes.
async fn check_leaks(cluster: &TestingCluster, observer: &Framework, baseline: u64) -> Leaks {
    let deadline = Instant::now() + LEAK_TIMEOUT;
    loop {
        let mut leaks = Leaks {
            nodes_by_recipe: BTreeMap::new(),
            ephemerals: 0,
            watches: 0,
            baseline,
            details: Vec::new(),
        };
        for root in [LOCK_ROOT, CONTROL_LOCK_ROOT] {
            // ZooKeeper's recipe and kazoo make missing lock dirs persistent: once empty, they go
            // (a dir that still holds a node stays, and is reported with it).
            for recipe in Recipe::ALL.into_iter().filter(|recipe| recipe.lock_dir_may_be_persistent()) {
                let _ =
                    observer.delete(&recipe.lock_path(root)).quietly().deadline(Deadline::after(STEP)).await;
            }
            let found = descendants(observer, root).await;
            for node in found {
                let recipe = Recipe::ALL.into_iter().find(|recipe| recipe.owns_node(root, &node));
                if let Some(recipe) = recipe {
                    *leaks.nodes_by_recipe.entry(recipe).or_default() += 1;
                }
                leaks.details.push(node);
            }
        }
        for root in [CHECK_ROOT, CONTROL_CHECK_ROOT] {
            for recipe in Recipe::ALL {
                for marker in children(observer, &recipe.guard_dir(root)).await {
                    *leaks.nodes_by_recipe.entry(recipe).or_default() += 1;
                    leaks.details.push(format!("{}/{marker}", recipe.guard_dir(root)));
                }
            }
        }
        for member in cluster.members() {
            if let Ok(stats) = member.mntr().await {
                let ephemerals: u64 =
                    stats.get("zk_ephemerals_count").and_then(|count| count.parse().ok()).unwrap_or(0);
                leaks.ephemerals = leaks.ephemerals.max(ephemerals);
            }
        }
        leaks.watches = watch_total(cluster).await;
        if leaks.clean() || Instant::now() >= deadline {
            if !leaks.clean() {
                for member in cluster.members() {
                    if let Ok(text) = member.four_letter_word("wchc").await {
                        leaks.details.push(format!("wchc server {}: {}", member.server_id(), text.trim()));
                    }
                }
            }
            for root in [CHECK_ROOT, CONTROL_CHECK_ROOT] {
                let _ = observer
                    .delete(root)
                    .deleting_children_if_needed()
                    .quietly()
                    .deadline(Deadline::after(STEP))
                    .await;
            }
            return leaks;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

async fn children(framework: &Framework, path: &str) -> Vec<String> {
    framework.children(path, Deadline::after(STEP)).await.map(|(children, _)| children).unwrap_or_default()
}

async fn descendants(framework: &Framework, root: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for child in children(framework, &dir).await {
            let child = format!("{dir}/{child}");
            found.push(child.clone());
            stack.push(child);
        }
    }
    found
}

fn report_json(report: &RecipeReport) -> serde_json::Value {
    json!({
        "acquisitions": report.acquisitions(),
        "rust_acquisitions": report.rust_acquisitions,
        "other_acquisitions": report.other_acquisitions,
        "gave_up": report.gave_up,
        "holders": report.holders,
        "lost_fired": report.lost_fired,
        "violations": report.violations_by_kind(),
        "rust_violations": report.rust_violations,
        "other_violations": report.other_violations,
        "max_token": report.max_token,
        "max_concurrent": report.max_concurrent,
        "max_late_lost_ms": report.max_late_lost_ms,
        "increments": report.increments,
        "uncertain_increments": report.uncertain_increments,
        "counter": report.counter,
        "errors": report.errors,
        "stale_markers": report.stale_markers,
        "fenced_after_lost": report.fenced_after_lost,
        "leaked_nodes": report.leaked_nodes,
        "items": report.items,
        "items_acked": report.items_acked,
        "acks_unlogged": report.acks_unlogged,
        "deliveries": report.deliveries,
        "curator_redeliveries": report.curator_redeliveries,
        "curator_stranded_locks": report.curator_stranded_locks,
    })
}

/// `kind=count ...`, or `0`.
fn violations_text(report: &RecipeReport) -> String {
    let violations = report.violations_by_kind();
    if violations.is_empty() {
        "0".to_owned()
    } else {
        violations.iter().map(|(kind, count)| format!("{kind}={count}")).collect::<Vec<_>>().join(" ")
    }
}

fn print_table(reports: &BTreeMap<Recipe, RecipeReport>) {
    println!(
        "{:<16} {:>9} {:>7} {:>7} {:>7} {:>6} {:>8} {:>9} {:>6} {:>6}  violations",
        "recipe", "acquired", "rust", "other", "holders", "lost", "max-hold", "late-ms", "errors", "leaks",
    );
    for (recipe, report) in reports.iter().filter(|(recipe, _)| !recipe.is_queue()) {
        let violations = violations_text(report);
        println!(
            "{:<16} {:>9} {:>7} {:>7} {:>7} {:>6} {:>8} {:>9.1} {:>6} {:>6}  {}",
            recipe.name(),
            report.acquisitions(),
            report.rust_acquisitions,
            report.other_acquisitions,
            report.holders,
            report.lost_fired,
            report.max_concurrent,
            report.max_late_lost_ms,
            report.errors,
            report.leaked_nodes,
            violations
        );
        let counter = report.counter.map_or("-".to_owned(), |count| count.to_string());
        let gave_up = if recipe.contenders() == Contenders::PerRecipe {
            String::new()
        } else {
            format!("; gave up {}", report.gave_up)
        };
        println!(
            "{:<16} counter {counter} = {} committed (+{} unknown); max token {:#x}; stale markers {}; fenced after lost {}{gave_up}",
            "",
            report.increments,
            report.uncertain_increments,
            report.max_token,
            report.stale_markers,
            report.fenced_after_lost
        );
    }
    for (queue, report) in reports.iter().filter(|(recipe, _)| recipe.is_queue()) {
        let violations = violations_text(report);
        println!(
            "{:<16} items {} acked {} (+{} whose ack was sent but not confirmed, then never redelivered); deliveries {} \
             (rust {}, curator {}); curator redeliveries {}; curator stranded locks {}; consumers {}; left {}; errors {}; violations {violations}",
            queue.name(),
            report.items,
            report.items_acked,
            report.acks_unlogged,
            report.deliveries,
            report.rust_acquisitions,
            report.other_acquisitions,
            report.curator_redeliveries,
            report.curator_stranded_locks,
            report.holders,
            report.leaked_nodes,
            report.errors,
        );
    }
}

/// The time of the last event in a contender's log (microseconds since the epoch), if any.
fn last_event_micros(log: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines().rev().find_map(|line| line.split_whitespace().nth(3)?.parse().ok())
}

/// Appends a fault to `faults.log` beside the contenders' logs, on their clock (`<epoch µs when
/// its injection began> <kind> <detail>`), so that an event in a log can be traced to a fault after
/// the run. Best effort: a fault that cannot be written is still printed.
fn record_fault(log_dir: &std::path::Path, injected_at: i64, kind: &str, detail: &str) {
    use std::io::Write as _;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_dir.join("faults.log"))
        .and_then(|mut file| writeln!(file, "{injected_at} {kind} {detail}"));
    if let Err(err) = written {
        eprintln!("faults.log: {err}");
    }
}

#[cfg(test)]
mod tests {
    use super::{consumers_holding_an_item, thread_states, Event, Recipe};

    /// The soak's trend is the least-squares slope: flat is 0, a steady climb its rate.
    #[test]
    fn the_usage_trend_is_the_least_squares_slope() {
        use super::slope;
        assert_eq!(slope(&[(1.0, 5.0), (2.0, 5.0), (3.0, 5.0)]), Some(0.0));
        assert_eq!(slope(&[(0.5, 100.0), (0.75, 110.0), (1.0, 120.0)]), Some(40.0));
        let noisy = slope(&[(0.5, 100.0), (0.75, 130.0), (1.0, 100.0)]).expect("a slope");
        assert!(noisy.abs() < 1e-9, "{noisy}");
        assert_eq!(slope(&[(1.0, 5.0), (1.0, 9.0)]), None, "no spread in time");
    }

    /// The queue control crashes its consumers only while one holds an unprocessed item it took
    /// recently: a crash between items, or just before an item's ack, loses nothing and the
    /// control would catch nothing.
    #[test]
    fn a_consumer_holds_an_item_from_delivery_until_processed() {
        let events = |lines: &[&str]| -> Vec<Event> {
            lines.iter().map(|line| Event::parse(line).expect("event")).collect()
        };
        let holding = |lines: &[&str], queue: Recipe, since: i64| -> Vec<String> {
            consumers_holding_an_item(&events(lines), queue, since).into_iter().map(str::to_owned).collect()
        };
        assert!(holding(&[], Recipe::Queue, 0).is_empty());
        let rust = ["C queue r0x1-q 10 q0", "W queue r0x1-q 11 q0", "K queue r0x1-q 12 q0"];
        assert_eq!(holding(&rust[..1], Recipe::Queue, 0), ["r0x1-q"]);
        assert_eq!(holding(&rust[..1], Recipe::Queue, 10), ["r0x1-q"], "delivered at `since`");
        assert!(holding(&rust[..1], Recipe::Queue, 11).is_empty(), "delivered before `since`");
        assert!(holding(&rust[..2], Recipe::Queue, 0).is_empty(), "its ack is sent");
        assert!(holding(&rust, Recipe::Queue, 0).is_empty());
        let curator = ["C queue j0x1-q 10 q1"];
        assert!(holding(&curator, Recipe::Queue, 0).is_empty(), "a Curator consumer's proves nothing");
        assert!(holding(&rust[..1], Recipe::PriorityQueue, 0).is_empty(), "another queue's");
        let other_consumer = ["C queue r0x1-q 10 q0", "W queue r1x1-q 11 q0"];
        assert_eq!(holding(&other_consumer, Recipe::Queue, 0), ["r0x1-q"]);
        let two = ["C queue r1x1-q 10 q0", "C queue r0x1-q 11 q1", "C queue r0x1-q 12 q2"];
        assert_eq!(holding(&two, Recipe::Queue, 0), ["r0x1-q", "r1x1-q"], "each consumer once");
    }

    /// The silent-contender report tells a process stopped by a signal (every thread `T`) from one
    /// that is blocked or busy.
    #[test]
    fn thread_states_show_a_stopped_process() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().expect("sleep");
        let pid = child.id();
        // Just spawned, it may still be running (R) before it sleeps.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut running = thread_states(pid);
        while !running.contains("sleep state S") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            running = thread_states(pid);
        }
        assert!(running.contains("sleep state S"), "{running}");
        let stopped = std::process::Command::new("kill").args(["-STOP", &pid.to_string()]).status();
        assert!(stopped.expect("kill -STOP").success());
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut states = thread_states(pid);
        while !states.contains("state T") && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(10));
            states = thread_states(pid);
        }
        child.kill().expect("kill");
        child.wait().expect("reap");
        assert!(states.contains("sleep state T"), "{states}");
        assert!(thread_states(pid).contains("no /proc entry"));
    }
}
