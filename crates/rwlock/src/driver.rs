//! The read-write lock's two rules, plugged into the shared lock driver.

use zk_recipes_lock_internals::{sort_key, Decision, LockDriver, OurNodeMissing, StandardDriver};

/// Readers' node name.
pub const READ_LOCK_NAME: &str = "__READ__";
/// Writers' node name.
pub const WRITE_LOCK_NAME: &str = "__WRIT__";

/// Both kinds of node live in one directory and sort together by their sequence (Curator's
/// `SortingLockInternalsDriver`: strip after `__READ__`, then after `__WRIT__`).
fn read_write_sort_key(child: &str) -> &str {
    sort_key(sort_key(child, READ_LOCK_NAME), WRITE_LOCK_NAME)
}

/// Writers: the standard rule (hold when first), over readers and writers alike. Always lists again
/// after a wake: a downgraded read node reuses an old sequence, so a deletion before us does not
/// prove we are first.
///
/// ```
/// use zk_recipes_lock_internals::LockDriver;
/// use zk_recipes_rwlock::WriteDriver;
///
/// let driver = WriteDriver::default();
/// let children = driver.sort_children(vec![
///     "_c_b-__WRIT__0000000002".to_string(),
///     "_c_a-__READ__0000000001".to_string(),
/// ]);
/// let decision = driver.gets_the_lock(&children, "_c_b-__WRIT__0000000002", 1).unwrap();
/// assert!(!decision.holds, "a reader is before us");
/// assert_eq!(decision.path_to_watch.as_deref(), Some("_c_a-__READ__0000000001"));
/// assert!(!decision.holds_once_watched_node_goes, "always lists again");
/// ```
#[derive(Debug, Clone)]
pub struct WriteDriver {
    standard: StandardDriver,
}

impl Default for WriteDriver {
    fn default() -> Self {
        Self { standard: StandardDriver::new(WRITE_LOCK_NAME) }
    }
}

impl LockDriver for WriteDriver {
    fn lock_name(&self) -> &str {
        WRITE_LOCK_NAME
    }

    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        read_write_sort_key(child)
    }

    fn gets_the_lock(
        &self,
        children: &[String],
        our_node: &str,
        max_leases: u32,
    ) -> Result<Decision, OurNodeMissing> {
        let decision = self.standard.gets_the_lock(children, our_node, max_leases)?;
        Ok(Decision { holds_once_watched_node_goes: false, ..decision })
    }
}

/// Readers: hold iff no writer sorts before us; otherwise watch the first writer before us (all
/// readers behind one writer wake together, by design). A later reader never overtakes a waiting
/// writer, since the writer sorts before it.
///
/// ```
/// use zk_recipes_lock_internals::LockDriver;
/// use zk_recipes_rwlock::ReadDriver;
///
/// let children = ReadDriver.sort_children(vec![
///     "_c_c-__READ__0000000003".to_string(),
///     "_c_a-__READ__0000000001".to_string(),
///     "_c_b-__WRIT__0000000002".to_string(),
/// ]);
/// assert!(ReadDriver.gets_the_lock(&children, "_c_a-__READ__0000000001", u32::MAX).unwrap().holds);
/// let behind_writer = ReadDriver.gets_the_lock(&children, "_c_c-__READ__0000000003", u32::MAX).unwrap();
/// assert_eq!(behind_writer.path_to_watch.as_deref(), Some("_c_b-__WRIT__0000000002"));
/// ```
#[derive(Debug, Clone, Default)]
pub struct ReadDriver;

impl LockDriver for ReadDriver {
    fn lock_name(&self) -> &str {
        READ_LOCK_NAME
    }

    fn sort_key<'a>(&self, child: &'a str) -> &'a str {
        read_write_sort_key(child)
    }

    fn gets_the_lock(
        &self,
        children: &[String],
        our_node: &str,
        _max_leases: u32,
    ) -> Result<Decision, OurNodeMissing> {
        let mut first_writer = None;
        for child in children {
            if child == our_node {
                return Ok(match first_writer {
                    None => {
                        Decision { holds: true, path_to_watch: None, holds_once_watched_node_goes: false }
                    }
                    Some(writer) => Decision {
                        holds: false,
                        path_to_watch: Some(writer),
                        holds_once_watched_node_goes: false,
                    },
                });
            }
            if first_writer.is_none() && child.contains(WRITE_LOCK_NAME) {
                first_writer = Some(child.clone());
            }
        }
        Err(OurNodeMissing { our_node: our_node.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use zk_recipes_lock_internals::sort_children_by;

    fn sorted(names: &[&str]) -> Vec<String> {
        sort_children_by(names.iter().map(|name| name.to_string()).collect(), read_write_sort_key)
    }

    #[test]
    fn readers_and_writers_sort_together_by_sequence() {
        let children =
            sorted(&["_c_c-__READ__0000000003", "_c_a-__WRIT__0000000001", "_c_b-__READ__0000000002"]);
        assert_eq!(
            children,
            ["_c_a-__WRIT__0000000001", "_c_b-__READ__0000000002", "_c_c-__READ__0000000003"]
        );
    }

    #[test]
    fn a_reader_holds_unless_a_writer_is_before_it_and_then_watches_the_first_writer() {
        let children = sorted(&[
            "r1-__READ__0000000001",
            "w1-__WRIT__0000000002",
            "r2-__READ__0000000003",
            "w2-__WRIT__0000000004",
            "r3-__READ__0000000005",
        ]);
        let read = ReadDriver;
        let holds = |node: &str| read.gets_the_lock(&children, node, u32::MAX).expect("present");
        assert!(holds("r1-__READ__0000000001").holds);
        let r2 = holds("r2-__READ__0000000003");
        assert!(!r2.holds);
        assert_eq!(r2.path_to_watch.as_deref(), Some("w1-__WRIT__0000000002"));
        let r3 = holds("r3-__READ__0000000005");
        assert_eq!(
            r3.path_to_watch.as_deref(),
            Some("w1-__WRIT__0000000002"),
            "the first writer, not the nearest"
        );
        assert!(read.gets_the_lock(&children, "gone-__READ__0000000009", u32::MAX).is_err());
    }

    #[test]
    fn a_writer_waits_for_everything_before_it_and_never_skips_the_listing() {
        let children = sorted(&["r1-__READ__0000000001", "w1-__WRIT__0000000002"]);
        let write = WriteDriver::default();
        let decision = write.gets_the_lock(&children, "w1-__WRIT__0000000002", 1).expect("present");
        assert!(!decision.holds);
        assert_eq!(decision.path_to_watch.as_deref(), Some("r1-__READ__0000000001"));
        assert!(!decision.holds_once_watched_node_goes, "a downgraded reader reuses an old sequence");
    }

    #[test]
    fn a_downgraded_read_node_sorts_where_its_writer_stood() {
        // Curator 5.5+: the read node reuses the writer's sequence; a queued writer stays behind it.
        let children = sorted(&["w2-__WRIT__0000000006", "r-__READ__0000000005"]);
        let write = WriteDriver::default();
        let decision = write.gets_the_lock(&children, "w2-__WRIT__0000000006", 1).expect("present");
        assert!(!decision.holds);
        assert_eq!(decision.path_to_watch.as_deref(), Some("r-__READ__0000000005"));
    }
}
