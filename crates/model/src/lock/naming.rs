//! The three layouts as the model uses them: the markers a create draws (as the framework's
//! `NodeMarker` renders them, made deterministic), the names the server gives, and the library's
//! drivers that sort and decide.

use zk_recipes_lock_internals::{
    Decision, KazooDriver, LockDriver, OurNodeMissing, StandardDriver, ZooKeeperRecipeDriver,
};

use super::state::{Call, SessionRef};

/// A lock layout.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Layout {
    /// Curator's `_c_<uuid>-lock-<seq>`.
    Curator,
    /// kazoo's `<uuid hex>__lock__<seq>`.
    Kazoo,
    /// ZooKeeper's recipe's `x-<session id>-<seq>`: the marker names the session.
    ZooKeeperRecipe,
}

impl Layout {
    /// Whether the marker names the session rather than the call.
    pub fn session_marker(self) -> bool {
        matches!(self, Layout::ZooKeeperRecipe)
    }

    /// The marker a try of `call` draws on `session`, its `draw`-th: a fresh UUID per try on a
    /// new session for Curator and kazoo (stand-ins of their width), the session's id for the
    /// recipe.
    pub fn prefix(self, call: Call, draw: u8, session: SessionRef) -> String {
        match self {
            Layout::Curator => format!("_c_{call:08x}-{draw:04x}-4000-8000-000000000000-"),
            Layout::Kazoo => format!("{call:016x}{draw:016x}"),
            Layout::ZooKeeperRecipe => format!("x-{}-", session.id()),
        }
    }

    /// The name after the marker, before the sequence.
    pub fn lock_name(self) -> &'static str {
        match self {
            Layout::Curator => "lock-",
            Layout::Kazoo => zk_recipes_lock_internals::KAZOO_LOCK_NAME,
            Layout::ZooKeeperRecipe => "",
        }
    }

    /// The name the server gives a sequential create of `prefix` with the parent's counter at
    /// `sequence` (Java's `%010d`).
    pub fn node_name(self, prefix: &str, sequence: i32) -> String {
        format!("{prefix}{}{sequence:010}", self.lock_name())
    }

    /// The library's driver's decision over the parent's `children` (in the server's order).
    pub fn decide(
        self,
        children: Vec<String>,
        our_node: &str,
        max_leases: u32,
    ) -> Result<Decision, OurNodeMissing> {
        match self {
            Layout::Curator => decide_with(&StandardDriver::new("lock-"), children, our_node, max_leases),
            Layout::Kazoo => decide_with(&KazooDriver::lock(), children, our_node, max_leases),
            Layout::ZooKeeperRecipe => decide_with(&ZooKeeperRecipeDriver, children, our_node, max_leases),
        }
    }
}

fn decide_with(
    driver: &impl LockDriver,
    children: Vec<String>,
    our_node: &str,
    max_leases: u32,
) -> Result<Decision, OurNodeMissing> {
    let sorted = driver.sort_children(children);
    driver.gets_the_lock(&sorted, our_node, max_leases)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_as_the_drivers_expect() {
        let session = SessionRef { slot: 1, incarnation: 0 };
        for layout in [Layout::Curator, Layout::Kazoo, Layout::ZooKeeperRecipe] {
            let first = layout.node_name(&layout.prefix(0, 0, session), 1);
            let second = layout.node_name(&layout.prefix(1, 0, session), 2);
            let decision = layout.decide(vec![second.clone(), first.clone()], &second, 1).unwrap();
            assert_eq!(decision.path_to_watch.as_deref(), Some(first.as_str()), "{layout:?}");
            assert!(layout.decide(vec![second, first.clone()], &first, 1).unwrap().holds, "{layout:?}");
        }
    }
}
