//! The lock layouts other clients use beside Curator's: ZooKeeper's own lock recipe and kazoo's.
//!
//! A layout is three things the shared driver asks for: how our node is named (its marker and
//! lock name), how contenders sort, and who holds / whom to watch. Everything else (deadlines,
//! cancellation, `lost()`, fencing, the one-predecessor watch) is the shared acquire loop's.

use zk_recipes_framework::NodeMarker;

use crate::driver::{Decision, LockDriver, OurNodeMissing};

/// The node layout of a lock: whose clients it queues with.
///
/// ```
/// use zk_recipes_lock_internals::LockLayout;
/// assert_eq!(LockLayout::default(), LockLayout::Curator);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockLayout {
    /// Apache Curator's: `_c_<uuid>-lock-<seq>`, data the holder's address.
    #[default]
    Curator,
    /// ZooKeeper's own lock recipe (`org.apache.zookeeper.recipes.lock.WriteLock`):
    /// `x-<session id>-<seq>`, data the recipe's two bytes `0x12 0x34`, ordered by sequence only.
    ZooKeeperRecipe,
    /// kazoo's `Lock`: `<uuid hex>__lock__<seq>`, data the contender's identifier as UTF-8.
    Kazoo,
}

/// The ten-character sequence ZooKeeper appended to `name` (`%010d` of a signed 32-bit counter:
/// ten digits, or `-` and nine digits once it wrapped), if `name` ends with one.
///
/// ```
/// use zk_recipes_lock_internals::trailing_sequence;
/// assert_eq!(trailing_sequence("x-72057-0000000042"), Some("0000000042"));
/// assert_eq!(trailing_sequence("abc__lock__-000000001"), Some("-000000001"));
/// assert_eq!(trailing_sequence("lease_holder"), None);
/// ```
pub fn trailing_sequence(name: &str) -> Option<&str> {
    let start = name.len().checked_sub(SEQUENCE_LEN)?;
    let sequence = name.get(start..)?;
    let digits = sequence.strip_prefix('-').unwrap_or(sequence);
    digits.bytes().all(|byte| byte.is_ascii_digit()).then_some(sequence)
}

const SEQUENCE_LEN: usize = 10;

/// ZooKeeper's lock recipe (`WriteLock` in `zookeeper-recipes-lock`): nodes
/// `<dir>/x-<session id>-<seq>`, found again after a connection loss by `x-<session id>-`; the owner
/// is the node with the smallest sequence, and a waiter watches the next lower one.
///
/// Ordered by the sequence alone. The original's `ZNodeName` ordering let the text before the
/// sequence (which holds the session id) decide (ZOOKEEPER-2931): a newcomer whose session id
/// sorts lower jumped ahead of the holder.
///
/// One such node per session and directory: the marker names the session, not the call.
///
/// ```
/// use zk_recipes_lock_internals::{LockDriver, ZooKeeperRecipeDriver};
///
/// let driver = ZooKeeperRecipeDriver;
/// // The holder's session id sorts higher as text; its sequence is lower: it keeps the lock.
/// let children = vec!["x-9-0000000001".to_string(), "x-10-0000000002".to_string()];
/// let children = zk_recipes_lock_internals::sort_children_by(children, |child| driver.sort_key(child));
/// assert!(driver.gets_the_lock(&children, "x-9-0000000001", 1).unwrap().holds);
/// assert!(!driver.gets_the_lock(&children, "x-10-0000000002", 1).unwrap().holds);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct ZooKeeperRecipeDriver;

/// The text before the session id in the recipe's node names.
pub const ZOOKEEPER_RECIPE_PREFIX: &str = "x-";

/// The data the recipe writes to its nodes.
pub const ZOOKEEPER_RECIPE_DATA: &[u8] = &[0x12, 0x34];

impl LockDriver for ZooKeeperRecipeDriver {
    /// Empty: the marker `x-<session id>-` is the whole name before the sequence.
    fn lock_name(&self) -> &str {
        ""
    }

    fn marker(&self) -> NodeMarker {
        NodeMarker::SessionId { prefix: ZOOKEEPER_RECIPE_PREFIX.to_owned() }
    }

    /// The sequence; a name without one sorts by its whole text.
    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        trailing_sequence(child).unwrap_or(child)
    }
}

/// kazoo's lock node name (`Lock`, `WriteLock`).
pub const KAZOO_LOCK_NAME: &str = "__lock__";
/// kazoo's read-lock node name (`ReadLock`).
pub const KAZOO_READ_LOCK_NAME: &str = "__rlock__";

/// kazoo's locks (`kazoo/recipe/lock.py`, 2.11): nodes `<dir>/<uuid hex><node name><seq>`, found
/// again by `<uuid hex><node name>`. A contender is any child ending with one of the excluding
/// names and a ten-character sequence; we hold iff no such contender has a lower sequence, else we
/// watch the one with the highest lower sequence.
///
/// - `Lock`: node `__lock__`, excluded by `__lock__` only (a plain kazoo `Lock` ignores readers).
/// - `WriteLock`: node `__lock__`, excluded by `__lock__` and `__rlock__`.
/// - `ReadLock`: node `__rlock__`, excluded by `__lock__`: readers wait only for earlier writers.
///
/// Sequences compare as text, as kazoo compares them (ten digits: the same as by number).
///
/// ```
/// use zk_recipes_lock_internals::{KazooDriver, LockDriver};
///
/// let reader = KazooDriver::read_lock();
/// let children: Vec<String> =
///     ["aa__rlock__0000000001", "bb__lock__0000000002", "cc__rlock__0000000003"].map(String::from).to_vec();
/// let decision = reader.gets_the_lock(&children, "cc__rlock__0000000003", 1).unwrap();
/// assert_eq!(decision.path_to_watch.as_deref(), Some("bb__lock__0000000002"));
/// assert!(reader.gets_the_lock(&children, "aa__rlock__0000000001", 1).unwrap().holds);
/// ```
#[derive(Debug, Clone, Copy)]
pub struct KazooDriver {
    node_name: &'static str,
    excluded_by: &'static [&'static str],
}

impl KazooDriver {
    /// kazoo's `Lock`.
    pub fn lock() -> Self {
        Self { node_name: KAZOO_LOCK_NAME, excluded_by: &[KAZOO_LOCK_NAME] }
    }

    /// kazoo's `WriteLock`.
    pub fn write_lock() -> Self {
        Self { node_name: KAZOO_LOCK_NAME, excluded_by: &[KAZOO_LOCK_NAME, KAZOO_READ_LOCK_NAME] }
    }

    /// kazoo's `ReadLock`.
    pub fn read_lock() -> Self {
        Self { node_name: KAZOO_READ_LOCK_NAME, excluded_by: &[KAZOO_LOCK_NAME] }
    }

    /// Whether `child` is a contender of kazoo's, a reader or a writer (what `contenders()` lists).
    pub fn is_contender(&self, child: &str) -> bool {
        Self::contender_sequence(child, &[KAZOO_LOCK_NAME, KAZOO_READ_LOCK_NAME]).is_some()
    }

    /// The sequence of `child` if it is a contender of kazoo's under one of `names`.
    fn contender_sequence<'a>(child: &'a str, names: &[&str]) -> Option<&'a str> {
        let sequence = trailing_sequence(child)?;
        let before = &child[..child.len() - sequence.len()];
        names.iter().any(|name| before.ends_with(name)).then_some(sequence)
    }
}

impl LockDriver for KazooDriver {
    fn lock_name(&self) -> &str {
        self.node_name
    }

    fn marker(&self) -> NodeMarker {
        NodeMarker::UuidHex
    }

    /// The sequence of a kazoo contender (`__lock__` or `__rlock__`); anything else sorts last,
    /// after every sequence (`~`), as kazoo's sort did.
    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        Self::contender_sequence(child, &[KAZOO_LOCK_NAME, KAZOO_READ_LOCK_NAME]).unwrap_or("~")
    }

    fn gets_the_lock(
        &self,
        children: &[String],
        our_node: &str,
        _max_leases: u32,
    ) -> Result<Decision, OurNodeMissing> {
        let missing = || OurNodeMissing { our_node: our_node.to_owned() };
        if !children.iter().any(|child| child == our_node) {
            return Err(missing());
        }
        let our_sequence = trailing_sequence(our_node).ok_or_else(missing)?;
        let predecessor = children
            .iter()
            .filter_map(|child| {
                let sequence = Self::contender_sequence(child, self.excluded_by)?;
                (sequence < our_sequence).then_some((sequence, child))
            })
            .max_by_key(|(sequence, _)| *sequence);
        Ok(match predecessor {
            None => Decision { holds: true, path_to_watch: None, holds_once_watched_node_goes: false },
            Some((_, child)) => Decision {
                holds: false,
                path_to_watch: Some(child.clone()),
                holds_once_watched_node_goes: false,
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::sort_children_by;
    use crate::driver::tests::names;

    /// ZOOKEEPER-2931: the original compared the text before the sequence first, so `x-10-…`
    /// (a newcomer) sorted before `x-9-…` (the holder).
    #[test]
    fn zookeeper_recipe_orders_by_sequence_only_not_by_session_id() {
        let driver = ZooKeeperRecipeDriver;
        let sorted =
            sort_children_by(names(&["x-10-0000000002", "x-9-0000000001", "x-1-0000000003"]), |child| {
                driver.sort_key(child)
            });
        assert_eq!(sorted, names(&["x-9-0000000001", "x-10-0000000002", "x-1-0000000003"]));
        let newcomer = driver.gets_the_lock(&sorted, "x-10-0000000002", 1).unwrap();
        assert!(!newcomer.holds);
        assert_eq!(newcomer.path_to_watch.as_deref(), Some("x-9-0000000001"));
        let last = driver.gets_the_lock(&sorted, "x-1-0000000003", 1).unwrap();
        assert_eq!(last.path_to_watch.as_deref(), Some("x-10-0000000002"));
        assert!(driver.gets_the_lock(&sorted, "x-9-0000000001", 1).unwrap().holds);
    }

    #[test]
    fn zookeeper_recipe_negative_session_ids_and_missing_nodes() {
        let driver = ZooKeeperRecipeDriver;
        let sorted =
            sort_children_by(names(&["x--5-0000000007", "x-3-0000000006"]), |child| driver.sort_key(child));
        assert_eq!(sorted, names(&["x-3-0000000006", "x--5-0000000007"]));
        assert!(driver.gets_the_lock(&sorted, "x-4-0000000001", 1).is_err());
    }

    #[test]
    fn kazoo_lock_ignores_readers_write_lock_does_not() {
        let children = names(&[
            "aa__rlock__0000000001",
            "bb__lock__0000000002",
            "cc__rlock__0000000003",
            "dd__lock__0000000004",
            "lease_holder",
        ]);
        let lock = KazooDriver::lock();
        let decision = lock.gets_the_lock(&children, "dd__lock__0000000004", 1).unwrap();
        assert_eq!(decision.path_to_watch.as_deref(), Some("bb__lock__0000000002"));
        let write = KazooDriver::write_lock();
        let decision = write.gets_the_lock(&children, "dd__lock__0000000004", 1).unwrap();
        assert_eq!(decision.path_to_watch.as_deref(), Some("cc__rlock__0000000003"));
        assert!(write.gets_the_lock(&children, "aa__rlock__0000000001", 1).unwrap().holds);
        let read = KazooDriver::read_lock();
        assert!(!read.gets_the_lock(&children, "cc__rlock__0000000003", 1).unwrap().holds);
        assert!(read.gets_the_lock(&children, "aa__rlock__0000000001", 1).unwrap().holds);
        assert!(read.gets_the_lock(&children, "zz__rlock__0000000009", 1).is_err());
    }

    /// kazoo#649: a reader that also counted a later writer as its predecessor, while that writer
    /// waited for the reader, deadlocked. Only lower sequences count.
    #[test]
    fn kazoo_649_a_reader_never_waits_for_a_later_writer() {
        let children = names(&["w1__lock__0000000001", "r2__rlock__0000000002", "w3__lock__0000000003"]);
        let reader = KazooDriver::read_lock().gets_the_lock(&children, "r2__rlock__0000000002", 1).unwrap();
        assert_eq!(reader.path_to_watch.as_deref(), Some("w1__lock__0000000001"));
        let writer = KazooDriver::write_lock().gets_the_lock(&children, "w3__lock__0000000003", 1).unwrap();
        assert_eq!(writer.path_to_watch.as_deref(), Some("r2__rlock__0000000002"));
    }

    #[test]
    fn kazoo_sorts_by_sequence_and_unknown_names_last() {
        let driver = KazooDriver::lock();
        let sorted = sort_children_by(
            names(&["lease_holder", "ff__lock__0000000002", "00__rlock__0000000001"]),
            |child| driver.sort_key(child),
        );
        assert_eq!(sorted, names(&["00__rlock__0000000001", "ff__lock__0000000002", "lease_holder"]));
    }

    #[test]
    fn trailing_sequences() {
        assert_eq!(trailing_sequence("0000000001"), Some("0000000001"));
        assert_eq!(trailing_sequence("x-000000001"), Some("-000000001"));
        assert_eq!(trailing_sequence("x-00000001"), None);
        assert_eq!(trailing_sequence("x-00000000a1"), None);
        assert_eq!(trailing_sequence("é-000000001"), Some("-000000001"));
    }
}
