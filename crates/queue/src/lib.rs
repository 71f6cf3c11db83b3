//! # zk-recipes-queue
//!
//! Distributed queues on ZooKeeper, wire-compatible with Apache Curator's queue recipes: a Rust
//! and a Java process share one queue, either side producing or consuming.
//!
//! | type | Curator's | node names under the queue path |
//! |---|---|---|
//! | [`SimpleQueue`] | `SimpleDistributedQueue` (ZooKeeper's own recipe) | `qn-<seq>`, raw bytes |
//! | [`DistributedQueue`] | `DistributedQueue` | `queue-<seq>` |
//! | [`DistributedPriorityQueue`] | `DistributedPriorityQueue` | `queue-<sign><8 hex digits><seq>` |
//! | [`DistributedDelayQueue`] | `DistributedDelayQueue` | `queue-|<due epoch-ms, hex>|<seq>` |
//! | [`DistributedIdQueue`] | `DistributedIdQueue` | `queue-|<id>|<seq>` |
//!
//! The `queue-` family stores Curator's framing ([`framing`]): big-endian `i32 0x00010001`,
//! then per item `u8 1, i32 len, bytes`, then `u8 2`; one node may carry several items.
//! Names are encoded and sorted as Curator does ([`names`]).
//!
//! ## Delivery modes
//! - **At most once** (no lock path, and the simple queue): an item is deleted when a consumer
//!   takes it, before it is processed. A consumer that dies loses the items it held.
//! - **At least once** (the `queue-` family with [`QueueBuilder::lock_path`]): a consumer locks an
//!   item with an EPHEMERAL node `<lock_path>/<item>`, and deletes the item only when it
//!   acknowledges it ([`Delivery::ack`]: one multi that checks the lock). An item whose consumer
//!   dies before the ack is delivered again — and only such items are.
//!
//! ## Round trips
//! A consumer takes up to [`Consumer::prefetch`] nodes (16 by default) in one round trip: at most
//! once, the reads and one multi deleting them; lock-safe, one multi creating their lock nodes and
//! the reads. It refills in batches (once credits for half the window are there, or the
//! application took what was waiting), not a node at a time. A node found gone when read (another
//! consumer finished it since our listing) counts as a lost race, as a lock held by another does:
//! the consumer then jumps to a random point of its listing, or lists again, instead of walking
//! behind the others. In [`Consumer::run`], nodes whose handlers finished at once are acknowledged
//! in one multi ({check lock, delete item, delete lock} each), on the session that holds their
//! locks, while the next batch is taken; acks of [`Delivery::ack`] that wait while one is in flight
//! go together in the next multi. A multi that fails commits each ack on its own, so one lost lock
//! never fails another. The queue bench (`benches/queues.rs`) measures this against the same
//! protocol on bare calls.
//!
//! ## Connection loss and session expiry
//! Calls retry through connection losses per the framework's retry policy. A put interrupted by
//! a connection loss may be stored twice. A lock-safe consumer that loses its session loses its
//! locks: its acks fail with [`QueueError::LockLost`] and the items go to other consumers.
//! [`Delivery::lost`] and [`Consumer::on_connection_state`] report connection changes.
//!
//! ```no_run
//! use zk_recipes_framework::Framework;
//! use zk_recipes_queue::{DistributedQueue, Utf8Serializer};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let queue = DistributedQueue::builder(&framework, "/app/emails")
//!     .serializer(Utf8Serializer)
//!     .lock_path("/app/emails-locks")
//!     .build()?;
//! queue.put_batch(&["a@example.com".to_string(), "b@example.com".to_string()]).await?;
//! queue
//!     .consumer()
//!     .run(|address: String| async move {
//!         println!("sending to {address}");
//!         Ok::<(), std::io::Error>(())
//!     })
//!     .await?;
//! # Ok(()) }
//! ```

mod acks;
mod background;
mod consumer;
mod error;
pub mod framing;
mod metrics;
pub mod names;
mod nodes;
mod options;
mod queue;
mod shared;
mod simple;

pub use consumer::{Consumer, Delivery, Item, DEFAULT_DRAIN_TIMEOUT, DEFAULT_PREFETCH};
pub use error::{BoxError, QueueError, Result};
pub use framing::{BytesSerializer, FnSerializer, QueueSerializer, Utf8Serializer};
pub use options::{ErrorMode, DEFAULT_MAX_NODE_BYTES};
pub use queue::{
    DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue, DistributedQueue, QueueBuilder,
};
pub use simple::SimpleQueue;

/// The lock-safe finish's verdict as a pure function, without I/O: the code the consumer runs and
/// the models in the repository's `crates/model` check. Not part of the stable API.
#[doc(hidden)]
pub mod decisions {
    pub use crate::consumer::finish::{finish_verdict, FinishAnswer, FinishVerdict};
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<SimpleQueue>();
        assert_send_sync::<DistributedQueue<Vec<u8>>>();
        assert_send_sync::<DistributedPriorityQueue<String>>();
        assert_send_sync::<DistributedDelayQueue<String>>();
        assert_send_sync::<DistributedIdQueue<String>>();
        assert_send_sync::<Consumer<Vec<u8>>>();
        assert_send_sync::<Delivery<Vec<u8>>>();
        assert_send_sync::<QueueBuilder<Vec<u8>>>();
        assert_send_sync::<QueueError>();
        assert_send_sync::<ErrorMode>();
    }
}
