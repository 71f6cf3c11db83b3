//! Which ACL each node gets: Curator's `ACLProvider`.

use std::fmt;

use zookeeper_client::{Acl, AuthId, Permission};

/// Chooses the ACL of every node the framework and the recipes create, parents included
/// (Curator's `ACLProvider`). Set it with [`crate::FrameworkBuilder::acl_provider`].
///
/// Paths are as the recipes see them: inside the framework's namespace, if it has one. The
/// server refuses an empty ACL (`InvalidACL`), so a provider must never return one.
///
/// ```
/// use zk_recipes_framework::{AclProvider, PathAclProvider};
/// use zk_recipes_framework::zookeeper_client::{Acl, AuthId, Permission};
///
/// // Open by default; under /payments only the creator's identities may change anything.
/// let creator_all = vec![Acl::new(Permission::ALL, AuthId::authed())];
/// let world_read = Acl::new(Permission::READ, AuthId::anyone());
/// let provider = PathAclProvider::open().with_path("/payments", [creator_all, vec![world_read]].concat());
/// assert_eq!(provider.acl_for_path("/payments/locks/_c_1-lock-0000000001").len(), 2);
/// assert_eq!(provider.acl_for_path("/orders"), provider.default_acl());
/// ```
pub trait AclProvider: fmt::Debug + Send + Sync + 'static {
    /// The ACL for paths without a rule of their own.
    fn default_acl(&self) -> &[Acl];

    /// The ACL for a node created at `path`. Defaults to [`default_acl`](Self::default_acl).
    fn acl_for_path(&self, path: &str) -> &[Acl] {
        let _ = path;
        self.default_acl()
    }
}

/// An [`AclProvider`] with a default ACL and per-subtree overrides: a node gets the ACL of the
/// longest rule whose path is the node's path or one of its ancestors. Hand it to the framework with
/// [`FrameworkBuilder::acl_provider`](crate::FrameworkBuilder::acl_provider).
///
/// ```
/// use zk_recipes_framework::zookeeper_client::{Acl, AuthId, Permission};
/// use zk_recipes_framework::{AclProvider, PathAclProvider};
///
/// let read_only = vec![Acl::new(Permission::READ, AuthId::anyone())];
/// let provider = PathAclProvider::open().with_path("/app/config", read_only.clone());
/// assert_eq!(provider.acl_for_path("/app/config/db"), read_only.as_slice());
/// assert_eq!(provider.acl_for_path("/app/configs"), provider.default_acl(), "a sibling, not a child");
/// ```
#[derive(Debug, Clone)]
pub struct PathAclProvider {
    default: Vec<Acl>,
    /// `(subtree root, acl)`, longest root first.
    rules: Vec<(String, Vec<Acl>)>,
}

impl PathAclProvider {
    /// `default` for every path until [`with_path`](Self::with_path) adds rules.
    pub fn new(default: Vec<Acl>) -> Self {
        Self { default, rules: Vec::new() }
    }

    /// Open to anyone (`world:anyone`, all permissions): ZooKeeper's and Curator's default.
    pub fn open() -> Self {
        Self::new(vec![Acl::new(Permission::ALL, AuthId::anyone())])
    }

    /// Nodes at `subtree` and below get `acl`.
    #[must_use]
    pub fn with_path(mut self, subtree: impl Into<String>, acl: Vec<Acl>) -> Self {
        let subtree = subtree.into();
        let subtree = if subtree.len() > 1 { subtree.trim_end_matches('/').to_owned() } else { subtree };
        self.rules.retain(|(root, _)| *root != subtree);
        self.rules.push((subtree, acl));
        self.rules.sort_by_key(|(root, _)| std::cmp::Reverse(root.len()));
        self
    }
}

impl AclProvider for PathAclProvider {
    fn default_acl(&self) -> &[Acl] {
        &self.default
    }

    fn acl_for_path(&self, path: &str) -> &[Acl] {
        self.rules
            .iter()
            .find(|(root, _)| {
                root == "/"
                    || path == root
                    || path.strip_prefix(root.as_str()).is_some_and(|rest| rest.starts_with('/'))
            })
            .map_or(&self.default, |(_, acl)| acl)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_matching_subtree_wins_and_siblings_do_not_match() {
        let read = vec![Acl::new(Permission::READ, AuthId::anyone())];
        let authed = vec![Acl::new(Permission::ALL, AuthId::authed())];
        let provider =
            PathAclProvider::open().with_path("/app/", read.clone()).with_path("/app/secure", authed.clone());
        assert_eq!(provider.acl_for_path("/app"), read.as_slice());
        assert_eq!(provider.acl_for_path("/app/x"), read.as_slice());
        assert_eq!(provider.acl_for_path("/app/secure"), authed.as_slice());
        assert_eq!(provider.acl_for_path("/app/secure/lock-1"), authed.as_slice());
        assert_eq!(provider.acl_for_path("/app/securer"), read.as_slice());
        assert_eq!(provider.acl_for_path("/apple"), provider.default_acl());
        assert_eq!(provider.acl_for_path("/"), provider.default_acl());
    }
}
