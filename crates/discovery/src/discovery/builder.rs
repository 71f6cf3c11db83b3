//! `ServiceDiscoveryBuilder`: how a [`ServiceDiscovery`] is configured and started (its
//! registrar task spawned), and [`ServiceDiscovery::builder`].

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use tokio::sync::mpsc;
use tracing::{info_span, Instrument};
use zk_recipes_framework::{path, Error as FrameworkError, Framework};

use super::handle::ServiceDiscovery;
use super::registrar::{RegisteredPaths, Registrar};
use crate::error::Result;
use crate::json::JsonInstanceSerializer;

/// Configures a [`ServiceDiscovery`] ([`ServiceDiscovery::builder`]).
///
/// Defaults: Curator's [`JsonInstanceSerializer`] (`enabled` not written), `watch_instances`
/// off, payloads as [`serde_json::Value`] until [`payload_type`](Self::payload_type) says
/// otherwise.
///
/// ```no_run
/// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_discovery::Result<()> {
/// use zk_recipes_discovery::{JsonInstanceSerializer, ServiceDiscovery};
///
/// #[derive(serde::Serialize, serde::Deserialize)]
/// struct Details {
///     zone: String,
/// }
///
/// let discovery = ServiceDiscovery::builder(&framework, "/services")
///     .payload_type::<Details>()
///     .serializer(JsonInstanceSerializer::new().write_enabled(true))
///     .build()?;
/// # drop(discovery);
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until build() is called"]
pub struct ServiceDiscoveryBuilder<P = serde_json::Value> {
    framework: Framework,
    base_path: String,
    serializer: JsonInstanceSerializer,
    watch_instances: bool,
    payload: PhantomData<fn() -> P>,
}

impl<P> ServiceDiscoveryBuilder<P> {
    /// How instances are written and read. Defaults to [`JsonInstanceSerializer::new`]
    /// (Curator's default: `enabled` is not written).
    pub fn serializer(mut self, serializer: JsonInstanceSerializer) -> Self {
        self.serializer = serializer;
        self
    }

    /// Curator's `watchInstances`: follow the nodes of the instances registered *here*, so that a
    /// change made by someone else (an operator setting `enabled` to false, say) is what a later
    /// re-registration writes. Defaults to `false`. It has nothing to do with a
    /// [`ServiceCache`](crate::ServiceCache), which follows every instance of a service on its
    /// own, as Curator's does.
    ///
    /// With it, the discovery sets one persistent recursive watch on the base path at its first
    /// registration (removed by `close`) and, when one of its nodes changes, takes the node's data
    /// as the instance's registration, but only when the node's `mzxid` is newer than the
    /// discovery's own last write there (so a late event of an older write of ours never undoes an
    /// [`update`](ServiceDiscovery::update)), no write of ours is pending, and the data is an
    /// instance with the same name and id. A node deleted by someone else is not adopted (it is
    /// written again after a new session, as without the watch). Needs ZooKeeper 3.6+.
    pub fn watch_instances(mut self, watch_instances: bool) -> Self {
        self.watch_instances = watch_instances;
        self
    }

    /// The payload type of the instances registered and read (`serde_json::Value` by default).
    pub fn payload_type<Q>(self) -> ServiceDiscoveryBuilder<Q> {
        ServiceDiscoveryBuilder {
            framework: self.framework,
            base_path: self.base_path,
            serializer: self.serializer,
            watch_instances: self.watch_instances,
            payload: PhantomData,
        }
    }

    /// Starts the discovery: a background task (the registrar) writes the instances registered
    /// through it, and writes them again after a new session. Needs a tokio runtime. Nothing is
    /// sent until something is registered or queried (Curator's `start()` registers its
    /// `thisInstance`; here, call [`register`](ServiceDiscovery::register)).
    ///
    /// # Errors
    /// [`DiscoveryError::Framework`](crate::DiscoveryError::Framework) with `InvalidPath` for a base
    /// path that is not a valid ZooKeeper path.
    pub fn build(self) -> Result<ServiceDiscovery<P>> {
        path::validate(&self.base_path)
            .map_err(|reason| FrameworkError::InvalidPath { path: self.base_path.clone(), reason })?;
        let (commands, receiver) = mpsc::unbounded_channel();
        let paths: RegisteredPaths = Arc::default();
        let registrar = Registrar {
            framework: self.framework.clone(),
            base_path: self.base_path.clone(),
            commands: receiver,
            events: self.framework.connection_events(),
            paths: Arc::clone(&paths),
            watch_instances: self.watch_instances,
        };
        let span = info_span!("service_discovery", base_path = %self.base_path);
        tokio::spawn(registrar.run().instrument(span));
        Ok(ServiceDiscovery {
            framework: self.framework,
            base_path: self.base_path,
            serializer: self.serializer,
            watch_instances: self.watch_instances,
            commands,
            paths,
            payload: PhantomData,
        })
    }
}

impl<P> fmt::Debug for ServiceDiscoveryBuilder<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceDiscoveryBuilder")
            .field("base_path", &self.base_path)
            .field("serializer", &self.serializer)
            .field("watch_instances", &self.watch_instances)
            .finish_non_exhaustive()
    }
}

impl ServiceDiscovery {
    /// A builder for a discovery under `base_path` (Curator's `ServiceDiscoveryBuilder.builder(cls)
    /// .client(client).basePath(basePath)`), with payloads as [`serde_json::Value`] unless
    /// [`payload_type`](ServiceDiscoveryBuilder::payload_type) says otherwise.
    pub fn builder(framework: &Framework, base_path: &str) -> ServiceDiscoveryBuilder {
        ServiceDiscoveryBuilder {
            framework: framework.clone(),
            base_path: base_path.to_owned(),
            serializer: JsonInstanceSerializer::new(),
            watch_instances: false,
            payload: PhantomData,
        }
    }
}
