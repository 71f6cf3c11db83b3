//! Who holds, whom to watch: the pure part of every lock, with Curator's rules.

use std::fmt::Debug;

use zk_recipes_framework::NodeMarker;

/// What a driver decided for one listing of the lock directory.
///
/// ```
/// use zk_recipes_lock_internals::{Decision, LockDriver, StandardDriver};
///
/// let driver = StandardDriver::new("lock-");
/// let children = driver.sort_children(vec![
///     "_c_c-lock-0000000003".to_string(),
///     "_c_a-lock-0000000001".to_string(),
///     "_c_b-lock-0000000002".to_string(),
/// ]);
/// // Two leases: the first two hold, the third watches the first.
/// let decision = driver.gets_the_lock(&children, "_c_c-lock-0000000003", 2).unwrap();
/// assert_eq!(
///     decision,
///     Decision {
///         holds: false,
///         path_to_watch: Some("_c_a-lock-0000000001".to_string()),
///         holds_once_watched_node_goes: true,
///     }
/// );
/// assert!(driver.gets_the_lock(&children, "_c_b-lock-0000000002", 2).unwrap().holds);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Decision {
    /// Whether our node holds a lease.
    pub holds: bool,
    /// If not, the one node (a name in the lock directory) to watch: when it goes, decide again.
    pub path_to_watch: Option<String>,
    /// Whether the deletion of `path_to_watch` alone proves we hold, without listing again.
    pub holds_once_watched_node_goes: bool,
}

/// What the acquire loop does after a [`Decision`]: the loop's own rule, without I/O
/// ([`Decision::next_step`], [`Decision::after_watch`]), which the acquire loop drives and the
/// repository's models check.
///
/// ```
/// use zk_recipes_lock_internals::{Decision, NextStep};
///
/// let waiting = Decision {
///     holds: false,
///     path_to_watch: Some("_c_a-lock-0000000001".to_string()),
///     holds_once_watched_node_goes: true,
/// };
/// assert_eq!(waiting.next_step(true), NextStep::Watch("_c_a-lock-0000000001".to_string()));
/// assert_eq!(waiting.next_step(false), NextStep::GiveBack);
/// assert_eq!(waiting.after_watch(true), NextStep::Hold);
/// assert_eq!(waiting.after_watch(false), NextStep::ListAgain);
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum NextStep {
    /// Our node holds a lease.
    Hold,
    /// We do not hold and will not wait (a try-once acquire): delete our node.
    GiveBack,
    /// List the contenders and decide again.
    ListAgain,
    /// Watch this node (a name in the lock directory) and wait until it goes or changes.
    Watch(String),
}

impl Decision {
    /// What to do after this decision: hold, give the node back (when we do not `wait`), or
    /// watch the one node the driver named (list again if it named none).
    pub fn next_step(&self, wait: bool) -> NextStep {
        if self.holds {
            return NextStep::Hold;
        }
        if !wait {
            return NextStep::GiveBack;
        }
        match &self.path_to_watch {
            Some(watched) => NextStep::Watch(watched.clone()),
            None => NextStep::ListAgain,
        }
    }

    /// What to do once the watched node `deleted` (or changed): hold without listing again when
    /// its going alone proves it ([`holds_once_watched_node_goes`](Self::holds_once_watched_node_goes)),
    /// else list again.
    pub fn after_watch(&self, deleted: bool) -> NextStep {
        if deleted && self.holds_once_watched_node_goes {
            NextStep::Hold
        } else {
            NextStep::ListAgain
        }
    }
}

/// Our node is not among the children: it was deleted (our session was lost, or someone deleted
/// it).
///
/// ```
/// use zk_recipes_lock_internals::{LockDriver, OurNodeMissing, StandardDriver};
///
/// let driver = StandardDriver::new("lock-");
/// let children = vec!["_c_a-lock-0000000001".to_string()];
/// let err = driver.gets_the_lock(&children, "_c_b-lock-0000000002", 1).unwrap_err();
/// assert_eq!(err, OurNodeMissing { our_node: "_c_b-lock-0000000002".to_string() });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("our node {our_node:?} is not among the lock's children")]
pub struct OurNodeMissing {
    /// The name we looked for.
    pub our_node: String,
}

/// Decides from the sorted contenders whether we hold, and which single node to watch otherwise.
///
/// The standard rule is [`StandardDriver`]; the read-write lock plugs in its own. Every method but
/// [`lock_name`](Self::lock_name) has Curator's default.
///
/// ```
/// use zk_recipes_lock_internals::{sort_children_by, LockDriver};
///
/// /// Contenders `job-<n>` queued by the number after the name, as a number.
/// #[derive(Debug)]
/// struct NumericDriver;
///
/// impl LockDriver for NumericDriver {
///     fn lock_name(&self) -> &str {
///         "job-"
///     }
///
///     fn sort_children(&self, children: Vec<String>) -> Vec<String> {
///         let mut sorted = sort_children_by(children, |child| self.sort_key(child));
///         sorted.sort_by_key(|child| self.sort_key(child).parse::<u64>().unwrap_or(u64::MAX));
///         sorted
///     }
/// }
///
/// let children = NumericDriver.sort_children(vec!["job-10".into(), "job-9".into()]);
/// assert_eq!(children, ["job-9", "job-10"]);
/// assert!(NumericDriver.gets_the_lock(&children, "job-9", 1).unwrap().holds);
/// ```
pub trait LockDriver: Debug + Send + Sync + 'static {
    /// The name every contender node carries (`lock-`, `__READ__`, ...), after the protected prefix.
    fn lock_name(&self) -> &str;

    /// How our node's name starts (before [`lock_name`](Self::lock_name)), so that we find it again
    /// after a connection loss: Curator's `_c_<uuid>-` unless the layout says otherwise.
    fn marker(&self) -> NodeMarker {
        NodeMarker::Protected
    }

    /// The text a contender node sorts by in [`sort_children`](Self::sort_children)'s default
    /// order: by default the text after the last occurrence of [`lock_name`](Self::lock_name)
    /// (the sequence), or the whole name without it (Curator's `fixForSorting`).
    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        sort_key(child, self.lock_name())
    }

    /// The lock directory's children in the order this layout's contenders queue in: by default
    /// by [`sort_key`](Self::sort_key) as text, stably ([`sort_children_by`]), as Curator sorts.
    /// A layout whose clients order otherwise (by number, say) overrides it.
    fn sort_children(&self, children: Vec<String>) -> Vec<String> {
        sort_children_by(children, |child| self.sort_key(child))
    }

    /// `children` are sorted by [`sort_children`](Self::sort_children); `our_node` is our node's name. By
    /// default Curator's standard rule (see [`StandardDriver`]), whatever the node names.
    ///
    /// # Errors
    /// [`OurNodeMissing`] if `our_node` is not among `children`.
    fn gets_the_lock(
        &self,
        children: &[String],
        our_node: &str,
        max_leases: u32,
    ) -> Result<Decision, OurNodeMissing> {
        standard_rule(children, our_node, max_leases)
    }
}

/// Curator's standard rule (`StandardLockInternalsDriver`): with our node at index `i` of the
/// sorted children, we hold iff `i < max_leases`; otherwise we watch `children[i - max_leases]`.
///
/// ```
/// use zk_recipes_lock_internals::{LockDriver, StandardDriver};
///
/// let driver = StandardDriver::new("lock-");
/// let children = vec!["_c_a-lock-0000000001".to_string(), "_c_b-lock-0000000002".to_string()];
/// let decision = driver.gets_the_lock(&children, "_c_b-lock-0000000002", 1).unwrap();
/// assert!(!decision.holds);
/// assert_eq!(decision.path_to_watch.as_deref(), Some("_c_a-lock-0000000001"));
/// ```
#[derive(Debug, Clone)]
pub struct StandardDriver {
    lock_name: String,
}

impl StandardDriver {
    /// A driver for nodes named `<protected prefix><lock_name><sequence>`.
    pub fn new(lock_name: impl Into<String>) -> Self {
        Self { lock_name: lock_name.into() }
    }
}

impl LockDriver for StandardDriver {
    fn lock_name(&self) -> &str {
        &self.lock_name
    }
}

/// The standard rule over sorted `children`, whatever the node names: with our node at index `i`,
/// we hold iff `i < max_leases`; otherwise we watch `children[i - max_leases]`.
///
/// # Errors
/// [`OurNodeMissing`] if `our_node` is not among `children`.
pub(crate) fn standard_rule(
    children: &[String],
    our_node: &str,
    max_leases: u32,
) -> Result<Decision, OurNodeMissing> {
    let our_index = children
        .iter()
        .position(|child| child == our_node)
        .ok_or_else(|| OurNodeMissing { our_node: our_node.to_owned() })?;
    let max_leases = max_leases as usize;
    if our_index < max_leases {
        return Ok(Decision { holds: true, path_to_watch: None, holds_once_watched_node_goes: false });
    }
    let watch_index = our_index - max_leases;
    // Sequence numbers only grow, so nothing new sorts before us: if the node we watch is the
    // first, its deletion moves us to index max_leases - 1.
    Ok(Decision {
        holds: false,
        path_to_watch: Some(children[watch_index].clone()),
        holds_once_watched_node_goes: watch_index == 0,
    })
}

/// Sorts lock children as Curator does: by the text after the *last* occurrence of `lock_name`
/// (the sequence), compared as text; a child without `lock_name` sorts by its whole name. The sort
/// is stable over the server's order.
///
/// Text order equals numeric order for the ten-digit non-negative sequences ZooKeeper writes. After
/// 2^31 creates and deletes under one parent the counter wraps to -2147483648 and the sequences
/// turn negative, ten or eleven characters (`-000000001`, `-2147483648`): the key is all the text
/// after the lock name, whatever its width. As text `-` sorts first, and a later eleven-character
/// negative before an earlier one (2147483646, 2147483647, -2147483648, -2147483647, in creation
/// order, sort as -2147483647, -2147483648, 2147483646, 2147483647): not creation order, but
/// Curator's (`standardFixForSorting`, then `String.compareTo`), so both agree on the order. A
/// contender created just after the wrap jumps ahead of the holder in Curator too; an order of our
/// own would add to that (a Java and a Rust contender each waiting for the other).
///
/// ```
/// use zk_recipes_lock_internals::sort_children;
///
/// let sorted = sort_children(
///     vec!["_c_b-lock-0000000002".into(), "_c_a-lock-0000000001".into()],
///     "lock-",
/// );
/// assert_eq!(sorted[0], "_c_a-lock-0000000001");
/// ```
pub fn sort_children(children: Vec<String>, lock_name: &str) -> Vec<String> {
    sort_children_by(children, |child| sort_key(child, lock_name))
}

/// Sorts children by `key`, stably (Curator sorts with a stable sort over the server's order).
///
/// `key` runs once per child, not at every comparison: a key may search the name (the standard
/// one looks for the last `lock_name` in it), and a lock with a hundred contenders would otherwise
/// search names some two thousand times per listing.
///
/// ```
/// use zk_recipes_lock_internals::sort_children_by;
///
/// let sorted = sort_children_by(vec!["b-2".into(), "a-3".into(), "c-1".into()], |child| &child[2..]);
/// assert_eq!(sorted, ["c-1", "b-2", "a-3"]);
/// ```
pub fn sort_children_by(mut children: Vec<String>, key: impl Fn(&str) -> &str) -> Vec<String> {
    if children.len() < 2 {
        return children;
    }
    // Stable: children with equal keys keep the server's order.
    let mut keyed: Vec<(&str, usize)> =
        children.iter().enumerate().map(|(index, child)| (key(child), index)).collect();
    keyed.sort_by(|left, right| left.0.cmp(right.0));
    let order: Vec<usize> = keyed.into_iter().map(|(_, index)| index).collect();
    order.into_iter().map(|index| std::mem::take(&mut children[index])).collect()
}

/// The text after the last occurrence of `lock_name`, or the whole name without it.
///
/// ```
/// use zk_recipes_lock_internals::sort_key;
///
/// assert_eq!(sort_key("_c_0f3e-lock-lock-0000000007", "lock-"), "0000000007");
/// assert_eq!(sort_key("no-marker", "lock-"), "no-marker");
/// ```
pub fn sort_key<'a>(child: &'a str, lock_name: &str) -> &'a str {
    match last_occurrence(child, lock_name) {
        Some(index) => &child[index + lock_name.len()..],
        None => child,
    }
}

/// Where the last occurrence of `needle` starts in `haystack` (as `str::rfind`): a plain scan
/// from the end. Lock names are a few bytes and sit near the end of a contender's name, where
/// `rfind`'s searcher spends more on its set-up than this spends on the whole scan.
fn last_occurrence(haystack: &str, needle: &str) -> Option<usize> {
    let (haystack, needle) = (haystack.as_bytes(), needle.as_bytes());
    let last_start = haystack.len().checked_sub(needle.len())?;
    let Some(&first) = needle.first() else {
        return Some(haystack.len());
    };
    // The first byte alone rules out most places; a match of a valid UTF-8 needle starts on a
    // character boundary of the haystack.
    (0..=last_start)
        .rev()
        .find(|&start| haystack[start] == first && &haystack[start..start + needle.len()] == needle)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Owned names, for the driver tests of every layout.
    pub(crate) fn names(names: &[&str]) -> Vec<String> {
        names.iter().map(|name| name.to_string()).collect()
    }

    #[test]
    fn sorts_by_the_text_after_the_last_lock_name_stably() {
        let sorted = sort_children(
            names(&[
                "_c_zz-lock-0000000003",
                "_c_aa-lock-0000000001",
                "no-marker",
                "_c_lock-lock-0000000002",
                "_c_bb-lock-0000000001",
            ]),
            "lock-",
        );
        assert_eq!(
            sorted,
            names(&[
                "_c_aa-lock-0000000001",
                "_c_bb-lock-0000000001",
                "_c_lock-lock-0000000002",
                "_c_zz-lock-0000000003",
                "no-marker",
            ])
        );
    }

    #[test]
    fn each_key_is_found_once_per_listing() {
        let children: Vec<String> = (0..128)
            .map(|index| index * 37 % 128)
            .map(|sequence| format!("_c_{sequence}-lock-{sequence:010}"))
            .collect();
        let calls = std::cell::Cell::new(0);
        let sorted = sort_children_by(children, |child| {
            calls.set(calls.get() + 1);
            sort_key(child, "lock-")
        });
        assert_eq!(calls.get(), 128);
        let expected: Vec<String> =
            (0..128).map(|sequence| format!("_c_{sequence}-lock-{sequence:010}")).collect();
        assert_eq!(sorted, expected);
    }

    #[test]
    fn the_last_occurrence_is_found_as_rfind_finds_it() {
        for haystack in [
            "",
            "lock-",
            "_c_a-lock-0000000001",
            "lock-lock-",
            "x-lock-lock-1",
            "no-marker",
            "é-lock-ü",
            "lo",
        ] {
            for needle in ["", "lock-", "-", "__READ__", "lock-lock-", "ü", "é-lock-ü-longer"] {
                assert_eq!(
                    last_occurrence(haystack, needle),
                    haystack.rfind(needle),
                    "{needle:?} in {haystack:?}"
                );
            }
        }
    }

    #[test]
    fn negative_sequences_sort_first_as_in_curator() {
        let sorted = sort_children(names(&["x-lock-0000000001", "y-lock--000000001"]), "lock-");
        assert_eq!(sorted, names(&["y-lock--000000001", "x-lock-0000000001"]));
    }

    /// Nodes created as 2147483646, 2147483647, -2147483648, -2147483647: Curator's
    /// `standardFixForSorting` keeps all the text after the lock name (eleven characters for
    /// -2147483648), and `String.compareTo` orders it; so do we.
    #[test]
    fn curator_order_across_the_wrap_keeps_the_whole_sequence() {
        let created: Vec<String> = ["2147483646", "2147483647", "-2147483648", "-2147483647"]
            .iter()
            .map(|sequence| format!("_c_{}-lock-{sequence}", sequence.len()))
            .collect();
        assert_eq!(sort_key(&created[2], "lock-"), "-2147483648");
        let driver = StandardDriver::new("lock-");
        let sorted = driver.sort_children(created.clone());
        let order = [3, 2, 0, 1].map(|index| created[index].clone());
        assert_eq!(sorted, order);
        assert!(driver.gets_the_lock(&sorted, &created[3], 1).unwrap().holds);
        let waiter = driver.gets_the_lock(&sorted, &created[2], 1).unwrap();
        assert_eq!(waiter.path_to_watch.as_deref(), Some(created[3].as_str()));
        // A ten-character negative sorts as text too: before the eleven-character ones.
        let sorted = sort_children(names(&["a-lock--2147483648", "b-lock--000000001"]), "lock-");
        assert_eq!(sorted, names(&["b-lock--000000001", "a-lock--2147483648"]));
    }

    #[test]
    fn standard_rule_holds_within_max_leases_and_watches_one_predecessor() {
        let driver = StandardDriver::new("lock-");
        let children = names(&["a-lock-01", "b-lock-02", "c-lock-03", "d-lock-04"]);
        for (our_node, max_leases, holds, watch, shortcut) in [
            ("a-lock-01", 1, true, None, false),
            ("b-lock-02", 1, false, Some("a-lock-01"), true),
            ("c-lock-03", 1, false, Some("b-lock-02"), false),
            ("d-lock-04", 1, false, Some("c-lock-03"), false),
            ("b-lock-02", 2, true, None, false),
            ("c-lock-03", 2, false, Some("a-lock-01"), true),
            ("d-lock-04", 2, false, Some("b-lock-02"), false),
            ("d-lock-04", 4, true, None, false),
        ] {
            let decision = driver.gets_the_lock(&children, our_node, max_leases).expect("present");
            assert_eq!(decision.holds, holds, "{our_node} with {max_leases}");
            assert_eq!(decision.path_to_watch.as_deref(), watch, "{our_node} with {max_leases}");
            assert_eq!(decision.holds_once_watched_node_goes, shortcut, "{our_node} with {max_leases}");
        }
        assert_eq!(
            driver.gets_the_lock(&children, "z-lock-09", 1),
            Err(OurNodeMissing { our_node: "z-lock-09".into() })
        );
    }
}
