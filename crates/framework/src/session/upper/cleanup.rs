//! The cleanup worker's queue: what the framework keeps of it, and what it carries. The worker and
//! the queue's methods are the nodes floor's (`nodes/cleanup.rs`).

use std::sync::Arc;

use tokio::sync::mpsc;

use super::lanes::UndecidedCreate;
use crate::session::in_flight::InFlight;

/// A node (or nodes) to delete.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CleanupTask {
    /// Delete this exact path (any version).
    /// A node's path, and its czxid when known: then only the node that create made is deleted,
    /// not a node made later under the same name.
    Node { path: String, czxid: Option<i64> },
    /// A guaranteed delete: `path` at `version`, and its descendants first if `with_children`.
    Guaranteed { path: String, version: Option<i32>, with_children: bool },
    /// Delete every child of `parent` whose name starts with `prefix` (a protected create whose
    /// outcome is unknown: the prefix holds a UUID of ours, so whatever carries it is ours).
    Protected { parent: String, prefix: String },
    /// Delete `path` if it is still the ephemeral node of session `session_id` holding `mark` (a
    /// node at a fixed path, which another may hold later); nothing once that session is gone.
    Marked { path: String, session_id: zookeeper_client::SessionId, mark: Vec<u8> },
    /// The node (if any) of a create whose name names only the session (ZooKeeper's lock recipe):
    /// told apart from the session's other nodes by its lane's floor ([`super::lanes`]).
    Undecided(UndecidedCreate),
}

/// The sending side, owned by the framework core.
#[derive(Debug)]
pub(crate) struct CleanupQueue {
    pub(crate) sending: CleanupSender,
    pub(crate) receiver: parking_lot::Mutex<Option<mpsc::UnboundedReceiver<CleanupTask>>>,
}

/// See [`CleanupQueue::settling`].
pub(crate) struct SettlingGuard {
    pub(crate) pending: Arc<InFlight>,
}

/// A clone of the queue's sending side: see [`CleanupQueue::sender`].
#[derive(Debug, Clone)]
pub(crate) struct CleanupSender {
    pub(crate) sender: mpsc::UnboundedSender<CleanupTask>,
    pub(crate) pending: Arc<InFlight>,
}
