//! `watch_instances` (Curator's `watchInstances`): the registrar follows the nodes of the
//! instances registered here, with one persistent recursive watch on the base path, and adopts
//! what another writer (an operator with `zkr` or zkCli, say) sets there as the registration, so a
//! later re-registration writes that, not the stale data.
//!
//! Adopted only when the node's `mzxid` is newer than our own last write to it (Curator's node
//! cache listener takes whatever it reports last, so a late event of an older write of ours can
//! undo an `update`), when no write of ours is pending, and when the data is an instance with the
//! same name and id. A deleted node is not adopted (Curator's listener ignores it too).

use tokio::sync::mpsc;
use tracing::{debug, info, warn, Instrument};
use zk_recipes_framework::{Deadline, WatchEvent};

use super::state::{InstanceWatch, State, BACKGROUND_OPERATION_TIMEOUT};
use crate::json::JsonInstanceSerializer;

impl State {
    /// With `watch_instances`, sets the watch if it is not there yet (at the first registration:
    /// nothing is sent before).
    pub(super) fn start_watching(&mut self) {
        if !self.watch_instances || self.watch.is_some() {
            return;
        }
        let (sender, events) = mpsc::unbounded_channel();
        let (framework, base_path) = (self.framework.clone(), self.base_path.clone());
        let forward = async move {
            let mut watch = match framework.watch(&base_path, true, Deadline::never()).await {
                Ok(watch) => watch,
                Err(err) => {
                    warn!(%err, "could not watch the instances' nodes; changes by others are not adopted");
                    return;
                }
            };
            // What changed before the watch was set: look once.
            let mut event = Some(WatchEvent::Reset);
            while let Some(next) = event {
                if sender.send(next).is_err() {
                    return;
                }
                event = watch.next().await;
            }
        };
        let task = tokio::spawn(forward.in_current_span());
        self.watch = Some(InstanceWatch { events, task });
    }

    /// An event of the watch: a data change of one of our nodes, or a reset (all of them).
    pub(super) async fn on_watch(&mut self, event: Option<WatchEvent>) {
        let ids: Vec<String> = match event {
            None => {
                // The watch is gone for good: stop following.
                self.watch = None;
                self.watch_instances = false;
                return;
            }
            Some(WatchEvent::DataChanged { path }) => self
                .entries
                .iter()
                .filter(|(_, entry)| entry.path.as_deref() == Some(path.as_str()))
                .map(|(id, _)| id.clone())
                .collect(),
            Some(WatchEvent::Reset) => self.entries.keys().cloned().collect(),
            Some(_) => return,
        };
        for id in ids {
            self.adopt(&id).await;
        }
    }

    /// Reads instance `id`'s node and adopts its data if another writer changed it after our last
    /// write.
    async fn adopt(&mut self, id: &str) {
        let session = self.current_session();
        let Some(entry) = self.entries.get(id) else { return };
        let (Some(path), Some(written)) = (entry.path.clone(), entry.written_mzxid) else { return };
        if entry.synced_on != Some(session) {
            // A write of ours is pending: it is what the node gets.
            return;
        }
        let deadline = Deadline::after(BACKGROUND_OPERATION_TIMEOUT);
        let node = match self.framework.get_data(&path, deadline).await {
            Ok(node) => node,
            Err(err) => {
                // Gone, or unreachable (the watch's reset after reconnecting looks again).
                debug!(%err, path, "could not read an instance's node after a change");
                return;
            }
        };
        let Some(entry) = self.entries.get_mut(id) else { return };
        let owner = node.stat.ephemeral_owner;
        let ours = match entry.registration.service_type.is_dynamic() {
            true => owner == session,
            false => owner == 0,
        };
        if node.stat.mzxid <= written || !ours {
            return;
        }
        if node.data == entry.registration.data {
            entry.written_mzxid = Some(node.stat.mzxid);
            return;
        }
        match JsonInstanceSerializer::new().deserialize::<serde_json::Value>(&node.data) {
            Ok(instance) if instance.name == entry.registration.name && instance.id == id => {}
            Ok(instance) => {
                warn!(
                    id,
                    path,
                    other = instance.id,
                    "another writer set another instance on the node; not adopted"
                );
                return;
            }
            Err(err) => {
                warn!(%err, id, path, "another writer set data that is not an instance; not adopted");
                return;
            }
        }
        info!(
            id,
            path,
            mzxid = node.stat.mzxid,
            "adopting the data another writer set on the instance's node"
        );
        entry.registration.data = node.data;
        entry.written_mzxid = Some(node.stat.mzxid);
    }
}
