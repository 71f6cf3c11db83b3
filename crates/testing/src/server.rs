//! A standalone ZooKeeper server.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::classpath::Jit;
use crate::error::{Result, TestingError};
use crate::four_letter::{
    four_letter_word, mntr_of, mode_of, watches_of, znode_count_of, ServerMode, DEFAULT_FOUR_LETTER_TIMEOUT,
};
use crate::launch::{create_dir, temp_dir, write_file, Jvm, Launch, LaunchError, Readiness, Tuning};
use crate::ports::free_ports;
use crate::process::{log_tail, JvmProcess};
use crate::slot::ServerSlot;
use crate::sys::Signal;
use crate::tls::{TestingTls, TlsClientAuth};

/// Start-up attempts with fresh ports when the picked port turns out to be busy.
const FRESH_PORT_ATTEMPTS: u32 = 5;
/// Restart attempts on the same port while it is briefly busy.
const SAME_PORT_ATTEMPTS: u32 = 10;
/// Pause between same-port restart attempts.
const SAME_PORT_BACKOFF: Duration = Duration::from_millis(300);
/// How long [`TestingServer::stop`] waits after SIGTERM before it SIGKILLs.
pub(crate) const STOP_GRACE: Duration = Duration::from_secs(10);

/// Settings for a [`TestingServer`]; every setting has a documented default.
///
/// | setting | default | `zoo.cfg` / JVM |
/// |---|---|---|
/// | tick time | 200 ms | `tickTime=200` |
/// | min session timeout | 1 000 ms | `minSessionTimeout=1000` |
/// | max session timeout | 60 000 ms | `maxSessionTimeout=60000` |
/// | container check interval | 500 ms | `-Dznode.container.checkIntervalMs=500` |
/// | start timeout | 30 s | until `ruok` answers `imok` and `srvr` shows `Mode: standalone` |
/// | port | a free loopback port | `clientPort`, `clientPortAddress=127.0.0.1` |
/// | TLS | none | with [`tls`](Self::tls): `secureClientPort` (a free loopback port), Netty, PEM stores, `ssl.clientAuth` |
///
/// Always set: `maxClientCnxns=0` (no per-IP limit), `admin.enableServer=false`,
/// `4lw.commands.whitelist=ruok,srvr,stat,mntr,cons,wchc,wchs,dump,conf,envi`, and the JVM flags
/// `-Xmx256m -XX:+UseSerialGC -XX:-UsePerfData -XX:TieredStopAtLevel=1` (unless [`Jit::Full`])
/// `-XX:+ExitOnOutOfMemoryError -Djava.net.preferIPv4Stack=true
/// -Dzookeeper.admin.enableServer=false -Dzookeeper.extendedTypesEnabled=true` (TTL nodes)
/// `-Dzookeeper.preAllocSize=1024` (1 MiB transaction-log preallocation instead of 64 MiB).
///
/// The short tick makes the server check session expiry every 200 ms, so an expired session is
/// noticed within 200 ms of its deadline; sessions may be negotiated between 1 s and 60 s.
///
/// # Example
/// ```no_run
/// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
/// use std::time::Duration;
/// use zk_recipes_testing::TestingServer;
///
/// let server = TestingServer::builder()
///     .tick_time(Duration::from_millis(100))
///     .min_session_timeout(Duration::from_millis(500))
///     .start()
///     .await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is awaited"]
pub struct TestingServerBuilder {
    tuning: Tuning,
    port: Option<u16>,
    take_slot: bool,
    tls: Option<TlsClientAuth>,
}

impl Default for TestingServerBuilder {
    fn default() -> Self {
        TestingServerBuilder {
            tuning: Tuning::new(Duration::from_secs(30)),
            port: None,
            take_slot: true,
            tls: None,
        }
    }
}

impl TestingServerBuilder {
    /// A builder with the defaults in the table above.
    pub fn new() -> Self {
        Self::default()
    }

    /// ZooKeeper's `tickTime`; defaults to 200 ms.
    pub fn tick_time(mut self, tick_time: Duration) -> Self {
        self.tuning.tick_time = tick_time;
        self
    }

    /// The smallest session timeout the server grants (`minSessionTimeout`); defaults to 1 s.
    pub fn min_session_timeout(mut self, timeout: Duration) -> Self {
        self.tuning.min_session_timeout = timeout;
        self
    }

    /// The largest session timeout the server grants (`maxSessionTimeout`); defaults to 60 s.
    pub fn max_session_timeout(mut self, timeout: Duration) -> Self {
        self.tuning.max_session_timeout = timeout;
        self
    }

    /// Starts the server with TTL nodes refused (`-Dzookeeper.extendedTypesEnabled=false`), as
    /// a production server is by default. Defaults to allowing them.
    pub fn without_extended_types(mut self) -> Self {
        self.tuning.extended_types = false;
        self
    }

    /// The server JVM's maximum heap (`-Xmx`) in MiB; defaults to 256, which holds about 300,000
    /// small nodes. A benchmark of a million-node tree needs about 1,536.
    pub fn heap_mib(mut self, heap_mib: u32) -> Self {
        self.tuning.heap_mib = heap_mib;
        self
    }

    /// Accepts SASL DIGEST-MD5 authentication from `user` with `password` (a JAAS `Server`
    /// section with ZooKeeper's `DigestLoginModule`, and the SASL authentication provider). Call it
    /// once per user. A client with a wrong password is refused (`AuthFailed`).
    pub fn sasl_digest_user(mut self, user: &str, password: &str) -> Self {
        self.tuning.sasl_users.push((user.to_owned(), password.to_owned()));
        self
    }

    /// Adds a TLS client port (`secureClientPort` on 127.0.0.1, a free port) beside the plain one,
    /// which stays open (four-letter words and readiness probes use it). At start-up a throwaway
    /// CA signs a server certificate for `127.0.0.1` and `localhost` and client certificates
    /// (made with the `openssl` command line, see [`TestingTls`]); the server reads them as PEM
    /// key and trust stores (`ssl.keyStore.type=PEM`) and serves TLS through Netty
    /// (`serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory`).
    ///
    /// `client_auth` says whether clients must present a certificate signed by that CA.
    /// [`TestingServer::tls`] gives the CA and the client identities (PEM),
    /// [`TestingServer::secure_connect_string`] the address. Defaults to no TLS port.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
    /// use zk_recipes_testing::{TestingServer, TlsClientAuth};
    ///
    /// let server = TestingServer::builder().tls(TlsClientAuth::Need).start().await?;
    /// let tls = server.tls().expect("TLS");
    /// let (ca, cert, key) = (tls.ca_pem(), tls.client_cert_pem(), tls.client_key_pem());
    /// let secure_connect_string = server.secure_connect_string().expect("TLS");
    /// # Ok(()) }
    /// ```
    pub fn tls(mut self, client_auth: TlsClientAuth) -> Self {
        self.tls = Some(client_auth);
        self
    }

    /// How often empty containers (and expired TTL nodes) are reaped
    /// (`-Dznode.container.checkIntervalMs`); defaults to 500 ms. ZooKeeper reaps a container
    /// only after it has had a child.
    pub fn container_check_interval(mut self, interval: Duration) -> Self {
        self.tuning.container_check_interval = interval;
        self
    }

    /// How the server's JVM compiles its hot code; defaults to [`Jit::QuickStart`]. Benchmarks
    /// use [`Jit::Full`], the way a production server runs.
    pub fn jit(mut self, jit: Jit) -> Self {
        self.tuning.jit = jit;
        self
    }

    /// How long a start (or restart) waits until the server serves; defaults to 30 s.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.tuning.start_timeout = timeout;
        self
    }

    /// Uses this client port instead of a free one (no retry with another port if it is busy).
    pub fn port(mut self, port: u16) -> Self {
        self.port = Some(port);
        self
    }

    /// Does not take the process-wide [`ServerSlot`]. Only for a test that holds the slot itself
    /// and needs more than one standalone server; see [`ServerSlot`].
    pub fn without_slot(mut self) -> Self {
        self.take_slot = false;
        self
    }

    /// Takes the [`ServerSlot`] (unless [`without_slot`](Self::without_slot)), starts the server
    /// and waits until it serves: `ruok` answers `imok` and `srvr` shows its mode (`ruok`
    /// alone says `imok` a little before the server accepts sessions).
    ///
    /// # Errors
    /// [`TestingError::MissingJar`]/[`TestingError::JavaNotFound`] when ZooKeeper is not
    /// installed; [`TestingError::Openssl`] when a TLS server's certificates cannot be made;
    /// [`TestingError::ServerExited`] or [`TestingError::StartTimeout`] (with the log
    /// tail) when the JVM dies or does not answer in time; [`TestingError::AddressInUse`] when
    /// five fresh ports were all taken.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled start kills the JVM (synchronously, on drop) and frees the slot.
    pub async fn start(self) -> Result<TestingServer> {
        self.tuning.validate()?;
        let jvm = Jvm::locate()?;
        let slot = if self.take_slot { Some(ServerSlot::acquire().await) } else { None };
        let dir = temp_dir("zk-recipes-server-")?;
        let data_dir = dir.path().join("data");
        create_dir(&data_dir)?;
        let jaas_path = match self.tuning.jaas_config() {
            Some(jaas) => {
                let jaas_path = dir.path().join("jaas.conf");
                write_file(&jaas_path, &jaas)?;
                Some(jaas_path)
            }
            None => None,
        };
        let tls = match self.tls {
            Some(client_auth) => {
                let tls_dir = dir.path().join("tls");
                create_dir(&tls_dir)?;
                Some(TestingTls::generate(&tls_dir, client_auth).await?)
            }
            None => None,
        };
        let started_at = Instant::now();
        let mut last_tail = String::new();
        let attempts = if self.port.is_some() { 1 } else { FRESH_PORT_ATTEMPTS };
        for _ in 0..attempts {
            let (port, secure_port) = match (self.port, &tls) {
                (Some(port), None) => (port, None),
                (Some(port), Some(_)) => (port, Some(free_ports(1)?[0])),
                (None, None) => (free_ports(1)?[0], None),
                (None, Some(_)) => {
                    let ports = free_ports(2)?;
                    (ports[0], Some(ports[1]))
                }
            };
            let mut server = TestingServer {
                process: None,
                launch: Launch {
                    jvm: jvm.clone(),
                    main_class: "org.apache.zookeeper.server.ZooKeeperServerMain",
                    config_path: dir.path().join("zoo.cfg"),
                    log_path: dir.path().join("zookeeper.log"),
                    work_dir: dir.path().to_path_buf(),
                    cleanup_dir: dir.path().to_path_buf(),
                    client_address: SocketAddr::from((Ipv4Addr::LOCALHOST, port)),
                    peer_ports: Vec::new(),
                    secure_address: secure_port.map(|port| SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
                    container_check_interval: self.tuning.container_check_interval,
                    jit: self.tuning.jit,
                    extended_types: self.tuning.extended_types,
                    heap_mib: self.tuning.heap_mib,
                    jaas_path: jaas_path.clone(),
                    system_properties: Vec::new(),
                    namespace: None,
                },
                data_dir: data_dir.clone(),
                tuning: self.tuning.clone(),
                tls: tls.clone(),
                dir: None,
                _slot: None,
            };
            let mut config = self.tuning.common_config(&data_dir, Ipv4Addr::LOCALHOST, port);
            if let (Some(tls), Some(secure_port)) = (&tls, secure_port) {
                config.push_str(&tls.server_config(secure_port));
            }
            write_file(&server.launch.config_path, &config)?;
            match server.launch.start(Readiness::Imok, self.tuning.start_timeout).await {
                Ok(process) => {
                    tracing::info!(
                        port,
                        secure_port,
                        pid = process.pid(),
                        elapsed_ms = started_at.elapsed().as_millis() as u64,
                        "ZooKeeper server ready"
                    );
                    server.process = Some(process);
                    server.dir = Some(dir);
                    server._slot = slot;
                    return Ok(server);
                }
                Err(LaunchError::AddressInUse { log_tail }) => {
                    tracing::debug!(port, "port was taken; retrying with a fresh one");
                    last_tail = log_tail;
                }
                Err(LaunchError::Failed(err)) => return Err(err),
            }
        }
        Err(TestingError::AddressInUse { attempts, log_tail: last_tail })
    }
}

/// A real standalone ZooKeeper server (a JVM child process) on a free loopback port with its own
/// temp data dir — Curator's `TestingServer` without docker.
///
/// * Settings: see [`TestingServerBuilder`].
/// * It holds the process-wide [`ServerSlot`] until dropped: **one server (or one cluster) per
///   test**; a second one started in the same test waits forever.
/// * Dropping it SIGKILLs the JVM and waits until it is gone (synchronously, no runtime needed),
///   then deletes the data dir. The JVM also dies when the test process dies, even by SIGKILL:
///   it runs behind a watchdog shell that kills it when our end of its stdin pipe closes.
/// * The server log (slf4j-simple, INFO) is appended to [`log_path`](Self::log_path) and its
///   tail is part of every start-up error.
///
/// # Example
/// ```no_run
/// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
/// use zk_recipes_testing::TestingServer;
///
/// let mut server = TestingServer::start().await?;
/// let connect_string = server.connect_string(); // "127.0.0.1:PORT"
/// // ... connect clients ...
/// server.stop().await?; // clients now see connection loss
/// server.restart().await?; // same port, same data
/// assert_eq!(server.four_letter_word("ruok").await?, "imok");
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TestingServer {
    // Field order is drop order: kill the JVM, then delete its files, then free the slot.
    process: Option<JvmProcess>,
    launch: Launch,
    data_dir: PathBuf,
    tuning: Tuning,
    tls: Option<TestingTls>,
    dir: Option<TempDir>,
    _slot: Option<ServerSlot>,
}

impl TestingServer {
    /// Starts a server with the default settings ([`TestingServerBuilder`]) and waits until it
    /// serves (`ruok` → `imok`, `srvr` → `Mode: standalone`).
    ///
    /// # Errors
    /// See [`TestingServerBuilder::start`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled start kills the JVM and frees the slot.
    pub async fn start() -> Result<TestingServer> {
        TestingServerBuilder::new().start().await
    }

    /// A builder to change tick time, session timeout bounds, container check interval, …
    pub fn builder() -> TestingServerBuilder {
        TestingServerBuilder::new()
    }

    /// `"127.0.0.1:PORT"`, for `zookeeper_client::Client::connect`.
    pub fn connect_string(&self) -> String {
        self.launch.client_address.to_string()
    }

    /// `"127.0.0.1:PORT"` of the TLS client port, if the server was started
    /// [`tls`](TestingServerBuilder::tls): for zookeeper-client's `secure_connect` (or
    /// as `tcp+tls://127.0.0.1:PORT` in a connect string). The server's certificate is valid for
    /// `127.0.0.1` and `localhost`.
    pub fn secure_connect_string(&self) -> Option<String> {
        self.launch.secure_address.map(|address| address.to_string())
    }

    /// The CA and client identities of a server started
    /// [`tls`](TestingServerBuilder::tls).
    pub fn tls(&self) -> Option<&TestingTls> {
        self.tls.as_ref()
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.launch.client_address.port()
    }

    /// The client address (`127.0.0.1:PORT`).
    pub fn address(&self) -> SocketAddr {
        self.launch.client_address
    }

    /// The server's log file (appended across restarts).
    pub fn log_path(&self) -> &Path {
        &self.launch.log_path
    }

    /// The last `lines` lines of the server's log.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.launch.log_path, 0, lines)
    }

    /// The server's `dataDir` (kept across [`restart`](Self::restart)).
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// The JVM's process id while one exists (running or paused).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().filter(|process| process.is_alive()).map(JvmProcess::pid)
    }

    /// True while the JVM is alive (including while [paused](Self::pause)).
    pub fn is_running(&self) -> bool {
        self.process.as_ref().is_some_and(JvmProcess::is_alive)
    }

    /// Stops the server with SIGTERM (SIGKILL after 10 s) and waits until the JVM is gone; the
    /// port then refuses connections and clients see connection loss. Data is kept for
    /// [`restart`](Self::restart). Stopping a stopped server does nothing.
    ///
    /// # Cancel safety
    /// If cancelled, the JVM is SIGKILLed synchronously.
    pub async fn stop(&mut self) -> Result<()> {
        match self.process.take() {
            Some(process) => process.terminate(STOP_GRACE).await,
            None => Ok(()),
        }
    }

    /// SIGKILLs the JVM (a crash: no clean shutdown) and waits until it is gone. Data is kept for
    /// [`restart`](Self::restart). Killing a stopped server does nothing.
    ///
    /// # Cancel safety
    /// If cancelled, the JVM is still SIGKILLed synchronously.
    pub async fn kill(&mut self) -> Result<()> {
        match self.process.take() {
            Some(process) => process.kill().await,
            None => Ok(()),
        }
    }

    /// Stops the server if it runs, then starts it again on the same port with the same data dir
    /// and waits until it serves. Retries for about 3 s if the port is briefly busy.
    ///
    /// # Errors
    /// As [`TestingServerBuilder::start`]; [`TestingError::AddressInUse`] if the port stays busy.
    ///
    /// # Cancel safety
    /// If cancelled, the server is left stopped (or killed, if the new JVM had started).
    pub async fn restart(&mut self) -> Result<()> {
        self.stop().await?;
        let mut last_tail = String::new();
        for attempt in 0..SAME_PORT_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(SAME_PORT_BACKOFF).await;
            }
            match self.launch.start(Readiness::Imok, self.tuning.start_timeout).await {
                Ok(process) => {
                    self.process = Some(process);
                    return Ok(());
                }
                Err(LaunchError::AddressInUse { log_tail }) => last_tail = log_tail,
                Err(LaunchError::Failed(err)) => return Err(err),
            }
        }
        Err(TestingError::AddressInUse { attempts: SAME_PORT_ATTEMPTS, log_tail: last_tail })
    }

    /// Freezes the JVM with SIGSTOP: connections stay open but nothing answers, and the server's
    /// own clock for session expiry stops too.
    ///
    /// Use it only to make **every** client go Suspended (Disconnected) and then, if paused past
    /// their session timeouts, Lost: on [`resume`](Self::resume) the server catches up on its
    /// clock and may expire every session at once. To expire one chosen session use a
    /// [`FaultProxy`](crate::FaultProxy) black hole instead.
    ///
    /// # Errors
    /// [`TestingError::NotRunning`] if the server is stopped.
    pub fn pause(&self) -> Result<()> {
        self.process.as_ref().ok_or(TestingError::NotRunning)?.signal(Signal::Stop)
    }

    /// Thaws a [paused](Self::pause) JVM with SIGCONT.
    ///
    /// # Errors
    /// [`TestingError::NotRunning`] if the server is stopped.
    pub fn resume(&self) -> Result<()> {
        self.process.as_ref().ok_or(TestingError::NotRunning)?.signal(Signal::Cont)
    }

    /// Sends a four-letter word (`ruok`, `srvr`, `mntr`, `wchc`, …) and returns the raw answer;
    /// 5 s deadline.
    ///
    /// # Errors
    /// See [`four_letter_word`](crate::four_letter_word).
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn four_letter_word(&self, command: &str) -> Result<String> {
        four_letter_word(self.address(), command, DEFAULT_FOUR_LETTER_TIMEOUT).await
    }

    /// The server's mode from `srvr` ([`ServerMode::Standalone`] for this type).
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn mode(&self) -> Result<ServerMode> {
        mode_of(self.address()).await
    }

    /// `mntr` as a map (`zk_znode_count`, `zk_watch_count`, `zk_num_alive_connections`, …).
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn mntr(&self) -> Result<BTreeMap<String, String>> {
        mntr_of(self.address()).await
    }

    /// The number of znodes (`mntr`'s `zk_znode_count`; a fresh server has 5, counting `/` and
    /// the `/zookeeper` system nodes).
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn znode_count(&self) -> Result<u64> {
        znode_count_of(self.address()).await
    }

    /// Watched paths per session id, from `wchc` (see [`parse_wchc`](crate::parse_wchc)).
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn watches(&self) -> Result<BTreeMap<String, Vec<String>>> {
        watches_of(self.address()).await
    }

    /// The total number of data and exists watches (paths summed over sessions, from `wchc`): a
    /// test can show that a recipe left no such watch behind. ZooKeeper's `wchc` does not list
    /// child watches; to show those are gone (or not polled), use `mntr` packet counts.
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn watch_count(&self) -> Result<usize> {
        Ok(self.watches().await?.values().map(Vec::len).sum())
    }
}
