//! Following the ensemble (Curator's `EnsembleTracker`): the servers' dynamic configuration
//! (`/zookeeper/config`), parsed, and the connect string every new session opens with kept
//! current when servers are added, removed or moved (`reconfig`).
//!
//! The configuration is read when a session opens and after each reconnection, on the root
//! whatever the namespace or chroot (CURATOR-593). When it names client addresses, one persistent
//! watch per session on `/zookeeper/config` follows it (added again after a reconnection, because
//! zookeeper-client 0.11 does not resend persistent watches; removed with the session). A configuration
//! that names no client address (a static `zoo.cfg` whose `server.N` lines have no `;clientPort`)
//! changes nothing, as in Curator: behind proxies or NAT such ensembles keep the connect string
//! given. Observers are included, as Curator includes them. A wildcard client address
//! (`0.0.0.0`, `[::]`, or a bare port) is replaced by the server's quorum host, as Curator does.
//!
//! zookeeper-client 0.11 cannot change the servers of a live client (there is no
//! `updateServerList`): the current session keeps reconnecting to the servers it was opened with,
//! and the tracked servers are used by every session opened after it.

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::broadcast;
use tracing::{debug, info, warn};
use zookeeper_client::{AddWatchMode, Client, EventType, PersistentWatcher, SessionState};

use super::deadline::Deadline;
use super::ensemble_config::chroot_suffix;
pub use super::ensemble_config::{EnsembleConfig, EnsembleServer, ServerRole};
use super::error::Result;
use super::handle::{Core, Framework};
use super::live_session::Session;
use super::nodelay::server_entries;

/// The node where the servers publish their dynamic configuration.
pub const CONFIG_NODE: &str = "/zookeeper/config";

/// Pause before trying again to add the watch after a connection loss.
const WATCH_RETRY_PAUSE: Duration = Duration::from_millis(500);

/// How many ensemble changes a slow subscriber may fall behind.
const CHANGE_CAPACITY: usize = 64;

/// The servers of the ensemble changed: new sessions open with `new_servers`
/// ([`Framework::ensemble_changes`]).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) {
/// let mut changes = framework.ensemble_changes();
/// while let Ok(change) = changes.recv().await {
///     println!("ensemble {:?} -> {:?}", change.old_servers, change.new_servers);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct EnsembleChange {
    /// The servers (`host:port`) new sessions opened with before.
    pub old_servers: Vec<String>,
    /// The servers (`host:port`) new sessions open with from now on.
    pub new_servers: Vec<String>,
    /// The version of the configuration that named them.
    pub version: Option<u64>,
}

/// The framework's part: the connect string new sessions open with, and who hears of changes.
#[derive(Debug)]
pub(crate) struct TrackedEnsemble {
    /// The tracked connect string; `None` until a configuration names client addresses.
    connect_string: Mutex<Option<String>>,
    changes: broadcast::Sender<EnsembleChange>,
}

impl TrackedEnsemble {
    pub(crate) fn new() -> TrackedEnsemble {
        TrackedEnsemble { connect_string: Mutex::new(None), changes: broadcast::channel(CHANGE_CAPACITY).0 }
    }

    /// The connect string a new session opens with: the tracked one, else `configured`.
    pub(crate) fn connect_string(&self, configured: &str) -> String {
        self.connect_string.lock().clone().unwrap_or_else(|| configured.to_owned())
    }

    /// Takes the servers of `config` for new sessions if they differ from the current ones;
    /// returns the change. A configuration without client addresses changes nothing.
    fn apply(&self, configured: &str, config: &EnsembleConfig) -> Option<EnsembleChange> {
        let new_servers: Vec<String> = config.client_addresses().into_iter().map(str::to_owned).collect();
        if new_servers.is_empty() {
            debug!(?config, "the ensemble configuration names no client address: keeping the servers");
            return None;
        }
        let mut tracked = self.connect_string.lock();
        let current = tracked.clone().unwrap_or_else(|| configured.to_owned());
        let old_servers = server_entries(&current);
        let unchanged =
            old_servers.iter().collect::<BTreeSet<_>>() == new_servers.iter().collect::<BTreeSet<_>>();
        if unchanged {
            return None;
        }
        *tracked = Some(format!("{}{}", new_servers.join(","), chroot_suffix(configured)));
        drop(tracked);
        let change = EnsembleChange { old_servers, new_servers, version: config.version() };
        info!(old = ?change.old_servers, new = ?change.new_servers, version = ?change.version.map(|v| format!("{v:x}")), "ZooKeeper ensemble changed: new sessions use the new servers");
        ::metrics::counter!(super::metrics::names::ENSEMBLE_CHANGES).increment(1);
        // No subscriber is not an error.
        let _ = self.changes.send(change.clone());
        Some(change)
    }
}

/// Follows `/zookeeper/config` for as long as `session` lives; never returns (the supervisor drops
/// it when the session ends, which removes the watch). Does nothing when tracking is off, or over
/// TLS (the configuration names plaintext client ports only).
pub(crate) async fn follow(core: &Core, session: &Session) -> std::convert::Infallible {
    if core.config.track_ensemble && !core.config.uses_tls() {
        if let Ok(root) = session.client().clone().chroot("/") {
            track(core, &root).await;
        }
    }
    std::future::pending().await
}

/// Reads the configuration when the session opens and after every reconnection, and for an
/// ensemble whose configuration names client addresses, follows it with one persistent watch
/// (events during a disconnection may be lost: ZOOKEEPER-4698, hence the read after each
/// reconnection). Returns when the session ends.
///
/// A configuration without client addresses (a static `zoo.cfg`, a standalone server) gets no
/// watch: there is nothing to follow, and it changes only when the servers restart, which the
/// session sees as a reconnection (and reads again). So a client of a static ensemble holds no
/// watch it does not need, and the servers' watch counts stay as they were.
///
/// zookeeper-client 0.11 does not send persistent watches again when it reconnects (its
/// `SetWatches` carries only one-shot watches), so the server the session moved to has none:
/// after a reconnection the watch is added again, the new watcher before the old one is dropped
/// (dropped first, it would ask the server to remove the path's watch). The server dropped the
/// old one with the old connection, so the session still has exactly one (no CURATOR-710 leak).
async fn track(core: &Core, root: &Client) {
    let mut states = root.state_watcher();
    let mut watcher: Option<PersistentWatcher> = None;
    let mut disconnected = false;
    let mut read_again = true;
    loop {
        if std::mem::take(&mut read_again) {
            let names_clients = loop {
                match read_and_apply(core, root).await {
                    Ok(names_clients) => break names_clients,
                    Err(err) if is_terminal(&err) => return,
                    Err(_) => tokio::time::sleep(WATCH_RETRY_PAUSE).await,
                }
            };
            if names_clients {
                // Watch first, then read again: a change between the two reads is not missed.
                let Some(again) = add_watch(root).await else { return };
                watcher = Some(again);
                let _ = read_and_apply(core, root).await;
            } else {
                watcher = None;
            }
        }
        tokio::select! {
            event = next_event(&mut watcher) => match event.event_type {
                // Session states are followed below; a terminal one must end the reading here.
                EventType::Session if event.session_state.is_terminated() => return,
                EventType::Session => {}
                // A failed read is read again after the reconnection that follows it.
                _ => {
                    let _ = read_and_apply(core, root).await;
                }
            },
            state = states.changed() => match state {
                state if state.is_terminated() => return,
                SessionState::Disconnected => disconnected = true,
                _ => read_again = std::mem::take(&mut disconnected),
            },
        }
    }
}

/// The next event of the watch, if there is one.
async fn next_event(watcher: &mut Option<PersistentWatcher>) -> zookeeper_client::WatchedEvent {
    match watcher {
        Some(watcher) => watcher.changed().await,
        None => std::future::pending().await,
    }
}

/// Adds the persistent watch on the config node, retrying while the connection is away; `None`
/// once the session has ended.
async fn add_watch(root: &Client) -> Option<PersistentWatcher> {
    loop {
        match root.watch(CONFIG_NODE, AddWatchMode::Persistent).await {
            Ok(watcher) => return Some(watcher),
            Err(err) if is_terminal(&err) => return None,
            Err(err) => {
                debug!(%err, "could not watch {CONFIG_NODE} yet");
                tokio::time::sleep(WATCH_RETRY_PAUSE).await;
            }
        }
    }
}

/// Whether `err` says the session is over.
fn is_terminal(err: &zookeeper_client::Error) -> bool {
    matches!(
        err,
        zookeeper_client::Error::SessionExpired
            | zookeeper_client::Error::ClientClosed
            | zookeeper_client::Error::AuthFailed
    )
}

/// Reads the configuration and takes its servers; whether it names client addresses.
async fn read_and_apply(core: &Core, root: &Client) -> std::result::Result<bool, zookeeper_client::Error> {
    let (data, _) =
        root.get_config().await.inspect_err(|err| debug!(%err, "could not read {CONFIG_NODE}"))?;
    let text = String::from_utf8_lossy(&data);
    match EnsembleConfig::parse(&text) {
        Ok(config) => {
            core.ensemble.apply(&core.config.connect_string, &config);
            Ok(!config.client_addresses().is_empty())
        }
        Err(err) => {
            warn!(%err, "ignoring an ensemble configuration that does not parse");
            Ok(false)
        }
    }
}

impl Framework {
    /// Ensemble changes from now on: each time the servers named by `/zookeeper/config` change
    /// (servers added, removed, moved by `reconfig`), new sessions open with the new ones. Only
    /// with [`track_ensemble`](crate::FrameworkBuilder::track_ensemble) on (the default). A
    /// subscriber that falls more than 64 changes behind gets `RecvError::Lagged`.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) {
    /// let mut changes = framework.ensemble_changes();
    /// if let Ok(change) = changes.recv().await {
    ///     println!("now {}", change.new_servers.join(","));
    /// }
    /// # }
    /// ```
    pub fn ensemble_changes(&self) -> broadcast::Receiver<EnsembleChange> {
        self.core().ensemble.changes.subscribe()
    }

    /// The connect string the next session opens with: the one given to the builder until the
    /// ensemble's configuration names other servers (chroot kept).
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) {
    /// println!("next session on {}", framework.ensemble_connect_string());
    /// # }
    /// ```
    pub fn ensemble_connect_string(&self) -> String {
        self.core().ensemble.connect_string(&self.core().config.connect_string)
    }

    /// Reads and parses the ensemble's configuration (`/zookeeper/config`, from the root whatever
    /// the namespace), with retries until `deadline`.
    ///
    /// # Errors
    /// As [`Framework::retry`]; [`Error::InvalidArgument`](super::error::Error::InvalidArgument) if the configuration does not parse.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use std::time::Duration;
    /// use zk_recipes_framework::Deadline;
    ///
    /// let config = framework.ensemble_config(Deadline::after(Duration::from_secs(5))).await?;
    /// for server in config.servers() {
    ///     println!("server.{} {} {:?}", server.id(), server.role(), server.client_address());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn ensemble_config(&self, deadline: impl Into<Deadline>) -> Result<EnsembleConfig> {
        let data = self
            .retry(deadline.into(), |session| async move { Ok(session.client().get_config().await?.0) })
            .await?;
        EnsembleConfig::parse(&String::from_utf8_lossy(&data))
    }

    /// The server this process is connected to, found among the process's sockets (Linux; `None`
    /// elsewhere, or when no connection to one of the servers is open). With several clients of
    /// the same servers in one process, the first connection found.
    ///
    /// # Cancel safety
    /// Cancel safe: it only looks.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) {
    /// if let Some(server) = framework.connected_server().await {
    ///     println!("connected to {server}");
    /// }
    /// # }
    /// ```
    pub async fn connected_server(&self) -> Option<SocketAddr> {
        let connect_string = self.ensemble_connect_string();
        let configured = self.core().config.connect_string.clone();
        tokio::task::spawn_blocking(move || {
            let mut servers = super::nodelay::server_addresses(&connect_string);
            servers.extend(super::nodelay::server_addresses(&configured));
            connected_peer(&servers)
        })
        .await
        .ok()
        .flatten()
    }
}

#[cfg(target_os = "linux")]
fn connected_peer(servers: &[SocketAddr]) -> Option<SocketAddr> {
    let sockets = super::nodelay::connections_to(servers).ok()?;
    sockets.iter().find_map(|socket| {
        let peer = rustix::net::getpeername(socket).ok()??;
        SocketAddr::try_from(peer).ok()
    })
}

#[cfg(not(target_os = "linux"))]
fn connected_peer(_servers: &[SocketAddr]) -> Option<SocketAddr> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::error::Error;

    #[test]
    fn parses_participants_observers_and_the_version() {
        let config = EnsembleConfig::parse(
            "server.2=127.0.0.1:2889:3889:participant;127.0.0.1:2182\n\
             server.1=127.0.0.1:2888:3888:participant;127.0.0.1:2181\n\
             server.3=127.0.0.1:2890:3890:observer;127.0.0.1:2183\n\
             version=10000000a\n",
        )
        .expect("parses");
        assert_eq!(config.version(), Some(0x1_0000_000a));
        let ids: Vec<u64> = config.servers().iter().map(EnsembleServer::id).collect();
        assert_eq!(ids, [1, 2, 3]);
        assert_eq!(config.servers()[2].role(), ServerRole::Observer);
        assert_eq!(config.servers()[0].election_address(), "127.0.0.1:3888");
        assert_eq!(config.client_addresses(), ["127.0.0.1:2181", "127.0.0.1:2182", "127.0.0.1:2183"]);
    }

    #[test]
    fn ipv6_hosts_keep_their_brackets() {
        let config =
            EnsembleConfig::parse("server.1=[fd00::1]:2888:3888:participant;[fd00::1]:2181").expect("parses");
        let server = &config.servers()[0];
        assert_eq!(server.quorum_address(), "[fd00::1]:2888");
        assert_eq!(server.client_address(), Some("[fd00::1]:2181"));
    }

    #[test]
    fn wildcards_and_bare_ports_become_the_quorum_host() {
        let config = EnsembleConfig::parse(
            "server.1=10.0.0.1:2888:3888:participant;0.0.0.0:2181\n\
             server.2=[fd00::2]:2888:3888;[0:0:0:0:0:0:0:0]:2181\n\
             server.3=10.0.0.3:2888:3888;2181\n\
             server.4=10.0.0.4:2888:3888;[::]:2181",
        )
        .expect("parses");
        assert_eq!(
            config.client_addresses(),
            ["10.0.0.1:2181", "[fd00::2]:2181", "10.0.0.3:2181", "10.0.0.4:2181"]
        );
        assert_eq!(config.servers()[1].role(), ServerRole::Participant);
    }

    #[test]
    fn a_static_configuration_names_no_client_address() {
        let config = EnsembleConfig::parse(
            "server.1=127.0.0.1:2888:3888:participant\nserver.2=127.0.0.1:2889:3889:participant\nversion=0",
        )
        .expect("parses");
        assert_eq!(config.servers().len(), 2);
        assert!(config.client_addresses().is_empty());
        let tracked = TrackedEnsemble::new();
        assert_eq!(tracked.apply("127.0.0.1:9999", &config), None);
        assert_eq!(tracked.connect_string("127.0.0.1:9999"), "127.0.0.1:9999");
        assert_eq!(tracked.apply("127.0.0.1:9999", &EnsembleConfig::parse("").expect("empty")), None);
    }

    #[test]
    fn multiple_quorum_addresses_take_the_first() {
        let config =
            EnsembleConfig::parse("server.1=10.0.0.1:2888:3888|10.1.0.1:2888:3888;2181").expect("parses");
        assert_eq!(config.servers()[0].quorum_address(), "10.0.0.1:2888");
        assert_eq!(config.client_addresses(), ["10.0.0.1:2181"]);
    }

    #[test]
    fn malformed_lines_are_errors_and_others_are_skipped() {
        for bad in [
            "server.x=a:1:2;3",
            "server.1=a:1",
            "server.1=a:1:2:leader;3",
            "server.1=a:1:2;b:x",
            "version=zz",
        ] {
            assert!(matches!(EnsembleConfig::parse(bad), Err(Error::InvalidArgument(_))), "{bad}");
        }
        let config = EnsembleConfig::parse("group.1=1:2\nweight.1=1\nserver.1=a:1:2;a:3").expect("parses");
        assert_eq!(config.client_addresses(), ["a:3"]);
    }

    #[test]
    fn a_change_keeps_the_chroot_and_is_reported_once() {
        let tracked = TrackedEnsemble::new();
        let mut changes = tracked.changes.subscribe();
        let configured = "127.0.0.1:1,127.0.0.1:2/app/root";
        let same =
            EnsembleConfig::parse("server.1=h:7:8;127.0.0.1:2\nserver.2=h:7:8;127.0.0.1:1").expect("parses");
        assert_eq!(tracked.apply(configured, &same), None, "the same servers in another order");
        let moved = EnsembleConfig::parse(
            "server.4=h:7:8;127.0.0.1:4\nserver.5=h:7:8:observer;127.0.0.1:5\nversion=2",
        )
        .expect("parses");
        let change = tracked.apply(configured, &moved).expect("a change");
        assert_eq!(change.old_servers, ["127.0.0.1:1", "127.0.0.1:2"]);
        assert_eq!(change.new_servers, ["127.0.0.1:4", "127.0.0.1:5"]);
        assert_eq!(tracked.connect_string(configured), "127.0.0.1:4,127.0.0.1:5/app/root");
        assert_eq!(changes.try_recv().expect("broadcast"), change);
        assert_eq!(tracked.apply(configured, &moved), None, "reported once");
        assert!(changes.try_recv().is_err());
    }

    #[test]
    fn chroot_suffixes() {
        assert_eq!(chroot_suffix("a:1,b:2"), "");
        assert_eq!(chroot_suffix("a:1,tcp+tls://b:2/x/y"), "/x/y");
        assert_eq!(chroot_suffix("tcp://b:2"), "");
    }
}
