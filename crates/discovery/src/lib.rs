//! # zk-recipes-discovery
//!
//! Service discovery on ZooKeeper, wire-compatible with Apache Curator's `curator-x-discovery`
//! 5.x: a Rust service registers where its Java peers (Curator, Spring Cloud Zookeeper, Dubbo,
//! Armeria, Vert.x) look, and finds them.
//!
//! | Curator | zk-recipes |
//! |---|---|
//! | `ServiceDiscoveryBuilder.builder(cls).client(c).basePath(p).serializer(s).watchInstances(w).build()`, `start()` | [`ServiceDiscovery::builder`]`(&framework, p).payload_type::<P>().serializer(s).watch_instances(w).build()?` |
//! | `registerService`, `updateService`, `unregisterService` | [`register`](ServiceDiscovery::register), [`update`](ServiceDiscovery::update), [`unregister`](ServiceDiscovery::unregister) (each with a deadline) |
//! | `queryForNames`, `queryForInstances(name)`, `queryForInstance(name, id)` | [`query_for_names`](ServiceDiscovery::query_for_names), [`query_for_instances`](ServiceDiscovery::query_for_instances), [`query_for_instance`](ServiceDiscovery::query_for_instance) |
//! | `close()` | [`close`](ServiceDiscovery::close)`(deadline)` (`PERMANENT` instances stay) |
//! | `ServiceInstance.builder().name(n)....build()` | [`ServiceInstance::builder`]`(n)....build()` |
//! | `ServiceType.DYNAMIC` etc. | [`ServiceType::Dynamic`] etc. |
//! | `new UriSpec("{scheme}://{address}:{port}")`, `instance.buildUriSpec()` | [`UriSpec::parse`], [`ServiceInstance::resolve_uri`] |
//! | `JsonInstanceSerializer(cls)` / `(cls, false)` | [`JsonInstanceSerializer::new`] / [`.write_enabled(true)`](JsonInstanceSerializer::write_enabled) |
//! | `serviceCacheBuilder().name(n).build()`, `start()` | [`discovery.service_cache(n)`](ServiceDiscovery::service_cache)[`.start(deadline).await?`](ServiceCacheBuilder::start) |
//! | `ServiceCache.getInstances()`, `addListener(l)` (`cacheChanged()`: "something changed") | [`instances`](ServiceCache::instances), [`events`](ServiceCache::events) → [`ServiceCacheEvent`]`::{Added, Updated { old, new }, Removed, Loaded}`, naming the instance |
//! | `serviceProviderBuilder().serviceName(n).providerStrategy(s).downInstancePolicy(p).additionalFilter(f).build()`, `start()` | [`discovery.service_provider(n)`](ServiceDiscovery::service_provider)`.strategy(s).down_instance_policy(p).filter(f)`[`.start(deadline).await?`](ServiceProviderBuilder::start) |
//! | `RoundRobinStrategy`, `RandomStrategy`, `StickyStrategy` | [`ProviderStrategy`]`::{RoundRobin, Random, Sticky}` |
//! | `getInstance()`, `getAllInstances()`, `noteError(i)`, `DownInstancePolicy` | [`get_instance`](ServiceProvider::get_instance), [`get_all_instances`](ServiceProvider::get_all_instances), [`note_error`](ServiceProvider::note_error), [`DownInstancePolicy`] |
//!
//! ## The wire format
//! Instances live at `<base path>/<service name>/<instance id>`; the base path and service nodes
//! are containers. Each node holds the instance as Curator's `JsonInstanceSerializer` writes it,
//! byte for byte (checked against Curator 5.4.0's jar: the fixtures in `tests/fixtures`):
//!
//! ```text
//! {"name":"api","id":"id-1","address":"10.0.0.7","port":8080,"sslPort":null,"payload":null,
//!  "registrationTimeUTC":1700000000123,"serviceType":"DYNAMIC","uriSpec":null}
//! ```
//!
//! `DYNAMIC` instances are EPHEMERAL nodes, `DYNAMIC_SEQUENTIAL` ones EPHEMERAL_SEQUENTIAL
//! (named `_c_<uuid>-<id><sequence>` by the framework's protected create), `STATIC` and
//! `PERMANENT` ones PERSISTENT. The payload is any JSON ([`serde_json::Value`]) or your own serde
//! type; see [`JsonInstanceSerializer`] for Jackson's `"@class"`.
//!
//! ## Connection loss and session expiry
//! A [`ServiceDiscovery`] writes its nodes from one background task. After the framework opens a
//! new session (the old one expired), that task writes every instance registered here again,
//! exactly once, with the data last given to `update`; a reconnection of the same session
//! writes nothing. What differs from Curator, and why, is in `docs/discovery.md`.
//!
//! ## Finding instances: the service cache and the provider
//! A [`ServiceCache`] keeps one service's instances in memory, through the project's path cache
//! (`zk-recipes-cache`: one persistent recursive watch), and its [`events`](ServiceCache::events)
//! say which instance was added, updated or removed. After a connection loss or a new session it
//! reads the service again and reports exactly the differences. A [`ServiceProvider`] picks one
//! instance from such a cache ([`ProviderStrategy`]: round robin, random, sticky), never a
//! disabled one, and leaves out for a while an instance its caller noted errors against
//! ([`DownInstancePolicy`]).
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_discovery::{ProviderStrategy, ServiceCacheEvent, ServiceDiscovery};
//! use zk_recipes_framework::Framework;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let discovery = ServiceDiscovery::builder(&framework, "/services").build()?;
//! let billing = discovery
//!     .service_provider("billing")
//!     .strategy(ProviderStrategy::RoundRobin)
//!     .start(Duration::from_secs(10))
//!     .await?;
//! if let Some(instance) = billing.get_instance() {
//!     println!("calling {:?}", instance.resolve_uri());
//! }
//! let mut events = billing.cache().events();
//! while let Some(event) = events.next().await {
//!     if let ServiceCacheEvent::Removed(gone) = event {
//!         println!("billing {} left", gone.id);
//!     }
//! }
//! # Ok(()) }
//! ```
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_discovery::{ServiceDiscovery, ServiceInstance, UriSpec};
//! use zk_recipes_framework::{Deadline, Framework};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let discovery = ServiceDiscovery::builder(&framework, "/services").build()?;
//! let deadline = || Deadline::after(Duration::from_secs(10));
//!
//! let me = ServiceInstance::builder("api")
//!     .port(8080)
//!     .payload(serde_json::json!({"zone": "eu-1"}))
//!     .uri_spec(UriSpec::parse("{scheme}://{address}:{port}")?)
//!     .build();
//! discovery.register(&me, deadline()).await?;
//! for peer in discovery.query_for_instances("api", deadline()).await? {
//!     println!("{} at {}", peer.id, peer.resolve_uri().unwrap_or_default());
//! }
//! discovery.close(deadline()).await?;
//! # Ok(()) }
//! ```

mod address;
mod discovery;
mod error;
mod instance;
mod jackson;
mod json;
mod provider;
mod service_cache;
mod uri_spec;

pub use discovery::{ServiceDiscovery, ServiceDiscoveryBuilder};
pub use error::{DiscoveryError, Result};
pub use instance::{ServiceInstance, ServiceInstanceBuilder, ServiceType};
pub use json::JsonInstanceSerializer;
pub use provider::{DownInstancePolicy, ProviderStrategy, ServiceProvider, ServiceProviderBuilder};
pub use service_cache::{ServiceCache, ServiceCacheBuilder, ServiceCacheEvent, ServiceCacheEvents};
pub use uri_spec::{
    UriSpec, UriSpecPart, FIELD_ADDRESS, FIELD_CLOSE_BRACE, FIELD_ID, FIELD_NAME, FIELD_OPEN_BRACE,
    FIELD_PORT, FIELD_REGISTRATION_TIME_UTC, FIELD_SCHEME, FIELD_SERVICE_TYPE, FIELD_SSL_PORT,
};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<super::ServiceDiscovery>();
        assert_send_sync::<super::ServiceDiscoveryBuilder>();
        assert_send_sync::<super::ServiceInstance>();
        assert_send_sync::<super::ServiceInstanceBuilder>();
        assert_send_sync::<super::ServiceType>();
        assert_send_sync::<super::UriSpec>();
        assert_send_sync::<super::UriSpecPart>();
        assert_send_sync::<super::JsonInstanceSerializer>();
        assert_send_sync::<super::DiscoveryError>();
        assert_send_sync::<super::ServiceCache>();
        assert_send_sync::<super::ServiceCacheBuilder>();
        assert_send_sync::<super::ServiceCacheEvent>();
        assert_send_sync::<super::ServiceCacheEvents>();
        assert_send_sync::<super::ServiceProvider>();
        assert_send_sync::<super::ServiceProviderBuilder>();
        assert_send_sync::<super::ProviderStrategy>();
        assert_send_sync::<super::DownInstancePolicy>();
    }
}
