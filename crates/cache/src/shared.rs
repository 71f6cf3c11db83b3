//! The state a cache's handle and its worker share: the store and the subscribers.

use std::collections::BTreeMap;

use parking_lot::RwLock;
use tokio::sync::{mpsc, watch};

use crate::event::CacheEvent;
use crate::node::CachedNode;
use crate::store::Store;

/// The state the cache's handle and worker share.
pub(crate) struct Shared {
    pub(crate) state: RwLock<State>,
    pub(crate) initialized: watch::Sender<bool>,
    /// Why the worker stopped for good before its first load (a server that cannot do what the
    /// cache needs), for the handle's `initialized`.
    pub(crate) failed: watch::Sender<Option<zk_recipes_framework::Error>>,
}

pub(crate) struct State {
    pub(crate) store: Store,
    subscribers: Vec<mpsc::UnboundedSender<CacheEvent>>,
}

impl Shared {
    /// An empty store, not initialized, with no subscribers.
    pub(crate) fn new() -> Self {
        Shared {
            state: RwLock::new(State { store: Store::default(), subscribers: Vec::new() }),
            initialized: watch::channel(false).0,
            failed: watch::channel(None).0,
        }
    }

    /// A new subscriber's channel: first what the store holds now (a `Created` per node, then
    /// `Initialized` if the first load is done), then every change after that, none missed.
    pub(crate) fn subscribe(&self) -> mpsc::UnboundedReceiver<CacheEvent> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut state = self.state.write();
        for (path, node) in state.store.iter() {
            let _ = sender.send(CacheEvent::Created { path: path.clone(), node: node.clone() });
        }
        if *self.initialized.borrow() {
            let _ = sender.send(CacheEvent::Initialized);
        }
        state.subscribers.push(sender);
        receiver
    }

    /// Applies reads to the store and tells every subscriber what changed, under one lock, so a
    /// subscriber never sees a change twice or misses one.
    pub(crate) fn apply(&self, change: impl FnOnce(&mut Store, &mut Vec<CacheEvent>)) -> usize {
        let mut events = Vec::new();
        let mut state = self.state.write();
        change(&mut state.store, &mut events);
        state.publish(&events);
        events.len()
    }

    pub(crate) fn replace_all(&self, fresh: BTreeMap<String, CachedNode>) -> usize {
        self.apply(|store, events| store.replace_all(fresh, events))
    }

    pub(crate) fn mark_initialized(&self) {
        let mut state = self.state.write();
        if !*self.initialized.borrow() {
            self.initialized.send_replace(true);
            state.publish(&[CacheEvent::Initialized]);
        }
    }
}

impl State {
    fn publish(&mut self, events: &[CacheEvent]) {
        if events.is_empty() {
            return;
        }
        self.subscribers
            .retain(|subscriber| events.iter().all(|event| subscriber.send(event.clone()).is_ok()));
    }
}
