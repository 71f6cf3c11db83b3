//! Curator's `LeaderLatch`: every participant keeps one node; the first node's owner leads.
//!
//! - this module: the public handle ([`LeaderLatch`]) and its drop guard;
//! - `events`: what subscribers receive ([`LeadershipEvent`], [`LeadershipEvents`]) and the close
//!   modes;
//! - `state`: the state the handles share, and every change of leadership (claim, step down, close);
//! - `election`: the background task's election loop (create our node, list, watch the node before
//!   ours);
//! - `follow`: following the connection (error states end leadership at once).

mod election;
mod events;
mod follow;
mod state;

use std::fmt;
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{broadcast, watch, Notify};
use tracing::{info_span, Instrument};
use zk_recipes_framework::{Deadline, Error as FrameworkError, Framework};
use zk_recipes_lock_internals::{LockInternals, StandardDriver};

use crate::error::{LeaderError, Result, Subject};
use crate::handle::{self, CloseOnDrop, DropGuard, Handle, Lifecycle, Status};
use crate::participant::{self, Participant};

use election::run;
pub use events::{CloseMode, LeadershipEvent, LeadershipEvents, NotLeaderReason};
use state::{Shared, State};

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
/// - In an error state per the framework's [`ErrorPolicy`](zk_recipes_framework::ErrorPolicy) (`Suspended` under `Standard`, the
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
/// - Under either policy, leadership also ends a tenth of the session timeout before the
///   earliest moment the server may expire the session, by the framework's expiry clock (the send
///   time of the latest request the server answered, plus the session timeout), with
///   [`NotLeaderReason::SessionMayExpire`]. This is what ends it in time when the server stops
///   hearing us while its replies or watch events keep the connection up, so that no
///   `Suspended` comes before the expiry. If the server answers again in time, the latch leads
///   again with the same node.
///
/// The old leader so stops believing it leads before the server can expire its session and let
/// another participant lead, if its timers fire less than that tenth late. A process paused
/// longer (a GC pause, a stopped VM) still believes it leads when it resumes, until the clock is
/// read again: guard writes with the [`fencing_token`](Self::fencing_token).
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
            clock_refused: Notify::new(),
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
        // Taken before the task runs: a framework close that begins meanwhile still waits for it.
        let delay = shared.framework.delay_close();
        state.task = Some(tokio::spawn(run(Arc::clone(shared), events, delay).instrument(span)));
        Ok(())
    }

    /// Whether we lead now. Local knowledge, no server round trip (as Curator's), read against the
    /// expiry clock at the call: false from the moment the server may expire our session, less the
    /// margin, even before the latch's background task has woken to say so.
    pub fn has_leadership(&self) -> bool {
        self.shared.leading_token().is_some()
    }

    /// While we lead, our node's creation zxid (`czxid`): a number that grows from one leader to
    /// the next (a later leader's node was created after ours, and zxids only grow). Hand it to
    /// the store you write to and have the store refuse tokens lower than the highest it has seen:
    /// a deposed leader that has not noticed yet is then refused.
    pub fn fencing_token(&self) -> Option<i64> {
        self.shared.leading_token()
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
    /// Cancel safe: it only waits. The latch stays in the election with its node, and a later call
    /// sees a leadership that came meanwhile.
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
    /// [`LeaderError::Timeout`] after `timeout`; otherwise as `await_leadership`. A timeout leaves
    /// the latch in the election (see [`await_leadership_until`](Self::await_leadership_until)).
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits. The latch stays in the election with its node, and a later call
    /// sees a leadership that came meanwhile.
    pub async fn await_leadership_timeout(&self, timeout: Duration) -> Result<i64> {
        match tokio::time::timeout(timeout, self.await_leadership()).await {
            Ok(result) => result,
            Err(_) => Err(LeaderError::Timeout { waited: timeout }),
        }
    }

    /// As [`await_leadership`](Self::await_leadership), until `deadline` (a [`Deadline`], or a
    /// `Duration` from now), as [`KazooElection::lead_until`](crate::KazooElection::lead_until)
    /// and the locks' `*_until` calls take it.
    ///
    /// A timeout leaves the latch in the election: its node stays, and it may lead later (as
    /// Curator's `await(timeout, unit)` returning `false`). [`close`](Self::close) it to leave.
    ///
    /// ```no_run
    /// # async fn demo(latch: zk_recipes_leader::LeaderLatch) -> zk_recipes_leader::Result<()> {
    /// use std::time::Duration;
    /// match latch.await_leadership_until(Duration::from_secs(5)).await {
    ///     Ok(fencing_token) => println!("leading ({fencing_token})"),
    ///     Err(err) if err.is_timeout() => println!("not leading yet; still in line"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LeaderError::Timeout`] at the deadline ([`LeaderError::is_timeout`]); otherwise as
    /// `await_leadership`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits. The latch stays in the election with its node, and a later call
    /// sees a leadership that came meanwhile.
    pub async fn await_leadership_until(&self, deadline: impl Into<Deadline>) -> Result<i64> {
        let deadline = deadline.into();
        let Some(remaining) = deadline.remaining() else {
            return self.await_leadership().await;
        };
        match tokio::time::timeout(remaining, self.await_leadership()).await {
            Ok(result) => result,
            Err(_) => Err(LeaderError::Timeout { waited: deadline.elapsed() }),
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
    /// Cancel safe: it only reads.
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
    /// Cancel safe: it only reads.
    pub async fn leader(&self) -> Result<Option<Participant>> {
        Ok(self.participants().await?.into_iter().next())
    }

    /// Sets our node's data to `data` while we lead (etcd's `Proclaim`), so that observers
    /// ([`ElectionObserver`](crate::ElectionObserver)), [`participants`](Self::participants) and
    /// Curator's `getLeader().getId()` show it. The write is guarded by our leadership: one multi
    /// that checks our node exists and sets its data, on the session that owns the node, never on
    /// a later one.
    ///
    /// The data belongs to the node: a node the latch creates again later (after a lost session)
    /// carries the participant id, so a leader that wants its proclaimed data kept proclaims again
    /// on each [`IsLeader`](LeadershipEvent::IsLeader).
    ///
    /// ```no_run
    /// # async fn demo(latch: zk_recipes_leader::LeaderLatch) -> zk_recipes_leader::Result<()> {
    /// use std::time::Duration;
    ///
    /// latch.await_leadership().await?;
    /// match latch.proclaim("worker-1 at 10.0.0.7:8080", Duration::from_secs(5)).await {
    ///     Ok(()) => println!("observers see our address"),
    ///     Err(err) if err.is_node_lost() || err.is_not_leader() => println!("not leading any more"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LeaderError::NotLeader`] if we do not lead now ([`has_leadership`](Self::has_leadership)
    /// is false), [`LeaderError::NotStarted`] / [`LeaderError::Closed`]: nothing is sent.
    /// [`LeaderError::NodeLost`] if our node or its session is gone by the time the write runs
    /// (nothing was written). [`LeaderError::Framework`] with `DataTooLarge` before anything is
    /// sent, a timeout at `deadline`, or a connection loss while the write was in flight (then it
    /// may or may not have been applied, [`LeaderError::is_retryable`]).
    ///
    /// # Cancel safety
    /// Cancelled before the write was sent, nothing is written; after, the data may or may not
    /// have been set. Leadership is not affected either way.
    pub async fn proclaim(&self, data: impl Into<Vec<u8>>, deadline: impl Into<Deadline>) -> Result<()> {
        let (data, deadline) = (data.into(), deadline.into());
        let write = {
            let state = self.shared.state.lock();
            let status = *self.shared.status.borrow();
            match status.lifecycle {
                Lifecycle::Started => {}
                Lifecycle::Latent => return Err(LeaderError::NotStarted(self.subject())),
                Lifecycle::Closed => return Err(LeaderError::Closed(self.subject())),
            }
            // Leading means our current node was first on its session: write on that node only.
            let leading_node =
                state.node.as_ref().filter(|node| Some(node.stat().czxid) == status.fencing_token);
            let Some(node) = leading_node else {
                return Err(LeaderError::NotLeader(self.subject()));
            };
            self.shared
                .framework
                .transaction()
                .while_exists(node)
                .set_data(node.path(), data, None)
                .deadline(deadline)
        };
        match write.await {
            Ok(_) => Ok(()),
            Err(FrameworkError::NodeLost { path }) => Err(LeaderError::NodeLost { path }),
            Err(err) => Err(err.into()),
        }
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
