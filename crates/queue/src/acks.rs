//! What a lock-safe finish works with: our lock on an item, how the item leaves, what the finish
//! found, and the queue's group commit of acks (its state; the commit itself is in the consumer).

use zk_recipes_framework::Error as FrameworkError;

/// Our lock on an item (lock-safe mode).
#[derive(Debug, Clone)]
pub(crate) struct LockClaim {
    pub(crate) lock_node: String,
    pub(crate) generation: u64,
    pub(crate) session_id: i64,
}

/// How an item leaves the queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Finish {
    Delete,
    Requeue,
    /// Past `max_deliveries`: to the dead-letter path (or deleted without one).
    DeadLetter,
}

/// What a lock-safe finish found.
#[derive(Debug)]
pub(crate) enum Committed {
    /// Committed (with the requeued item's name).
    Done(Option<String>),
    LockLost,
    /// Our session expired after a try was sent, and the item is gone: that try may have
    /// committed, or another consumer took the item after our lock went with the session.
    OutcomeUnknown,
    ItemGone,
}

/// Group commit of lock-safe acks: acks that arrive while one multi is in flight go together in
/// the next one (one transaction for many items). If a combined multi fails, each ack is
/// committed on its own, so one lost lock never fails the others.
#[derive(Debug, Default)]
pub(crate) struct AckBatcher {
    pub(crate) waiting: parking_lot::Mutex<Vec<AckRequest>>,
    pub(crate) flushing: tokio::sync::Mutex<()>,
}

#[derive(Debug)]
pub(crate) struct AckRequest {
    pub(crate) name: String,
    pub(crate) claim: LockClaim,
    pub(crate) reply: tokio::sync::oneshot::Sender<Result<Committed, FrameworkError>>,
}
