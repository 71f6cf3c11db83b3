//! The cache handle, its builder, and the shared state its worker keeps.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use parking_lot::RwLock;
use tokio::sync::{mpsc, watch};
use zk_recipes_framework::{path, Deadline, Framework};

use crate::error::{CacheError, Result};
use crate::event::{CacheEvent, CacheEvents};
use crate::store::{CachedNode, Store};
use crate::worker;

/// How many reads a (re)load keeps in flight by default.
pub const DEFAULT_LOAD_CONCURRENCY: usize = 256;

/// Which nodes a cache keeps: `true` to keep the node at this full path (and look below it).
///
/// [`CacheBuilder::filter`] takes the function itself; this is the shape it is kept in.
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

/// Configures a [`Cache`] ([`Cache::builder`]).
///
/// Defaults: the node and its whole subtree, data and stat, data as stored (not decompressed),
/// every node, [`DEFAULT_LOAD_CONCURRENCY`] reads in flight while loading.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_cache::Result<()> {
/// use zk_recipes_cache::Cache;
///
/// // Every service's registration, without the (large) data, and nothing under `/services/tmp`.
/// let cache = Cache::builder(&framework, "/services")
///     .stats_only()
///     .filter(|path| path != "/services/tmp")
///     .load_concurrency(32)
///     .start()?;
/// // One node only, its data gunzipped as Curator's `compressed()` wrote it.
/// let config = Cache::builder(&framework, "/app/config").single_node().compressed_data().start()?;
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until start() is called"]
pub struct CacheBuilder {
    framework: Framework,
    root: String,
    pub(crate) settings: Settings,
}

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

impl CacheBuilder {
    /// Caches only the node itself, not its children (Curator's `SINGLE_NODE_CACHE`; the old
    /// `NodeCache`).
    pub fn single_node(mut self) -> Self {
        self.settings.subtree = false;
        self
    }

    /// Keeps each node's `Stat` but not its data (Curator's `withDataNotCached()`): less memory,
    /// and a `Changed` event still says the data changed (a new `mzxid`).
    pub fn stats_only(mut self) -> Self {
        self.settings.with_data = false;
        self
    }

    /// Gunzips each node's data, as Curator's `compressed()` writes it (Curator's
    /// `COMPRESSED_DATA`). Data that is not gzip is kept as stored, with a warning.
    pub fn compressed_data(mut self) -> Self {
        self.settings.compressed = true;
        self
    }

    /// Keeps only the nodes `keep(full_path)` accepts; a node it refuses is not read, and
    /// neither is anything below it (Curator's `TreeCacheSelector`, as one function).
    pub fn filter(mut self, keep: impl Fn(&str) -> bool + Send + Sync + 'static) -> Self {
        self.settings.filter = Some(Arc::new(keep));
        self
    }

    /// How many reads a load keeps in flight (defaults to [`DEFAULT_LOAD_CONCURRENCY`]).
    pub fn load_concurrency(mut self, reads_in_flight: usize) -> Self {
        self.settings.load_concurrency = reads_in_flight;
        self
    }

    /// Starts the cache: a background task sets the persistent watch, loads the tree, sends
    /// [`CacheEvent::Initialized`], then follows every change. Needs a tokio runtime.
    ///
    /// # Errors
    /// An invalid root path or a load concurrency of 0, before anything is sent.
    pub fn start(self) -> Result<Cache> {
        path::validate(&self.root).map_err(|reason| {
            CacheError::Framework(zk_recipes_framework::Error::InvalidPath {
                path: self.root.clone(),
                reason,
            })
        })?;
        if self.settings.load_concurrency == 0 {
            return Err(CacheError::InvalidArgument("load concurrency must be at least 1".into()));
        }
        let (initialized, _) = watch::channel(false);
        let shared = Arc::new(Shared {
            state: RwLock::new(State { store: Store::default(), subscribers: Vec::new() }),
            initialized,
            failed: watch::channel(None).0,
        });
        let task = tokio::spawn(worker::run(self.framework, Arc::clone(&shared), self.settings));
        Ok(Cache { root: self.root, shared, task: Some(task) })
    }
}

impl fmt::Debug for CacheBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CacheBuilder")
            .field("root", &self.root)
            .field("subtree", &self.settings.subtree)
            .field("with_data", &self.settings.with_data)
            .field("compressed", &self.settings.compressed)
            .field("filtered", &self.settings.filter.is_some())
            .finish_non_exhaustive()
    }
}

/// The state the cache's handle and worker share.
pub(crate) struct Shared {
    pub(crate) state: RwLock<State>,
    pub(crate) initialized: watch::Sender<bool>,
    /// Why the worker stopped for good before its first load (a server that cannot do what the
    /// cache needs), for [`Cache::initialized`].
    pub(crate) failed: watch::Sender<Option<zk_recipes_framework::Error>>,
}

pub(crate) struct State {
    pub(crate) store: Store,
    subscribers: Vec<mpsc::UnboundedSender<CacheEvent>>,
}

impl Shared {
    /// Applies reads to the store and tells every subscriber what changed, under one lock, so a
    /// subscriber never sees a change twice or misses one.
    pub(crate) fn apply(&self, change: impl FnOnce(&mut Store, &mut Vec<CacheEvent>)) -> usize {
        let mut events = Vec::new();
        let mut state = self.state.write();
        change(&mut state.store, &mut events);
        state.publish(&events);
        events.len()
    }

    pub(crate) fn replace_all(&self, fresh: BTreeMap<String, CachedNode>) -> usize {
        self.apply(|store, events| store.replace_all(fresh, events))
    }

    pub(crate) fn mark_initialized(&self) {
        let mut state = self.state.write();
        if !*self.initialized.borrow() {
            self.initialized.send_replace(true);
            state.publish(&[CacheEvent::Initialized]);
        }
    }
}

impl State {
    fn publish(&mut self, events: &[CacheEvent]) {
        if events.is_empty() {
            return;
        }
        self.subscribers
            .retain(|subscriber| events.iter().all(|event| subscriber.send(event.clone()).is_ok()));
    }
}

/// A cache of a ZooKeeper node and (by default) its whole subtree, kept current by one
/// persistent recursive watch (Curator's `CuratorCache`; also its `TreeCache`,
/// `PathChildrenCache` and `NodeCache`).
///
/// The cache loads the tree once, then re-reads each node the watch reports. After a connection
/// loss or a new session it reads the whole tree again and reports exactly the differences, so
/// its view converges on the server's. Dropping the cache stops it and removes its watch.
///
/// Reads ([`get`](Self::get), [`children`](Self::children)) answer from memory, without a
/// round trip: what the server held when the node was last read.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_cache::CacheError> {
/// use std::time::Duration;
/// use zk_recipes_cache::Cache;
/// use zk_recipes_framework::Deadline;
///
/// let cache = Cache::builder(&framework, "/services").start()?;
/// cache.initialized(Deadline::after(Duration::from_secs(10))).await?;
/// for name in cache.children("/services") {
///     let node = cache.get(&format!("/services/{name}")).expect("cached");
///     println!("{name}: {:?}", node.data.as_deref().map(String::from_utf8_lossy));
/// }
/// # Ok(()) }
/// ```
#[must_use = "the cache stops when dropped"]
pub struct Cache {
    root: String,
    shared: Arc<Shared>,
    /// The worker; taken by [`close`](Self::close).
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Cache {
    /// A builder for a cache of `root` (and its subtree, unless
    /// [`single_node`](CacheBuilder::single_node)).
    pub fn builder(framework: &Framework, root: &str) -> CacheBuilder {
        let settings = Settings {
            root: root.to_owned(),
            subtree: true,
            with_data: true,
            compressed: false,
            filter: None,
            load_concurrency: DEFAULT_LOAD_CONCURRENCY,
        };
        CacheBuilder { framework: framework.clone(), root: root.to_owned(), settings }
    }

    /// The cached root path.
    pub fn root(&self) -> &str {
        &self.root
    }

    /// The node at `path` as last read, if cached.
    pub fn get(&self, path: &str) -> Option<CachedNode> {
        self.shared.state.read().store.get(path).cloned()
    }

    /// The names of `path`'s cached children, sorted.
    pub fn children(&self, path: &str) -> Vec<String> {
        self.shared.state.read().store.children(path)
    }

    /// Every cached node, in path order (a copy).
    pub fn entries(&self) -> Vec<(String, CachedNode)> {
        self.shared.state.read().store.iter().map(|(path, node)| (path.clone(), node.clone())).collect()
    }

    /// How many nodes are cached.
    pub fn len(&self) -> usize {
        self.shared.state.read().store.len()
    }

    /// Whether no node is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the first load is done.
    pub fn is_initialized(&self) -> bool {
        *self.shared.initialized.borrow()
    }

    /// Waits for the first load.
    ///
    /// # Errors
    /// [`CacheError::Framework`] with a timeout at the deadline, or with
    /// [`Error::MissingFeature`](zk_recipes_framework::Error::MissingFeature) when the server has no
    /// persistent watches (ZooKeeper before 3.6): the cache then stops and never loads.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits. The cache goes on loading in its task either way.
    pub async fn initialized(&self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        let mut initialized = self.shared.initialized.subscribe();
        let mut failed = self.shared.failed.subscribe();
        deadline
            .run(async {
                // The senders live in `self.shared`: they cannot be dropped while we wait.
                tokio::select! {
                    _ = initialized.wait_for(|loaded| *loaded) => Ok(()),
                    failed = failed.wait_for(Option::is_some) => match failed {
                        Ok(failed) => Err(failed.clone().expect("waited for Some")),
                        Err(_) => Ok(()),
                    },
                }
            })
            .await?;
        Ok(())
    }

    /// Subscribes to the cache's events: first what it holds now (a `Created` per node, then
    /// `Initialized` if the first load is done), then every change after that, none missed.
    pub fn events(&self) -> CacheEvents {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut state = self.shared.state.write();
        for (path, node) in state.store.iter() {
            let _ = sender.send(CacheEvent::Created { path: path.clone(), node: node.clone() });
        }
        if *self.shared.initialized.borrow() {
            let _ = sender.send(CacheEvent::Initialized);
        }
        state.subscribers.push(sender);
        CacheEvents { receiver }
    }

    /// Stops the cache and waits for its task to end (its watch removed). Dropping the cache
    /// does the same without waiting.
    ///
    /// # Cancel safety
    /// Cancel safe: the cache stops either way (its task is aborted when the call is first polled,
    /// or when the dropped cache goes); a cancelled call only stops waiting for the task to end.
    pub async fn close(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }
}

impl Drop for Cache {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
    }
}

impl fmt::Debug for Cache {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cache")
            .field("root", &self.root)
            .field("nodes", &self.len())
            .field("initialized", &self.is_initialized())
            .finish_non_exhaustive()
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
