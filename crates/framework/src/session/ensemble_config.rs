//! The servers' dynamic configuration (`/zookeeper/config`) as ZooKeeper writes it, parsed:
//! each server's id, quorum addresses, role and client address, and the configuration's version.
//! Following it is `ensemble.rs`'s.

use std::fmt;
use std::net::IpAddr;

use super::error::{Error, Result};

/// What a server does in the quorum.
///
/// ```
/// use zk_recipes_framework::ServerRole;
/// assert_eq!(ServerRole::Observer.to_string(), "observer");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ServerRole {
    /// A voting member (the default when a `server.N` line names no role).
    Participant,
    /// A non-voting member: it serves clients and follows the leader, but does not vote.
    Observer,
}

impl fmt::Display for ServerRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Participant => "participant",
            Self::Observer => "observer",
        })
    }
}

/// One `server.N=host:quorumPort:electionPort[:role][;[clientAddress:]clientPort]` line of the
/// dynamic configuration.
///
/// ```
/// use zk_recipes_framework::EnsembleConfig;
///
/// let config = EnsembleConfig::parse("server.3=10.0.0.3:2888:3888:observer;0.0.0.0:2181\n")?;
/// let server = &config.servers()[0];
/// assert_eq!(server.id(), 3);
/// assert_eq!(server.quorum_address(), "10.0.0.3:2888");
/// assert_eq!(server.client_address(), Some("10.0.0.3:2181")); // the wildcard, replaced
/// # Ok::<(), zk_recipes_framework::Error>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnsembleServer {
    id: u64,
    role: ServerRole,
    quorum_address: String,
    election_address: String,
    client_address: Option<String>,
}

impl EnsembleServer {
    /// The server id (`N` of `server.N`, the server's `myid`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Participant or observer.
    pub fn role(&self) -> ServerRole {
        self.role
    }

    /// `host:port` where followers reach the leader (the first one when several are given with
    /// `|`).
    pub fn quorum_address(&self) -> &str {
        &self.quorum_address
    }

    /// `host:port` of leader election.
    pub fn election_address(&self) -> &str {
        &self.election_address
    }

    /// `host:port` where clients connect; a wildcard address is replaced by the quorum host.
    /// `None` when the line names no client port (a static configuration).
    pub fn client_address(&self) -> Option<&str> {
        self.client_address.as_deref()
    }
}

/// The servers' dynamic configuration, as stored in `/zookeeper/config`.
///
/// ```
/// use zk_recipes_framework::{EnsembleConfig, ServerRole};
///
/// let config = EnsembleConfig::parse(
///     "server.1=10.0.0.1:2888:3888:participant;10.0.0.1:2181\n\
///      server.2=[fd00::2]:2888:3888:observer;[fd00::2]:2181\n\
///      version=100000003",
/// )?;
/// assert_eq!(config.version(), Some(0x1_0000_0003));
/// assert_eq!(config.servers()[1].role(), ServerRole::Observer);
/// assert_eq!(config.client_addresses(), ["10.0.0.1:2181", "[fd00::2]:2181"]);
/// # Ok::<(), zk_recipes_framework::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EnsembleConfig {
    version: Option<u64>,
    servers: Vec<EnsembleServer>,
}

impl EnsembleConfig {
    /// Parses the configuration text. Lines other than `server.N=...` and `version=...` (such as
    /// `group.` and `weight.` lines) are skipped.
    ///
    /// # Errors
    /// [`Error::InvalidArgument`] naming the line for a `server.N` or `version` line that does not
    /// parse.
    pub fn parse(text: &str) -> Result<EnsembleConfig> {
        let mut config = EnsembleConfig::default();
        for line in text.lines().map(str::trim).filter(|line| !line.is_empty() && !line.starts_with('#')) {
            let Some((key, value)) = line.split_once('=') else { continue };
            let (key, value) = (key.trim(), value.trim());
            if key == "version" {
                let version = u64::from_str_radix(value, 16)
                    .map_err(|_| Error::InvalidArgument(format!("bad ensemble config version {line:?}")))?;
                config.version = Some(version);
            } else if let Some(id) = key.strip_prefix("server.") {
                let id = id
                    .parse::<u64>()
                    .map_err(|_| Error::InvalidArgument(format!("bad server id in {line:?}")))?;
                let server = parse_server(id, value)
                    .ok_or_else(|| Error::InvalidArgument(format!("bad server line {line:?}")))?;
                config.servers.push(server);
            }
        }
        config.servers.sort_by_key(EnsembleServer::id);
        Ok(config)
    }

    /// The configuration's version (the zxid that committed it), when it has a `version=` line.
    pub fn version(&self) -> Option<u64> {
        self.version
    }

    /// The servers, participants and observers, by id.
    pub fn servers(&self) -> &[EnsembleServer] {
        &self.servers
    }

    /// The client addresses of every server that has one, by server id (observers included, as
    /// Curator includes them). Empty for a static configuration.
    pub fn client_addresses(&self) -> Vec<&str> {
        self.servers.iter().filter_map(EnsembleServer::client_address).collect()
    }
}

/// `host:quorumPort:electionPort[:role][|...][;[clientAddress:]clientPort]`.
fn parse_server(id: u64, value: &str) -> Option<EnsembleServer> {
    let (quorum_part, client_part) = match value.split_once(';') {
        Some((quorum, client)) => (quorum.trim(), Some(client.trim())),
        None => (value, None),
    };
    // Several quorum addresses (`a:1:2|b:1:2`, ZooKeeper 3.6+): the first names the server.
    let first = quorum_part.split('|').next()?.trim();
    let (host, rest) = split_host(first)?;
    let mut fields = rest.split(':');
    let quorum_port = fields.next()?.parse::<u16>().ok()?;
    let election_port = fields.next()?.parse::<u16>().ok()?;
    let role = match fields.next() {
        None | Some("participant") => ServerRole::Participant,
        Some("observer") => ServerRole::Observer,
        Some(_) => return None,
    };
    if fields.next().is_some() || host.is_empty() {
        return None;
    }
    let client_address = match client_part.filter(|part| !part.is_empty()) {
        None => None,
        Some(part) => {
            let (client_host, port) = match part.parse::<u16>() {
                // A bare port: the server listens on every address.
                Ok(port) => ("0.0.0.0", port),
                Err(_) => {
                    let (client_host, rest) = split_host(part)?;
                    (client_host, rest.parse::<u16>().ok()?)
                }
            };
            let client_host = if is_wildcard(client_host) { host } else { client_host };
            Some(join_host_port(client_host, port))
        }
    };
    Some(EnsembleServer {
        id,
        role,
        quorum_address: join_host_port(host, quorum_port),
        election_address: join_host_port(host, election_port),
        client_address,
    })
}

/// Splits `host:rest` or `[v6]:rest` into the host (without brackets) and what follows the colon.
fn split_host(text: &str) -> Option<(&str, &str)> {
    if let Some(bracketed) = text.strip_prefix('[') {
        let (host, rest) = bracketed.split_once(']')?;
        Some((host, rest.strip_prefix(':')?))
    } else {
        text.split_once(':')
    }
}

fn is_wildcard(host: &str) -> bool {
    host.parse::<IpAddr>().is_ok_and(|address| address.is_unspecified())
}

/// `host:port`, with an IPv6 host in brackets.
fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// The chroot suffix of a connect string (`/app` of `a:1,b:2/app`), empty without one.
pub(super) fn chroot_suffix(connect_string: &str) -> &str {
    let last = connect_string.rsplit(',').next().unwrap_or_default();
    let without_scheme = last.split_once("://").map_or(last, |(_, rest)| rest);
    without_scheme.find('/').map_or("", |at| &without_scheme[at..])
}
