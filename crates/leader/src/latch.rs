//! Curator's `LeaderLatch`: every participant keeps one node; the first node's owner leads.

use std::fmt;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use parking_lot::Mutex;
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinHandle;
use tracing::{debug, info_span, Instrument};
use zk_recipes_framework::zookeeper_client::{EventType, OneshotWatcher};
use zk_recipes_framework::{
    path, ConnectionEvents, ConnectionState, Deadline, Error as FrameworkError, ErrorPolicy, Framework,
    OwnedNode,
};
use zk_recipes_lock_internals::{sort_children, LockInternals, StandardDriver};

use crate::error::{LeaderError, Result, Subject};
use crate::handle::{self, CloseOnDrop, DropGuard, Handle, HandleTarget, HandleView, Lifecycle, Status};
use crate::participant::{self, Participant};

/// The name Curator's latch gives its nodes, after the protected prefix:
/// `<path>/_c_<uuid>-latch-<sequence>`.
pub const LATCH_NAME: &str = "latch-";

/// How long [`LeaderLatch::close`] tries to delete our node before leaving it to the framework's
/// cleanup worker.
const CLOSE_TIMEOUT: Duration = Duration::from_secs(30);
/// How long [`LeaderLatch::participants`] may take.
const PARTICIPANTS_TIMEOUT: Duration = Duration::from_secs(30);
/// How many leadership events a slow subscriber may fall behind.
const EVENT_CAPACITY: usize = 256;

/// Whether closing a latch tells its subscribers that leadership ended (Curator's
/// `LeaderLatch.CloseMode`).
///
/// ```
/// use zk_recipes_leader::CloseMode;
/// assert_eq!(CloseMode::default(), CloseMode::Silent);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CloseMode {
    /// Subscribers are *not* told: their streams just end (Curator's default, `SILENT`).
    #[default]
    Silent,
    /// If the latch was leading, subscribers receive
    /// [`NotLeader { reason: Closed }`](NotLeaderReason::Closed) before their streams end
    /// (`NOTIFY_LEADER`).
    NotifyLeader,
}

/// One change of a latch's leadership, in order (Curator's `LeaderLatchListener`:
/// `isLeader` / `notLeader`).
///
/// ```
/// use zk_recipes_leader::{LeadershipEvent, NotLeaderReason};
/// let event = LeadershipEvent::NotLeader { reason: NotLeaderReason::NodeDeleted };
/// assert!(!event.is_leader());
/// assert!(LeadershipEvent::IsLeader { fencing_token: 7 }.is_leader());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeadershipEvent {
    /// We lead now.
    IsLeader {
        /// Our node's creation zxid: larger than any earlier leader's (see
        /// [`LeaderLatch::fencing_token`]).
        fencing_token: i64,
    },
    /// We no longer lead.
    NotLeader {
        /// Why.
        reason: NotLeaderReason,
    },
    /// The subscriber fell behind and `missed` events were dropped: look at
    /// [`LeaderLatch::has_leadership`] for the current state.
    Lagged {
        /// How many events were dropped.
        missed: u64,
    },
}

impl LeadershipEvent {
    /// Whether this event says we lead.
    pub fn is_leader(&self) -> bool {
        matches!(self, LeadershipEvent::IsLeader { .. })
    }
}

/// Why a latch stopped leading.
///
/// ```no_run
/// # async fn demo(latch: zk_recipes_leader::LeaderLatch) {
/// use zk_recipes_leader::{LeadershipEvent, NotLeaderReason};
/// let mut events = latch.subscribe();
/// if let Some(LeadershipEvent::NotLeader { reason: NotLeaderReason::Connection(state) }) = events.next().await {
///     println!("stepped down: the connection is {state:?}");
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum NotLeaderReason {
    /// The connection entered an error state per the framework's error policy (`Suspended` under
    /// the standard policy, `Lost`), or a connection-event lag was treated as `Lost`.
    Connection(ConnectionState),
    /// Our node vanished (deleted by someone, or its parent reaped); a new one is being created.
    NodeDeleted,
    /// A check found another node before ours.
    NotFirst,
    /// The latch (with [`CloseMode::NotifyLeader`]) or its framework was closed.
    Closed,
}

impl NotLeaderReason {
    /// The reason as a metric label: `connection`, `node_deleted`, `not_first`, `closed`.
    pub fn metric_name(&self) -> &'static str {
        match self {
            Self::Connection(_) => "connection",
            Self::NodeDeleted => "node_deleted",
            Self::NotFirst => "not_first",
            Self::Closed => "closed",
        }
    }
}

#[derive(Debug, Clone)]
enum Signal {
    Event(LeadershipEvent),
    Closed,
}

/// A participant in a leader election on one ZooKeeper path: Curator's `LeaderLatch`,
/// wire-compatible with it (a Rust and a Java latch on the same path elect one leader between
/// them).
///
/// Each participant keeps one node `<path>/_c_<uuid>-latch-<sequence>` (EPHEMERAL_SEQUENTIAL,
/// data: the participant id as UTF-8). The owner of the node that sorts first leads; every other
/// participant watches the node just before its own, so a change wakes one participant.
///
/// # Leadership is claimed only when it is safe
/// A participant claims leadership only when a listing made **on the session that created its
/// node** shows that node first, and the connection is healthy at that moment. The listing proves
/// that the node's ephemeral owner is our current session (Curator's CURATOR-696 fix checks the
/// stat for the same reason).
///
/// # Connection loss and session expiry
/// - In an error state per the framework's [`ErrorPolicy`] (`Suspended` under `Standard`, the
///   default; `Lost` under either), leadership ends at once:
///   [`has_leadership`](Self::has_leadership) turns false and subscribers get
///   [`NotLeader`](LeadershipEvent::NotLeader). So does a read-only connection (only possible
///   with `can_be_read_only`): the quorum may expire the session meanwhile.
/// - After `Reconnected` on the same session, the latch looks again and leads again if its node
///   is still first; it never creates a second node for a session that still has one (no
///   livelock of latches re-creating nodes, CURATOR-644).
/// - After the session is lost, the old node is gone (or deleted by the framework's cleanup
///   worker) and the latch joins again with a new node on the new session, at the back.
/// - If the path itself vanished (an empty container reaped, CURATOR-724), the node is created
///   again with its parents.
///
/// Under `Standard` the old leader stops believing it leads when its connection is suspended,
/// before the server can expire its session and let another participant lead. Under
/// `SessionOnly` it believes it leads until the session is declared lost, possibly after a new
/// leader was elected: guard writes with the [`fencing_token`](Self::fencing_token) either way.
///
/// # Handles, closing, dropping
/// `LeaderLatch` is a cheap handle: clones share one participant. Close it with
/// [`close`](Self::close). Dropping handles does **not** close it — like dropping a tokio
/// `JoinHandle`, the participant runs on until closed or until its framework is closed with
/// [`Framework::close`] (the running latch holds a framework handle itself, so dropping yours
/// does not close the framework). A warning is logged when the last handle of a running latch
/// goes. To close on drop, say so: [`drop_guard`](Self::drop_guard) returns a guard that closes the latch when
/// dropped and can be disarmed (the model is tokio-util's `CancellationToken::drop_guard`).
///
/// ```no_run
/// use std::time::Duration;
/// use zk_recipes_framework::Framework;
/// use zk_recipes_leader::{CloseMode, LeaderLatch};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let framework = Framework::builder("127.0.0.1:2181").start()?;
/// let latch = LeaderLatch::new(&framework, "/app/leader", "worker-1")?;
/// latch.start()?;
/// let fencing_token = latch.await_leadership_timeout(Duration::from_secs(30)).await?;
/// println!("leading with fencing token {fencing_token}");
/// latch.close(CloseMode::Silent).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct LeaderLatch {
    shared: Handle<Shared>,
}

struct Shared {
    framework: Framework,
    path: String,
    id: String,
    internals: LockInternals,
    state: Mutex<State>,
    status: watch::Sender<Status>,
    events: broadcast::Sender<Signal>,
    /// Asks the election loop to look again (after a reconnection or a lost session).
    kick: Notify,
    /// Counts `LeaderLatch` handles, to warn when the last goes without a close.
    handles: AtomicUsize,
}

#[derive(Default)]
struct State {
    node: Option<OwnedNode>,
    task: Option<JoinHandle<()>>,
}

/// What the election loop knows of our node.
#[derive(Debug, Clone)]
struct OurNode {
    path: String,
    name: String,
    generation: u64,
    czxid: i64,
}

impl OurNode {
    fn of(node: &OwnedNode) -> Self {
        Self {
            path: node.path().to_owned(),
            name: node.name().to_owned(),
            generation: node.generation(),
            czxid: node.stat().czxid,
        }
    }
}

impl LeaderLatch {
    /// A latch on `path` for the participant `id` (stored as its node's data; may be empty, as
    /// Curator's default). Nothing is sent until [`start`](Self::start).
    ///
    /// # Errors
    /// [`LeaderError::Framework`] with an invalid path, before anything is sent.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_leader::Result<()> {
    /// let latch = zk_recipes_leader::LeaderLatch::new(&framework, "/app/leader", "")?;
    /// # Ok(()) }
    /// ```
    pub fn new(framework: &Framework, path: &str, id: impl Into<String>) -> Result<Self> {
        let internals = LockInternals::new(framework, path, Arc::new(StandardDriver::new(LATCH_NAME)), 1)?;
        let (events, _) = broadcast::channel(EVENT_CAPACITY);
        let shared = Shared {
            framework: framework.clone(),
            path: path.to_owned(),
            id: id.into(),
            internals,
            state: Mutex::new(State::default()),
            status: watch::Sender::new(Status::LATENT),
            events,
            kick: Notify::new(),
            handles: AtomicUsize::new(1),
        };
        Ok(Self { shared: Handle::new(shared) })
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
        Subject::new("leader latch", self.path())
    }

    /// Joins the election: a background task (on the current tokio runtime) creates our node once
    /// a session is connected and follows the election until [`close`](Self::close).
    ///
    /// # Errors
    /// [`LeaderError::AlreadyStarted`] the second time; [`LeaderError::Closed`] after close;
    /// [`LeaderError::Framework`] outside a tokio runtime.
    pub fn start(&self) -> Result<()> {
        handle::require_runtime("LeaderLatch::start must be called within a tokio runtime")?;
        let shared = &self.shared;
        let mut state = shared.state.lock();
        shared.status.borrow().lifecycle.check_start(shared.framework.is_closed(), || self.subject())?;
        shared.status.send_modify(|status| status.lifecycle = Lifecycle::Started);
        // Subscribe before the task runs, so no transition between now and then is missed.
        let events = shared.framework.connection_events();
        let span = info_span!("leader_latch", path = %shared.path, id = %shared.id);
        state.task = Some(tokio::spawn(run(Arc::clone(shared), events).instrument(span)));
        Ok(())
    }

    /// Whether we lead now. Local knowledge, no server round trip (as Curator's).
    pub fn has_leadership(&self) -> bool {
        self.shared.status.borrow().fencing_token.is_some()
    }

    /// While we lead, our node's creation zxid (`czxid`): a number that grows from one leader to
    /// the next (a later leader's node was created after ours, and zxids only grow). Hand it to
    /// the store you write to and have the store refuse tokens lower than the highest it has seen:
    /// a deposed leader that has not noticed yet is then refused.
    pub fn fencing_token(&self) -> Option<i64> {
        self.shared.status.borrow().fencing_token
    }

    /// Whether the latch was closed (by [`close`](Self::close), a drop guard, or because its
    /// framework was closed).
    pub fn is_closed(&self) -> bool {
        self.shared.status.borrow().lifecycle == Lifecycle::Closed || self.shared.framework.is_closed()
    }

    /// Our node's path, if we have one now. Reference only: it changes when the node is created
    /// again.
    pub fn our_node_path(&self) -> Option<String> {
        self.shared.state.lock().node.as_ref().map(|node| node.path().to_owned())
    }

    /// Waits until we lead and returns the fencing token; at once if we lead already.
    ///
    /// # Errors
    /// [`LeaderError::NotStarted`] before [`start`](Self::start); [`LeaderError::Closed`] if the
    /// latch is (or gets) closed.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn await_leadership(&self) -> Result<i64> {
        let mut status = self.shared.status.subscribe();
        let status = *status
            .wait_for(|status| status.lifecycle != Lifecycle::Started || status.fencing_token.is_some())
            .await
            .map_err(|_| LeaderError::Closed(self.subject()))?;
        match (status.lifecycle, status.fencing_token) {
            (Lifecycle::Started, Some(fencing_token)) => Ok(fencing_token),
            (Lifecycle::Latent, _) => Err(LeaderError::NotStarted(self.subject())),
            _ => Err(LeaderError::Closed(self.subject())),
        }
    }

    /// As [`await_leadership`](Self::await_leadership), at most `timeout`.
    ///
    /// # Errors
    /// [`LeaderError::Timeout`] after `timeout`; otherwise as `await_leadership`.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn await_leadership_timeout(&self, timeout: Duration) -> Result<i64> {
        match tokio::time::timeout(timeout, self.await_leadership()).await {
            Ok(result) => result,
            Err(_) => Err(LeaderError::Timeout { waited: timeout }),
        }
    }

    /// Every leadership change from now on, in order (Curator's listener). The stream ends when
    /// the latch is closed; with [`CloseMode::NotifyLeader`] a leading latch first sends
    /// `NotLeader { reason: Closed }`, with [`CloseMode::Silent`] it does not.
    ///
    /// ```no_run
    /// # async fn demo(latch: zk_recipes_leader::LeaderLatch) {
    /// let mut events = latch.subscribe();
    /// while let Some(event) = events.next().await {
    ///     println!("{event:?}");
    /// }
    /// # }
    /// ```
    pub fn subscribe(&self) -> LeadershipEvents {
        let _state = self.shared.state.lock();
        let receiver = self.shared.events.subscribe();
        let ended = self.shared.status.borrow().lifecycle == Lifecycle::Closed;
        LeadershipEvents { receiver, ended }
    }

    /// Every participant in election order, read from the server (so it may disagree for a moment
    /// with [`has_leadership`](Self::has_leadership)). The first one leads.
    ///
    /// # Errors
    /// As [`Framework::retry`], within 30 s.
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        let nodes = self.shared.internals.participants(Deadline::after(PARTICIPANTS_TIMEOUT)).await?;
        Ok(participant::from_nodes(nodes))
    }

    /// The participant whose node sorts first, if any (Curator returns a dummy participant when
    /// there is none).
    ///
    /// # Errors
    /// As [`participants`](Self::participants).
    ///
    /// # Cancel safety
    /// Cancel safe.
    pub async fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants().await?.into_iter().next())
    }

    /// Leaves the election: stops the background task, ends leadership (telling subscribers or
    /// not, per `mode`), and deletes our node so the next participant leads at once. Closing a
    /// closed latch does nothing.
    ///
    /// # Errors
    /// Deleting our node failed within 30 s; the framework's cleanup worker goes on deleting it
    /// in the background. The latch is closed all the same.
    ///
    /// # Cancel safety
    /// The latch is closed as soon as this is first polled; if dropped before the delete finished,
    /// the cleanup worker deletes the node.
    pub async fn close(&self, mode: CloseMode) -> Result<()> {
        let Some((node, task)) = self.shared.mark_closed(mode) else {
            return Ok(());
        };
        if let Some(task) = &task {
            task.abort();
        }
        let deleted = match node {
            Some(node) => node.delete(Deadline::after(CLOSE_TIMEOUT)).await,
            None => Ok(()),
        };
        if let Some(task) = task {
            // Wait until the task is gone, with its watches.
            let _ = task.await;
        }
        match deleted {
            // A closed framework closed its session, and our ephemeral node went with it.
            Ok(()) | Err(FrameworkError::Closed) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// A guard that closes this latch with `mode` when dropped, without a runtime: the task is
    /// aborted and our node handed to the framework's cleanup worker.
    /// [`LatchDropGuard::disarm`] gives the latch back without closing it.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_leader::Result<()> {
    /// use zk_recipes_leader::{CloseMode, LeaderLatch};
    /// let latch = LeaderLatch::new(&framework, "/app/leader", "worker-1")?;
    /// latch.start()?;
    /// let guard = latch.drop_guard(CloseMode::Silent);
    /// // ... leaving this scope (or unwinding) closes the latch ...
    /// # drop(guard);
    /// # Ok(()) }
    /// ```
    pub fn drop_guard(self, mode: CloseMode) -> LatchDropGuard {
        LatchDropGuard { guard: DropGuard::new(self, mode) }
    }
}

impl CloseOnDrop for LeaderLatch {
    type Mode = CloseMode;

    fn close_on_drop(&self, mode: CloseMode) {
        if let Some((node, task)) = self.shared.mark_closed(mode) {
            if let Some(task) = task {
                task.abort();
            }
            // Handed to the framework's cleanup worker: a channel send, no runtime needed.
            drop(node);
        }
    }
}

impl fmt::Debug for LeaderLatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let status = *self.shared.status.borrow();
        f.debug_struct("LeaderLatch")
            .field("path", &self.shared.path)
            .field("id", &self.shared.id)
            .field("lifecycle", &status.lifecycle)
            .field("fencing_token", &status.fencing_token)
            .finish()
    }
}

/// Closes a [`LeaderLatch`] when dropped ([`LeaderLatch::drop_guard`]); disarm it to keep the
/// latch running.
///
/// ```no_run
/// # fn demo(latch: zk_recipes_leader::LeaderLatch) {
/// use zk_recipes_leader::CloseMode;
/// let guard = latch.drop_guard(CloseMode::NotifyLeader);
/// assert!(!guard.latch().is_closed());
/// let latch = guard.disarm(); // running on; close it yourself later
/// # drop(latch);
/// # }
/// ```
#[must_use = "dropping the guard closes the latch"]
#[derive(Debug)]
pub struct LatchDropGuard {
    guard: DropGuard<LeaderLatch>,
}

impl LatchDropGuard {
    /// The guarded latch.
    pub fn latch(&self) -> &LeaderLatch {
        self.guard.participant()
    }

    /// Gives the latch back without closing it.
    pub fn disarm(self) -> LeaderLatch {
        self.guard.disarm()
    }
}

/// The leadership changes of a [`LeaderLatch`] ([`LeaderLatch::subscribe`]), in order. Ends
/// (`None`) when the latch is closed.
///
/// ```no_run
/// # async fn demo(latch: zk_recipes_leader::LeaderLatch) {
/// let mut events = latch.subscribe();
/// latch.start().expect("start");
/// while let Some(event) = events.next().await {
///     if event.is_leader() {
///         println!("leading");
///     }
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct LeadershipEvents {
    receiver: broadcast::Receiver<Signal>,
    ended: bool,
}

impl LeadershipEvents {
    /// The next change; `None` once the latch is closed (and every earlier change was delivered).
    ///
    /// # Cancel safety
    /// Cancel safe: no event is lost by dropping this future.
    pub async fn next(&mut self) -> Option<LeadershipEvent> {
        if self.ended {
            return None;
        }
        match self.receiver.recv().await {
            Ok(Signal::Event(event)) => Some(event),
            Ok(Signal::Closed) | Err(broadcast::error::RecvError::Closed) => {
                self.ended = true;
                None
            }
            Err(broadcast::error::RecvError::Lagged(missed)) => Some(LeadershipEvent::Lagged { missed }),
        }
    }

    /// The same changes as a [`Stream`].
    pub fn into_stream(self) -> impl Stream<Item = LeadershipEvent> + Send + Unpin {
        Box::pin(futures::stream::unfold(self, |mut events| async move {
            let event = events.next().await?;
            Some((event, events))
        }))
    }
}

impl HandleTarget for Shared {
    const HANDLE_NAME: &'static str = "LeaderLatch";
    const KIND: &'static str = "latch";

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
    /// Sets leadership (`Some(fencing token)` or `None`) and tells subscribers, unless closed.
    fn set_leading(&self, fencing_token: Option<i64>, reason: NotLeaderReason) {
        let _state = self.state.lock();
        self.set_leading_locked(fencing_token, reason);
    }

    /// As `set_leading`; the caller holds the state lock, which orders every change.
    fn set_leading_locked(&self, fencing_token: Option<i64>, reason: NotLeaderReason) {
        let mut previous = None;
        let changed = self.status.send_if_modified(|status| {
            if status.lifecycle != Lifecycle::Started || status.fencing_token == fencing_token {
                return false;
            }
            previous = std::mem::replace(&mut status.fencing_token, fencing_token);
            true
        });
        if !changed {
            return;
        }
        if previous.is_some() {
            crate::record::leadership_lost(
                &self.framework,
                &self.path,
                &self.id,
                reason.metric_name(),
                &reason,
            );
            let _ = self.events.send(Signal::Event(LeadershipEvent::NotLeader { reason }));
        }
        if let Some(fencing_token) = fencing_token {
            crate::record::leadership_gained(&self.framework, &self.path, &self.id, fencing_token);
            let _ = self.events.send(Signal::Event(LeadershipEvent::IsLeader { fencing_token }));
        }
    }

    /// Marks the latch closed and ends leadership (telling subscribers per `mode`). Returns our
    /// node and the task for the caller to finish with, or `None` if it was closed already.
    fn mark_closed(&self, mode: CloseMode) -> Option<(Option<OwnedNode>, Option<JoinHandle<()>>)> {
        let mut state = self.state.lock();
        let mut was_leading = None;
        let changed = self.status.send_if_modified(|status| {
            if status.lifecycle == Lifecycle::Closed {
                return false;
            }
            was_leading = status.fencing_token.take();
            status.lifecycle = Lifecycle::Closed;
            true
        });
        if !changed {
            return None;
        }
        if was_leading.is_some() {
            let reason = NotLeaderReason::Closed;
            crate::record::leadership_lost(
                &self.framework,
                &self.path,
                &self.id,
                reason.metric_name(),
                &mode,
            );
        }
        if mode == CloseMode::NotifyLeader && was_leading.is_some() {
            let reason = NotLeaderReason::Closed;
            let _ = self.events.send(Signal::Event(LeadershipEvent::NotLeader { reason }));
        }
        let _ = self.events.send(Signal::Closed);
        debug!(path = %self.path, id = %self.id, ?mode, "latch closed");
        Some((state.node.take(), state.task.take()))
    }

    fn our_node(&self) -> Option<OurNode> {
        self.state.lock().node.as_ref().map(OurNode::of)
    }

    /// Leads with `node` if it is still ours and the connection is healthy on its session.
    fn claim(&self, node: &OurNode) -> bool {
        let state = self.state.lock();
        if !state.node.as_ref().is_some_and(|owned| owned.path() == node.path) {
            return false;
        }
        let snapshot = self.framework.current();
        let policy = self.framework.error_policy();
        let healthy = !snapshot.closed
            && snapshot.generation == node.generation
            && snapshot.state.is_some_and(|state| state.is_connected() && !ends_leadership(policy, state));
        if healthy {
            self.set_leading_locked(Some(node.czxid), NotLeaderReason::NotFirst);
        }
        healthy
    }

    /// Ends leadership and forgets `node` (the cleanup worker deletes it if it still exists), so
    /// the next round creates a new one.
    fn reset(&self, node: &OurNode, reason: NotLeaderReason) {
        let stale = {
            let mut state = self.state.lock();
            self.set_leading_locked(None, reason);
            if state.node.as_ref().is_some_and(|owned| owned.path() == node.path) {
                state.node.take()
            } else {
                None
            }
        };
        if stale.is_some() {
            debug!(node = %node.path, ?reason, "our node is gone; joining again");
        }
        drop(stale);
    }

    /// Follows the connection: ends leadership in error states at once, and asks the election
    /// loop to look again after a reconnection or a lost session. Returns when the framework is
    /// closed.
    async fn follow_connection(&self, mut events: ConnectionEvents) {
        let policy = self.framework.error_policy();
        while let Some(update) = events.next().await {
            let state = update.state();
            if ends_leadership(policy, state) {
                self.set_leading(None, NotLeaderReason::Connection(state));
            }
            if state != ConnectionState::Suspended {
                self.kick.notify_one();
            }
        }
    }

    /// The election loop. Returns when the framework is closed.
    async fn elect(&self) {
        let mut backoff = Backoff::default();
        loop {
            let node = match self.our_node() {
                Some(node) => node,
                None => match self.create_node().await {
                    Ok(Some(node)) => node,
                    Ok(None) => return,
                    Err(FrameworkError::Closed) => return,
                    Err(err) => {
                        debug!(%err, "creating our node failed; trying again");
                        backoff.sleep().await;
                        continue;
                    }
                },
            };
            match self.check(&node).await {
                Ok(()) => backoff.reset(),
                Err(FrameworkError::Closed) => return,
                Err(err) => {
                    debug!(%err, "checking leadership failed; trying again");
                    backoff.sleep().await;
                }
            }
        }
    }

    /// Creates our node; `None` if the latch was closed meanwhile.
    async fn create_node(&self) -> Result<Option<OurNode>, FrameworkError> {
        let owned = self
            .framework
            .create_protected(&self.path, LATCH_NAME, self.id.as_bytes(), Deadline::never())
            .await?;
        let node = OurNode::of(&owned);
        let mut state = self.state.lock();
        if self.status.borrow().lifecycle != Lifecycle::Started {
            drop(state);
            drop(owned);
            return Ok(None);
        }
        debug!(node = %node.path, session = %owned.session_id(), "joined the election");
        state.node = Some(owned);
        Ok(Some(node))
    }

    /// One round: list on our node's session, lead or watch the node before ours, and wait for a
    /// reason to look again.
    async fn check(&self, node: &OurNode) -> Result<(), FrameworkError> {
        let children = match self.list(node).await {
            Ok(Some(children)) => children,
            // The path is gone (an empty container reaped, CURATOR-724), and our node with it.
            Ok(None) => {
                self.reset(node, NotLeaderReason::NodeDeleted);
                return Ok(());
            }
            Err(FrameworkError::SessionLost) => {
                self.reset(node, NotLeaderReason::Connection(ConnectionState::Lost));
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        let sorted = sort_children(children, LATCH_NAME);
        let Some(index) = sorted.iter().position(|child| *child == node.name) else {
            self.reset(node, NotLeaderReason::NodeDeleted);
            return Ok(());
        };
        // First: lead (if healthy) and watch our own node, to notice if someone deletes it.
        // Otherwise: watch the node just before ours.
        let (watched, ours) = if index == 0 {
            self.claim(node);
            (node.path.clone(), true)
        } else {
            self.set_leading(None, NotLeaderReason::NotFirst);
            (path::join(&self.path, &sorted[index - 1]), false)
        };
        let watcher = match self.watch(node, &watched).await {
            Ok(Some(watcher)) => watcher,
            Ok(None) if ours => {
                self.reset(node, NotLeaderReason::NodeDeleted);
                return Ok(());
            }
            // The node before ours went meanwhile: list again. Never re-create our node for
            // that (CURATOR-644).
            Ok(None) => return Ok(()),
            Err(FrameworkError::SessionLost) => {
                self.reset(node, NotLeaderReason::Connection(ConnectionState::Lost));
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        tokio::select! {
            event = watcher.changed() => {
                if ours && event.event_type == EventType::NodeDeleted {
                    self.reset(node, NotLeaderReason::NodeDeleted);
                }
            }
            () = self.kick.notified() => {}
        }
        Ok(())
    }

    /// The children of the election path, listed on our node's session; `None` if the path is
    /// gone. [`FrameworkError::SessionLost`] if that session is.
    async fn list(&self, node: &OurNode) -> Result<Option<Vec<String>>, FrameworkError> {
        self.framework.children_on_session(node.generation, &self.path, Deadline::never()).await
    }

    /// A data watch on `watched` (get-data, so no watch is left on a missing node), on our node's
    /// session; `None` if the node is gone.
    async fn watch(&self, node: &OurNode, watched: &str) -> Result<Option<OneshotWatcher>, FrameworkError> {
        let watch = self.framework.watch_data_on_session(node.generation, watched, Deadline::never()).await;
        Ok(watch?.map(|(_, watcher)| watcher))
    }
}

/// Whether `state` ends leadership: an error state per the policy, or a read-only connection (the
/// quorum, which we cannot reach, may expire our session meanwhile).
fn ends_leadership(policy: ErrorPolicy, state: ConnectionState) -> bool {
    policy.is_error_state(state) || state == ConnectionState::ReadOnly
}

/// The latch's background task: the election loop and the connection follower, until the latch
/// is closed (the task is aborted) or its framework is closed.
async fn run(shared: Arc<Shared>, events: ConnectionEvents) {
    tokio::select! {
        () = shared.follow_connection(events) => {}
        () = shared.elect() => {}
    }
    // The framework was closed: so is the latch.
    if let Some((node, _this_task)) = shared.mark_closed(CloseMode::NotifyLeader) {
        drop(node);
    }
}

/// Sleeps between failed rounds: 50 ms, doubling to 1 s.
#[derive(Debug)]
struct Backoff {
    next: Duration,
}

impl Default for Backoff {
    fn default() -> Self {
        Self { next: Self::FIRST }
    }
}

impl Backoff {
    const FIRST: Duration = Duration::from_millis(50);
    const MAX: Duration = Duration::from_secs(1);

    async fn sleep(&mut self) {
        tokio::time::sleep(self.advance()).await;
    }

    /// The sleep to take now; the next one doubles.
    fn advance(&mut self) -> Duration {
        let now = self.next;
        self.next = (self.next * 2).min(Self::MAX);
        now
    }

    fn reset(&mut self) {
        self.next = Self::FIRST;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latch_nodes_sort_by_sequence_after_the_last_latch_marker() {
        let sorted = sort_children(
            vec![
                "_c_b1f0c2d4-0000-4000-8000-000000000002-latch-0000000007".into(),
                "_c_a1f0c2d4-0000-4000-8000-000000000001-latch-0000000003".into(),
                "_c_latch-0000-4000-8000-000000000003-latch-0000000005".into(),
            ],
            LATCH_NAME,
        );
        let sequences: Vec<_> = sorted.iter().map(|name| path::sequence_after(name, LATCH_NAME)).collect();
        assert_eq!(sequences, vec![Some(3), Some(5), Some(7)]);
    }

    #[test]
    fn error_states_and_read_only_connections_end_leadership() {
        use ConnectionState::*;
        for (policy, ending) in [
            (ErrorPolicy::Standard, vec![Suspended, Lost, ReadOnly]),
            (ErrorPolicy::SessionOnly, vec![Lost, ReadOnly]),
        ] {
            for state in [Connected, Suspended, Reconnected, Lost, ReadOnly] {
                assert_eq!(ends_leadership(policy, state), ending.contains(&state), "{policy:?} {state:?}");
            }
        }
    }

    #[test]
    fn backoff_doubles_from_50_ms_up_to_a_second_and_resets() {
        let mut backoff = Backoff::default();
        let sleeps: Vec<u64> = (0..7).map(|_| backoff.advance().as_millis() as u64).collect();
        assert_eq!(sleeps, vec![50, 100, 200, 400, 800, 1000, 1000]);
        backoff.reset();
        assert_eq!(backoff.advance(), Duration::from_millis(50));
    }
}
