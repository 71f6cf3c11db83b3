//! `ServiceCache`: the instances of one service kept current in memory by the project's path
//! cache, with events that name the instance (Curator's `ServiceCache`).
//!
//! From the floor up: `event.rs` (what subscribers get), `store.rs` (the instances by node
//! name, and the event each change makes), `shared.rs` (the store and the subscribers under one
//! lock), `follow.rs` (the task that reads the path cache's events as instances), `cache.rs` (the
//! handle) and `builder.rs` (how one is made from a discovery).

mod builder;
mod cache;
mod event;
mod follow;
mod shared;
mod store;

pub use builder::ServiceCacheBuilder;
pub use cache::ServiceCache;
pub use event::{ServiceCacheEvent, ServiceCacheEvents};
