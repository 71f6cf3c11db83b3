//! The framework handle: what its clones share, and what it tells about the connection.

use std::sync::Arc;

use metrics::Label;
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::info;
use zookeeper_client::{Acl, SessionId};

use super::acl::AclProvider;
use super::builder::FrameworkBuilder;
use super::error::{ConnectionFailure, Error, Result};
use super::events::ConnectionEvents;
use super::in_flight::InFlight;
use super::live_session::Session;
use super::retry::RetryPolicy;
use super::snapshot::Snapshot;
use super::state::{ConnectionEvent, ConnectionSnapshot, ConnectionState, ErrorPolicy};
use super::upper::Upper;

/// The framework: one cheap-to-clone handle that always gives recipes a live ZooKeeper session
/// (Curator's `CuratorFramework`).
///
/// A background task owns the session. When the session is lost (the server expired it, or the
/// connection stayed suspended for the session timeout) that session is abandoned for good and a
/// new one is opened, once, however many callers notice. Every transition is published to
/// [`connection_events`](Self::connection_events) subscribers in order.
///
/// Dropping the last handle (or [`close`](Self::close)) closes the session.
///
/// ```no_run
/// use std::time::Duration;
/// use zk_recipes_framework::{Deadline, Framework};
///
/// # async fn demo() -> zk_recipes_framework::Result<()> {
/// let framework = Framework::builder("127.0.0.1:2181").start()?;
/// framework.block_until_connected(Duration::from_secs(10)).await?;
/// framework.ensure_path("/app/locks", Deadline::after(Duration::from_secs(5))).await?;
/// let children = framework
///     .retry(Deadline::after(Duration::from_secs(5)), |session| async move {
///         Ok(session.client().list_children("/app").await?)
///     })
///     .await?;
/// assert!(children.contains(&"locks".to_string()));
/// framework.close().await;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Framework {
    handle: Arc<Handle>,
}

/// Closes the framework when the last [`Framework`] clone given to users is dropped.
#[derive(Debug)]
struct Handle {
    core: Arc<Core>,
    close_on_drop: bool,
}

impl Drop for Handle {
    fn drop(&mut self) {
        if self.close_on_drop {
            self.core.mark_closed();
        }
    }
}

/// What the background tasks and the handles share.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) config: FrameworkBuilder,
    pub(crate) acl: Arc<dyn AclProvider>,
    pub(super) snapshot: watch::Sender<Snapshot>,
    pub(super) events: broadcast::Sender<ConnectionEvent>,
    pub(crate) supervisor: Mutex<Option<JoinHandle<()>>>,
    /// Why the last attempt to open a session failed, until one succeeds.
    pub(super) last_connection_failure: Mutex<Option<ConnectionFailure>>,
    /// What [`Framework::close`] waits for before it ends the session ([`crate::CloseDelay`]).
    pub(crate) close_delays: Arc<InFlight>,
    /// What the servers can do (multi-read), learned once.
    pub(crate) features: Arc<super::features::FeatureProbe>,
    /// What the floor above keeps in the framework ([`super::upper`]).
    pub(crate) upper: Upper,
    /// The servers new sessions open with ([`super::ensemble`]).
    pub(crate) ensemble: super::ensemble::TrackedEnsemble,
}

impl Framework {
    /// A builder for a framework connecting to `connect_string` (`host:port,host:port[/chroot]`).
    pub fn builder(connect_string: impl Into<String>) -> FrameworkBuilder {
        FrameworkBuilder::new(connect_string)
    }

    /// A handle on `core` that closes the framework when its last clone is dropped.
    pub(super) fn from_core(core: Arc<Core>) -> Framework {
        Framework { handle: Arc::new(Handle { core, close_on_drop: true }) }
    }

    /// A handle for the framework's own tasks: it does not keep the framework open.
    pub(crate) fn without_keeping_open(&self) -> Framework {
        Framework { handle: Arc::new(Handle { core: self.handle.core.clone(), close_on_drop: false }) }
    }

    /// The connect string the framework was built with.
    pub(crate) fn connect_string(&self) -> &str {
        &self.handle.core.config.connect_string
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.handle.core
    }

    /// The floor above's part of type `T` in this framework ([`super::upper`]).
    pub(crate) fn upper<T: std::any::Any>(&self) -> &T {
        self.handle.core.upper.framework.get()
    }

    /// An identity of this framework, the same for all its clones, and not reused by another
    /// framework while any of them lives: for keying per-framework state kept outside it.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) {
    /// assert_eq!(framework.instance(), framework.clone().instance());
    /// # }
    /// ```
    pub fn instance(&self) -> usize {
        Arc::as_ptr(&self.handle.core) as usize
    }

    /// The connection as it is now.
    pub fn current(&self) -> ConnectionSnapshot {
        let snapshot = self.core().snapshot.borrow();
        ConnectionSnapshot {
            state: snapshot.state,
            since: snapshot.since,
            session_id: snapshot.session.as_ref().map(Session::id),
            generation: snapshot.generation,
            session_timeout: snapshot.session.as_ref().map(Session::timeout),
            closed: snapshot.closed,
        }
    }

    /// The earliest moment the server may expire session `generation` (a session's generation is
    /// in [`current`](Self::current), and in every node built on it), by the framework's expiry
    /// clock: the send time of the latest request the server answered on that session, plus the
    /// negotiated session timeout. The server expires a session no earlier than a session timeout
    /// after it last heard from it, and it heard such a request no earlier than it was sent, so
    /// this holds however slowly the server answers. It moves forward while the server answers
    /// (a heartbeat, an `exists` of the root, asks every tenth of the timeout while connected),
    /// and stays put while it does not, connected or not.
    ///
    /// `None` when `generation` is not the current session (before the first one, once it is
    /// lost, after a newer one opened: never another session's bound), for a read-only session
    /// (it has no clock), and once the framework is closed. Until the session's first request is
    /// answered (a round trip after it opens), it counts from the moment its connect began.
    /// Subtract a margin of your own for a timer that fires late: under
    /// `ErrorPolicy::SessionOnly` the framework declares the session `Lost` a tenth of the timeout
    /// before this moment, under `ErrorPolicy::Standard` only after a whole timeout suspended,
    /// which may come after it.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) {
    /// use std::time::Duration;
    ///
    /// // The generation of the session a hold of ours stands on.
    /// let generation = framework.current().generation;
    /// let margin = Duration::from_millis(400);
    /// if let Some(expiry) = framework.earliest_session_expiry(generation) {
    ///     // Work that relies on the hold stops by then, whatever the connection says.
    ///     let _ = tokio::time::timeout_at(expiry - margin, std::future::pending::<()>()).await;
    /// }
    /// # }
    /// ```
    pub fn earliest_session_expiry(&self, generation: u64) -> Option<Instant> {
        let snapshot = self.core().snapshot.borrow();
        if snapshot.closed {
            return None;
        }
        let session = snapshot.session.as_ref().filter(|session| session.generation() == generation)?;
        session.earliest_expiry()
    }

    /// Subscribes to every connection transition from now on, in order.
    pub fn connection_events(&self) -> ConnectionEvents {
        ConnectionEvents::new(self.core().events.subscribe(), self.core().snapshot.subscribe())
    }

    /// Which connection states recipes treat as an error.
    pub fn error_policy(&self) -> ErrorPolicy {
        self.core().config.error_policy
    }

    /// The retry policy every call uses.
    pub fn retry_policy(&self) -> &dyn RetryPolicy {
        &*self.core().config.retry_policy
    }

    /// The namespace path (`/<namespace>`), if one is configured.
    pub fn namespace(&self) -> Option<String> {
        self.core().config.namespace_path()
    }

    /// The ACL given to nodes the [`acl_provider`](Self::acl_provider) has no rule for.
    pub fn default_acl(&self) -> &[Acl] {
        self.core().acl.default_acl()
    }

    /// Which ACL each node the framework and the recipes create gets
    /// ([`crate::FrameworkBuilder::acl_provider`]).
    pub fn acl_provider(&self) -> &dyn AclProvider {
        &*self.core().acl
    }

    /// The labels for a recipe's metrics at `path`: `path` itself unless turned off with
    /// [`FrameworkBuilder::metric_path_labels`](crate::FrameworkBuilder::metric_path_labels), and
    /// `extra`.
    pub fn metric_labels(&self, path: &str, extra: &[(&'static str, &str)]) -> Vec<Label> {
        let mut labels = Vec::with_capacity(extra.len() + 1);
        if self.core().config.metric_path_labels {
            labels.push(Label::new("path", path.to_owned()));
        }
        labels.extend(extra.iter().map(|(key, value)| Label::new(*key, (*value).to_owned())));
        labels
    }

    /// Checks that `size` bytes of node data fit in one request
    /// ([`FrameworkBuilder::max_node_data`]). The framework's own creates check it; recipes call
    /// it for data they write otherwise (a multi's data in total).
    ///
    /// # Errors
    /// [`Error::DataTooLarge`] when they do not.
    ///
    /// ```no_run
    /// # fn demo(framework: &zk_recipes_framework::Framework) {
    /// use zk_recipes_framework::Error;
    ///
    /// assert!(framework.check_data_size(100).is_ok());
    /// assert!(matches!(framework.check_data_size(8 << 20), Err(Error::DataTooLarge { .. })));
    /// # }
    /// ```
    pub fn check_data_size(&self, size: usize) -> Result<()> {
        let limit = self.core().config.max_node_data;
        if size > limit {
            return Err(Error::DataTooLarge { size, limit });
        }
        Ok(())
    }

    /// Whether the framework was closed.
    pub fn is_closed(&self) -> bool {
        self.core().snapshot.borrow().closed
    }
}

impl Core {
    /// Begins closing ([`Framework::close`]'s first step): the session still lives.
    pub(crate) fn mark_closing(&self) {
        self.snapshot.send_if_modified(|snapshot| !std::mem::replace(&mut snapshot.closing, true));
    }

    pub(crate) fn snapshot_now(&self) -> watch::Ref<'_, Snapshot> {
        self.snapshot.borrow()
    }

    pub(crate) fn mark_closed(&self) {
        self.snapshot.send_if_modified(|snapshot| {
            if snapshot.closed {
                return false;
            }
            snapshot.closed = true;
            true
        });
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.snapshot.subscribe()
    }

    pub(super) fn publish(
        &self,
        state: ConnectionState,
        session_id: SessionId,
        generation: u64,
        session: Option<Session>,
    ) {
        info!(?state, session = %session_id, generation, "connection state");
        ::metrics::counter!(super::metrics::names::SESSION_STATE_TRANSITIONS, "state" => state.metric_name())
            .increment(1);
        let at = Instant::now();
        self.snapshot.send_modify(|snapshot| {
            snapshot.state = Some(state);
            snapshot.since = Some(at);
            snapshot.generation = generation;
            snapshot.session = session;
        });
        // No subscriber is not an error.
        let _ = self.events.send(ConnectionEvent { state, session_id, generation, at });
    }
}
