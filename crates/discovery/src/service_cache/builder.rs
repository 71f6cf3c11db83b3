//! `ServiceCacheBuilder`: how a [`ServiceCache`] is made from a discovery
//! ([`ServiceDiscovery::service_cache`]) and started.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use tracing::{info_span, Instrument};
use zk_recipes_cache::{Cache, CacheError};
use zk_recipes_framework::{Deadline, Framework};

use super::cache::ServiceCache;
use super::follow::{child_name, follow};
use super::shared::Shared;
use crate::discovery::ServiceDiscovery;
use crate::error::{DiscoveryError, Result};
use crate::json::JsonInstanceSerializer;

/// Configures a [`ServiceCache`] ([`ServiceDiscovery::service_cache`]): the service to follow,
/// read with the discovery's serializer and payload type.
///
/// ```no_run
/// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
/// use std::time::Duration;
///
/// let builder = discovery.service_cache("api");
/// let cache = builder.start(Duration::from_secs(10)).await?;
/// println!("{} instances of api", cache.len());
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until start() is called"]
pub struct ServiceCacheBuilder<P = serde_json::Value> {
    framework: Framework,
    name: String,
    /// `<base path>/<name>`, or why the name is refused (returned by `start`).
    service_path: Result<String>,
    serializer: JsonInstanceSerializer,
    payload: PhantomData<fn() -> P>,
}

impl<P> ServiceDiscovery<P> {
    /// A builder for a cache of service `name`'s instances (Curator's
    /// `serviceCacheBuilder().name(name).build()`), read with this discovery's serializer and
    /// payload type. The cache runs on its own: it needs nothing from the discovery once started,
    /// and closing the discovery does not close it.
    ///
    /// Curator's `watchInstances` has nothing to do with it: there, it makes the discovery follow
    /// the nodes of the instances *it registered* (see
    /// [`ServiceDiscoveryBuilder::watch_instances`](crate::ServiceDiscoveryBuilder::watch_instances)).
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
    /// let cache = discovery.service_cache("api").start(std::time::Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    pub fn service_cache(&self, name: &str) -> ServiceCacheBuilder<P> {
        ServiceCacheBuilder {
            framework: self.framework().clone(),
            name: name.to_owned(),
            service_path: self.check_names(name, None, false),
            serializer: *self.serializer(),
            payload: PhantomData,
        }
    }
}

impl<P: DeserializeOwned + Clone + Send + Sync + 'static> ServiceCacheBuilder<P> {
    /// Starts the cache and waits for its first full load (Curator's `start()`): a path cache
    /// of the service node is started (its watch set, then the service read), and a task reads
    /// its nodes as instances. The service node need not exist: the cache is then loaded and
    /// empty, and fills when instances are registered. Needs a tokio runtime.
    ///
    /// # Errors
    /// [`DiscoveryError::InvalidArgument`] for an empty name or one with a `/`, before anything is
    /// sent; [`DiscoveryError::Framework`] with a timeout when the first load is not done by the
    /// deadline (the cache is then stopped).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled call drops the cache it was starting, which stops it and removes
    /// its watch; nothing is left behind.
    pub async fn start(self, deadline: impl Into<Deadline>) -> Result<ServiceCache<P>> {
        let deadline = deadline.into();
        let service_path = self.service_path?;
        let root = service_path.clone();
        let cache = Cache::builder(&self.framework, &service_path)
            .filter(move |node_path| node_path == root || child_name(&root, node_path).is_some())
            .start()
            .map_err(from_cache_error)?;
        let shared = Arc::new(Shared::new());
        let span = info_span!("service_cache", service = %service_path);
        let task = tokio::spawn(
            follow(cache.events(), service_path.clone(), self.serializer, Arc::clone(&shared))
                .instrument(span),
        );
        let service_cache =
            ServiceCache { name: self.name, service_path, shared, cache: Some(cache), task: Some(task) };
        service_cache.loaded(deadline).await?;
        Ok(service_cache)
    }
}

fn from_cache_error(err: CacheError) -> DiscoveryError {
    match err {
        CacheError::Framework(err) => DiscoveryError::Framework(err),
        other => DiscoveryError::InvalidArgument(other.to_string()),
    }
}

impl<P> fmt::Debug for ServiceCacheBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceCacheBuilder")
            .field("name", &self.name)
            .field("service_path", &self.service_path)
            .field("serializer", &self.serializer)
            .finish_non_exhaustive()
    }
}
