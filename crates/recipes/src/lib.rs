//! # zk-recipes
//!
//! Apache Curator's ZooKeeper recipes in Rust, wire-compatible with Curator. This umbrella crate
//! re-exports the separate crates; depend on them one by one if you prefer.
//!
//! | module | crate | what |
//! |---|---|---|
//! | [`framework`] | `zk-recipes-framework` | session owner: connection states, session re-creation, retry policies, paths, protected creates |
//!
//! Recipe crates (locks, semaphores, read-write lock, leader election, queues) are added here as
//! they land.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes::framework::Framework;
//!
//! # async fn demo() -> zk_recipes::framework::Result<()> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! framework.block_until_connected(Duration::from_secs(10)).await?;
//! # Ok(()) }
//! ```

pub use zk_recipes_framework as framework;
