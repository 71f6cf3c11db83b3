//! Turns Nagle's algorithm off on the session's TCP connection, as the Java ZooKeeper client does
//! (`ClientCnxnSocketNIO` sets `TCP_NODELAY`).
//!
//! zookeeper-client leaves Nagle on and offers no hook to change it. With Nagle on, a request
//! written while an earlier one is unanswered stays in the kernel until the earlier reply carries
//! the server's ACK, so two requests sent back to back (a create and the listing behind it) cost
//! two round trips instead of one.
//!
//! The socket is found among the process's own descriptors: every socket in `/proc/self/fd`
//! is duplicated with `pidfd_getfd` (a new descriptor for the same socket, so a descriptor closed
//! and reused meanwhile can never be mistaken for ours), and `TCP_NODELAY` is set on those
//! connected to one of the connect string's servers. Setting it on another client's connection to
//! the same server only lowers that connection's latency too. Where the kernel refuses (Linux
//! before 5.6, a seccomp profile) nothing changes but the speed; other systems skip this.

use std::net::{SocketAddr, ToSocketAddrs};

use tracing::debug;

/// The servers named by a connect string (`host:port,tcp+tls://host:port/chroot`), resolved;
/// names that do not resolve are left out.
pub(crate) fn server_addresses(connect_string: &str) -> Vec<SocketAddr> {
    let mut addresses: Vec<SocketAddr> = server_entries(connect_string)
        .iter()
        .flat_map(|entry| entry.to_socket_addrs().into_iter().flatten())
        .map(unmapped)
        .collect();
    addresses.sort_unstable();
    addresses.dedup();
    addresses
}

/// The `host:port` entries of a connect string, without schemes or chroot (port 2181 where none
/// is given).
pub(crate) fn server_entries(connect_string: &str) -> Vec<String> {
    connect_string
        .split(',')
        .map(|entry| {
            let without_scheme = entry.split_once("://").map_or(entry, |(_, rest)| rest);
            without_scheme.split('/').next().unwrap_or_default().trim()
        })
        .filter(|host| !host.is_empty())
        .map(|host| {
            if host.rsplit_once(':').is_some_and(|(_, port)| port.parse::<u16>().is_ok()) {
                host.to_owned()
            } else {
                format!("{host}:2181")
            }
        })
        .collect()
}

/// An IPv4 address written as IPv4-mapped IPv6 (a dual-stack socket's peer) as plain IPv4.
fn unmapped(address: SocketAddr) -> SocketAddr {
    match address {
        SocketAddr::V6(v6) => match v6.ip().to_ipv4_mapped() {
            Some(v4) => SocketAddr::new(v4.into(), v6.port()),
            None => address,
        },
        SocketAddr::V4(_) => address,
    }
}

/// Duplicates of this process's sockets connected to one of `servers` (new descriptors for the
/// same sockets). Blocking (it reads `/proc`).
#[cfg(target_os = "linux")]
pub(crate) fn connections_to(servers: &[SocketAddr]) -> std::io::Result<Vec<std::os::fd::OwnedFd>> {
    use rustix::process::{getpid, pidfd_getfd, pidfd_open, PidfdFlags, PidfdGetfdFlags};

    let mut connections = Vec::new();
    if servers.is_empty() {
        return Ok(connections);
    }
    let this_process = pidfd_open(getpid(), PidfdFlags::empty())?;
    for entry in std::fs::read_dir("/proc/self/fd")? {
        let Ok(entry) = entry else { continue };
        let Some(number) = entry.file_name().to_str().and_then(|name| name.parse::<i32>().ok()) else {
            continue;
        };
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        if !is_socket {
            continue;
        }
        // Closed since the listing: nothing to do.
        let Ok(socket) = pidfd_getfd(&this_process, number, PidfdGetfdFlags::empty()) else { continue };
        let Ok(Some(peer)) = rustix::net::getpeername(&socket) else { continue };
        let Ok(peer) = SocketAddr::try_from(peer) else { continue };
        if servers.contains(&unmapped(peer)) {
            connections.push(socket);
        }
    }
    Ok(connections)
}

/// Sets `TCP_NODELAY` on this process's sockets connected to one of `servers`; returns how many
/// it changed. Blocking (it reads `/proc`): call it from `spawn_blocking`.
#[cfg(target_os = "linux")]
pub(crate) fn disable_nagle(servers: &[SocketAddr]) -> std::io::Result<usize> {
    use rustix::net::sockopt;

    let mut changed = 0;
    for socket in connections_to(servers)? {
        if sockopt::tcp_nodelay(&socket).is_ok_and(|already| !already) {
            sockopt::set_tcp_nodelay(&socket, true)?;
            changed += 1;
        }
    }
    Ok(changed)
}

#[cfg(not(target_os = "linux"))]
pub(crate) fn disable_nagle(_servers: &[SocketAddr]) -> std::io::Result<usize> {
    Ok(0)
}

/// Runs [`disable_nagle`] on the blocking pool and logs what it did.
pub(crate) async fn disable_nagle_in_background(connect_string: String) {
    let outcome =
        tokio::task::spawn_blocking(move || disable_nagle(&server_addresses(&connect_string))).await;
    match outcome {
        Ok(Ok(changed)) => debug!(changed, "TCP_NODELAY set on the ZooKeeper connection"),
        Ok(Err(err)) => {
            debug!(%err, "TCP_NODELAY not set: requests sent back to back each wait for the previous reply")
        }
        Err(err) => debug!(%err, "TCP_NODELAY task failed"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connect_strings_resolve_to_their_servers() {
        let addresses = server_addresses("127.0.0.1:2182,tcp+tls://127.0.0.2:2183/app/chroot");
        assert_eq!(addresses, vec!["127.0.0.1:2182".parse().unwrap(), "127.0.0.2:2183".parse().unwrap()]);
        assert_eq!(server_addresses("127.0.0.1"), vec!["127.0.0.1:2181".parse().unwrap()]);
        assert!(server_addresses(" , /x").is_empty());
    }

    #[test]
    fn mapped_addresses_are_compared_as_ipv4() {
        let mapped: SocketAddr = "[::ffff:127.0.0.1]:2181".parse().unwrap();
        assert_eq!(unmapped(mapped), "127.0.0.1:2181".parse::<SocketAddr>().unwrap());
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn only_sockets_connected_to_the_servers_change() {
        use std::net::{TcpListener, TcpStream};
        let server = TcpListener::bind("127.0.0.1:0").unwrap();
        let other = TcpListener::bind("127.0.0.1:0").unwrap();
        let ours = TcpStream::connect(server.local_addr().unwrap()).unwrap();
        let theirs = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        assert!(!ours.nodelay().unwrap() && !theirs.nodelay().unwrap());
        let changed = disable_nagle(&[server.local_addr().unwrap()]).expect("pidfd_getfd works here");
        assert_eq!(changed, 1);
        assert!(ours.nodelay().unwrap(), "the connection to the server has TCP_NODELAY");
        assert!(!theirs.nodelay().unwrap(), "a connection elsewhere is left alone");
        assert_eq!(disable_nagle(&[server.local_addr().unwrap()]).unwrap(), 0, "nothing left to change");
    }

    /// Whether every connection of this process to `connect`'s servers has `TCP_NODELAY` (`None`
    /// if there is none).
    #[cfg(target_os = "linux")]
    fn all_without_nagle(connect: &str) -> Option<bool> {
        let connections = connections_to(&server_addresses(connect)).unwrap();
        let flags: Vec<bool> =
            connections.iter().map(|socket| rustix::net::sockopt::tcp_nodelay(socket).unwrap()).collect();
        (!flags.is_empty()).then(|| flags.iter().all(|nodelay| *nodelay))
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn the_framework_turns_nagle_off_on_its_connection_unless_told_not_to() {
        use std::time::Duration;
        use zk_recipes_testing::{within, within_for, SERVER_START};
        let server = within_for(SERVER_START, "server start", zk_recipes_testing::TestingServer::start())
            .await
            .unwrap();
        let connect = server.connect_string();
        let deadline = crate::session::Deadline::after(Duration::from_secs(20));

        let plain = crate::session::Framework::builder(connect.as_str()).tcp_nodelay(false).start().unwrap();
        within("session", plain.session(deadline)).await.unwrap();
        assert_eq!(all_without_nagle(&connect), Some(false), "tcp_nodelay(false) leaves Nagle on");

        let default = crate::session::Framework::builder(connect.as_str()).start().unwrap();
        within("session", default.session(deadline)).await.unwrap();
        // `session` returns once connected; the option is set before that.
        assert_eq!(all_without_nagle(&connect), Some(true), "the default sets TCP_NODELAY (on both)");
        within("close", default.close()).await;
        within("close", plain.close()).await;
    }

    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn nagle_is_turned_off_again_on_the_socket_of_a_reconnection() {
        use std::time::{Duration, Instant};
        use zk_recipes_testing::{within, within_for, SERVER_START};
        let mut server = within_for(SERVER_START, "server start", zk_recipes_testing::TestingServer::start())
            .await
            .unwrap();
        let connect = server.connect_string();
        let framework = crate::session::Framework::builder(connect.as_str())
            .session_timeout(Duration::from_secs(20))
            .start()
            .unwrap();
        let mut events = framework.connection_events();
        within("session", framework.session(crate::session::Deadline::after(Duration::from_secs(20))))
            .await
            .unwrap();
        assert_eq!(all_without_nagle(&connect), Some(true));
        let step = Duration::from_secs(30);
        tokio::time::timeout(step, server.restart()).await.expect("restart in time").unwrap();
        // Same session, new socket (zookeeper-client reconnects by itself).
        loop {
            let update = tokio::time::timeout(step, events.next()).await.expect("an event in time");
            if update.expect("open").state() == crate::session::state::ConnectionState::Reconnected {
                break;
            }
        }
        // The pass after a reconnection runs in the background: poll until it has, with a deadline.
        let deadline = Instant::now() + step;
        while all_without_nagle(&connect) != Some(true) {
            assert!(Instant::now() < deadline, "TCP_NODELAY set on the new socket within {step:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        within("close", framework.close()).await;
    }
}
