//! [`CuratorDiscoveryBuilder`]: the settings of a [`CuratorDiscovery`], and its start.

use std::time::Duration;

use zk_recipes_testing::{CuratorProcess, Jit, Result};

use crate::discovery::{io_error, unexpected, CuratorDiscovery};
use crate::spec::{DISCOVERY_REPLY, DISCOVERY_START};

/// Settings of a [`CuratorDiscovery`]; [`start`](Self::start) launches it.
///
/// # Example
/// ```no_run
/// # async fn demo(connect: &str) -> zk_recipes_interop::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_interop::CuratorDiscovery;
///
/// let curator = CuratorDiscovery::builder(connect, "/services")
///     .watch_instances(true)
///     .session_timeout(Duration::from_secs(4))
///     .start()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is awaited"]
pub struct CuratorDiscoveryBuilder {
    connect: String,
    base_path: String,
    watch_instances: bool,
    enabled_field: bool,
    session_timeout: Option<Duration>,
    start_timeout: Duration,
    reply_timeout: Duration,
    jit: Jit,
}

impl CuratorDiscoveryBuilder {
    /// Curator's `watchInstances`: the discovery watches the nodes of the instances it registered
    /// and re-reads them when they change. Defaults to `false`, as Curator's.
    pub fn watch_instances(mut self, watch_instances: bool) -> CuratorDiscoveryBuilder {
        self.watch_instances = watch_instances;
        self
    }

    /// Serialize with `JsonInstanceSerializer(Object.class, false)`, which also writes
    /// `"enabled"`. Defaults to `false`: Curator's default serializer, in compatible mode, leaves
    /// it out.
    pub fn enabled_field(mut self, enabled_field: bool) -> CuratorDiscoveryBuilder {
        self.enabled_field = enabled_field;
        self
    }

    /// The session timeout the Curator client asks for. Defaults to the driver's 10 s.
    pub fn session_timeout(mut self, session_timeout: Duration) -> CuratorDiscoveryBuilder {
        self.session_timeout = Some(session_timeout);
        self
    }

    /// How long [`start`](Self::start) waits for the discovery to start. Defaults to 60 s
    /// ([`DISCOVERY_START`]).
    pub fn start_timeout(mut self, start_timeout: Duration) -> CuratorDiscoveryBuilder {
        self.start_timeout = start_timeout;
        self
    }

    /// How long each typed call waits for Curator's answer. Defaults to 30 s
    /// ([`DISCOVERY_REPLY`]).
    pub fn reply_timeout(mut self, reply_timeout: Duration) -> CuratorDiscoveryBuilder {
        self.reply_timeout = reply_timeout;
        self
    }

    /// How the JVM compiles its hot code. Defaults to [`Jit::QuickStart`]; a benchmark uses
    /// [`Jit::Full`].
    pub fn jit(mut self, jit: Jit) -> CuratorDiscoveryBuilder {
        self.jit = jit;
        self
    }

    /// Launches the JVM (compiling the driver first if this process has not yet, on a blocking
    /// thread) and waits until its `ServiceDiscovery` has started.
    ///
    /// # Errors
    /// As [`CuratorProcess::spawn`];
    /// [`TestingError::Timeout`](crate::TestingError::Timeout) if it has not started within the
    /// start timeout; [`TestingError::Io`](crate::TestingError::Io) if the driver fails (it
    /// cannot connect, say), quoting its stderr.
    ///
    /// # Cancel safety
    /// Cancelling drops the JVM being started, which is SIGKILLed: its session ends when the
    /// server expires it.
    pub async fn start(self) -> Result<CuratorDiscovery> {
        let mut args = Vec::new();
        if let Some(timeout) = self.session_timeout {
            args.extend(["--session-timeout-ms".to_owned(), timeout.as_millis().to_string()]);
        }
        args.extend(["discovery".to_owned(), self.connect.clone(), self.base_path.clone()]);
        if self.watch_instances {
            args.push("watch-instances".to_owned());
        }
        if self.enabled_field {
            args.push("enabled-field".to_owned());
        }
        let jit = self.jit;
        let mut process = tokio::task::spawn_blocking(move || CuratorProcess::spawn_with_jit(jit, args))
            .await
            .map_err(|join| io_error("starting the Curator driver", std::io::Error::other(join)))??;
        let session = process.expect_line("SESSION ", self.start_timeout).await?;
        let session_id = session
            .split_whitespace()
            .next()
            .and_then(|hex| u64::from_str_radix(hex, 16).ok())
            .map(|id| id as i64)
            .ok_or_else(|| unexpected(&process, "SESSION <hex id> timeout-ms=<ms>", &session))?;
        process.lines_until("STARTED", self.start_timeout).await?;
        Ok(CuratorDiscovery { process, session_id, reply_timeout: self.reply_timeout })
    }
}

/// Where a discovery starts: its builder, or the builder's defaults.
impl CuratorDiscovery {
    /// Settings for a discovery on the server(s) at `connect`, its services under `base_path`.
    pub fn builder(connect: impl Into<String>, base_path: impl Into<String>) -> CuratorDiscoveryBuilder {
        CuratorDiscoveryBuilder {
            connect: connect.into(),
            base_path: base_path.into(),
            watch_instances: false,
            enabled_field: false,
            session_timeout: None,
            start_timeout: DISCOVERY_START,
            reply_timeout: DISCOVERY_REPLY,
            jit: Jit::QuickStart,
        }
    }

    /// A discovery with the builder's defaults ([`builder`](Self::builder)): Curator's own
    /// defaults, a 10 s session.
    ///
    /// # Errors
    /// As [`CuratorDiscoveryBuilder::start`].
    ///
    /// # Cancel safety
    /// As [`CuratorDiscoveryBuilder::start`].
    pub async fn start(connect: &str, base_path: &str) -> Result<CuratorDiscovery> {
        CuratorDiscovery::builder(connect, base_path).start().await
    }
}
