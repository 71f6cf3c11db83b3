//! The crate's one error type.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong while starting, driving or probing test servers and proxies.
///
/// The library never panics; every failure ends up here. Start-up failures carry the last lines
/// of the server's log so that a failing test explains itself.
///
/// # Example
/// ```no_run
/// # async fn demo() {
/// use zk_recipes_testing::{TestingError, TestingServer};
///
/// match TestingServer::start().await {
///     Ok(server) => println!("serving on {}", server.connect_string()),
///     Err(TestingError::MissingJar { path, .. }) => eprintln!("install {}", path.display()),
///     Err(other) => eprintln!("{other}"),
/// }
/// # }
/// ```
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum TestingError {
    /// A jar the server (or the Curator interop classpath) needs is not on this machine.
    #[error(
        "jar `{}` not found ({what}); run `scripts/install-deps.sh` (or set ZOOKEEPER_CLASSPATH)",
        path.display()
    )]
    MissingJar {
        /// The file that was looked for.
        path: PathBuf,
        /// Which classpath needed it ("ZooKeeper server" or "Curator client").
        what: &'static str,
    },

    /// No `java` executable: neither `$JAVA`, `java` on `PATH` nor `$JAVA_HOME/bin/java`.
    #[error("no java binary found ({tried}); run `scripts/install-deps.sh` or set JAVA")]
    JavaNotFound {
        /// The places that were tried.
        tried: String,
    },

    /// kazoo 2.11 is not installed in the interop tests' virtualenv.
    #[error(
        "kazoo {} not found in the virtualenv {} ({found}); run `bash scripts/install-deps.sh` \
         (it makes the virtualenv and pip-installs kazoo=={}.*), or set ZK_RECIPES_VENV",
        crate::venv::KAZOO_VERSION,
        venv.display(),
        crate::venv::KAZOO_VERSION
    )]
    KazooNotFound {
        /// The virtualenv looked in.
        venv: PathBuf,
        /// What was found instead.
        found: String,
    },

    /// The `openssl` command line failed (or is missing) while making a TLS test server's
    /// certificates.
    #[error(
        "`{}` failed while {what}: {reason}; install openssl (`scripts/install-deps.sh` does) or set OPENSSL",
        binary.display()
    )]
    Openssl {
        /// The binary run.
        binary: PathBuf,
        /// What it was making.
        what: String,
        /// Its exit status and stderr, or why it did not run.
        reason: String,
    },

    /// An I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// The server JVM exited before it answered `ruok` (or while it was expected to serve).
    #[error("ZooKeeper JVM (pid {pid}, port {port}) exited during start-up; last log lines:\n{log_tail}")]
    ServerExited {
        /// The JVM's process id.
        pid: u32,
        /// The client port it was configured with.
        port: u16,
        /// The last lines of its log.
        log_tail: String,
    },

    /// The server could not bind its ports, even after retrying with fresh ones.
    #[error("ZooKeeper could not bind its ports after {attempts} attempts; last log lines:\n{log_tail}")]
    AddressInUse {
        /// How many start-ups were tried.
        attempts: u32,
        /// The last lines of the last attempt's log.
        log_tail: String,
    },

    /// The server (or ensemble) did not become ready before the deadline.
    #[error("ZooKeeper on port {port} did not serve within {:.1} s; last log lines:\n{log_tail}", .timeout.as_secs_f64())]
    StartTimeout {
        /// The client port that was probed.
        port: u16,
        /// The deadline that passed.
        timeout: Duration,
        /// The last lines of its log.
        log_tail: String,
    },

    /// Some other wait did not finish in time.
    #[error("timed out after {:.1} s while {what}", .timeout.as_secs_f64())]
    Timeout {
        /// What was being waited for.
        what: String,
        /// The deadline that passed.
        timeout: Duration,
    },

    /// A four-letter-word command failed or answered something unexpected.
    #[error("four-letter word `{command}` to {address}: {reason}")]
    FourLetterWord {
        /// The command, e.g. `ruok`.
        command: String,
        /// The server address.
        address: String,
        /// What went wrong.
        reason: String,
    },

    /// A cluster member index out of range.
    #[error("no member {index}: the cluster has {size} members")]
    NoSuchMember {
        /// The index asked for.
        index: usize,
        /// The number of members.
        size: usize,
    },

    /// No running member of the ensemble reports `Mode: leader`.
    #[error("no member of the ensemble is leader")]
    NoLeader,

    /// The operation needs a running server and the server is stopped.
    #[error("the ZooKeeper server is not running")]
    NotRunning,

    /// An argument was out of range (e.g. an empty cluster, a zero tick time).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The [`FaultProxy`](crate::FaultProxy) was dropped before the awaited event happened.
    #[error("the fault proxy was shut down")]
    ProxyClosed,

    /// A partitionable cluster ([`TestingClusterBuilder::partitionable`]) cannot be built here:
    /// it needs root, iproute2's `ip`, network namespaces, veth pairs and bridges. Tests that need
    /// one skip on this error, and only on it.
    ///
    /// [`TestingClusterBuilder::partitionable`]: crate::TestingClusterBuilder::partitionable
    #[error("partitionable clusters are unavailable here: {reason}")]
    NetworkUnavailable {
        /// What is missing.
        reason: String,
    },

    /// A network fault was asked of a cluster built without
    /// [`partitionable(true)`](crate::TestingClusterBuilder::partitionable).
    #[error("the cluster was built without partitionable(true): its members share loopback")]
    NotPartitionable,

    /// The kernel cannot delay or drop packets: no `netem` queueing discipline (or no `tc`).
    #[error("tc netem is unavailable: {reason}")]
    NetemUnavailable {
        /// What `tc` said.
        reason: String,
    },

    /// An `ip` or `tc` command failed where it should have worked.
    #[error("`{command}` failed: {reason}")]
    NetworkCommand {
        /// The command line.
        command: String,
        /// Its exit status and stderr.
        reason: String,
    },
}

impl TestingError {
    pub(crate) fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        TestingError::Io { context: context.into(), source }
    }
}

/// Shorthand for `Result<T, TestingError>`.
///
/// # Example
/// ```
/// use zk_recipes_testing::{Result, TestingServer};
///
/// /// The number of znodes a fresh server holds.
/// async fn fresh_znode_count() -> Result<u64> {
///     let server = TestingServer::start().await?;
///     server.znode_count().await
/// }
/// ```
pub type Result<T, E = TestingError> = std::result::Result<T, E>;
