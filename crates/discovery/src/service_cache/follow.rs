//! The service cache's follower task: it reads the path cache's events for the service node's
//! children, reads each node's data as an instance, and applies the changes to the shared state.
//! A node whose data is not an instance (of the payload type) is logged and left out, as the
//! discovery's queries leave it out.

use std::sync::Arc;

use serde::de::DeserializeOwned;
use tracing::warn;
use zk_recipes_cache::{CacheEvent, CacheEvents};

use super::shared::Shared;
use super::store::Change;
use crate::error::DiscoveryError;
use crate::json::JsonInstanceSerializer;

/// How many waiting events are applied under one lock at most.
const MAX_BATCH: usize = 256;

pub(super) async fn follow<P: DeserializeOwned + Clone>(
    mut events: CacheEvents,
    service_path: String,
    serializer: JsonInstanceSerializer,
    shared: Arc<Shared<P>>,
) {
    while let Some(first) = events.next().await {
        let mut batch = vec![first];
        while batch.len() < MAX_BATCH {
            let Some(more) = events.try_next() else { break };
            batch.push(more);
        }
        let changes = batch.into_iter().filter_map(|event| change_for(event, &service_path, &serializer));
        // Decoded before the lock is taken: only the store's updates run under it.
        let changes: Vec<Change<P>> = changes.collect();
        shared.apply(changes);
    }
}

/// What a path cache event means for the service's instances; `None` for the service node itself
/// (and anything deeper than its children, which the path cache does not keep).
fn change_for<P: DeserializeOwned>(
    event: CacheEvent,
    service_path: &str,
    serializer: &JsonInstanceSerializer,
) -> Option<Change<P>> {
    match event {
        CacheEvent::Created { path, node } | CacheEvent::Changed { path, new: node, .. } => {
            let node_name = child_name(service_path, &path)?.to_owned();
            let data = node.data.as_deref().unwrap_or_default();
            match serializer.deserialize(data) {
                Ok(instance) => Some(Change::Put { node_name, instance }),
                Err(err) => {
                    let err = match err {
                        DiscoveryError::Deserialize { source, .. } => {
                            DiscoveryError::Deserialize { path: Some(path), source }
                        }
                        other => other,
                    };
                    warn!(%err, "left out of the service cache");
                    Some(Change::Remove { node_name })
                }
            }
        }
        CacheEvent::Deleted { path, .. } => {
            Some(Change::Remove { node_name: child_name(service_path, &path)?.to_owned() })
        }
        CacheEvent::Initialized => Some(Change::Loaded),
        _ => None,
    }
}

/// The name of `node_path` if it is a child of `parent`.
pub(super) fn child_name<'a>(parent: &str, node_path: &'a str) -> Option<&'a str> {
    let below = match parent {
        "/" => node_path.strip_prefix('/')?,
        _ => node_path.strip_prefix(parent)?.strip_prefix('/')?,
    };
    (!below.is_empty() && !below.contains('/')).then_some(below)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc as SharedData;

    use zk_recipes_cache::CachedNode;
    use zk_recipes_framework::zookeeper_client::Stat;

    use super::*;
    use crate::instance::ServiceInstance;

    #[test]
    fn only_children_of_the_service_node_are_instances() {
        assert_eq!(child_name("/services/api", "/services/api/a-1"), Some("a-1"));
        assert_eq!(child_name("/services/api", "/services/api"), None);
        assert_eq!(child_name("/services/api", "/services/api/a-1/deeper"), None);
        assert_eq!(child_name("/services/api", "/services/api-2/a-1"), None);
        assert_eq!(child_name("/", "/api"), Some("api"));
        assert_eq!(child_name("/", "/"), None);
    }

    fn node(data: &[u8]) -> CachedNode {
        let stat = Stat {
            czxid: 1,
            mzxid: 1,
            ctime: 0,
            mtime: 0,
            version: 0,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: data.len() as i32,
            num_children: 0,
            pzxid: 0,
        };
        CachedNode { stat, data: Some(SharedData::from(data)) }
    }

    #[test]
    fn readable_nodes_are_put_and_unreadable_ones_removed() {
        let serializer = JsonInstanceSerializer::new();
        let instance = ServiceInstance::builder("api").id("a-1").port(80).build();
        let data = serializer.serialize(&instance).expect("serialize");
        let created = CacheEvent::Created { path: "/s/api/a-1".into(), node: node(&data) };
        match change_for::<serde_json::Value>(created, "/s/api", &serializer) {
            Some(Change::Put { node_name, instance: read }) => {
                assert_eq!((node_name.as_str(), read), ("a-1", instance));
            }
            other => panic!("{other:?}"),
        }
        let garbled = CacheEvent::Changed { path: "/s/api/a-1".into(), old: node(&data), new: node(b"{") };
        assert!(matches!(
            change_for::<serde_json::Value>(garbled, "/s/api", &serializer),
            Some(Change::Remove { node_name }) if node_name == "a-1"
        ));
        let service_node = CacheEvent::Created { path: "/s/api".into(), node: node(b"") };
        assert!(change_for::<serde_json::Value>(service_node, "/s/api", &serializer).is_none());
        let deleted = CacheEvent::Deleted { path: "/s/api/a-1".into(), old: node(&data) };
        assert!(matches!(
            change_for::<serde_json::Value>(deleted, "/s/api", &serializer),
            Some(Change::Remove { .. })
        ));
        assert!(matches!(
            change_for::<serde_json::Value>(CacheEvent::Initialized, "/s/api", &serializer),
            Some(Change::Loaded)
        ));
    }
}
