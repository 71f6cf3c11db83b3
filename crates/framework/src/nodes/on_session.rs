//! What the nodes floor does on one session, below its retries: make a node's missing parents,
//! delete a subtree, delete a node at a fixed path if it is still ours; and the parents our
//! protected creates have found in place.

use zookeeper_client::CreateMode;

use crate::path;
use crate::session::{Error, Result, Session};

/// How a create makes missing parents (Curator's `creatingParentsIfNeeded` /
/// `creatingParentContainersIfNeeded`): empty nodes with the framework's default ACL.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::ParentMode;
///
/// // `/app` and `/app/jobs` are made as containers if missing: the server reaps them when empty.
/// framework.create("/app/jobs/nightly").creating_parents(ParentMode::Container).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentMode {
    /// Persistent parents: they stay until deleted.
    Persistent,
    /// Container parents: the server deletes each once it has had children and is empty again.
    Container,
}

impl ParentMode {
    pub(crate) fn create_mode(self) -> CreateMode {
        match self {
            ParentMode::Persistent => CreateMode::Persistent,
            ParentMode::Container => CreateMode::Container,
        }
    }
}

/// The parents a framework's protected creates have found in place, so that only the first create
/// under a parent sends the parent's create ahead of its own. A parent deleted since (a reaped
/// container) fails the node create with NoNode, which makes the parents again: the set only
/// chooses the order of requests, never what is on the server.
#[derive(Debug, Default)]
pub(crate) struct KnownParents {
    paths: parking_lot::Mutex<std::collections::HashSet<String>>,
}

impl KnownParents {
    /// At most this many are remembered; past it the set starts again (each forgotten parent
    /// costs one NodeExists on its next create).
    const CAPACITY: usize = 100_000;

    pub(crate) fn contains(&self, parent: &str) -> bool {
        self.paths.lock().contains(parent)
    }

    pub(crate) fn insert(&self, parent: &str) {
        let mut paths = self.paths.lock();
        if paths.contains(parent) {
            return;
        }
        if paths.len() >= Self::CAPACITY {
            paths.clear();
        }
        paths.insert(parent.to_owned());
    }

    pub(crate) fn forget(&self, parent: &str) {
        self.paths.lock().remove(parent);
    }
}

/// Creates `path` and missing ancestors as containers on one session.
pub(crate) async fn ensure_containers(session: &Session, path: &str) -> Result<()> {
    ensure_parents(session, path, ParentMode::Container).await
}

/// Creates `path` and missing ancestors, empty, as `mode` says, on one session.
pub(crate) async fn ensure_parents(session: &Session, path: &str, mode: ParentMode) -> Result<()> {
    if path == "/" {
        return Ok(());
    }
    let mode = mode.create_mode();
    // Fast path: the node usually exists, or only it is missing.
    let missing = match session.client().create(path, &[], &session.create_options_for(path, mode)).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => return Ok(()),
        Err(zookeeper_client::Error::NoNode) => path::ancestors(path),
        Err(err) => return Err(err.into()),
    };
    for ancestor in missing.into_iter().chain(std::iter::once(path)) {
        match session.client().create(ancestor, &[], &session.create_options_for(ancestor, mode)).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

pub(crate) async fn delete_tree(session: &Session, root: &str) -> Result<()> {
    // Depth first, deepest nodes first; a child created meanwhile makes the parent's delete fail
    // with NotEmpty, and the next round picks it up.
    for _round in 0..16 {
        let mut order = Vec::new();
        let mut stack = vec![root.to_owned()];
        while let Some(node) = stack.pop() {
            match session.client().list_children(&node).await {
                Ok(children) => stack.extend(children.iter().map(|child| path::join(&node, child))),
                Err(zookeeper_client::Error::NoNode) => continue,
                Err(err) => return Err(err.into()),
            }
            order.push(node);
        }
        let mut not_empty = false;
        for node in order.iter().rev() {
            match session.client().delete(node, None).await {
                Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
                Err(zookeeper_client::Error::NotEmpty) => not_empty = true,
                Err(err) => return Err(err.into()),
            }
        }
        if !not_empty {
            return Ok(());
        }
    }
    Err(Error::ZooKeeper(zookeeper_client::Error::NotEmpty))
}

/// Deletes `path` on `session` if it is that session's ephemeral node holding `mark`, at the
/// version read: `Ok(true)` once it is gone (or was), `Ok(false)` if another node stands there
/// (left alone).
pub(crate) async fn delete_if_marked(session: &Session, path: &str, mark: &[u8]) -> Result<bool> {
    loop {
        let (data, stat) = match session.client().get_data(path).await {
            Ok(found) => found,
            Err(zookeeper_client::Error::NoNode) => return Ok(true),
            Err(err) => return Err(err.into()),
        };
        if stat.ephemeral_owner != session.id().0 || data != mark {
            return Ok(false);
        }
        match session.client().delete(path, Some(stat.version)).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => return Ok(true),
            // Our own data changed between the read and the delete: read again.
            Err(zookeeper_client::Error::BadVersion) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

/// Deletes `path` only if it is still the node whose creation had `czxid`: a name can come back
/// (a session-named sequential node under a container parent reaped and made again counts from
/// 0), and a delete by name sent late would take the newer node. Checked with a read, then deleted
/// at the version read.
pub(crate) async fn delete_if_created(session: &Session, path: &str, czxid: i64) -> Result<()> {
    loop {
        let stat = match session.client().check_stat(path).await {
            Ok(Some(stat)) => stat,
            Ok(None) => return Ok(()),
            Err(err) => return Err(err.into()),
        };
        if stat.czxid != czxid {
            return Ok(());
        }
        match session.client().delete(path, Some(stat.version)).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => return Ok(()),
            // Our node's data changed between the read and the delete: read again.
            Err(zookeeper_client::Error::BadVersion) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

/// Deletes everything below `path` (not `path` itself).
pub(crate) async fn delete_children(session: &Session, path: &str) -> Result<()> {
    let children = match session.client().list_children(path).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    for child in children {
        delete_tree(session, &path::join(path, &child)).await?;
    }
    Ok(())
}
