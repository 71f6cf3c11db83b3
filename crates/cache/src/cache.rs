//! The cache handle and its builder.

use std::fmt;
use std::sync::Arc;

use zk_recipes_framework::{path, Deadline, Framework};

use crate::error::{CacheError, Result};
use crate::event::CacheEvents;
use crate::node::CachedNode;
use crate::settings::Settings;
use crate::shared::Shared;
use crate::worker;

/// How many reads a (re)load keeps in flight by default.
pub const DEFAULT_LOAD_CONCURRENCY: usize = 256;

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
    /// [`CacheEvent::Initialized`](crate::CacheEvent::Initialized), then follows every change.
    /// Needs a tokio runtime.
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
        let shared = Arc::new(Shared::new());
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
        CacheEvents { receiver: self.shared.subscribe() }
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
