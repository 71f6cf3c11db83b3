//! The registrar across sessions: it follows the framework's connection events and, on a
//! session it has not written on yet (or after a failure), makes the server agree with the
//! registry. A reconnection of the same session finds nothing to do.

use tokio::time::Instant;
use tracing::{debug, info, warn};
use zk_recipes_framework::{ConnectionState, ConnectionUpdate, Deadline};

use super::nodes::outcome_unknown;
use super::state::{First, State, BACKGROUND_OPERATION_TIMEOUT};
use crate::error::DiscoveryError;

impl State {
    pub(super) async fn on_connection(&mut self, update: ConnectionUpdate) {
        match update {
            ConnectionUpdate::Changed(event) => match event.state {
                ConnectionState::Connected | ConnectionState::Reconnected => {
                    debug!(session = event.session_id.0, generation = event.generation, "connected");
                    self.reconcile().await;
                }
                ConnectionState::Suspended | ConnectionState::Lost | ConnectionState::ReadOnly => {}
            },
            // Transitions were missed: whatever happened, compare with the session there is now.
            ConnectionUpdate::Lagged { .. } => self.reconcile().await,
        }
    }

    /// The current session, if writes can be sent on it now.
    pub(super) fn writable_session(&self) -> Option<i64> {
        let snapshot = self.framework.current();
        match snapshot.state {
            Some(ConnectionState::Connected | ConnectionState::Reconnected) => {
                snapshot.session_id.map(|id| id.0)
            }
            _ => None,
        }
    }

    /// Makes the server agree with the registry: deletes what is to be deleted, and writes every
    /// instance not known to be written on the current session. Nothing to do after a
    /// reconnection of the same session.
    pub(super) async fn reconcile(&mut self) {
        let Some(session) = self.writable_session() else {
            // Not connected: the next connection event brings us back.
            return;
        };
        // `failed`: something is to be tried again; `unreachable`: the server is, so the rest of
        // the round would only wait for it.
        let (mut failed, mut unreachable) = (false, false);
        let removals: Vec<String> = self.removals.iter().cloned().collect();
        for path in removals {
            let deadline = Deadline::after(BACKGROUND_OPERATION_TIMEOUT);
            match self.framework.delete(&path).quietly().deadline(deadline).await {
                Ok(()) => {
                    self.removals.remove(&path);
                }
                Err(err) => {
                    debug!(%err, path, "delete failed; trying again later");
                    failed = true;
                    if outcome_unknown(&DiscoveryError::from(err)) {
                        unreachable = true;
                        break;
                    }
                }
            }
        }
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.synced_on != Some(session))
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            if unreachable {
                break;
            }
            let deadline = Deadline::after(BACKGROUND_OPERATION_TIMEOUT);
            match self.write(&id, First::Create, deadline).await {
                Ok(()) => info!(id, session, "instance registered on the current session"),
                Err(err) => {
                    warn!(%err, id, "could not register the instance; trying again later");
                    failed = true;
                    unreachable = outcome_unknown(&err);
                }
            }
        }
        if failed {
            self.retry_at = Some(Instant::now() + self.backoff.next_pause());
        } else {
            self.backoff.reset();
            self.retry_at = None;
        }
    }
}
