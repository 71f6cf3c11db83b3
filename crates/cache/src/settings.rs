//! What a cache keeps: its root, how deep, with data or not, and which nodes.

use std::sync::Arc;

/// Which nodes a cache keeps: `true` to keep the node at this full path (and look below it).
///
/// `CacheBuilder::filter` takes the function itself; this is the shape it is kept in.
///
/// ```
/// use std::sync::Arc;
/// use zk_recipes_cache::PathFilter;
///
/// let skip_drafts: PathFilter = Arc::new(|path: &str| !path.ends_with("/drafts"));
/// assert!(skip_drafts("/docs/published"));
/// assert!(!skip_drafts("/docs/drafts"));
/// ```
pub type PathFilter = Arc<dyn Fn(&str) -> bool + Send + Sync>;

/// What the worker needs to know besides the framework and the shared state.
#[derive(Clone)]
pub(crate) struct Settings {
    pub(crate) root: String,
    pub(crate) subtree: bool,
    pub(crate) with_data: bool,
    pub(crate) compressed: bool,
    pub(crate) filter: Option<PathFilter>,
    pub(crate) load_concurrency: usize,
}

impl Settings {
    /// Whether the node at `node_path` belongs in the cache: the root, or (for a subtree
    /// cache) a node below it that the filter keeps, along with all its ancestors below the root.
    pub(crate) fn keeps(&self, node_path: &str) -> bool {
        if node_path == self.root {
            return self.filter.as_ref().is_none_or(|filter| filter(node_path));
        }
        if !self.subtree || !is_below(node_path, &self.root) {
            return false;
        }
        let Some(filter) = &self.filter else { return true };
        if !filter(&self.root) {
            return false;
        }
        // Each ancestor below the root, then the node itself.
        let start = if self.root == "/" { 1 } else { self.root.len() + 1 };
        let mut end = start;
        while let Some(slash) = node_path[end..].find('/') {
            end += slash;
            if !filter(&node_path[..end]) {
                return false;
            }
            end += 1;
        }
        filter(node_path)
    }
}

fn is_below(node_path: &str, root: &str) -> bool {
    if root == "/" {
        node_path != "/"
    } else {
        node_path.len() > root.len() + 1
            && node_path.starts_with(root)
            && node_path.as_bytes()[root.len()] == b'/'
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(root: &str, filter: Option<PathFilter>) -> Settings {
        Settings {
            root: root.into(),
            subtree: true,
            with_data: true,
            compressed: false,
            filter,
            load_concurrency: 1,
        }
    }

    #[test]
    fn a_subtree_cache_keeps_its_root_and_what_is_below_it_only() {
        let settings = settings("/app", None);
        assert!(settings.keeps("/app"));
        assert!(settings.keeps("/app/a/b"));
        assert!(!settings.keeps("/apple"));
        assert!(!settings.keeps("/"));
        let root = self::settings("/", None);
        assert!(root.keeps("/") && root.keeps("/x/y"));
    }

    #[test]
    fn a_filtered_out_node_hides_its_whole_subtree() {
        let settings = settings("/app", Some(Arc::new(|path: &str| !path.ends_with("/private"))));
        assert!(settings.keeps("/app/public/x"));
        assert!(!settings.keeps("/app/private"));
        assert!(!settings.keeps("/app/private/x/y"));
        let from_root = self::settings("/", Some(Arc::new(|path: &str| path != "/hidden")));
        assert!(!from_root.keeps("/hidden/child"));
        assert!(from_root.keeps("/shown/child"));
    }

    #[test]
    fn a_single_node_cache_keeps_only_its_node() {
        let mut settings = settings("/app", None);
        settings.subtree = false;
        assert!(settings.keeps("/app"));
        assert!(!settings.keeps("/app/child"));
    }
}
