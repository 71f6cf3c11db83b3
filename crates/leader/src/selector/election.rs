//! The selector's background task: queue on the mutex, lead, and with auto-requeue queue again,
//! until the selector is closed.

use std::sync::Arc;

use tokio::sync::watch;
use tracing::{debug, info_span, Instrument};
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::CloseDelay;

use super::state::{Shared, State};
use crate::error::LeaderError;
use crate::handle::{Lifecycle, Status};

/// One election round (repeated while auto-requeue is on), until the selector is closed. Holds
/// `_delay` throughout: once its framework begins closing, the selector closes as
/// [`close`](super::LeaderSelector::close) does (a running leadership is cancelled, waited for up
/// to the close grace, and its node released), and only then may the session end.
pub(super) async fn run(shared: Arc<Shared>, round: u64, _delay: CloseDelay) {
    let mut status = shared.status.subscribe();
    let mut backoff = Backoff::default();
    loop {
        let acquired = tokio::select! {
            biased;
            () = wait_closed(&mut status) => break,
            () = shared.framework.closing() => break,
            acquired = shared.mutex.lock() => acquired,
        };
        match acquired {
            Ok(guard) => {
                backoff.reset();
                shared.lead(guard, &mut status).await;
            }
            Err(err) => {
                let err = LeaderError::from(err);
                debug!(%err, "could not take the lock");
                if err.is_closed() || !shared.auto_requeue {
                    break;
                }
                tokio::select! {
                    () = wait_closed(&mut status) => break,
                    () = shared.framework.closing() => break,
                    () = backoff.pause() => {}
                }
                continue;
            }
        }
        if !shared.auto_requeue {
            break;
        }
    }
    if shared.framework.is_closing() {
        // Closed with its framework: say so (no warning when the last handle goes).
        drop(shared.mark_closed());
    }
    shared.round_done(round);
}

/// Resolves once the selector is closed.
pub(super) async fn wait_closed(status: &mut watch::Receiver<Status>) {
    let _ = status.wait_for(|status| status.lifecycle == Lifecycle::Closed).await;
}

impl Shared {
    /// Starts the next round's task (the caller holds the state lock).
    pub(super) fn spawn_round(self: &Arc<Self>, state: &mut State) {
        state.round += 1;
        let span = info_span!("leader_selector", path = %self.path, id = %self.id);
        // Taken before the task runs: a framework close that begins meanwhile still waits for it.
        let delay = self.framework.delay_close();
        state.task = Some(tokio::spawn(run(self.clone(), state.round, delay).instrument(span)));
    }
}
