//! The command line.

use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use zk_recipes_framework::{Framework, FrameworkBuilder};

/// See and act on ZooKeeper recipes: locks, leaders, semaphores, queues, service discovery — made
/// by zk-recipes or by Apache Curator.
///
/// Exit codes: 0 ok, 1 error, 2 usage, 3 not held / no leader / empty.
#[derive(Debug, Parser)]
#[command(name = "zkr", version)]
pub struct Cli {
    #[command(flatten)]
    pub connection: Connection,
    /// Print one JSON document instead of a table (`services NAME`: one JSON line per instance).
    #[arg(long, global = true)]
    pub json: bool,
    #[command(flatten)]
    pub hold: HoldOptions,
    #[command(subcommand)]
    pub command: Command,
}

/// Where and how to connect.
#[derive(Debug, Args)]
pub struct Connection {
    /// The ZooKeeper connect string.
    #[arg(long, global = true, env = "ZK_CONNECT", default_value = "127.0.0.1:2181")]
    pub connect: String,
    /// A namespace (chroot) every path is under.
    #[arg(long, global = true)]
    pub namespace: Option<String>,
    /// The session timeout to ask for.
    #[arg(long, global = true, default_value = "10s", value_parser = parse_duration)]
    pub session_timeout: Duration,
    /// How long to wait for a session before giving up.
    #[arg(long, global = true, default_value = "10s", value_parser = parse_duration)]
    pub connect_timeout: Duration,
    /// Digest authentication, `user:password`.
    #[arg(long, global = true, value_name = "USER:PASSWORD")]
    pub digest: Option<String>,
    /// TLS: the CA certificates (PEM) to trust; turns TLS on (needs the `tls` feature).
    #[arg(long, global = true, value_name = "FILE")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// TLS: this client's certificate (PEM), with `--tls-key`.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<std::path::PathBuf>,
    /// TLS: this client's private key (PEM), with `--tls-cert`.
    #[arg(long, global = true, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<std::path::PathBuf>,
}

impl Connection {
    /// A framework for these settings (not yet connected).
    pub fn framework(&self) -> Result<Framework, Box<dyn std::error::Error>> {
        let mut builder: FrameworkBuilder = Framework::builder(&self.connect)
            .session_timeout(self.session_timeout)
            .connection_timeout(self.connect_timeout);
        if let Some(namespace) = &self.namespace {
            builder = builder.namespace(namespace.clone());
        }
        if let Some(digest) = &self.digest {
            let (user, password) = digest.split_once(':').ok_or("--digest takes user:password")?;
            builder = builder.digest_auth(user, password);
        }
        if self.tls_ca.is_some() || self.tls_cert.is_some() {
            builder = self.with_tls(builder)?;
        }
        Ok(builder.start()?)
    }

    #[cfg(feature = "tls")]
    fn with_tls(&self, builder: FrameworkBuilder) -> Result<FrameworkBuilder, Box<dyn std::error::Error>> {
        use zk_recipes_framework::zookeeper_client::TlsOptions;
        let read = |file: &std::path::Path| {
            std::fs::read_to_string(file).map_err(|err| format!("reading {}: {err}", file.display()))
        };
        let mut options = TlsOptions::new();
        if let Some(ca) = &self.tls_ca {
            options = options.with_pem_ca(&read(ca)?)?;
        }
        if let (Some(cert), Some(key)) = (&self.tls_cert, &self.tls_key) {
            options = options.with_pem_identity(&read(cert)?, &read(key)?)?;
        }
        Ok(builder.tls(options))
    }

    #[cfg(not(feature = "tls"))]
    fn with_tls(&self, _builder: FrameworkBuilder) -> Result<FrameworkBuilder, Box<dyn std::error::Error>> {
        Err("this zkr was built without TLS: cargo install --path crates/cli --features tls".into())
    }

    /// How long to wait for the first session.
    pub fn connect_timeout(&self) -> Duration {
        self.connect_timeout
    }
}

/// How the acting commands hold and let go.
#[derive(Debug, Args)]
pub struct HoldOptions {
    /// How long to wait for the lock, lease or leadership (default: for ever).
    #[arg(long, global = true, value_parser = parse_duration)]
    pub timeout: Option<Duration>,
    /// After SIGTERM, how long the command may take to exit before SIGKILL.
    #[arg(long, global = true, default_value = "5s", value_parser = parse_duration)]
    pub grace: Duration,
}

/// What to do.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Holders and waiters of the mutex or read-write lock at PATH, in order.
    Locks {
        /// The lock's path.
        path: String,
    },
    /// The leader and the participants of the leader latch or selector at PATH. With --watch:
    /// one line per change of leader (or of the leader's data) as it happens, until Ctrl-C.
    Leader {
        /// The election's path.
        path: String,
        /// Keep watching: print the leader now, then each change, read from the server (joins
        /// nothing, creates no node).
        #[arg(long)]
        watch: bool,
        /// With --watch: the election's kind (default: from the nodes there now; latch if none).
        #[arg(long, value_enum, requires = "watch")]
        layout: Option<crate::leader_watch::LayoutArg>,
    },
    /// The semaphore at PATH (V2 layout): leases (with --max, holders and waiters apart) and the
    /// internal lock's holder. With a command after `--`: run it while holding a lease.
    Semaphore {
        /// The semaphore's path.
        path: String,
        /// The semaphore's maximum leases, for running a command (default 1).
        #[arg(long)]
        leases: Option<u32>,
        /// The semaphore's maximum leases, if known, to tell holders from waiters (the first MAX
        /// lease nodes in line hold, as the recipe's `participants()` splits them).
        #[arg(long)]
        max: Option<u32>,
        /// The command to run while holding a lease.
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// Depth, items in flight, oldest item, priorities and due times of the queue at PATH.
    Queue {
        /// The queue's path.
        path: String,
        /// The lock path of a lock-safe queue (Curator's `lockPath`): shows items in flight.
        #[arg(long)]
        lock_path: Option<String>,
    },
    /// The ensemble's configuration (`/zookeeper/config`): each server's id, role, quorum,
    /// election and client addresses, the config version, and (marked `*`) the server this client
    /// is connected to.
    Ensemble,
    /// Every recipe found under PATH, one line each.
    Tree {
        /// Where to look.
        path: String,
    },
    /// Asks the holder of a revocable lock node to release it (Curator's `Revoker`): the lock's
    /// path and the node's name as `zkr locks PATH` prints it, or the node's full path alone.
    Revoke {
        /// The lock's path (as given to `zkr locks`); or, alone, the node's full path.
        path: String,
        /// The node's name, as the NODE column of `zkr locks PATH` shows it (`node` in --json).
        node: Option<String>,
    },
    /// Service discovery (Curator's `curator-x-discovery`, Spring Cloud Zookeeper): without NAME,
    /// the services under the base path and their instance counts; with NAME, that service's
    /// instances (with --json, one line per instance: its JSON exactly as stored). Read-only.
    Services {
        /// A service's name: list its instances.
        name: Option<String>,
        /// Where the services are: Curator's `basePath`. The default is Spring Cloud Zookeeper's
        /// (`spring.cloud.zookeeper.discovery.root`); Curator has none, and its own example
        /// (curator-examples' `DiscoveryExample`) uses `/discovery/example`.
        #[arg(long, value_name = "PATH", default_value = DEFAULT_SERVICES_BASE_PATH)]
        base_path: String,
    },
    /// Runs a command while holding the mutex at PATH; stops it if the lock is lost.
    Lock {
        /// The mutex's path.
        path: String,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
    /// Runs a command while leader (LeaderLatch layout); stops it on losing leadership.
    Elect {
        /// The election's path.
        path: String,
        /// This participant's id.
        #[arg(long)]
        id: String,
        /// After losing leadership, wait to lead again and run the command again.
        #[arg(long)]
        requeue: bool,
        /// The command and its arguments, after `--`.
        #[arg(last = true, required = true)]
        command: Vec<String>,
    },
}

impl Cli {
    /// Checks what clap cannot, before anything connects: on a mistake, prints it with the usage
    /// and exits with code 2, as clap does.
    pub fn check(&self) {
        let checked = match &self.command {
            Command::Revoke { path, node } => revoked_node(path, node.as_deref()).map(drop),
            Command::Services { name, base_path } => services_path(base_path, name.as_deref()).map(drop),
            _ => Ok(()),
        };
        if let Err(message) = checked {
            use clap::CommandFactory;
            Cli::command().error(clap::error::ErrorKind::ValueValidation, message).exit();
        }
    }
}

/// The full path of the node `zkr revoke PATH [NODE]` names: `PATH/NODE` when a node name
/// follows the lock's path, else `PATH` itself, the node's full path.
///
/// # Errors
/// What to write instead: a name alone (it needs the lock's path before it), a relative lock
/// path, or a node "name" with a `/` in it.
pub fn revoked_node(path: &str, node: Option<&str>) -> Result<String, String> {
    let Some(node) = node else {
        if !path.starts_with('/') {
            return Err(format!(
                "{path:?} is a node's name, not its path: give the lock's path before it \
                 (zkr revoke /the/lock {path}), or the node's full path"
            ));
        }
        return Ok(path.to_owned());
    };
    if !path.starts_with('/') {
        return Err(format!("{path:?} is not a lock's path: one starts with '/', as for zkr locks"));
    }
    if node.is_empty() || node.contains('/') {
        return Err(format!(
            "{node:?} is not a node's name as zkr locks prints it: give the lock's path and the name \
             (zkr revoke {path} NAME), or the node's full path alone"
        ));
    }
    Ok(zk_recipes_framework::path::join(path, node))
}

/// Where `zkr services` looks by default: Spring Cloud Zookeeper's root, where most Curator
/// users' services are.
pub const DEFAULT_SERVICES_BASE_PATH: &str = "/services";

/// The path `zkr services [NAME] --base-path BASE` reads: `BASE`, or the service's node
/// `BASE/NAME`.
///
/// # Errors
/// What is wrong: a base path that is not a ZooKeeper path, or a name that is not one node name
/// (empty, with a `/`, `.` or `..`), as the discovery crate refuses it.
pub fn services_path(base_path: &str, name: Option<&str>) -> Result<String, String> {
    use zk_recipes_framework::path;
    path::validate(base_path).map_err(|reason| format!("--base-path {base_path:?}: {reason}"))?;
    let Some(name) = name else { return Ok(base_path.to_owned()) };
    let reason = match name {
        "" => Some("is empty"),
        "." | ".." => Some("is a relative path name"),
        _ if name.contains('/') => Some("contains '/' (give the base path with --base-path)"),
        _ => None,
    };
    if let Some(reason) = reason {
        return Err(format!("the service name {name:?} {reason}"));
    }
    let service_path = path::join(base_path, name);
    path::validate(&service_path).map_err(|reason| format!("{service_path:?}: {reason}"))?;
    Ok(service_path)
}

/// `500ms`, `10s`, `2m`, or a bare number of seconds.
fn parse_duration(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    let (number, unit) = match text.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(at) => text.split_at(at),
        None => (text, "s"),
    };
    let value: f64 =
        number.parse().map_err(|_| format!("{text:?} is not a duration (try 500ms, 10s, 2m)"))?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(format!("{text:?}: unknown unit {unit:?} (ms, s, m, h)")),
    };
    Duration::try_from_secs_f64(seconds).map_err(|err| format!("{text:?}: {err}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("3"), Ok(Duration::from_secs(3)));
        assert!(parse_duration("ten").is_err());
        assert!(parse_duration("5y").is_err());
    }

    #[test]
    fn revoke_takes_the_lock_path_and_the_name_zkr_locks_prints_or_a_full_path() {
        let name = "_c_85ad335e-99f8-4aee-aa55-f82ec6a924c6-lock-0000000000";
        let full = format!("/zkr/orders/{name}");
        assert_eq!(revoked_node("/zkr/orders", Some(name)), Ok(full.clone()));
        assert_eq!(revoked_node("/zkr/orders/", Some(name)), Ok(full.clone()));
        assert_eq!(revoked_node(&full, None), Ok(full.clone()));
        let name_alone = revoked_node(name, None).unwrap_err();
        assert!(name_alone.contains("the lock's path before it"), "{name_alone}");
        assert!(revoked_node("/zkr/orders", Some(&full)).is_err(), "a path where the name goes");
        assert!(revoked_node("/zkr/orders", Some("")).is_err());
        assert!(revoked_node("zkr/orders", Some(name)).is_err(), "a relative lock path");

        let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied()).map(|cli| cli.command);
        match parse(&["zkr", "revoke", "/zkr/orders", name]) {
            Ok(Command::Revoke { path, node }) => {
                assert_eq!(revoked_node(&path, node.as_deref()), Ok(full.clone()));
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(parse(&["zkr", "revoke", &full]), Ok(Command::Revoke { node: None, .. })));
        assert!(parse(&["zkr", "revoke"]).is_err());
    }

    #[test]
    fn services_reads_the_base_path_or_one_service_under_it() {
        assert_eq!(services_path("/services", None), Ok("/services".to_owned()));
        assert_eq!(services_path("/services", Some("api")), Ok("/services/api".to_owned()));
        assert_eq!(services_path("/", Some("api")), Ok("/api".to_owned()));
        assert_eq!(services_path("/discovery/example", Some("api")), Ok("/discovery/example/api".to_owned()));
        for bad_name in ["", "a/b", ".", ".."] {
            assert!(services_path("/services", Some(bad_name)).is_err(), "{bad_name:?}");
        }
        assert!(services_path("services", None).is_err(), "a relative base path");
        assert!(services_path("/services/", None).is_err(), "a trailing '/'");

        let parse = |args: &[&str]| Cli::try_parse_from(args.iter().copied()).map(|cli| cli.command);
        match parse(&["zkr", "services"]) {
            Ok(Command::Services { name: None, base_path }) => {
                assert_eq!(base_path, DEFAULT_SERVICES_BASE_PATH);
            }
            other => panic!("{other:?}"),
        }
        match parse(&["zkr", "services", "api", "--base-path", "/discovery/example"]) {
            Ok(Command::Services { name: Some(name), base_path }) => {
                assert_eq!((name.as_str(), base_path.as_str()), ("api", "/discovery/example"));
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        Cli::command().debug_assert();
    }
}
