//! The expiry clock's bound on a leadership, one rule for the latch and the selector: a
//! leadership on a session ends a margin before the earliest moment the server may expire that
//! session ([`Framework::earliest_session_expiry`]: the send time of the latest request the
//! server answered, plus `T`), whatever the connection says. A server that stops hearing us while
//! its replies or watch events keep reaching us keeps the connection up past the expiry, so
//! neither `Suspended` nor `Lost` can end a leadership in time; only this clock can.

use std::time::Duration;

use tokio::time::Instant;
use zk_recipes_framework::{Framework, DEFAULT_SESSION_TIMEOUT};

/// How long before the server may expire our session a leadership ends: `margin`, or by default
/// a tenth of the session timeout (room for a timer that fires late on a loaded machine).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_leader::decisions::step_down_margin;
///
/// assert_eq!(step_down_margin(Duration::from_secs(10), None), Duration::from_secs(1));
/// assert_eq!(step_down_margin(Duration::from_secs(10), Some(Duration::from_secs(2))), Duration::from_secs(2));
/// ```
pub fn step_down_margin(session_timeout: Duration, margin: Option<Duration>) -> Duration {
    margin.unwrap_or(session_timeout / 10)
}

/// When a leadership on session `generation` must have ended: the earliest moment the server may
/// expire that session, less [`step_down_margin`]. `None` while the framework gives no such
/// bound: a read-only session (never leads), a session no longer current (its leadership ended
/// with `Lost`), a closed framework.
pub(crate) fn leadership_deadline(
    framework: &Framework,
    generation: u64,
    margin: Option<Duration>,
) -> Option<Instant> {
    let expiry = framework.earliest_session_expiry(generation)?;
    let current = framework.current();
    if current.generation != generation {
        return None;
    }
    let timeout = current.session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT);
    Some(expiry.checked_sub(step_down_margin(timeout, margin)).unwrap_or_else(Instant::now))
}
