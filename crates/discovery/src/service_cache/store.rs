//! What a service cache holds: its instances by node name, the snapshot handed to readers, and
//! the event each change makes. Pure: no server, no task.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::event::ServiceCacheEvent;
use crate::instance::ServiceInstance;

/// One change to a service cache, as the follower task reads it from the path cache.
#[derive(Debug)]
pub(super) enum Change<P> {
    /// The child node `node_name` holds this instance now.
    Put {
        /// The instance node's name (its id, or the protected sequential name).
        node_name: String,
        /// What its data reads as.
        instance: ServiceInstance<P>,
    },
    /// The child node `node_name` is gone, or holds no readable instance.
    Remove {
        /// The instance node's name.
        node_name: String,
    },
    /// The first full load is done.
    Loaded,
}

/// Readers' view of the instances: shared, in node-name order.
pub(super) type Snapshot<P> = Arc<[Arc<ServiceInstance<P>>]>;

/// The instances of one service by node name (so in node-name order), and whether the first load
/// is done.
#[derive(Debug)]
pub(super) struct Store<P> {
    instances: BTreeMap<String, Arc<ServiceInstance<P>>>,
    /// The instances as one shared list, made again on the first read after a change.
    snapshot: Option<Snapshot<P>>,
    loaded: bool,
}

impl<P> Default for Store<P> {
    fn default() -> Self {
        Self { instances: BTreeMap::new(), snapshot: None, loaded: false }
    }
}

impl<P> Store<P> {
    pub(super) fn len(&self) -> usize {
        self.instances.len()
    }

    pub(super) fn is_loaded(&self) -> bool {
        self.loaded
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = &Arc<ServiceInstance<P>>> {
        self.instances.values()
    }

    /// The instances in node-name order: the list made after the last change, shared.
    pub(super) fn snapshot(&mut self) -> Snapshot<P> {
        let instances = &self.instances;
        Arc::clone(self.snapshot.get_or_insert_with(|| instances.values().cloned().collect()))
    }
}

impl<P: Clone> Store<P> {
    /// Records `change` and says what it changed for a subscriber (`None`: nothing).
    pub(super) fn apply(&mut self, change: Change<P>) -> Option<ServiceCacheEvent<P>> {
        match change {
            Change::Put { node_name, instance } => {
                let new = Arc::new(instance);
                self.snapshot = None;
                let event = match self.instances.insert(node_name, Arc::clone(&new)) {
                    None => ServiceCacheEvent::Added(ServiceInstance::clone(&new)),
                    Some(old) => ServiceCacheEvent::Updated {
                        old: ServiceInstance::clone(&old),
                        new: ServiceInstance::clone(&new),
                    },
                };
                Some(event)
            }
            Change::Remove { node_name } => {
                let old = self.instances.remove(&node_name)?;
                self.snapshot = None;
                Some(ServiceCacheEvent::Removed(ServiceInstance::clone(&old)))
            }
            Change::Loaded if self.loaded => None,
            Change::Loaded => {
                self.loaded = true;
                Some(ServiceCacheEvent::Loaded)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instance(id: &str, port: i32) -> ServiceInstance {
        ServiceInstance::builder("api").id(id).port(port).build()
    }

    fn put(node_name: &str, instance: ServiceInstance) -> Change<serde_json::Value> {
        Change::Put { node_name: node_name.into(), instance }
    }

    fn remove(node_name: &str) -> Change<serde_json::Value> {
        Change::Remove { node_name: node_name.into() }
    }

    #[test]
    fn each_change_names_its_instance() {
        let mut store = Store::default();
        let (a1, a2, b) = (instance("a", 1), instance("a", 2), instance("b", 1));
        assert_eq!(store.apply(put("a", a1.clone())), Some(ServiceCacheEvent::Added(a1.clone())));
        assert_eq!(store.apply(put("b", b.clone())), Some(ServiceCacheEvent::Added(b.clone())));
        assert_eq!(
            store.apply(put("a", a2.clone())),
            Some(ServiceCacheEvent::Updated { old: a1, new: a2.clone() })
        );
        assert_eq!(store.apply(remove("b")), Some(ServiceCacheEvent::Removed(b)));
        assert_eq!(store.apply(remove("b")), None, "nothing to remove: no event");
        assert_eq!(store.apply(Change::Loaded), Some(ServiceCacheEvent::Loaded));
        assert_eq!(store.apply(Change::Loaded), None, "loaded once");
        assert!(store.is_loaded());
        assert_eq!(store.len(), 1);
        assert_eq!(store.snapshot().iter().map(|instance| instance.port).collect::<Vec<_>>(), [Some(2)]);
    }

    #[test]
    fn the_snapshot_is_in_node_name_order_and_shared_until_a_change() {
        let mut store = Store::default();
        for id in ["c", "a", "b"] {
            store.apply(put(id, instance(id, 1)));
        }
        let first = store.snapshot();
        let ids: Vec<&str> = first.iter().map(|instance| instance.id.as_str()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert!(Arc::ptr_eq(&first, &store.snapshot()), "no change: the same list");
        store.apply(remove("a"));
        let second = store.snapshot();
        assert!(!Arc::ptr_eq(&first, &second));
        assert_eq!(second.len(), 2);
        assert!(Arc::ptr_eq(&first[1], &second[0]), "instances are shared, not copied");
    }
}
