//! A count of things still running, with a wait until none is.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// A count of things still running, with a wait until none is.
#[derive(Debug, Default)]
pub(crate) struct InFlight {
    count: AtomicUsize,
    idle: Notify,
}

impl InFlight {
    pub(crate) fn start_one(&self) {
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn finish_one(&self) {
        if self.count.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.idle.notify_waiters();
        }
    }

    pub(crate) fn count(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Resolves once the count is zero.
    pub(crate) async fn idle(&self) {
        loop {
            let idle = self.idle.notified();
            if self.count() == 0 {
                return;
            }
            idle.await;
        }
    }
}
