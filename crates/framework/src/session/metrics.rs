//! Metrics through the [`metrics`] facade: every name zk-recipes records, and the label policy.
//!
//! Nothing is recorded unless the application installs a recorder (for example
//! `metrics-exporter-prometheus`); without one each recording is a call into a no-op. Install the
//! recorder before building recipes: a lock registers its metrics when it is built.
//!
//! **Labels.** A recipe's metrics carry its path as the `path` label, so each lock, election and
//! queue has its own series. An application with a path per entity (a lock per order, a queue per
//! tenant) turns that off with [`FrameworkBuilder::metric_path_labels(false)`]: the series then add
//! up over all paths. Other labels have a few values each: `lock` (the node name: `lock-`,
//! `__READ__`, `__WRIT__`, `lease-`), `state`, `reason`.
//!
//! [`FrameworkBuilder::metric_path_labels(false)`]: crate::FrameworkBuilder::metric_path_labels
//!
//! ```
//! use zk_recipes_framework::metrics::names;
//! assert_eq!(names::LOCK_ACQUIRE_SECONDS, "zk_recipes_lock_acquire_seconds");
//! ```

/// The metric names, all prefixed `zk_recipes_`.
pub mod names {
    /// Counter: connection state transitions, by `state` (`connected`, `suspended`, `reconnected`,
    /// `lost`, `read_only`).
    pub const SESSION_STATE_TRANSITIONS: &str = "zk_recipes_session_state_transitions_total";
    /// Counter: sessions opened (the first, and each one after a lost session).
    pub const SESSIONS_CREATED: &str = "zk_recipes_sessions_created_total";
    /// Counter: ensemble changes: the servers named by `/zookeeper/config` changed, and new
    /// sessions open with the new ones.
    pub const ENSEMBLE_CHANGES: &str = "zk_recipes_ensemble_changes_total";
    /// Counter: attempts to open a session that failed.
    pub const CONNECTION_ATTEMPTS_FAILED: &str = "zk_recipes_connection_attempts_failed_total";

    /// Histogram (seconds): from an acquire's start to holding, for acquires that got the lock.
    pub const LOCK_ACQUIRE_SECONDS: &str = "zk_recipes_lock_acquire_seconds";
    /// Histogram (seconds): from holding to the release's delete.
    pub const LOCK_HOLD_SECONDS: &str = "zk_recipes_lock_hold_seconds";
    /// Counter: acquires that reached their deadline.
    pub const LOCK_ACQUIRE_TIMEOUTS: &str = "zk_recipes_lock_acquire_timeouts_total";
    /// Counter: held locks that `lost()` reported lost, by `reason` (`connection`, `node_deleted`,
    /// `closed`); once per hold.
    pub const LOCK_LOST: &str = "zk_recipes_lock_lost_total";
    /// Counter: revocation requests a holder received.
    pub const LOCK_REVOCATIONS: &str = "zk_recipes_lock_revocations_total";

    /// Counter: leaderships gained.
    pub const LEADERSHIP_GAINED: &str = "zk_recipes_leadership_gained_total";
    /// Counter: leaderships lost, by `reason`.
    pub const LEADERSHIP_LOST: &str = "zk_recipes_leadership_lost_total";

    /// Counter: items put.
    pub const QUEUE_PUTS: &str = "zk_recipes_queue_puts_total";
    /// Counter: items taken by a consumer.
    pub const QUEUE_TAKES: &str = "zk_recipes_queue_takes_total";
    /// Counter: items acknowledged (removed after processing, lock-safe mode).
    pub const QUEUE_ACKS: &str = "zk_recipes_queue_acks_total";
    /// Counter: items put back for another delivery (a failed handler, a requeue).
    pub const QUEUE_REDELIVERIES: &str = "zk_recipes_queue_redeliveries_total";
    /// Counter: handler calls that failed.
    pub const QUEUE_HANDLER_FAILURES: &str = "zk_recipes_queue_handler_failures_total";
    /// Counter: nodes moved to the dead-letter path (or deleted) past `max_deliveries`.
    pub const QUEUE_DEAD_LETTERS: &str = "zk_recipes_queue_dead_letters_total";
    /// Gauge: items in the queue at the consumer's last listing.
    pub const QUEUE_DEPTH: &str = "zk_recipes_queue_depth";
}
