//! [`ClusterNetwork`]: a private subnet on a bridge, one network namespace per member wired to it
//! by a veth pair, the routes that cut member pairs, `netem` on a member's links, and the
//! teardown (on drop, and by a watchdog shell if the test process dies).

use std::collections::BTreeSet;
use std::io::Write as _;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use super::commands::{args, find_binary, run, run_blocking, CommandFailure};
use super::link_delay::{LinkDelay, RelayEnd};
use super::topology::Pair;
use super::Degradation;
use crate::error::{Result, TestingError};

/// Subnets `10.96.0.0/24` … `10.127.255.0/24`: 8,192 candidates.
const SUBNETS: u32 = 32 * 256;
/// How many candidate subnets a cluster tries before it gives up.
const SUBNET_ATTEMPTS: u32 = 64;
/// The first member's host number: member `i` is `10.B.C.(10 + i)`.
const FIRST_HOST: u8 = 10;
/// The interface name inside each member's namespace.
const MEMBER_INTERFACE: &str = "zk0";
/// How long the network watchdog may take to exit once released.
const WATCHDOG_EXIT: Duration = Duration::from_secs(2);

/// `$1` is `ip`, `$2` the bridge, the rest the namespaces. Blocks on stdin; on plain EOF (our
/// process died) it deletes them all; after a `keep` line (we tore down ourselves) it does nothing.
const WATCHDOG_SCRIPT: &str = r#"ip=$1; bridge=$2; shift 2
trap '' INT QUIT HUP
keep=
while read -r line; do [ "$line" = keep ] && keep=1; done
if [ -z "$keep" ]; then
  for ns in "$@"; do "$ip" link del "${bridge}v${ns##*-m}"; "$ip" netns del "$ns"; done
  "$ip" link del "$bridge"
fi
"#;

/// The network of a partitionable cluster. Dropping it deletes the namespaces (and with them the
/// veth pairs) and the bridge.
#[derive(Debug)]
pub(crate) struct ClusterNetwork {
    ip: PathBuf,
    /// `zkpXXXX`: the bridge's name and the prefix of every other name.
    bridge: String,
    /// `10.B.C`.
    subnet: [u8; 3],
    size: usize,
    /// The member pairs cut now.
    cuts: BTreeSet<Pair>,
    /// The member degraded now, and how: by `netem`, or by the user-space relay.
    degraded: Option<(usize, Slowdown)>,
    /// How many degradations were started (each relay's seed).
    degradations: u64,
    watchdog: Option<(Child, ChildStdin)>,
    /// Namespaces and links created so far (all of them once set up).
    created_members: usize,
    bridge_created: bool,
}

impl ClusterNetwork {
    /// Creates the bridge and `size` member namespaces, on a blocking thread.
    ///
    /// # Errors
    /// [`TestingError::NetworkUnavailable`] when this process may not (not root, no `ip`, no
    /// network namespaces, veth pairs or bridges); [`TestingError::NetworkCommand`] for any other
    /// failure of `ip`.
    pub(crate) async fn create(size: usize) -> Result<ClusterNetwork> {
        tokio::task::spawn_blocking(move || Self::create_blocking(size)).await.map_err(|err| {
            TestingError::io("setting up the cluster's network", std::io::Error::other(err.to_string()))
        })?
    }

    fn create_blocking(size: usize) -> Result<ClusterNetwork> {
        let unavailable = |reason: String| TestingError::NetworkUnavailable { reason };
        if !rustix::process::geteuid().is_root() {
            return Err(unavailable(format!(
                "network namespaces need root; this process runs as uid {}",
                rustix::process::geteuid().as_raw()
            )));
        }
        let ip = find_binary("ip").ok_or_else(|| unavailable("no `ip` binary (iproute2)".to_owned()))?;
        if size + usize::from(FIRST_HOST) > 254 {
            return Err(TestingError::InvalidArgument(format!("{size} members do not fit in a /24")));
        }
        let taken = routed_prefixes(&ip);
        let seed = std::process::id().wrapping_mul(7919)
            ^ std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|elapsed| elapsed.subsec_nanos())
                .unwrap_or(0);
        let mut last_failure = None;
        for attempt in 0..SUBNET_ATTEMPTS {
            let candidate = (seed.wrapping_add(attempt)) % SUBNETS;
            let subnet = [10, 96 + (candidate / 256) as u8, (candidate % 256) as u8];
            if taken.iter().any(|&(network, length)| overlaps(network, length, subnet)) {
                continue;
            }
            let bridge = format!("zkp{candidate:04x}");
            let mut network = ClusterNetwork {
                ip: ip.clone(),
                bridge,
                subnet,
                size,
                cuts: BTreeSet::new(),
                degraded: None,
                degradations: 0,
                watchdog: None,
                created_members: 0,
                bridge_created: false,
            };
            // The bridge's name is the claim: creating it fails if another cluster holds it.
            match run_blocking(&ip, &args(&["link", "add", &network.bridge, "type", "bridge"])) {
                Ok(()) => network.bridge_created = true,
                Err(failure) if failure.reason.contains("File exists") => continue,
                Err(failure) => {
                    return Err(unavailable(format!("cannot create a bridge: {}", failure.reason)))
                }
            }
            last_failure = match network.set_up() {
                Ok(()) => {
                    tracing::info!(bridge = %network.bridge, subnet = %network.gateway(), size, "cluster network ready");
                    return Ok(network);
                }
                Err(err @ TestingError::NetworkUnavailable { .. }) => return Err(err),
                Err(err) => Some(err),
            };
        }
        Err(last_failure.unwrap_or_else(|| unavailable("no free 10.96-127.x.0/24 subnet".to_owned())))
    }

    /// The watchdog, the bridge's address, and every member's namespace and veth pair.
    fn set_up(&mut self) -> Result<()> {
        let namespaces: Vec<String> = (0..self.size).map(|index| self.namespace(index)).collect();
        let mut watchdog = Command::new("/bin/sh")
            .arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .arg("zk-recipes-net-watchdog")
            .arg(&self.ip)
            .arg(&self.bridge)
            .args(&namespaces)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| TestingError::io("spawning the network watchdog shell /bin/sh", err))?;
        if let Some(stdin) = watchdog.stdin.take() {
            self.watchdog = Some((watchdog, stdin));
        }
        let gateway = format!("{}/24", self.gateway());
        self.ip(&["addr", "add", &gateway, "dev", &self.bridge])?;
        self.ip(&["link", "set", &self.bridge, "up"])?;
        for index in 0..self.size {
            let namespace = self.namespace(index);
            run_blocking(&self.ip, &args(&["netns", "add", &namespace])).map_err(|failure| {
                TestingError::NetworkUnavailable {
                    reason: format!("cannot create a network namespace: {}", failure.reason),
                }
            })?;
            self.created_members = index + 1;
            let host_side = self.host_interface(index);
            run_blocking(
                &self.ip,
                &args(&[
                    "link",
                    "add",
                    &host_side,
                    "type",
                    "veth",
                    "peer",
                    "name",
                    MEMBER_INTERFACE,
                    "netns",
                    &namespace,
                ]),
            )
            .map_err(|failure| TestingError::NetworkUnavailable {
                reason: format!("cannot create a veth pair: {}", failure.reason),
            })?;
            self.ip(&["link", "set", &host_side, "master", &self.bridge, "up"])?;
            let address = format!("{}/24", self.address(index));
            self.ip(&["-n", &namespace, "addr", "add", &address, "dev", MEMBER_INTERFACE])?;
            self.ip(&["-n", &namespace, "link", "set", MEMBER_INTERFACE, "up"])?;
            self.ip(&["-n", &namespace, "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    fn ip(&self, parts: &[&str]) -> Result<()> {
        run_blocking(&self.ip, &args(parts)).map_err(CommandFailure::into_error)
    }

    /// The `ip` binary.
    pub(crate) fn ip_binary(&self) -> &std::path::Path {
        &self.ip
    }

    /// The root namespace's address on the bridge (`10.B.C.1`): where clients come from.
    pub(crate) fn gateway(&self) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, 1)
    }

    /// Member `index`'s address (`10.B.C.(10 + index)`).
    pub(crate) fn address(&self, index: usize) -> Ipv4Addr {
        let [a, b, c] = self.subnet;
        Ipv4Addr::new(a, b, c, FIRST_HOST + index as u8)
    }

    /// Member `index`'s network namespace (`zkpXXXX-mN`).
    pub(crate) fn namespace(&self, index: usize) -> String {
        format!("{}-m{index}", self.bridge)
    }

    /// The root-side end of member `index`'s veth pair (`zkpXXXXvN`).
    fn host_interface(&self, index: usize) -> String {
        format!("{}v{index}", self.bridge)
    }

    /// The member pairs cut now.
    pub(crate) fn cuts(&self) -> &BTreeSet<Pair> {
        &self.cuts
    }

    /// Makes `wanted` the set of cut pairs: a blackhole route to the other member's address in
    /// each member's namespace, for every pair newly cut; the routes of pairs no longer cut are
    /// deleted.
    pub(crate) async fn set_cuts(&mut self, wanted: BTreeSet<Pair>) -> Result<()> {
        if !wanted.is_empty() && self.degraded.is_some() {
            return Err(TestingError::InvalidArgument(
                "a degraded member's links cannot be cut too: heal the degradation first".to_owned(),
            ));
        }
        let healed: Vec<Pair> = self.cuts.difference(&wanted).copied().collect();
        let added: Vec<Pair> = wanted.difference(&self.cuts).copied().collect();
        for (verb, pairs) in [("del", healed), ("replace", added)] {
            for (a, b) in pairs {
                for (from, to) in [(a, b), (b, a)] {
                    let (namespace, target) = (self.namespace(from), format!("{}/32", self.address(to)));
                    let command = args(&["-n", &namespace, "route", verb, "blackhole", &target]);
                    run(&self.ip, &command).await.map_err(CommandFailure::into_error)?;
                }
                if verb == "del" {
                    self.cuts.remove(&(a, b));
                } else {
                    self.cuts.insert((a, b));
                }
            }
        }
        tracing::info!(bridge = %self.bridge, cuts = ?self.cuts, "cluster network partitioned");
        Ok(())
    }

    /// Slows member `index`'s links in both directions, replacing an earlier degradation (of any
    /// member): `netem` on both ends of its veth pair (what it sends, inside its namespace, and
    /// what it receives, on the root side); where the kernel has no `netem`, the user-space relay
    /// ([`LinkDelay`]).
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] while members are cut; [`TestingError::NetemUnavailable`]
    /// when neither `netem` nor the relay (`python3`, tun devices) is available.
    pub(crate) async fn degrade(&mut self, index: usize, degradation: &Degradation) -> Result<()> {
        if !self.cuts.is_empty() {
            return Err(TestingError::InvalidArgument(
                "a partitioned cluster's links cannot be degraded too: heal the partition first".to_owned(),
            ));
        }
        self.clear_degradation().await;
        self.degradations += 1;
        let slowdown = match self.netem(index, degradation).await {
            Ok(()) => Slowdown::Netem,
            Err(TestingError::NetemUnavailable { reason }) => {
                let python = LinkDelay::python().ok_or_else(|| TestingError::NetemUnavailable {
                    reason: format!("{reason}, and no python3 for the user-space link delay"),
                })?;
                let (member, peers) = self.relay_ends(index);
                let seed = self.degradations;
                tracing::debug!(%reason, "no netem: delaying in user space");
                Slowdown::Relay(
                    LinkDelay::start(&self.ip, &python, &member, &peers, degradation, seed).await?,
                )
            }
            Err(err) => return Err(err),
        };
        tracing::info!(member = index, ?degradation, by = slowdown.name(), "cluster member's links degraded");
        self.degraded = Some((index, slowdown));
        Ok(())
    }

    /// `netem` on both ends of member `index`'s veth pair.
    async fn netem(&mut self, index: usize, degradation: &Degradation) -> Result<()> {
        let tc = find_binary("tc").ok_or_else(|| TestingError::NetemUnavailable {
            reason: "no `tc` binary (iproute2)".to_owned(),
        })?;
        let netem = degradation.netem_arguments();
        let namespace = self.namespace(index);
        let host_side = self.host_interface(index);
        let mut inside = vec!["-n", &namespace, "qdisc", "replace", "dev", MEMBER_INTERFACE, "root", "netem"];
        let mut outside = vec!["qdisc", "replace", "dev", &host_side, "root", "netem"];
        inside.extend(netem.iter().map(String::as_str));
        outside.extend(netem.iter().map(String::as_str));
        for command in [inside, outside] {
            if let Err(failure) = run(&tc, &args(&command)).await {
                self.remove_netem(index).await;
                return Err(if failure.reason.contains("qdisc kind is unknown") {
                    TestingError::NetemUnavailable {
                        reason: format!("this kernel has no netem queueing discipline ({})", failure.reason),
                    }
                } else {
                    failure.into_error()
                });
            }
        }
        Ok(())
    }

    async fn remove_netem(&self, index: usize) {
        if let Some(tc) = find_binary("tc") {
            let namespace = self.namespace(index);
            let host_side = self.host_interface(index);
            // A qdisc that is not there (a half-applied degrade) is fine.
            let _ =
                run(&tc, &args(&["-n", &namespace, "qdisc", "del", "dev", MEMBER_INTERFACE, "root"])).await;
            let _ = run(&tc, &args(&["qdisc", "del", "dev", &host_side, "root"])).await;
        }
    }

    /// The relay's ends for member `index`: its own tun, and one for each other member and for
    /// the root namespace (the clients).
    fn relay_ends(&self, index: usize) -> (RelayEnd, Vec<RelayEnd>) {
        let member = RelayEnd {
            tun: format!("{}d{index}", self.bridge),
            namespace: Some(self.namespace(index)),
            address: self.address(index),
        };
        let mut peers: Vec<RelayEnd> = (0..self.size)
            .filter(|&other| other != index)
            .map(|other| RelayEnd {
                tun: format!("{}q{other}", self.bridge),
                namespace: Some(self.namespace(other)),
                address: self.address(other),
            })
            .collect();
        peers.push(RelayEnd { tun: format!("{}qr", self.bridge), namespace: None, address: self.gateway() });
        (member, peers)
    }

    async fn clear_degradation(&mut self) {
        match self.degraded.take() {
            Some((index, Slowdown::Netem)) => self.remove_netem(index).await,
            // Dropping the relay removes its tun devices and their routes.
            Some((_, Slowdown::Relay(relay))) => drop(relay),
            None => {}
        }
    }

    /// Removes every cut and the degradation.
    pub(crate) async fn heal(&mut self) -> Result<()> {
        self.clear_degradation().await;
        self.set_cuts(BTreeSet::new()).await
    }

    /// Deletes the veth pairs, the namespaces and the bridge, then releases the watchdog.
    ///
    /// The veth pairs go first and explicitly: a namespace lives on (invisibly) while the kernel
    /// still has orphaned TCP connections of the killed JVMs retrying in it, and its end of a veth
    /// pair, and so ours on the root side, with it.
    fn tear_down(&mut self) {
        // A relay's tun devices go with it; netem goes with the interfaces.
        self.degraded = None;
        for index in 0..self.created_members {
            let _ = run_blocking(&self.ip, &args(&["link", "del", &self.host_interface(index)]));
            if let Err(failure) = run_blocking(&self.ip, &args(&["netns", "del", &self.namespace(index)])) {
                tracing::warn!(
                    command = failure.command,
                    reason = failure.reason,
                    "cluster network teardown"
                );
            }
        }
        self.created_members = 0;
        if self.bridge_created {
            if let Err(failure) = run_blocking(&self.ip, &args(&["link", "del", &self.bridge])) {
                tracing::warn!(
                    command = failure.command,
                    reason = failure.reason,
                    "cluster network teardown"
                );
            }
            self.bridge_created = false;
        }
        if let Some((mut child, mut stdin)) = self.watchdog.take() {
            // A few bytes into an empty pipe never block.
            let _ = stdin.write_all(b"keep\n");
            drop(stdin);
            let deadline = Instant::now() + WATCHDOG_EXIT;
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(1));
            }
            if matches!(child.try_wait(), Ok(None)) {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        tracing::debug!(bridge = %self.bridge, "cluster network removed");
    }
}

/// How a member's links are slowed.
#[derive(Debug)]
enum Slowdown {
    /// `tc netem` on both ends of its veth pair.
    Netem,
    /// The user-space relay.
    Relay(LinkDelay),
}

impl Slowdown {
    fn name(&self) -> &'static str {
        match self {
            Slowdown::Netem => "netem",
            Slowdown::Relay(_) => "user-space relay",
        }
    }
}

impl Drop for ClusterNetwork {
    fn drop(&mut self) {
        self.tear_down();
    }
}

/// The IPv4 prefixes routed in the root namespace now (`network`, `length`), but the default route.
fn routed_prefixes(ip: &std::path::Path) -> Vec<(Ipv4Addr, u8)> {
    let Ok(output) = Command::new(ip).args(["-4", "route", "show", "table", "all"]).output() else {
        return Vec::new();
    };
    String::from_utf8_lossy(&output.stdout).lines().filter_map(parse_route_prefix).collect()
}

/// The destination prefix of one line of `ip route show`, e.g. `192.0.2.0/24 dev eth0 …` or
/// `local 10.1.2.3 dev lo …`; `None` for `default`.
fn parse_route_prefix(line: &str) -> Option<(Ipv4Addr, u8)> {
    line.split_whitespace().take(2).find_map(|word| {
        let (address, length) = word.split_once('/').unwrap_or((word, "32"));
        Some((address.parse().ok()?, length.parse().ok().filter(|length: &u8| *length <= 32)?))
    })
}

/// Whether `network/length` overlaps the /24 `subnet`.
fn overlaps(network: Ipv4Addr, length: u8, subnet: [u8; 3]) -> bool {
    let [a, b, c] = subnet;
    let candidate = u32::from(Ipv4Addr::new(a, b, c, 0));
    let common = u32::from(length.min(24));
    let mask = if common == 0 { 0 } else { u32::MAX << (32 - common) };
    (u32::from(network) & mask) == (candidate & mask)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn route_lines_give_their_prefixes() {
        assert_eq!(
            parse_route_prefix("192.0.2.0/24 dev eth0 proto kernel scope link src 192.0.2.2"),
            Some((Ipv4Addr::new(192, 0, 2, 0), 24))
        );
        assert_eq!(
            parse_route_prefix("local 10.96.3.1 dev zkp0003 table local proto kernel"),
            Some((Ipv4Addr::new(10, 96, 3, 1), 32))
        );
        assert_eq!(parse_route_prefix("default via 192.0.2.1 dev eth0"), None);
    }

    #[test]
    fn a_wider_or_equal_route_overlaps_the_subnet() {
        assert!(overlaps(Ipv4Addr::new(10, 0, 0, 0), 8, [10, 97, 4]));
        assert!(overlaps(Ipv4Addr::new(10, 97, 4, 7), 32, [10, 97, 4]));
        assert!(!overlaps(Ipv4Addr::new(10, 97, 5, 0), 24, [10, 97, 4]));
        assert!(!overlaps(Ipv4Addr::new(192, 0, 2, 0), 24, [10, 97, 4]));
    }
}
