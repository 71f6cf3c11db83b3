//! One leadership: `take_leadership` runs while the selector follows the connection, cancels the
//! token when it must, and drops the future no later than the server may expire the session: by
//! the framework's expiry clock under either policy, and after `Suspended` by the early bound
//! ([`grace_after_suspension`]) when that comes first.

use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::sync::watch;
use tokio::time::Instant;
use tracing::{debug, warn};
use zk_recipes_framework::{ConnectionState, DEFAULT_SESSION_TIMEOUT};
use zk_recipes_mutex::{Hold, MutexGuard};

use super::election::wait_closed;
use super::state::Shared;
use super::{CancelReason, Leadership};
use crate::handle::{Lifecycle, Status};
use zk_recipes_lock_internals::{hold_deadline, step_down_margin};

/// The selector's early bound after `Suspended` ([`LeaderSelector::grace_after_suspension`]):
/// the server expires our session no earlier than `7/20 × T` after the framework reports
/// `Suspended` *if it answers pings within `3/20 × T`* (see the type's docs); less the margin.
/// The expiry clock's bound (the selector's `clock_bound`) holds however slowly it answers.
///
/// [`LeaderSelector::grace_after_suspension`]: super::LeaderSelector::grace_after_suspension
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_leader::decisions::grace_after_suspension;
///
/// // 7/20 of 20 s, less the default margin of a tenth of the session timeout.
/// assert_eq!(grace_after_suspension(Duration::from_secs(20), None), Duration::from_secs(5));
/// ```
pub fn grace_after_suspension(session_timeout: Duration, margin: Option<Duration>) -> Duration {
    (session_timeout * 7 / 20).saturating_sub(step_down_margin(session_timeout, margin))
}

/// How a leadership ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// `take_leadership` returned.
    Returned,
    /// The future was dropped for this reason.
    Dropped(CancelReason),
}

impl Shared {
    /// Runs one leadership on `guard` and releases the lock.
    pub(super) async fn lead(&self, guard: MutexGuard, status: &mut watch::Receiver<Status>) {
        let mut events = self.framework.connection_events();
        let (cancel, cancel_receiver) = watch::channel(None);
        let fencing_token = guard.fencing_token();
        {
            let mut state = self.state.lock();
            let started = self.status.send_if_modified(|status| {
                if status.lifecycle != Lifecycle::Started || self.framework.is_closing() {
                    return false;
                }
                status.fencing_token = Some(fencing_token);
                true
            });
            if !started {
                drop(state);
                release(guard, End::Dropped(CancelReason::Closed)).await;
                return;
            }
            state.cancel = Some(cancel.clone());
        }
        debug!(node = %guard.node_path(), fencing_token, "taking leadership");
        crate::metrics::leadership_gained(&self.framework, &self.path, &self.id, fencing_token);
        // What the leadership's proclaim writes under, taken out again when the leadership ends.
        let hold = Arc::new(parking_lot::Mutex::new(Some(guard.reenter())));
        let leadership = Leadership {
            cancel: cancel_receiver,
            fencing_token,
            node_path: guard.node_path().into(),
            hold: Arc::clone(&hold),
        };
        // The leadership stands on the session that owns our lock node: its timer starts from the
        // state of that session now, whatever was published between the grant and the
        // subscription above (a Suspended, under SessionOnly, reaches us no other way).
        let generation = guard.session_generation();
        let now = self.framework.current();
        let hold_gone = now.generation != generation || now.state == Some(ConnectionState::Lost);
        let suspended_since = match (now.state, now.since) {
            (Some(ConnectionState::Suspended), Some(since)) => Some(since),
            _ => None,
        };
        // A panic in take_leadership ends the leadership like a return (Curator catches what
        // takeLeadership throws), instead of killing the selector with the lock held.
        let mut work = AssertUnwindSafe((self.take_leadership)(leadership)).catch_unwind();
        let end = {
            let lost = guard.lost();
            tokio::pin!(lost);
            let mut lost_seen = false;
            let mut events_ended = false;
            let mut cancelled = false;
            // The early bound after a Suspended (set on it), and when a close's grace ends: the
            // future is dropped at the earliest of them and of the expiry clock's bound.
            let mut expiry_at: Option<Instant> =
                suspended_since.map(|since| since + self.grace_after_suspension());
            let mut close_at: Option<Instant> = None;
            if hold_gone {
                // Lost before the leadership began: never polled.
                let reason = CancelReason::Connection(ConnectionState::Lost);
                self.cancel(&cancel, reason);
                expiry_at = Some(Instant::now());
            }
            // The clock's last bound: it never moves back, and still holds once the framework no
            // longer gives it (closed).
            let mut last_clock_at = None;
            loop {
                // Read again at each turn: the clock moves on while the server answers. Connected
                // or not: a server whose answers come late keeps the connection up past it.
                let clock_at = self.clock_bound(generation).or(last_clock_at);
                last_clock_at = clock_at;
                let drop_at = [expiry_at, close_at, clock_at].into_iter().flatten().min();
                tokio::select! {
                    biased;
                    () = sleep_until_some(drop_at) => {
                        let now = Instant::now();
                        let reason = if close_at.is_some_and(|close| close <= now) {
                            CancelReason::Closed
                        } else if hold_gone {
                            CancelReason::Connection(ConnectionState::Lost)
                        } else if expiry_at.is_some_and(|expiry| expiry <= now) {
                            CancelReason::Connection(ConnectionState::Suspended)
                        } else if self.clock_bound(generation).is_some_and(|clock| clock > now) {
                            continue; // a late answer moved the clock on
                        } else {
                            // The server may expire the session from now on: as good as lost.
                            CancelReason::Connection(ConnectionState::Lost)
                        };
                        self.cancel(&cancel, reason);
                        break End::Dropped(reason);
                    }
                    outcome = &mut work => {
                        if outcome.is_err() {
                            warn!("take_leadership panicked; the leadership is over");
                        }
                        break End::Returned;
                    }
                    // An error state per the policy (it checks the current state first), our node
                    // deleted, the framework closed.
                    reason = &mut lost, if !lost_seen => {
                        lost_seen = true;
                        let reason = CancelReason::from(reason);
                        self.cancel(&cancel, reason);
                        cancelled = true;
                        match reason {
                            // The framework was closed: as a close, the future gets the grace.
                            CancelReason::Closed => {
                                close_at.get_or_insert(Instant::now() + self.close_grace);
                            }
                            CancelReason::Connection(ConnectionState::Suspended) => {
                                // From when the framework saw the suspension, not from when we heard.
                                let current = self.framework.current();
                                let suspended_at = match (current.state, current.since) {
                                    (Some(ConnectionState::Suspended), Some(since)) => since,
                                    _ => Instant::now(),
                                };
                                expiry_at.get_or_insert(suspended_at + self.grace_after_suspension());
                            }
                            other => break End::Dropped(other),
                        }
                    }
                    update = events.next(), if !events_ended => match update.as_ref().map(|update| update.state()) {
                        // The framework was closed: as a close, the future gets the grace.
                        None => {
                            events_ended = true;
                            self.cancel(&cancel, CancelReason::Closed);
                            cancelled = true;
                            close_at.get_or_insert(Instant::now() + self.close_grace);
                        }
                        // Lost (or a lag, taken as lost): the session is gone. Read-only: we reach
                        // no quorum, which may expire the session at any time.
                        Some(state @ (ConnectionState::Lost | ConnectionState::ReadOnly)) => {
                            let reason = CancelReason::Connection(state);
                            self.cancel(&cancel, reason);
                            break End::Dropped(reason);
                        }
                        // Under any policy: no later than the server may expire the session.
                        Some(ConnectionState::Suspended) => {
                            let suspended_at = update.and_then(|update| update.at()).unwrap_or_else(Instant::now);
                            expiry_at.get_or_insert(suspended_at + self.grace_after_suspension());
                        }
                        // Back on the same session in time (SessionOnly: never cancelled).
                        Some(_) => {
                            if !cancelled {
                                expiry_at = None;
                            }
                        }
                    },
                    () = wait_closed(status), if close_at.is_none() => {
                        self.cancel(&cancel, CancelReason::Closed);
                        cancelled = true;
                        close_at = Some(Instant::now() + self.close_grace);
                    }
                }
            }
        };
        drop(work);
        // Not the last guard (ours is): no traffic. A proclaim still in flight holds its own.
        drop(hold.lock().take());
        {
            let mut state = self.state.lock();
            self.cancel_locked(&cancel, CancelReason::Closed);
            state.cancel = None;
        }
        let reason = match &end {
            End::Returned => "returned",
            End::Dropped(CancelReason::Interrupted) => "interrupted",
            End::Dropped(CancelReason::Connection(_)) => "connection",
            End::Dropped(CancelReason::NodeDeleted) => "node_deleted",
            End::Dropped(CancelReason::Closed) => "closed",
        };
        crate::metrics::leadership_lost(&self.framework, &self.path, &self.id, reason, &end);
        release(guard, end).await;
    }

    pub(super) fn grace_after_suspension(&self) -> Duration {
        let timeout = self.framework.current().session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT);
        grace_after_suspension(timeout, self.expiry_margin)
    }

    /// When the expiry clock says a leadership on session `generation` must end
    /// ([`hold_deadline`]) with this selector's margin.
    pub(super) fn clock_bound(&self, generation: u64) -> Option<Instant> {
        hold_deadline(&self.framework, generation, self.expiry_margin)
    }
}

/// Releases the lock: awaits the delete when the connection was fine, else leaves it to the
/// framework's cleanup worker (which deletes it once a session is back, if it still exists).
async fn release(guard: MutexGuard, end: End) {
    match end {
        End::Returned | End::Dropped(CancelReason::Interrupted | CancelReason::Closed) => {
            if let Err(err) = guard.release().await {
                debug!(%err, "releasing the lock failed; the cleanup worker deletes it");
            }
        }
        End::Dropped(_) => drop(guard),
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grace_after_suspension_ends_before_the_server_may_expire_the_session() {
        let timeout = Duration::from_secs(20);
        // 7/20 of 20 s = 7 s, less the default margin of 2 s.
        assert_eq!(grace_after_suspension(timeout, None), Duration::from_secs(5));
        assert_eq!(grace_after_suspension(timeout, Some(Duration::from_secs(1))), Duration::from_secs(6));
        assert_eq!(grace_after_suspension(timeout, Some(Duration::from_secs(60))), Duration::ZERO);
        assert_eq!(grace_after_suspension(Duration::from_secs(4), None), Duration::from_secs(1));
    }
}

/// The selector's own timing, on a real server: `lead` is called directly, so a test can put a
/// connection state exactly between the grant and the leadership's start.
#[cfg(test)]
mod timing_tests {
    use std::sync::atomic::{AtomicBool, Ordering};

    use std::sync::Arc;

    use zk_recipes_framework::{ErrorPolicy, Framework};
    use zk_recipes_testing::{eventually, within, within_for, FaultProxy, TestingServer, SERVER_START};

    use super::*;
    use crate::LeaderSelector;

    /// Sets its flag when dropped: tells when a leadership's future was dropped.
    struct SetOnDrop(Arc<AtomicBool>);

    impl Drop for SetOnDrop {
        fn drop(&mut self) {
            self.0.store(true, Ordering::SeqCst);
        }
    }

    /// under `SessionOnly`, a `Suspended` published between the grant and the
    /// leadership's start (here: before it) must still bound the leadership to Suspended + 7/20·T −
    /// margin, not let it run until the session is declared lost (Suspended + T).
    #[tokio::test]
    async fn a_suspension_published_before_the_leadership_began_still_bounds_it() {
        let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
        let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
        let framework = Framework::builder(proxy.connect_string())
            .session_timeout(Duration::from_secs(4))
            .connection_timeout(Duration::from_secs(5))
            .error_policy(ErrorPolicy::SessionOnly)
            .start()
            .expect("framework");
        let dropped = Arc::new(AtomicBool::new(false));
        let flag = dropped.clone();
        let selector = LeaderSelector::builder(&framework, "/suspended-at-grant/leader")
            .build(move |_leadership| {
                let on_drop = SetOnDrop(flag.clone());
                async move {
                    let _on_drop = on_drop;
                    // Ignores its token: only dropping it ends it.
                    std::future::pending::<()>().await;
                }
            })
            .expect("selector");
        let shared = Arc::clone(&selector.shared);
        shared.status.send_modify(|status| status.lifecycle = Lifecycle::Started);
        let guard = within("the grant", shared.mutex.lock()).await.expect("lock");

        proxy.black_hole(Duration::from_secs(30));
        eventually("suspended", || async { framework.current().state == Some(ConnectionState::Suspended) })
            .await;
        let current = framework.current();
        let since = current.since.expect("since");
        let timeout = current.session_timeout.expect("session timeout");
        let grace = selector.grace_after_suspension();
        let mut status = shared.status.subscribe();
        let leading = tokio::spawn(async move { shared.lead(guard, &mut status).await });
        within("the leadership dropped", async {
            while !dropped.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        let dropped_after = since.elapsed();
        assert!(
            dropped_after < grace + (timeout - grace) / 2,
            "dropped {dropped_after:?} after Suspended: the bound is {grace:?}, the session is declared lost at {timeout:?}"
        );
        within("the leadership over", leading).await.expect("lead");
        proxy.heal();
        within("close", framework.close()).await;
    }
}
