//! The writes of a [`ServiceDiscovery`] (Curator's `registerService`, `updateService`,
//! `unregisterService`, `close`): each checks its input, then hands a command to the registrar
//! (`registrar/`) and waits for its outcome within the deadline.

use serde::Serialize;
use tracing::warn;
use zk_recipes_framework::Deadline;

use super::handle::ServiceDiscovery;
use super::registrar::{Command, Registration};
use crate::error::Result;
use crate::instance::{ServiceInstance, ServiceType};

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
    /// Before anything is sent:
    /// [`DiscoveryError::InvalidArgument`](crate::DiscoveryError::InvalidArgument) for an empty name or
    /// id, or a `/` in either; [`DiscoveryError::Framework`](crate::DiscoveryError::Framework) with
    /// `InvalidPath` or `DataTooLarge` (over the framework's `max_node_data`);
    /// [`DiscoveryError::Serialize`](crate::DiscoveryError::Serialize). Then, from the framework: a
    /// timeout at the deadline, a connection or session lost, a server error. After a timeout or a
    /// connection or session loss (the outcome unknown) the instance stays registered and its node is
    /// written in the background once a session is there; after any other error (the server refused) it
    /// is not registered. [`DiscoveryError::Closed`](crate::DiscoveryError::Closed) once closed.
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
    /// [`DiscoveryError::NotRegistered`](crate::DiscoveryError::NotRegistered) for an id not registered
    /// here; [`DiscoveryError::InvalidArgument`](crate::DiscoveryError::InvalidArgument) if the name or
    /// service type differs from the registered one (register it again instead); the checks of
    /// [`register`](Self::register), before anything is sent; then, from the framework: a timeout, a
    /// connection or session loss, a server error. The new data is kept and written in the background
    /// after any of those.
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
    /// The first delete that failed (a timeout, a connection loss); that node is then deleted by the
    /// framework's cleanup worker in the background.
    /// [`DiscoveryError::Closed`](crate::DiscoveryError::Closed) if the task already ended.
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
