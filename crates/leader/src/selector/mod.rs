//! Curator's `LeaderSelector`: a mutex whose holder runs the user's leadership task.
//!
//! - this module: the public handle ([`LeaderSelector`]) and its drop guard;
//! - `builder`: [`LeaderSelectorBuilder`] and its defaults;
//! - `leadership`: what `take_leadership` receives ([`Leadership`]) and why it is cancelled
//!   ([`CancelReason`]);
//! - `state`: the state the handles share: lifecycle, rounds, cancelling the running leadership;
//! - `election`: the background task's loop: queue on the mutex, lead, queue again with
//!   auto-requeue;
//! - `lead`: one leadership: running `take_leadership` while following the connection, and the
//!   bound after which its future is dropped.

mod builder;
mod election;
pub(crate) mod lead;
mod leadership;
mod state;

use std::fmt;
use std::time::Duration;

use zk_recipes_framework::{Framework, DEFAULT_SESSION_TIMEOUT};

use crate::error::{LeaderError, Result, Subject};
use crate::handle::{self, CloseOnDrop, DropGuard, Handle, Lifecycle};
use crate::participant::{self, Participant};

pub use builder::LeaderSelectorBuilder;
use lead::grace_after_suspension;
pub use leadership::{CancelReason, Leadership};
use state::Shared;

/// The name the selector's nodes carry: it *is* Curator's mutex, `<path>/_c_<uuid>-lock-<seq>`.
pub const SELECTOR_LOCK_NAME: &str = zk_recipes_mutex::LOCK_NAME;

/// Defaults to 5 s: how long [`LeaderSelector::close`] lets a cancelled `take_leadership` finish.
pub const DEFAULT_CLOSE_GRACE: Duration = Duration::from_secs(5);

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
///   node deleted, or the connection goes read-only (no quorum); otherwise at the earlier of the
///   framework's expiry clock's bound and, after a `Suspended`,
///   [`grace_after_suspension`](Self::grace_after_suspension).
///
/// A `take_leadership` that panics ends its leadership as if it returned (the panic is logged),
/// as Curator carries on after `takeLeadership` throws.
///
/// The bound that holds, under either error policy: the server expires a session `T` (the
/// negotiated session timeout) after it last heard from the client, and it heard a request it
/// answered no earlier than we sent it. The framework keeps the send time of the latest answered
/// request of the session (a heartbeat asks every `T/10`;
/// [`Framework::earliest_session_expiry`]), and the selector drops the future at that time plus
/// `T`, less the margin ([`expiry_margin`](LeaderSelectorBuilder::expiry_margin), default `T/10`),
/// connected or not, re-reading the clock when its timer fires (a late answer moves it on). This
/// holds however slowly the server answers: replies that come late, or watch notifications, keep
/// zookeeper-client's connection up, and its `Suspended` late, while the server no longer hears
/// us (tested with replies 2 s late on a 4 s session: the early bound below alone dropped the
/// future 0.7 s after the server expired the session; and with notifications every 100 ms, when
/// `Suspended` came only with the expiry). A server whose answers take longer than `T` less the
/// margin and a heartbeat interval (`T/10`) ends leaderships on a live session: it cannot be told
/// from one that stopped hearing us.
///
/// The early stop for the common case, after `Suspended`: zookeeper-client does not say when it
/// last heard from the server, so the selector takes the moment the framework reports
/// `Suspended` and works back: zookeeper-client declares a connection dead after `2/5 × T`
/// without a byte from the server, checked every `T/20` (so it last heard the server at most
/// `9/20 × T` before `Suspended`), and it sends the server a ping at least every `4/20 × T` (so
/// the server last heard from us at most `4/20 × T` before that). So, *as long as the server
/// answers pings within `3/20 × T`*, it can not expire the session before `Suspended + 7/20 × T`;
/// the selector drops the future a margin earlier (default `T/10`, so at `Suspended + T/4`) when
/// that comes before the clock's bound. Under `ErrorPolicy::SessionOnly` the framework declares
/// `Lost` at the clock's bound with its own margin of `T/10` (see [docs/framework.md](https://github.com/zk-recipes/zk-recipes/blob/main/docs/framework.md)), on which
/// the selector drops the future at once; under `ErrorPolicy::Standard` `Lost` comes a whole `T`
/// after `Suspended`, later than either bound.
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
/// Closing the framework closes the selector as [`close`](Self::close) does, before the session
/// ends ([`Framework::close`]): a running leadership's token is cancelled with
/// [`CancelReason::Closed`] first, and its future is polled on for the close grace so that code
/// after `leadership.cancelled().await` runs (as Curator's interrupt lets `finally` blocks run);
/// then it is dropped, our node is released, and only then does the framework close the session,
/// so the next leader never starts while ours runs. [`is_closed`](Self::is_closed) is
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

    /// How long a leadership may run on after the framework reports `Suspended` before its future
    /// is dropped, for the current session: `7/20 × T − margin`, the early stop for the common
    /// case. The future is dropped sooner if the framework's expiry clock says the server may
    /// expire the session sooner (see the type's docs).
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
    /// Cancel safe: it only reads.
    pub async fn participants(&self) -> Result<Vec<Participant>> {
        Ok(participant::from_nodes(self.shared.mutex.participants().await?))
    }

    /// The participant whose node sorts first, if any.
    ///
    /// # Errors
    /// As [`participants`](Self::participants).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
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
