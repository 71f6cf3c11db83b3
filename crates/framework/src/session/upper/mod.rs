//! What the floor above keeps in the framework and in each session: its state, as concrete
//! types, and none of its behaviour.
//!
//! The nodes floor keeps state beside the framework (its cleanup queue, the parents it has seen)
//! and beside each session (the batcher, the lanes of session-marked creates). The framework's
//! core holds a [`FrameworkUpper`] and each session a [`SessionUpper`]: fields of known types,
//! which the nodes floor reads by name, so the compiler checks every read and none can fail.
//!
//! The types are defined here, on the session floor, because the session floor holds them (a
//! field's type must be known where the field is); their methods, and everything that acts on
//! them, are the nodes floor's (`impl` blocks in `nodes/`), which stands on this floor. So the
//! arrows still point one way: the nodes floor imports these, and nothing here imports the nodes
//! floor. The nodes floor hands in its parts when the framework starts ([`Upper`]), and makes its
//! parts of each session as the session opens ([`Upper::session_opened`]).

pub(crate) mod batch;
pub(crate) mod cleanup;
pub(crate) mod lanes;

use std::fmt;

use batch::Batcher;
use cleanup::CleanupQueue;
use lanes::MarkerLanes;

/// The floor above's parts of a framework, in its core.
#[derive(Debug)]
pub(crate) struct FrameworkUpper {
    /// Where nodes nobody waits on go, to be deleted by the cleanup worker.
    pub(crate) cleanup: CleanupQueue,
    /// The parents the framework's creates have found in place.
    pub(crate) known_parents: KnownParents,
}

/// The floor above's parts of one session; dropped with the session's last clone.
#[derive(Debug)]
pub(crate) struct SessionUpper {
    /// The session's creates and deletes, sent together when it has many at once.
    pub(crate) batcher: Batcher,
    /// The lanes of the session's session-marked creates.
    pub(crate) marker_lanes: MarkerLanes,
}

/// The parents a framework's protected creates have found in place, so that only the first create
/// under a parent sends the parent's create ahead of its own. A parent deleted since (a reaped
/// container) fails the node create with NoNode, which makes the parents again: the set only
/// chooses the order of requests, never what is on the server.
#[derive(Debug, Default)]
pub(crate) struct KnownParents {
    pub(crate) paths: parking_lot::Mutex<std::collections::HashSet<String>>,
}

/// What the floor above keeps: its parts of the framework, and how to make its parts of a
/// session as the session opens.
pub(crate) struct Upper {
    /// Kept in the framework's core.
    pub(crate) framework: FrameworkUpper,
    /// Called on the framework's runtime as each session opens; the parts are dropped with the
    /// session's last clone.
    pub(crate) session_opened: Box<dyn Fn() -> SessionUpper + Send + Sync>,
}

impl fmt::Debug for Upper {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Upper").field("framework", &self.framework).finish_non_exhaustive()
    }
}
