//! What the server can do ([`ServerFeatures`]), learned by probing, and
//! [`Framework::server_features`] / [`Framework::require`] that recipes call when they start.
//!
//! A feature is learned by asking for it, never from the server's version alone (TTL nodes depend
//! on `zookeeper.extendedTypesEnabled`, not on the version): one probe session of its own (same
//! servers, same credentials) sends each request once and is closed at once. The framework's own
//! session never sends an opcode the server may not know: a server that does not know one closes
//! the connection, which would suspend every lock and leadership of the framework for a question.
//! Each probe leaves nothing on the server:
//!
//! | feature | probe | since |
//! |---|---|---|
//! | [`Feature::TtlNodes`] | a TTL create under a parent that does not exist: `NoNode` = yes, `Unimplemented` = no | 3.5.3, and `zookeeper.extendedTypesEnabled=true` |
//! | [`Feature::MultiRead`] | a multi-read listing `/` | 3.6 |
//! | [`Feature::PersistentWatches`] | `addWatch` on `/` (gone with the probe session) | 3.6 |
//! | [`Feature::GetEphemerals`] | `getEphemerals` of `/` | 3.6 |
//! | [`Feature::WhoAmI`] | `whoAmI` | 3.7 |
//!
//! A probe whose connection drops on it is sent again once on a fresh probe session: dropped
//! twice (the server closes the connection on an unknown opcode), it counts as a no; a passing
//! connection loss does not make one. The version comes from the `srvr`
//! four-letter word (on the default whitelist since 3.5) when a server of the connect string
//! answers it, for error messages and logs only.
//!
//! **Caching**: per framework, for the session it was learned on. The first
//! [`Framework::server_features`] of each session generation probes again (a new session may be
//! on another server of a mixed-version ensemble, or on the same server restarted with other
//! settings); later calls of that generation answer at once. Concurrent callers share one probe.
//! A probe that cannot decide a feature (a read-only server refuses the TTL create) is not cached.
//! [`Framework::require`] of a feature some probe of this framework already found answers at
//! once, with no probe, whatever the session: a recipe's start costs a probe session once per
//! framework, not once per session.
//!
//! The batcher ([`crate::nodes`]) asks the same probes whether it may send a multi-read: while
//! that is not known, the first batch starts a probe and every batch waits for it at most a second
//! ([`PROBE_WAIT`]); until the probe says yes, batches read the stats they miss with requests of
//! their own. A refusal is logged once at INFO.

use std::fmt;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::watch;
use tracing::{debug, info};
use zookeeper_client::{Acls, AddWatchMode, Client, CreateMode};

use super::builder::FrameworkBuilder;
use super::deadline::Deadline;
use super::error::{is_connection_error, Error, Result};
use super::handle::Framework;

/// A server feature a recipe may need ([`Framework::require`]).
///
/// ```
/// use zk_recipes_framework::Feature;
///
/// assert_eq!(Feature::TtlNodes.to_string(), "TTL nodes (zookeeper.extendedTypesEnabled=true)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Feature {
    /// TTL nodes: ZooKeeper 3.5.3+ started with `zookeeper.extendedTypesEnabled=true`.
    TtlNodes,
    /// Multi-read (`getData`/`getChildren` in one request): 3.6+.
    MultiRead,
    /// Persistent and persistent-recursive watches (`addWatch`): 3.6+.
    PersistentWatches,
    /// `whoAmI`: 3.7+.
    WhoAmI,
    /// `getEphemerals`: 3.6+.
    GetEphemerals,
}

impl Feature {
    /// Every feature, in probe order.
    pub const ALL: [Feature; 5] = [
        Feature::TtlNodes,
        Feature::MultiRead,
        Feature::PersistentWatches,
        Feature::WhoAmI,
        Feature::GetEphemerals,
    ];

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Feature::TtlNodes => "TTL nodes (zookeeper.extendedTypesEnabled=true)",
            Feature::MultiRead => "multi-read (ZooKeeper 3.6+)",
            Feature::PersistentWatches => "persistent watches (ZooKeeper 3.6+)",
            Feature::WhoAmI => "whoAmI (ZooKeeper 3.7+)",
            Feature::GetEphemerals => "getEphemerals (ZooKeeper 3.6+)",
        })
    }
}

/// What the framework's server can do, as probed for one session ([`Framework::server_features`]).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::Feature;
///
/// let features = framework.server_features(Duration::from_secs(5)).await?;
/// println!("ZooKeeper {}", features.version().unwrap_or("(version unknown)"));
/// if !features.supports(Feature::TtlNodes) {
///     println!("no TTL nodes: start the servers with -Dzookeeper.extendedTypesEnabled=true");
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerFeatures {
    version: Option<String>,
    supported: u8,
    undecided: u8,
    generation: u64,
}

impl ServerFeatures {
    /// The server's version (`3.8.4`) from `srvr`, if a server answered it.
    pub fn version(&self) -> Option<&str> {
        self.version.as_deref()
    }

    /// Whether the server does `feature`. A feature the probe could not decide (TTL nodes on a
    /// read-only server) counts as supported: the call that needs it will say what is wrong.
    pub fn supports(&self, feature: Feature) -> bool {
        (self.supported | self.undecided) & feature.bit() != 0
    }

    /// The session generation these were probed for.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// `Ok` if the server does `feature`, else [`Error::MissingFeature`] naming it and the version.
    ///
    /// # Errors
    /// [`Error::MissingFeature`].
    pub fn require(&self, feature: Feature) -> Result<()> {
        if self.supports(feature) {
            return Ok(());
        }
        Err(Error::MissingFeature {
            feature,
            server_version: self.version.clone().unwrap_or_else(|| "unknown".to_owned()),
        })
    }
}

impl Framework {
    /// What the server of the current session can do: probed once per session generation on a
    /// probe session of its own (never on the framework's session), then answered from the cache.
    /// See the table in `docs/operations.md` ("Server features").
    ///
    /// # Errors
    /// As [`Framework::session`] while no session is live; [`Error::Timeout`] when `deadline`
    /// passes during the probe.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled probe closes its probe session and caches nothing; the next call
    /// probes again.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::Feature;
    /// let features = framework.server_features(std::time::Duration::from_secs(5)).await?;
    /// assert!(features.supports(Feature::MultiRead));
    /// # Ok(()) }
    /// ```
    pub async fn server_features(&self, deadline: impl Into<Deadline>) -> Result<ServerFeatures> {
        let deadline = deadline.into();
        let generation = self.session(deadline).await?.generation();
        let probe = self.core().features.clone();
        let mut cached = deadline.run(async { Ok(probe.cache.lock().await) }).await?;
        if let Some(known) = cached.as_ref().filter(|known| known.generation == generation) {
            return Ok(known.clone());
        }
        let connect_string = self.core().ensemble.connect_string(&self.core().config.connect_string);
        let learned = deadline.run(probe_all(&probe.config, &connect_string, generation)).await?;
        probe.learned_multi_read(learned.supported & Feature::MultiRead.bit() != 0);
        probe.seen_supported.fetch_or(learned.supported, Ordering::AcqRel);
        if learned.undecided == 0 {
            *cached = Some(learned.clone());
        }
        Ok(learned)
    }

    /// Fails with [`Error::MissingFeature`] (naming the feature and the server's version) when the
    /// server cannot do `feature`: the one call a recipe that needs a feature makes when it starts,
    /// so it fails there with a clear error rather than at its first request.
    ///
    /// # Errors
    /// [`Error::MissingFeature`]; otherwise as [`server_features`](Self::server_features).
    ///
    /// # Cancel safety
    /// As [`server_features`](Self::server_features).
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::{Error, Feature};
    /// match framework.require(Feature::TtlNodes, std::time::Duration::from_secs(5)).await {
    ///     Err(Error::MissingFeature { server_version, .. }) => println!("ZooKeeper {server_version} has no TTL nodes"),
    ///     other => other?,
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn require(&self, feature: Feature, deadline: impl Into<Deadline>) -> Result<()> {
        // Once a probe of this framework found it, a recipe's start needs no probe (nor a session
        // of its own) again: servers do not lose a feature short of a downgrade.
        if self.core().features.seen_supported.load(Ordering::Acquire) & feature.bit() != 0 {
            return Ok(());
        }
        self.server_features(deadline).await?.require(feature)
    }
}

/// What is known of the server's multi-read, for the batcher.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MultiRead {
    Unknown,
    Supported,
    Refused,
}

/// How long a background probe may take before it decides nothing.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a batch waits for a running probe before it reads without a multi-read.
const PROBE_WAIT: Duration = Duration::from_secs(1);
/// How long `srvr` may take on each server.
const SRVR_TIMEOUT: Duration = Duration::from_secs(2);

/// The framework's probes and what they learned; see the module docs.
#[derive(Debug)]
pub(crate) struct FeatureProbe {
    multi_read: watch::Sender<MultiRead>,
    probing: AtomicBool,
    /// The last probe's answer, for its session generation; locked across a probe so that
    /// concurrent callers share it.
    cache: tokio::sync::Mutex<Option<ServerFeatures>>,
    /// The features some probe of this framework found supported (bits of [`Feature`]):
    /// [`Framework::require`] answers these at once, with no probe, on every session after.
    seen_supported: std::sync::atomic::AtomicU8,
    /// The framework's settings, for the probe's session.
    config: FrameworkBuilder,
}

impl FeatureProbe {
    pub(crate) fn new(config: FrameworkBuilder) -> Self {
        Self {
            multi_read: watch::Sender::new(MultiRead::Unknown),
            probing: AtomicBool::new(false),
            cache: tokio::sync::Mutex::new(None),
            seen_supported: std::sync::atomic::AtomicU8::new(0),
            config,
        }
    }

    /// Whether a batch may send a multi-read. While that is not known, the first ask starts a
    /// probe (on `runtime`), and every ask waits for it a moment ([`PROBE_WAIT`]); a probe slower
    /// than that leaves the batch to read without one.
    ///
    /// # Cancel safety
    /// Cancel safe: the probe runs on by itself.
    pub(crate) async fn multi_read(self: &Arc<Self>, runtime: Option<&tokio::runtime::Handle>) -> bool {
        let mut known = self.multi_read.subscribe();
        if *known.borrow() == MultiRead::Unknown {
            if let Some(runtime) = runtime {
                if !self.probing.swap(true, Ordering::AcqRel) {
                    runtime.spawn(self.clone().probe_in_background());
                }
            }
        }
        let decided = tokio::time::timeout(PROBE_WAIT, async {
            known.wait_for(|known| *known != MultiRead::Unknown).await.map(|known| *known)
        })
        .await;
        matches!(decided, Ok(Ok(MultiRead::Supported)))
    }

    async fn probe_in_background(self: Arc<Self>) {
        let outcome = tokio::time::timeout(PROBE_TIMEOUT, probe_multi_read(&self.config)).await;
        match outcome {
            Ok(Some(supported)) => self.learned_multi_read(supported),
            Ok(None) | Err(_) => {
                debug!("the multi-read probe could not reach a server; the next batch asks again")
            }
        }
        self.probing.store(false, Ordering::Release);
    }

    fn learned_multi_read(&self, supported: bool) {
        let now = if supported { MultiRead::Supported } else { MultiRead::Refused };
        let before = self.multi_read.send_replace(now);
        if before != now && !supported {
            info!(
                "the server refuses multi-reads (ZooKeeper before 3.6): batched creates read their \
                 stats with requests of their own"
            );
        } else if before != now {
            debug!("the server answers multi-reads: batches read stats and listings in one");
        }
    }
}

/// What one probe request said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Answer {
    Yes,
    No,
    /// The server could not say (a read-only server refuses every write).
    Undecided,
    /// The probe session's connection failed on it: the session is spent; asked again once on a
    /// fresh one, and no if it drops again.
    Dropped,
}

/// Classifies a probe request's outcome: any answer about the request's content (no node, no
/// auth) means the server knows the request.
fn answer<T>(outcome: std::result::Result<T, zookeeper_client::Error>) -> Answer {
    use zookeeper_client::Error as Zk;
    match outcome {
        Ok(_) => Answer::Yes,
        Err(Zk::Unimplemented | Zk::MarshallingError | Zk::BadArguments(_)) => Answer::No,
        Err(Zk::NotReadOnly) => Answer::Undecided,
        Err(err) if is_connection_error(&err) || matches!(err, Zk::UnexpectedError(_)) => Answer::Dropped,
        Err(_) => Answer::Yes,
    }
}

/// One multi-read on a session of its own: `Some(true)` if answered, `Some(false)` if the server
/// refused it (an error, or the connection dropped on it), `None` if no session could be opened.
async fn probe_multi_read(config: &FrameworkBuilder) -> Option<bool> {
    let client = config.open_client().await.ok()?;
    Some(multi_read(&client).await == Answer::Yes)
}

async fn multi_read(client: &Client) -> Answer {
    let mut reader = client.new_multi_reader();
    if reader.add_get_children("/").is_err() {
        return Answer::No;
    }
    // Per-operation errors (no READ on "/") still make an answer: the request is known.
    match reader.commit().await {
        Ok(_) => Answer::Yes,
        Err(zookeeper_client::Error::NotReadOnly) => Answer::Undecided,
        Err(err) if is_connection_error(&err) => Answer::Dropped,
        Err(_) => Answer::No,
    }
}

/// Every probe, on probe sessions of their own, and the version from `srvr`.
async fn probe_all(
    config: &FrameworkBuilder,
    connect_string: &str,
    generation: u64,
) -> Result<ServerFeatures> {
    let version = server_version(connect_string).await;
    let mut learned = ServerFeatures { version, supported: 0, undecided: 0, generation };
    let mut client: Option<Client> = None;
    // A connection that dropped on a probe is asked again once on a fresh probe session: a server
    // that does not know the opcode drops it again (no), a passing connection loss does not.
    let mut retried = false;
    let mut features = Feature::ALL.into_iter().peekable();
    while let Some(&feature) = features.peek() {
        let probe_client = match &client {
            Some(client) => client,
            None => client.insert(config.open_client_at(connect_string).await?),
        };
        let said = match feature {
            Feature::TtlNodes => {
                let missing_parent =
                    format!("/zk-recipes-feature-probe-{}/ttl", uuid::Uuid::new_v4().simple());
                let options =
                    CreateMode::Persistent.with_acls(Acls::anyone_all()).with_ttl(Duration::from_secs(1));
                match probe_client.create(&missing_parent, b"", &options).await {
                    // Cannot happen (the parent does not exist), but then leave nothing behind.
                    Ok(_) => {
                        let _ = probe_client.delete(&missing_parent, None).await;
                        Answer::Yes
                    }
                    other => answer(other),
                }
            }
            Feature::MultiRead => multi_read(probe_client).await,
            Feature::PersistentWatches => answer(probe_client.watch("/", AddWatchMode::Persistent).await),
            Feature::WhoAmI => answer(probe_client.list_auth_users().await),
            Feature::GetEphemerals => answer(probe_client.list_ephemerals("/").await),
        };
        debug!(%feature, ?said, retried, "feature probe");
        match said {
            Answer::Yes => learned.supported |= feature.bit(),
            Answer::No => {}
            Answer::Undecided => learned.undecided |= feature.bit(),
            Answer::Dropped => {
                client = None;
                if !std::mem::replace(&mut retried, true) {
                    continue;
                }
            }
        }
        retried = false;
        features.next();
    }
    if let Some(client) = client {
        close_probe_session(client).await;
    }
    Ok(learned)
}

/// How long a probe session's close may take before it is left to finish by itself.
const PROBE_CLOSE: Duration = Duration::from_secs(1);

/// Closes a probe session and waits a moment for the server to end it, so that what the probes
/// left on it (the persistent watch on `/`) is gone when the answer is given, not a while later.
async fn close_probe_session(client: Client) {
    let mut states = client.state_watcher();
    drop(client);
    let closed = async { while !states.changed().await.is_terminated() {} };
    let _ = tokio::time::timeout(PROBE_CLOSE, closed).await;
}

/// The version a server of `connect_string` gives in `srvr` (`Zookeeper version: 3.8.4-…, built
/// on …`), if one answers.
async fn server_version(connect_string: &str) -> Option<String> {
    let hosts = connect_string.split('/').next().unwrap_or_default();
    for host in hosts.split(',').map(str::trim).filter(|host| !host.is_empty()) {
        let Ok(Ok(answer)) = tokio::time::timeout(SRVR_TIMEOUT, srvr(host)).await else { continue };
        if let Some(version) = parse_version(&answer) {
            return Some(version);
        }
    }
    None
}

async fn srvr(host: &str) -> std::io::Result<String> {
    let address: Vec<SocketAddr> = tokio::net::lookup_host(host).await?.collect();
    let mut stream = tokio::net::TcpStream::connect(&address[..]).await?;
    stream.write_all(b"srvr").await?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer).await?;
    Ok(answer)
}

/// `3.8.4` out of `srvr`'s `Zookeeper version: 3.8.4-9316c2a7…, built on …` line.
fn parse_version(srvr: &str) -> Option<String> {
    let line = srvr.lines().find_map(|line| line.strip_prefix("Zookeeper version:"))?;
    let full = line.trim().split(',').next()?.trim();
    let version = full.split('-').next()?.trim();
    (!version.is_empty()).then(|| version.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_from_srvr() {
        let srvr = "Zookeeper version: 3.8.4-9316c2a7a97e1666d8f4593f34dd6fc36ecc436c, built on 2024-02-12 22:16 UTC\nLatency min/avg/max: 0/0.0/0\n";
        assert_eq!(parse_version(srvr).as_deref(), Some("3.8.4"));
        assert_eq!(parse_version("This ZooKeeper instance is not currently serving requests"), None);
    }

    #[test]
    fn missing_feature_names_feature_and_version() {
        let features = ServerFeatures {
            version: Some("3.5.9".into()),
            supported: Feature::TtlNodes.bit(),
            undecided: 0,
            generation: 1,
        };
        assert!(features.require(Feature::TtlNodes).is_ok());
        let err = features.require(Feature::PersistentWatches).unwrap_err();
        assert_eq!(
            err.to_string(),
            "the server (ZooKeeper 3.5.9) does not support persistent watches (ZooKeeper 3.6+)"
        );
        assert!(!err.is_retryable());
        let undecided =
            ServerFeatures { version: None, supported: 0, undecided: Feature::TtlNodes.bit(), generation: 1 };
        assert!(undecided.supports(Feature::TtlNodes));
    }
}
