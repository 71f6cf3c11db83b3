//! The `ServiceDiscovery` handle: its fields and accessors, the checks of names and paths, and
//! the channel to the registrar (`registrar/`) that every write goes through. Its methods live in
//! the files above: `builder.rs` (how one is made), `writes.rs` (register, update, unregister,
//! close) and `queries.rs` (reads straight from the server).

use std::fmt;
use std::marker::PhantomData;

use tokio::sync::{mpsc, oneshot};
use zk_recipes_framework::{path, Deadline, Error as FrameworkError, Framework};

use super::registrar::{Command, RegisteredPaths};
use crate::error::{DiscoveryError, Result};
use crate::json::JsonInstanceSerializer;

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
    pub(super) framework: Framework,
    pub(super) base_path: String,
    pub(super) serializer: JsonInstanceSerializer,
    pub(super) watch_instances: bool,
    pub(super) commands: mpsc::UnboundedSender<Command>,
    pub(super) paths: RegisteredPaths,
    pub(super) payload: PhantomData<fn() -> P>,
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
    pub(crate) fn check_names(&self, name: &str, id: Option<&str>, sequential: bool) -> Result<String> {
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

    pub(super) async fn send(
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
