//! Running a command while holding a lock, a lease or leadership (like `consul lock` and
//! `etcdctl lock`): when the hold is lost, the command gets SIGTERM, then SIGKILL after the
//! grace period.

use std::future::Future;
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

use rustix::process::{kill_process, Pid, Signal};
use tokio::process::{Child, Command};
use tracing::info;
use zk_recipes_framework::Framework;
use zk_recipes_leader::{CloseMode, LeaderLatch, LeadershipEvent};
use zk_recipes_mutex::{Hold, Mutex};
use zk_recipes_semaphore::Semaphore;

use crate::args::HoldOptions;
use crate::output::EXIT_NO;

/// The exit code when the hold was lost and the command stopped.
const EXIT_LOST: u8 = 1;

type Failure = Box<dyn std::error::Error>;

/// How a supervised run ended.
enum Ended {
    /// The command exited by itself, with this code.
    Exited(u8),
    /// The hold was lost first; the command was stopped.
    Lost(String),
}

/// `zkr lock PATH -- CMD`.
pub async fn with_lock(
    framework: &Framework,
    path: &str,
    hold: &HoldOptions,
    command: &[String],
) -> Result<u8, Failure> {
    let mutex = Mutex::new(framework, path)?;
    let acquired = match hold.timeout {
        Some(timeout) => mutex.lock_timeout(timeout).await,
        None => mutex.lock().await,
    };
    let guard = match acquired {
        Ok(guard) => guard,
        Err(err) if err.is_timeout() => {
            eprintln!("zkr: {path} not acquired: {err}");
            return Ok(EXIT_NO);
        }
        Err(err) => return Err(err.into()),
    };
    info!(node = guard.node_path(), token = guard.fencing_token(), "holding the lock");
    match run_while(command, async { format!("{:?}", guard.lost().await) }, hold.grace).await? {
        Ended::Exited(code) => {
            guard.release().await?;
            Ok(code)
        }
        Ended::Lost(reason) => {
            eprintln!("zkr: the lock on {path} was lost ({reason}); the command was stopped");
            drop(guard);
            Ok(EXIT_LOST)
        }
    }
}

/// `zkr semaphore PATH --leases N -- CMD`.
pub async fn with_lease(
    framework: &Framework,
    path: &str,
    max_leases: u32,
    hold: &HoldOptions,
    command: &[String],
) -> Result<u8, Failure> {
    let semaphore = Semaphore::new(framework, path, max_leases)?;
    let acquired = match hold.timeout {
        Some(timeout) => semaphore.acquire_timeout(timeout).await,
        None => semaphore.acquire().await,
    };
    let lease = match acquired {
        Ok(lease) => lease,
        Err(err) if err.is_timeout() => {
            eprintln!("zkr: no lease of {path} within the timeout: {err}");
            return Ok(EXIT_NO);
        }
        Err(err) => return Err(err.into()),
    };
    match run_while(command, async { format!("{:?}", lease.lost().await) }, hold.grace).await? {
        Ended::Exited(code) => {
            lease.release().await?;
            Ok(code)
        }
        Ended::Lost(reason) => {
            eprintln!("zkr: the lease of {path} was lost ({reason}); the command was stopped");
            drop(lease);
            Ok(EXIT_LOST)
        }
    }
}

/// `zkr elect PATH --id ID [--requeue] -- CMD`.
pub async fn while_leader(
    framework: &Framework,
    path: &str,
    id: &str,
    requeue: bool,
    hold: &HoldOptions,
    command: &[String],
) -> Result<u8, Failure> {
    let latch = LeaderLatch::new(framework, path, id)?;
    let mut events = latch.subscribe();
    latch.start()?;
    loop {
        let led = match hold.timeout {
            Some(timeout) => latch.await_leadership_timeout(timeout).await,
            None => latch.await_leadership().await,
        };
        match led {
            Ok(_) => {}
            Err(zk_recipes_leader::LeaderError::Timeout { .. }) => {
                eprintln!("zkr: not leader of {path} within the timeout");
                latch.close(CloseMode::Silent).await?;
                return Ok(EXIT_NO);
            }
            Err(err) => return Err(err.into()),
        }
        info!(path, id, "leading");
        let not_leader = async {
            loop {
                match events.next().await {
                    None => return "closed".to_owned(),
                    Some(LeadershipEvent::NotLeader { reason }) => return format!("{reason:?}"),
                    Some(LeadershipEvent::Lagged { .. }) if !latch.has_leadership() => {
                        return "lagged".to_owned()
                    }
                    Some(_) => {}
                }
            }
        };
        match run_while(command, not_leader, hold.grace).await? {
            Ended::Exited(code) => {
                latch.close(CloseMode::Silent).await?;
                return Ok(code);
            }
            Ended::Lost(reason) if requeue => {
                eprintln!("zkr: leadership of {path} lost ({reason}); the command was stopped; waiting to lead again");
            }
            Ended::Lost(reason) => {
                eprintln!("zkr: leadership of {path} lost ({reason}); the command was stopped");
                latch.close(CloseMode::Silent).await?;
                return Ok(EXIT_LOST);
            }
        }
    }
}

/// Runs `command` until it exits or `lost` resolves; then SIGTERM, and SIGKILL after `grace`.
async fn run_while(
    command: &[String],
    lost: impl Future<Output = String>,
    grace: Duration,
) -> Result<Ended, Failure> {
    let (program, args) = command.split_first().ok_or("no command given after --")?;
    let mut child = Command::new(program)
        .args(args)
        .kill_on_drop(true)
        .spawn()
        .map_err(|err| format!("cannot run {program}: {err}"))?;
    tokio::select! {
        status = child.wait() => Ok(Ended::Exited(exit_code(status?))),
        reason = lost => {
            stop(&mut child, grace).await?;
            Ok(Ended::Lost(reason))
        }
    }
}

/// SIGTERM, then SIGKILL if the child has not exited after `grace`.
async fn stop(child: &mut Child, grace: Duration) -> Result<(), Failure> {
    if let Some(pid) = child.id().and_then(|id| Pid::from_raw(id as i32)) {
        let _ = kill_process(pid, Signal::TERM);
    }
    if tokio::time::timeout(grace, child.wait()).await.is_err() {
        child.kill().await?;
    }
    Ok(())
}

/// The child's exit code, or 128 + the signal that ended it (as shells report it).
fn exit_code(status: std::process::ExitStatus) -> u8 {
    match (status.code(), status.signal()) {
        (Some(code), _) => code.clamp(0, 255) as u8,
        (None, Some(signal)) => (128 + signal).clamp(0, 255) as u8,
        (None, None) => 1,
    }
}
