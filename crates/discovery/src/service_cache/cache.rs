//! The `ServiceCache` handle: reads from memory, subscriptions, waiting for the first load, close.

use std::fmt;
use std::sync::Arc;

use tokio::task::JoinHandle;
use zk_recipes_cache::Cache;
use zk_recipes_framework::Deadline;

use super::event::ServiceCacheEvents;
use super::shared::Shared;
use super::store::Snapshot;
use crate::error::Result;
use crate::instance::ServiceInstance;

/// The instances of one service, kept current in memory (Curator's `ServiceCache`), with events
/// that say which instance was added, updated or removed.
///
/// Made by [`ServiceDiscovery::service_cache`](crate::ServiceDiscovery::service_cache). It
/// follows the service node `<base path>/<name>` with the project's path cache
/// ([`zk_recipes_cache::Cache`]: one persistent recursive watch, ZooKeeper 3.6+) and reads each
/// child node as an instance. A node whose data is not an instance of the payload type `P` is
/// logged (WARN) and left out, as [`query_for_instances`](crate::ServiceDiscovery::query_for_instances)
/// leaves it out. [`instances`](Self::instances) answers from memory, in node-name order.
///
/// Dropping the cache (or [`close`](Self::close)) stops it and removes its watch from the
/// server; its subscriptions end.
///
/// # Connection loss and session expiry
/// - **While the connection is down** the cache keeps what it last read and says nothing: an
///   instance whose session ends meanwhile stays until the cache reads the service again
///   (Curator's cache does the same).
/// - **When the connection comes back** (the same session, or a new one after this side's
///   session expired) the path cache reads the whole service again and reports **exactly the
///   differences**: an `Added`, `Updated` or `Removed` per instance that changed meanwhile, nothing
///   for the rest. There is no `Reset` event, and a subscriber need not start over: applying the
///   events in order gives the server's state.
/// - **When a registering side's session expires**, its ephemeral instances' nodes go with it:
///   `Removed`. When its discovery registers them again on its new session: `Added` (a
///   `DYNAMIC_SEQUENTIAL` one under a new node name, with the same id), or `Updated` if the node
///   was deleted and created again between two reads.
///
/// ```no_run
/// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_discovery::ServiceCacheEvent;
///
/// let cache = discovery.service_cache("api").start(Duration::from_secs(10)).await?;
/// for instance in cache.instances() {
///     println!("{} at {:?}", instance.id, instance.resolve_uri());
/// }
/// let mut events = cache.events();
/// while let Some(event) = events.next().await {
///     if let ServiceCacheEvent::Removed(gone) = event {
///         println!("{} left", gone.id);
///     }
/// }
/// # Ok(()) }
/// ```
#[must_use = "the cache stops when dropped"]
pub struct ServiceCache<P = serde_json::Value> {
    pub(super) name: String,
    pub(super) service_path: String,
    pub(super) shared: Arc<Shared<P>>,
    /// The path cache of the service node; taken by `close`.
    pub(super) cache: Option<Cache>,
    /// The follower task; taken by `close`.
    pub(super) task: Option<JoinHandle<()>>,
}

impl<P> ServiceCache<P> {
    /// The service's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The service node it follows: `<base path>/<name>`.
    pub fn service_path(&self) -> &str {
        &self.service_path
    }

    /// How many instances are cached.
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// Whether no instance is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether the first full load is done.
    pub fn is_loaded(&self) -> bool {
        self.shared.is_loaded()
    }

    /// Waits for the first full load ([`start`](crate::ServiceCacheBuilder::start) already
    /// waited for it; this is for a cache whose start was given a short deadline).
    ///
    /// # Errors
    /// [`DiscoveryError::Framework`](crate::DiscoveryError::Framework) with a timeout at the
    /// deadline.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits; the cache goes on loading either way.
    pub async fn loaded(&self, deadline: impl Into<Deadline>) -> Result<()> {
        self.shared.wait_loaded(deadline.into()).await
    }

    /// The instances as one shared list, in node-name order (for the provider: no copy).
    pub(crate) fn snapshot(&self) -> Snapshot<P> {
        self.shared.snapshot()
    }

    /// Stops the cache and waits for its tasks to end (its watch removed from the server); its
    /// subscriptions end. Dropping the cache does the same without waiting.
    ///
    /// # Cancel safety
    /// Cancel safe: the cache stops either way (a cancelled call drops it); a cancelled call only
    /// stops waiting for the watch's removal.
    pub async fn close(mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
        if let Some(cache) = self.cache.take() {
            cache.close().await;
        }
    }
}

impl<P: Clone> ServiceCache<P> {
    /// The cached instances, in node-name order: a copy from memory, no round trip (Curator's
    /// `getInstances()`). Disabled instances (`enabled == false`) are included; a
    /// [`ServiceProvider`](crate::ServiceProvider) leaves them out.
    pub fn instances(&self) -> Vec<ServiceInstance<P>> {
        self.snapshot().iter().map(|instance| ServiceInstance::clone(instance)).collect()
    }

    /// Subscribes to the cache's events: first what it holds now (an `Added` per instance, then
    /// `Loaded` if the first load is done), then every change after that, none missed.
    pub fn events(&self) -> ServiceCacheEvents<P> {
        self.shared.subscribe()
    }
}

impl<P> Drop for ServiceCache<P> {
    fn drop(&mut self) {
        if let Some(task) = &self.task {
            task.abort();
        }
        // The path cache, dropped with its field, stops and removes its watch.
    }
}

impl<P> fmt::Debug for ServiceCache<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceCache")
            .field("service_path", &self.service_path)
            .field("instances", &self.len())
            .field("loaded", &self.is_loaded())
            .finish_non_exhaustive()
    }
}
