//! # zk-recipes-lease
//!
//! A lease: a named right held for a duration, across processes, with a fencing token. At most
//! one holder at a time (or N, with [`MultiLease`]); a holder keeps it until its duration ends,
//! renews it, or releases it. Unlike a lock, a lease is **not tied to a session**: a holder whose
//! connection is down, or whose session expired, is still the holder until its lease ends, and a
//! crashed holder keeps others out until then too. What it costs is what it buys: nobody waits
//! for a session timeout, and a holder knows without asking the server until when it holds.
//!
//! Two layouts behind one [`Lease`] type ([`LeaseLayout`]):
//!
//! | | [`LeaseLayout::Native`] (default) | [`LeaseLayout::Kazoo`] |
//! |---|---|---|
//! | znodes | one `PERSISTENT_WITH_TTL` node at the path | kazoo's `Lock` on the path, `<path>/lease_holder` |
//! | data | `{"holder":…,"duration_ms":…,"attempt":…}` | `{"version": 1, "holder": …, "end": "%Y-%m-%dT%H:%M:%S"}` (UTC) |
//! | who ends a lease | the server (its TTL reaper) | the next taker, comparing `end` with its own clock |
//! | trusts | the server's clock; that ours runs at its rate | that every client's wall clock agrees |
//! | renew keeps the fencing token | yes | yes (kazoo itself re-creates the record) |
//! | shares with | other zk-recipes processes | kazoo 2.11's `NonBlockingLease` / `MultiNonBlockingLease` |
//!
//! ```no_run
//! # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_lease::Result<()> {
//! use std::time::Duration;
//! use zk_recipes_lease::Lease;
//!
//! let lease = Lease::builder(&framework, "/app/leases/report", Duration::from_secs(30))
//!     .identifier("reporter-1")
//!     .build()?;
//! let held = lease.acquire().await?;
//! tokio::select! {
//!     reason = held.lost() => println!("stop: the lease is no longer ours ({reason:?})"),
//!     _ = tokio::time::sleep(Duration::from_secs(10)) => held.release().await?,
//! }
//! # Ok(()) }
//! ```
//!
//! ## The native layout, and why it is built so
//! The lease is one `PERSISTENT_WITH_TTL` node at the lease path whose TTL is the lease's
//! duration; the server deletes it once it has not been written for that long.
//!
//! - **Acquire** creates the node. `NodeExists` means another holder has it
//!   ([`LeaseError::Held`] names it). The holder counts its lease from a monotonic instant taken
//!   *before* the create was sent, to that instant plus the duration: the server started the TTL
//!   after that instant, so (clock rates equal) the holder's view ends before the server can
//!   delete the node, and nobody else can create it before then. Others take it only after the
//!   server deleted it.
//! - **A create whose reply was lost** is retried by the framework and may meet its own node.
//!   The data carries a random `attempt` of this acquire: a `NodeExists` whose node holds our
//!   exact data is ours, with the instant of the first send (the earliest, so the safest). So an
//!   acquire always ends knowing: held, or held by someone else.
//! - **Renew** reads the node, and if it is still ours (our `czxid`, our data) sets its data at
//!   the version read; the server restarts the TTL at each write. A versioned set alone is not
//!   enough: a node deleted and created again by another holder starts at version 0 as ours did,
//!   and the set would land on it (a test deletes a node by hand to prove it). The read leaves
//!   that one round trip, and only for a node deleted by hand: the server cannot reap ours while
//!   it is valid. A renew is sent only while the lease is valid by our clock, and its deadline is
//!   the end of the lease. A `BadVersion` is read back (a retried set meeting its own write keeps
//!   our `czxid` and data); anything else is [`LeaseError::Lost`].
//! - **Release** likewise reads, then deletes at the version read, only while the lease is valid
//!   by our clock; past that it sends nothing and the TTL ends the node.
//! - **Fencing token**: the node's `czxid`, which grows from one holder to the next (every create
//!   is a later transaction) and which a renew keeps.
//! - **Not a session's**: the node is persistent; nothing about the holder's session matters.
//!
//! **What it trusts.** The server's clock (the TTL is measured there), and that our monotonic
//! clock runs at the server's rate: a holder whose clock runs slow by a fraction ε believes in
//! its lease ε × duration after the server may have deleted it. Nothing trusts clocks to agree.
//! The server's reaper runs every `znode.container.checkIntervalMs` (60 s by default), so after
//! a lease ends its node may linger up to that long, which delays the next holder but never
//! lets two hold. The server must allow TTL nodes (`zookeeper.extendedTypesEnabled=true`); one
//! that does not refuses the create with a framework `InvalidArgument` saying so.
//!
//! ## The kazoo layout
//! kazoo 2.11's `kazoo/recipe/lease.py`, byte for byte: kazoo's `Lock` on `<path>` (our mutex on
//! [`zk_recipes_mutex::LockLayout::Kazoo`], holding the identifier as kazoo's does), and under it
//! `<path>/lease_holder` read and written as kazoo does: `json.dumps` of
//! `{"version": 1, "holder": <identifier>, "end": <UTC "%Y-%m-%dT%H:%M:%S">}` (its separators,
//! `ensure_ascii`, the end cut to whole seconds). Under the lock, with `now` our UTC wall clock:
//! - no record, or a record whose `holder` is our identifier, or whose `end` has passed
//!   (`now >= end`): it becomes ours with `end = now + duration` — kazoo deletes and creates the
//!   record; we do both in one transaction guarded by our lock node, so a failure between them
//!   leaves the old record, never none;
//! - a record of another format version: not taken ([`LeaseError::UnknownVersion`]), as kazoo
//!   ("we need an upgrade, let someone else take the lease");
//! - otherwise held by another ([`LeaseError::Held`]).
//!
//! kazoo has no release and renews by acquiring again with the same identifier. We add
//! [`HeldLease::renew`] (under the lock, only if the record is still ours: the same `czxid`, which anyone else
//! taking it changes since kazoo creates the record anew, and our identifier; a versioned set of
//! a new end, so the fencing token stays) and
//! [`HeldLease::release`] (under the lock, deletes the record if it is still ours). kazoo's
//! `ensure_path` makes the path persistent; our lock creates missing parents as containers,
//! which the server reaps only once empty: with no lease record and no lock node, so never under
//! a lease.
//!
//! **What it trusts.** Every client's wall clock, in UTC: the end is compared with the reader's
//! clock, so a taker whose clock runs ahead takes a lease early. Our own view
//! ([`HeldLease::valid_until`]) counts by our monotonic clock from the wall-clock reading the end
//! was computed from. kazoo's default identifier is the host name (ours too): two holders on one
//! host share it, and then take the lease from each other; give each its own identifier.
//!
//! ## Connection loss and session expiry
//! Neither layout keeps anything on a session between calls, so neither changes what a holder
//! holds. While the server is out of reach a renew fails (at the latest at the lease's end, its
//! deadline) and [`HeldLease::lost`] resolves at [`HeldLease::valid_until`] as usual; after a
//! new session a renew goes on as before. In the kazoo layout each call holds kazoo's lock only
//! while it runs: a session lost meanwhile fails the call with [`LeaseError::Lock`] (its guarded
//! write is refused without the lock node, so nothing is written without the lock).
//!
//! ## Errors, bad input, cancellation
//! Bad input (invalid path or the root, zero duration or one the server cannot hold, empty,
//! oversized or control-character identifier, zero count) is refused by the builder with a typed
//! [`LeaseError`] before anything is sent. A cancelled or failed acquire leaves no node behind:
//! see [`Lease::acquire`]. Dropping a [`HeldLease`] sends nothing: the lease stays taken until it
//! ends.

mod error;
mod held;
mod holder;
mod kazoo;
mod layout;
mod lease;
mod multi;
mod native;
mod state;

pub use error::{LeaseError, Result};
pub use held::HeldLease;
pub use holder::LeaseHolder;
pub use kazoo::KAZOO_LEASE_HOLDER;
pub use layout::LeaseLayout;
pub use lease::{Lease, LeaseBuilder, DEFAULT_TIMEOUT, MAX_IDENTIFIER_LEN};
pub use multi::MultiLease;
pub use state::LostReason;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_types_are_send_and_sync() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Lease>();
        send_sync::<LeaseBuilder>();
        send_sync::<MultiLease>();
        send_sync::<HeldLease>();
        send_sync::<LeaseError>();
        send_sync::<LeaseHolder>();
    }
}
