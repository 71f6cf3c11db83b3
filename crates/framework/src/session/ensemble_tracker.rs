//! Following the ensemble (Curator's `EnsembleTracker`) on each session, and what the framework
//! tells of it.
//!
//! The configuration is read when a session opens and after each reconnection, on the root
//! whatever the namespace or chroot (CURATOR-593). When it names client addresses, one persistent
//! watch per session on `/zookeeper/config` follows it (added again after a reconnection, because
//! zookeeper-client 0.11 does not resend persistent watches; removed with the session), and each
//! change is taken by the framework's
//! [`TrackedEnsemble`](super::ensemble::TrackedEnsemble).
//!
//! zookeeper-client 0.11 cannot change the servers of a live client (there is no
//! `updateServerList`): the current session keeps reconnecting to the servers it was opened with,
//! and the tracked servers are used by every session opened after it.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::sync::broadcast;
use tracing::{debug, warn};
use zookeeper_client::{AddWatchMode, Client, EventType, PersistentWatcher, SessionState};

use super::core::Core;
use super::deadline::Deadline;
use super::ensemble::{EnsembleChange, EnsembleConfig, CONFIG_NODE};
use super::error::Result;
use super::handle::Framework;
use super::live_session::Session;

/// Pause before trying again to add the watch after a connection loss.
const WATCH_RETRY_PAUSE: Duration = Duration::from_millis(500);

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
        self.core().ensemble.subscribe()
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
    /// As [`Framework::retry`]; [`Error::InvalidArgument`](crate::Error::InvalidArgument) if the
    /// configuration does not parse.
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
