//! What a partitioner is built with: its layout, the names of its children, and the checked
//! settings its handle and driver read.

use std::time::Duration;

use zk_recipes_framework::Framework;
use zk_recipes_mutex::Mutex;

/// The child of the partitioner's path that holds one lock per item, in both layouts.
pub const LOCKS: &str = "locks";
/// The child that holds our layout's party ([`PartitionLayout::Native`]).
pub const MEMBERS: &str = "members";
/// The child that holds kazoo's party ([`PartitionLayout::Kazoo`]).
pub const KAZOO_PARTY: &str = "party";

/// How the partitioner's nodes are laid out, and so whom it shares items with.
///
/// ```
/// use zk_recipes_partition::PartitionLayout;
/// assert_eq!(PartitionLayout::default(), PartitionLayout::Native);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum PartitionLayout {
    /// Ours: members `<path>/members/<identifier>` (ephemeral), one Curator-style mutex per item
    /// at `<path>/locks/<item>`, items dealt by balanced rendezvous hashing (few items move when
    /// the party changes). Shares items with other zk-recipes workers only.
    #[default]
    Native,
    /// kazoo 2.11's `SetPartitioner`: members `<path>/party/<uuid hex>-<identifier>`
    /// (`ShallowParty`, ephemeral), one kazoo `Lock` per item at `<path>/locks/<item>`, items
    /// dealt as `sorted(items)[i::len(workers)]`. Shares items with kazoo workers.
    Kazoo,
}

/// What a partitioner was built with.
#[derive(Debug)]
pub(crate) struct Config {
    pub(crate) framework: Framework,
    pub(crate) path: String,
    pub(crate) items: Vec<String>,
    pub(crate) identifier: String,
    pub(crate) settle: Duration,
    pub(crate) layout: PartitionLayout,
    /// The party's path and our member node's name under it.
    pub(crate) party_path: String,
    pub(crate) member_name: String,
    /// One lock per item.
    pub(crate) locks: Vec<(String, Mutex)>,
}
