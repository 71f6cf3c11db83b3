//! `ServiceProviderBuilder`: how a [`ServiceProvider`] is made from a discovery
//! ([`ServiceDiscovery::service_provider`]): its strategy, down-instance policy and filters.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use zk_recipes_framework::Deadline;

use super::down::{DownInstancePolicy, DownInstances};
use super::handle::{InstanceFilter, ServiceProvider};
use super::strategy::{Picker, ProviderStrategy};
use crate::discovery::ServiceDiscovery;
use crate::error::Result;
use crate::instance::ServiceInstance;
use crate::service_cache::ServiceCacheBuilder;

/// Configures a [`ServiceProvider`] ([`ServiceDiscovery::service_provider`]; Curator's
/// `ServiceProviderBuilder`).
///
/// Defaults, Curator's: [`ProviderStrategy::RoundRobin`], [`DownInstancePolicy::default`] (out
/// after 2 errors, for 30 s), no filter beyond the ones every provider applies (enabled, not
/// down).
///
/// ```no_run
/// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_discovery::{DownInstancePolicy, ProviderStrategy};
///
/// let provider = discovery
///     .service_provider("api")
///     .strategy(ProviderStrategy::Random)
///     .down_instance_policy(DownInstancePolicy::new(Duration::from_secs(10), 1))
///     .filter(|instance| instance.ssl_port.is_some())
///     .start(Duration::from_secs(10))
///     .await?;
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until start() is called"]
pub struct ServiceProviderBuilder<P = serde_json::Value> {
    cache: ServiceCacheBuilder<P>,
    strategy: ProviderStrategy,
    down_instance_policy: DownInstancePolicy,
    filters: Vec<InstanceFilter<P>>,
}

impl<P> ServiceDiscovery<P> {
    /// A builder for a provider of service `name`'s instances (Curator's
    /// `serviceProviderBuilder().serviceName(name)`), on a [`ServiceCache`](crate::ServiceCache)
    /// of the service read with this discovery's serializer and payload type. Like the cache, it
    /// runs on its own once started.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
    /// let provider = discovery.service_provider("api").start(std::time::Duration::from_secs(10)).await?;
    /// let instance = provider.get_instance();
    /// # Ok(()) }
    /// ```
    pub fn service_provider(&self, name: &str) -> ServiceProviderBuilder<P> {
        ServiceProviderBuilder {
            cache: self.service_cache(name),
            strategy: ProviderStrategy::default(),
            down_instance_policy: DownInstancePolicy::default(),
            filters: Vec::new(),
        }
    }
}

impl<P> ServiceProviderBuilder<P> {
    /// How an instance is picked. Defaults to [`ProviderStrategy::RoundRobin`] (as Curator's).
    pub fn strategy(mut self, strategy: ProviderStrategy) -> Self {
        self.strategy = strategy;
        self
    }

    /// When `note_error` takes an instance out of rotation. Defaults to
    /// [`DownInstancePolicy::default`] (2 errors, 30 s).
    pub fn down_instance_policy(mut self, policy: DownInstancePolicy) -> Self {
        self.down_instance_policy = policy;
        self
    }

    /// Keeps only the instances `keep` accepts (Curator's `additionalFilter`); filters add up.
    /// Defaults to none.
    pub fn filter(mut self, keep: impl Fn(&ServiceInstance<P>) -> bool + Send + Sync + 'static) -> Self {
        self.filters.push(Arc::new(keep));
        self
    }
}

impl<P: DeserializeOwned + Clone + Send + Sync + 'static> ServiceProviderBuilder<P> {
    /// Starts the provider's cache and waits for its first full load (Curator's `start()`).
    /// Needs a tokio runtime.
    ///
    /// # Errors
    /// As [`ServiceCacheBuilder::start`]: an invalid name before anything is sent, a timeout when
    /// the first load is not done by the deadline.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled call drops the cache it was starting; nothing is left behind.
    pub async fn start(self, deadline: impl Into<Deadline>) -> Result<ServiceProvider<P>> {
        let cache = self.cache.start(deadline).await?;
        Ok(ServiceProvider {
            cache,
            picker: Picker::new(self.strategy),
            down: DownInstances::new(self.down_instance_policy),
            filters: self.filters,
        })
    }
}

impl<P> fmt::Debug for ServiceProviderBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceProviderBuilder")
            .field("cache", &self.cache)
            .field("strategy", &self.strategy)
            .field("down_instance_policy", &self.down_instance_policy)
            .field("filters", &self.filters.len())
            .finish()
    }
}
