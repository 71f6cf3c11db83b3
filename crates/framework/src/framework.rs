//! The framework handle and the task that owns the ZooKeeper session.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info, info_span, warn, Instrument};
use zookeeper_client::{Acl, Client, SessionId, SessionState};

use crate::builder::FrameworkBuilder;
use crate::cleanup::CleanupQueue;
use crate::deadline::Deadline;
use crate::diagnose::{diagnose, FailureWarnings};
use crate::error::{ConnectionFailure, Error, Result};
use crate::retry::RetryPolicy;
use crate::session::Session;
use crate::state::{ConnectionEvent, ConnectionEvents, ConnectionSnapshot, ConnectionState, ErrorPolicy};

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
    pub(crate) acl: Arc<dyn crate::acl::AclProvider>,
    snapshot: watch::Sender<Snapshot>,
    events: broadcast::Sender<ConnectionEvent>,
    pub(crate) cleanup: CleanupQueue,
    pub(crate) supervisor: Mutex<Option<JoinHandle<()>>>,
    /// Why the last attempt to open a session failed, until one succeeds.
    last_connection_failure: Mutex<Option<ConnectionFailure>>,
    /// Parents our protected creates have found in place: see [`crate::nodes::KnownParents`].
    pub(crate) known_parents: crate::nodes::KnownParents,
    /// What [`Framework::close`] waits for before it ends the session ([`crate::CloseDelay`]).
    pub(crate) close_delays: Arc<crate::close::InFlight>,
    /// What the servers can do (multi-read), learned once.
    pub(crate) features: Arc<crate::features::ServerFeatures>,
}

/// The state shared through a `watch`: what is current, for waiters and snapshots.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    pub(crate) state: Option<ConnectionState>,
    pub(crate) since: Option<Instant>,
    pub(crate) session: Option<Session>,
    pub(crate) generation: u64,
    pub(crate) closed: bool,
    /// [`Framework::close`] has begun: holds and leaderships end, the session still lives.
    pub(crate) closing: bool,
    /// The last attempt to open a session was refused for its credentials (cleared by the next
    /// session): calls that wait for a session fail at once with [`Error::AuthFailed`].
    pub(crate) auth_failed: bool,
}

/// Which sessions a call's tries may run on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sessions {
    /// The current session at each try; a lost session ends the call ([`Framework::retry`]).
    Current,
    /// The current session; after a lost session the call starts over on the next one
    /// ([`Framework::retry_across_sessions`]).
    StartingOver,
    /// Only the session of this generation: once it is lost the call ends with
    /// [`Error::SessionLost`], also while it waits for a connection
    /// ([`Framework::retry_on_session`]).
    Only(u64),
}

impl Sessions {
    /// What the call's first try waits for.
    fn first_wanted(self) -> Wanted {
        match self {
            Sessions::Current | Sessions::StartingOver => Wanted::Any,
            Sessions::Only(generation) => Wanted::Only(generation),
        }
    }
}

/// The session one try waits for.
#[derive(Debug, Clone, Copy)]
enum Wanted {
    /// Whichever is connected.
    Any,
    /// A session later than this generation (starting over after it was lost).
    After(u64),
    /// This generation's session, connected; none other.
    Only(u64),
}

impl Wanted {
    /// Whether `snapshot`'s session is connected and may run the try.
    fn is_usable(self, snapshot: &Snapshot) -> bool {
        let generation_fits = match self {
            Wanted::Any => true,
            Wanted::After(generation) => snapshot.generation > generation,
            Wanted::Only(generation) => snapshot.generation == generation,
        };
        generation_fits && snapshot.state.is_some_and(ConnectionState::is_connected)
    }

    /// Whether the one session wanted is lost for good (declared lost, or replaced).
    fn is_gone(self, snapshot: &Snapshot) -> bool {
        match self {
            Wanted::Any | Wanted::After(_) => false,
            Wanted::Only(generation) => {
                snapshot.generation > generation
                    || (snapshot.generation == generation && snapshot.state == Some(ConnectionState::Lost))
            }
        }
    }
}

/// Whether a call's operation may itself make retrying calls of the framework, which then run one
/// try each, within the outer call's budget and deadline (see [`Framework::retry`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Nesting {
    /// It may (an operation the caller wrote): its tries run in the call's retry scope.
    Possible,
    /// It never does (the framework's own operations, which only send requests): no scope is
    /// set, which saves a task-local swap on every poll of the call.
    Never,
}

tokio::task_local! {
    /// Set while a top-level [`Framework::retry`] runs: nested calls share its budget and deadline.
    static RETRY_SCOPE: Option<Instant>;
}

impl Framework {
    /// A builder for a framework connecting to `connect_string` (`host:port,host:port[/chroot]`).
    pub fn builder(connect_string: impl Into<String>) -> FrameworkBuilder {
        FrameworkBuilder::new(connect_string)
    }

    pub(crate) fn start(config: FrameworkBuilder) -> Framework {
        let config_for_probe = config.clone();
        let (snapshot, _) = watch::channel(Snapshot::default());
        let (events, _) = broadcast::channel(config.event_capacity);
        let acl = config.acl.clone();
        let core = Arc::new(Core {
            config,
            acl,
            snapshot,
            events,
            cleanup: CleanupQueue::new(),
            supervisor: Mutex::new(None),
            last_connection_failure: Mutex::new(None),
            known_parents: crate::nodes::KnownParents::default(),
            close_delays: Arc::default(),
            features: Arc::new(crate::features::ServerFeatures::new(config_for_probe)),
        });
        let span = info_span!("zk_framework", connect = %core.config.connect_string);
        let supervisor = tokio::spawn(supervise(core.clone()).instrument(span.clone()));
        *core.supervisor.lock() = Some(supervisor);
        tokio::spawn(crate::cleanup::run_worker(core.clone()).instrument(span));
        Framework { handle: Arc::new(Handle { core, close_on_drop: true }) }
    }

    /// A handle for the framework's own tasks: it does not keep the framework open.
    pub(crate) fn from_core(core: Arc<Core>) -> Framework {
        Framework { handle: Arc::new(Handle { core, close_on_drop: false }) }
    }

    pub(crate) fn core(&self) -> &Arc<Core> {
        &self.handle.core
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
    pub fn acl_provider(&self) -> &dyn crate::AclProvider {
        &*self.core().acl
    }

    /// Waits until a session is connected, at most `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`] if none is by then, naming why the last attempt to open one failed (its
    /// source is that [`ConnectionFailure`]); [`Error::Closed`] if the framework is closed.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits for a session. A cancelled call sends nothing and holds nothing.
    pub async fn block_until_connected(&self, timeout: Duration) -> Result<()> {
        self.session(Deadline::after(timeout)).await.map(drop)
    }

    /// A connected session, waiting for one until `deadline`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits for a session. A cancelled call sends nothing and holds nothing.
    pub async fn session(&self, deadline: impl Into<Deadline>) -> Result<Session> {
        let deadline = deadline.into();
        self.wait_for_session(Wanted::Any, deadline).await
    }

    /// The session of `generation` (one a node of ours was created on, see
    /// [`OwnedNode::generation`](crate::OwnedNode::generation)), connected, waiting for it to
    /// reconnect until `deadline`: for a call that builds on something that session owns. Never
    /// a later session.
    ///
    /// # Errors
    /// [`Error::SessionLost`] once that session is lost (at once if it already is, and the moment
    /// the framework declares it lost while the server is out of reach); [`Error::Timeout`] at
    /// the deadline; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits for that session. A cancelled call sends nothing and holds
    /// nothing.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework, node: zk_recipes_framework::OwnedNode) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::{Deadline, Error};
    ///
    /// match framework.session_of(node.generation(), Deadline::after(std::time::Duration::from_secs(5))).await {
    ///     Ok(session) => println!("{} is still ours, on session {}", node.path(), session.id()),
    ///     Err(Error::SessionLost) => println!("{} went with its session", node.path()),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn session_of(&self, generation: u64, deadline: impl Into<Deadline>) -> Result<Session> {
        self.wait_for_session(Wanted::Only(generation), deadline.into()).await
    }

    /// Resolves once the session of `generation` is over: `Ok` when it was lost or a later session
    /// replaced it, [`Error::Closed`] when the framework was closed. At once if it already is. The
    /// returned future borrows nothing, and is small: made for many waiting calls at once.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches the connection state. A cancelled wait sends nothing and holds
    /// nothing.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::Deadline;
    /// let session = framework.session(Deadline::never()).await?;
    /// framework.session_lost(session.generation()).await?;
    /// println!("session {} is gone: its ephemeral nodes are not ours any more", session.id());
    /// # Ok(()) }
    /// ```
    pub fn session_lost(&self, generation: u64) -> impl Future<Output = Result<()>> + Send + 'static {
        let mut snapshot = self.core().snapshot.subscribe();
        // A loop over `changed` rather than `wait_for`, whose future is twice the size.
        async move {
            loop {
                {
                    let now = snapshot.borrow_and_update();
                    if now.closed {
                        return Err(Error::Closed);
                    }
                    let lost = now.generation > generation
                        || (now.generation == generation && now.state == Some(ConnectionState::Lost));
                    if lost {
                        return Ok(());
                    }
                }
                if snapshot.changed().await.is_err() {
                    return Err(Error::Closed);
                }
            }
        }
    }

    /// A connected session as `wanted` says, waiting for one until `deadline`.
    ///
    /// # Errors
    /// [`Error::SessionLost`] once the one session wanted ([`Wanted::Only`]) is lost.
    async fn wait_for_session(&self, wanted: Wanted, deadline: Deadline) -> Result<Session> {
        let mut snapshot = self.core().snapshot.subscribe();
        let wait = snapshot.wait_for(|snapshot| {
            snapshot.closed
                || snapshot.auth_failed
                || (wanted.is_usable(snapshot) && snapshot.session.is_some())
                || wanted.is_gone(snapshot)
        });
        let ready = match deadline.instant() {
            None => wait.await,
            Some(at) => match tokio::time::timeout_at(at, wait).await {
                Ok(ready) => ready,
                Err(_) => {
                    let last_connection_failure = self.core().last_connection_failure.lock().clone();
                    return Err(Error::Timeout { waited: deadline.elapsed(), last_connection_failure });
                }
            },
        };
        let ready = ready.map_err(|_| Error::Closed)?;
        if ready.closed {
            return Err(Error::Closed);
        }
        if wanted.is_gone(&ready) {
            return Err(Error::SessionLost);
        }
        let connected = wanted.is_usable(&ready) && ready.session.is_some();
        if ready.auth_failed && !connected {
            return Err(Error::AuthFailed { connect_string: self.core().config.connect_string.clone() });
        }
        ready.session.clone().ok_or(Error::Closed)
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

    /// Runs `operation` on a live session and retries it, per the retry policy, while it fails with
    /// a retryable error (the connection was lost, so the outcome is unknown). A lost session is not
    /// retried: it is returned as [`Error::SessionLost`].
    ///
    /// The whole call has one budget of retries and one deadline, which also bound waiting for a
    /// connection: retry calls nested inside `operation` run their operation once and leave the
    /// retrying to this one (they never multiply retries). Without a caller's deadline, each try
    /// waits at most the connection timeout for a connection before it counts as a connection loss.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the operation where it stands, as dropping `operation`'s
    /// future would; what it already sent is executed by the server.
    pub fn retry<'a, T, F, Fut>(
        &'a self,
        deadline: impl Into<Deadline>,
        operation: F,
    ) -> impl Future<Output = Result<T>> + 'a
    where
        F: FnMut(Session) -> Fut + 'a,
        Fut: Future<Output = Result<T>> + 'a,
        T: 'a,
    {
        // Not an `async fn`, which would keep its arguments twice in its state: every call of the
        // framework runs in this future.
        self.retry_loop(deadline.into(), Sessions::Current, Nesting::Possible, operation)
    }

    /// As [`retry`](Self::retry), but when the session is lost the operation starts over on the next
    /// session (counted against the same budget). Only for operations that are safe to repeat from
    /// scratch on a new session.
    ///
    /// # Cancel safety
    /// As [`retry`](Self::retry).
    pub fn retry_across_sessions<'a, T, F, Fut>(
        &'a self,
        deadline: impl Into<Deadline>,
        operation: F,
    ) -> impl Future<Output = Result<T>> + 'a
    where
        F: FnMut(Session) -> Fut + 'a,
        Fut: Future<Output = Result<T>> + 'a,
        T: 'a,
    {
        self.retry_loop(deadline.into(), Sessions::StartingOver, Nesting::Possible, operation)
    }

    pub(crate) async fn retry_loop<T, F, Fut>(
        &self,
        deadline: Deadline,
        sessions: Sessions,
        nesting: Nesting,
        mut operation: F,
    ) -> Result<T>
    where
        F: FnMut(Session) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        if let Ok(outer) = RETRY_SCOPE.try_with(|outer| *outer) {
            // Nested: one try, within the tighter deadline; the top-level call does the retrying.
            let deadline = deadline.min(outer);
            let wanted = sessions.first_wanted();
            let session = match self.ready_session(wanted) {
                Some(session) => session,
                None => Box::pin(self.session_for_try(wanted, deadline)).await?,
            };
            let running = deadline.run(Box::pin(operation(session)));
            return self.finish_error(running.await);
        }
        // Borrowed, not cloned: a clone would touch the policy's shared count on every call.
        let policy = self.retry_policy();
        let tries = async move {
            let mut retry_count = 0u32;
            let mut wanted = sessions.first_wanted();
            loop {
                // Each step in a scope of its own, so the loop's state keeps only what it
                // still needs across each await: every call of the framework carries it.
                let (err, generation) = 'attempt: {
                    let session = match self.ready_session(wanted) {
                        Some(session) => session,
                        // Boxed: waiting for a connection is rare, and its future is large.
                        None => match Box::pin(self.session_for_try(wanted, deadline)).await {
                            Ok(session) => session,
                            Err(err) => break 'attempt (err, 0),
                        },
                    };
                    // The session is moved into the operation in a block of its own, so the
                    // loop's state does not keep a copy of it across the await.
                    let (generation, running) = {
                        let session = session;
                        let generation = session.generation();
                        // Boxed: the operation's future (often kilobytes) is not moved again
                        // by every wrapper around this loop.
                        (generation, deadline.run(Box::pin(operation(session))))
                    };
                    match running.await {
                        Ok(value) => return Ok(value),
                        Err(err) => (err, generation),
                    }
                };
                let retry_on_new_session =
                    matches!(sessions, Sessions::StartingOver) && err.is_session_lost() && !self.is_closed();
                if !(err.is_retryable() || retry_on_new_session) {
                    return self.finish_error(Err(err));
                }
                let Some(sleep) = policy.allow_retry(retry_count, deadline.elapsed()) else {
                    debug!(retry_count, error = %err, "retry budget spent");
                    return self.finish_error(Err(err));
                };
                debug!(retry_count, sleep = %crate::ReadableDuration(sleep), error = %err, "retrying");
                retry_count += 1;
                if retry_on_new_session {
                    wanted = Wanted::After(generation);
                }
                // Boxed: a retry's pause is rare, and a timer is large.
                Box::pin(deadline.sleep(sleep)).await?;
            }
        };
        match nesting {
            Nesting::Possible => RETRY_SCOPE.scope(deadline.instant(), tries).await,
            Nesting::Never => tries.await,
        }
    }

    /// The current session if a try may run on it right now (as [`session_for_try`] would return
    /// at once), without waiting.
    ///
    /// [`session_for_try`]: Self::session_for_try
    fn ready_session(&self, wanted: Wanted) -> Option<Session> {
        let snapshot = self.core().snapshot.borrow();
        let ready = !snapshot.closed && wanted.is_usable(&snapshot);
        ready.then(|| snapshot.session.clone()).flatten()
    }

    /// A session for one try: waits at most the connection timeout (counted as a retryable
    /// connection loss) or the caller's deadline (a timeout).
    async fn session_for_try(&self, wanted: Wanted, deadline: Deadline) -> Result<Session> {
        let connection_timeout = self.core().config.connection_timeout;
        let for_try = deadline.min(Some(Instant::now() + connection_timeout));
        match self.wait_for_session(wanted, for_try).await {
            Err(Error::Timeout { .. }) if !deadline.is_expired() => {
                Err(Error::ZooKeeper(zookeeper_client::Error::ConnectionLoss))
            }
            other => other,
        }
    }

    /// Maps what a dead session's client says into the framework's words.
    fn finish_error<T>(&self, result: Result<T>) -> Result<T> {
        match result {
            Err(err) if err.is_session_lost() => {
                Err(if self.is_closed() { Error::Closed } else { Error::SessionLost })
            }
            other => other,
        }
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

    fn publish(
        &self,
        state: ConnectionState,
        session_id: SessionId,
        generation: u64,
        session: Option<Session>,
    ) {
        info!(?state, session = %session_id, generation, "connection state");
        ::metrics::counter!(crate::metrics::names::SESSION_STATE_TRANSITIONS, "state" => state.metric_name())
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

/// How watching one session ended.
enum SessionEnd {
    Lost,
    Closed,
}

/// Owns the session: connects, publishes transitions, declares the session lost and opens the next.
async fn supervise(core: Arc<Core>) {
    let mut closed = core.subscribe();
    let mut generation = 0u64;
    let mut backoff = Duration::from_millis(50);
    let mut warnings = FailureWarnings::default();
    loop {
        let connected = tokio::select! {
            _ = closed.wait_for(|snapshot| snapshot.closed) => return,
            connected = connect(&core) => connected,
        };
        let client = match connected {
            Ok(client) => client,
            Err(err) => {
                let failure = tokio::select! {
                    _ = closed.wait_for(|snapshot| snapshot.closed) => return,
                    failure = diagnose(&core.config.connect_string, &err, core.config.uses_tls()) => failure,
                };
                warnings.failed(&failure, backoff);
                let auth_failed = matches!(err, Error::ZooKeeper(zookeeper_client::Error::AuthFailed));
                if auth_failed != core.snapshot.borrow().auth_failed {
                    core.snapshot.send_modify(|snapshot| snapshot.auth_failed = auth_failed);
                }
                ::metrics::counter!(crate::metrics::names::CONNECTION_ATTEMPTS_FAILED).increment(1);
                *core.last_connection_failure.lock() = Some(failure);
                tokio::select! {
                    _ = closed.wait_for(|snapshot| snapshot.closed) => return,
                    _ = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        };
        backoff = Duration::from_millis(50);
        warnings.connected();
        core.last_connection_failure.lock().take();
        if core.snapshot.borrow().auth_failed {
            core.snapshot.send_modify(|snapshot| snapshot.auth_failed = false);
        }
        generation += 1;
        ::metrics::counter!(crate::metrics::names::SESSIONS_CREATED).increment(1);
        let session = Session::new(
            client,
            generation,
            core.acl.clone(),
            crate::batch::Batcher::new(
                core.config.batch_writes,
                core.cleanup.sender(),
                core.features.clone(),
            ),
        );
        let first_state = match session.client().state() {
            SessionState::ConnectedReadOnly => ConnectionState::ReadOnly,
            _ if generation == 1 => ConnectionState::Connected,
            _ => ConnectionState::Reconnected,
        };
        let session_id = session.id();
        core.publish(first_state, session_id, generation, Some(session.clone()));
        let end = watch_session(&core, &session, &mut closed).await;
        let mut state_watcher = session.client().state_watcher();
        drop(session);
        match end {
            SessionEnd::Lost => {
                // Abandon the session for good: the last clone is dropped, so zookeeper-client closes
                // it if it can still reach the server. A new session is opened next.
                core.publish(ConnectionState::Lost, session_id, generation, None);
            }
            SessionEnd::Closed => {
                core.snapshot.send_modify(|snapshot| snapshot.session = None);
                // Give zookeeper-client a moment to send CloseSession so the server deletes our
                // ephemeral nodes now rather than at the session timeout.
                let closing = async {
                    loop {
                        if state_watcher.changed().await.is_terminated() {
                            break;
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(2), closing).await;
                return;
            }
        }
    }
}

/// Opens a new session on `config`'s servers with its settings (TLS, credentials), at the root.
pub(crate) async fn open_client(config: &FrameworkBuilder) -> Result<Client> {
    let connector = config.connector();
    #[cfg(feature = "tls")]
    let client = if config.tls.is_some() {
        connector.secure_connect(&config.connect_string).await?
    } else {
        connector.connect(&config.connect_string).await?
    };
    #[cfg(not(feature = "tls"))]
    let client = connector.connect(&config.connect_string).await?;
    Ok(client)
}

/// Opens a new session (never resuming an old one), inside the namespace if there is one.
async fn connect(core: &Core) -> Result<Client> {
    let client = open_client(&core.config).await?;
    if core.config.tcp_nodelay {
        // Before the session is announced, so the first requests already go out without Nagle;
        // but never held up for long (the names are resolved again): after 1 s it finishes alone.
        let tuning = crate::nodelay::disable_nagle_in_background(core.config.connect_string.clone());
        let _ = tokio::time::timeout(Duration::from_secs(1), tuning).await;
    }
    let Some(namespace) = core.config.namespace_path() else {
        return Ok(client);
    };
    let options = zookeeper_client::CreateMode::Persistent
        .with_acls(zookeeper_client::Acls::new(core.acl.acl_for_path(&namespace)));
    client.mkdir(&namespace, &options).await?;
    let root = crate::path::join(client.path(), &namespace);
    client.chroot(root).map_err(|_| Error::InvalidArgument(format!("bad namespace {namespace:?}")))
}

/// Follows one session's states until it is lost or the framework is closed.
async fn watch_session(core: &Core, session: &Session, closed: &mut watch::Receiver<Snapshot>) -> SessionEnd {
    let mut states = session.client().state_watcher();
    let session_id = session.id();
    let generation = session.generation();
    let mut suspended_since: Option<Instant> = None;
    loop {
        let lost_at = suspended_since.map(|since| since + session.timeout());
        tokio::select! {
            _ = closed.wait_for(|snapshot| snapshot.closed) => return SessionEnd::Closed,
            _ = sleep_until_some(lost_at) => {
                warn!(session = %session_id, timeout = %crate::ReadableDuration(session.timeout()), "suspended for the session timeout: session lost");
                return SessionEnd::Lost;
            }
            state = states.changed() => match state {
                SessionState::Disconnected => {
                    if suspended_since.is_none() {
                        suspended_since = Some(Instant::now());
                        core.publish(ConnectionState::Suspended, session_id, generation, Some(session.clone()));
                    }
                }
                SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                    if suspended_since.is_none() {
                        // A disconnection came and went between two looks: report it all the same.
                        core.publish(ConnectionState::Suspended, session_id, generation, Some(session.clone()));
                    }
                    suspended_since = None;
                    if core.config.tcp_nodelay {
                        // zookeeper-client reconnected on a new socket.
                        tokio::spawn(crate::nodelay::disable_nagle_in_background(
                            core.config.connect_string.clone(),
                        ));
                    }
                    let state = if state == SessionState::ConnectedReadOnly {
                        ConnectionState::ReadOnly
                    } else {
                        ConnectionState::Reconnected
                    };
                    core.publish(state, session_id, generation, Some(session.clone()));
                }
                SessionState::Expired | SessionState::AuthFailed | SessionState::Closed => {
                    info!(session = %session_id, ?state, "session ended");
                    return SessionEnd::Lost;
                }
            },
        }
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
