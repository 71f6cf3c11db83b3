//! What the cache holds: nodes by full path, in path order, and the events a change makes.

use crate::event::CacheEvent;
use crate::node::CachedNode;
use std::collections::BTreeMap;
use std::ops::Bound;

/// Nodes by full path. In a `BTreeMap` a node's descendants are contiguous: every `/a/...` sorts
/// from `/a/` to before `/a0` (`0` follows `/`). Siblings such as `/a-b` may sort between `/a` and
/// `/a/`, since `-` and `.` come before `/`.
#[derive(Debug, Default)]
pub(crate) struct Store {
    nodes: BTreeMap<String, CachedNode>,
}

impl Store {
    pub(crate) fn len(&self) -> usize {
        self.nodes.len()
    }

    pub(crate) fn get(&self, path: &str) -> Option<&CachedNode> {
        self.nodes.get(path)
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&String, &CachedNode)> {
        self.nodes.iter()
    }

    /// The names of `path`'s cached children, in order. Each child's own subtree is skipped over
    /// with one seek, so this costs at most two lookups per child, not one per descendant.
    pub(crate) fn children(&self, path: &str) -> Vec<String> {
        let prefix = child_prefix(path);
        let mut names = Vec::new();
        let mut from = Bound::Excluded(prefix.clone());
        while let Some((child, _)) = self.nodes.range::<String, _>((from, Bound::Unbounded)).next() {
            let Some(name) = child.strip_prefix(&prefix) else { break };
            if let Some(slash) = name.find('/') {
                // A descendant whose parent is not cached: skip to after that name's subtree.
                from = Bound::Included(after_subtree(&child[..prefix.len() + slash]));
                continue;
            }
            names.push(name.to_owned());
            // Not past its subtree yet: a sibling like `<name>-x` sorts before `<name>/`.
            from = Bound::Excluded(child.clone());
        }
        names
    }

    /// Records what a read found at `path` (`None`: no node) and says what changed.
    pub(crate) fn apply(&mut self, path: &str, found: Option<CachedNode>, events: &mut Vec<CacheEvent>) {
        match found {
            Some(node) => self.put(path, node, events),
            None => self.remove_subtree(path, events),
        }
    }

    fn put(&mut self, path: &str, node: CachedNode, events: &mut Vec<CacheEvent>) {
        match self.nodes.get_mut(path) {
            None => {
                self.nodes.insert(path.to_owned(), node.clone());
                events.push(CacheEvent::Created { path: path.to_owned(), node });
            }
            // An older read arriving late (a stale mzxid of the same node) changes nothing.
            Some(old) if old.stat.czxid == node.stat.czxid && node.stat.mzxid < old.stat.mzxid => {}
            Some(old) if old.differs_from(&node) => {
                let old = std::mem::replace(old, node.clone());
                events.push(CacheEvent::Changed { path: path.to_owned(), old, new: node });
            }
            // Same data and version: keep the newer stat (its children fields) quietly.
            Some(old) => *old = node,
        }
    }

    /// Removes `path` and everything cached below it, deepest first.
    fn remove_subtree(&mut self, path: &str, events: &mut Vec<CacheEvent>) {
        let prefix = child_prefix(path);
        let below: Vec<String> = self
            .nodes
            .range::<String, _>((Bound::Excluded(prefix.clone()), Bound::Unbounded))
            .take_while(|(child, _)| child.starts_with(&prefix))
            .map(|(child, _)| child.clone())
            .collect();
        // Reverse path order puts every node after its descendants.
        for child in below.into_iter().rev() {
            if let Some(old) = self.nodes.remove(&child) {
                events.push(CacheEvent::Deleted { path: child, old });
            }
        }
        if let Some(old) = self.nodes.remove(path) {
            events.push(CacheEvent::Deleted { path: path.to_owned(), old });
        }
    }

    /// Replaces everything with a fresh listing, and says exactly what differs: deleted nodes
    /// (deepest first), then created and changed ones in path order.
    pub(crate) fn replace_all(&mut self, fresh: BTreeMap<String, CachedNode>, events: &mut Vec<CacheEvent>) {
        let old = std::mem::replace(&mut self.nodes, fresh);
        for (path, old_node) in old.iter().rev() {
            if !self.nodes.contains_key(path) {
                events.push(CacheEvent::Deleted { path: path.clone(), old: old_node.clone() });
            }
        }
        for (path, node) in &self.nodes {
            match old.get(path) {
                None => events.push(CacheEvent::Created { path: path.clone(), node: node.clone() }),
                Some(old_node) if old_node.differs_from(node) => events.push(CacheEvent::Changed {
                    path: path.clone(),
                    old: old_node.clone(),
                    new: node.clone(),
                }),
                Some(_) => {}
            }
        }
    }
}

/// `path` followed by the separator its children's paths start with.
fn child_prefix(path: &str) -> String {
    if path == "/" {
        "/".to_owned()
    } else {
        format!("{path}/")
    }
}

/// The smallest key after every path in `path`'s subtree: `path` with `0` (the character after
/// `/`) appended sorts after `path/...`, and no sibling sorts between (a sibling named exactly
/// `<name>0` is this key itself, so the bound includes it).
fn after_subtree(path: &str) -> String {
    format!("{path}0")
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use zk_recipes_framework::zookeeper_client::Stat;

    use super::*;

    fn node(czxid: i64, mzxid: i64, data: &[u8]) -> CachedNode {
        let stat = Stat {
            czxid,
            mzxid,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
            pzxid: 0,
        };
        CachedNode { stat, data: Some(Arc::from(data)) }
    }

    fn store(paths: &[&str]) -> Store {
        let mut store = Store::default();
        let mut events = Vec::new();
        for (index, path) in paths.iter().enumerate() {
            store.apply(path, Some(node(index as i64, index as i64, b"")), &mut events);
        }
        store
    }

    fn paths(events: &[CacheEvent]) -> Vec<String> {
        events
            .iter()
            .map(|event| match event {
                CacheEvent::Created { path, .. } => format!("+{path}"),
                CacheEvent::Changed { path, .. } => format!("~{path}"),
                CacheEvent::Deleted { path, .. } => format!("-{path}"),
                CacheEvent::Initialized => "initialized".to_owned(),
            })
            .collect()
    }

    #[test]
    fn children_are_the_direct_ones_in_order_skipping_each_subtree() {
        let store = store(&["/a", "/a/x", "/a/x/deep", "/a/x/deep/er", "/a/x0", "/a/y", "/a-b", "/a0", "/b"]);
        assert_eq!(store.children("/a"), ["x", "x0", "y"]);
        assert_eq!(store.children("/a/x"), ["deep"]);
        assert_eq!(store.children("/"), ["a", "a-b", "a0", "b"]);
        assert!(store.children("/b").is_empty());
        assert!(store.children("/missing").is_empty());
    }

    #[test]
    fn a_deleted_node_takes_its_cached_subtree_deepest_first_and_nothing_beside_it() {
        let mut store = store(&["/a", "/a/x", "/a/x/deep", "/a/y", "/a-b", "/a0"]);
        let mut events = Vec::new();
        store.apply("/a", None, &mut events);
        assert_eq!(paths(&events), ["-/a/y", "-/a/x/deep", "-/a/x", "-/a"]);
        assert_eq!(store.children("/"), ["a-b", "a0"]);
    }

    #[test]
    fn a_read_reports_created_then_changed_only_when_data_or_identity_differ() {
        let mut store = Store::default();
        let mut events = Vec::new();
        store.apply("/n", Some(node(1, 1, b"a")), &mut events);
        store.apply("/n", Some(node(1, 1, b"a")), &mut events);
        store.apply("/n", Some(node(1, 2, b"b")), &mut events);
        store.apply("/n", Some(node(1, 1, b"a")), &mut events); // a late, older read
        store.apply("/n", Some(node(5, 5, b"b")), &mut events); // deleted and created again
        assert_eq!(paths(&events), ["+/n", "~/n", "~/n"]);
        assert_eq!(store.get("/n").expect("cached").stat.czxid, 5);
    }

    #[test]
    fn replacing_everything_reports_exactly_the_differences() {
        let mut store = store(&["/a", "/a/gone", "/a/gone/child", "/a/same", "/a/changed"]);
        let mut fresh = BTreeMap::new();
        for (path, cached) in store.iter() {
            if !path.starts_with("/a/gone") {
                fresh.insert(path.clone(), cached.clone());
            }
        }
        let changed = fresh.get("/a/changed").expect("present").clone();
        fresh.insert("/a/changed".into(), node(changed.stat.czxid, 99, b"new"));
        fresh.insert("/a/new".into(), node(100, 100, b""));
        let mut events = Vec::new();
        store.replace_all(fresh, &mut events);
        assert_eq!(paths(&events), ["-/a/gone/child", "-/a/gone", "~/a/changed", "+/a/new"]);
        assert_eq!(store.len(), 4);
    }
}
