//! Closing the framework in two steps: first every hold and leadership on the session ends, then
//! the session does.
//!
//! [`Framework::close`] announces closing ([`Framework::closing`] resolves, and with it every held
//! lock's `lost()`), waits until every [`CloseDelay`] is dropped (a leader selector's running
//! leadership is cancelled and waited for up to its grace, a latch says it no longer leads and
//! deletes its node), and only then closes the session. Ending the session first deleted our
//! nodes while our code still ran as their holder: the next leader started beside us.

use std::sync::Arc;

use tracing::{debug, warn};

use super::handle::Framework;
use super::in_flight::InFlight;

/// Keeps the framework's session open while a recipe winds down after [`Framework::close`] began:
/// `close` waits until every `CloseDelay` is dropped before it ends the session. Take one for as
/// long as something of yours must end while our nodes still stand (a leadership, a hold), watch
/// [`Framework::closing`], end it, and drop the delay. Bound your own wind-down: `close` waits for
/// as long as you keep it.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) {
/// let delay = framework.delay_close();
/// let worker = framework.clone();
/// tokio::spawn(async move {
///     worker.closing().await;
///     // ... stop acting as the holder, delete our nodes while the session lives ...
///     drop(delay);
/// });
/// framework.close().await; // returns after the task above dropped its delay
/// # }
/// ```
#[must_use = "Framework::close waits only while the delay lives"]
#[derive(Debug)]
pub struct CloseDelay {
    delays: Arc<InFlight>,
}

impl Drop for CloseDelay {
    fn drop(&mut self) {
        self.delays.finish_one();
    }
}

impl Framework {
    /// A [`CloseDelay`]: [`close`](Self::close) ends the session only once it is dropped.
    pub fn delay_close(&self) -> CloseDelay {
        let delays = self.core().close_delays.clone();
        delays.start_one();
        CloseDelay { delays }
    }

    /// Whether [`close`](Self::close) has begun (or the framework is closed).
    pub fn is_closing(&self) -> bool {
        let snapshot = self.core().snapshot_now();
        snapshot.closing || snapshot.closed
    }

    /// Resolves once [`close`](Self::close) has begun (at once if it has): the session still
    /// lives, and holds and leaderships end now.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits. Dropping it neither starts nor delays the close.
    pub async fn closing(&self) {
        let mut snapshot = self.core().subscribe();
        let _ = snapshot.wait_for(|snapshot| snapshot.closing || snapshot.closed).await;
    }

    /// Closes the framework: every hold and leadership on its session ends first, then the session
    /// and the background tasks stop. In order:
    /// 1. [`closing`](Self::closing) resolves, and with it every held lock's `lost()`
    ///    (`LostReason::Closed`); leader selectors cancel a running leadership and wait up to their
    ///    close grace for it to return, then release their node; leader latches stop leading and
    ///    delete their node;
    /// 2. once every [`CloseDelay`] is dropped, the session is closed (the server deletes its
    ///    remaining ephemeral nodes) and every later call fails with [`crate::Error::Closed`].
    ///
    /// So no other process takes a lock or a leadership of ours while our code still acts on it.
    /// Idempotent.
    ///
    /// # Cancel safety
    /// If dropped while waiting for the delays of step 1, the session is closed at once (step 2
    /// without waiting).
    pub async fn close(&self) {
        let core = self.core();
        core.mark_closing();
        /// Ends the session if `close` is dropped while it waits.
        struct EndSession<'a>(&'a Framework);
        impl Drop for EndSession<'_> {
            fn drop(&mut self) {
                self.0.core().mark_closed();
            }
        }
        let end_session = EndSession(self);
        let delays = core.close_delays.clone();
        if delays.count() > 0 {
            debug!(delays = delays.count(), "closing: waiting for holds and leaderships to end");
        }
        delays.idle().await;
        drop(end_session);
        let supervisor = core.supervisor.lock().take();
        if let Some(supervisor) = supervisor {
            if let Err(err) = supervisor.await {
                warn!(%err, "session supervisor ended abnormally");
            }
        }
    }
}
