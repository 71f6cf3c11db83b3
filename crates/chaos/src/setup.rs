//! What every process `run` spawns shares: its command-line setup (the ensemble to connect to,
//! its name, its event log, its sessions' timeout), its logging, and how its outcome becomes an
//! exit code.

use std::fmt::Display;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::Framework;

use crate::events::EventLog;

/// The command line every spawned process takes: `--connect`, `--tag`, `--log` and
/// `--session-timeout-ms` (flattened into each subcommand's arguments).
#[derive(Debug, Clone, clap::Args)]
pub struct ProcessSetup {
    /// The connect string (the run's fault proxies for this process).
    #[arg(long)]
    pub connect: String,
    /// This process's name in holder ids and event logs.
    #[arg(long)]
    pub tag: String,
    /// The event log (appended to).
    #[arg(long)]
    pub log: PathBuf,
    /// The session timeout asked for, in milliseconds.
    #[arg(long, default_value_t = 4000)]
    pub session_timeout_ms: u64,
}

impl ProcessSetup {
    /// The session timeout asked for.
    pub fn session_timeout(&self) -> Duration {
        Duration::from_millis(self.session_timeout_ms)
    }

    /// Opens the event log for appending.
    pub fn open_log(&self) -> std::io::Result<Arc<EventLog>> {
        Ok(Arc::new(EventLog::open(&self.log)?))
    }

    /// Starts one session of this process (a framework of its own).
    pub fn framework(&self) -> std::io::Result<Framework> {
        Framework::builder(self.connect.clone())
            .session_timeout(self.session_timeout())
            .start()
            .map_err(std::io::Error::other)
    }

    /// A holder's name in this process: `<tag>-<suffix>`.
    pub fn holder(&self, suffix: impl Display) -> String {
        format!("{}-{suffix}", self.tag)
    }
}

/// Logs to stderr at `RUST_LOG`.
pub fn init_logging() {
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .with_writer(std::io::stderr)
        .try_init();
}

/// A spawned process's exit code: its own, or 2 with the error on stderr.
pub fn exit_code(command: &str, outcome: std::io::Result<i32>) -> i32 {
    outcome.unwrap_or_else(|err| {
        eprintln!("zkr-chaos {command}: {err}");
        2
    })
}
