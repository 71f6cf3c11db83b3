//! [`TestingClusterBuilder`]: a cluster's settings, its members' files, and the start that waits
//! for the ensemble; and [`TestingCluster::start`] and [`TestingCluster::builder`], where it
//! starts.

use std::fmt::Write as _;
use std::net::Ipv4Addr;
use std::path::Path;
use std::time::{Duration, Instant};

use super::handle::TestingCluster;
use super::member::ClusterMember;
use crate::classpath::Jit;
use crate::error::{Result, TestingError};
use crate::launch::{create_dir, temp_dir, write_file, Jvm, LaunchError, Tuning};
use crate::network::namespaces::ClusterNetwork;
use crate::ports::free_ports;
use crate::slot::ServerSlot;

/// The JVM flags of a partitionable cluster's members: a connection attempt to a cut-off member
/// gives up after 1 s, and an election retries at least every second (instead of backing off to
/// 60 s), so that the ensemble finds itself again soon after a partition heals.
const PARTITIONABLE_PROPERTIES: [&str; 2] =
    ["-Dzookeeper.cnxTimeout=1000", "-Dzookeeper.fastleader.maxNotificationInterval=1000"];

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
/// | reconfig | off | with [`reconfig(true)`](Self::reconfig): `reconfigEnabled=true`, `skipACL=yes`, server lines in a dynamic config file with `;127.0.0.1:CLIENT` |
/// | observers | 0 | with [`observers(n)`](Self::observers): `n` more members with `peerType=observer`, their server lines ending in `:observer` |
/// | read-only mode | off | with [`read_only_mode(true)`](Self::read_only_mode): `-Dreadonlymode.enabled=true` on every member, `localSessionsEnabled=true`, `localSessionsUpgradingEnabled=true` |
/// | partitionable | off | with [`partitionable(true)`](Self::partitionable): each member in a network namespace of its own at `10.B.C.(10+i)`, `server.N=10.B.C.(9+N):…`, `clientPortAddress` its own address, `-Dzookeeper.cnxTimeout=1000 -Dzookeeper.fastleader.maxNotificationInterval=1000` |
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
    reconfig: bool,
    observers: usize,
    read_only_mode: bool,
    partitionable: bool,
}

impl Default for TestingClusterBuilder {
    fn default() -> Self {
        TestingClusterBuilder {
            size: 3,
            tuning: Tuning::new(Duration::from_secs(60)),
            init_limit: Duration::from_secs(10),
            sync_limit: Duration::from_secs(10),
            reconfig: false,
            observers: 0,
            read_only_mode: false,
            partitionable: false,
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

    /// A reconfigurable ensemble (ZooKeeper's dynamic reconfiguration); defaults to off, a static
    /// `zoo.cfg` whose `server.N` lines name no client address.
    ///
    /// On: `reconfigEnabled=true`, `standaloneEnabled=false`, `skipACL=yes` (ZooKeeper 3.8 lets
    /// only a super user reconfigure otherwise; skipping ACLs is for tests only), and the
    /// `server.N=127.0.0.1:QUORUM:ELECTION:participant;127.0.0.1:CLIENT` lines in a dynamic config
    /// file, so `/zookeeper/config` names every member's client address. Add members with
    /// [`TestingCluster::add_member`], change the ensemble with
    /// [`TestingCluster::reconfig_add`] and [`TestingCluster::reconfig_remove`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
    /// let mut cluster = zk_recipes_testing::TestingCluster::builder().reconfig(true).start().await?;
    /// let joiner = cluster.add_member().await?;
    /// cluster.reconfig_add(joiner).await?;
    /// cluster.reconfig_remove(0).await?;
    /// cluster.stop(0).await?;
    /// # Ok(()) }
    /// ```
    pub fn reconfig(mut self, enabled: bool) -> Self {
        self.reconfig = enabled;
        self
    }

    /// Adds `count` non-voting observers after the [`size`](Self::size) voting members; defaults
    /// to 0. An observer's `zoo.cfg` says `peerType=observer` and every member's server line for it
    /// ends in `:observer`; it serves clients (reads locally, forwards writes to the leader) and
    /// `srvr` reports `Mode: observer`. Not with [`reconfig(true)`](Self::reconfig).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
    /// let cluster = zk_recipes_testing::TestingCluster::builder().observers(1).start().await?;
    /// let observer = cluster.members().iter().find(|member| member.is_observer()).unwrap();
    /// println!("observer at {}", observer.connect_string());
    /// # Ok(()) }
    /// ```
    pub fn observers(mut self, count: usize) -> Self {
        self.observers = count;
        self
    }

    /// Starts every member with `-Dreadonlymode.enabled=true` (ZooKeeper's read-only mode); defaults
    /// to off. A member cut off from its quorum then serves reads to clients that allow read-only
    /// servers (`srvr` reports `Mode: read-only`) and refuses writes with `NotReadOnly`.
    ///
    /// It also sets `localSessionsEnabled=true` and `localSessionsUpgradingEnabled=true`: ZooKeeper
    /// 3.8's read-only server opens only local sessions (it refuses every other new session with
    /// `NotReadOnly`). So in such a cluster a session stays local to its server until it creates an
    /// ephemeral node, and one that moves to another server before that is expired.
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
    /// let mut cluster = zk_recipes_testing::TestingCluster::builder().read_only_mode(true).start().await?;
    /// cluster.stop(0).await?;
    /// cluster.stop(1).await?;
    /// // member 2 turns read-only after a moment
    /// # Ok(()) }
    /// ```
    pub fn read_only_mode(mut self, enabled: bool) -> Self {
        self.read_only_mode = enabled;
        self
    }

    /// Gives every member a network namespace and an address of its own, so that the network
    /// between members can be cut and slowed ([`TestingCluster::partition`],
    /// [`TestingCluster::isolate_leader`], [`TestingCluster::bridge`], [`TestingCluster::ring`],
    /// [`TestingCluster::degrade`], [`TestingCluster::heal`]); defaults to off (every member on
    /// loopback).
    ///
    /// On: the cluster claims a free private subnet `10.B.C.0/24` (`B` in 96..=127) by creating
    /// the bridge `zkpXXXX` with `10.B.C.1` in the root namespace; member `i` runs in the namespace
    /// `zkpXXXX-mi` (`ip netns exec`), reached through a veth pair on the bridge at `10.B.C.(10+i)`,
    /// where it binds its client, quorum and election ports. Clients (in the root namespace) reach
    /// every member at its own address; that path is never cut. The members' JVMs get
    /// `-Dzookeeper.cnxTimeout=1000` and `-Dzookeeper.fastleader.maxNotificationInterval=1000`, so
    /// that an election across a healed partition does not wait for a backed-off retry (60 s by
    /// default). Dropping the cluster deletes the namespaces and the bridge; if the test process
    /// dies, a watchdog shell does. Not with [`reconfig(true)`](Self::reconfig).
    ///
    /// Needs root, iproute2's `ip`, and a kernel with network namespaces, veth pairs and bridges;
    /// without them [`start`](Self::start) fails with [`TestingError::NetworkUnavailable`].
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
    /// use std::time::Duration;
    /// use zk_recipes_testing::{TestingCluster, TestingError};
    ///
    /// let mut cluster = match TestingCluster::builder()
    ///     .partitionable(true)
    ///     .sync_limit(Duration::from_secs(2))
    ///     .start()
    ///     .await
    /// {
    ///     Ok(cluster) => cluster,
    ///     Err(TestingError::NetworkUnavailable { reason }) => {
    ///         eprintln!("skipped: {reason}");
    ///         return Ok(());
    ///     }
    ///     Err(other) => return Err(other),
    /// };
    /// let old_leader = cluster.isolate_leader().await?;
    /// cluster.heal().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// [`TestingCluster::partition`]: crate::TestingCluster::partition
    /// [`TestingCluster::isolate_leader`]: crate::TestingCluster::isolate_leader
    /// [`TestingCluster::bridge`]: crate::TestingCluster::bridge
    /// [`TestingCluster::ring`]: crate::TestingCluster::ring
    /// [`TestingCluster::degrade`]: crate::TestingCluster::degrade
    /// [`TestingCluster::heal`]: crate::TestingCluster::heal
    pub fn partitionable(mut self, enabled: bool) -> Self {
        self.partitionable = enabled;
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
    /// [`TestingError::InvalidArgument`] for an empty cluster; for a
    /// [partitionable](Self::partitionable) one, [`TestingError::NetworkUnavailable`] when this
    /// process cannot make network namespaces.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled start kills every JVM and frees the slot.
    pub async fn start(self) -> Result<TestingCluster> {
        self.tuning.validate()?;
        if self.size == 0 {
            return Err(TestingError::InvalidArgument("a cluster needs at least one member".to_owned()));
        }
        if self.observers > 0 && self.reconfig {
            return Err(TestingError::InvalidArgument(
                "observers are not supported with reconfig(true)".to_owned(),
            ));
        }
        if self.partitionable && self.reconfig {
            return Err(TestingError::InvalidArgument(
                "partitionable(true) is not supported with reconfig(true)".to_owned(),
            ));
        }
        let jvm = Jvm::locate()?;
        let slot = ServerSlot::acquire().await;
        let mut network = match self.partitionable {
            true => Some(ClusterNetwork::create(self.size + self.observers).await?),
            false => None,
        };
        let started_at = Instant::now();
        let mut last_tail = String::new();
        for _ in 0..FRESH_PORT_ATTEMPTS {
            let dir = temp_dir("zk-recipes-cluster-")?;
            let mut members = self.write_members(&jvm, dir.path(), network.as_ref())?;
            for member in &mut members {
                let (process, log_from) = member.launch.spawn().await?;
                member.process = Some(process);
                member.log_from = log_from;
            }
            let mut cluster = TestingCluster {
                members,
                tuning: self.tuning.clone(),
                reconfig: self.reconfig.then(|| self.quorum_settings()),
                network: network.take(),
                dir,
                _slot: None,
            };
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
                    // Kill the JVMs before the network goes on to the next attempt.
                    cluster.members.clear();
                    network = cluster.network.take();
                }
                Err(LaunchError::Failed(err)) => return Err(err),
            }
        }
        Err(TestingError::AddressInUse { attempts: FRESH_PORT_ATTEMPTS, log_tail: last_tail })
    }

    fn write_members(
        &self,
        jvm: &Jvm,
        root: &Path,
        network: Option<&ClusterNetwork>,
    ) -> Result<Vec<ClusterMember>> {
        let total = self.size + self.observers;
        let ports = free_ports(3 * total)?;
        let host = |index: usize| network.map_or(Ipv4Addr::LOCALHOST, |network| network.address(index));
        let mut servers = self.quorum_settings();
        if self.size == 1 && !self.reconfig {
            let _ = writeln!(servers, "standaloneEnabled=false");
        }
        let mut dynamic = String::new();
        for index in 0..total {
            let (client, quorum, election) = (ports[3 * index], ports[3 * index + 1], ports[3 * index + 2]);
            if self.reconfig {
                let _ = writeln!(
                    dynamic,
                    "{}",
                    super::reconfig::server_line(index as u32 + 1, quorum, election, client)
                );
            } else {
                let role = if index >= self.size { ":observer" } else { "" };
                let _ = writeln!(servers, "server.{}={}:{quorum}:{election}{role}", index + 1, host(index));
            }
        }
        let mut members = Vec::with_capacity(total);
        for index in 0..total {
            let server_id = index as u32 + 1;
            let member_dir = root.join(format!("member-{server_id}"));
            let data_dir = member_dir.join("data");
            create_dir(&data_dir)?;
            write_file(&data_dir.join("myid"), &format!("{server_id}\n"))?;
            let client_port = ports[3 * index];
            let config_path = member_dir.join("zoo.cfg");
            let mut config = self.tuning.common_config(&data_dir, host(index), client_port) + &servers;
            if self.reconfig {
                config += &super::reconfig::dynamic_settings(&member_dir, &dynamic)?;
            }
            let observer = index >= self.size;
            if observer {
                config += "peerType=observer\n";
            }
            if self.read_only_mode {
                // A read-only server only opens local sessions: without them it refuses every new
                // session with `NotReadOnly`.
                config += "localSessionsEnabled=true\nlocalSessionsUpgradingEnabled=true\n";
            }
            write_file(&config_path, &config)?;
            let mut member = ClusterMember::new(
                jvm,
                &self.tuning,
                root,
                member_dir,
                server_id,
                host(index),
                [client_port, ports[3 * index + 1], ports[3 * index + 2]],
            );
            member.observer = observer;
            if self.read_only_mode {
                member.launch.system_properties.push("-Dreadonlymode.enabled=true".to_owned());
            }
            if let Some(network) = network {
                member.launch.namespace = Some((network.ip_binary().to_path_buf(), network.namespace(index)));
                member
                    .launch
                    .system_properties
                    .extend(PARTITIONABLE_PROPERTIES.iter().map(|flag| (*flag).to_owned()));
            }
            members.push(member);
        }
        Ok(members)
    }

    /// `initLimit`, `syncLimit` and, for a reconfigurable ensemble, what it needs.
    fn quorum_settings(&self) -> String {
        let tick = self.tuning.tick_time.as_millis().max(1);
        let ticks = |limit: Duration| limit.as_millis().div_ceil(tick).max(1);
        let mut settings = String::new();
        let _ = writeln!(settings, "initLimit={}", ticks(self.init_limit));
        let _ = writeln!(settings, "syncLimit={}", ticks(self.sync_limit));
        if self.reconfig {
            settings += super::reconfig::RECONFIG_SETTINGS;
        }
        settings
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
