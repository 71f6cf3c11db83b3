//! A lock's metrics (names in [`zk_recipes_framework::metrics::names`]): registered once per lock,
//! so an acquire only records into handles.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use metrics::{Counter, Histogram, Label};
use tracing::info;
use zk_recipes_framework::metrics::names;
use zk_recipes_framework::Framework;

use crate::lost::LostReason;

/// The metrics of one lock (one directory and node name), registered once so that an acquire
/// only records into handles. Every lock built on [`crate::LockInternals`] has them; a recipe that
/// holds leases by its own rule (the semaphore) makes its own.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework, node: zk_recipes_framework::OwnedNode) {
/// use zk_recipes_lock_internals::{HeldLease, LockMetrics};
/// let metrics = LockMetrics::new(&framework, "/app/pool/leases", "lease-");
/// let started = std::time::Instant::now();
/// // ... the lease is held ...
/// let lease = HeldLease::new(node).timed(metrics.acquired(started));
/// # drop(lease); }
/// ```
#[derive(Clone)]
pub struct LockMetrics(Arc<Handles>);

/// The registered handles, shared by a lock and its timed holds: a hold clones one `Arc`, not
/// every handle.
struct Handles {
    acquire: Histogram,
    hold: Histogram,
    timeouts: Counter,
    revocations: Counter,
    labels: Vec<Label>,
}

impl std::fmt::Debug for LockMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LockMetrics").field("labels", &self.0.labels).finish_non_exhaustive()
    }
}

impl LockMetrics {
    /// Registers the metrics of the lock at `dir` whose nodes are named `lock_name`.
    pub fn new(framework: &Framework, dir: &str, lock_name: &str) -> Self {
        let labels = framework.metric_labels(dir, &[("lock", lock_name)]);
        Self(Arc::new(Handles {
            acquire: metrics::histogram!(names::LOCK_ACQUIRE_SECONDS, labels.iter()),
            hold: metrics::histogram!(names::LOCK_HOLD_SECONDS, labels.iter()),
            timeouts: metrics::counter!(names::LOCK_ACQUIRE_TIMEOUTS, labels.iter()),
            revocations: metrics::counter!(names::LOCK_REVOCATIONS, labels.iter()),
            labels,
        }))
    }

    /// Records an acquire that started at `started` and holds now; times the hold.
    pub fn acquired(&self, started: Instant) -> HoldTimer {
        self.0.acquire.record(started.elapsed());
        HoldTimer { started: Instant::now(), metrics: self.clone(), lost_counted: AtomicBool::new(false) }
    }

    /// Counts an acquire that reached its deadline.
    pub fn timed_out(&self) {
        self.0.timeouts.increment(1);
    }
}

/// Times a hold (recorded when dropped: released or dropped), and counts its loss once. Given to
/// [`crate::HeldLease::timed`].
///
/// ```no_run
/// # fn demo(framework: zk_recipes_framework::Framework, node: zk_recipes_framework::OwnedNode) {
/// use std::time::Instant;
/// use zk_recipes_lock_internals::{HeldLease, HoldTimer, LockMetrics};
///
/// let metrics = LockMetrics::new(&framework, "/app/pool/leases", "lease-");
/// let timer: HoldTimer = metrics.acquired(Instant::now());
/// let lease = HeldLease::new(node).timed(timer);
/// drop(lease); // the hold's time is recorded now (and the node deleted in the background)
/// # }
/// ```
pub struct HoldTimer {
    started: Instant,
    metrics: LockMetrics,
    lost_counted: AtomicBool,
}

impl HoldTimer {
    /// Counts and logs a loss, the first time it is seen.
    pub(crate) fn lost(&self, path: &str, reason: LostReason) {
        if self.lost_counted.swap(true, Ordering::AcqRel) {
            return;
        }
        info!(path, ?reason, "a held lock is lost: another process may hold it now");
        let labels: Vec<Label> = self
            .metrics
            .0
            .labels
            .iter()
            .cloned()
            .chain([Label::new("reason", reason.metric_label())])
            .collect();
        metrics::counter!(names::LOCK_LOST, labels).increment(1);
    }

    pub(crate) fn revoked(&self) {
        self.metrics.0.revocations.increment(1);
    }
}

impl Drop for HoldTimer {
    fn drop(&mut self) {
        self.metrics.0.hold.record(self.started.elapsed());
    }
}
