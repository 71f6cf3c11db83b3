//! `ServiceDiscovery`: register this process's instances, find everybody's (Curator's
//! `ServiceDiscovery`).
//!
//! The handle (this file) checks its input, serializes instances and reads the server directly
//! for queries; every write goes through the registrar (`registrar.rs`), the one background task
//! that keeps this discovery's nodes as registered.

mod registrar;

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::{mpsc, oneshot};
use tracing::{info_span, warn, Instrument};
use zk_recipes_framework::{path, Deadline, Error as FrameworkError, Framework};

use crate::error::{DiscoveryError, Result};
use crate::instance::{ServiceInstance, ServiceType};
use crate::json::JsonInstanceSerializer;
use registrar::{sequential_node_id, Command, RegisteredPaths, Registrar, Registration};

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

    /// Curator's `watchInstances`: follow the nodes of the instances registered here, so that a
    /// change made by someone else is what a later re-registration writes. Defaults to `false`.
    /// Stored for the service cache; the registration itself does not watch yet (see
    /// `docs/discovery.md`).
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
    /// [`DiscoveryError::Framework`] with `InvalidPath` for a base path that is not a valid
    /// ZooKeeper path.
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

/// Registers this process's service instances and finds everybody's, as Curator's
/// `ServiceDiscovery` does, in the same znodes: `<base path>/<service name>/<instance id>`, each
/// holding Curator's JSON of the instance ([`JsonInstanceSerializer`]). Java services using
/// Curator (or Spring Cloud Zookeeper, Dubbo, ...) with the same base path see the instances
/// registered here, and these queries see theirs.
///
/// What differs from Curator, on purpose:
/// - **Re-registration only after a new session.** Ephemeral instances go with their session;
///   when the framework opens a new one, every instance registered here is written again, once,
///   with the data last given to [`update`](Self::update). A reconnection of the same session
///   writes nothing (Curator re-registers on every reconnection, CURATOR-320, and with stale data,
///   CURATOR-146/181).
/// - **`PERMANENT` instances stay** when the discovery is closed (CURATOR-94); every other
///   instance registered here is deleted by [`close`](Self::close), which waits for the deletes.
/// - **No empty service nodes pile up** (CURATOR-163): the base path and service nodes are
///   containers, which the server deletes once their last instance is gone.
/// - **A lost reply is resolved, not duplicated**: a `DYNAMIC_SEQUENTIAL` instance uses the
///   framework's protected create (node `_c_<uuid>-<id><sequence>`, found again by its prefix), and
///   a fixed-name instance whose create may have happened finds its own node and keeps it.
///
/// Not `Clone`: share it in an `Arc`. Dropping it without `close` deletes its nodes (but
/// `PERMANENT` ones) in the background, through the framework's cleanup worker.
///
/// # Connection loss and session expiry
/// Calls made while the connection is down wait for it until their deadline. A registration or
/// update that could not be confirmed (a timeout, a connection lost with the request in flight, a
/// session lost) stays in this discovery's registry and is written in the background once a
/// session is there, as Curator's registry keeps it. After a session expiry, every instance is
/// written again on the new session (a stale node of the old session, if the server still holds
/// it, is replaced).
///
/// ```no_run
/// use std::time::Duration;
/// use zk_recipes_discovery::{ServiceDiscovery, ServiceInstance, UriSpec};
/// use zk_recipes_framework::{Deadline, Framework};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let framework = Framework::builder("127.0.0.1:2181").start()?;
/// let discovery = ServiceDiscovery::builder(&framework, "/services").build()?;
/// let deadline = || Deadline::after(Duration::from_secs(10));
///
/// let me = ServiceInstance::builder("api")
///     .port(8080)
///     .uri_spec(UriSpec::parse("{scheme}://{address}:{port}")?)
///     .build();
/// discovery.register(&me, deadline()).await?;
/// for peer in discovery.query_for_instances("api", deadline()).await? {
///     println!("{} at {:?}", peer.id, peer.resolve_uri());
/// }
/// discovery.close(deadline()).await?;
/// # Ok(()) }
/// ```
pub struct ServiceDiscovery<P = serde_json::Value> {
    framework: Framework,
    base_path: String,
    serializer: JsonInstanceSerializer,
    watch_instances: bool,
    commands: mpsc::UnboundedSender<Command>,
    paths: RegisteredPaths,
    payload: PhantomData<fn() -> P>,
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

impl<P> ServiceDiscovery<P> {
    /// The base path.
    pub fn base_path(&self) -> &str {
        &self.base_path
    }

    /// The serializer instances are written and read with.
    pub fn serializer(&self) -> &JsonInstanceSerializer {
        &self.serializer
    }

    /// Whether `watch_instances` was asked for (see the builder).
    pub fn watch_instances(&self) -> bool {
        self.watch_instances
    }

    /// The framework it runs on.
    pub fn framework(&self) -> &Framework {
        &self.framework
    }

    /// The path of service `name`'s node: `<base path>/<name>`.
    pub fn path_for_name(&self, name: &str) -> String {
        path::join(&self.base_path, name)
    }

    /// The node path of an instance registered here, once created (for `DYNAMIC_SEQUENTIAL`,
    /// with its protected prefix and sequence number); `None` for an id not registered here or not
    /// created yet.
    pub fn instance_path(&self, id: &str) -> Option<String> {
        self.paths.lock().get(id).cloned().flatten()
    }

    /// The ids of the instances registered here (and not unregistered), sorted.
    pub fn registered_ids(&self) -> Vec<String> {
        self.paths.lock().keys().cloned().collect()
    }

    fn fixed_path(&self, name: &str, id: &str) -> String {
        path::join(&self.path_for_name(name), id)
    }

    /// Checks a service name and an instance id: one node name each, a valid path together.
    fn check_names(&self, name: &str, id: Option<&str>, sequential: bool) -> Result<String> {
        check_node_name("service name", name)?;
        let service_path = self.path_for_name(name);
        let full_path = match id {
            None => service_path,
            Some(id) => {
                check_node_name("instance id", id)?;
                self.fixed_path(name, id)
            }
        };
        let checked = match sequential {
            true => path::validate_sequential(&full_path),
            false => path::validate(&full_path),
        };
        checked.map_err(|reason| FrameworkError::InvalidPath { path: full_path.clone(), reason })?;
        Ok(full_path)
    }

    async fn send(
        &self,
        deadline: Deadline,
        command: impl FnOnce(oneshot::Sender<Result<()>>) -> Command,
    ) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(command(reply)).map_err(|_| DiscoveryError::Closed)?;
        match deadline.run(async { Ok(answer.await) }).await? {
            Ok(outcome) => outcome,
            Err(_) => Err(DiscoveryError::Closed),
        }
    }

    /// Queries the service names under the base path (Curator's `queryForNames`), sorted; none
    /// when the base path does not exist (where Curator throws `NoNode`). A service whose last
    /// instance just left is listed until the server reaps its container.
    ///
    /// # Errors
    /// From the framework: a timeout at the deadline, a server error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
    /// for name in discovery.query_for_names(std::time::Duration::from_secs(5)).await? {
    ///     println!("{name}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn query_for_names(&self, deadline: impl Into<Deadline>) -> Result<Vec<String>> {
        match self.framework.children(&self.base_path, deadline).await {
            Ok((mut names, _)) => {
                names.sort();
                Ok(names)
            }
            Err(err) if err.is_no_node() => Ok(Vec::new()),
            Err(err) => Err(err.into()),
        }
    }
}

impl<P: Serialize> ServiceDiscovery<P> {
    /// Registers `instance` (Curator's `registerService`): creates its node
    /// `<base path>/<name>/<id>` (EPHEMERAL for `DYNAMIC`, EPHEMERAL_SEQUENTIAL
    /// `<base path>/<name>/_c_<uuid>-<id><sequence>` for `DYNAMIC_SEQUENTIAL`, PERSISTENT for
    /// `STATIC` and `PERMANENT`), with missing parents as containers, and keeps it registered: it is
    /// written again after a new session.
    ///
    /// Registering an id again replaces the registration: the node is given the new data in
    /// place (or, when the name or the kind of node changes, the old node is deleted and a new
    /// one created). A node already at the path is handled as Curator does: ours (a create whose
    /// reply was lost) is kept; another session's is deleted and ours created.
    ///
    /// # Errors
    /// Before anything is sent: [`DiscoveryError::InvalidArgument`] for an empty name or id, or a
    /// `/` in either; [`DiscoveryError::Framework`] with `InvalidPath` or `DataTooLarge` (over the
    /// framework's `max_node_data`); [`DiscoveryError::Serialize`]. Then, from the framework: a
    /// timeout at the deadline, a connection or session lost, a server error. After a timeout or a
    /// connection or session loss (the outcome unknown) the instance stays registered and its node
    /// is written in the background once a session is there; after any other error (the server
    /// refused) it is not registered. [`DiscoveryError::Closed`] once closed.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: once the call is first polled the registration is with the
    /// discovery's task, which carries it out within the deadline whether or not the call still
    /// waits (with the outcome rules above); a cancelled call only misses the outcome.
    /// [`unregister`](Self::unregister) undoes it either way.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
    /// use zk_recipes_discovery::{ServiceInstance, ServiceType};
    ///
    /// let worker = ServiceInstance::builder("worker").service_type(ServiceType::DynamicSequential).build();
    /// discovery.register(&worker, std::time::Duration::from_secs(5)).await?;
    /// println!("registered at {:?}", discovery.instance_path(&worker.id));
    /// # Ok(()) }
    /// ```
    pub async fn register(&self, instance: &ServiceInstance<P>, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        let registration = self.registration(instance)?;
        self.send(deadline, |reply| Command::Register { registration, deadline, reply }).await
    }

    /// Updates a registered instance's data (Curator's `updateService`): sets its node's data, and
    /// makes it what every later re-registration writes (even if this call fails).
    ///
    /// # Errors
    /// [`DiscoveryError::NotRegistered`] for an id not registered here;
    /// [`DiscoveryError::InvalidArgument`] if the name or service type differs from the
    /// registered one (register it again instead); the checks of [`register`](Self::register),
    /// before anything is sent; then, from the framework: a timeout, a connection or session loss,
    /// a server error. The new data is kept and written in the background after any of those.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: once the call is first polled the new data is with the discovery's
    /// task, which keeps it for re-registrations and writes it within the deadline whether or not
    /// the call still waits; a cancelled call only misses the outcome.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery, me: zk_recipes_discovery::ServiceInstance) -> zk_recipes_discovery::Result<()> {
    /// let mut moved = me.clone();
    /// moved.port = Some(8081);
    /// discovery.update(&moved, std::time::Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update(&self, instance: &ServiceInstance<P>, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        let registration = self.registration(instance)?;
        self.send(deadline, |reply| Command::Update { registration, deadline, reply }).await
    }

    fn registration(&self, instance: &ServiceInstance<P>) -> Result<Registration> {
        let sequential = instance.service_type == ServiceType::DynamicSequential;
        self.check_names(&instance.name, Some(&instance.id), sequential)?;
        let data = self.serializer.serialize(instance)?;
        self.framework.check_data_size(data.len())?;
        if !instance.enabled && !self.serializer.writes_enabled() {
            warn!(
                id = instance.id,
                "a disabled instance is written without `enabled` (Curator's default serializer), so readers see it enabled; use JsonInstanceSerializer::write_enabled(true)"
            );
        }
        Ok(Registration {
            name: instance.name.clone(),
            id: instance.id.clone(),
            service_type: instance.service_type,
            data,
        })
    }
}

impl<P: DeserializeOwned> ServiceDiscovery<P> {
    /// Queries the instances of service `name` (Curator's `queryForInstances`), ordered by node
    /// name: every child of `<base path>/<name>` read at once; none when the service does not
    /// exist. A node that is gone by the time it is read is left out, and so is one whose data
    /// is not an instance with a payload of type `P` (logged as a warning; Curator fails the
    /// whole query).
    ///
    /// # Errors
    /// [`DiscoveryError::InvalidArgument`] for an empty name or one with a `/`, before anything is
    /// sent; from the framework: a timeout at the deadline, a server error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
    /// let instances = discovery.query_for_instances("api", std::time::Duration::from_secs(5)).await?;
    /// let uris: Vec<String> = instances.iter().filter_map(|instance| instance.resolve_uri()).collect();
    /// # Ok(()) }
    /// ```
    pub async fn query_for_instances(
        &self,
        name: &str,
        deadline: impl Into<Deadline>,
    ) -> Result<Vec<ServiceInstance<P>>> {
        let deadline = deadline.into();
        let service_path = self.check_names(name, None, false)?;
        let mut children = match self.framework.children(&service_path, deadline).await {
            Ok((children, _)) => children,
            Err(err) if err.is_no_node() => return Ok(Vec::new()),
            Err(err) => return Err(err.into()),
        };
        children.sort();
        let reads = children.iter().map(|child| {
            let node_path = path::join(&service_path, child);
            async move {
                let read = self.framework.get_data(&node_path, deadline).await;
                (node_path, read)
            }
        });
        let mut instances = Vec::with_capacity(children.len());
        for (node_path, read) in futures::future::join_all(reads).await {
            match read {
                Ok(node) => match self.read_instance(&node_path, &node.data) {
                    Ok(instance) => instances.push(instance),
                    Err(err) => warn!(%err, "left out of the query"),
                },
                Err(err) if err.is_no_node() => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(instances)
    }

    /// Queries one instance (Curator's `queryForInstance`): the node `<base path>/<name>/<id>`, or
    /// `None`. A `DYNAMIC_SEQUENTIAL` instance, whose node name carries a sequence number, is
    /// found by its name too (where Curator finds nothing).
    ///
    /// # Errors
    /// [`DiscoveryError::InvalidArgument`] for an empty name or id, or a `/` in one, before
    /// anything is sent; [`DiscoveryError::Deserialize`] when the node's data is not an instance
    /// of this payload type; from the framework: a timeout, a server error.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
    /// if let Some(instance) = discovery.query_for_instance("api", "id-1", std::time::Duration::from_secs(5)).await? {
    ///     println!("{:?}:{:?}", instance.address, instance.port);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn query_for_instance(
        &self,
        name: &str,
        id: &str,
        deadline: impl Into<Deadline>,
    ) -> Result<Option<ServiceInstance<P>>> {
        let deadline = deadline.into();
        let node_path = self.check_names(name, Some(id), false)?;
        match self.framework.get_data(&node_path, deadline).await {
            Ok(node) => return self.read_instance(&node_path, &node.data).map(Some),
            Err(err) if err.is_no_node() => {}
            Err(err) => return Err(err.into()),
        }
        let service_path = self.path_for_name(name);
        let mut children = match self.framework.children(&service_path, deadline).await {
            Ok((children, _)) => children,
            Err(err) if err.is_no_node() => return Ok(None),
            Err(err) => return Err(err.into()),
        };
        children.sort();
        for child in children.iter().filter(|child| sequential_node_id(child) == Some(id)) {
            let node_path = path::join(&service_path, child);
            match self.framework.get_data(&node_path, deadline).await {
                Ok(node) => {
                    let instance = self.read_instance(&node_path, &node.data)?;
                    if instance.id == id {
                        return Ok(Some(instance));
                    }
                }
                Err(err) if err.is_no_node() => {}
                Err(err) => return Err(err.into()),
            }
        }
        Ok(None)
    }

    fn read_instance(&self, node_path: &str, data: &[u8]) -> Result<ServiceInstance<P>> {
        self.serializer.deserialize(data).map_err(|err| match err {
            DiscoveryError::Deserialize { source, .. } => {
                DiscoveryError::Deserialize { path: Some(node_path.to_owned()), source }
            }
            other => other,
        })
    }
}

impl<P> ServiceDiscovery<P> {
    /// Unregisters `instance` (Curator's `unregisterService`): deletes its node and stops keeping
    /// it, whatever its type (a `PERMANENT` instance too). An instance not registered here is
    /// deleted by its name and id (a `DYNAMIC_SEQUENTIAL` one found by its node name), where
    /// Curator does nothing. A missing node is not an error. When the last instance of a
    /// service is gone, the server reaps the service's container node.
    ///
    /// # Errors
    /// Before anything is sent: the name and id checks of [`register`](Self::register). Then,
    /// from the framework: a timeout, a connection loss, a server error; the delete is then
    /// tried again in the background (the instance is unregistered either way).
    ///
    /// # Cancel safety
    /// Cancel safe in effect: once the call is first polled the discovery's task deletes the
    /// node whether or not the call still waits; a cancelled call only misses the outcome.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery, me: zk_recipes_discovery::ServiceInstance) -> zk_recipes_discovery::Result<()> {
    /// discovery.unregister(&me, std::time::Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn unregister(
        &self,
        instance: &ServiceInstance<P>,
        deadline: impl Into<Deadline>,
    ) -> Result<()> {
        let deadline = deadline.into();
        let sequential = instance.service_type == ServiceType::DynamicSequential;
        self.check_names(&instance.name, Some(&instance.id), sequential)?;
        let (name, id) = (instance.name.clone(), instance.id.clone());
        self.send(deadline, |reply| Command::Unregister { name, id, sequential, deadline, reply }).await
    }

    /// Closes the discovery (Curator's `close`): deletes the node of every instance registered
    /// here but `PERMANENT` ones, waiting for the deletes (within the deadline), and stops its
    /// background task. `PERMANENT` instances stay registered (Curator deletes them: CURATOR-94);
    /// unregister one to delete it.
    ///
    /// # Errors
    /// The first delete that failed (a timeout, a connection loss); that node is then deleted by
    /// the framework's cleanup worker in the background. [`DiscoveryError::Closed`] if the task
    /// already ended.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: once the call is first polled the discovery's task deletes the
    /// nodes and ends whether or not the call still waits; a cancelled call only misses the
    /// outcome.
    ///
    /// ```no_run
    /// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
    /// discovery.close(std::time::Duration::from_secs(5)).await?;
    /// # Ok(()) }
    /// ```
    pub async fn close(self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        self.send(deadline, |reply| Command::Close { deadline, reply }).await
    }
}

impl<P> fmt::Debug for ServiceDiscovery<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServiceDiscovery")
            .field("base_path", &self.base_path)
            .field("serializer", &self.serializer)
            .field("watch_instances", &self.watch_instances)
            .field("registered", &self.registered_ids())
            .finish_non_exhaustive()
    }
}

/// A service name or instance id: one node name.
fn check_node_name(what: &str, name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "is empty"
    } else if name.contains('/') {
        "contains '/'"
    } else if name == "." || name == ".." {
        "is a relative path name"
    } else {
        return Ok(());
    };
    Err(DiscoveryError::InvalidArgument(format!("the {what} {name:?} {reason}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_must_be_one_node_name() {
        assert!(check_node_name("service name", "api").is_ok());
        for bad in ["", "a/b", "/", ".", ".."] {
            assert!(
                matches!(check_node_name("service name", bad), Err(DiscoveryError::InvalidArgument(_))),
                "{bad:?}"
            );
        }
    }
}
