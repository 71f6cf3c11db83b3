//! The lock layouts other clients use beside Curator's: ZooKeeper's own lock recipe and kazoo's.
//!
//! A layout is three things the shared driver asks for: how our node is named (its marker and
//! lock name), how contenders sort, and who holds / whom to watch. Everything else (deadlines,
//! cancellation, `lost()`, fencing, the one-predecessor watch) is the shared acquire loop's.

use zk_recipes_framework::NodeMarker;

use crate::driver::{sort_children_by, Decision, LockDriver, OurNodeMissing};

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

/// The sequence ZooKeeper appended to `name`, if `name` ends with one.
///
/// ZooKeeper prints the parent's signed 32-bit counter with Java's `%010d`: ten digits
/// (`0000000042`) up to 2147483647; once the counter wrapped, a `-` and nine digits (`-000000001`
/// down to `-999999999`: ten characters) or a `-` and ten digits (`-1000000000` down to
/// `-2147483648`: eleven characters).
///
/// A `-` and ten digits also read as a `-` ending the name asked for and a non-negative sequence.
/// When the `-` follows a digit that reading wins (the ZooKeeper recipe's `x-<session id>-<seq>`:
/// its negative sequences follow a second `-`); otherwise the eleven characters are the sequence
/// (kazoo's `…__lock__-2147483648`, the recipe's `x-<session id>--2147483648`). Curator's names
/// (`lock-` then the sequence) are ambiguous to this function: they sort by the text after the
/// lock name ([`sort_key`](crate::sort_key)).
///
/// ```
/// use zk_recipes_lock_internals::trailing_sequence;
/// assert_eq!(trailing_sequence("x-72057-0000000042"), Some("0000000042"));
/// assert_eq!(trailing_sequence("abc__lock__-000000001"), Some("-000000001"));
/// assert_eq!(trailing_sequence("abc__lock__-2147483648"), Some("-2147483648"));
/// assert_eq!(trailing_sequence("x-72057-1234567890"), Some("1234567890"));
/// assert_eq!(trailing_sequence("x-72057--1234567890"), Some("-1234567890"));
/// assert_eq!(trailing_sequence("lease_holder"), None);
/// ```
pub fn trailing_sequence(name: &str) -> Option<&str> {
    let bytes = name.as_bytes();
    if let Some(start) = name.len().checked_sub(SEQUENCE_LEN + 1) {
        let follows_a_digit = start > 0 && bytes[start - 1].is_ascii_digit();
        // `start` is a character boundary: it holds an ASCII `-`.
        if bytes[start] == b'-' && !follows_a_digit && is_eleven_character_magnitude(&bytes[start + 1..]) {
            return Some(&name[start..]);
        }
    }
    let start = name.len().checked_sub(SEQUENCE_LEN)?;
    let sequence = name.get(start..)?;
    let digits = sequence.strip_prefix('-').unwrap_or(sequence);
    digits.bytes().all(|byte| byte.is_ascii_digit()).then_some(sequence)
}

/// Ten characters: a non-negative sequence, or a negative one down to -999999999.
const SEQUENCE_LEN: usize = 10;

/// Whether `digits` are the digits of an eleven-character negative sequence: `%010d` prints ten
/// digits after the `-` only for -1000000000 down to -2147483648 (`i32::MIN`).
fn is_eleven_character_magnitude(digits: &[u8]) -> bool {
    digits.len() == SEQUENCE_LEN
        && digits.iter().all(u8::is_ascii_digit)
        && digits[0] != b'0'
        && digits <= b"2147483648".as_slice()
}

/// Where a sequence stands in creation order: ZooKeeper's counter runs up to 2147483647, then on
/// from -2147483648 to -1, so read as unsigned it grows for 2^32 creates and deletes under one
/// parent.
fn creation_rank(sequence: &str) -> Option<u32> {
    sequence.parse::<i32>().ok().map(|sequence| sequence as u32)
}

/// ZooKeeper's lock recipe (`WriteLock` in `zookeeper-recipes-lock`): nodes
/// `<dir>/x-<session id>-<seq>`, found again after a connection loss by `x-<session id>-`; the owner
/// is the node with the smallest sequence, and a waiter watches the next lower one.
///
/// Ordered by the sequence alone. The original's `ZNodeName` ordering let the text before the
/// sequence (which holds the session id) decide (ZOOKEEPER-2931): a newcomer whose session id
/// sorts lower jumped ahead of the holder.
///
/// # Across the counter's wrap
/// Ordered by creation: after 2^31 creates and deletes under one directory ZooKeeper's counter
/// goes from 2147483647 to -2147483648, and the negative sequences are the newer ones
/// (2147483646, 2147483647, -2147483648, -2147483647 is creation order, and ours).
///
/// The Java recipe has no order there to agree with. `ZNodeName` takes the text after the last
/// `-` as the sequence, so it reads the sign as the separator: -2147483647 becomes 2147483647 (a
/// tie with the real one), and -2147483648 fails `Integer.parseInt` and becomes -1. Its
/// `compareTo` subtracts (`this.sequence - that.sequence`), which overflows for such pairs:
/// 2147483647 and -1 each compare lower than the other, so its `TreeSet`'s first node depends on
/// the order of insertion. Any order we chose would disagree with some Java contender there, so we
/// keep the one that keeps our own contenders exclusive: a node created after the wrap queues
/// behind the holder instead of jumping ahead of it.
///
/// The marker names the session, not the call: the framework sends one such create per session and
/// directory at a time and tells a lost reply's node from the session's others by sequence (see
/// [`zk_recipes_framework::ProtectedCreate::marker`]), so several holds and waiters of
/// one session on one lock never take each other's nodes.
///
/// ```
/// use zk_recipes_lock_internals::{LockDriver, ZooKeeperRecipeDriver};
///
/// let driver = ZooKeeperRecipeDriver;
/// // The holder's session id sorts higher as text; its sequence is lower: it keeps the lock.
/// let children = vec!["x-9-0000000001".to_string(), "x-10-0000000002".to_string()];
/// let children = driver.sort_children(children);
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

    /// The sequence as ZooKeeper wrote it (the order is [`sort_children`](Self::sort_children)'s:
    /// by creation, not as text); a name without one, its whole text.
    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        trailing_sequence(child).unwrap_or(child)
    }

    /// By creation order of the sequences (negative ones after the positive, see the type's
    /// docs), stably; names without a sequence after them all, by their text.
    fn sort_children(&self, children: Vec<String>) -> Vec<String> {
        let rank = |child: &String| trailing_sequence(child).and_then(creation_rank);
        let (mut sequenced, others): (Vec<String>, Vec<String>) =
            children.into_iter().partition(|child| rank(child).is_some());
        // Stable, and the key is found once per child.
        sequenced.sort_by_cached_key(rank);
        sequenced.extend(sort_children_by(others, |child| child));
        sequenced
    }
}

/// kazoo's lock node name (`Lock`, `WriteLock`).
pub const KAZOO_LOCK_NAME: &str = "__lock__";
/// kazoo's read-lock node name (`ReadLock`).
pub const KAZOO_READ_LOCK_NAME: &str = "__rlock__";

/// kazoo's locks (`kazoo/recipe/lock.py`, 2.11): nodes `<dir>/<uuid hex><node name><seq>`, found
/// again by `<uuid hex><node name>`. A contender is any child ending with one of the excluding
/// names and a sequence ([`trailing_sequence`]); we hold iff no such contender has a lower
/// sequence, else we watch the one with the highest lower sequence.
///
/// - `Lock`: node `__lock__`, excluded by `__lock__` only (a plain kazoo `Lock` ignores readers).
/// - `WriteLock`: node `__lock__`, excluded by `__lock__` and `__rlock__`.
/// - `ReadLock`: node `__rlock__`, excluded by `__lock__`: readers wait only for earlier writers.
///
/// Sequences compare as text, as kazoo compares them (`contender_sequence < node_sequence`, and
/// its sort by the regex's group): for ten digits, the same as by number.
///
/// # Across the counter's wrap
/// kazoo's order, kept although it is not creation order. After 2^31 creates and deletes under
/// one directory ZooKeeper's counter goes from 2147483647 to -2147483648; as text `-` sorts
/// before every digit, and among the eleven-character negatives a later one sorts first: nodes
/// created as 2147483646, 2147483647, -2147483648, -2147483647 queue as -2147483647,
/// -2147483648, 2147483646, 2147483647, so a contender created after the wrap holds beside the
/// holder. kazoo's clients queue so among themselves; we queue as they do because a contender
/// that disagreed with them would add to that: it and a kazoo contender could each wait for the
/// other, or each hold.
///
/// One difference: kazoo's contender pattern `(-?\d{10})$` misses the ten-character negatives
/// (`-000000001` to `-999999999`), so kazoo neither waits for such a node nor sees it as a
/// contender. We count them, in the same text order: we wait where kazoo would not, never the
/// other way round, so we never hold beside a kazoo holder that way, and no two contenders wait
/// for each other (both order by the same text).
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
        let sorted = driver.sort_children(names(&["x-10-0000000002", "x-9-0000000001", "x-1-0000000003"]));
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
        let sorted = driver.sort_children(names(&["x--5-0000000007", "x-3-0000000006"]));
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
        assert_eq!(trailing_sequence("é-2147483648"), Some("-2147483648"));
    }

    /// `%010d` of a negative counter: ten characters down to -999999999, eleven from -1000000000
    /// to -2147483648 (Java's `String.format("%010d", Integer.MIN_VALUE)` is `-2147483648`).
    #[test]
    fn trailing_sequences_of_both_widths_after_the_wrap() {
        for (name, sequence) in [
            ("ab__lock__-2147483648", Some("-2147483648")),
            ("ab__lock__-2147483647", Some("-2147483647")),
            ("ab__lock__-1000000000", Some("-1000000000")),
            ("ab__lock__-999999999", Some("-999999999")),
            ("ab__lock__-000000001", Some("-000000001")),
            ("ab__lock__2147483647", Some("2147483647")),
            ("-2147483648", Some("-2147483648")),
            // The recipe: a negative sequence follows the marker's `-`.
            ("x-72057--2147483648", Some("-2147483648")),
            ("x--5--1000000000", Some("-1000000000")),
            ("x-72057--000000001", Some("-000000001")),
            // The `-` after a digit ends the recipe's marker: a non-negative sequence follows.
            ("x-72057-2147483647", Some("2147483647")),
            ("x-72057-1000000000", Some("1000000000")),
            ("x--5-1000000000", Some("1000000000")),
            // `%010d` never prints these as eleven characters: the last ten are the sequence.
            ("ab__lock__-0000000042", Some("0000000042")),
            ("ab__lock__-2147483649", Some("2147483649")),
            ("ab__lock__-9999999999", Some("9999999999")),
            ("ab__lock__-21474836x8", None),
        ] {
            assert_eq!(trailing_sequence(name), sequence, "{name}");
        }
    }

    /// The wrap: nodes created as 2147483646, 2147483647, -2147483648, -2147483647.
    const WRAP: [&str; 4] = ["2147483646", "2147483647", "-2147483648", "-2147483647"];

    /// The recipe's nodes across the wrap queue in creation order: the Java recipe has no order
    /// there to agree with (see the driver's docs), so none of ours jumps ahead of the holder.
    #[test]
    fn zookeeper_recipe_orders_by_creation_across_the_wrap() {
        let driver = ZooKeeperRecipeDriver;
        let [a, b, c, d] = WRAP.map(|sequence| format!("x-72057-{sequence}"));
        let children = vec![d.clone(), c.clone(), "foreign".to_owned(), b.clone(), a.clone()];
        let sorted = driver.sort_children(children);
        assert_eq!(sorted, [a.clone(), b.clone(), c.clone(), d.clone(), "foreign".to_owned()]);
        assert!(driver.gets_the_lock(&sorted, &a, 1).unwrap().holds);
        for (waiter, predecessor) in [(&b, &a), (&c, &b), (&d, &c)] {
            let decision = driver.gets_the_lock(&sorted, waiter, 1).unwrap();
            assert!(!decision.holds, "{waiter}");
            assert_eq!(decision.path_to_watch.as_deref(), Some(predecessor.as_str()), "{waiter}");
        }
        // Ten-character negatives are newer than every positive sequence too, and older than
        // -1000000000 and on.
        let sorted = driver.sort_children(names(&["x-1--000000001", "x-1--2147483648", "x-1-2147483647"]));
        assert_eq!(sorted, names(&["x-1-2147483647", "x-1--2147483648", "x-1--000000001"]));
    }

    /// kazoo compares the sequences as text: across the wrap the negative ones sort first, a later
    /// one first among them. Not creation order, but kazoo's, which its clients queue by.
    #[test]
    fn kazoo_orders_as_kazoo_does_across_the_wrap() {
        let [a, b, c, d] = WRAP.map(|sequence| format!("0f3e__lock__{sequence}"));
        let driver = KazooDriver::lock();
        let sorted = driver.sort_children(vec![a.clone(), b.clone(), c.clone(), d.clone()]);
        assert_eq!(sorted, [d.clone(), c.clone(), a.clone(), b.clone()]);
        // kazoo's `_get_predecessor`: the highest sequence (as text) below ours, among contenders
        // its pattern `(?:__lock__)(-?\d{10})$` accepts (all four: eleven-character negatives).
        assert!(driver.gets_the_lock(&sorted, &d, 1).unwrap().holds);
        for (waiter, predecessor) in [(&c, &d), (&a, &c), (&b, &a)] {
            let decision = driver.gets_the_lock(&sorted, waiter, 1).unwrap();
            assert_eq!(decision.path_to_watch.as_deref(), Some(predecessor.as_str()), "{waiter}");
        }
        // A ten-character negative kazoo does not see; we count it, in the same text order.
        let short = "ee__lock__-000000001".to_owned();
        let children = [sorted, vec![short.clone()]].concat();
        assert!(driver.is_contender(&short));
        let decision = driver.gets_the_lock(&children, &d, 1).unwrap();
        assert_eq!(decision.path_to_watch.as_deref(), Some(short.as_str()));
        // A downgrade names its read node after the write node's sequence, sign and all.
        assert_eq!(KazooDriver::read_lock().sort_key(&c), "-2147483648");
    }
}
