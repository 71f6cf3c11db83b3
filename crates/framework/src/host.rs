//! The default node data of Curator's recipes: this host's address.

use std::net::{IpAddr, ToSocketAddrs};

/// This host's address as ASCII, the default data of lock and semaphore nodes, as Curator writes it
/// (`InetAddress.getLocalHost().getHostAddress()`): the host name resolved, IPv4 preferred, else
/// `127.0.0.1`.
///
/// ```
/// let address = zk_recipes_framework::local_address();
/// assert!(std::str::from_utf8(&address).unwrap().parse::<std::net::IpAddr>().is_ok());
/// ```
pub fn local_address() -> Vec<u8> {
    resolve_host_name().unwrap_or(IpAddr::from([127, 0, 0, 1])).to_string().into_bytes()
}

fn resolve_host_name() -> Option<IpAddr> {
    let host_name = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())?;
    let host_name = host_name.trim();
    if host_name.is_empty() {
        return None;
    }
    let addresses: Vec<IpAddr> = (host_name, 0).to_socket_addrs().ok()?.map(|address| address.ip()).collect();
    addresses.iter().find(|address| address.is_ipv4()).or_else(|| addresses.first()).copied()
}
