//! `ServiceDiscovery`: register this process's instances, find everybody's (Curator's
//! `ServiceDiscovery`).
//!
//! From the floor up: the registrar (`registrar/`), the one background task that writes this
//! discovery's nodes and keeps them as registered; the handle (`handle.rs`: fields, accessors,
//! name checks, the channel to the registrar); on it, how a discovery is built (`builder.rs`), its
//! writes (`writes.rs`: checked, serialized, then handed to the registrar) and its queries
//! (`queries.rs`: read from the server directly).

mod builder;
mod handle;
mod queries;
mod registrar;
mod writes;

pub use builder::ServiceDiscoveryBuilder;
pub use handle::ServiceDiscovery;
