//! # zk-recipes-cache
//!
//! A cache of a ZooKeeper node and its subtree, kept current by one persistent recursive watch
//! (ZooKeeper 3.6+): Apache Curator's `CuratorCache`, which replaced its `TreeCache`,
//! `PathChildrenCache` and `NodeCache`.
//!
//! | Curator | zk-recipes |
//! |---|---|
//! | `CuratorCache.build(client, path)` + `start()` | [`Cache::builder`]`(&framework, path)`[`.start()`](CacheBuilder::start) |
//! | `CuratorCache.Options.SINGLE_NODE_CACHE` (the old `NodeCache`) | [`.single_node()`](CacheBuilder::single_node) |
//! | `CuratorCache.Options.COMPRESSED_DATA` | [`.compressed_data()`](CacheBuilder::compressed_data) |
//! | `CuratorCacheBuilder.withDataNotCached()` | [`.stats_only()`](CacheBuilder::stats_only) |
//! | `TreeCacheSelector` | [`.filter(|path| ...)`](CacheBuilder::filter) |
//! | `CuratorCacheListener` (`NODE_CREATED`, `NODE_CHANGED`, `NODE_DELETED`, `initialized`) | [`Cache::events`] → [`CacheEvent`] |
//! | `get(path)`, `stream()` / `size()` | [`Cache::get`], [`Cache::children`], [`Cache::entries`], [`Cache::len`] |
//!
//! ## What it guarantees
//! - **Converges.** The cache loads the tree after its watch is set, then re-reads every node
//!   the watch reports. After a connection loss or a new session (ZooKeeper does not replay
//!   what a persistent watch missed) it loads the whole tree again and reports exactly the
//!   differences: a node changed twice while the connection was down is one `Changed`, a node
//!   created and deleted meanwhile is nothing.
//! - **No event lost or doubled for a subscriber.** Changes are applied and published under one
//!   lock; [`Cache::events`] starts with the current contents, so subscribing late misses
//!   nothing.
//! - **No watch left behind.** Dropping the cache removes its watch from the server.
//! - **Reads are local.** [`Cache::get`] and [`Cache::children`] answer from memory.
//!
//! Unlike Curator's caches it has no child-count limit (CURATOR-690: more than 64k children
//! broke the Java client's packet limit) and keeps one map of full paths, not a node object per
//! level.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_cache::{Cache, CacheEvent};
//! use zk_recipes_framework::{Deadline, Framework};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let cache = Cache::builder(&framework, "/config").start()?;
//! let mut events = cache.events();
//! while let Some(event) = events.next().await {
//!     match event {
//!         CacheEvent::Initialized => println!("{} nodes loaded", cache.len()),
//!         CacheEvent::Changed { path, .. } => println!("{path} changed"),
//!         _ => {}
//!     }
//! }
//! # Ok(()) }
//! ```

mod cache;
mod error;
mod event;
mod node;
mod settings;
mod shared;
mod store;
mod worker;

pub use cache::{Cache, CacheBuilder, DEFAULT_LOAD_CONCURRENCY};
pub use error::{CacheError, Result};
pub use event::{CacheEvent, CacheEvents};
pub use node::CachedNode;
pub use settings::PathFilter;

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<super::Cache>();
        assert_send_sync::<super::CacheBuilder>();
        assert_send_sync::<super::CacheEvents>();
        assert_send_sync::<super::CacheEvent>();
        assert_send_sync::<super::CacheError>();
    }
}
