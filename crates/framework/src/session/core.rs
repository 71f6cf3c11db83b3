//! What the framework's handles and its background tasks share: the settings, the connection as it
//! is now, and the parts that live as long as the framework.

use std::sync::Arc;

use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::info;
use zookeeper_client::SessionId;

use super::acl::AclProvider;
use super::builder::FrameworkBuilder;
use super::ensemble::TrackedEnsemble;
use super::error::ConnectionFailure;
use super::features::FeatureProbe;
use super::in_flight::InFlight;
use super::live_session::Session;
use super::snapshot::Snapshot;
use super::state::{ConnectionEvent, ConnectionState};
use super::upper::Upper;

/// What the background tasks and the handles share.
#[derive(Debug)]
pub(crate) struct Core {
    pub(crate) config: FrameworkBuilder,
    pub(crate) acl: Arc<dyn AclProvider>,
    pub(super) snapshot: watch::Sender<Snapshot>,
    pub(super) events: broadcast::Sender<ConnectionEvent>,
    pub(crate) supervisor: Mutex<Option<JoinHandle<()>>>,
    /// Why the last attempt to open a session failed, until one succeeds.
    pub(super) last_connection_failure: Mutex<Option<ConnectionFailure>>,
    /// What [`Framework::close`](crate::Framework::close) waits for before it ends the session
    /// ([`crate::CloseDelay`]).
    pub(crate) close_delays: Arc<InFlight>,
    /// What the servers can do (multi-read), learned once.
    pub(crate) features: Arc<FeatureProbe>,
    /// What the floor above keeps in the framework ([`super::upper`]).
    pub(crate) upper: Upper,
    /// The servers new sessions open with ([`super::ensemble`]).
    pub(crate) ensemble: TrackedEnsemble,
}

impl Core {
    /// Begins closing ([`Framework::close`](crate::Framework::close)'s first step): the session
    /// still lives.
    pub(crate) fn mark_closing(&self) {
        self.snapshot.send_if_modified(|snapshot| !std::mem::replace(&mut snapshot.closing, true));
    }

    pub(crate) fn snapshot_now(&self) -> watch::Ref<'_, Snapshot> {
        self.snapshot.borrow()
    }

    pub(crate) fn mark_closed(&self) {
        self.snapshot.send_if_modified(|snapshot| {
            if snapshot.closed {
                return false;
            }
            snapshot.closed = true;
            true
        });
    }

    pub(crate) fn subscribe(&self) -> watch::Receiver<Snapshot> {
        self.snapshot.subscribe()
    }

    pub(super) fn publish(
        &self,
        state: ConnectionState,
        session_id: SessionId,
        generation: u64,
        session: Option<Session>,
    ) {
        info!(?state, session = %session_id, generation, "connection state");
        ::metrics::counter!(super::metrics::names::SESSION_STATE_TRANSITIONS, "state" => state.metric_name())
            .increment(1);
        let at = Instant::now();
        self.snapshot.send_modify(|snapshot| {
            snapshot.state = Some(state);
            snapshot.since = Some(at);
            snapshot.generation = generation;
            snapshot.session = session;
        });
        // No subscriber is not an error.
        let _ = self.events.send(ConnectionEvent { state, session_id, generation, at });
    }
}
