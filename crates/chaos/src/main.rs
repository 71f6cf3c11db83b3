//! `zkr-chaos`: Rust, Curator, ZooKeeper-recipe (Java) and kazoo contenders on a real 3-node
//! ZooKeeper ensemble through server crashes, pauses, session expiry, partitions and contender
//! crashes, with checkers that can fail (each run starts with a negative control, locking off,
//! that must report violations).
//!
//! ```text
//! zkr-chaos run [--quick | --soak HOURS] [--seed N] [--out-dir DIR]   # exit 0 only when clean
//! zkr-chaos contend ...                                  # one Rust contender (run spawns these)
//! zkr-chaos count ...                                    # one Rust counter contender (run spawns these)
//! zkr-chaos members ...                                  # one members process (run spawns these)
//! zkr-chaos barrier ...                                  # double-barrier members (run spawns these)
//! zkr-chaos cache ...                                    # a cache writer and followers (run spawns these)
//! zkr-chaos partition ...                                # partition workers (run spawns these)
//! ```
//!
//! See `docs/reliability.md` for what each fault exercises and the last run's table.

mod barriers;
mod caches;
mod check;
mod commands;
mod contender;
mod counters;
mod events;
mod interop;
mod linearizable;
mod members;
mod partitions;
mod recipes;
mod rng;
mod run;
mod setup;
mod tally;

use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::contender::ContenderConfig;
use crate::recipes::Recipe;
use crate::run::RunConfig;
use crate::setup::ProcessSetup;

#[derive(Debug, Parser)]
#[command(
    name = "zkr-chaos",
    about = "A chaos suite for zk-recipes and Curator on a real ZooKeeper ensemble"
)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Debug, Subcommand)]
enum Commands {
    /// Start an ensemble, run the negative control and the chaos run, check, report.
    Run(RunArgs),
    /// One Rust contender process (spawned by `run`).
    Contend(ContendArgs),
    /// One Rust counter contender process (spawned by `run`).
    Count(CountArgs),
    /// One members process: persistent nodes and group membership (spawned by `run`).
    Members(MembersArgs),
    /// One process of double-barrier members (spawned by `run`).
    Barrier(BarrierArgs),
    /// One cache process: a writer and followers of one subtree (spawned by `run`).
    Cache(CacheArgs),
    /// One process of work partitioner workers (spawned by `run`).
    Partition(PartitionArgs),
}

#[derive(Debug, clap::Args)]
struct PartitionArgs {
    #[command(flatten)]
    setup: ProcessSetup,
    /// Workers (each on its own session).
    #[arg(long, default_value_t = 2)]
    workers: usize,
    #[arg(long)]
    root: String,
    /// The negative control: work starts without waiting for the item's lock.
    #[arg(long)]
    no_lock: bool,
}

#[derive(Debug, clap::Args)]
struct CacheArgs {
    #[command(flatten)]
    setup: ProcessSetup,
    #[arg(long, default_value_t = 2)]
    clients: usize,
    #[arg(long)]
    root: String,
    /// The negative control: this process's followers are behind proxies the run set to drop
    /// watch notifications (the process itself only logs that it is the control).
    #[arg(long)]
    drop_events: bool,
}

#[derive(Debug, clap::Args)]
struct BarrierArgs {
    #[command(flatten)]
    setup: ProcessSetup,
    #[arg(long, default_value_t = 2)]
    clients: usize,
    #[arg(long)]
    root: String,
    /// How many members each round waits for (all processes').
    #[arg(long)]
    member_count: usize,
    /// The negative control: enter without waiting for the others.
    #[arg(long)]
    no_wait: bool,
}

#[derive(Debug, clap::Args)]
struct MembersArgs {
    #[command(flatten)]
    setup: ProcessSetup,
    #[arg(long, default_value_t = 2)]
    clients: usize,
    #[arg(long)]
    root: String,
    /// The negative control: plain creates, never made again.
    #[arg(long)]
    no_recreate: bool,
}

#[derive(Debug, clap::Args)]
struct CountArgs {
    #[command(flatten)]
    setup: ProcessSetup,
    #[arg(long, default_value_t = 2)]
    clients: usize,
    #[arg(long)]
    check_root: String,
    /// The negative control: retry blindly after a reply treated as lost.
    #[arg(long)]
    blind: bool,
}

#[derive(Debug, clap::Args)]
struct RunArgs {
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

#[derive(Debug, clap::Args)]
struct ContendArgs {
    #[command(flatten)]
    setup: ProcessSetup,
    #[arg(long)]
    recipes: String,
    #[arg(long, default_value_t = 2)]
    clients: usize,
    #[arg(long, default_value = "on")]
    locking: String,
    #[arg(long)]
    lock_root: String,
    #[arg(long)]
    check_root: String,
    #[arg(long, default_value_t = 2)]
    hold_ms: u64,
    #[arg(long, default_value = "")]
    queues: String,
    #[arg(long, default_value = "/chaos-queues")]
    queue_root: String,
    #[arg(long, default_value_t = 100)]
    process_ms: u64,
    /// 0: one session per recipe and client; more: a busy-session contender, each of its
    /// `clients` sessions running this many hold loops of every recipe at once.
    #[arg(long, default_value_t = 0)]
    loops: usize,
    /// The percentage of a busy session's acquires that give up early.
    #[arg(long, default_value_t = 0)]
    give_up_percent: u64,
}

fn main() {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("zkr-chaos: starting the runtime: {err}");
            std::process::exit(2);
        }
    };
    let code = runtime.block_on(async move {
        match cli.command {
            Commands::Run(args) => run_command(args).await,
            Commands::Contend(args) => contend_command(args).await,
            Commands::Count(args) => count_command(args).await,
            Commands::Members(args) => members_command(args).await,
            Commands::Barrier(args) => barrier_command(args).await,
            Commands::Cache(args) => cache_command(args).await,
            Commands::Partition(args) => partition_command(args).await,
        }
    });
    std::process::exit(code);
}

async fn run_command(args: RunArgs) -> i32 {
    setup::init_logging();
    let recipes = match args.recipes.as_deref().map(recipes::parse_list).transpose() {
        Ok(recipes) => recipes.unwrap_or_else(|| Recipe::ALL.to_vec()),
        Err(err) => {
            eprintln!("zkr-chaos: {err}");
            return 2;
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
            eprintln!("zkr-chaos: {err}");
            return 2;
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
                eprintln!(
                    "zkr-chaos: unknown --mix entry {other:?} (known: counters, members, barriers, cache, partition)"
                );
                return 2;
            }
        }
    }
    let seed = args.seed.unwrap_or_else(|| events::epoch_micros() as u64);
    let session_timeout = Duration::from_secs(4);
    if args.give_up_percent > 100 {
        eprintln!("zkr-chaos: --give-up-percent is a percentage");
        return 2;
    }
    let soak = match args.soak {
        Some(hours) if !(hours > 0.0 && hours.is_finite()) => {
            eprintln!("zkr-chaos: --soak takes a positive number of hours");
            return 2;
        }
        Some(hours) => Some(Duration::from_secs_f64(hours * 3600.0)),
        None => None,
    };
    let duration = match (soak, args.duration_secs) {
        (Some(soak), _) => soak,
        (None, Some(secs)) => Duration::from_secs(secs),
        (None, None) => Duration::from_secs(if args.quick { 100 } else { 1440 }),
    };
    let config = RunConfig {
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
    };
    match run::run(config).await {
        Ok(true) => 0,
        Ok(false) => 1,
        Err(err) => {
            eprintln!("zkr-chaos: {err}");
            2
        }
    }
}

async fn partition_command(args: PartitionArgs) -> i32 {
    setup::init_logging();
    let config = partitions::PartitionConfig {
        setup: args.setup,
        workers: args.workers,
        root: args.root,
        no_lock: args.no_lock,
    };
    setup::exit_code("partition", partitions::run(config).await)
}

async fn cache_command(args: CacheArgs) -> i32 {
    setup::init_logging();
    let config = caches::CacheConfig {
        setup: args.setup,
        clients: args.clients,
        root: args.root,
        drop_events: args.drop_events,
    };
    setup::exit_code("cache", caches::run(config).await)
}

async fn barrier_command(args: BarrierArgs) -> i32 {
    setup::init_logging();
    let config = barriers::BarrierConfig {
        setup: args.setup,
        clients: args.clients,
        root: args.root,
        member_count: args.member_count,
        no_wait: args.no_wait,
    };
    setup::exit_code("barrier", barriers::run(config).await)
}

async fn members_command(args: MembersArgs) -> i32 {
    setup::init_logging();
    let config = members::MembersConfig {
        setup: args.setup,
        clients: args.clients,
        root: args.root,
        no_recreate: args.no_recreate,
    };
    setup::exit_code("members", members::run(config).await)
}

async fn count_command(args: CountArgs) -> i32 {
    setup::init_logging();
    let config = counters::CounterConfig {
        setup: args.setup,
        clients: args.clients,
        check_root: args.check_root,
        blind: args.blind,
    };
    setup::exit_code("count", counters::run(config).await)
}

async fn contend_command(args: ContendArgs) -> i32 {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::Layer;

    // The log as `run`'s, and the framework's own events counted for the `B` events.
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_filter(tracing_subscriber::EnvFilter::from_default_env());
    let tally = tally::TallyLayer.with_filter(
        tracing_subscriber::filter::Targets::new()
            .with_target(tally::FRAMEWORK_TARGET, tracing::Level::TRACE),
    );
    let _ = tracing_subscriber::registry().with(log).with((args.loops > 0).then_some(tally)).try_init();
    let recipes = match recipes::parse_list(&args.recipes) {
        Ok(recipes) => recipes,
        Err(err) => {
            eprintln!("zkr-chaos contend: {err}");
            return 2;
        }
    };
    let config = ContenderConfig {
        setup: args.setup,
        recipes,
        clients: args.clients,
        locking: args.locking != "off",
        lock_root: args.lock_root,
        check_root: args.check_root,
        hold: Duration::from_millis(args.hold_ms),
        queues: match recipes::parse_list(args.queues.trim_start_matches('-')) {
            Ok(queues) => queues,
            Err(err) => {
                eprintln!("zkr-chaos contend: {err}");
                return 2;
            }
        },
        queue_root: args.queue_root,
        process: Duration::from_millis(args.process_ms),
        loops: args.loops,
        give_up_percent: args.give_up_percent,
    };
    setup::exit_code("contend", contender::run(config).await)
}
