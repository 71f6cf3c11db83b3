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
mod counter;
mod counters;
mod events;
mod holders;
mod interop;
mod linearizable;
mod members;
mod partitions;
mod queue_check;
mod recipes;
mod rng;
mod run;
mod setup;
mod store;
mod tally;

use clap::{Parser, Subcommand};

use crate::barriers::BarrierConfig;
use crate::caches::CacheConfig;
use crate::contender::ContenderConfig;
use crate::counters::CounterConfig;
use crate::members::MembersConfig;
use crate::partitions::PartitionConfig;
use crate::run::RunArgs;

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
    Contend(ContenderConfig),
    /// One Rust counter contender process (spawned by `run`).
    Count(CounterConfig),
    /// One members process: persistent nodes and group membership (spawned by `run`).
    Members(MembersConfig),
    /// One process of double-barrier members (spawned by `run`).
    Barrier(BarrierConfig),
    /// One cache process: a writer and followers of one subtree (spawned by `run`).
    Cache(CacheConfig),
    /// One process of work partitioner workers (spawned by `run`).
    Partition(PartitionConfig),
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
            Commands::Run(args) => {
                setup::init_logging();
                run::run_command(args).await
            }
            Commands::Contend(config) => contend_command(config).await,
            Commands::Count(config) => logged("count", counters::run(config)).await,
            Commands::Members(config) => logged("members", members::run(config)).await,
            Commands::Barrier(config) => logged("barrier", barriers::run(config)).await,
            Commands::Cache(config) => logged("cache", caches::run(config)).await,
            Commands::Partition(config) => logged("partition", partitions::run(config)).await,
        }
    });
    std::process::exit(code);
}

/// Runs one of the processes `run` spawns, with the common log, to its exit code.
async fn logged(command: &str, process: impl std::future::Future<Output = std::io::Result<i32>>) -> i32 {
    setup::init_logging();
    setup::exit_code(command, process.await)
}

async fn contend_command(config: ContenderConfig) -> i32 {
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
    let _ = tracing_subscriber::registry().with(log).with((config.loops > 0).then_some(tally)).try_init();
    setup::exit_code("contend", contender::run(config).await)
}
