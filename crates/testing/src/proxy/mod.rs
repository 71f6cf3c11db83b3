//! A loopback TCP proxy that injects network faults between ZooKeeper clients and one server.
//!
//! - [`wire`]: ZooKeeper's framing and the request and reply headers, as far as the proxy reads
//!   them;
//! - [`matching`]: [`RequestMatch`], which requests a fault is armed for;
//! - [`reports`]: [`ProxyStats`], the handles a test awaits and the requests they report;
//! - [`state`]: the state the handle and the connections share, and the faults armed in it;
//! - [`connection`]: accepting connections and pumping bytes both ways through the faults;
//! - [`handle`]: [`FaultProxy`], what a test holds.
//!
//! Each file imports only the ones before it in this list.

mod connection;
mod handle;
mod matching;
mod reports;
mod state;
#[cfg(test)]
mod tests;
mod wire;

pub use handle::FaultProxy;
pub use matching::RequestMatch;
pub use reports::{
    BlackHoleAtRequest, CutAfterCreate, CutAfterReply, CutCreate, CutReply, HeldRequest, ProxyStats,
};
