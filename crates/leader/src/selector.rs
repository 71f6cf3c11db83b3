//! Curator's `LeaderSelector`: a mutex whose holder runs the user's leadership task.

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, info_span, warn, Instrument};
use zk_recipes_framework::{ConnectionState, Framework, DEFAULT_SESSION_TIMEOUT};
use zk_recipes_mutex::{LostReason, Mutex as ZkMutex, MutexGuard};

use crate::error::{LeaderError, Result, Subject};
use crate::handle::{self, CloseOnDrop, DropGuard, Handle, HandleTarget, HandleView, Lifecycle, Status};
use crate::participant::{self, Participant};

/// The name the selector's nodes carry: it *is* Curator's mutex, `<path>/_c_<uuid>-lock-<seq>`.
pub const SELECTOR_LOCK_NAME: &str = zk_recipes_mutex::LOCK_NAME;

/// Defaults to 5 s: how long [`LeaderSelector::close`] lets a cancelled `take_leadership` finish.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(5);

/// The user's leadership task, boxed.
type TakeLeadership = dyn Fn(Leadership) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;

/// Why a leadership was cancelled ([`Leadership::cancelled`]).
///
/// ```no_run
/// # async fn demo(leadership: zk_recipes_leader::Leadership) {
/// use zk_recipes_leader::CancelReason;
/// match leadership.cancelled().await {
///     CancelReason::Interrupted => println!("asked to step down"),
///     CancelReason::Connection(state) => println!("the connection is {state:?}: stop writing now"),
///     other => println!("over: {other:?}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CancelReason {
    /// [`LeaderSelector::interrupt_leadership`] was called.
    Interrupted,
    /// The connection entered an error state per the framework's error policy (`Suspended` under
    /// the standard policy), or the session was lost.
    Connection(ConnectionState),
    /// Our lock node was deleted.
    NodeDeleted,
    /// The selector (or its framework) was closed.
    Closed,
}

impl From<LostReason> for CancelReason {
    fn from(reason: LostReason) -> Self {
        match reason {
            LostReason::Connection(state) => CancelReason::Connection(state),
            LostReason::NodeDeleted => CancelReason::NodeDeleted,
            _ => CancelReason::Closed,
        }
    }
}

/// What `take_leadership` receives: proof of leading, and the token that says when to stop.
///
/// Cheap to clone (hand it to sub-tasks); a clone observes the same cancellation.
///
/// ```no_run
/// # async fn write(_: i64) {}
/// use zk_recipes_leader::Leadership;
///
/// async fn lead(leadership: Leadership) {
///     loop {
///         tokio::select! {
///             reason = leadership.cancelled() => {
///                 println!("stepping down: {reason:?}");
///                 return;
///             }
///             () = write(leadership.fencing_token()) => {}
///         }
///     }
/// }
/// ```
#[derive(Debug, Clone)]
pub struct Leadership {
    cancel: watch::Receiver<Option<CancelReason>>,
    fencing_token: i64,
    node_path: Arc<str>,
}

impl Leadership {
    /// Our lock node's creation zxid: larger than any earlier leader's. Have the store you write
    /// to refuse tokens lower than the highest it has seen.
    pub fn fencing_token(&self) -> i64 {
        self.fencing_token
    }

    /// Our lock node's full path.
    pub fn node_path(&self) -> &str {
        &self.node_path
    }

    /// Why the leadership was cancelled, if it was.
    pub fn cancel_reason(&self) -> Option<CancelReason> {
        match self.cancel.has_changed() {
            // The selector dropped the sender: this leadership is over.
            Err(_) => Some((*self.cancel.borrow()).unwrap_or(CancelReason::Closed)),
            Ok(_) => *self.cancel.borrow(),
        }
    }

    /// Whether the leadership was cancelled: stop and return.
    pub fn is_cancelled(&self) -> bool {
        self.cancel_reason().is_some()
    }

    /// Resolves when the leadership is cancelled; at once if it already is.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn cancelled(&self) -> CancelReason {
        let mut cancel = self.cancel.clone();
        let reason = match cancel.wait_for(Option::is_some).await {
            Ok(reason) => *reason,
            Err(_) => None,
        };
        reason.unwrap_or(CancelReason::Closed)
    }
}

/// How the selector's expiry bound is computed ([`LeaderSelector::grace_after_suspension`]):
/// the server may expire our session no earlier than `7/20 × T` after the framework reports
/// `Suspended` (see the type's docs); less the margin (default `T / 10`).
pub(crate) fn grace_after_suspension(session_timeout: Duration, margin: Option<Duration>) -> Duration {
    let margin = margin.unwrap_or(session_timeout / 10);
    (session_timeout * 7 / 20).saturating_sub(margin)
}

/// Builds a [`LeaderSelector`]; start from [`LeaderSelector::builder`].
///
/// Defaults: id empty (nodes hold this host's address, as Curator's), no auto-requeue, expiry
/// margin a tenth of the session timeout, close grace 5 s.
///
/// ```no_run
/// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_leader::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_leader::LeaderSelector;
///
/// let selector = LeaderSelector::builder(&framework, "/app/scheduler")
///     .id("worker-1")
///     .auto_requeue(true)
///     .close_grace(Duration::from_secs(2))
///     .build(|leadership| async move {
///         leadership.cancelled().await;
///     })?;
/// selector.start()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct LeaderSelectorBuilder {
    framework: Framework,
    path: String,
    id: String,
    auto_requeue: bool,
    expiry_margin: Option<Duration>,
    close_grace: Duration,
}

impl LeaderSelectorBuilder {
    /// The participant id, stored as our node's data (UTF-8). Defaults to empty, and then the
    /// node holds this host's address, as Curator's selector without an id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Whether to queue again each time a leadership ends (Curator's `autoRequeue`). Defaults to
    /// `false`: one leadership per [`LeaderSelector::start`] / [`LeaderSelector::requeue`].
    pub fn auto_requeue(mut self, auto_requeue: bool) -> Self {
        self.auto_requeue = auto_requeue;
        self
    }

    /// Subtracted from the earliest moment the server may expire our session, to fix when a
    /// suspended leadership's future is dropped. Defaults to a tenth of the negotiated session
    /// timeout.
    pub fn expiry_margin(mut self, margin: Duration) -> Self {
        self.expiry_margin = Some(margin);
        self
    }

    /// How long [`LeaderSelector::close`] lets a cancelled `take_leadership` run before dropping
    /// it. Defaults to 5 s.
    pub fn close_grace(mut self, grace: Duration) -> Self {
        self.close_grace = grace;
        self
    }

    /// The selector, running `take_leadership` each time it leads. Leadership ends when the
    /// returned future completes (or is dropped: see [`LeaderSelector`]).
    ///
    /// # Errors
    /// [`LeaderError::Framework`] with an invalid path, before anything is sent.
    pub fn build<F, Fut>(self, take_leadership: F) -> Result<LeaderSelector>
    where
        F: Fn(Leadership) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut mutex = ZkMutex::new(&self.framework, &self.path)?;
        if !self.id.is_empty() {
            mutex = mutex.with_node_data(self.id.as_bytes());
        }
        let take_leadership: Box<TakeLeadership> =
            Box::new(move |leadership| Box::pin(take_leadership(leadership)));
        let shared = Shared {
            framework: self.framework,
            path: self.path,
            id: self.id,
            mutex,
            auto_requeue: self.auto_requeue,
            expiry_margin: self.expiry_margin,
            close_grace: self.close_grace,
            take_leadership,
            state: Mutex::new(State::default()),
            status: watch::Sender::new(Status::LATENT),
            handles: AtomicUsize::new(1),
        };
        Ok(LeaderSelector { shared: Handle::new(shared) })
    }
}

/// Leader election that runs your task while you lead: Curator's `LeaderSelector`,
/// wire-compatible with it.
///
/// It *is* a mutex on its path (Curator's `InterProcessMutex`, nodes
/// `<path>/_c_<uuid>-lock-<sequence>` holding the participant id): whoever holds the lock leads,
/// and runs `take_leadership`. Leadership ends when that future completes; the lock is then
/// released and, with [`auto_requeue`](LeaderSelectorBuilder::auto_requeue), the selector queues
/// again. A [`Mutex`](zk_recipes_mutex::Mutex) on the same path contends with it, as in Curator.
/// One selector never runs two `take_leadership` at once.
///
/// # Connection loss and session expiry
/// The selector ends a leadership itself when the connection goes wrong; users write no
/// connection listener (Curator's `CancelLeadershipException` boilerplate):
///
/// - It **cancels** the [`Leadership`] token at once when the connection enters an error state
///   per the framework's error policy (`Suspended` under `Standard`), the session is lost, or our
///   node is deleted. `take_leadership` should return promptly.
/// - It **drops** the future (no further poll) if it has not returned by the time the server may
///   have expired our session and elected someone else: at once when the session is lost, our
///   node deleted, or the connection goes read-only (no quorum); after
///   [`grace_after_suspension`](Self::grace_after_suspension) following a `Suspended`.
///
/// A `take_leadership` that panics ends its leadership as if it returned (the panic is logged),
/// as Curator carries on after `takeLeadership` throws.
///
/// The bound after `Suspended`: the server expires a session `T` (the negotiated session timeout)
/// after it last heard from the client. zookeeper-client does not say when it last heard from
/// the server, so the selector takes the moment the framework reports `Suspended` and works back:
/// zookeeper-client declares a connection dead after `2/5 × T` without a byte from the server,
/// checked every `T/20` (so it last heard the server at most `9/20 × T` before `Suspended`), and
/// it sends the server a ping at least every `4/20 × T` (so the server last heard from us at most
/// `4/20 × T` before that). The server can therefore not expire the session before
/// `Suspended + 7/20 × T`; the selector drops the future a margin earlier (default `T/10`, so at
/// `Suspended + T/4`).
///
/// Under `SessionOnly` a `Suspended` does not cancel (Curator's session policy): leadership goes
/// on if the connection comes back in time. If it is still suspended at the same bound, the token
/// is cancelled and the future dropped together, so a leadership never outlives the point where
/// the server may have expired the session, under either policy.
///
/// The timer belongs to the session that owns our lock node: it starts from that session's state
/// when the leadership begins, so a `Suspended` published between the grant and the start is
/// counted from when the framework saw it, and a leadership whose session is already gone is never
/// started.
///
/// [`interrupt_leadership`](Self::interrupt_leadership) cancels the token and lets the future
/// return by itself (our node is still valid); [`close`](Self::close) cancels it and drops it
/// after the close grace ([`close_grace`](LeaderSelectorBuilder::close_grace), default 5 s).
///
/// # Handles, closing, dropping
/// `LeaderSelector` is a cheap handle. Dropping handles does not close it (like a tokio
/// `JoinHandle`: it runs on until closed or until its framework is closed with
/// [`Framework::close`]); [`drop_guard`](Self::drop_guard) returns a guard that closes it when dropped.
///
/// Closing the framework closes the selector as [`close`](Self::close) does: a running
/// leadership's token is cancelled with [`CancelReason::Closed`] first, and its future is polled
/// on for the close grace so that code after `leadership.cancelled().await` runs (as Curator's
/// interrupt lets `finally` blocks run); then it is dropped. [`is_closed`](Self::is_closed) is
/// `true` from then on, and dropping the last handle logs no warning.
///
/// ```no_run
/// use std::time::Duration;
/// use zk_recipes_framework::Framework;
/// use zk_recipes_leader::LeaderSelector;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let framework = Framework::builder("127.0.0.1:2181").start()?;
/// let selector = LeaderSelector::builder(&framework, "/app/scheduler")
///     .id("worker-1")
///     .auto_requeue(true)
///     .build(|leadership| async move {
///         println!("leading with token {}", leadership.fencing_token());
///         tokio::select! {
///             reason = leadership.cancelled() => println!("cancelled: {reason:?}"),
///             () = tokio::time::sleep(Duration::from_secs(10)) => {} // our turn is over
///         }
///     })?;
/// selector.start()?;
/// // ...
/// selector.close().await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaderSelector {
    shared: Handle<Shared>,
}

struct Shared {
    framework: Framework,
    path: String,
    id: String,
    mutex: ZkMutex,
    auto_requeue: bool,
    expiry_margin: Option<Duration>,
    close_grace: Duration,
    take_leadership: Box<TakeLeadership>,
    state: Mutex<State>,
    status: watch::Sender<Status>,
    handles: AtomicUsize,
}

#[derive(Default)]
struct State {
    task: Option<JoinHandle<()>>,
    round: u64,
    /// The running leadership's token.
    cancel: Option<watch::Sender<Option<CancelReason>>>,
}

/// How a leadership ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// `take_leadership` returned.
    Returned,
    /// The future was dropped for this reason.
    Dropped(CancelReason),
}

impl LeaderSelector {
    /// A builder for a selector on `path`.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_leader::Result<()> {
    /// let selector = zk_recipes_leader::LeaderSelector::builder(&framework, "/app/leader")
    ///     .build(|_leadership| async {})?;
    /// # Ok(()) }
    /// ```
    pub fn builder(framework: &Framework, path: &str) -> LeaderSelectorBuilder {
        LeaderSelectorBuilder {
            framework: framework.clone(),
            path: path.to_owned(),
            id: String::new(),
            auto_requeue: false,
            expiry_margin: None,
            close_grace: DEFAULT_CLOSE_GRACE,
        }
    }

    /// The election's path.
    pub fn path(&self) -> &str {
        &self.shared.path
    }

    /// This participant's id.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    fn subject(&self) -> Subject {
        Subject::new("leader selector", self.path())
    }

    /// Joins the election (on the current tokio runtime).
    ///
    /// # Errors
    /// [`LeaderError::AlreadyStarted`] the second time, [`LeaderError::Closed`] after close (or once its framework is closed),
    /// [`LeaderError::Framework`] outside a tokio runtime.
    pub fn start(&self) -> Result<()> {
        let mut state = self.shared.state.lock();
        self.shared
            .status
            .borrow()
            .lifecycle
            .check_start(self.shared.framework.is_closed(), || self.subject())?;
        require_runtime()?;
        self.shared.status.send_modify(|status| status.lifecycle = Lifecycle::Started);
        self.shared.spawn_round(&mut state);
        Ok(())
    }

    /// Queues for leadership again if this selector is neither leading nor queued (Curator's
    /// `requeue`). Returns whether it queued.
    ///
    /// # Errors
    /// [`LeaderError::NotStarted`] before start, [`LeaderError::Closed`] after close.
    pub fn requeue(&self) -> Result<bool> {
        let mut state = self.shared.state.lock();
        match self.shared.status.borrow().lifecycle {
            Lifecycle::Started => {}
            Lifecycle::Latent => return Err(LeaderError::NotStarted(self.subject())),
            Lifecycle::Closed => return Err(LeaderError::Closed(self.subject())),
        }
        if state.task.is_some() {
            return Ok(false);
        }
        require_runtime()?;
        self.shared.spawn_round(&mut state);
        Ok(true)
    }

    /// Whether `take_leadership` is running now and was not cancelled.
    pub fn has_leadership(&self) -> bool {
        self.shared.status.borrow().fencing_token.is_some()
    }

    /// Cancels the running leadership's token with [`CancelReason::Interrupted`] (Curator's
    /// `interruptLeadership`). `take_leadership` is expected to return; it is not dropped for this,
    /// since our node still holds. Returns whether a leadership was running.
    pub fn interrupt_leadership(&self) -> bool {
        let state = self.shared.state.lock();
        match &state.cancel {
            Some(cancel) => {
                self.shared.cancel_locked(cancel, CancelReason::Interrupted);
                true
            }
            None => false,
        }
    }

    /// How long a leadership may run on after the framework reports `Suspended` (standard error
    /// policy) before its future is dropped, for the current session: `7/20 × T − margin` (see the
    /// type's docs).
    pub fn grace_after_suspension(&self) -> Duration {
        let timeout = self.shared.framework.current().session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT);
        grace_after_suspension(timeout, self.shared.expiry_margin)
    }

    /// Every participant in queue order, read from the server; the first one leads (or is about
    /// to). A [`Mutex`](zk_recipes_mutex::Mutex) on the same path shows up too, with its host
    /// address as id.
    ///
    /// # Errors
    /// As [`Framework::retry`], within 30 s.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        Ok(participant::from_nodes(self.shared.mutex.participants().await?))
    }

    /// The participant whose node sorts first, if any.
    ///
    /// # Errors
    /// As [`participants`](Self::participants).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants().await?.into_iter().next())
    }

    /// Whether the selector was closed: by [`close`](Self::close), a drop guard, or because its
    /// framework was closed (whether or not it was started).
    pub fn is_closed(&self) -> bool {
        self.shared.status.borrow().lifecycle == Lifecycle::Closed || self.shared.framework.is_closed()
    }

    /// Leaves the election: cancels a running leadership ([`CancelReason::Closed`]), waits up to
    /// the close grace for it to return (then drops it), and releases our node. Waiting queuers
    /// give their node back. Closing a closed selector does nothing. Called from inside
    /// `take_leadership`, it does not wait (the leadership ends when that future returns).
    ///
    /// # Errors
    /// None today; the result leaves room for reporting a failed release.
    ///
    /// # Cancel safety
    /// The selector is closed as soon as this is first polled; dropping the future stops waiting
    /// only.
    pub async fn close(&self) -> Result<()> {
        let Some(task) = self.shared.mark_closed() else {
            return Ok(());
        };
        if tokio::task::try_id() == Some(task.id()) {
            return Ok(());
        }
        let _ = task.await;
        Ok(())
    }

    /// A guard that closes this selector when dropped, without a runtime: the task is aborted (a
    /// running `take_leadership` is dropped at once, after its token is cancelled) and our node
    /// handed to the framework's cleanup worker. [`SelectorDropGuard::disarm`] gives the selector
    /// back.
    ///
    /// ```no_run
    /// # fn demo(selector: zk_recipes_leader::LeaderSelector) -> zk_recipes_leader::Result<()> {
    /// selector.start()?;
    /// let guard = selector.drop_guard();
    /// // ... the selector closes when `guard` goes out of scope ...
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn drop_guard(self) -> SelectorDropGuard {
        SelectorDropGuard { guard: DropGuard::new(self, ()) }
    }
}

fn require_runtime() -> Result<()> {
    handle::require_runtime("LeaderSelector must be started within a tokio runtime")
}

impl CloseOnDrop for LeaderSelector {
    type Mode = ();

    fn close_on_drop(&self, _mode: ()) {
        if let Some(task) = self.shared.mark_closed() {
            // Drops a running take_leadership and our MutexGuard (whose node goes to the
            // framework's cleanup worker): no runtime needed.
            task.abort();
        }
    }
}

impl fmt::Debug for LeaderSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = *self.shared.status.borrow();
        f.debug_struct("LeaderSelector")
            .field("path", &self.shared.path)
            .field("id", &self.shared.id)
            .field("auto_requeue", &self.shared.auto_requeue)
            .field("lifecycle", &status.lifecycle)
            .field("fencing_token", &status.fencing_token)
            .finish()
    }
}

/// Closes a [`LeaderSelector`] when dropped ([`LeaderSelector::drop_guard`]).
///
/// ```no_run
/// # fn demo(selector: zk_recipes_leader::LeaderSelector) {
/// let guard = selector.drop_guard();
/// let selector = guard.disarm(); // keeps running
/// # drop(selector);
/// # }
/// ```
#[must_use = "dropping the guard closes the selector"]
#[derive(Debug)]
pub struct SelectorDropGuard {
    guard: DropGuard<LeaderSelector>,
}

impl SelectorDropGuard {
    /// The guarded selector.
    pub fn selector(&self) -> &LeaderSelector {
        self.guard.participant()
    }

    /// Gives the selector back without closing it.
    pub fn disarm(self) -> LeaderSelector {
        self.guard.disarm()
    }
}

impl HandleTarget for Shared {
    const HANDLE_NAME: &'static str = "LeaderSelector";
    const KIND: &'static str = "selector";

    fn handle_view(&self) -> HandleView<'_> {
        HandleView {
            handles: &self.handles,
            status: &self.status,
            path: &self.path,
            id: &self.id,
            framework_closed: self.framework.is_closed(),
        }
    }
}

impl Shared {
    fn spawn_round(self: &Arc<Self>, state: &mut State) {
        state.round += 1;
        let span = info_span!("leader_selector", path = %self.path, id = %self.id);
        state.task = Some(tokio::spawn(run(self.clone(), state.round).instrument(span)));
    }

    /// Marks the selector closed and cancels a running leadership; returns the task, or `None` if
    /// it was closed already (or never ran).
    fn mark_closed(&self) -> Option<JoinHandle<()>> {
        let mut state = self.state.lock();
        let changed = self.status.send_if_modified(|status| {
            if status.lifecycle == Lifecycle::Closed {
                return false;
            }
            status.lifecycle = Lifecycle::Closed;
            true
        });
        if !changed {
            return None;
        }
        if let Some(cancel) = &state.cancel {
            self.cancel_locked(cancel, CancelReason::Closed);
        }
        debug!(path = %self.path, id = %self.id, "selector closed");
        state.task.take()
    }

    /// Cancels a leadership's token (the first reason wins) and ends `has_leadership`. The caller
    /// holds the state lock.
    fn cancel_locked(&self, cancel: &watch::Sender<Option<CancelReason>>, reason: CancelReason) {
        let cancelled = cancel.send_if_modified(|current| {
            if current.is_some() {
                return false;
            }
            *current = Some(reason);
            true
        });
        if cancelled {
            debug!(?reason, "leadership cancelled");
        }
        self.status.send_if_modified(|status| status.fencing_token.take().is_some());
    }

    fn cancel(&self, cancel: &watch::Sender<Option<CancelReason>>, reason: CancelReason) {
        let _state = self.state.lock();
        self.cancel_locked(cancel, reason);
    }

    /// The round ended: the selector may be queued again.
    fn round_done(&self, round: u64) {
        let mut state = self.state.lock();
        if state.round == round {
            state.task = None;
        }
    }

    /// Runs one leadership on `guard` and releases the lock.
    async fn lead(&self, guard: MutexGuard, status: &mut watch::Receiver<Status>) {
        let mut events = self.framework.connection_events();
        let (cancel, cancel_receiver) = watch::channel(None);
        let fencing_token = guard.fencing_token();
        {
            let mut state = self.state.lock();
            let started = self.status.send_if_modified(|status| {
                if status.lifecycle != Lifecycle::Started {
                    return false;
                }
                status.fencing_token = Some(fencing_token);
                true
            });
            if !started {
                drop(state);
                release(guard, End::Dropped(CancelReason::Closed)).await;
                return;
            }
            state.cancel = Some(cancel.clone());
        }
        debug!(node = %guard.node_path(), fencing_token, "taking leadership");
        crate::record::leadership_gained(&self.framework, &self.path, &self.id, fencing_token);
        let leadership =
            Leadership { cancel: cancel_receiver, fencing_token, node_path: guard.node_path().into() };
        // The leadership stands on the session that owns our lock node: its timer starts from the
        // state of that session now, whatever was published between the grant and the
        // subscription above (a Suspended, under SessionOnly, reaches us no other way).
        let now = self.framework.current();
        let hold_gone =
            now.generation != guard.session_generation() || now.state == Some(ConnectionState::Lost);
        let suspended_since = match (now.state, now.since) {
            (Some(ConnectionState::Suspended), Some(since)) => Some(since),
            _ => None,
        };
        // A panic in take_leadership ends the leadership like a return (Curator catches what
        // takeLeadership throws), instead of killing the selector with the lock held.
        let mut work = AssertUnwindSafe((self.take_leadership)(leadership)).catch_unwind();
        let end = {
            let lost = guard.lost();
            tokio::pin!(lost);
            let mut lost_seen = false;
            let mut events_ended = false;
            let mut cancelled = false;
            // When the server may expire our session (set on Suspended), and when a close's grace
            // ends: the future is dropped at the earlier one.
            let mut expiry_at: Option<Instant> =
                suspended_since.map(|since| since + self.grace_after_suspension());
            let mut close_at: Option<Instant> = None;
            if hold_gone {
                // Lost before the leadership began: never polled.
                let reason = CancelReason::Connection(ConnectionState::Lost);
                self.cancel(&cancel, reason);
                expiry_at = Some(Instant::now());
            }
            loop {
                let drop_at = match (expiry_at, close_at) {
                    (Some(expiry), Some(close)) => Some(expiry.min(close)),
                    (expiry, close) => expiry.or(close),
                };
                tokio::select! {
                    biased;
                    () = sleep_until_some(drop_at) => {
                        let reason = if close_at == drop_at {
                            CancelReason::Closed
                        } else if hold_gone {
                            CancelReason::Connection(ConnectionState::Lost)
                        } else {
                            CancelReason::Connection(ConnectionState::Suspended)
                        };
                        self.cancel(&cancel, reason);
                        break End::Dropped(reason);
                    }
                    outcome = &mut work => {
                        if outcome.is_err() {
                            warn!("take_leadership panicked; the leadership is over");
                        }
                        break End::Returned;
                    }
                    // An error state per the policy (it checks the current state first), our node
                    // deleted, the framework closed.
                    reason = &mut lost, if !lost_seen => {
                        lost_seen = true;
                        let reason = CancelReason::from(reason);
                        self.cancel(&cancel, reason);
                        cancelled = true;
                        match reason {
                            // The framework was closed: as a close, the future gets the grace.
                            CancelReason::Closed => {
                                close_at.get_or_insert(Instant::now() + self.close_grace);
                            }
                            CancelReason::Connection(ConnectionState::Suspended) => {
                                // From when the framework saw the suspension, not from when we heard.
                                let current = self.framework.current();
                                let suspended_at = match (current.state, current.since) {
                                    (Some(ConnectionState::Suspended), Some(since)) => since,
                                    _ => Instant::now(),
                                };
                                expiry_at.get_or_insert(suspended_at + self.grace_after_suspension());
                            }
                            other => break End::Dropped(other),
                        }
                    }
                    update = events.next(), if !events_ended => match update.as_ref().map(|update| update.state()) {
                        // The framework was closed: as a close, the future gets the grace.
                        None => {
                            events_ended = true;
                            self.cancel(&cancel, CancelReason::Closed);
                            cancelled = true;
                            close_at.get_or_insert(Instant::now() + self.close_grace);
                        }
                        // Lost (or a lag, taken as lost): the session is gone. Read-only: we reach
                        // no quorum, which may expire the session at any time.
                        Some(state @ (ConnectionState::Lost | ConnectionState::ReadOnly)) => {
                            let reason = CancelReason::Connection(state);
                            self.cancel(&cancel, reason);
                            break End::Dropped(reason);
                        }
                        // Under any policy: no later than the server may expire the session.
                        Some(ConnectionState::Suspended) => {
                            let suspended_at = update.and_then(|update| update.at()).unwrap_or_else(Instant::now);
                            expiry_at.get_or_insert(suspended_at + self.grace_after_suspension());
                        }
                        // Back on the same session in time (SessionOnly: never cancelled).
                        Some(_) => {
                            if !cancelled {
                                expiry_at = None;
                            }
                        }
                    },
                    () = wait_closed(status), if close_at.is_none() => {
                        self.cancel(&cancel, CancelReason::Closed);
                        cancelled = true;
                        close_at = Some(Instant::now() + self.close_grace);
                    }
                }
            }
        };
        drop(work);
        {
            let mut state = self.state.lock();
            self.cancel_locked(&cancel, CancelReason::Closed);
            state.cancel = None;
        }
        let reason = match &end {
            End::Returned => "returned",
            End::Dropped(CancelReason::Interrupted) => "interrupted",
            End::Dropped(CancelReason::Connection(_)) => "connection",
            End::Dropped(CancelReason::NodeDeleted) => "node_deleted",
            End::Dropped(CancelReason::Closed) => "closed",
        };
        crate::record::leadership_lost(&self.framework, &self.path, &self.id, reason, &end);
        release(guard, end).await;
    }

    fn grace_after_suspension(&self) -> Duration {
        let timeout = self.framework.current().session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT);
        grace_after_suspension(timeout, self.expiry_margin)
    }
}

/// Releases the lock: awaits the delete when the connection was fine, else leaves it to the
/// framework's cleanup worker (which deletes it once a session is back, if it still exists).
async fn release(guard: MutexGuard, end: End) {
    match end {
        End::Returned | End::Dropped(CancelReason::Interrupted | CancelReason::Closed) => {
            if let Err(err) = guard.release().await {
                debug!(%err, "releasing the lock failed; the cleanup worker deletes it");
            }
        }
        End::Dropped(_) => drop(guard),
    }
}

/// One election round (repeated while auto-requeue is on), until the selector is closed.
async fn run(shared: Arc<Shared>, round: u64) {
    let mut status = shared.status.subscribe();
    let mut backoff = Duration::from_millis(50);
    loop {
        let acquired = tokio::select! {
            biased;
            () = wait_closed(&mut status) => break,
            acquired = shared.mutex.lock() => acquired,
        };
        match acquired {
            Ok(guard) => {
                backoff = Duration::from_millis(50);
                shared.lead(guard, &mut status).await;
            }
            Err(err) => {
                let err = LeaderError::from(err);
                debug!(%err, "could not take the lock");
                if err.is_closed() || !shared.auto_requeue {
                    break;
                }
                tokio::select! {
                    () = wait_closed(&mut status) => break,
                    () = tokio::time::sleep(backoff) => {}
                }
                backoff = (backoff * 2).min(Duration::from_secs(1));
                continue;
            }
        }
        if !shared.auto_requeue {
            break;
        }
    }
    if shared.framework.is_closed() {
        // Closed with its framework: say so (no warning when the last handle goes).
        drop(shared.mark_closed());
    }
    shared.round_done(round);
}

async fn wait_closed(status: &mut watch::Receiver<Status>) {
    let _ = status.wait_for(|status| status.lifecycle == Lifecycle::Closed).await;
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_after_suspension_ends_before_the_server_may_expire_the_session() {
        let timeout = Duration::from_secs(20);
        // 7/20 of 20 s = 7 s, less the default margin of 2 s.
        assert_eq!(grace_after_suspension(timeout, None), Duration::from_secs(5));
        assert_eq!(grace_after_suspension(timeout, Some(Duration::from_secs(1))), Duration::from_secs(6));
        assert_eq!(grace_after_suspension(timeout, Some(Duration::from_secs(60))), Duration::ZERO);
        assert_eq!(grace_after_suspension(Duration::from_secs(4), None), Duration::from_secs(1));
    }

    #[tokio::test]
    async fn a_leadership_token_reports_the_first_reason_and_a_dropped_selector() {
        let (cancel, receiver) = watch::channel(None);
        let leadership =
            Leadership { cancel: receiver, fencing_token: 7, node_path: "/a/_c_x-lock-0000000001".into() };
        assert!(!leadership.is_cancelled());
        cancel.send_replace(Some(CancelReason::Interrupted));
        assert_eq!(leadership.cancelled().await, CancelReason::Interrupted);
        let (cancel, receiver) = watch::channel(None);
        let orphan = Leadership { cancel: receiver, ..leadership.clone() };
        drop(cancel);
        assert_eq!(orphan.cancel_reason(), Some(CancelReason::Closed));
        assert_eq!(orphan.cancelled().await, CancelReason::Closed);
        assert_eq!(orphan.fencing_token(), 7);
    }
}

/// The selector's own timing, on a real server: `lead` is called directly, so a test can put a
/// connection state exactly between the grant and the leadership's start.
#[cfg(test)]
mod timing_tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use zk_recipes_framework::ErrorPolicy;
    use zk_recipes_testing::{eventually, within, within_for, FaultProxy, TestingServer, SERVER_START};

    use super::*;

    /// Sets its flag when dropped: tells when a leadership's future was dropped.
    struct SetOnDrop(Arc<AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// Issue 11 (5): under `SessionOnly`, a `Suspended` published between the grant and the
    /// leadership's start (here: before it) must still bound the leadership to Suspended + 7/20·T −
    /// margin, not let it run until the session is declared lost (Suspended + T).
    #[tokio::test]
    async fn a_suspension_published_before_the_leadership_began_still_bounds_it() {
        let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
        let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
        let framework = Framework::builder(proxy.connect_string())
            .session_timeout(Duration::from_secs(4))
            .connection_timeout(Duration::from_secs(5))
            .error_policy(ErrorPolicy::SessionOnly)
            .start()
            .expect("framework");
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = dropped.clone();
        let selector = LeaderSelector::builder(&framework, "/suspended-at-grant/leader")
            .build(move |_leadership| {
                let on_drop = SetOnDrop(flag.clone());
                async move {
                    let _on_drop = on_drop;
                    // Ignores its token: only dropping it ends it.
                    std::future::pending::<()>().await;
                }
            })
            .expect("selector");
        let shared = Arc::clone(&selector.shared);
        shared.status.send_modify(|status| status.lifecycle = Lifecycle::Started);
        let guard = within("the grant", shared.mutex.lock()).await.expect("lock");

        proxy.black_hole(Duration::from_secs(30));
        eventually("suspended", || async { framework.current().state == Some(ConnectionState::Suspended) })
            .await;
        let current = framework.current();
        let since = current.since.expect("since");
        let timeout = current.session_timeout.expect("session timeout");
        let grace = selector.grace_after_suspension();
        let mut status = shared.status.subscribe();
        let leading = tokio::spawn(async move { shared.lead(guard, &mut status).await });
        within("the leadership dropped", async {
            while !dropped.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        let dropped_after = since.elapsed();
        assert!(
            dropped_after < grace + (timeout - grace) / 2,
            "dropped {dropped_after:?} after Suspended: the bound is {grace:?}, the session is declared lost at {timeout:?}"
        );
        within("the leadership over", leading).await.expect("lead");
        proxy.heal();
        within("close", framework.close()).await;
    }
}
