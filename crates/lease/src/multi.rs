//! [`MultiLease`]: kazoo's `MultiNonBlockingLease`, up to N holders at once.

use crate::error::{LeaseError, Result};
use crate::held::HeldLease;
use crate::lease::{Lease, LeaseBuilder};

/// kazoo's `MultiNonBlockingLease`: `count` leases at `<path>/0` … `<path>/<count - 1>`; an
/// acquire tries them in order and takes the first free one, so at most `count` holders hold at
/// once. Built with [`LeaseBuilder::build_multi`](crate::LeaseBuilder::build_multi), in either
/// layout (the native one puts a TTL node at each `<path>/<n>`). Cheap to clone.
///
/// In the kazoo layout a holder's identifier takes back any slot it holds already (kazoo's
/// renewal), so one identifier never holds two slots by renewing; give each holder its own.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_lease::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_lease::{Lease, LeaseLayout};
///
/// let leases = Lease::builder(&framework, "/app/crawlers", Duration::from_secs(600))
///     .layout(LeaseLayout::Kazoo)
///     .identifier("crawler-on-host-3")
///     .build_multi(3)?;
/// match leases.acquire().await {
///     Ok(held) => println!("crawler slot {:?}", held.slot()),
///     Err(err) if err.is_held() => println!("three crawlers run already"),
///     Err(err) => return Err(err),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct MultiLease {
    path: String,
    leases: Vec<Lease>,
}

impl MultiLease {
    pub(crate) fn new(path: String, leases: Vec<Lease>) -> Self {
        Self { path, leases }
    }

    /// The path the leases are under.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// How many holders may hold at once.
    pub fn count(&self) -> u32 {
        u32::try_from(self.leases.len()).expect("built from a u32 count")
    }

    /// The lease at `<path>/<slot>`, if `slot < count`.
    pub fn slot(&self, slot: u32) -> Option<&Lease> {
        self.leases.get(usize::try_from(slot).ok()?)
    }

    /// Takes the first free lease, trying `<path>/0` first, as kazoo does (a slot whose kazoo
    /// record has another format version counts as taken).
    ///
    /// # Errors
    /// [`LeaseError::AllHeld`] when every slot is taken; otherwise the first other error of a
    /// slot's [`Lease::acquire`], without trying the slots after it (kazoo stops there too).
    ///
    /// # Cancel safety
    /// As [`Lease::acquire`]: a cancelled acquire holds and leaves nothing.
    pub async fn acquire(&self) -> Result<HeldLease> {
        for (slot, lease) in (0..).zip(&self.leases) {
            match lease.acquire().await {
                Ok(mut held) => {
                    held.slot = Some(slot);
                    return Ok(held);
                }
                Err(LeaseError::Held { .. } | LeaseError::UnknownVersion { .. }) => continue,
                Err(err) => return Err(err),
            }
        }
        Err(LeaseError::AllHeld { path: self.path.clone(), count: self.count() })
    }
}

/// Building a multi-lease: each slot is a lease built with the builder's settings.
impl LeaseBuilder {
    /// kazoo's `MultiNonBlockingLease`: `count` leases at `<path>/0` … `<path>/<count - 1>`, the
    /// first free one taken (see [`MultiLease`]).
    ///
    /// # Errors
    /// As [`build`](LeaseBuilder::build); [`LeaseError::ZeroCount`]. Nothing is sent.
    pub fn build_multi(self, count: u32) -> Result<MultiLease> {
        if count == 0 {
            return Err(LeaseError::ZeroCount);
        }
        let base = self.clone().build()?;
        let leases = (0..count)
            .map(|slot| self.clone().build_at(format!("{}/{slot}", base.path())))
            .collect::<Result<Vec<_>>>()?;
        Ok(MultiLease::new(base.path().to_owned(), leases))
    }
}
