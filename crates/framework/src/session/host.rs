//! The default node data of Curator's recipes: this host's address, as Java writes it.

use std::net::{SocketAddr, ToSocketAddrs};

/// This host's address as ASCII, the default data of lock, semaphore and queue nodes, exactly as
/// Curator writes it (`InetAddress.getLocalHost().getHostAddress()`): the host name resolved, IPv4
/// preferred (Java's default); IPv6 in Java's long form (`fd00:0:0:0:0:0:0:1`, with `%<scope>`
/// when scoped); empty when the host name does not resolve (Curator's fallback).
///
/// Resolved once per process, as Curator resolves it once per JVM (a static of
/// `CuratorFrameworkFactory`): making ten thousand locks costs one name lookup, not ten thousand.
///
/// ```
/// let address = zk_recipes_framework::local_address();
/// let text = std::str::from_utf8(&address).unwrap();
/// assert!(text.is_empty() || text.split('%').next().unwrap().parse::<std::net::IpAddr>().is_ok());
/// ```
pub fn local_address() -> Vec<u8> {
    static ADDRESS: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    ADDRESS
        .get_or_init(|| {
            resolve_host_name().map(|address| java_host_address(&address)).unwrap_or_default().into_bytes()
        })
        .clone()
}

/// The host name as the system has it (`uname`'s node name, what Java's `getLocalHost` asks for).
fn system_host_name() -> Option<String> {
    #[cfg(unix)]
    return rustix::system::uname().nodename().to_str().ok().map(str::to_owned);
    #[cfg(not(unix))]
    std::env::var("COMPUTERNAME").ok()
}

fn resolve_host_name() -> Option<SocketAddr> {
    let host_name = system_host_name().or_else(|| std::env::var("HOSTNAME").ok())?;
    let host_name = host_name.trim();
    if host_name.is_empty() {
        return None;
    }
    let addresses: Vec<SocketAddr> = (host_name, 0).to_socket_addrs().ok()?.collect();
    addresses.iter().find(|address| address.is_ipv4()).or_else(|| addresses.first()).copied()
}

/// `InetAddress.getHostAddress()`: dotted IPv4, or eight uncompressed lowercase hex groups for IPv6
/// with `%<scope id>` when the address is scoped.
fn java_host_address(address: &SocketAddr) -> String {
    match address {
        SocketAddr::V4(v4) => v4.ip().to_string(),
        SocketAddr::V6(v6) => {
            let groups: Vec<String> = v6.ip().segments().iter().map(|group| format!("{group:x}")).collect();
            let mut text = groups.join(":");
            if v6.scope_id() != 0 {
                text.push_str(&format!("%{}", v6.scope_id()));
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_are_written_as_java_writes_them() {
        let v4: SocketAddr = "10.1.2.3:0".parse().expect("v4");
        assert_eq!(java_host_address(&v4), "10.1.2.3");
        let v6: SocketAddr = "[fd00::1]:0".parse().expect("v6");
        assert_eq!(java_host_address(&v6), "fd00:0:0:0:0:0:0:1");
        let scoped: SocketAddr = "[fe80::1%1]:0".parse().expect("scoped");
        assert_eq!(java_host_address(&scoped), "fe80:0:0:0:0:0:0:1%1");
    }
}
