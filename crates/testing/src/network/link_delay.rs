//! [`LinkDelay`]: a member's links delayed and dropped in user space, for kernels without `tc
//! netem`: a small Python relay (`python/link_delay.py`, embedded) between a tun device in the
//! member's namespace and one in each peer's (every other member's, and the root namespace's for
//! clients), with a `/32` route through them on both sides.

use std::io::{BufRead, BufReader};
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::Duration;

use super::commands::{args, find_binary, run, CommandFailure};
use super::Degradation;
use crate::error::{Result, TestingError};

/// The relay, run with `python3 -c`.
const SCRIPT: &str = include_str!("../../python/link_delay.py");
/// How long the relay may take to open its tun devices.
const READY_TIMEOUT: Duration = Duration::from_secs(10);

/// One end of the relay: a tun device, the namespace it goes to (`None`: the root namespace), and
/// the address that lives there.
#[derive(Debug, Clone)]
pub(crate) struct RelayEnd {
    pub(crate) tun: String,
    pub(crate) namespace: Option<String>,
    pub(crate) address: Ipv4Addr,
}

/// A running relay. Dropping it kills the relay: its tun devices, and the routes through them,
/// vanish, and the member's traffic takes the bridge again.
#[derive(Debug)]
pub(crate) struct LinkDelay {
    relay: Child,
    stdin: Option<ChildStdin>,
}

impl LinkDelay {
    /// The `python3` that runs the relay, if there is one.
    pub(crate) fn python() -> Option<PathBuf> {
        find_binary("python3")
    }

    /// Starts the relay between `member` and `peers` and routes their traffic to each other
    /// through it.
    pub(crate) async fn start(
        ip: &Path,
        python: &Path,
        member: &RelayEnd,
        peers: &[RelayEnd],
        degradation: &Degradation,
        seed: u64,
    ) -> Result<LinkDelay> {
        let mut command = Command::new(python);
        command
            .arg("-c")
            .arg(SCRIPT)
            .arg(degradation.delay_time().as_secs_f64().to_string())
            .arg(degradation.jitter_time().as_secs_f64().to_string())
            .arg(degradation.loss_rate().to_string())
            .arg(seed.to_string())
            .arg(&member.tun)
            .args(peers.iter().map(|peer| format!("{}={}", peer.tun, peer.address)))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut relay =
            command.spawn().map_err(|err| TestingError::io(format!("spawning {}", python.display()), err))?;
        let stdin = relay.stdin.take();
        let mut link_delay = LinkDelay { relay, stdin };
        link_delay.wait_ready().await?;
        let mut routes: Vec<Vec<String>> = Vec::new();
        for end in std::iter::once(member).chain(peers) {
            routes.extend(move_and_raise(end));
        }
        for peer in peers {
            let to_peer = format!("{}/32", peer.address);
            let to_member = format!("{}/32", member.address);
            let (member_address, peer_address) = (member.address.to_string(), peer.address.to_string());
            routes.push(in_namespace(
                member,
                &["route", "replace", &to_peer, "dev", &member.tun, "src", &member_address],
            ));
            routes.push(in_namespace(
                peer,
                &["route", "replace", &to_member, "dev", &peer.tun, "src", &peer_address],
            ));
        }
        for command in routes {
            run(ip, &command).await.map_err(CommandFailure::into_error)?;
        }
        Ok(link_delay)
    }

    async fn wait_ready(&mut self) -> Result<()> {
        let stdout = self.relay.stdout.take();
        let stderr = self.relay.stderr.take();
        let read = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            if let Some(stdout) = stdout {
                let _ = BufReader::new(stdout).read_line(&mut line);
            }
            if line.trim() != "ready" {
                if let Some(mut stderr) = stderr {
                    let _ = std::io::Read::read_to_string(&mut stderr, &mut line);
                }
            }
            line
        });
        match tokio::time::timeout(READY_TIMEOUT, read).await {
            Ok(Ok(line)) if line.trim() == "ready" => Ok(()),
            Ok(Ok(said)) => Err(TestingError::NetemUnavailable {
                reason: format!("the user-space link delay did not start: {}", said.trim()),
            }),
            _ => Err(TestingError::Timeout {
                what: "waiting for the user-space link delay to open its tun devices".to_owned(),
                timeout: READY_TIMEOUT,
            }),
        }
    }
}

/// `ip link set TUN netns NS` (unless it stays in the root namespace) and `ip link set TUN up` there.
fn move_and_raise(end: &RelayEnd) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    if let Some(namespace) = &end.namespace {
        commands.push(args(&["link", "set", &end.tun, "netns", namespace]));
    }
    commands.push(in_namespace(end, &["link", "set", &end.tun, "up"]));
    commands
}

/// `ip [-n NS] parts…` for `end`'s namespace.
fn in_namespace(end: &RelayEnd, parts: &[&str]) -> Vec<String> {
    let mut command = match &end.namespace {
        Some(namespace) => args(&["-n", namespace]),
        None => Vec::new(),
    };
    command.extend(args(parts));
    command
}

impl Drop for LinkDelay {
    fn drop(&mut self) {
        // Its stdin closing ends the relay; the kill makes sure.
        drop(self.stdin.take());
        let _ = self.relay.kill();
        let _ = self.relay.wait();
    }
}
