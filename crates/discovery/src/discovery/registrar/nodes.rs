//! Writing one instance's node so it holds the registry's data on the current session (fixed
//! names and protected sequential ones, resolving what a lost reply leaves), and the pure helpers
//! on node names and errors.

use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{path, Deadline, Error as FrameworkError, ParentMode, ProtectedCreate};

use super::state::{First, Registration, State, MAX_ATTEMPTS};
use crate::error::{DiscoveryError, Result};
use crate::instance::ServiceType;

impl State {
    pub(super) fn fixed_path(&self, name: &str, id: &str) -> String {
        path::join(&path::join(&self.base_path, name), id)
    }

    pub(super) fn service_path(&self, name: &str) -> String {
        path::join(&self.base_path, name)
    }

    /// Writes entry `id`'s node so it holds the entry's data on the current session.
    pub(super) async fn write(&mut self, id: &str, first: First, deadline: Deadline) -> Result<()> {
        let Some(entry) = self.entries.get(id) else { return Ok(()) };
        let registration = entry.registration.clone();
        let known_path = entry.path.clone();
        let (path, (session, mzxid)) = match registration.service_type {
            ServiceType::DynamicSequential => {
                self.write_sequential(&registration, known_path, deadline).await?
            }
            service_type => {
                let path =
                    known_path.unwrap_or_else(|| self.fixed_path(&registration.name, &registration.id));
                let written = self
                    .write_fixed(&path, &registration.data, service_type.is_dynamic(), first, deadline)
                    .await?;
                (path, written)
            }
        };
        if let Some(entry) = self.entries.get_mut(id) {
            entry.path = Some(path.clone());
            entry.synced_on = Some(session);
            entry.written_mzxid = Some(mzxid);
        }
        self.paths.lock().insert(id.to_owned(), Some(path));
        Ok(())
    }

    /// The current session id (0 without one).
    pub(super) fn current_session(&self) -> i64 {
        self.framework.current().session_id.map(|id| id.0).unwrap_or(0)
    }

    /// Creates (or sets) the node at a fixed path, as Curator's `internalRegisterService` and
    /// `updateService`, resolving what a lost reply leaves: a node of ours already there is kept
    /// (its data set if it differs); a node of another session (our lost one not yet expired, or
    /// another process's with the same id) is deleted and ours created, as Curator does. Returns
    /// the session the node is now known to be written on, and the node's `mzxid` then (our
    /// write's, or the one of the equal data found there).
    pub(super) async fn write_fixed(
        &self,
        path: &str,
        data: &[u8],
        ephemeral: bool,
        first: First,
        deadline: Deadline,
    ) -> Result<(i64, i64)> {
        let mode = if ephemeral { CreateMode::Ephemeral } else { CreateMode::Persistent };
        let mut set_first = first == First::Set;
        let mut last_error = None;
        for _ in 0..MAX_ATTEMPTS {
            if set_first {
                set_first = false;
                match self.framework.set_data(path, data, None, deadline).await {
                    Ok(stat) if !ephemeral || stat.ephemeral_owner == self.current_session() => {
                        return Ok((self.current_session(), stat.mzxid));
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
                Ok(created) if ephemeral => return Ok((created.stat.ephemeral_owner, created.stat.mzxid)),
                Ok(created) => return Ok((self.current_session(), created.stat.mzxid)),
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
                return Ok((self.current_session(), existing.stat.mzxid));
            }
            match self.framework.set_data(path, data, Some(existing.stat.version), deadline).await {
                Ok(stat) => return Ok((self.current_session(), stat.mzxid)),
                Err(err) if is_bad_version(&err) || err.is_no_node() => continue,
                Err(err) => return Err(err.into()),
            }
        }
        Err(last_error.unwrap_or(FrameworkError::ZooKeeper(zookeeper_client::Error::NodeExists)).into())
    }

    /// Deletes the node at `version`; a node gone or changed meanwhile is fine (the caller looks
    /// again).
    pub(super) async fn delete_if_unchanged(
        &self,
        path: &str,
        version: i32,
        deadline: Deadline,
    ) -> Result<()> {
        match self.framework.delete(path).version(version).deadline(deadline).await {
            Ok(()) => Ok(()),
            Err(err) if err.is_no_node() || is_bad_version(&err) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// A `DYNAMIC_SEQUENTIAL` instance: the node it has on the current session gets the data;
    /// otherwise a new protected node `<service>/_c_<uuid>-<id><sequence>` is created (found
    /// again by its prefix after a lost reply, never duplicated), and an older session's node
    /// still there is deleted. Returns the node's path, its session and our write's `mzxid`.
    pub(super) async fn write_sequential(
        &self,
        registration: &Registration,
        known_path: Option<String>,
        deadline: Deadline,
    ) -> Result<(String, (i64, i64))> {
        if let Some(known_path) = known_path {
            match self.framework.set_data(&known_path, &registration.data, None, deadline).await {
                Ok(stat) if stat.ephemeral_owner == self.current_session() => {
                    return Ok((known_path, (stat.ephemeral_owner, stat.mzxid)));
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
        let written = (node.session_id().0, node.stat().mzxid);
        Ok((node.forget(), written))
    }
}

/// Whether a failed write may or may not have happened, or could not be sent for want of a
/// session: then it is tried again in the background.
pub(super) fn outcome_unknown(err: &DiscoveryError) -> bool {
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
