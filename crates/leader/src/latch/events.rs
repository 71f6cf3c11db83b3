//! What a latch tells its subscribers: leadership changes, why leadership ended, and whether a
//! close says so.

use futures::Stream;
use tokio::sync::broadcast;
use zk_recipes_framework::{ConnectionState, ErrorPolicy};

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
        /// [`LeaderLatch::fencing_token`](crate::LeaderLatch::fencing_token)).
        fencing_token: i64,
    },
    /// We no longer lead.
    NotLeader {
        /// Why.
        reason: NotLeaderReason,
    },
    /// The subscriber fell behind and `missed` events were dropped: look at
    /// [`LeaderLatch::has_leadership`](crate::LeaderLatch::has_leadership) for the current state.
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
    /// The server may expire our session soon (the framework's expiry clock, less a tenth of the
    /// session timeout): it has not answered a request sent since then, although the connection
    /// may look healthy (its replies or watch events still arrive). Leadership comes back without
    /// a new node if the server answers again in time.
    SessionMayExpire,
    /// The latch (with [`CloseMode::NotifyLeader`]) or its framework was closed.
    Closed,
}

impl NotLeaderReason {
    /// The reason as a metric label: `connection`, `node_deleted`, `not_first`,
    /// `session_may_expire`, `closed`.
    pub fn metric_name(&self) -> &'static str {
        match self {
            Self::Connection(_) => "connection",
            Self::NodeDeleted => "node_deleted",
            Self::NotFirst => "not_first",
            Self::SessionMayExpire => "session_may_expire",
            Self::Closed => "closed",
        }
    }
}

/// What the latch broadcasts to its subscribers: a change, or its close (the end of every stream).
#[derive(Debug, Clone)]
pub(super) enum Signal {
    Event(LeadershipEvent),
    Closed,
}

/// The leadership changes of a [`LeaderLatch`](crate::LeaderLatch) ([`LeaderLatch::subscribe`](crate::LeaderLatch::subscribe)), in order. Ends
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
    pub(super) receiver: broadcast::Receiver<Signal>,
    pub(super) ended: bool,
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

/// Whether `state` ends leadership: an error state per the policy, or a read-only connection (the
/// quorum, which we cannot reach, may expire our session meanwhile).
pub(super) fn ends_leadership(policy: ErrorPolicy, state: ConnectionState) -> bool {
    policy.is_error_state(state) || state == ConnectionState::ReadOnly
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
