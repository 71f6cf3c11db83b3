//! The expiry clock's bound on a hold: one rule for every lock's `lost()`, the leader latch and
//! the leader selector. A hold on a session ends a margin before the earliest moment the server
//! may expire that session ([`Framework::earliest_session_expiry`]: the send time of the latest
//! request the server answered, plus `T`), whatever the connection says. A server that stops
//! hearing us while its replies or watch events keep reaching us keeps the connection up past
//! the expiry, so neither `Suspended` nor `Lost` can end a hold in time there; only this clock
//! can. Under `ErrorPolicy::SessionOnly` the framework declares the session `Lost` by the same
//! clock; under `Standard` this is what bounds a hold.

use std::time::Duration;

use tokio::time::Instant;
use zk_recipes_framework::{Framework, DEFAULT_SESSION_TIMEOUT};

/// How long before the server may expire our session a hold ends: `margin`, or by default a
/// tenth of the session timeout (room for a timer that fires late on a loaded machine).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_lock_internals::step_down_margin;
///
/// assert_eq!(step_down_margin(Duration::from_secs(10), None), Duration::from_secs(1));
/// assert_eq!(step_down_margin(Duration::from_secs(10), Some(Duration::from_secs(2))), Duration::from_secs(2));
/// ```
pub fn step_down_margin(session_timeout: Duration, margin: Option<Duration>) -> Duration {
    margin.unwrap_or(session_timeout / 10)
}

/// When a hold on session `generation` must be taken as lost: the earliest moment the server may
/// expire that session, less [`step_down_margin`]. `None` while the framework gives no such
/// bound: a read-only session (it holds nothing), a session no longer current (its holds ended
/// with `Lost`), a closed framework.
///
/// ```no_run
/// # fn demo(framework: zk_recipes_framework::Framework) {
/// use zk_recipes_lock_internals::hold_deadline;
///
/// let generation = framework.current().generation;
/// if let Some(deadline) = hold_deadline(&framework, generation, None) {
///     println!("a hold on this session is safe for {:?} more", deadline - tokio::time::Instant::now());
/// }
/// # }
/// ```
pub fn hold_deadline(framework: &Framework, generation: u64, margin: Option<Duration>) -> Option<Instant> {
    let expiry = framework.earliest_session_expiry(generation)?;
    let current = framework.current();
    if current.generation != generation {
        return None;
    }
    let timeout = current.session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT);
    Some(expiry.checked_sub(step_down_margin(timeout, margin)).unwrap_or_else(Instant::now))
}

/// Resolves once [`hold_deadline`] has passed: read again whenever it falls due, since answers
/// meanwhile move it on. Never resolves while the framework gives no bound (the other ways a hold
/// ends cover those cases: a replaced session, a closed framework).
///
/// # Cancel safety
/// Cancel safe: it only reads and waits.
pub(crate) async fn until_hold_deadline(framework: &Framework, generation: u64, margin: Option<Duration>) {
    loop {
        match hold_deadline(framework, generation, margin) {
            Some(deadline) if deadline <= Instant::now() => return,
            Some(deadline) => tokio::time::sleep_until(deadline).await,
            None => std::future::pending().await,
        }
    }
}
