//! The latch's background task: the election loop (create our node, list on its session, lead
//! or watch the node just before ours) beside the connection follower.

use std::sync::Arc;

use tracing::debug;
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::zookeeper_client::{EventType, OneshotWatcher};
use zk_recipes_framework::{
    path, CloseDelay, ConnectionEvents, ConnectionState, Deadline, Error as FrameworkError, ProtectedCreate,
    DEFAULT_SESSION_TIMEOUT,
};
use zk_recipes_lock_internals::sort_children;

use super::events::{CloseMode, NotLeaderReason};
use super::state::{OurNode, Shared};
use super::LATCH_NAME;
use crate::handle::Lifecycle;

impl Shared {
    /// The election loop. Returns when the framework is closed.
    pub(super) async fn elect(&self) {
        let mut backoff = Backoff::default();
        loop {
            let node = match self.our_node() {
                Some(node) => node,
                None => match self.create_node().await {
                    Ok(Some(node)) => node,
                    Ok(None) => return,
                    Err(FrameworkError::Closed) => return,
                    Err(err) => {
                        debug!(%err, "creating our node failed; trying again");
                        backoff.pause().await;
                        continue;
                    }
                },
            };
            match self.check(&node).await {
                Ok(()) => backoff.reset(),
                Err(FrameworkError::Closed) => return,
                Err(err) => {
                    debug!(%err, "checking leadership failed; trying again");
                    backoff.pause().await;
                }
            }
        }
    }

    /// Creates our node; `None` if the latch was closed meanwhile.
    async fn create_node(&self) -> Result<Option<OurNode>, FrameworkError> {
        let owned = self
            .framework
            .create_protected(
                ProtectedCreate::new(&self.path, LATCH_NAME).data(self.id.as_bytes()),
                Deadline::never(),
            )
            .await?;
        let node = OurNode::of(&owned);
        let mut state = self.state.lock();
        if self.status.borrow().lifecycle != Lifecycle::Started {
            drop(state);
            drop(owned);
            return Ok(None);
        }
        debug!(node = %node.path, session = %owned.session_id(), "joined the election");
        state.node = Some(owned);
        Ok(Some(node))
    }

    /// One round: list on our node's session, lead or watch the node before ours, and wait for a
    /// reason to look again.
    async fn check(&self, node: &OurNode) -> Result<(), FrameworkError> {
        let children = match self.list(node).await {
            Ok(Some(children)) => children,
            // The path is gone (an empty container reaped, CURATOR-724), and our node with it.
            Ok(None) => {
                self.reset(node, NotLeaderReason::NodeDeleted);
                return Ok(());
            }
            Err(FrameworkError::SessionLost) => {
                self.reset(node, NotLeaderReason::Connection(ConnectionState::Lost));
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        let sorted = sort_children(children, LATCH_NAME);
        let Some(index) = sorted.iter().position(|child| *child == node.name) else {
            self.reset(node, NotLeaderReason::NodeDeleted);
            return Ok(());
        };
        // First: lead (if healthy) and watch our own node, to notice if someone deletes it.
        // Otherwise: watch the node just before ours.
        let (watched, ours) = if index == 0 {
            self.claim(node);
            (node.path.clone(), true)
        } else {
            self.set_leading(None, NotLeaderReason::NotFirst);
            (path::join(&self.path, &sorted[index - 1]), false)
        };
        let watcher = match self.watch(node, &watched).await {
            Ok(Some(watcher)) => watcher,
            Ok(None) if ours => {
                self.reset(node, NotLeaderReason::NodeDeleted);
                return Ok(());
            }
            // The node before ours went meanwhile: list again. Never re-create our node for
            // that (CURATOR-644).
            Ok(None) => return Ok(()),
            Err(FrameworkError::SessionLost) => {
                self.reset(node, NotLeaderReason::Connection(ConnectionState::Lost));
                return Ok(());
            }
            Err(err) => return Err(err),
        };
        tokio::select! {
            event = watcher.changed() => {
                if ours && event.event_type == EventType::NodeDeleted {
                    self.reset(node, NotLeaderReason::NodeDeleted);
                }
            }
            () = self.kick.notified() => {}
        }
        Ok(())
    }

    /// The children of the election path, listed on our node's session; `None` if the path is
    /// gone. [`FrameworkError::SessionLost`] if that session is.
    async fn list(&self, node: &OurNode) -> Result<Option<Vec<String>>, FrameworkError> {
        self.framework.children_on_session(node.generation, &self.path, Deadline::never()).await
    }

    /// A data watch on `watched` (get-data, so no watch is left on a missing node), on our node's
    /// session; `None` if the node is gone.
    async fn watch(&self, node: &OurNode, watched: &str) -> Result<Option<OneshotWatcher>, FrameworkError> {
        let watch = self.framework.watch_data_on_session(node.generation, watched, Deadline::never()).await;
        Ok(watch?.map(|(_, watcher)| watcher))
    }
}

/// The latch's background task: the election loop, the connection follower and the clock
/// follower, until the latch
/// is closed (the task is aborted) or its framework begins closing. Holds `_delay` throughout: a
/// closing framework ends the session only after this latch stopped leading (subscribers told)
/// and deleted its node, so the next leader never starts while we still lead.
pub(super) async fn run(shared: Arc<Shared>, events: ConnectionEvents, _delay: CloseDelay) {
    tokio::select! {
        () = shared.framework.closing() => {}
        () = shared.follow_connection(events) => {}
        () = shared.follow_clock() => {}
        () = shared.elect() => {}
    }
    // The framework is closing: so is the latch.
    if let Some((Some(node), _this_task)) = shared.mark_closed(CloseMode::NotifyLeader) {
        // Bounded by the session timeout: past it, the session may be gone and the node with it.
        let timeout = shared.framework.current().session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT);
        if let Err(err) = node.delete(Deadline::after(timeout)).await {
            debug!(%err, "deleting our node while the framework closes failed; the session's end deletes it");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latch_nodes_sort_by_sequence_after_the_last_latch_marker() {
        let sorted = sort_children(
            vec![
                "_c_b1f0c2d4-0000-4000-8000-000000000002-latch-0000000007".into(),
                "_c_a1f0c2d4-0000-4000-8000-000000000001-latch-0000000003".into(),
                "_c_latch-0000-4000-8000-000000000003-latch-0000000005".into(),
            ],
            LATCH_NAME,
        );
        let sequences: Vec<_> = sorted.iter().map(|name| path::sequence_after(name, LATCH_NAME)).collect();
        assert_eq!(sequences, vec![Some(3), Some(5), Some(7)]);
    }
}
