//! The queries of a [`ServiceDiscovery`] (Curator's `queryForNames`, `queryForInstances`,
//! `queryForInstance`): each reads the server directly, with no task in between.

use serde::de::DeserializeOwned;
use tracing::warn;
use zk_recipes_framework::{path, Deadline};

use super::handle::ServiceDiscovery;
use super::registrar::sequential_node_id;
use crate::error::{DiscoveryError, Result};
use crate::instance::ServiceInstance;

impl<P> ServiceDiscovery<P> {
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
