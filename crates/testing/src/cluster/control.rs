//! Stopping, killing, restarting, pausing and resuming a [`TestingCluster`]'s members, one at a
//! time or all at once.

use std::time::Duration;

use super::handle::TestingCluster;
use crate::error::{Result, TestingError};
use crate::launch::{LaunchError, Readiness};
use crate::server::STOP_GRACE;
use crate::sys::Signal;

/// Restart attempts of one member while its ports are briefly busy.
const SAME_PORT_ATTEMPTS: u32 = 10;
/// Pause between same-port restart attempts.
const SAME_PORT_BACKOFF: Duration = Duration::from_millis(300);

impl TestingCluster {
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
    /// until it serves as leader or follower (which needs a quorum of running members; an
    /// observer: until it answers `srvr` with a mode). Retries
    /// for about 3 s if its ports are briefly busy.
    ///
    /// # Cancel safety
    /// If cancelled, the member is left stopped (or killed).
    pub async fn restart(&mut self, index: usize) -> Result<()> {
        self.stop(index).await?;
        let timeout = self.tuning.start_timeout;
        let member = self.member_mut(index)?;
        // An observer never says leader or follower: it is ready once it answers with a mode.
        let readiness = if member.observer { Readiness::Imok } else { Readiness::QuorumMember };
        let mut last_tail = String::new();
        for attempt in 0..SAME_PORT_ATTEMPTS {
            if attempt > 0 {
                tokio::time::sleep(SAME_PORT_BACKOFF).await;
            }
            match member.launch.start(readiness, timeout).await {
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
}
