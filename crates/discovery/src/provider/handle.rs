//! The `ServiceProvider` handle: picks an instance from its service cache with its strategy,
//! leaving out what is disabled, taken out by `note_error`, or refused by a filter.

use std::fmt;
use std::sync::Arc;
use std::time::Instant;

use super::down::{DownInstancePolicy, DownInstances};
use super::strategy::{Picker, ProviderStrategy};
use crate::instance::ServiceInstance;
use crate::service_cache::ServiceCache;

/// A filter of usable instances (Curator's `InstanceFilter`): `true` keeps the instance.
pub(super) type InstanceFilter<P> = Arc<dyn Fn(&ServiceInstance<P>) -> bool + Send + Sync>;

/// Picks an instance of one service to call (Curator's `ServiceProvider`), from a
/// [`ServiceCache`] it keeps, with a [`ProviderStrategy`].
///
/// Made by [`ServiceDiscovery::service_provider`](crate::ServiceDiscovery::service_provider).
/// Only *usable* instances are returned, as Curator's providers return them:
/// - enabled (`enabled == true`; a disabled instance is never returned);
/// - not taken out of rotation by [`note_error`](Self::note_error) (see [`DownInstancePolicy`]);
/// - kept by every filter given to [`filter`](crate::ServiceProviderBuilder::filter).
///
/// Picks read the cache's memory: no round trip, no await. Across connection loss and session
/// expiry the provider picks from what its cache holds (see [`ServiceCache`]): while the
/// connection is down, the instances last read.
///
/// ```no_run
/// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_discovery::ProviderStrategy;
///
/// let provider = discovery
///     .service_provider("billing")
///     .strategy(ProviderStrategy::RoundRobin)
///     .start(Duration::from_secs(10))
///     .await?;
/// match provider.get_instance() {
///     Some(billing) => {
///         let uri = billing.resolve_uri().unwrap_or_default();
///         # let call_failed = false;
///         // ... call `uri`; if the call fails:
///         if call_failed {
///             provider.note_error(&billing);
///         }
///     }
///     None => println!("no billing instance is up"),
/// }
/// provider.close().await;
/// # Ok(()) }
/// ```
pub struct ServiceProvider<P = serde_json::Value> {
    pub(super) cache: ServiceCache<P>,
    pub(super) picker: Picker,
    pub(super) down: DownInstances,
    pub(super) filters: Vec<InstanceFilter<P>>,
}

impl<P> ServiceProvider<P> {
    /// The usable instances in node-name order, as references into the cache's snapshot.
    fn with_usable<T>(&self, then: impl FnOnce(Vec<&ServiceInstance<P>>) -> T) -> T {
        let snapshot = self.cache.snapshot();
        let candidates: Vec<&ServiceInstance<P>> = snapshot
            .iter()
            .map(|instance| instance.as_ref())
            .filter(|instance| instance.enabled && self.filters.iter().all(|keep| keep(instance)))
            .collect();
        then(self.down.retain_up(candidates, Instant::now()))
    }

    /// Notes that calling `instance` failed (Curator's `noteError`): once the
    /// [`DownInstancePolicy`]'s threshold of errors is noted within its timeout, the instance is
    /// out of rotation until that timeout has passed since its first error. Instances are told
    /// apart by id, so an update of the instance's data keeps its record.
    ///
    /// ```no_run
    /// # fn demo(provider: zk_recipes_discovery::ServiceProvider) {
    /// if let Some(instance) = provider.get_instance() {
    ///     // The call failed twice (the default threshold): out for 30 s.
    ///     provider.note_error(&instance);
    ///     provider.note_error(&instance);
    ///     assert!(provider.get_all_instances().iter().all(|up| up.id != instance.id));
    /// }
    /// # }
    /// ```
    pub fn note_error(&self, instance: &ServiceInstance<P>) {
        self.down.note_error(&instance.id, Instant::now());
    }

    /// The strategy it picks with.
    pub fn strategy(&self) -> ProviderStrategy {
        self.picker.strategy()
    }

    /// The policy `note_error` follows.
    pub fn down_instance_policy(&self) -> DownInstancePolicy {
        self.down.policy()
    }

    /// The service cache it picks from: every instance (disabled ones and those taken out
    /// included), and its events.
    pub fn cache(&self) -> &ServiceCache<P> {
        &self.cache
    }

    /// Stops the provider and its cache (Curator's `close`), waiting for the cache's watch to be
    /// removed. Dropping the provider does the same without waiting.
    ///
    /// # Cancel safety
    /// Cancel safe: the provider stops either way; a cancelled call only stops waiting.
    pub async fn close(self) {
        self.cache.close().await;
    }
}

impl<P: Clone> ServiceProvider<P> {
    /// An instance to use for one call, picked by the strategy among the usable ones; `None`
    /// when there is none (Curator's `getInstance()` returns `null`). Don't keep it: ask again
    /// for the next call.
    ///
    /// ```no_run
    /// # fn demo(provider: zk_recipes_discovery::ServiceProvider) {
    /// if let Some(instance) = provider.get_instance() {
    ///     assert!(instance.enabled);
    ///     println!("calling {:?}", instance.resolve_uri());
    /// }
    /// # }
    /// ```
    pub fn get_instance(&self) -> Option<ServiceInstance<P>> {
        self.with_usable(|usable| self.picker.pick(&usable).cloned())
    }

    /// Every usable instance, in node-name order (Curator's `getAllInstances()`, which applies
    /// the same filters).
    ///
    /// ```no_run
    /// # fn demo(provider: zk_recipes_discovery::ServiceProvider) {
    /// let ids: Vec<String> = provider.get_all_instances().into_iter().map(|instance| instance.id).collect();
    /// # }
    /// ```
    pub fn get_all_instances(&self) -> Vec<ServiceInstance<P>> {
        self.with_usable(|usable| usable.into_iter().cloned().collect())
    }
}

impl<P> fmt::Debug for ServiceProvider<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceProvider")
            .field("cache", &self.cache)
            .field("strategy", &self.picker.strategy())
            .field("down_instance_policy", &self.down.policy())
            .field("filters", &self.filters.len())
            .finish_non_exhaustive()
    }
}
