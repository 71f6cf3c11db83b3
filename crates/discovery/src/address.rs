//! The default address of a service instance, as Curator's `ServiceInstance.builder()` picks it.
//!
//! Curator's discovery does not use `InetAddress.getLocalHost()` (the framework's
//! [`local_address`](zk_recipes_framework::local_address), the default data of lock nodes), which
//! is often a loopback address (`127.0.1.1` on Debian): other hosts could not reach it. It takes
//! the first address of `ServiceInstanceBuilder.getAllLocalIPs()`: every address of every network
//! interface that is not a loopback address, nor link-local unless the interface is
//! point-to-point.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::OnceLock;

/// This host's address for a new instance (see [`crate::ServiceInstance::builder`]), looked up
/// once per process.
pub(crate) fn default_address() -> Option<String> {
    static ADDRESS: OnceLock<Option<String>> = OnceLock::new();
    ADDRESS
        .get_or_init(|| {
            let interfaces = if_addrs::get_if_addrs().ok()?;
            let candidates = interfaces.iter().map(|interface| Candidate {
                interface: &interface.name,
                address: interface.ip(),
                point_to_point: interface.is_p2p(),
            });
            pick(candidates)
        })
        .clone()
}

/// One address of one interface.
#[derive(Debug, Clone, Copy)]
struct Candidate<'a> {
    interface: &'a str,
    address: IpAddr,
    point_to_point: bool,
}

/// Curator's `LocalIpFilter` default: not loopback, and not link-local unless point-to-point.
fn usable(candidate: &Candidate<'_>) -> bool {
    !candidate.address.is_loopback() && (candidate.point_to_point || !is_link_local(candidate.address))
}

/// Java's `isLinkLocalAddress`: 169.254.0.0/16 and fe80::/10.
fn is_link_local(address: IpAddr) -> bool {
    match address {
        IpAddr::V4(v4) => v4.is_link_local(),
        IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
    }
}

/// The first usable IPv4 address in the system's order, else the first usable IPv6 address, as
/// Java writes it.
fn pick<'a>(candidates: impl Iterator<Item = Candidate<'a>> + Clone) -> Option<String> {
    let usable_ones = candidates.filter(usable);
    if let Some(v4) = usable_ones.clone().find_map(|candidate| match candidate.address {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(_) => None,
    }) {
        return Some(java_v4(v4));
    }
    usable_ones.into_iter().find_map(|candidate| match candidate.address {
        IpAddr::V6(v6) => Some(java_v6(v6, candidate.interface)),
        IpAddr::V4(_) => None,
    })
}

fn java_v4(address: Ipv4Addr) -> String {
    address.to_string()
}

/// `Inet6Address.getHostAddress()` of an interface's address: eight uncompressed lower-case hex
/// groups, then `%` and the interface's name.
fn java_v6(address: Ipv6Addr, interface: &str) -> String {
    let groups: Vec<String> = address.segments().iter().map(|group| format!("{group:x}")).collect();
    format!("{}%{interface}", groups.join(":"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(interface: &'static str, address: &str, point_to_point: bool) -> Candidate<'static> {
        Candidate { interface, address: address.parse().expect("address"), point_to_point }
    }

    #[test]
    fn the_first_usable_ipv4_address_wins() {
        // This machine's interfaces: Curator 5.4 (with java.net.preferIPv4Stack=true) wrote 192.0.2.2.
        let interfaces = [
            candidate("lo", "127.0.0.1", false),
            candidate("eth0", "192.0.2.2", false),
            candidate("lo", "::1", false),
            candidate("eth0", "fd00::2", false),
            candidate("eth0", "fe80::fc:ff:fe00:1", false),
        ];
        assert_eq!(pick(interfaces.iter().copied()).as_deref(), Some("192.0.2.2"));
    }

    #[test]
    fn link_local_counts_only_on_point_to_point_links_and_ipv6_is_written_as_java_writes_it() {
        let interfaces = [candidate("eth0", "169.254.1.1", false), candidate("eth0", "fd00::2", false)];
        // Without the IPv4 flag Curator 5.4 wrote this machine's fd00::2 as below.
        assert_eq!(pick(interfaces.iter().copied()).as_deref(), Some("fd00:0:0:0:0:0:0:2%eth0"));
        let tunnel = [candidate("tun0", "169.254.1.1", true)];
        assert_eq!(pick(tunnel.iter().copied()).as_deref(), Some("169.254.1.1"));
        let only_loopback = [candidate("lo", "127.0.0.1", false), candidate("lo", "::1", false)];
        assert_eq!(pick(only_loopback.iter().copied()), None);
        let link_local_v6 = [candidate("eth0", "fe80::1", false)];
        assert_eq!(pick(link_local_v6.iter().copied()), None);
    }

    #[test]
    fn this_host_has_an_answer_that_is_not_loopback() {
        if let Some(address) = default_address() {
            let ip = address.split('%').next().unwrap_or_default();
            let ip: IpAddr = ip.parse().unwrap_or_else(|_| panic!("{address}"));
            assert!(!ip.is_loopback(), "{address}");
        }
    }
}
