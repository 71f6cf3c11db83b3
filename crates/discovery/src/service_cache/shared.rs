//! The state a service cache's handle and its follower task share: the store, the subscribers,
//! and whether the first load is done. Changes are applied and published under one lock, so a
//! subscriber sees each change once, in order, and one that subscribes late misses nothing.

use parking_lot::Mutex;
use tokio::sync::{mpsc, watch};
use zk_recipes_framework::Deadline;

use super::event::{ServiceCacheEvent, ServiceCacheEvents};
use super::store::{Change, Snapshot, Store};
use crate::error::Result;

pub(super) struct Shared<P> {
    state: Mutex<State<P>>,
    /// Whether the first load is done, for those who wait for it.
    loaded: watch::Sender<bool>,
}

struct State<P> {
    store: Store<P>,
    subscribers: Vec<mpsc::UnboundedSender<ServiceCacheEvent<P>>>,
}

impl<P> Shared<P> {
    pub(super) fn new() -> Self {
        let (loaded, _) = watch::channel(false);
        Self { state: Mutex::new(State { store: Store::default(), subscribers: Vec::new() }), loaded }
    }

    pub(super) fn snapshot(&self) -> Snapshot<P> {
        self.state.lock().store.snapshot()
    }

    pub(super) fn len(&self) -> usize {
        self.state.lock().store.len()
    }

    pub(super) fn is_loaded(&self) -> bool {
        *self.loaded.borrow()
    }

    /// Waits for the first load, until `deadline`.
    pub(super) async fn wait_loaded(&self, deadline: Deadline) -> Result<()> {
        let mut loaded = self.loaded.subscribe();
        deadline
            .run(async {
                // The sender lives in `self`: it cannot be dropped while we wait.
                let _ = loaded.wait_for(|loaded| *loaded).await;
                Ok(())
            })
            .await?;
        Ok(())
    }
}

impl<P: Clone> Shared<P> {
    /// Applies `changes` in order and tells every subscriber what they changed.
    pub(super) fn apply(&self, changes: impl IntoIterator<Item = Change<P>>) {
        let mut state = self.state.lock();
        let State { store, subscribers } = &mut *state;
        for change in changes {
            let Some(event) = store.apply(change) else { continue };
            if matches!(event, ServiceCacheEvent::Loaded) {
                self.loaded.send_replace(true);
            }
            subscribers.retain(|subscriber| subscriber.send(event.clone()).is_ok());
        }
    }

    /// A subscription: the instances held now (as `Added`), `Loaded` if loaded, then every
    /// change.
    pub(super) fn subscribe(&self) -> ServiceCacheEvents<P> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let mut state = self.state.lock();
        for instance in state.store.iter() {
            let _ = sender.send(ServiceCacheEvent::Added(instance.as_ref().clone()));
        }
        if state.store.is_loaded() {
            let _ = sender.send(ServiceCacheEvent::Loaded);
        }
        state.subscribers.push(sender);
        ServiceCacheEvents { receiver }
    }
}
