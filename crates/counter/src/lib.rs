//! # zk-recipes-counter
//!
//! Shared values and atomic counters on ZooKeeper, wire-compatible with Apache Curator 5.4: a Java
//! client and a Rust client can share one node.
//!
//! | Curator | zk-recipes | data |
//! |---|---|---|
//! | `SharedValue` | [`SharedValue`] | raw bytes |
//! | `SharedCount` | [`SharedCount`] | 4-byte big-endian `i32` ([`encode_count`]) |
//! | `VersionedValue` | [`VersionedValue`] | |
//! | `SharedValueListener` / `SharedCountListener` | [`SharedValue::changes`] / [`SharedCount::changes`] | |
//! | `DistributedAtomicValue` | [`DistributedAtomicValue`] | raw bytes (`None`: no node) |
//! | `DistributedAtomicLong` | [`DistributedAtomicLong`] | 8-byte big-endian `i64` ([`encode_long`]); no node or empty = 0 |
//! | `DistributedAtomicInteger` | [`DistributedAtomicInteger`] | 4-byte big-endian `i32` ([`encode_int`]); no node or empty = 0 |
//! | `PromotedToLock` | [`PromotedToLock`] (a [`zk_recipes_mutex::Mutex`], Curator's `InterProcessMutex`) | |
//! | `AtomicValue`, `AtomicStats` | [`AtomicValue`], [`AtomicStats`] | |
//! | retry policies | [`zk_recipes_framework::retry`] | |
//!
//! A shared value follows its node with a persistent watch and answers `get` from memory; its
//! `try_set` writes only if the node is still at the version the caller saw. An atomic value reads
//! and writes conditionally on every change, retried under a retry policy, then (optionally)
//! holding a mutex.
//!
//! ## A lost reply is never a second write
//! Conditional writes are sent once. If the connection breaks with one in flight, the node is read
//! back: provably unchanged, the write is sent again; changed, the call fails with
//! [`CounterError::OutcomeUnknown`] (with `likely_applied` when the node holds exactly our bytes
//! one version on). Curator instead retries the versioned `setData`, gets `BadVersion` for its own
//! write, and counts it as a lost race: one increment applied twice.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_framework::{retry::RetryNTimes, Deadline, Framework};
//! use zk_recipes_counter::{DistributedAtomicLong, SharedCount};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let deadline = Deadline::after(Duration::from_secs(10));
//! let hits = DistributedAtomicLong::new(&framework, "/app/hits", RetryNTimes::new(10, Duration::from_millis(10)))?;
//! let result = hits.increment(deadline).await?;
//! assert!(result.succeeded());
//!
//! let workers = SharedCount::start(&framework, "/app/workers", 0, deadline).await?;
//! let seen = workers.get()?;
//! let claimed = workers.try_set(seen.version, seen.value + 1, deadline).await?;
//! println!("claimed a slot: {claimed}");
//! # Ok(()) }
//! ```

mod atomic;
mod error;
mod number;
mod shared;

pub use atomic::{AtomicStats, AtomicValue, Bytes, DistributedAtomicValue, PromotedToLock};
pub use error::{CounterError, Result};
pub use number::{
    decode_int, decode_long, encode_int, encode_long, AtomicNumber, DistributedAtomicInteger,
    DistributedAtomicLong, DistributedAtomicNumber,
};
pub use shared::{
    decode_count, encode_count, SharedCount, SharedCountChanges, SharedValue, SharedValueChanges,
    VersionedValue,
};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<super::SharedValue>();
        assert_send_sync::<super::SharedCount>();
        assert_send_sync::<super::SharedValueChanges>();
        assert_send_sync::<super::SharedCountChanges>();
        assert_send_sync::<super::DistributedAtomicValue>();
        assert_send_sync::<super::DistributedAtomicLong>();
        assert_send_sync::<super::DistributedAtomicInteger>();
        assert_send_sync::<super::PromotedToLock>();
        assert_send_sync::<super::AtomicValue<i64>>();
        assert_send_sync::<super::CounterError>();
    }
}
