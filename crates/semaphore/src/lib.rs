//! # zk-recipes-semaphore
//!
//! A distributed counting semaphore on ZooKeeper — Curator's `InterProcessSemaphoreV2`, with the
//! same nodes — and a non-reentrant mutex on top of it (Curator's `InterProcessSemaphoreMutex`).
//!
//! Layout under the semaphore's path `P`, as Curator's:
//! - `P/locks`: an internal mutex (`_c_<uuid>-lock-<seq>`) serialising acquirers;
//! - `P/leases`: one node per lease, `_c_<uuid>-lease-<seq>`, EPHEMERAL_SEQUENTIAL, holding this
//!   host's address by default.
//!
//! An acquirer takes the internal mutex, creates its lease node, and holds the lease once the
//! number of lease nodes is at most `max_leases`; otherwise it waits (still holding the internal
//! mutex) for a lease to go. [`Semaphore::acquire_many`] keeps the internal mutex until all its
//! leases are held or given back, so two `acquire_many` callers never starve each other with
//! partial holdings. Releasing a lease deletes its node.
//!
//! ## Connection loss and session expiry
//! Leases are ephemeral: a crashed holder's leases go with its session. If our session is lost
//! while acquiring, the call fails with [`LockError::NodeLost`] and nothing is held. A lease is
//! created only on the internal lock's session, in one transaction with a check that the internal
//! lock node still exists, so no lease is ever created outside the internal lock (Curator retries
//! the lease create on a new session, which can leave its semaphore blocked for good). A holder
//! learns that a lease can no longer be trusted from [`Hold::lost`].
//!
//! ## Leases
//! A [`Lease`] shares what every lock's guard does with its hold (node path, fencing token,
//! `lost()`, guarded writes) through the [`Hold`] trait, re-exported here:
//! `use zk_recipes_semaphore::Hold;`. `release` is the lease's own.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_framework::Framework;
//! use zk_recipes_semaphore::Semaphore;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let semaphore = Semaphore::new(&framework, "/app/db-connections", 10)?;
//! let lease = semaphore.acquire_timeout(Duration::from_secs(5)).await?;
//! // ... use one of the 10 connections ...
//! lease.release().await?;
//! # Ok(()) }
//! ```

// Where things live (each file imports only the ones before it):
// - `layout`: the node names under the semaphore's path;
// - `error`: `SemaphoreError` and `Result`;
// - `participants`: `Participants`, holders and waiters;
// - `semaphore`: the `Semaphore` handle, its settings and participants;
// - `lease`: a `Lease` and its release;
// - `acquire`: acquiring leases, one or many, waiting or not;
// - `mutex`: `SemaphoreMutex`, a semaphore with one lease.

mod acquire;
mod error;
mod layout;
mod lease;
mod mutex;
mod participants;
mod semaphore;

pub use error::{Result, SemaphoreError};
pub use layout::{LEASES_DIR, LEASE_NAME, LOCKS_DIR, LOCK_NAME};
pub use lease::Lease;
pub use mutex::SemaphoreMutex;
pub use participants::Participants;
pub use semaphore::Semaphore;
pub use zk_recipes_lock_internals::{Hold, LockError, LostReason, TransactionOp};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_types_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Semaphore>();
        assert_send_sync::<SemaphoreMutex>();
        assert_send_sync::<Lease>();
        assert_send_sync::<SemaphoreError>();
    }
}
