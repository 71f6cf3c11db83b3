//! What `take_leadership` receives: the leadership token, and why it was cancelled.

use std::sync::Arc;

use tokio::sync::watch;
use zk_recipes_framework::ConnectionState;
use zk_recipes_mutex::LostReason;

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
