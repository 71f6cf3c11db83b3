//! `zkr`: see who holds a lock, who leads, how deep a queue is, which service instances are
//! registered — on nodes made by zk-recipes or by Apache Curator — and run a command while holding
//! a lock, a lease or leadership.
//!
//! Exit codes: 0 ok, 1 error, 2 usage, 3 "not held / no leader / empty" for a command that asks
//! a yes/no question. See `docs/operations.md`.

mod args;
mod ensemble;
mod inspect;
mod leader_watch;
mod output;
mod services;
mod supervise;

use std::process::ExitCode;

use clap::Parser;

use args::{Cli, Command};
use output::EXIT_NO;

fn main() -> ExitCode {
    let cli = Cli::parse();
    cli.check();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_env("ZKR_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => {
            eprintln!("zkr: cannot start a runtime: {err}");
            return ExitCode::from(1);
        }
    };
    match runtime.block_on(run(cli)) {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            eprintln!("zkr: {err}");
            ExitCode::from(1)
        }
    }
}

/// Runs one command; its exit code.
async fn run(cli: Cli) -> Result<u8, Box<dyn std::error::Error>> {
    let framework = cli.connection.framework()?;
    framework.block_until_connected(cli.connection.connect_timeout()).await?;
    let json = cli.json;
    let code = match cli.command {
        Command::Locks { path } => output::show(&inspect::lock(&framework, &path).await?, json),
        Command::Leader { path, watch: false, .. } => {
            output::show(&inspect::leader(&framework, &path).await?, json)
        }
        Command::Leader { path, watch: true, layout } => {
            leader_watch::watch(&framework, &path, layout, json).await?
        }
        Command::Semaphore { path, max, command, .. } if command.is_empty() => {
            output::show(&inspect::semaphore(&framework, &path, max).await?, json)
        }
        Command::Semaphore { path, leases, command, .. } => {
            supervise::with_lease(&framework, &path, leases.unwrap_or(1), &cli.hold, &command).await?
        }
        Command::Queue { path, lock_path } => {
            output::show(&inspect::queue(&framework, &path, lock_path.as_deref()).await?, json)
        }
        Command::Tree { path } => output::show(&inspect::tree(&framework, &path).await?, json),
        Command::Ensemble => {
            let deadline = zk_recipes_framework::Deadline::after(cli.connection.connect_timeout());
            output::show(&ensemble::ensemble(&framework, deadline).await?, json)
        }
        Command::Services { name: None, base_path } => {
            output::show(&services::services(&framework, &base_path).await?, json)
        }
        Command::Services { name: Some(name), base_path } => {
            let service_path = args::services_path(&base_path, Some(&name))?;
            output::show(&services::service_instances(&framework, &service_path).await?, json)
        }
        Command::Revoke { path, node } => {
            let node = args::revoked_node(&path, node.as_deref())?;
            if inspect::revoke(&framework, &node).await? {
                output::print_out(&format!("asked the holder of {node} to release\n"));
                0
            } else {
                eprintln!("zkr: no node {node}: nothing to revoke (released already?)");
                EXIT_NO
            }
        }
        Command::Lock { path, command } => {
            supervise::with_lock(&framework, &path, &cli.hold, &command).await?
        }
        Command::Elect { path, id, requeue, command } => {
            supervise::while_leader(&framework, &path, &id, requeue, &cli.hold, &command).await?
        }
    };
    framework.close().await;
    Ok(code)
}
