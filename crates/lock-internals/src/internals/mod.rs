//! The driver every lock uses, [`LockInternals`], one job a file:
//!
//! - [`wait`]: [`Wait`], whether an acquire waits and its deadline;
//! - [`queued`]: [`QueuedNode`], our node between the create and the wait;
//! - [`revocation`]: [`REVOKE_MESSAGE`], [`revoke()`], and how an owner hears it;
//! - [`same_session`]: the warning for an acquire that waits behind its own session's node;
//! - [`handle`]: [`LockInternals`] itself: settings, accessors, the participants;
//! - [`acquire`]: the acquire loop (create, list, decide, watch one predecessor, give back).
//!
//! The first four import nothing from the others; [`handle`] imports only [`same_session`], and
//! [`acquire`] sits on top of them all.

pub(crate) mod acquire;
pub(crate) mod handle;
pub(crate) mod queued;
pub(crate) mod same_session;
pub(crate) mod wait;

pub use handle::LockInternals;
pub use queued::QueuedNode;
pub use wait::Wait;
