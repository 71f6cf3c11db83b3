//! The registrar: the one background task that writes a discovery's instance nodes.
//!
//! It keeps what this discovery registered (the *registry*: per instance id, the bytes its node
//! must hold) and makes the server agree with it:
//! - `register`, `update` and `unregister` are commands it runs one at a time, each within its
//!   caller's deadline, so a cancelled call still runs to its end and the registry stays true;
//! - after a **new session** (a connection event of a session other than the one a node was
//!   written on) it writes every instance again, with the bytes last given (CURATOR-146/181);
//!   a reconnection of the same session writes nothing (CURATOR-320);
//! - what failed with an unknown outcome (a timeout, a lost connection) is tried again in the
//!   background, with the framework's [`Backoff`] between rounds;
//! - on close it deletes every node but `PERMANENT` ones (CURATOR-94), waiting for the deletes.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::time::Instant;
use tracing::{debug, info, warn};
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{
    path, ConnectionEvents, ConnectionState, ConnectionUpdate, Deadline, Error as FrameworkError, Framework,
    ParentMode, ProtectedCreate,
};

use crate::error::{DiscoveryError, Result};
use crate::instance::ServiceType;

/// How long one background write (a re-registration, a retried delete) may take.
const BACKGROUND_OPERATION_TIMEOUT: Duration = Duration::from_secs(10);

/// How many times a write at a fixed path starts over when the node changes under it.
const MAX_ATTEMPTS: usize = 4;

/// The paths of the instances registered here, by id: what `ServiceDiscovery::instance_path`
/// reads (`None` until the node was first created).
pub(crate) type RegisteredPaths = Arc<Mutex<BTreeMap<String, Option<String>>>>;

/// An instance to register: who it is and the bytes its node holds.
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    pub(crate) name: String,
    pub(crate) id: String,
    pub(crate) service_type: ServiceType,
    pub(crate) data: Vec<u8>,
}

pub(crate) enum Command {
    Register {
        registration: Registration,
        deadline: Deadline,
        reply: oneshot::Sender<Result<()>>,
    },
    Update {
        registration: Registration,
        deadline: Deadline,
        reply: oneshot::Sender<Result<()>>,
    },
    Unregister {
        name: String,
        id: String,
        sequential: bool,
        deadline: Deadline,
        reply: oneshot::Sender<Result<()>>,
    },
    Close {
        deadline: Deadline,
        reply: oneshot::Sender<Result<()>>,
    },
}

/// One registered instance.
#[derive(Debug)]
struct Entry {
    registration: Registration,
    /// The node's path once created (for a fixed name, known from the start).
    path: Option<String>,
    /// The session on which the node was last known to hold `registration.data` (for a persistent
    /// node, the session it was last written or checked on). `None`: to be written.
    synced_on: Option<i64>,
}

/// Where a write starts: creating the node, or setting the data of the node that should be there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum First {
    Create,
    Set,
}

pub(crate) struct Registrar {
    pub(crate) framework: Framework,
    pub(crate) base_path: String,
    pub(crate) commands: mpsc::UnboundedReceiver<Command>,
    pub(crate) events: ConnectionEvents,
    pub(crate) paths: RegisteredPaths,
}

struct State {
    framework: Framework,
    base_path: String,
    entries: BTreeMap<String, Entry>,
    /// Nodes to delete whose delete failed (an unregister, a replaced registration).
    removals: BTreeSet<String>,
    paths: RegisteredPaths,
    backoff: Backoff,
    retry_at: Option<Instant>,
}

impl Registrar {
    /// The background loop: serves commands, follows connection events, retries what failed.
    /// Ends with `close` or when the discovery is dropped (then its nodes are deleted by the
    /// framework's cleanup worker).
    pub(crate) async fn run(self) {
        let Registrar { framework, base_path, mut commands, events, paths } = self;
        let mut state = State {
            framework,
            base_path,
            entries: BTreeMap::new(),
            removals: BTreeSet::new(),
            paths,
            backoff: Backoff::new(Duration::from_millis(100), Duration::from_secs(10)),
            retry_at: None,
        };
        let mut events = Some(events);
        loop {
            let retry_at = state.retry_at;
            let retry = async move {
                match retry_at {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let event = async {
                match events.as_mut() {
                    Some(events) => events.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                command = commands.recv() => match command {
                    None => return state.dropped(),
                    Some(Command::Close { deadline, reply }) => {
                        let _ = reply.send(state.close(deadline).await);
                        return;
                    }
                    Some(command) => state.serve(command).await,
                },
                update = event => match update {
                    // The framework is closed: commands still get their (closed) answers.
                    None => events = None,
                    Some(update) => state.on_connection(update).await,
                },
                () = retry => {
                    state.retry_at = None;
                    state.reconcile().await;
                }
            }
        }
    }
}

impl State {
    async fn serve(&mut self, command: Command) {
        match command {
            Command::Register { registration, deadline, reply } => {
                let _ = reply.send(self.register(registration, deadline).await);
            }
            Command::Update { registration, deadline, reply } => {
                let _ = reply.send(self.update(registration, deadline).await);
            }
            Command::Unregister { name, id, sequential, deadline, reply } => {
                let _ = reply.send(self.unregister(&name, &id, sequential, deadline).await);
            }
            // `run` handles `Close` itself (it ends the loop); never here.
            Command::Close { reply, .. } => drop(reply),
        }
    }

    async fn on_connection(&mut self, update: ConnectionUpdate) {
        match update {
            ConnectionUpdate::Changed(event) => match event.state {
                ConnectionState::Connected | ConnectionState::Reconnected => {
                    debug!(session = event.session_id.0, generation = event.generation, "connected");
                    self.reconcile().await;
                }
                ConnectionState::Suspended | ConnectionState::Lost | ConnectionState::ReadOnly => {}
            },
            // Transitions were missed: whatever happened, compare with the session there is now.
            ConnectionUpdate::Lagged { .. } => self.reconcile().await,
        }
    }

    /// The current session, if writes can be sent on it now.
    fn writable_session(&self) -> Option<i64> {
        let snapshot = self.framework.current();
        match snapshot.state {
            Some(ConnectionState::Connected | ConnectionState::Reconnected) => {
                snapshot.session_id.map(|id| id.0)
            }
            _ => None,
        }
    }

    fn fixed_path(&self, name: &str, id: &str) -> String {
        path::join(&path::join(&self.base_path, name), id)
    }

    fn service_path(&self, name: &str) -> String {
        path::join(&self.base_path, name)
    }

    async fn register(&mut self, registration: Registration, deadline: Deadline) -> Result<()> {
        let sequential = registration.service_type == ServiceType::DynamicSequential;
        let fixed_path = (!sequential).then(|| self.fixed_path(&registration.name, &registration.id));
        let mut first = First::Create;
        let mut inherited = None;
        if let Some(old) = self.entries.remove(&registration.id) {
            let old_sequential = old.registration.service_type == ServiceType::DynamicSequential;
            let same_node = !old_sequential
                && old.path == fixed_path
                && old.registration.service_type.is_dynamic() == registration.service_type.is_dynamic();
            if same_node {
                // The same node, new data: set it in place.
                first = First::Set;
                inherited = old.synced_on;
            } else if let Some(old_path) = old.path {
                self.delete_or_keep_for_later(old_path, deadline).await;
            }
        }
        if let Some(path) = &fixed_path {
            self.removals.remove(path);
        }
        let id = registration.id.clone();
        self.entries
            .insert(id.clone(), Entry { registration, path: fixed_path.clone(), synced_on: inherited });
        if first == First::Create {
            // A new node: no path to show until it is created.
            self.paths.lock().insert(id.clone(), None);
        }
        match self.write(&id, first, deadline).await {
            Ok(()) => Ok(()),
            Err(err) if outcome_unknown(&err) => {
                warn!(%err, id, "registration not confirmed; it is tried again in the background");
                self.schedule_retry();
                Err(err)
            }
            Err(err) => {
                // The server refused: nothing is registered.
                self.entries.remove(&id);
                self.paths.lock().remove(&id);
                Err(err)
            }
        }
    }

    async fn update(&mut self, registration: Registration, deadline: Deadline) -> Result<()> {
        let id = registration.id.clone();
        let Some(entry) = self.entries.get_mut(&id) else {
            return Err(DiscoveryError::NotRegistered { id });
        };
        if entry.registration.name != registration.name
            || entry.registration.service_type != registration.service_type
        {
            return Err(DiscoveryError::InvalidArgument(format!(
                "an update cannot change the name or type of instance {id} (registered as {}, {:?}): register it again",
                entry.registration.name, entry.registration.service_type
            )));
        }
        // The new data is what every later re-registration writes, whatever happens now.
        entry.registration.data = registration.data;
        entry.synced_on = None;
        match self.write(&id, First::Set, deadline).await {
            Ok(()) => Ok(()),
            Err(err) => {
                warn!(%err, id, "update not confirmed; it is tried again in the background");
                self.schedule_retry();
                Err(err)
            }
        }
    }

    async fn unregister(&mut self, name: &str, id: &str, sequential: bool, deadline: Deadline) -> Result<()> {
        let mut paths = Vec::new();
        match self.entries.remove(id) {
            Some(entry) => paths.extend(entry.path),
            None if sequential => {
                // Not registered here: its node is found by its name.
                let parent = self.service_path(name);
                match self.framework.children(&parent, deadline).await {
                    Ok((children, _)) => paths.extend(
                        children
                            .iter()
                            .filter(|child| sequential_node_id(child) == Some(id))
                            .map(|child| path::join(&parent, child)),
                    ),
                    Err(err) if err.is_no_node() => {}
                    Err(err) => return Err(err.into()),
                }
            }
            None => paths.push(self.fixed_path(name, id)),
        }
        self.paths.lock().remove(id);
        let mut outcome = Ok(());
        for path in paths {
            if let Err(err) = self.framework.delete(&path).quietly().deadline(deadline).await {
                warn!(%err, path, "could not delete the instance's node; it is tried again in the background");
                self.removals.insert(path);
                self.schedule_retry();
                outcome = Err(err.into());
            }
        }
        outcome
    }

    /// Deletes `path` now, or keeps it to delete in the background.
    async fn delete_or_keep_for_later(&mut self, path: String, deadline: Deadline) {
        if let Err(err) = self.framework.delete(&path).quietly().deadline(deadline).await {
            debug!(%err, path, "could not delete a replaced node now");
            self.removals.insert(path);
            self.schedule_retry();
        }
    }

    fn schedule_retry(&mut self) {
        if self.retry_at.is_none() {
            self.retry_at = Some(Instant::now() + self.backoff.next_pause());
        }
    }

    /// Makes the server agree with the registry: deletes what is to be deleted, and writes every
    /// instance not known to be written on the current session. Nothing to do after a
    /// reconnection of the same session.
    async fn reconcile(&mut self) {
        let Some(session) = self.writable_session() else {
            // Not connected: the next connection event brings us back.
            return;
        };
        // `failed`: something is to be tried again; `unreachable`: the server is, so the rest of
        // the round would only wait for it.
        let (mut failed, mut unreachable) = (false, false);
        let removals: Vec<String> = self.removals.iter().cloned().collect();
        for path in removals {
            let deadline = Deadline::after(BACKGROUND_OPERATION_TIMEOUT);
            match self.framework.delete(&path).quietly().deadline(deadline).await {
                Ok(()) => {
                    self.removals.remove(&path);
                }
                Err(err) => {
                    debug!(%err, path, "delete failed; trying again later");
                    failed = true;
                    if outcome_unknown(&DiscoveryError::from(err)) {
                        unreachable = true;
                        break;
                    }
                }
            }
        }
        let stale: Vec<String> = self
            .entries
            .iter()
            .filter(|(_, entry)| entry.synced_on != Some(session))
            .map(|(id, _)| id.clone())
            .collect();
        for id in stale {
            if unreachable {
                break;
            }
            let deadline = Deadline::after(BACKGROUND_OPERATION_TIMEOUT);
            match self.write(&id, First::Create, deadline).await {
                Ok(()) => info!(id, session, "instance registered on the current session"),
                Err(err) => {
                    warn!(%err, id, "could not register the instance; trying again later");
                    failed = true;
                    unreachable = outcome_unknown(&err);
                }
            }
        }
        if failed {
            self.retry_at = Some(Instant::now() + self.backoff.next_pause());
        } else {
            self.backoff.reset();
            self.retry_at = None;
        }
    }

    /// Writes entry `id`'s node so it holds the entry's data on the current session.
    async fn write(&mut self, id: &str, first: First, deadline: Deadline) -> Result<()> {
        let Some(entry) = self.entries.get(id) else { return Ok(()) };
        let registration = entry.registration.clone();
        let known_path = entry.path.clone();
        let (path, session) = match registration.service_type {
            ServiceType::DynamicSequential => {
                self.write_sequential(&registration, known_path, deadline).await?
            }
            service_type => {
                let path =
                    known_path.unwrap_or_else(|| self.fixed_path(&registration.name, &registration.id));
                let session = self
                    .write_fixed(&path, &registration.data, service_type.is_dynamic(), first, deadline)
                    .await?;
                (path, session)
            }
        };
        if let Some(entry) = self.entries.get_mut(id) {
            entry.path = Some(path.clone());
            entry.synced_on = Some(session);
        }
        self.paths.lock().insert(id.to_owned(), Some(path));
        Ok(())
    }

    /// The current session id (0 without one).
    fn current_session(&self) -> i64 {
        self.framework.current().session_id.map(|id| id.0).unwrap_or(0)
    }

    /// Creates (or sets) the node at a fixed path, as Curator's `internalRegisterService` and
    /// `updateService`, resolving what a lost reply leaves: a node of ours already there is kept
    /// (its data set if it differs); a node of another session (our lost one not yet expired, or
    /// another process's with the same id) is deleted and ours created, as Curator does. Returns
    /// the session the node is now known to be written on.
    async fn write_fixed(
        &self,
        path: &str,
        data: &[u8],
        ephemeral: bool,
        first: First,
        deadline: Deadline,
    ) -> Result<i64> {
        let mode = if ephemeral { CreateMode::Ephemeral } else { CreateMode::Persistent };
        let mut set_first = first == First::Set;
        let mut last_error = None;
        for _ in 0..MAX_ATTEMPTS {
            if set_first {
                set_first = false;
                match self.framework.set_data(path, data, None, deadline).await {
                    Ok(stat) if !ephemeral || stat.ephemeral_owner == self.current_session() => {
                        return Ok(self.current_session());
                    }
                    // Another session's node (our lost session's, not yet expired): replace it.
                    Ok(stat) => {
                        self.delete_if_unchanged(path, stat.version, deadline).await?;
                    }
                    Err(err) if err.is_no_node() => {}
                    Err(err) => return Err(err.into()),
                }
            }
            let created = self
                .framework
                .create(path)
                .mode(mode)
                .data(data)
                .creating_parents(ParentMode::Container)
                .deadline(deadline)
                .await;
            match created {
                Ok(created) if ephemeral => return Ok(created.stat.ephemeral_owner),
                Ok(_) => return Ok(self.current_session()),
                Err(err) if err.is_node_exists() => last_error = Some(err),
                Err(err) => return Err(err.into()),
            }
            let existing = match self.framework.get_data(path, deadline).await {
                Ok(existing) => existing,
                Err(err) if err.is_no_node() => continue,
                Err(err) => return Err(err.into()),
            };
            let ours = match ephemeral {
                true => existing.stat.ephemeral_owner == self.current_session(),
                false => existing.stat.ephemeral_owner == 0,
            };
            if !ours {
                self.delete_if_unchanged(path, existing.stat.version, deadline).await?;
                continue;
            }
            if existing.data == data {
                return Ok(self.current_session());
            }
            match self.framework.set_data(path, data, Some(existing.stat.version), deadline).await {
                Ok(_) => return Ok(self.current_session()),
                Err(err) if is_bad_version(&err) || err.is_no_node() => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Err(last_error.unwrap_or(FrameworkError::ZooKeeper(zookeeper_client::Error::NodeExists)).into())
    }

    /// Deletes the node at `version`; a node gone or changed meanwhile is fine (the caller looks
    /// again).
    async fn delete_if_unchanged(&self, path: &str, version: i32, deadline: Deadline) -> Result<()> {
        match self.framework.delete(path).version(version).deadline(deadline).await {
            Ok(()) => Ok(()),
            Err(err) if err.is_no_node() || is_bad_version(&err) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// A `DYNAMIC_SEQUENTIAL` instance: the node it has on the current session gets the data;
    /// otherwise a new protected node `<service>/_c_<uuid>-<id><sequence>` is created (found
    /// again by its prefix after a lost reply, never duplicated), and an older session's node
    /// still there is deleted.
    async fn write_sequential(
        &self,
        registration: &Registration,
        known_path: Option<String>,
        deadline: Deadline,
    ) -> Result<(String, i64)> {
        if let Some(known_path) = known_path {
            match self.framework.set_data(&known_path, &registration.data, None, deadline).await {
                Ok(stat) if stat.ephemeral_owner == self.current_session() => {
                    return Ok((known_path, stat.ephemeral_owner));
                }
                Ok(_) => {
                    self.framework.delete(&known_path).quietly().guaranteed().deadline(deadline).await?;
                }
                Err(err) if err.is_no_node() => {}
                Err(err) => return Err(err.into()),
            }
        }
        let parent = self.service_path(&registration.name);
        let request = ProtectedCreate::new(&parent, &registration.id)
            .mode(CreateMode::EphemeralSequential)
            .data(&registration.data);
        let node = self.framework.create_protected(request, deadline).await?;
        let session = node.session_id().0;
        Ok((node.forget(), session))
    }

    /// `close`: deletes every node but `PERMANENT` ones, all at once, and waits. A delete that
    /// fails is handed to the framework's cleanup worker.
    async fn close(&mut self, deadline: Deadline) -> Result<()> {
        let mut to_delete: Vec<String> = std::mem::take(&mut self.removals).into_iter().collect();
        for (id, entry) in std::mem::take(&mut self.entries) {
            if entry.registration.service_type == ServiceType::Permanent {
                debug!(id, "a permanent instance stays registered");
                continue;
            }
            to_delete.extend(entry.path);
        }
        self.paths.lock().clear();
        let framework = &self.framework;
        let deletes = to_delete.iter().map(|path| async move {
            let outcome = framework.delete(path).quietly().deadline(deadline).await;
            if let Err(err) = &outcome {
                warn!(%err, path, "could not delete the instance's node on close; deleting it in the background");
                framework.delete_in_background(path.clone());
            }
            outcome
        });
        let outcomes = futures::future::join_all(deletes).await;
        outcomes.into_iter().find_map(Result::err).map_or(Ok(()), |err| Err(err.into()))
    }

    /// The discovery was dropped without `close`: its nodes (but `PERMANENT` ones) are deleted by
    /// the framework's cleanup worker.
    fn dropped(self) {
        for path in &self.removals {
            self.framework.delete_in_background(path.clone());
        }
        for entry in self.entries.values() {
            if entry.registration.service_type != ServiceType::Permanent {
                if let Some(path) = &entry.path {
                    self.framework.delete_in_background(path.clone());
                }
            }
        }
    }
}

/// Whether a failed write may or may not have happened, or could not be sent for want of a
/// session: then it is tried again in the background.
fn outcome_unknown(err: &DiscoveryError) -> bool {
    match err {
        DiscoveryError::Framework(err) => err.is_retryable() || err.is_timeout() || err.is_session_lost(),
        _ => false,
    }
}

fn is_bad_version(err: &FrameworkError) -> bool {
    matches!(err.zookeeper(), Some(zookeeper_client::Error::BadVersion))
}

/// The instance id in the name of a `DYNAMIC_SEQUENTIAL` node: the name without its protected
/// prefix (ours: `_c_<uuid>-<id><seq>`) and without its ten-digit sequence (Curator's
/// `<id><seq>`).
pub(crate) fn sequential_node_id(node_name: &str) -> Option<&str> {
    let name = path::strip_protected(node_name);
    let split = name.len().checked_sub(10)?;
    let (id, sequence) = (name.get(..split)?, name.get(split..)?);
    (!id.is_empty() && sequence.bytes().all(|byte| byte.is_ascii_digit())).then_some(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequential_node_names_give_their_instance_id() {
        assert_eq!(
            sequential_node_id("_c_0f8c2e8e-6f43-4a4f-9a7a-1f1f6b0f6f0c-worker-10000000042"),
            Some("worker-1")
        );
        assert_eq!(sequential_node_id("worker-10000000042"), Some("worker-1"));
        assert_eq!(sequential_node_id("id-30000000000"), Some("id-3"));
        assert_eq!(sequential_node_id("0000000001"), None);
        assert_eq!(sequential_node_id("worker-1"), None);
        assert_eq!(sequential_node_id("worker-x000000001"), None);
    }

    #[test]
    fn only_unknown_outcomes_are_tried_again() {
        let lost =
            DiscoveryError::Framework(FrameworkError::ZooKeeper(zookeeper_client::Error::ConnectionLoss));
        assert!(outcome_unknown(&lost));
        assert!(outcome_unknown(&DiscoveryError::Framework(FrameworkError::SessionLost)));
        let refused = DiscoveryError::Framework(FrameworkError::ZooKeeper(zookeeper_client::Error::NoAuth));
        assert!(!outcome_unknown(&refused));
        assert!(!outcome_unknown(&DiscoveryError::Closed));
    }
}
