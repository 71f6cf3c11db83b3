//! The state the layouts read and write: what a lease was built with, and where a held lease
//! stands. It imports nothing from the files beside it; the layouts (`kazoo.rs`, `native.rs`),
//! the layout choice (`layout.rs`) and the handles (`lease.rs`, `held.rs`) stand on it.

use std::time::{Duration, Instant, SystemTime};

use zk_recipes_framework::Framework;
use zk_recipes_mutex::Mutex;

/// What a lease was built with.
#[derive(Debug)]
pub(crate) struct LeaseConfig {
    pub(crate) framework: Framework,
    pub(crate) path: String,
    pub(crate) duration: Duration,
    pub(crate) identifier: String,
    pub(crate) timeout: Duration,
    /// kazoo's `Lock` on the path (kazoo layout only).
    pub(crate) mutex: Option<Mutex>,
}

/// Why a held lease can no longer be trusted ([`HeldLease::lost`](crate::HeldLease::lost)).
///
/// ```
/// use zk_recipes_lease::LostReason;
/// assert_ne!(LostReason::Expired, LostReason::Gone);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LostReason {
    /// Its duration ran out by our clock before a renew extended it: from now on another holder
    /// may take it.
    Expired,
    /// A renew or release found it deleted or another holder's.
    Gone,
}

/// Where a held lease stands: written by renew, read by everything else.
#[derive(Debug, Clone)]
pub(crate) struct HeldState {
    /// Until when the lease is ours, by our monotonic clock.
    pub(crate) valid_until: Instant,
    /// The record's `czxid`.
    pub(crate) fencing_token: i64,
    /// The record's data as we last wrote it.
    pub(crate) data: Vec<u8>,
    /// kazoo layout: the end we wrote (UTC, whole seconds).
    pub(crate) end: Option<SystemTime>,
    /// Set once a renew found the lease gone.
    pub(crate) lost: Option<LostReason>,
}
