//! [`LeaseLayout`]: how a lease is stored, and the one place that picks the layout's code for
//! each step (take, renew, release, read the holder).

use zk_recipes_framework::{Deadline, Feature, Framework};
use zk_recipes_mutex::{LockLayout, Mutex, MutexGuard};

use crate::error::{LeaseError, Result};
use crate::holder::LeaseHolder;
use crate::state::{HeldState, LeaseConfig};
use crate::{kazoo, native};

/// How a lease is stored, and so whose clocks it trusts (see the crate docs).
///
/// ```
/// use zk_recipes_lease::LeaseLayout;
/// assert_eq!(LeaseLayout::default(), LeaseLayout::Native);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LeaseLayout {
    /// One `PERSISTENT_WITH_TTL` node at the lease path, deleted by the server when the lease
    /// ends: trusts the server's clock (and the rate of ours), never clocks' agreement.
    #[default]
    Native,
    /// kazoo 2.11's `NonBlockingLease`: kazoo's `Lock` on the path and a `lease_holder` child
    /// holding `{"version": 1, "holder": ..., "end": ...}`: trusts that every client's wall clock
    /// agrees (UTC).
    Kazoo,
}

impl LeaseLayout {
    /// What the layout needs besides the lease node: kazoo's `Lock` on the path (holding the
    /// identifier, as kazoo's does) in the kazoo layout, nothing in the native one.
    pub(crate) fn lock(self, framework: &Framework, path: &str, identifier: &str) -> Result<Option<Mutex>> {
        match self {
            LeaseLayout::Kazoo => Ok(Some(
                Mutex::with_layout(framework, path, LockLayout::Kazoo)
                    .map_err(LeaseError::Lock)?
                    .node_data(identifier.as_bytes()),
            )),
            LeaseLayout::Native => Ok(None),
        }
    }

    /// Checks, before anything is sent, that the server can store this layout (the native
    /// layout needs TTL nodes).
    pub(crate) async fn check_server(self, config: &LeaseConfig) -> Result<()> {
        match self {
            LeaseLayout::Native => Ok(config.framework.require(Feature::TtlNodes, config.timeout).await?),
            LeaseLayout::Kazoo => Ok(()),
        }
    }

    /// The write that takes the lease, run to its end (`lock`: kazoo's lock, taken already).
    pub(crate) async fn acquire(
        self,
        config: &LeaseConfig,
        lock: Option<MutexGuard>,
        deadline: Deadline,
    ) -> Result<HeldState> {
        match (self, lock) {
            (LeaseLayout::Kazoo, Some(lock)) => kazoo::acquire(config, lock, deadline).await,
            _ => native::acquire(config, deadline).await,
        }
    }

    /// Moves a held lease's end on.
    pub(crate) async fn renew(self, config: &LeaseConfig, state: &HeldState) -> Result<HeldState> {
        match self {
            LeaseLayout::Kazoo => kazoo::renew(config, state).await,
            LeaseLayout::Native => native::renew(config, state).await,
        }
    }

    /// Gives a held lease back.
    pub(crate) async fn release(self, config: &LeaseConfig, state: &HeldState) -> Result<()> {
        match self {
            LeaseLayout::Kazoo => kazoo::release(config, state).await,
            LeaseLayout::Native => native::release(config, state).await,
        }
    }

    /// Who holds the lease now, as stored.
    pub(crate) async fn holder(
        self,
        config: &LeaseConfig,
        deadline: Deadline,
    ) -> Result<Option<LeaseHolder>> {
        match self {
            LeaseLayout::Kazoo => kazoo::holder(config, deadline).await,
            LeaseLayout::Native => native::holder(config, deadline).await,
        }
    }
}
