//! What `take_leadership` receives: the leadership token, and why it was cancelled.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::watch;
use tracing::debug;
use zk_recipes_framework::{path, ConnectionState, Deadline};
use zk_recipes_lock_internals::{LockError, TransactionOp};
use zk_recipes_mutex::{Hold, LostReason, MutexGuard};

use crate::error::{LeaderError, Result, Subject};

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
    /// [`LeaderSelector::interrupt_leadership`](crate::LeaderSelector::interrupt_leadership) was called.
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
            // The server may expire the session from now on: as good as lost.
            LostReason::SessionMayExpire => CancelReason::Connection(ConnectionState::Lost),
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
    pub(super) cancel: watch::Receiver<Option<CancelReason>>,
    pub(super) fencing_token: i64,
    pub(super) node_path: Arc<str>,
    /// A guard of our lock's hold while the leadership runs (taken out when it ends): what
    /// [`proclaim`](Self::proclaim) writes under.
    pub(super) hold: Arc<Mutex<Option<MutexGuard>>>,
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

    /// Sets our lock node's data to `data` (etcd's `Proclaim`), so that observers
    /// ([`ElectionObserver`](crate::ElectionObserver)), `participants()` and Curator's
    /// `getLeader().getId()` show it instead of the participant id. The write is guarded by our
    /// hold ([`Hold::write_guarded`]): one multi that checks our node exists and sets its data, on
    /// the session that owns the node, never on a later one. It may be called after the token was
    /// cancelled, as long as the leadership runs: the node decides.
    ///
    /// ```no_run
    /// # async fn demo(leadership: zk_recipes_leader::Leadership) -> zk_recipes_leader::Result<()> {
    /// use std::time::Duration;
    ///
    /// leadership.proclaim("scheduler at 10.0.0.7:8080", Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// [`LeaderError::NotLeader`] once the leadership is over (`take_leadership` returned or was
    /// dropped): nothing is sent. [`LeaderError::NodeLost`] if our node or its session is gone
    /// by the time the write runs (nothing was written). [`LeaderError::Framework`] with
    /// `DataTooLarge` before anything is sent, a timeout at `deadline`, or a connection loss while
    /// the write was in flight (then it may or may not have been applied,
    /// [`LeaderError::is_retryable`]).
    ///
    /// # Cancel safety
    /// Cancelled before the write was sent, nothing is written; after, the data may or may not
    /// have been set. A call in flight when the leadership ends keeps the node until it is done
    /// (at most until `deadline`); if it is cancelled then, the framework's cleanup worker deletes
    /// the node.
    pub async fn proclaim(&self, data: impl Into<Vec<u8>>, deadline: impl Into<Deadline>) -> Result<()> {
        let (data, deadline) = (data.into(), deadline.into());
        // A guard of its own, so the write never outlives the node's hold.
        let Some(guard) = self.hold.lock().as_ref().map(MutexGuard::reenter) else {
            let election = path::parent(&self.node_path).unwrap_or("/");
            return Err(LeaderError::NotLeader(Subject::new("leader selector", election)));
        };
        let ops = [TransactionOp::SetData { path: self.node_path.to_string(), data, version: None }];
        let written = guard.write_guarded(&ops, deadline).await;
        // The last guard only when the leadership ended meanwhile: then this deletes our node.
        if let Err(err) = guard.release().await {
            debug!(%err, "releasing the lock after a proclaim failed; the cleanup worker deletes it");
        }
        match written {
            Ok(_) => Ok(()),
            Err(LockError::NodeLost { path }) => Err(LeaderError::NodeLost { path }),
            Err(err) => Err(err.into()),
        }
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
    /// Cancel safe: it only waits. A later call sees a cancellation that came meanwhile (the first
    /// reason is kept).
    pub async fn cancelled(&self) -> CancelReason {
        let mut cancel = self.cancel.clone();
        let reason = match cancel.wait_for(Option::is_some).await {
            Ok(reason) => *reason,
            Err(_) => None,
        };
        reason.unwrap_or(CancelReason::Closed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_leadership_token_reports_the_first_reason_and_a_dropped_selector() {
        let (cancel, receiver) = watch::channel(None);
        let leadership = Leadership {
            cancel: receiver,
            fencing_token: 7,
            node_path: "/a/_c_x-lock-0000000001".into(),
            hold: Arc::default(),
        };
        assert!(!leadership.is_cancelled());
        cancel.send_replace(Some(CancelReason::Interrupted));
        assert_eq!(leadership.cancelled().await, CancelReason::Interrupted);
        let (cancel, receiver) = watch::channel(None);
        let orphan = Leadership { cancel: receiver, ..leadership.clone() };
        drop(cancel);
        assert_eq!(orphan.cancel_reason(), Some(CancelReason::Closed));
        assert_eq!(orphan.cancelled().await, CancelReason::Closed);
        assert_eq!(orphan.fencing_token(), 7);
        // Over (no hold): nothing is sent.
        let refused = orphan.proclaim("data", Deadline::never()).await.expect_err("not leading");
        assert!(refused.is_not_leader(), "{refused}");
        assert_eq!(refused.to_string(), "the leader selector on /a is not leading");
    }
}
