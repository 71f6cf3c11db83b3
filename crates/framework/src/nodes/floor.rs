//! The nodes floor's parts, attached to the session floor when the framework starts: per
//! framework, the cleanup queue and the parents its creates have found in place; per session,
//! the batcher and the lanes of session-marked creates. Each module reads its part back by type
//! ([`crate::session::upper`]).

use tracing::{info_span, Instrument};

use super::batch::Batcher;
use super::cleanup::{run_worker, CleanupQueue};
use super::on_session::KnownParents;
use super::session_marker::MarkerLanes;
use crate::session::upper::{Upper, UpperParts};
use crate::session::Framework;

/// The nodes floor's parts of a framework and of each of its sessions; `batch_writes` says
/// whether sessions batch their creates and deletes
/// ([`FrameworkBuilder::batch_writes`](crate::FrameworkBuilder::batch_writes)).
pub(crate) fn parts(batch_writes: bool) -> Upper {
    let cleanup = CleanupQueue::new();
    let sender = cleanup.sender();
    Upper {
        framework: UpperParts::default().with(cleanup).with(KnownParents::default()),
        session_opened: Box::new(move || {
            UpperParts::default()
                .with(Batcher::new(batch_writes, sender.clone()))
                .with(MarkerLanes::default())
        }),
    }
}

/// Starts the floor's background task (the cleanup worker) beside `framework`'s supervisor.
pub(crate) fn start_workers(framework: &Framework) {
    let span = info_span!("zk_framework", connect = %framework.connect_string());
    tokio::spawn(run_worker(framework.without_keeping_open()).instrument(span));
}
