//! A reconfigurable ensemble (ZooKeeper's dynamic reconfiguration, 3.5+): the settings it needs,
//! members that join a running ensemble, and `reconfig` add and remove (through ZooKeeper's own
//! command-line client, `zkCli.sh reconfig`).

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::{Duration, Instant};

use super::handle::TestingCluster;
use super::member::ClusterMember;
use crate::error::{Result, TestingError};
use crate::four_letter::four_letter_word;
use crate::launch::{create_dir, probe, write_file, Jvm, LaunchError, Readiness, DEFAULT_PROBE_POLL};
use crate::ports::free_ports;

/// The `zoo.cfg` lines of a reconfigurable ensemble. `skipACL=yes` becomes the system property
/// `zookeeper.skipACL`: ZooKeeper 3.8 lets only a super user reconfigure otherwise.
pub(super) const RECONFIG_SETTINGS: &str = "reconfigEnabled=true\nstandaloneEnabled=false\nskipACL=yes\n";

/// How long one `zkCli` run may take (a JVM start and one request).
const CLI_TIMEOUT: Duration = Duration::from_secs(60);

/// Pause between rounds of reconfig attempts while no member could do it.
const RECONFIG_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// The dynamic configuration line of a member on loopback.
pub(super) fn server_line(server_id: u32, quorum: u16, election: u16, client: u16) -> String {
    format!("server.{server_id}=127.0.0.1:{quorum}:{election}:participant;127.0.0.1:{client}")
}

/// Writes `servers` as the member's dynamic config file; returns the `zoo.cfg` line naming it.
pub(super) fn dynamic_settings(member_dir: &Path, servers: &str) -> Result<String> {
    let path = member_dir.join("zoo.cfg.dynamic");
    write_file(&path, servers)?;
    Ok(format!("dynamicConfigFile={}\n", path.display()))
}

impl TestingCluster {
    /// Starts a new member that joins the running ensemble (a reconfigurable cluster only): its
    /// dynamic configuration is the ensemble's current one plus itself, as ZooKeeper's
    /// documentation says for adding servers. It syncs with the leader as a non-voting member
    /// until [`reconfig_add`](Self::reconfig_add) makes it a participant. Returns its index.
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] for a cluster built without
    /// [`reconfig(true)`](crate::TestingClusterBuilder::reconfig); start-up errors as
    /// [`TestingClusterBuilder::start`](crate::TestingClusterBuilder::start).
    ///
    /// # Cancel safety
    /// If cancelled, the new member's JVM is killed (synchronously, on drop).
    pub async fn add_member(&mut self) -> Result<usize> {
        let Some(quorum_settings) = self.reconfig.clone() else {
            return Err(TestingError::InvalidArgument(
                "add_member needs a cluster built with reconfig(true)".into(),
            ));
        };
        let current = self.current_config().await?;
        let ports: [u16; 3] = free_ports(3)?
            .try_into()
            .map_err(|_| TestingError::InvalidArgument("three free ports".into()))?;
        let server_id = self.members.iter().map(ClusterMember::server_id).max().unwrap_or(0) + 1;
        let member_dir = self.dir.path().join(format!("member-{server_id}"));
        let data_dir = member_dir.join("data");
        create_dir(&data_dir)?;
        write_file(&data_dir.join("myid"), &format!("{server_id}\n"))?;
        let mut servers: String = current.lines().filter(|line| line.starts_with("server.")).fold(
            String::new(),
            |mut servers, line| {
                let _ = writeln!(servers, "{line}");
                servers
            },
        );
        let _ = writeln!(servers, "{}", server_line(server_id, ports[1], ports[2], ports[0]));
        let config = self.tuning.common_config(&data_dir, Ipv4Addr::LOCALHOST, ports[0])
            + &quorum_settings
            + &dynamic_settings(&member_dir, &servers)?;
        write_file(&member_dir.join("zoo.cfg"), &config)?;
        let jvm = Jvm::locate()?;
        let mut member = ClusterMember::new(
            &jvm,
            &self.tuning,
            self.dir.path(),
            member_dir,
            server_id,
            Ipv4Addr::LOCALHOST,
            ports,
        );
        match member.launch.start(Readiness::Imok, self.tuning.start_timeout).await {
            Ok(process) => member.process = Some(process),
            Err(LaunchError::AddressInUse { log_tail }) => {
                return Err(TestingError::AddressInUse { attempts: 1, log_tail })
            }
            Err(LaunchError::Failed(err)) => return Err(err),
        }
        tracing::info!(server_id, address = %member.address(), "ZooKeeper member joined the ensemble as a learner");
        self.members.push(member);
        Ok(self.members.len() - 1)
    }

    /// Adds member `index` to the ensemble's configuration as a participant (`reconfig -add`) and
    /// waits until it serves as leader or follower. Returns the new configuration as the server
    /// committed it.
    ///
    /// # Errors
    /// [`TestingError::Io`] with zkCli's output if the server refuses (for example when the
    /// member is not running, or the cluster was not built with
    /// [`reconfig(true)`](crate::TestingClusterBuilder::reconfig)); [`TestingError::Timeout`].
    ///
    /// # Cancel safety
    /// If cancelled, the reconfiguration may or may not have been committed.
    pub async fn reconfig_add(&mut self, index: usize) -> Result<String> {
        let member = self.member(index)?;
        let line =
            server_line(member.server_id(), member.quorum_port(), member.election_port(), member.port());
        let address = member.address();
        let prefix = format!("server.{}=", member.server_id());
        let committed = self
            .zookeeper_cli(Some(index), &["reconfig", "-add", &line], |config| {
                config.lines().any(|have| have.starts_with(&prefix))
            })
            .await?;
        let deadline = Instant::now() + self.tuning.start_timeout;
        while !probe(address, Readiness::QuorumMember).await {
            if Instant::now() >= deadline {
                return Err(TestingError::Timeout {
                    what: format!("waiting for server.{} to serve after reconfig -add", index + 1),
                    timeout: self.tuning.start_timeout,
                });
            }
            tokio::time::sleep(DEFAULT_PROBE_POLL).await;
        }
        Ok(committed)
    }

    /// Removes member `index` from the ensemble's configuration (`reconfig -remove`), asking
    /// another running member. The member's JVM keeps running (it no longer serves); stop it
    /// with [`stop`](Self::stop). Returns the new configuration as the server committed it.
    ///
    /// # Errors
    /// As [`reconfig_add`](Self::reconfig_add).
    ///
    /// # Cancel safety
    /// If cancelled, the reconfiguration may or may not have been committed.
    pub async fn reconfig_remove(&mut self, index: usize) -> Result<String> {
        let server_id = self.member(index)?.server_id().to_string();
        let prefix = format!("server.{server_id}=");
        self.zookeeper_cli(Some(index), &["reconfig", "-remove", &server_id], |config| {
            !config.lines().any(|line| line.starts_with(&prefix))
        })
        .await
    }

    /// The ensemble's current dynamic configuration (`server.N=...` lines and `version=`), as a
    /// running member's `conf` reports it.
    ///
    /// # Cancel safety
    /// Cancel safe: it only asks the servers.
    pub async fn current_config(&self) -> Result<String> {
        self.config_of_members(None).await
    }

    /// The dynamic configuration as the first serving member but `except` reports it.
    async fn config_of_members(&self, except: Option<usize>) -> Result<String> {
        let mut last_error = TestingError::NotRunning;
        for address in self.serving_members(except).await {
            match four_letter_word(address, "conf", Duration::from_secs(5)).await {
                Ok(answer) if answer.lines().any(|line| line.starts_with("server.")) => {
                    return Ok(answer
                        .lines()
                        .filter(|line| line.starts_with("server.") || line.starts_with("version="))
                        .map(|line| format!("{line}\n"))
                        .collect())
                }
                Ok(answer) => {
                    last_error = TestingError::FourLetterWord {
                        command: "conf".into(),
                        address: address.to_string(),
                        reason: format!("no server lines in {answer:?}"),
                    }
                }
                Err(err) => last_error = err,
            }
        }
        Err(last_error)
    }

    /// Runs one zkCli reconfig command against a serving member other than `except`, trying the
    /// next member if one does not answer. A connection lost during the command (the leader
    /// removed, an election) leaves it unknown whether it was committed: `applied` checks the
    /// configuration the members then report. Gives up after the start timeout.
    async fn zookeeper_cli(
        &self,
        except: Option<usize>,
        command: &[&str],
        applied: impl Fn(&str) -> bool,
    ) -> Result<String> {
        let jvm = Jvm::locate()?;
        let deadline = Instant::now() + self.tuning.start_timeout;
        let mut last_error = TestingError::NotRunning;
        loop {
            for server in self.serving_members(except).await {
                match jvm.zookeeper_cli(server, command, CLI_TIMEOUT).await {
                    Ok(output) if output.contains("Committed new configuration") => {
                        tracing::info!(command = command.join(" "), "ZooKeeper ensemble reconfigured");
                        return Ok(output);
                    }
                    Ok(output) => {
                        last_error = TestingError::io(
                            format!("zkCli {} against {server}", command.join(" ")),
                            std::io::Error::other(output),
                        )
                    }
                    Err(err) => last_error = err,
                }
                if let Ok(config) = self.config_of_members(except).await {
                    if applied(&config) {
                        tracing::info!(
                            command = command.join(" "),
                            "ZooKeeper ensemble reconfigured (reply lost)"
                        );
                        return Ok(config);
                    }
                }
            }
            if Instant::now() >= deadline {
                return Err(last_error);
            }
            tokio::time::sleep(RECONFIG_RETRY_PAUSE).await;
        }
    }

    /// The client addresses of the running members but `except` that serve as leader or follower.
    async fn serving_members(&self, except: Option<usize>) -> Vec<SocketAddr> {
        let mut serving = Vec::new();
        for (index, member) in self.members.iter().enumerate() {
            if Some(index) != except
                && member.is_running()
                && probe(member.address(), Readiness::QuorumMember).await
            {
                serving.push(member.address());
            }
        }
        serving
    }
}
