//! The registrar's commands: register, update and unregister (each within its caller's
//! deadline, the registry kept true whatever the outcome), close, and what a dropped discovery
//! leaves to the framework's cleanup worker.

use tokio::time::Instant;
use tracing::{debug, warn};
use zk_recipes_framework::{path, Deadline};

use super::nodes::{outcome_unknown, sequential_node_id};
use super::state::{Command, Entry, First, Registration, State};
use crate::error::{DiscoveryError, Result};
use crate::instance::ServiceType;

impl State {
    pub(super) async fn serve(&mut self, command: Command) {
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

    pub(super) async fn register(&mut self, registration: Registration, deadline: Deadline) -> Result<()> {
        let sequential = registration.service_type == ServiceType::DynamicSequential;
        let fixed_path = (!sequential).then(|| self.fixed_path(&registration.name, &registration.id));
        let mut first = First::Create;
        let mut inherited = (None, None);
        if let Some(old) = self.entries.remove(&registration.id) {
            let old_sequential = old.registration.service_type == ServiceType::DynamicSequential;
            let same_node = !old_sequential
                && old.path == fixed_path
                && old.registration.service_type.is_dynamic() == registration.service_type.is_dynamic();
            if same_node {
                // The same node, new data: set it in place.
                first = First::Set;
                inherited = (old.synced_on, old.written_mzxid);
            } else if let Some(old_path) = old.path {
                self.delete_or_keep_for_later(old_path, deadline).await;
            }
        }
        if let Some(path) = &fixed_path {
            self.removals.remove(path);
        }
        let id = registration.id.clone();
        let (synced_on, written_mzxid) = inherited;
        self.entries
            .insert(id.clone(), Entry { registration, path: fixed_path.clone(), synced_on, written_mzxid });
        self.start_watching();
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

    pub(super) async fn update(&mut self, registration: Registration, deadline: Deadline) -> Result<()> {
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

    pub(super) async fn unregister(
        &mut self,
        name: &str,
        id: &str,
        sequential: bool,
        deadline: Deadline,
    ) -> Result<()> {
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
    pub(super) async fn delete_or_keep_for_later(&mut self, path: String, deadline: Deadline) {
        if let Err(err) = self.framework.delete(&path).quietly().deadline(deadline).await {
            debug!(%err, path, "could not delete a replaced node now");
            self.removals.insert(path);
            self.schedule_retry();
        }
    }

    pub(super) fn schedule_retry(&mut self) {
        if self.retry_at.is_none() {
            self.retry_at = Some(Instant::now() + self.backoff.next_pause());
        }
    }

    /// `close`: deletes every node but `PERMANENT` ones, all at once, and waits. A delete that
    /// fails is handed to the framework's cleanup worker.
    pub(super) async fn close(&mut self, deadline: Deadline) -> Result<()> {
        // The watch goes first: our deletes are nothing to adopt.
        self.watch = None;
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
    pub(super) fn dropped(self) {
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
