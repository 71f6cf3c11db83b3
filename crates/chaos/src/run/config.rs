//! How big a run is: the command line of `zkr-chaos run` and the sizes derived from it.

use std::path::PathBuf;
use std::time::Duration;

use super::kind::Kind;
use crate::events;
use crate::recipes::{self, Contenders, Recipe};

/// The command line of `zkr-chaos run`, from which [`RunConfig::from_args`] sizes the run.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The short CI mode (about 3 minutes) instead of the default 30-minute run.
    #[arg(long)]
    quick: bool,
    /// A soak: the whole mix with faults for this many hours (fractions allowed), a progress
    /// table every ten minutes.
    #[arg(long, conflicts_with = "quick")]
    soak: Option<f64>,
    /// How often a soak prints its progress table, in seconds (default 600).
    #[arg(long, hide = true)]
    report_every_secs: Option<u64>,
    /// The fault schedule's seed (default: from the clock; always printed).
    #[arg(long)]
    seed: Option<u64>,
    /// Seconds of faults (default: 100 quick, 1440 default).
    #[arg(long)]
    duration_secs: Option<u64>,
    /// Where event logs and summary.json go.
    #[arg(long, default_value = "target/chaos-run")]
    out_dir: PathBuf,
    /// Recipes, comma-separated (default: all).
    #[arg(long)]
    recipes: Option<String>,
    /// Queues, comma-separated (default: queue,priority; `-` for none).
    #[arg(long)]
    queues: Option<String>,
    /// Items put into each queue (default: 1200 quick, 11000 default, 25000 an hour of soak, so
    /// the queues stay at work well into a soak and are still drained at its end).
    #[arg(long)]
    queue_items: Option<usize>,
    /// How late (ms) lost() may fire after the next holder came in before it is an overlap.
    #[arg(long, default_value_t = 1000)]
    lost_tolerance_ms: u64,
    /// The percentage of a busy session's acquires that give up early.
    #[arg(long, default_value_t = 25)]
    give_up_percent: u64,
    /// The recipes besides the locks and queues, comma-separated (default:
    /// counters,members,barriers,cache,partition;
    /// `-` for none).
    #[arg(long)]
    mix: Option<String>,
    /// Hold loops of each busy recipe (batch-0..3, zk-recipe, kazoo-lock) on each busy session.
    #[arg(long, default_value_t = 3)]
    busy_loops: usize,
}

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
    /// Sizes a run from its command line: the quick run is smaller and shorter, a soak runs the
    /// default run's set-up for its hours.
    pub fn from_args(args: RunArgs) -> Result<RunConfig, String> {
        let recipes = match args.recipes.as_deref().map(recipes::parse_list).transpose() {
            Ok(recipes) => recipes.unwrap_or_else(|| Recipe::ALL.to_vec()),
            Err(err) => {
                return Err(err);
            }
        };
        let queues = match args
            .queues
            .as_deref()
            .map(|list| recipes::parse_list(list.trim_start_matches('-')))
            .transpose()
        {
            Ok(queues) => queues.unwrap_or_else(|| Recipe::QUEUES.to_vec()),
            Err(err) => {
                return Err(err);
            }
        };
        let mix = args.mix.as_deref().unwrap_or("counters,members,barriers,cache,partition");
        let mut counters = false;
        let mut members = false;
        let mut barriers = false;
        let mut cache = false;
        let mut partition = false;
        for name in mix.split(',').filter(|name| !name.is_empty() && *name != "-") {
            match name {
                "counters" => counters = true,
                "members" => members = true,
                "barriers" => barriers = true,
                "cache" => cache = true,
                "partition" => partition = true,
                other => {
                    return Err(format!(
                        "unknown --mix entry {other:?} (known: counters, members, barriers, cache, partition)"
                    ));
                }
            }
        }
        let seed = args.seed.unwrap_or_else(|| events::epoch_micros() as u64);
        let session_timeout = Duration::from_secs(4);
        if args.give_up_percent > 100 {
            return Err("--give-up-percent is a percentage".to_owned());
        }
        let soak = match args.soak {
            Some(hours) if !(hours > 0.0 && hours.is_finite()) => {
                return Err("--soak takes a positive number of hours".to_owned());
            }
            Some(hours) => Some(Duration::from_secs_f64(hours * 3600.0)),
            None => None,
        };
        let duration = match (soak, args.duration_secs) {
            (Some(soak), _) => soak,
            (None, Some(secs)) => Duration::from_secs(secs),
            (None, None) => Duration::from_secs(if args.quick { 100 } else { 1440 }),
        };
        Ok(RunConfig {
            seed,
            duration,
            report_every: (soak.is_some() || args.report_every_secs.is_some())
                .then(|| Duration::from_secs(args.report_every_secs.unwrap_or(600).max(1))),
            control_duration: Duration::from_secs(6),
            rust_processes: if args.quick { 2 } else { 3 },
            rust_clients: 2,
            curator_processes: if args.quick { 1 } else { 2 },
            curator_clients: 2,
            busy_processes: 2,
            busy_clients: 1,
            busy_loops: args.busy_loops.max(1),
            give_up_percent: args.give_up_percent,
            zookeeper_recipe_processes: 1,
            kazoo_processes: 1,
            interop_clients: 2,
            counter_processes: usize::from(counters),
            curator_counter_processes: usize::from(counters),
            counter_clients: 2,
            barrier_processes: usize::from(barriers),
            curator_barrier_processes: usize::from(barriers),
            barrier_clients: 2,
            cache_processes: usize::from(cache) * 2,
            cache_clients: 2,
            curator_cache_processes: usize::from(cache),
            curator_cache_clients: 1,
            member_processes: usize::from(members) * 2,
            member_clients: 2,
            partition_processes: usize::from(partition) * 2,
            partition_workers: 2,
            curator_member_processes: usize::from(members),
            session_timeout,
            hold: Duration::from_millis(2),
            fault_gap: if args.quick {
                (Duration::from_millis(1000), Duration::from_millis(3000))
            } else {
                (Duration::from_millis(2000), Duration::from_millis(8000))
            },
            lost_tolerance: Duration::from_millis(args.lost_tolerance_ms),
            recipes,
            queues,
            queue_items: args.queue_items.unwrap_or(match soak {
                _ if args.quick => 1200,
                Some(soak) => ((soak.as_secs_f64() / 3600.0 * 25_000.0) as usize).max(11_000),
                None => 11_000,
            }),
            process: Duration::from_millis(if args.quick { 120 } else { 400 }),
            out_dir: args.out_dir,
            mode: if soak.is_some() {
                "soak"
            } else if args.quick {
                "quick"
            } else {
                "default"
            }
            .to_owned(),
        })
    }

    /// How many members each barrier round waits for (every Rust and Curator member).
    pub(super) fn barrier_members(&self) -> usize {
        (self.processes(Kind::Barrier) + self.processes(Kind::CuratorBarrier)) * self.barrier_clients
    }

    /// The recipes `kind`'s processes take.
    pub(super) fn recipes_of(&self, kind: Kind) -> Vec<Recipe> {
        let wanted = |recipe: &&Recipe| match kind {
            Kind::Rust | Kind::Curator => recipe.contenders() == Contenders::PerRecipe,
            Kind::Busy => recipe.contenders() != Contenders::PerRecipe,
            Kind::ZooKeeperRecipe => recipe.contenders() == Contenders::BusyAndZooKeeperRecipe,
            Kind::Kazoo => recipe.contenders() == Contenders::BusyAndKazoo,
            // The mix's processes take no lock recipe.
            _ => false,
        };
        self.recipes.iter().filter(wanted).copied().collect()
    }

    /// How many processes of `kind` the run starts (none when they would have nothing to do).
    pub(super) fn processes(&self, kind: Kind) -> usize {
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
