//! What standalone servers and ensemble members share: settings, `zoo.cfg`, spawning a JVM and
//! waiting until it serves.

use std::ffi::OsString;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::classpath::{java_binary, jvm_flags, zookeeper_classpath, Jit};
use crate::error::{Result, TestingError};
use crate::four_letter::{four_letter_word, parse_srvr_mode, ServerMode};
use crate::process::{log_len, log_shows_address_in_use, log_tail, JvmProcess};

/// Four-letter words every server answers.
pub(crate) const FOUR_LETTER_WHITELIST: &str = "ruok,srvr,stat,mntr,cons,wchc,wchs,dump,conf,envi";

/// Log lines included in start-up errors.
pub(crate) const LOG_TAIL_LINES: usize = 40;

/// How often start-up polls the server.
const READY_POLL: Duration = Duration::from_millis(25);

/// How often a wait for a server's mode polls it.
pub(crate) const DEFAULT_PROBE_POLL: Duration = READY_POLL;

/// How long a single readiness probe may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// Server settings shared by [`TestingServerBuilder`](crate::TestingServerBuilder) and
/// [`TestingClusterBuilder`](crate::TestingClusterBuilder).
#[derive(Debug, Clone)]
pub(crate) struct Tuning {
    pub(crate) tick_time: Duration,
    pub(crate) min_session_timeout: Duration,
    pub(crate) max_session_timeout: Duration,
    pub(crate) container_check_interval: Duration,
    pub(crate) start_timeout: Duration,
    pub(crate) jit: Jit,
    /// TTL nodes allowed (`zookeeper.extendedTypesEnabled`).
    pub(crate) extended_types: bool,
    /// The JVM's maximum heap (`-Xmx`), in MiB.
    pub(crate) heap_mib: u32,
    /// SASL DIGEST-MD5 users (`user`, `password`) the server accepts; none: SASL off.
    pub(crate) sasl_users: Vec<(String, String)>,
}

impl Tuning {
    pub(crate) const DEFAULT_TICK_TIME: Duration = Duration::from_millis(200);
    pub(crate) const DEFAULT_MIN_SESSION_TIMEOUT: Duration = Duration::from_millis(1_000);
    pub(crate) const DEFAULT_MAX_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
    pub(crate) const DEFAULT_CONTAINER_CHECK_INTERVAL: Duration = Duration::from_millis(500);
    pub(crate) const DEFAULT_HEAP_MIB: u32 = 256;

    pub(crate) fn new(start_timeout: Duration) -> Tuning {
        Tuning {
            tick_time: Self::DEFAULT_TICK_TIME,
            min_session_timeout: Self::DEFAULT_MIN_SESSION_TIMEOUT,
            max_session_timeout: Self::DEFAULT_MAX_SESSION_TIMEOUT,
            container_check_interval: Self::DEFAULT_CONTAINER_CHECK_INTERVAL,
            start_timeout,
            jit: Jit::QuickStart,
            extended_types: true,
            heap_mib: Self::DEFAULT_HEAP_MIB,
            sasl_users: Vec::new(),
        }
    }

    pub(crate) fn validate(&self) -> Result<()> {
        if self.tick_time.as_millis() == 0 {
            return Err(TestingError::InvalidArgument("tick time must be at least 1 ms".to_owned()));
        }
        if self.min_session_timeout > self.max_session_timeout {
            return Err(TestingError::InvalidArgument(format!(
                "min session timeout {:?} exceeds max session timeout {:?}",
                self.min_session_timeout, self.max_session_timeout
            )));
        }
        if self.heap_mib < 32 {
            return Err(TestingError::InvalidArgument(format!(
                "a heap of {} MiB is too small",
                self.heap_mib
            )));
        }
        if self.container_check_interval.as_millis() == 0 {
            return Err(TestingError::InvalidArgument(
                "container check interval must be at least 1 ms".to_owned(),
            ));
        }
        Ok(())
    }

    /// The `zoo.cfg` lines common to every server.
    pub(crate) fn common_config(&self, data_dir: &Path, client_host: Ipv4Addr, client_port: u16) -> String {
        let mut config = String::new();
        let _ = writeln!(config, "tickTime={}", self.tick_time.as_millis());
        let _ = writeln!(config, "dataDir={}", data_dir.display());
        let _ = writeln!(config, "clientPort={client_port}");
        let _ = writeln!(config, "clientPortAddress={client_host}");
        let _ = writeln!(config, "minSessionTimeout={}", self.min_session_timeout.as_millis());
        let _ = writeln!(config, "maxSessionTimeout={}", self.max_session_timeout.as_millis());
        let _ = writeln!(config, "maxClientCnxns=0");
        let _ = writeln!(config, "admin.enableServer=false");
        let _ = writeln!(config, "4lw.commands.whitelist={FOUR_LETTER_WHITELIST}");
        if !self.sasl_users.is_empty() {
            let _ = writeln!(
                config,
                "authProvider.sasl=org.apache.zookeeper.server.auth.SASLAuthenticationProvider"
            );
        }
        config
    }

    /// The JAAS configuration of the server's SASL users (`Server` section, DIGEST-MD5); `None`
    /// without SASL users.
    pub(crate) fn jaas_config(&self) -> Option<String> {
        if self.sasl_users.is_empty() {
            return None;
        }
        let mut jaas =
            String::from("Server {\n    org.apache.zookeeper.server.auth.DigestLoginModule required");
        for (user, password) in &self.sasl_users {
            let _ = write!(jaas, "\n    user_{user}=\"{password}\"");
        }
        jaas.push_str(";\n};\n");
        Some(jaas)
    }
}

/// The java binary and classpath, looked up once per server.
#[derive(Debug, Clone)]
pub(crate) struct Jvm {
    java: PathBuf,
    classpath: String,
}

impl Jvm {
    pub(crate) fn locate() -> Result<Jvm> {
        Ok(Jvm { classpath: zookeeper_classpath()?, java: java_binary()? })
    }

    /// Runs ZooKeeper's command-line client (`zkCli.sh`'s `ZooKeeperMain`) once against `server`
    /// with `command` and returns its output (stdout then stderr), or the output as the error if
    /// it exits with a failure.
    pub(crate) async fn zookeeper_cli(
        &self,
        server: SocketAddr,
        command: &[&str],
        timeout: Duration,
    ) -> Result<String> {
        let mut cli = tokio::process::Command::new(&self.java);
        cli.args(["-Xmx64m", "-XX:+UseSerialGC", "-XX:-UsePerfData", "-XX:TieredStopAtLevel=1"])
            .args(["-Djava.net.preferIPv4Stack=true", "-Dzookeeper.jmx.log4j.disable=true"])
            .arg("-cp")
            .arg(&self.classpath)
            .args(["org.apache.zookeeper.ZooKeeperMain", "-server", &server.to_string()])
            .args(command)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        let context = || format!("running zkCli {} against {server}", command.join(" "));
        let output = tokio::time::timeout(timeout, cli.output())
            .await
            .map_err(|_| TestingError::Timeout { what: context(), timeout })?
            .map_err(|err| TestingError::io(context(), err))?;
        let text =
            String::from_utf8_lossy(&output.stdout).into_owned() + &String::from_utf8_lossy(&output.stderr);
        if output.status.success() {
            Ok(text)
        } else {
            Err(TestingError::io(context(), std::io::Error::other(format!("{}: {text}", output.status))))
        }
    }
}

/// Everything needed to (re)start one server process.
#[derive(Debug, Clone)]
pub(crate) struct Launch {
    pub(crate) jvm: Jvm,
    pub(crate) main_class: &'static str,
    pub(crate) config_path: PathBuf,
    pub(crate) log_path: PathBuf,
    pub(crate) work_dir: PathBuf,
    /// The temp dir (server or whole cluster) the watchdog deletes if the test process dies.
    pub(crate) cleanup_dir: PathBuf,
    pub(crate) client_address: SocketAddr,
    /// Every port the server binds besides the client port (quorum and election ports).
    pub(crate) peer_ports: Vec<u16>,
    /// The TLS client port (`secureClientPort`) if the server has one: the server is ready only
    /// once it accepts connections there too (it binds it after the plain port).
    pub(crate) secure_address: Option<SocketAddr>,
    pub(crate) container_check_interval: Duration,
    pub(crate) jit: Jit,
    pub(crate) extended_types: bool,
    pub(crate) heap_mib: u32,
    /// The JAAS file of the server's SASL users, if it has any.
    pub(crate) jaas_path: Option<PathBuf>,
    /// More `-Dname=value` flags (a cluster's `readonlymode.enabled`).
    pub(crate) system_properties: Vec<String>,
    /// The network namespace to run the JVM in (`ip netns exec NAMESPACE java …`), and `ip`.
    pub(crate) namespace: Option<(PathBuf, String)>,
}

/// Why a start-up attempt failed.
#[derive(Debug)]
pub(crate) enum LaunchError {
    /// The JVM died complaining about a busy port; retrying (with other ports) may help.
    AddressInUse { log_tail: String },
    /// Anything else.
    Failed(TestingError),
}

impl From<TestingError> for LaunchError {
    fn from(err: TestingError) -> Self {
        LaunchError::Failed(err)
    }
}

/// What "ready" means.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Readiness {
    /// `ruok` answers `imok` and `srvr` shows a mode (`ruok` alone answers `imok` before the
    /// server serves requests).
    Imok,
    /// `srvr` shows `Mode: leader` or `Mode: follower`.
    QuorumMember,
}

impl Launch {
    /// Spawns the JVM (no waiting). Returns the process and the log offset it started at.
    pub(crate) async fn spawn(&self) -> Result<(JvmProcess, u64)> {
        let log_from = log_len(&self.log_path);
        let mut args: Vec<OsString> = jvm_flags(
            self.container_check_interval.as_millis(),
            self.jit,
            self.extended_types,
            self.heap_mib,
        );
        args.extend(self.system_properties.iter().map(OsString::from));
        if let Some(jaas_path) = &self.jaas_path {
            let mut flag = OsString::from("-Djava.security.auth.login.config=");
            flag.push(jaas_path);
            args.push(flag);
        }
        args.push("-cp".into());
        args.push(self.jvm.classpath.clone().into());
        args.push(self.main_class.into());
        args.push(self.config_path.clone().into());
        // `ip netns exec` execs java in place: the pid the watchdog reports is still java's.
        let program = match &self.namespace {
            Some((ip, namespace)) => {
                let mut prefix: Vec<OsString> =
                    vec!["netns".into(), "exec".into(), namespace.into(), self.jvm.java.clone().into()];
                prefix.append(&mut args);
                args = prefix;
                ip.as_path()
            }
            None => self.jvm.java.as_path(),
        };
        let process =
            JvmProcess::spawn(program, args, &self.log_path, &self.cleanup_dir, &self.work_dir).await?;
        tracing::debug!(pid = process.pid(), address = %self.client_address, "spawned ZooKeeper JVM");
        Ok((process, log_from))
    }

    /// Spawns the JVM and waits until it is ready; kills it again on failure.
    pub(crate) async fn start(
        &self,
        readiness: Readiness,
        timeout: Duration,
    ) -> Result<JvmProcess, LaunchError> {
        let (process, log_from) = self.spawn().await?;
        match self.wait_ready(&process, log_from, readiness, timeout).await {
            Ok(()) => Ok(process),
            Err(err) => {
                let _ = process.kill().await;
                Err(err)
            }
        }
    }

    /// Polls until the server is ready, it dies, or `timeout` passes.
    pub(crate) async fn wait_ready(
        &self,
        process: &JvmProcess,
        log_from: u64,
        readiness: Readiness,
        timeout: Duration,
    ) -> Result<(), LaunchError> {
        let deadline = Instant::now() + timeout;
        loop {
            if !process.is_alive() {
                return Err(self.death_error(process, log_from));
            }
            if probe(self.client_address, readiness).await && self.secure_port_accepts().await {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(LaunchError::Failed(TestingError::StartTimeout {
                    port: self.client_address.port(),
                    timeout,
                    log_tail: log_tail(&self.log_path, log_from, LOG_TAIL_LINES),
                }));
            }
            tokio::time::sleep(READY_POLL).await;
        }
    }

    /// The error for a JVM found dead during start-up.
    pub(crate) fn death_error(&self, process: &JvmProcess, log_from: u64) -> LaunchError {
        let log_tail = log_tail(&self.log_path, log_from, LOG_TAIL_LINES);
        if log_shows_address_in_use(&self.log_path, log_from) || self.a_port_is_taken() {
            LaunchError::AddressInUse { log_tail }
        } else {
            LaunchError::Failed(TestingError::ServerExited {
                pid: process.pid(),
                port: self.client_address.port(),
                log_tail,
            })
        }
    }
}

impl Launch {
    /// True if the server has no TLS port, or it accepts a TCP connection there.
    async fn secure_port_accepts(&self) -> bool {
        match self.secure_address {
            None => true,
            Some(address) => {
                matches!(
                    tokio::time::timeout(PROBE_TIMEOUT, tokio::net::TcpStream::connect(address)).await,
                    Ok(Ok(_))
                )
            }
        }
    }

    /// True if another socket holds one of this server's ports (the JVM is dead, so not it): the
    /// busy-port check that works without a log (e.g. with the slf4j-nop binding).
    fn a_port_is_taken(&self) -> bool {
        let secure_port = self.secure_address.map(|address| address.port());
        std::iter::once(self.client_address.port())
            .chain(self.peer_ports.iter().copied())
            .chain(secure_port)
            .any(|port| {
                matches!(
                    std::net::TcpListener::bind(SocketAddr::from((std::net::Ipv4Addr::LOCALHOST, port))),
                    Err(err) if err.kind() == std::io::ErrorKind::AddrInUse
                )
            })
    }
}

/// One readiness probe.
pub(crate) async fn probe(address: SocketAddr, readiness: Readiness) -> bool {
    match readiness {
        Readiness::Imok => {
            matches!(four_letter_word(address, "ruok", PROBE_TIMEOUT).await, Ok(answer) if answer.trim() == "imok")
                && probe_mode(address).await.is_some()
        }
        Readiness::QuorumMember => match four_letter_word(address, "srvr", PROBE_TIMEOUT).await {
            Ok(answer) => parse_srvr_mode(&answer).is_some_and(|mode| mode.is_quorum_member()),
            Err(_) => false,
        },
    }
}

/// The mode of a server if it answers `srvr` with one.
pub(crate) async fn probe_mode(address: SocketAddr) -> Option<ServerMode> {
    let answer = four_letter_word(address, "srvr", PROBE_TIMEOUT).await.ok()?;
    parse_srvr_mode(&answer)
}

/// Writes `contents` to `path`.
pub(crate) fn write_file(path: &Path, contents: &str) -> Result<()> {
    std::fs::write(path, contents).map_err(|err| TestingError::io(format!("writing {}", path.display()), err))
}

/// Creates `path` and its parents.
pub(crate) fn create_dir(path: &Path) -> Result<()> {
    std::fs::create_dir_all(path).map_err(|err| TestingError::io(format!("creating {}", path.display()), err))
}

/// A fresh temp dir for server data.
pub(crate) fn temp_dir(prefix: &str) -> Result<tempfile::TempDir> {
    tempfile::Builder::new()
        .prefix(prefix)
        .tempdir()
        .map_err(|err| TestingError::io("creating a temp dir for ZooKeeper data", err))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_spells_out_the_documented_defaults() {
        let tuning = Tuning::new(Duration::from_secs(30));
        let config = tuning.common_config(Path::new("/tmp/data"), Ipv4Addr::LOCALHOST, 2181);
        for line in [
            "tickTime=200",
            "dataDir=/tmp/data",
            "clientPort=2181",
            "clientPortAddress=127.0.0.1",
            "minSessionTimeout=1000",
            "maxSessionTimeout=60000",
            "maxClientCnxns=0",
            "admin.enableServer=false",
            "4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,wchc,wchs,dump,conf,envi",
        ] {
            assert!(config.lines().any(|have| have == line), "missing {line} in\n{config}");
        }
    }

    #[test]
    fn validation_rejects_inverted_session_bounds() {
        let mut tuning = Tuning::new(Duration::from_secs(30));
        assert!(tuning.validate().is_ok());
        tuning.min_session_timeout = Duration::from_secs(120);
        assert!(matches!(tuning.validate(), Err(TestingError::InvalidArgument(_))));
    }
}
