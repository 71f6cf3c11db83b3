//! `ServiceProvider`: one instance of a service to call, picked from a [`ServiceCache`] with a
//! strategy, leaving out disabled instances and those taken out of rotation by errors
//! (Curator's `ServiceProvider`, `ProviderStrategy`, `DownInstancePolicy`).
//!
//! From the floor up: `strategy.rs` (the strategies and their state), `down.rs` (the policy and
//! the record of errors), `handle.rs` (the handle) and `builder.rs` (how one is made from a
//! discovery).
//!
//! [`ServiceCache`]: crate::ServiceCache

mod builder;
mod down;
mod handle;
mod strategy;

pub use builder::ServiceProviderBuilder;
pub use down::DownInstancePolicy;
pub use handle::ServiceProvider;
pub use strategy::ProviderStrategy;
