//! What a service cache tells its subscribers: which instance was added, updated or removed.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;

use crate::instance::ServiceInstance;

/// A change to a [`ServiceCache`](crate::ServiceCache), naming the instance (where Curator's
/// `ServiceCacheListener.cacheChanged()` only says that something changed: CURATOR-380/470).
///
/// Instances are keyed by their node: an instance re-registered under a new node name (a
/// `DYNAMIC_SEQUENTIAL` one after a session expiry) is a `Removed` of the old node's instance and
/// an `Added` of the new one, with the same id.
///
/// ```no_run
/// # async fn demo(cache: zk_recipes_discovery::ServiceCache) {
/// use zk_recipes_discovery::ServiceCacheEvent;
///
/// let mut events = cache.events();
/// while let Some(event) = events.next().await {
///     match event {
///         ServiceCacheEvent::Added(instance) => println!("+ {} at {:?}", instance.id, instance.resolve_uri()),
///         ServiceCacheEvent::Updated { old, new } => println!("~ {}: port {:?} -> {:?}", new.id, old.port, new.port),
///         ServiceCacheEvent::Removed(instance) => println!("- {}", instance.id),
///         ServiceCacheEvent::Loaded => println!("loaded: {} instances", cache.len()),
///         _ => {}
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServiceCacheEvent<P = serde_json::Value> {
    /// An instance is in the cache that was not: a node created, or one whose data could not be
    /// read before and can now.
    Added(ServiceInstance<P>),
    /// A cached instance's node has new data (an `update`), or was deleted and created again
    /// between two reads of the cache.
    Updated {
        /// What the cache held before.
        old: ServiceInstance<P>,
        /// What it holds now.
        new: ServiceInstance<P>,
    },
    /// A cached instance is gone: its node was deleted (unregistered, or its session ended), or
    /// its data can no longer be read as an instance (logged as a warning).
    Removed(ServiceInstance<P>),
    /// The first full load is done: from here the cache holds every instance the server held when
    /// it was read. Sent once.
    Loaded,
}

impl<P> ServiceCacheEvent<P> {
    /// The instance the event is about (for `Updated`, the new one); `None` for `Loaded`.
    ///
    /// ```
    /// use zk_recipes_discovery::{ServiceCacheEvent, ServiceInstance};
    ///
    /// let added = ServiceCacheEvent::Added(ServiceInstance::builder("api").id("a-1").build());
    /// assert_eq!(added.instance().map(|instance| instance.id.as_str()), Some("a-1"));
    /// assert!(ServiceCacheEvent::<serde_json::Value>::Loaded.instance().is_none());
    /// ```
    pub fn instance(&self) -> Option<&ServiceInstance<P>> {
        match self {
            Self::Added(instance) | Self::Removed(instance) | Self::Updated { new: instance, .. } => {
                Some(instance)
            }
            Self::Loaded => None,
        }
    }
}

/// A subscription to a service cache's events ([`ServiceCache::events`](crate::ServiceCache::events)):
/// the instances the cache held when it subscribed (as `Added` events, then `Loaded` if the first
/// load is done), then every change, in order, none skipped. It ends when the cache is closed or
/// dropped.
///
/// Events queue up without bound until read: drop a subscription you no longer read.
///
/// ```no_run
/// # async fn demo(cache: zk_recipes_discovery::ServiceCache) {
/// use futures::StreamExt;
///
/// let mut events = cache.events();
/// while let Some(event) = events.next().await {
///     if let Some(instance) = event.instance() {
///         println!("{event:?} names {}", instance.id);
///     }
/// }
/// // Or as a stream:
/// let ids: Vec<String> = cache
///     .events()
///     .take(3)
///     .filter_map(|event| async move { event.instance().map(|instance| instance.id.clone()) })
///     .collect()
///     .await;
/// # }
/// ```
#[must_use = "events queue up until read; drop the subscription when done"]
#[derive(Debug)]
pub struct ServiceCacheEvents<P = serde_json::Value> {
    pub(super) receiver: mpsc::UnboundedReceiver<ServiceCacheEvent<P>>,
}

impl<P> ServiceCacheEvents<P> {
    /// The next event; `None` once the cache is closed or dropped.
    ///
    /// # Cancel safety
    /// Cancel safe: an event is taken only when returned; a cancelled call loses nothing.
    pub async fn next(&mut self) -> Option<ServiceCacheEvent<P>> {
        self.receiver.recv().await
    }

    /// An event already waiting, if any.
    pub fn try_next(&mut self) -> Option<ServiceCacheEvent<P>> {
        self.receiver.try_recv().ok()
    }
}

impl<P> Stream for ServiceCacheEvents<P> {
    type Item = ServiceCacheEvent<P>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.receiver.poll_recv(cx)
    }
}
