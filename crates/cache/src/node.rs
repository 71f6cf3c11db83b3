//! One cached node: its `Stat` and its data, as last read.

use std::sync::Arc;

use zk_recipes_framework::zookeeper_client::Stat;

/// A cached node: its `Stat` and (unless the cache keeps stats only) its data, as last read.
///
/// Cloning is cheap: the data is shared.
///
/// ```
/// use zk_recipes_cache::CachedNode;
/// # fn show(node: &CachedNode) {
/// println!("version {} with {:?}", node.stat.version, node.data.as_deref());
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CachedNode {
    /// The node's `Stat` when it was last read. Its children fields (`num_children`, `cversion`,
    /// `pzxid`) are as of that read: a change below the node does not re-read it.
    pub stat: Stat,
    /// The node's data (decompressed with a compressed-data cache), or `None` in a stats-only
    /// cache.
    pub data: Option<Arc<[u8]>>,
}

impl CachedNode {
    /// Whether `other` is a different version of the node: another node at the same path
    /// (re-created), or new data.
    pub(crate) fn differs_from(&self, other: &CachedNode) -> bool {
        self.stat.czxid != other.stat.czxid || self.stat.mzxid != other.stat.mzxid || self.data != other.data
    }
}
