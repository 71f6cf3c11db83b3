//! # zk-recipes-partition
//!
//! A work partitioner on ZooKeeper: N workers share M items (shards, queues, tenants), each item
//! owned by exactly one worker at a time, rebalanced when workers join or leave. Curator has no
//! such recipe; kazoo has `SetPartitioner`, whose layout this crate speaks too
//! ([`PartitionLayout::Kazoo`]).
//!
//! - **Ownership is a lock.** Each item has a lock at `<path>/locks/<item>` (our mutex, in
//!   Curator's layout or kazoo's `Lock` layout), and a worker owns an item exactly while it holds
//!   that lock. So two workers never own one item at once, even while rebalancing or when their
//!   views of the party disagree: a worker dealt an item waits for the previous owner's lock.
//! - **Items move only once the party has settled.** Workers join a party (an ephemeral member
//!   node each). Every change restarts the settle time ([`PartitionerBuilder::settle`]); once the
//!   party has been unchanged for that long, each worker deals the items the same way, releases
//!   what is no longer its own and waits for the locks of what now is. Lock waits under way when
//!   the party changes again are given up.
//! - **Each owned item** has a fencing token (its lock node's `czxid`, growing from one owner to
//!   the next) and an end signal ([`OwnedItem::ended`]): the item moved, or its lock was lost.
//! - **Events**: [`PartitionEvent::Acquired`], [`PartitionEvent::Released`],
//!   [`PartitionEvent::Lost`]; [`Partitioner::owned`] is a snapshot.
//! - **One task per item**: [`Partitioner::run`] runs your work for each owned item and cancels it
//!   when the item moves or is lost; the item's lock is released only after the task has
//!   finished, so no two workers ever run one item's work at once.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use zk_recipes_framework::Framework;
//! use zk_recipes_partition::{PartitionEvent, Partitioner};
//!
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let shards: Vec<String> = (0..64).map(|shard| format!("shard-{shard:02}")).collect();
//! let partitioner = Partitioner::builder(&framework, "/app/shards", shards)
//!     .identifier("worker-1")
//!     .settle(Duration::from_secs(3))
//!     .start()?;
//! let mut events = partitioner.events();
//! partitioner.run(|shard, fencing_token| async move {
//!     println!("consuming {shard} (token {fencing_token})");
//!     std::future::pending::<()>().await; // dropped when the shard moves or is lost
//! })?;
//! while let Some(event) = events.next().await {
//!     if let PartitionEvent::Lost(shards) = event {
//!         println!("lost {shards:?}: another worker may own them now");
//!     }
//! }
//! partitioner.close(Duration::from_secs(10)).await?;
//! # Ok(()) }
//! ```
//!
//! ## Layouts
//! | | [`PartitionLayout::Native`] (default) | [`PartitionLayout::Kazoo`] |
//! |---|---|---|
//! | party | `<path>/members/<identifier>`, ephemeral, data the identifier | `<path>/party/<uuid hex>-<identifier>` (kazoo's `ShallowParty`), ephemeral, data the identifier |
//! | item locks | `<path>/locks/<item>/_c_<uuid>-lock-<seq>` (Curator's mutex) | `<path>/locks/<item>/<uuid hex>__lock__<seq>` (kazoo's `Lock`) |
//! | deal | balanced rendezvous hashing: even, few items move per change | `sorted(items)[i::len(workers)]`, `i` our index among the sorted identifiers |
//! | parents | containers | persistent (`<path>`, `locks`, `party`, as kazoo's `ensure_path`) |
//! | shares with | zk-recipes workers | kazoo 2.11 `SetPartitioner` workers, and zk-recipes workers of this layout |
//!
//! Both follow the party with a persistent watch (a [`zk_recipes_nodes::GroupMember`]'s cache),
//! read again after every reconnection, never by polling.
//!
//! ## Connection loss and session expiry
//! Under the framework's standard error policy a suspended connection already makes every held
//! item's lock untrustworthy: its work is cancelled and it is reported [`PartitionEvent::Lost`],
//! before the server can expire the session and let another worker take the item (the lock node
//! lives until then). The worker then settles again: once the connection is back and the party
//! has been still for the settle time it waits for its share again. After a session loss the
//! member node is created again on the new session (the others see a leave and a join). See
//! [docs/partition.md](https://github.com/zk-recipes/zk-recipes/blob/main/docs/partition.md).
//!
//! ## Bad input
//! An invalid path (or the root), no items, an item that is not one znode name, an item given
//! twice, an invalid identifier, a zero settle time: refused by [`PartitionerBuilder::start`]
//! with a typed [`PartitionError`] before anything is sent.

mod assign;
mod builder;
mod config;
mod driver;
mod error;
mod partitioner;
mod shared;

pub use builder::{PartitionerBuilder, DEFAULT_SETTLE};
pub use config::{PartitionLayout, KAZOO_PARTY, LOCKS, MEMBERS};
pub use error::{PartitionError, Result};
pub use partitioner::Partitioner;
pub use shared::{OwnedItem, PartitionEvent, PartitionEvents};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Partitioner>();
        send_sync::<PartitionerBuilder>();
        send_sync::<PartitionEvents>();
        send_sync::<PartitionEvent>();
        send_sync::<OwnedItem>();
        send_sync::<PartitionError>();
        send_sync::<PartitionLayout>();
    }
}
