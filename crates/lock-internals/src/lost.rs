//! [`LostReason`]: why a held lock can no longer be trusted.

use zk_recipes_framework::ConnectionState;

/// Why a held lock can no longer be trusted ([`Hold::lost`](crate::Hold::lost)).
///
/// ```no_run
/// # async fn demo(held: zk_recipes_lock_internals::HeldLease) {
/// use zk_recipes_framework::ConnectionState;
/// use zk_recipes_lock_internals::{Hold, LostReason};
///
/// match held.lost().await {
///     LostReason::Connection(ConnectionState::Suspended) => println!("suspended: stop writing"),
///     LostReason::Connection(state) => println!("connection {state:?}: another may hold it now"),
///     LostReason::NodeDeleted => println!("our node was deleted"),
///     LostReason::Closed => println!("the framework is closing"),
///     other => println!("{other:?}"),
/// }
/// # }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// The connection entered a state the error policy calls an error (`Suspended` under the
    /// standard policy, `Lost`), or a subscriber lag was treated as `Lost`.
    Connection(ConnectionState),
    /// Our node was deleted.
    NodeDeleted,
    /// The framework was closed.
    Closed,
    /// The server may expire the session that holds our node soon: by the framework's expiry
    /// clock it has not answered a request sent within the session timeout, less a tenth of it
    /// ([`hold_deadline`](crate::hold_deadline)), although the connection may look healthy (its
    /// replies or watch events still arrive).
    SessionMayExpire,
}

impl LostReason {
    /// The `reason` label of the lost-lock counter.
    pub(crate) fn metric_label(self) -> &'static str {
        match self {
            LostReason::Connection(_) => "connection",
            LostReason::NodeDeleted => "node_deleted",
            LostReason::Closed => "closed",
            LostReason::SessionMayExpire => "session_may_expire",
        }
    }
}
