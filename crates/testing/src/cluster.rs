//! A ZooKeeper ensemble of `QuorumPeerMain` members on loopback.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use tempfile::TempDir;

use crate::classpath::Jit;
use crate::error::{Result, TestingError};
use crate::four_letter::{
    four_letter_word, mntr_of, mode_of, watches_of, znode_count_of, ServerMode, DEFAULT_FOUR_LETTER_TIMEOUT,
};
use crate::launch::{
    create_dir, probe_mode, temp_dir, write_file, Jvm, Launch, LaunchError, Readiness, Tuning, LOG_TAIL_LINES,
};
use crate::ports::free_ports;
use crate::process::{log_tail, JvmProcess};
use crate::server::STOP_GRACE;
use crate::slot::ServerSlot;
use crate::sys::Signal;

/// Whole-ensemble start-up attempts with fresh ports when a port turns out to be busy.
const FRESH_PORT_ATTEMPTS: u32 = 3;
/// Restart attempts of one member while its ports are briefly busy.
const SAME_PORT_ATTEMPTS: u32 = 10;
/// Pause between same-port restart attempts.
const SAME_PORT_BACKOFF: Duration = Duration::from_millis(300);
/// Poll period while waiting for the ensemble.
const POLL: Duration = Duration::from_millis(25);

/// Settings for a [`TestingCluster`]; every setting has a documented default.
///
/// | setting | default | `zoo.cfg` |
/// |---|---|---|
/// | members | 3 | `server.N=127.0.0.1:QUORUM:ELECTION`, `dataDir/myid` = N (1-based) |
/// | tick time | 200 ms | `tickTime=200` |
/// | init limit | 10 s | `initLimit` = 10 s / tick = 50 ticks |
/// | sync limit | 10 s | `syncLimit` = 10 s / tick = 50 ticks |
/// | min / max session timeout | 1 s / 60 s | `minSessionTimeout=1000`, `maxSessionTimeout=60000` |
/// | container check interval | 500 ms | `-Dznode.container.checkIntervalMs=500` |
/// | start timeout | 60 s | until every member serves and one is leader |
///
/// ZooKeeper counts `initLimit`/`syncLimit` in ticks; this builder takes absolute durations
/// (rounded up to whole ticks) so that JVM pauses on a small machine never drop a follower. A
/// follower that stops answering (e.g. paused) is only dropped after the sync limit; a killed one
/// is noticed at once (its sockets close). All ports (client, quorum, election per member) are
/// free loopback ports; everything else is as for [`TestingServerBuilder`](crate::TestingServerBuilder).
/// A one-member "cluster" runs with `standaloneEnabled=false`, so it is a quorum of one (its mode
/// is leader).
///
/// # Example
/// ```no_run
/// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
/// let cluster = zk_recipes_testing::TestingCluster::builder().size(5).start().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is awaited"]
pub struct TestingClusterBuilder {
    size: usize,
    tuning: Tuning,
    init_limit: Duration,
    sync_limit: Duration,
}

impl Default for TestingClusterBuilder {
    fn default() -> Self {
        TestingClusterBuilder {
            size: 3,
            tuning: Tuning::new(Duration::from_secs(60)),
            init_limit: Duration::from_secs(10),
            sync_limit: Duration::from_secs(10),
        }
    }
}

impl TestingClusterBuilder {
    /// A builder with the defaults in the table above.
    pub fn new() -> Self {
        Self::default()
    }

    /// The number of members; defaults to 3.
    pub fn size(mut self, size: usize) -> Self {
        self.size = size;
        self
    }

    /// ZooKeeper's `tickTime`; defaults to 200 ms.
    pub fn tick_time(mut self, tick_time: Duration) -> Self {
        self.tuning.tick_time = tick_time;
        self
    }

    /// How long a follower may take to connect and sync to a leader (`initLimit`, converted to
    /// ticks); defaults to 10 s.
    pub fn init_limit(mut self, limit: Duration) -> Self {
        self.init_limit = limit;
        self
    }

    /// How far a follower may fall behind (or stay silent) before the leader drops it
    /// (`syncLimit`, converted to ticks); defaults to 10 s.
    pub fn sync_limit(mut self, limit: Duration) -> Self {
        self.sync_limit = limit;
        self
    }

    /// `minSessionTimeout`; defaults to 1 s.
    pub fn min_session_timeout(mut self, timeout: Duration) -> Self {
        self.tuning.min_session_timeout = timeout;
        self
    }

    /// `maxSessionTimeout`; defaults to 60 s.
    pub fn max_session_timeout(mut self, timeout: Duration) -> Self {
        self.tuning.max_session_timeout = timeout;
        self
    }

    /// `-Dznode.container.checkIntervalMs`; defaults to 500 ms.
    pub fn container_check_interval(mut self, interval: Duration) -> Self {
        self.tuning.container_check_interval = interval;
        self
    }

    /// How the members' JVMs compile their hot code; defaults to [`Jit::QuickStart`].
    pub fn jit(mut self, jit: Jit) -> Self {
        self.tuning.jit = jit;
        self
    }

    /// How long start-up (and [`TestingCluster::restart`]) waits; defaults to 60 s.
    pub fn start_timeout(mut self, timeout: Duration) -> Self {
        self.tuning.start_timeout = timeout;
        self
    }

    /// Takes the [`ServerSlot`] once for all members, starts them concurrently and waits until
    /// every member serves (`srvr` says leader or follower) and exactly one is leader.
    ///
    /// # Errors
    /// As [`TestingServerBuilder::start`](crate::TestingServerBuilder::start);
    /// [`TestingError::InvalidArgument`] for an empty cluster.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled start kills every JVM and frees the slot.
    pub async fn start(self) -> Result<TestingCluster> {
        self.tuning.validate()?;
        if self.size == 0 {
            return Err(TestingError::InvalidArgument("a cluster needs at least one member".to_owned()));
        }
        let jvm = Jvm::locate()?;
        let slot = ServerSlot::acquire().await;
        let started_at = Instant::now();
        let mut last_tail = String::new();
        for _ in 0..FRESH_PORT_ATTEMPTS {
            let dir = temp_dir("zk-recipes-cluster-")?;
            let mut members = self.write_members(&jvm, dir.path())?;
            for member in &mut members {
                let (process, log_from) = member.launch.spawn().await?;
                member.process = Some(process);
                member.log_from = log_from;
            }
            let mut cluster = TestingCluster { members, tuning: self.tuning.clone(), dir, _slot: None };
            match cluster.wait_for_ensemble(self.tuning.start_timeout).await {
                Ok(()) => {
                    tracing::info!(
                        size = self.size,
                        connect_string = %cluster.connect_string(),
                        elapsed_ms = started_at.elapsed().as_millis() as u64,
                        "ZooKeeper ensemble ready"
                    );
                    cluster._slot = Some(slot);
                    return Ok(cluster);
                }
                Err(LaunchError::AddressInUse { log_tail }) => {
                    tracing::debug!("a port was taken; restarting the ensemble with fresh ports");
                    last_tail = log_tail;
                }
                Err(LaunchError::Failed(err)) => return Err(err),
            }
        }
        Err(TestingError::AddressInUse { attempts: FRESH_PORT_ATTEMPTS, log_tail: last_tail })
    }

    fn write_members(&self, jvm: &Jvm, root: &Path) -> Result<Vec<ClusterMember>> {
        let ports = free_ports(3 * self.size)?;
        let tick = self.tuning.tick_time.as_millis().max(1);
        let ticks = |limit: Duration| limit.as_millis().div_ceil(tick).max(1);
        let mut servers = String::new();
        let _ = writeln!(servers, "initLimit={}", ticks(self.init_limit));
        let _ = writeln!(servers, "syncLimit={}", ticks(self.sync_limit));
        if self.size == 1 {
            let _ = writeln!(servers, "standaloneEnabled=false");
        }
        for index in 0..self.size {
            let (quorum, election) = (ports[3 * index + 1], ports[3 * index + 2]);
            let _ = writeln!(servers, "server.{}=127.0.0.1:{quorum}:{election}", index + 1);
        }
        let mut members = Vec::with_capacity(self.size);
        for index in 0..self.size {
            let server_id = index as u32 + 1;
            let member_dir = root.join(format!("member-{server_id}"));
            let data_dir = member_dir.join("data");
            create_dir(&data_dir)?;
            write_file(&data_dir.join("myid"), &format!("{server_id}\n"))?;
            let client_port = ports[3 * index];
            let config_path = member_dir.join("zoo.cfg");
            write_file(&config_path, &(self.tuning.common_config(&data_dir, client_port) + &servers))?;
            members.push(ClusterMember {
                process: None,
                launch: Launch {
                    jvm: jvm.clone(),
                    main_class: "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                    config_path,
                    log_path: member_dir.join("zookeeper.log"),
                    work_dir: member_dir,
                    cleanup_dir: root.to_path_buf(),
                    client_address: SocketAddr::from((Ipv4Addr::LOCALHOST, client_port)),
                    peer_ports: vec![ports[3 * index + 1], ports[3 * index + 2]],
                    secure_address: None,
                    container_check_interval: self.tuning.container_check_interval,
                    jit: self.tuning.jit,
                    extended_types: self.tuning.extended_types,
                    heap_mib: self.tuning.heap_mib,
                    jaas_path: None,
                },
                server_id,
                quorum_port: ports[3 * index + 1],
                election_port: ports[3 * index + 2],
                data_dir,
                log_from: 0,
            });
        }
        Ok(members)
    }
}

/// One member of a [`TestingCluster`]: its ports, files and process. Change its state through
/// the cluster ([`TestingCluster::kill`], [`TestingCluster::restart`], …).
///
/// # Example
/// ```no_run
/// # async fn demo(cluster: &zk_recipes_testing::TestingCluster) {
/// for member in cluster.members() {
///     println!("server.{} at {} running={}", member.server_id(), member.connect_string(), member.is_running());
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct ClusterMember {
    process: Option<JvmProcess>,
    launch: Launch,
    server_id: u32,
    quorum_port: u16,
    election_port: u16,
    data_dir: PathBuf,
    log_from: u64,
}

impl ClusterMember {
    /// ZooKeeper's server id (`myid`, 1-based; member index + 1).
    pub fn server_id(&self) -> u32 {
        self.server_id
    }

    /// `"127.0.0.1:PORT"` of this member alone.
    pub fn connect_string(&self) -> String {
        self.launch.client_address.to_string()
    }

    /// The client port.
    pub fn port(&self) -> u16 {
        self.launch.client_address.port()
    }

    /// The client address.
    pub fn address(&self) -> SocketAddr {
        self.launch.client_address
    }

    /// The port followers use to talk to the leader.
    pub fn quorum_port(&self) -> u16 {
        self.quorum_port
    }

    /// The leader-election port.
    pub fn election_port(&self) -> u16 {
        self.election_port
    }

    /// This member's `dataDir`.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// This member's log file.
    pub fn log_path(&self) -> &Path {
        &self.launch.log_path
    }

    /// The JVM's process id while it is alive.
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().filter(|process| process.is_alive()).map(JvmProcess::pid)
    }

    /// True while the JVM is alive (including while paused).
    pub fn is_running(&self) -> bool {
        self.process.as_ref().is_some_and(JvmProcess::is_alive)
    }

    /// This member's mode from `srvr`.
    ///
    /// # Errors
    /// [`TestingError::FourLetterWord`] if it does not answer with a mode (e.g. during an election).
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn mode(&self) -> Result<ServerMode> {
        mode_of(self.address()).await
    }

    /// Sends a four-letter word to this member; 5 s deadline.
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn four_letter_word(&self, command: &str) -> Result<String> {
        four_letter_word(self.address(), command, DEFAULT_FOUR_LETTER_TIMEOUT).await
    }

    /// `mntr` of this member as a map.
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn mntr(&self) -> Result<BTreeMap<String, String>> {
        mntr_of(self.address()).await
    }

    /// This member's `zk_znode_count`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn znode_count(&self) -> Result<u64> {
        znode_count_of(self.address()).await
    }

    /// Watches registered on this member (sessions connected to it), from `wchc`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn watch_count(&self) -> Result<usize> {
        Ok(watches_of(self.address()).await?.values().map(Vec::len).sum())
    }
}

/// A real ZooKeeper ensemble: `n` (default 3) `QuorumPeerMain` JVMs on loopback, each with its
/// own data dir, `myid`, client, quorum and election ports — Curator's `TestingCluster`.
///
/// Members are addressed by index `0..n` (server id = index + 1). It holds the process-wide
/// [`ServerSlot`] once for all members: **one cluster (or one server) per test**. Dropping it
/// SIGKILLs every member synchronously; members also die with the test process (see
/// [`TestingServer`](crate::TestingServer)).
///
/// # Example
/// ```no_run
/// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
/// use std::time::Duration;
/// use zk_recipes_testing::TestingCluster;
///
/// let mut cluster = TestingCluster::start(3).await?;
/// let connect_string = cluster.connect_string(); // "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
/// let old_leader = cluster.kill_leader().await?;
/// cluster.wait_until_serving(Duration::from_secs(30)).await?;
/// assert_ne!(cluster.leader_index().await?, old_leader);
/// cluster.restart(old_leader).await?; // rejoins as a follower
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct TestingCluster {
    // Field order is drop order: kill the JVMs, then delete their files, then free the slot.
    members: Vec<ClusterMember>,
    tuning: Tuning,
    dir: TempDir,
    _slot: Option<ServerSlot>,
}

impl TestingCluster {
    /// Starts an ensemble of `size` members with the default settings
    /// ([`TestingClusterBuilder`]) and waits until it serves with one leader.
    ///
    /// # Errors
    /// See [`TestingClusterBuilder::start`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled start kills every JVM it started (synchronously, on drop) and frees
    /// the slot.
    pub async fn start(size: usize) -> Result<TestingCluster> {
        TestingClusterBuilder::new().size(size).start().await
    }

    /// A builder for size, tick time, init/sync limits, session timeout bounds, …
    pub fn builder() -> TestingClusterBuilder {
        TestingClusterBuilder::new()
    }

    /// `"127.0.0.1:p1,127.0.0.1:p2,…"`: every member, in index order.
    pub fn connect_string(&self) -> String {
        self.members.iter().map(ClusterMember::connect_string).collect::<Vec<_>>().join(",")
    }

    /// The members, in index order.
    pub fn members(&self) -> &[ClusterMember] {
        &self.members
    }

    /// The member at `index`.
    ///
    /// # Errors
    /// [`TestingError::NoSuchMember`] if out of range.
    pub fn member(&self, index: usize) -> Result<&ClusterMember> {
        self.members.get(index).ok_or(TestingError::NoSuchMember { index, size: self.members.len() })
    }

    /// The number of members (running or not).
    pub fn size(&self) -> usize {
        self.members.len()
    }

    /// The directory holding every member's files.
    pub fn root_dir(&self) -> &Path {
        self.dir.path()
    }

    /// The index of the running member whose `srvr` says `Mode: leader`.
    ///
    /// # Errors
    /// [`TestingError::NoLeader`] if there is none right now (e.g. during an election).
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the members; a cancelled call closes its connection.
    pub async fn leader_index(&self) -> Result<usize> {
        for (index, member) in self.members.iter().enumerate() {
            if member.is_running() && probe_mode(member.address()).await == Some(ServerMode::Leader) {
                return Ok(index);
            }
        }
        Err(TestingError::NoLeader)
    }

    /// Waits until every running member answers `srvr` as leader or follower and exactly one is
    /// leader (e.g. after [`kill_leader`](Self::kill_leader)).
    ///
    /// # Errors
    /// [`TestingError::StartTimeout`] (with the log tail of a member that does not serve) after
    /// `timeout`; [`TestingError::ServerExited`] if a member dies meanwhile.
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the members and waits; the members run on as they were.
    pub async fn wait_until_serving(&mut self, timeout: Duration) -> Result<()> {
        for member in &mut self.members {
            member.log_from = crate::process::log_len(&member.launch.log_path);
        }
        match self.wait_for_ensemble(timeout).await {
            Ok(()) => Ok(()),
            Err(LaunchError::AddressInUse { log_tail }) => {
                Err(TestingError::AddressInUse { attempts: 1, log_tail })
            }
            Err(LaunchError::Failed(err)) => Err(err),
        }
    }

    /// Stops member `index` with SIGTERM (SIGKILL after 10 s) and waits until it is gone.
    ///
    /// # Cancel safety
    /// If cancelled, the member is SIGKILLed synchronously.
    pub async fn stop(&mut self, index: usize) -> Result<()> {
        match self.member_mut(index)?.process.take() {
            Some(process) => process.terminate(STOP_GRACE).await,
            None => Ok(()),
        }
    }

    /// SIGKILLs member `index` and waits until it is gone.
    ///
    /// # Cancel safety
    /// If cancelled, the member is still SIGKILLed synchronously.
    pub async fn kill(&mut self, index: usize) -> Result<()> {
        match self.member_mut(index)?.process.take() {
            Some(process) => process.kill().await,
            None => Ok(()),
        }
    }

    /// SIGKILLs the current leader and returns its index. Does not wait for the new election:
    /// follow with [`wait_until_serving`](Self::wait_until_serving).
    ///
    /// # Errors
    /// [`TestingError::NoLeader`] if no member is leader right now.
    ///
    /// # Cancel safety
    /// Cancel safe until the kill; after that the leader is dead either way.
    pub async fn kill_leader(&mut self) -> Result<usize> {
        let leader = self.leader_index().await?;
        self.kill(leader).await?;
        Ok(leader)
    }

    /// Stops member `index` if it runs, starts it again with the same ports and data, and waits
    /// until it serves as leader or follower (which needs a quorum of running members). Retries
    /// for about 3 s if its ports are briefly busy.
    ///
    /// # Cancel safety
    /// If cancelled, the member is left stopped (or killed).
    pub async fn restart(&mut self, index: usize) -> Result<()> {
        self.stop(index).await?;
        let timeout = self.tuning.start_timeout;
        let member = self.member_mut(index)?;
        let mut last_tail = String::new();
        for attempt in 0..SAME_PORT_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(SAME_PORT_BACKOFF).await;
            }
            match member.launch.start(Readiness::QuorumMember, timeout).await {
                Ok(process) => {
                    member.process = Some(process);
                    return Ok(());
                }
                Err(LaunchError::AddressInUse { log_tail }) => last_tail = log_tail,
                Err(LaunchError::Failed(err)) => return Err(err),
            }
        }
        Err(TestingError::AddressInUse { attempts: SAME_PORT_ATTEMPTS, log_tail: last_tail })
    }

    /// A whole-ensemble crash: SIGKILLs every member, starts them all again at once with the same
    /// ports and data (sessions and znodes come back from the data dirs), and waits until every
    /// member serves and exactly one leads. Retries the start for about 3 s while a port is
    /// briefly busy.
    ///
    /// # Errors
    /// As [`wait_until_serving`](Self::wait_until_serving).
    ///
    /// # Cancel safety
    /// If cancelled, members may be left stopped.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(cluster: &mut zk_recipes_testing::TestingCluster) -> Result<(), zk_recipes_testing::TestingError> {
    /// cluster.restart_all().await?; // every member crashed at once and came back
    /// assert!(cluster.members().iter().all(|member| member.is_running()));
    /// # Ok(()) }
    /// ```
    pub async fn restart_all(&mut self) -> Result<()> {
        for index in 0..self.members.len() {
            self.kill(index).await?;
        }
        let timeout = self.tuning.start_timeout;
        let mut last_tail = String::new();
        for attempt in 0..SAME_PORT_ATTEMPTS {
            if attempt > 0 {
                for index in 0..self.members.len() {
                    self.kill(index).await?;
                }
                tokio::time::sleep(SAME_PORT_BACKOFF).await;
            }
            for member in &mut self.members {
                let (process, log_from) = member.launch.spawn().await?;
                member.process = Some(process);
                member.log_from = log_from;
            }
            match self.wait_for_ensemble(timeout).await {
                Ok(()) => return Ok(()),
                Err(LaunchError::AddressInUse { log_tail }) => last_tail = log_tail,
                Err(LaunchError::Failed(err)) => return Err(err),
            }
        }
        Err(TestingError::AddressInUse { attempts: SAME_PORT_ATTEMPTS, log_tail: last_tail })
    }

    /// Freezes member `index` with SIGSTOP (see [`TestingServer::pause`](crate::TestingServer::pause)).
    /// The leader drops a paused follower only after the sync limit (10 s by default); followers
    /// of a paused leader re-elect after it.
    pub fn pause(&self, index: usize) -> Result<()> {
        self.member(index)?.process.as_ref().ok_or(TestingError::NotRunning)?.signal(Signal::Stop)
    }

    /// Thaws a paused member with SIGCONT.
    pub fn resume(&self, index: usize) -> Result<()> {
        self.member(index)?.process.as_ref().ok_or(TestingError::NotRunning)?.signal(Signal::Cont)
    }

    /// The mode of member `index` from `srvr`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn mode(&self, index: usize) -> Result<ServerMode> {
        self.member(index)?.mode().await
    }

    /// Sends a four-letter word to member `index`; 5 s deadline.
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the server; a cancelled call closes its connection.
    pub async fn four_letter_word(&self, index: usize, command: &str) -> Result<String> {
        self.member(index)?.four_letter_word(command).await
    }

    fn member_mut(&mut self, index: usize) -> Result<&mut ClusterMember> {
        let size = self.members.len();
        self.members.get_mut(index).ok_or(TestingError::NoSuchMember { index, size })
    }

    /// Polls until every running member serves and exactly one leads.
    async fn wait_for_ensemble(&self, timeout: Duration) -> Result<(), LaunchError> {
        let deadline = Instant::now() + timeout;
        loop {
            let mut serving = 0;
            let mut leaders = 0;
            let mut running = 0;
            let mut not_serving = None;
            for member in &self.members {
                let Some(process) = &member.process else { continue };
                if !process.is_alive() {
                    return Err(member.launch.death_error(process, member.log_from));
                }
                running += 1;
                match probe_mode(member.address()).await {
                    Some(ServerMode::Leader) => {
                        serving += 1;
                        leaders += 1;
                    }
                    Some(ServerMode::Follower) => serving += 1,
                    _ => not_serving = not_serving.or(Some(member)),
                }
            }
            if running > 0 && serving == running && leaders == 1 {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let member = not_serving.or_else(|| self.members.first());
                let (port, log_tail) = match member {
                    Some(member) => {
                        (member.port(), log_tail(&member.launch.log_path, member.log_from, LOG_TAIL_LINES))
                    }
                    None => (0, String::new()),
                };
                return Err(LaunchError::Failed(TestingError::StartTimeout { port, timeout, log_tail }));
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
