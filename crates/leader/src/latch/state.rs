//! The state a latch's handles share, and every change of leadership: claiming it, stepping down,
//! forgetting a node that is gone, closing.

use std::sync::atomic::AtomicUsize;

use parking_lot::Mutex;
use tokio::sync::{broadcast, watch, Notify};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::debug;
use zk_recipes_framework::{Framework, OwnedNode};
use zk_recipes_lock_internals::LockInternals;

use super::events::{ends_leadership, CloseMode, LeadershipEvent, NotLeaderReason, Signal};
use crate::handle::{HandleTarget, HandleView, Lifecycle, Status};
use zk_recipes_lock_internals::hold_deadline;

/// What every handle of one latch shares.
pub(super) struct Shared {
    pub(super) framework: Framework,
    pub(super) path: String,
    pub(super) id: String,
    pub(super) internals: LockInternals,
    pub(super) state: Mutex<State>,
    pub(super) status: watch::Sender<Status>,
    pub(super) events: broadcast::Sender<Signal>,
    /// Asks the election loop to look again (after a reconnection or a lost session).
    pub(super) kick: Notify,
    /// Tells the clock follower a claim was refused because the expiry clock had run out.
    pub(super) clock_refused: Notify,
    /// Counts `LeaderLatch` handles, to warn when the last goes without a close.
    pub(super) handles: AtomicUsize,
}

/// What changes together under one lock: our node and the background task.
#[derive(Default)]
pub(super) struct State {
    pub(super) node: Option<OwnedNode>,
    pub(super) task: Option<JoinHandle<()>>,
}

/// What the election loop knows of our node.
#[derive(Debug, Clone)]
pub(super) struct OurNode {
    pub(super) path: String,
    pub(super) name: String,
    pub(super) generation: u64,
    pub(super) czxid: i64,
}

impl OurNode {
    pub(super) fn of(node: &OwnedNode) -> Self {
        Self {
            path: node.path().to_owned(),
            name: node.name().to_owned(),
            generation: node.generation(),
            czxid: node.stat().czxid,
        }
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
    pub(super) fn set_leading(&self, fencing_token: Option<i64>, reason: NotLeaderReason) {
        let _state = self.state.lock();
        self.set_leading_locked(fencing_token, reason);
    }

    /// As `set_leading`; the caller holds the state lock, which orders every change.
    pub(super) fn set_leading_locked(&self, fencing_token: Option<i64>, reason: NotLeaderReason) {
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
            crate::metrics::leadership_lost(
                &self.framework,
                &self.path,
                &self.id,
                reason.metric_name(),
                &reason,
            );
            let _ = self.events.send(Signal::Event(LeadershipEvent::NotLeader { reason }));
        }
        if let Some(fencing_token) = fencing_token {
            crate::metrics::leadership_gained(&self.framework, &self.path, &self.id, fencing_token);
            let _ = self.events.send(Signal::Event(LeadershipEvent::IsLeader { fencing_token }));
        }
    }

    /// Marks the latch closed and ends leadership (telling subscribers per `mode`). Returns our
    /// node and the task for the caller to finish with, or `None` if it was closed already.
    pub(super) fn mark_closed(&self, mode: CloseMode) -> Option<(Option<OwnedNode>, Option<JoinHandle<()>>)> {
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
            crate::metrics::leadership_lost(
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

    pub(super) fn our_node(&self) -> Option<OurNode> {
        self.state.lock().node.as_ref().map(OurNode::of)
    }

    /// Leads with `node` if it is still ours, the connection is healthy on its session, and the
    /// expiry clock says the server cannot expire that session yet.
    pub(super) fn claim(&self, node: &OurNode) -> bool {
        let state = self.state.lock();
        if state.node.as_ref().is_none_or(|owned| owned.path() != node.path) {
            return false;
        }
        let snapshot = self.framework.current();
        let policy = self.framework.error_policy();
        let healthy = !snapshot.closed
            && snapshot.generation == node.generation
            && snapshot.state.is_some_and(|state| state.is_connected() && !ends_leadership(policy, state));
        if !healthy {
            return false;
        }
        if !self.clock_allows(node.generation) {
            self.set_leading_locked(None, NotLeaderReason::SessionMayExpire);
            self.clock_refused.notify_one();
            return false;
        }
        self.set_leading_locked(Some(node.czxid), NotLeaderReason::NotFirst);
        true
    }

    /// Whether a leadership on session `generation` may go on: the server cannot expire that
    /// session before the latch's margin has passed ([`hold_deadline`]).
    pub(super) fn clock_allows(&self, generation: u64) -> bool {
        hold_deadline(&self.framework, generation, None).is_some_and(|deadline| deadline > Instant::now())
    }

    /// Our fencing token while we lead and the expiry clock still allows it: read at the call,
    /// not only when the clock follower last woke.
    pub(super) fn leading_token(&self) -> Option<i64> {
        let token = self.status.borrow().fencing_token?;
        let generation = self.state.lock().node.as_ref()?.generation();
        self.clock_allows(generation).then_some(token)
    }

    /// Ends leadership and forgets `node` (the cleanup worker deletes it if it still exists), so
    /// the next round creates a new one.
    pub(super) fn reset(&self, node: &OurNode, reason: NotLeaderReason) {
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
}
