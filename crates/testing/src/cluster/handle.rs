//! [`TestingCluster`]: the ensemble a test holds, what it says about its members, and the wait
//! until it serves. Starting it is in [`super::builder`], stopping and restarting members in
//! [`super::control`].

use std::path::Path;
use std::time::{Duration, Instant};

use tempfile::TempDir;

use super::member::ClusterMember;
use crate::error::{Result, TestingError};
use crate::four_letter::ServerMode;
use crate::launch::{probe_mode, LaunchError, Tuning, LOG_TAIL_LINES};
use crate::network::namespaces::ClusterNetwork;
use crate::process::log_tail;
use crate::slot::ServerSlot;

/// Poll period while waiting for the ensemble.
const POLL: Duration = Duration::from_millis(25);

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
    pub(super) members: Vec<ClusterMember>,
    pub(super) tuning: Tuning,
    /// For a reconfigurable ensemble, the `zoo.cfg` quorum lines a joining member gets.
    pub(super) reconfig: Option<String>,
    /// A partitionable cluster's namespaces and bridge, removed once the JVMs are dead.
    pub(super) network: Option<ClusterNetwork>,
    pub(super) dir: TempDir,
    pub(super) _slot: Option<ServerSlot>,
}

impl TestingCluster {
    /// `"127.0.0.1:p1,127.0.0.1:p2,…"`: every member, in index order (each at its own address in a
    /// [partitionable](crate::TestingClusterBuilder::partitionable) cluster).
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

    pub(super) fn member_mut(&mut self, index: usize) -> Result<&mut ClusterMember> {
        let size = self.members.len();
        self.members.get_mut(index).ok_or(TestingError::NoSuchMember { index, size })
    }

    /// Polls until every running member serves and exactly one leads.
    pub(super) async fn wait_for_ensemble(&self, timeout: Duration) -> Result<(), LaunchError> {
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
                    Some(ServerMode::Observer) if member.observer => serving += 1,
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
