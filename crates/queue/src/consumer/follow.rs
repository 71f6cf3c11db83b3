//! Following the connection and waiting for work: connection updates, the children watch, the
//! delay queue's due time, and other consumers' lock nodes.

use std::time::Duration;

use futures::future::FutureExt;
use futures::stream::StreamExt;
use tracing::{debug, trace};
use zk_recipes_framework::zookeeper_client::{self, WatchedEvent};
use zk_recipes_framework::{ConnectionUpdate, Deadline};

use super::claimer::{now_epoch_ms, Claimer, MAX_LOCK_WATCHES};

impl<T: Send + 'static> Claimer<T> {
    /// Handles a connection update; `false` when the framework is closed.
    pub(super) fn on_connection_update(&mut self, update: Option<ConnectionUpdate>) -> bool {
        let Some(update) = update else { return false };
        let state = update.state();
        if let Some(listener) = &self.listener {
            listener(state);
        }
        match update {
            ConnectionUpdate::Changed(event)
                if event.generation == self.generation && state.is_connected() => {}
            _ => self.must_relist = true,
        }
        true
    }

    pub(super) fn poll_children_watch(&mut self) {
        if let Some(watch) = &mut self.children_watch {
            if watch.as_mut().now_or_never().is_some() {
                self.children_watch = None;
                self.children_changed = true;
            }
        }
    }

    /// Nothing to take: watch other consumers' locks, then wait for the queue to change, a lock
    /// to go, the delay head to become due, or the connection to change. `false` to stop.
    pub(super) async fn wait_for_work(&mut self) -> bool {
        self.watch_locks().await;
        if !self.pending.is_empty() || self.must_relist || !self.uncertain.is_empty() {
            return true;
        }
        if self.children_changed {
            self.must_relist = true;
            return true;
        }
        let due_in = self.next_due.map(|due| Duration::from_millis((due - now_epoch_ms()).max(0) as u64 + 1));
        enum Woke {
            Children(WatchedEvent),
            Due,
            Lock(Option<String>),
            Connection(Option<ConnectionUpdate>),
            Stop,
        }
        let Self { children_watch, lock_watches, events, sender, .. } = self;
        let children_watch = async {
            match children_watch {
                Some(watch) => watch.await,
                None => std::future::pending().await,
            }
        };
        let due = async {
            match due_in {
                Some(due_in) => tokio::time::sleep(due_in).await,
                None => std::future::pending().await,
            }
        };
        let lock_freed = async {
            if lock_watches.is_empty() {
                std::future::pending().await
            } else {
                lock_watches.next().await
            }
        };
        let woke = tokio::select! {
            event = children_watch => Woke::Children(event),
            () = due => Woke::Due,
            name = lock_freed => Woke::Lock(name),
            update = events.next() => Woke::Connection(update),
            () = sender.closed() => Woke::Stop,
        };
        match woke {
            Woke::Children(event) => {
                trace!(?event.event_type, "queue changed");
                self.children_watch = None;
                self.must_relist = true;
            }
            Woke::Due => self.must_relist = true,
            Woke::Lock(Some(name)) => {
                trace!(item = %name, "a lock we waited on is gone");
                self.watched.remove(&name);
                let mut freed = vec![name];
                // Other locks that went meanwhile (one ack multi deletes many).
                while let Some(Some(name)) = self.lock_watches.next().now_or_never() {
                    self.watched.remove(&name);
                    freed.push(name);
                }
                self.take_again_if_queued(freed).await;
            }
            Woke::Lock(None) => {}
            Woke::Connection(update) => return self.on_connection_update(update),
            Woke::Stop => return false,
        }
        true
    }

    /// Watches the lock nodes of items other consumers held (so an item whose consumer dies is
    /// taken as soon as its lock goes, even if the queue itself never changes).
    pub(super) async fn watch_locks(&mut self) {
        let names: Vec<String> = std::mem::take(&mut self.locked_by_others)
            .into_iter()
            .filter(|name| !self.watched.contains(name))
            .collect();
        if names.is_empty() {
            return;
        }
        let Ok(session) = self.inner.framework.session(Deadline::never()).await else { return };
        if session.generation() != self.generation {
            self.must_relist = true;
            return;
        }
        let room = MAX_LOCK_WATCHES.saturating_sub(self.watched.len());
        let lock_nodes: Vec<(String, String)> = names
            .into_iter()
            .take(room)
            .filter_map(|name| self.inner.lock_node(&name).map(|lock_node| (name, lock_node)))
            .collect();
        // Sent now, back to back; a data watch (not exists) so no watch is left on a missing node.
        let requests: Vec<_> =
            lock_nodes.iter().map(|(_, lock_node)| session.client().get_and_watch_data(lock_node)).collect();
        let mut freed = Vec::new();
        for ((name, _), request) in lock_nodes.into_iter().zip(requests) {
            match request.await {
                Ok((_, _, watcher)) => {
                    self.watched.insert(name.clone());
                    self.lock_watches.push(Box::pin(async move {
                        let event = watcher.changed().await;
                        trace!(?event.event_type, item = %name, "lock watch fired");
                        name
                    }));
                }
                // Already gone: try the item again now, if it is still queued.
                Err(zookeeper_client::Error::NoNode) => freed.push(name),
                Err(err) => {
                    debug!(item = %name, %err, "could not watch a lock");
                    self.must_relist = true;
                }
            }
        }
        self.take_again_if_queued(freed).await;
    }

    /// Items whose lock (another consumer's) went: most were acknowledged with it, in the same
    /// multi; only the consumer that died or let go leaves its item queued. So each is looked for
    /// first (the `exists`, sent back to back, cost a read each), and only the queued ones are
    /// tried again: locking a finished item would cost a create, a read and a release.
    pub(super) async fn take_again_if_queued(&mut self, freed: Vec<String>) {
        if freed.is_empty() {
            return;
        }
        let Ok(session) = self.inner.framework.session(Deadline::never()).await else {
            self.must_relist = true;
            return;
        };
        if session.generation() != self.generation {
            self.must_relist = true;
            return;
        }
        let inner = &self.inner;
        let looks: Vec<_> =
            freed.iter().map(|name| session.client().check_stat(&inner.item_path(name))).collect();
        for (name, look) in freed.into_iter().zip(looks) {
            match look.await {
                Ok(Some(_)) => self.pending.push_front(name),
                Ok(None) => trace!(item = %name, "finished by the consumer that held it"),
                Err(err) => {
                    debug!(item = %name, %err, "could not look for an item whose lock went");
                    self.must_relist = true;
                }
            }
        }
    }
}
