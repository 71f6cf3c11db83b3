//! The server features a recipe may need: the one type the errors and the probes both name.

use std::fmt;

/// A server feature a recipe may need ([`Framework::require`](crate::Framework::require)).
///
/// ```
/// use zk_recipes_framework::Feature;
///
/// assert_eq!(Feature::TtlNodes.to_string(), "TTL nodes (zookeeper.extendedTypesEnabled=true)");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Feature {
    /// TTL nodes: ZooKeeper 3.5.3+ started with `zookeeper.extendedTypesEnabled=true`.
    TtlNodes,
    /// Multi-read (`getData`/`getChildren` in one request): 3.6+.
    MultiRead,
    /// Persistent and persistent-recursive watches (`addWatch`): 3.6+.
    PersistentWatches,
    /// `whoAmI`: 3.7+.
    WhoAmI,
    /// `getEphemerals`: 3.6+.
    GetEphemerals,
}

impl Feature {
    /// Every feature, in probe order.
    pub const ALL: [Feature; 5] = [
        Feature::TtlNodes,
        Feature::MultiRead,
        Feature::PersistentWatches,
        Feature::WhoAmI,
        Feature::GetEphemerals,
    ];

    /// The feature's bit in a set of features.
    pub(crate) fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Feature {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Feature::TtlNodes => "TTL nodes (zookeeper.extendedTypesEnabled=true)",
            Feature::MultiRead => "multi-read (ZooKeeper 3.6+)",
            Feature::PersistentWatches => "persistent watches (ZooKeeper 3.6+)",
            Feature::WhoAmI => "whoAmI (ZooKeeper 3.7+)",
            Feature::GetEphemerals => "getEphemerals (ZooKeeper 3.6+)",
        })
    }
}
