//! [`SameSessionWarning`]: the rate-limited warning for an acquire that waits behind a node of its
//! own session.

use std::time::{Duration, Instant};

use tracing::warn;

/// The warning for an acquire that waits behind a node of its own session: a second `lock()` in
/// the task that holds the lock waits for ever. It is not an error (other tasks of the process may
/// wait behind each other on purpose), so it is logged: the first time at once, then at most once
/// a minute per lock (its clones share this), with a count of the ones left out.
#[derive(Debug, Default)]
pub(super) struct SameSessionWarning {
    /// When the last warning was logged, and how many were left out since.
    last: parking_lot::Mutex<Option<(Instant, u64)>>,
}

impl SameSessionWarning {
    const INTERVAL: Duration = Duration::from_secs(60);

    pub(super) fn warn(&self, dir: &str, watched_path: &str) {
        let mut last = self.last.lock();
        let left_out = match &mut *last {
            Some((at, left_out)) if at.elapsed() < Self::INTERVAL => {
                *left_out += 1;
                return;
            }
            Some((_, left_out)) => *left_out,
            None => 0,
        };
        *last = Some((Instant::now(), 0));
        drop(last);
        warn!(
            lock = dir,
            watched = watched_path,
            left_out,
            "this acquire waits behind a node of its own session: if the task that holds this lock \
             locks it again, it waits for ever; take another guard of the hold with guard.reenter() \
             instead (other tasks of this process waiting their turn is fine)"
        );
    }
}
