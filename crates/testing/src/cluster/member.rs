//! [`ClusterMember`]: one member of a cluster, its ports, files and process, and what it answers.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};

use crate::error::Result;
use crate::four_letter::{
    four_letter_word, mntr_of, mode_of, watches_of, znode_count_of, ServerMode, DEFAULT_FOUR_LETTER_TIMEOUT,
};
use crate::launch::{Jvm, Launch, Tuning};
use crate::process::JvmProcess;

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
///
/// [`TestingCluster`]: crate::TestingCluster
/// [`TestingCluster::kill`]: crate::TestingCluster::kill
/// [`TestingCluster::restart`]: crate::TestingCluster::restart
#[derive(Debug)]
pub struct ClusterMember {
    pub(super) process: Option<JvmProcess>,
    pub(super) launch: Launch,
    pub(super) server_id: u32,
    pub(super) quorum_port: u16,
    pub(super) election_port: u16,
    pub(super) data_dir: PathBuf,
    pub(super) log_from: u64,
    /// A non-voting observer (`peerType=observer`).
    pub(super) observer: bool,
}

impl ClusterMember {
    /// A member not started yet, whose `zoo.cfg` is in `member_dir` and data in its `data`
    /// directory; it serves clients on `host`, and `ports` are the client, quorum and election
    /// ports.
    pub(super) fn new(
        jvm: &Jvm,
        tuning: &Tuning,
        cluster_dir: &Path,
        member_dir: PathBuf,
        server_id: u32,
        host: Ipv4Addr,
        ports: [u16; 3],
    ) -> ClusterMember {
        let [client_port, quorum_port, election_port] = ports;
        let data_dir = member_dir.join("data");
        ClusterMember {
            process: None,
            launch: Launch {
                jvm: jvm.clone(),
                main_class: "org.apache.zookeeper.server.quorum.QuorumPeerMain",
                config_path: member_dir.join("zoo.cfg"),
                log_path: member_dir.join("zookeeper.log"),
                work_dir: member_dir,
                cleanup_dir: cluster_dir.to_path_buf(),
                client_address: SocketAddr::from((host, client_port)),
                peer_ports: vec![quorum_port, election_port],
                secure_address: None,
                container_check_interval: tuning.container_check_interval,
                jit: tuning.jit,
                extended_types: tuning.extended_types,
                heap_mib: tuning.heap_mib,
                jaas_path: None,
                system_properties: Vec::new(),
                namespace: None,
            },
            observer: false,
            server_id,
            quorum_port,
            election_port,
            data_dir,
            log_from: 0,
        }
    }

    /// Whether this member is a non-voting observer ([`TestingClusterBuilder::observers`]).
    ///
    /// [`TestingClusterBuilder::observers`]: crate::TestingClusterBuilder::observers
    pub fn is_observer(&self) -> bool {
        self.observer
    }

    /// ZooKeeper's server id (`myid`, 1-based; member index + 1).
    pub fn server_id(&self) -> u32 {
        self.server_id
    }

    /// `"127.0.0.1:PORT"` of this member alone (`"10.B.C.N:PORT"`, its own address, in a
    /// [partitionable](crate::TestingClusterBuilder::partitionable) cluster).
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

    /// The network namespace this member runs in (`zkpXXXX-mN`), in a
    /// [partitionable](crate::TestingClusterBuilder::partitionable) cluster; `None` on loopback.
    pub fn namespace(&self) -> Option<&str> {
        self.launch.namespace.as_ref().map(|(_, namespace)| namespace.as_str())
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
    ///
    /// [`TestingError::FourLetterWord`]: crate::TestingError::FourLetterWord
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
