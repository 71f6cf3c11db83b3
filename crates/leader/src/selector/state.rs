//! The state a selector's handles share: its lifecycle, its rounds, and the running leadership's
//! token.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::debug;
use zk_recipes_framework::Framework;
use zk_recipes_mutex::Mutex as ZkMutex;

use super::{CancelReason, Leadership};
use crate::handle::{HandleTarget, HandleView, Lifecycle, Status};

/// The user's leadership task, boxed.
pub(super) type TakeLeadership = dyn Fn(Leadership) -> Pin<Box<dyn Future<Output = ()> + Send>> + Send + Sync;

/// What every handle of one selector shares.
pub(super) struct Shared {
    pub(super) framework: Framework,
    pub(super) path: String,
    pub(super) id: String,
    pub(super) mutex: ZkMutex,
    pub(super) auto_requeue: bool,
    pub(super) expiry_margin: Option<Duration>,
    pub(super) close_grace: Duration,
    pub(super) take_leadership: Box<TakeLeadership>,
    pub(super) state: Mutex<State>,
    pub(super) status: watch::Sender<Status>,
    pub(super) handles: AtomicUsize,
}

/// What changes together under one lock: the round's task and the running leadership's token.
#[derive(Default)]
pub(super) struct State {
    pub(super) task: Option<JoinHandle<()>>,
    pub(super) round: u64,
    /// The running leadership's token.
    pub(super) cancel: Option<watch::Sender<Option<CancelReason>>>,
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
    /// Marks the selector closed and cancels a running leadership; returns the task, or `None` if
    /// it was closed already (or never ran).
    pub(super) fn mark_closed(&self) -> Option<JoinHandle<()>> {
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
    pub(super) fn cancel_locked(&self, cancel: &watch::Sender<Option<CancelReason>>, reason: CancelReason) {
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

    pub(super) fn cancel(&self, cancel: &watch::Sender<Option<CancelReason>>, reason: CancelReason) {
        let _state = self.state.lock();
        self.cancel_locked(cancel, reason);
    }

    /// The round ended: the selector may be queued again.
    pub(super) fn round_done(&self, round: u64) {
        let mut state = self.state.lock();
        if state.round == round {
            state.task = None;
        }
    }
}
