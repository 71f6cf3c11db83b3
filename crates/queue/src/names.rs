//! Queue node names, encoded and ordered exactly as Curator's queues do.
//!
//! | queue | node name under the queue path |
//! |---|---|
//! | distributed | `queue-<seq>` |
//! | priority | `queue-` + (`1` if p >= 0 else `0`) + 8 uppercase hex digits of `p` as u32 + `<seq>` |
//! | delay | `queue-|` + uppercase hex (at least 8 digits) of the due epoch-ms + `|<seq>` |
//! | id | `queue-|<id>|<seq>`, with `/` and `|` in the id replaced by `_` |
//! | simple | `qn-<seq>` |
//!
//! Everything here is pure: no server is involved.
//!
//! ```
//! use zk_recipes_queue::names;
//!
//! assert_eq!(names::priority_name(5), "queue-100000005");
//! assert_eq!(names::priority_name(-1), "queue-0FFFFFFFF");
//! assert_eq!(names::delay_name(0x18F_0000_0000), "queue-|18F00000000|");
//! assert_eq!(names::id_name("a/b|c"), "queue-|a_b_c|");
//! ```

use std::cmp::Ordering;

/// The name every distributed-queue node starts with (Curator's `QUEUE_ITEM_NAME`).
pub const ITEM_PREFIX: &str = "queue-";
/// The simple queue's node name prefix (ZooKeeper's own queue recipe).
pub const SIMPLE_PREFIX: &str = "qn-";
/// The separator of the delay and id queues' names.
pub const SEPARATOR: char = '|';

/// Which queue a node belongs to: decides names, order and what a requeue keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// `queue-<seq>`, FIFO by name.
    Plain,
    /// `queue-<priority><seq>`, by name (lower priority first).
    Priority,
    /// `queue-|<due>|<seq>`, by due time; invisible until due.
    Delay,
    /// `queue-|<id>|<seq>`, by name without the id.
    Id,
}

impl Kind {
    /// Sorts item names as Curator's queue of this kind does (ties broken by name, so the order is
    /// the same for every consumer).
    pub(crate) fn sort(self, names: &mut [String]) {
        match self {
            Kind::Plain | Kind::Priority => names.sort_unstable(),
            Kind::Delay => names.sort_by(|a, b| parse_due(a).cmp(&parse_due(b)).then_with(|| a.cmp(b))),
            Kind::Id => names.sort_by(|a, b| compare_ids(a, b)),
        }
    }

    /// Whether consumers must always take from the head (priority and delay), rather than spread
    /// over the listing when they compete.
    pub(crate) fn head_only(self) -> bool {
        matches!(self, Kind::Priority | Kind::Delay)
    }

    /// The name (without sequence) a requeued copy of `item` gets: Curator's, except that the
    /// priority and due time are kept (Curator's priority and delay queues requeue as plain
    /// `queue-`, losing them); the id queue keeps the id, as Curator does.
    pub(crate) fn requeue_name(self, item: &str) -> String {
        match self {
            Kind::Plain => ITEM_PREFIX.to_owned(),
            Kind::Priority => match item.get(..ITEM_PREFIX.len() + 9) {
                Some(head) if parse_priority(item).is_some() => head.to_owned(),
                _ => ITEM_PREFIX.to_owned(),
            },
            Kind::Delay => match item.rfind(SEPARATOR) {
                Some(index) if parse_due(item) > 0 => item[..=index].to_owned(),
                _ => ITEM_PREFIX.to_owned(),
            },
            Kind::Id => match parse_id(item) {
                Some((id, _)) => format!("{ITEM_PREFIX}{SEPARATOR}{id}{SEPARATOR}"),
                None => ITEM_PREFIX.to_owned(),
            },
        }
    }
}

/// The name (without sequence) of an item with `priority`, as Curator's
/// `DistributedPriorityQueue.priorityToString`: lower priorities sort first.
pub fn priority_name(priority: i32) -> String {
    let sign = if priority >= 0 { '1' } else { '0' };
    format!("{ITEM_PREFIX}{sign}{:08X}", priority as u32)
}

/// The priority in a priority queue's node name, if it has one.
///
/// ```
/// use zk_recipes_queue::names::parse_priority;
/// assert_eq!(parse_priority("queue-1000000070000000003"), Some(7));
/// assert_eq!(parse_priority("queue-0FFFFFFFE0000000003"), Some(-2));
/// assert_eq!(parse_priority("queue-0000000003"), None);
/// ```
pub fn parse_priority(name: &str) -> Option<i32> {
    let encoded = name.strip_prefix(ITEM_PREFIX)?.get(..9)?;
    let (sign, hex) = encoded.split_at(1);
    if !hex.bytes().all(|byte| byte.is_ascii_hexdigit()) {
        return None;
    }
    let priority = u32::from_str_radix(hex, 16).ok()? as i32;
    match (sign, priority >= 0) {
        ("1", true) | ("0", false) => Some(priority),
        _ => None,
    }
}

/// The name (without sequence) of an item due at `due_epoch_ms`, as Curator's
/// `DistributedDelayQueue.epochToString`.
pub fn delay_name(due_epoch_ms: u64) -> String {
    format!("{ITEM_PREFIX}{SEPARATOR}{due_epoch_ms:08X}{SEPARATOR}")
}

/// The due time (epoch milliseconds) in a delay queue's node name; 0 (due at once) when there is
/// none, as Curator's `getEpoch`.
///
/// ```
/// use zk_recipes_queue::names::parse_due;
/// assert_eq!(parse_due("queue-|18F00000000|0000000001"), 0x18F_0000_0000);
/// assert_eq!(parse_due("queue-0000000001"), 0);
/// ```
pub fn parse_due(name: &str) -> i64 {
    let Some(second) = name.rfind(SEPARATOR) else { return 0 };
    let Some(first) = name[..second].rfind(SEPARATOR) else { return 0 };
    if first == 0 || second <= first + 1 {
        return 0;
    }
    i64::from_str_radix(&name[first + 1..second], 16).unwrap_or(0)
}

/// An id as Curator's id queue stores it: `/` and `|` replaced by `_`.
pub fn fix_id(id: &str) -> String {
    id.replace(['/', SEPARATOR], "_")
}

/// The name (without sequence) of an item with `id` in an id queue.
pub fn id_name(id: &str) -> String {
    format!("{ITEM_PREFIX}{SEPARATOR}{}{SEPARATOR}", fix_id(id))
}

/// The id in an id queue's node name and the name without it (`queue-<seq>`), as Curator's
/// `parseId`; `None` for a name without two separators.
///
/// ```
/// use zk_recipes_queue::names::parse_id;
/// assert_eq!(parse_id("queue-|job-7|0000000003"), Some(("job-7", "queue-0000000003".to_string())));
/// assert_eq!(parse_id("queue-0000000003"), None);
/// ```
pub fn parse_id(name: &str) -> Option<(&str, String)> {
    let first = name.find(SEPARATOR)?;
    let second = first + 1 + name[first + 1..].find(SEPARATOR)?;
    Some((&name[first + 1..second], format!("{}{}", &name[..first], &name[second + 1..])))
}

fn compare_ids(a: &str, b: &str) -> Ordering {
    let cleaned = |name: &str| parse_id(name).map_or_else(|| name.to_owned(), |(_, cleaned)| cleaned);
    cleaned(a).cmp(&cleaned(b)).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sorted(kind: Kind, names: &[&str]) -> Vec<String> {
        let mut names: Vec<String> = names.iter().map(|name| name.to_string()).collect();
        kind.sort(&mut names);
        names
    }

    #[test]
    fn priorities_encode_as_curator() {
        assert_eq!(priority_name(0), "queue-100000000");
        assert_eq!(priority_name(1), "queue-100000001");
        assert_eq!(priority_name(255), "queue-1000000FF");
        assert_eq!(priority_name(i32::MAX), "queue-17FFFFFFF");
        assert_eq!(priority_name(-1), "queue-0FFFFFFFF");
        assert_eq!(priority_name(i32::MIN), "queue-080000000");
        for priority in [0, 1, -1, 42, -42, i32::MAX, i32::MIN] {
            assert_eq!(parse_priority(&format!("{}0000000001", priority_name(priority))), Some(priority));
        }
        let order = sorted(
            Kind::Priority,
            &[
                "queue-1000000050000000001",
                "queue-0FFFFFFFF0000000002",
                "queue-1000000000000000003",
                "queue-080000000000000004",
            ],
        );
        assert_eq!(
            order,
            [
                "queue-080000000000000004",
                "queue-0FFFFFFFF0000000002",
                "queue-1000000000000000003",
                "queue-1000000050000000001"
            ]
        );
    }

    #[test]
    fn delays_encode_as_curator() {
        assert_eq!(delay_name(1), "queue-|00000001|");
        assert_eq!(delay_name(1_700_000_000_000), "queue-|18BCFE56800|");
        assert_eq!(parse_due("queue-|18BCFE56800|0000000007"), 1_700_000_000_000);
        assert_eq!(parse_due("queue-|zz|0000000007"), 0);
        assert_eq!(parse_due("queue-||0000000007"), 0);
        assert_eq!(parse_due("|5|0000000007"), 0, "Curator needs the first separator after index 0");
        let order = sorted(
            Kind::Delay,
            &["queue-|0000000A|0000000001", "queue-|00000002|0000000003", "queue-|00000002|0000000002"],
        );
        assert_eq!(
            order,
            ["queue-|00000002|0000000002", "queue-|00000002|0000000003", "queue-|0000000A|0000000001"]
        );
    }

    #[test]
    fn ids_encode_as_curator() {
        assert_eq!(id_name("plain"), "queue-|plain|");
        assert_eq!(fix_id("a/b|c"), "a_b_c");
        let order = sorted(Kind::Id, &["queue-|zzz|0000000001", "queue-|aaa|0000000002", "queue-0000000000"]);
        assert_eq!(order, ["queue-0000000000", "queue-|zzz|0000000001", "queue-|aaa|0000000002"]);
    }

    #[test]
    fn requeues_keep_what_matters() {
        assert_eq!(Kind::Plain.requeue_name("queue-0000000004"), "queue-");
        assert_eq!(Kind::Priority.requeue_name("queue-1000000050000000001"), "queue-100000005");
        assert_eq!(Kind::Priority.requeue_name("queue-0000000001"), "queue-");
        assert_eq!(Kind::Delay.requeue_name("queue-|18BCFE56800|0000000007"), "queue-|18BCFE56800|");
        assert_eq!(Kind::Delay.requeue_name("queue-0000000007"), "queue-");
        assert_eq!(Kind::Id.requeue_name("queue-|job_1|0000000009"), "queue-|job_1|");
    }
}
