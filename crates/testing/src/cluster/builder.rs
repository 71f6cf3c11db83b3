//! [`TestingClusterBuilder`]: a cluster's settings, its members' files, and the start that waits
//! for the ensemble; and [`TestingCluster::start`] and [`TestingCluster::builder`], where it
//! starts.

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use super::handle::TestingCluster;
use super::member::ClusterMember;
use crate::classpath::Jit;
use crate::error::{Result, TestingError};
use crate::launch::{create_dir, temp_dir, write_file, Jvm, Launch, LaunchError, Tuning};
use crate::ports::free_ports;
use crate::slot::ServerSlot;

/// Whole-ensemble start-up attempts with fresh ports when a port turns out to be busy.
const FRESH_PORT_ATTEMPTS: u32 = 3;

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
}
