//! The nodes floor's parts, handed to the session floor when the framework starts: per framework,
//! the cleanup queue and the parents its creates have found in place; per session, the batcher and
//! the lanes of session-marked creates. Each module reads its part by name
//! ([`crate::session::upper`]).

use tracing::{info_span, Instrument};

use super::batch::Batcher;
use super::cleanup::{run_worker, CleanupQueue};
use super::session_marker::MarkerLanes;
use crate::session::upper::{FrameworkUpper, KnownParents, SessionUpper, Upper};
use crate::session::Framework;

/// The nodes floor's parts of a framework and of each of its sessions; `batch_writes` says
/// whether sessions batch their creates and deletes
/// ([`FrameworkBuilder::batch_writes`](crate::FrameworkBuilder::batch_writes)).
pub(crate) fn parts(batch_writes: bool) -> Upper {
    let cleanup = CleanupQueue::new();
    let sender = cleanup.sender();
    Upper {
        framework: FrameworkUpper { cleanup, known_parents: KnownParents::default() },
        session_opened: Box::new(move || SessionUpper {
            batcher: Batcher::new(batch_writes, sender.clone()),
            marker_lanes: MarkerLanes::default(),
        }),
    }
}

/// Starts the floor's background task (the cleanup worker) beside `framework`'s supervisor.
pub(crate) fn start_workers(framework: &Framework) {
    let span = info_span!("zk_framework", connect = %framework.connect_string());
    tokio::spawn(run_worker(framework.without_keeping_open()).instrument(span));
}
