//! Reading service discovery's registry (Curator's `curator-x-discovery` nodes): the services
//! under a base path, and one service's instances as stored. Nothing here creates or changes a node.

use futures::stream::{self, StreamExt};
use serde::Serialize;
use zk_recipes_discovery::{JsonInstanceSerializer, ServiceInstance};
use zk_recipes_framework::{path, Framework, Result as FrameworkResult};

use crate::inspect::{deadline, list, read_children, READS_IN_FLIGHT};

/// One service under a discovery base path.
#[derive(Debug, Serialize)]
pub struct ServiceRow {
    /// The service's name (its node under the base path).
    pub name: String,
    /// Its instance nodes (a service whose last instance left shows 0 until the server reaps its
    /// container node).
    pub instances: usize,
}

/// `zkr services`: the services under a base path.
#[derive(Debug, Serialize)]
pub struct ServicesView {
    /// The base path (Curator's `basePath`).
    pub base_path: String,
    /// The services, by name.
    pub services: Vec<ServiceRow>,
}

/// The services under `base_path` (Curator's `queryForNames`), each with its number of instance
/// nodes; none if `base_path` does not exist.
pub async fn services(framework: &Framework, base_path: &str) -> FrameworkResult<ServicesView> {
    let mut names = list(framework, base_path).await?;
    names.sort();
    let stats = stream::iter(names.into_iter().map(|name| async move {
        let stat = framework.exists(&path::join(base_path, &name), deadline()).await;
        (name, stat)
    }))
    .buffered(READS_IN_FLIGHT)
    .collect::<Vec<_>>()
    .await;
    let mut services = Vec::with_capacity(stats.len());
    for (name, stat) in stats {
        // A service node gone between the listing and the read is left out.
        if let Some(stat) = stat? {
            services.push(ServiceRow { name, instances: stat.num_children.max(0) as usize });
        }
    }
    Ok(ServicesView { base_path: base_path.to_owned(), services })
}

/// One instance of a service, read from its node.
#[derive(Debug)]
pub struct InstanceRow {
    /// The instance, read with Curator's serializer.
    pub instance: ServiceInstance,
    /// The node's data as stored (Curator's JSON), on one line.
    pub json: String,
}

/// `zkr services NAME`: one service's instances.
#[derive(Debug)]
pub struct ServiceInstancesView {
    /// The service's node, `<base path>/<name>`.
    pub path: String,
    /// Its instances, by node name (the order of Curator's `queryForInstances` here).
    pub instances: Vec<InstanceRow>,
    /// Nodes whose data is not a service instance, each with why: left out, as
    /// `query_for_instances` leaves them out.
    pub unreadable: Vec<String>,
}

/// The instances of the service at `service_path` (Curator's `queryForInstances`), as stored;
/// none if it does not exist.
pub async fn service_instances(
    framework: &Framework,
    service_path: &str,
) -> FrameworkResult<ServiceInstancesView> {
    let mut children = read_children(framework, service_path).await?;
    children.sort_by(|left, right| left.name.cmp(&right.name));
    let serializer = JsonInstanceSerializer::new();
    let mut instances = Vec::with_capacity(children.len());
    let mut unreadable = Vec::new();
    for child in children {
        match serializer.deserialize(&child.data) {
            Ok(instance) => {
                let json = one_line(&child.data);
                instances.push(InstanceRow { instance, json });
            }
            Err(err) => unreadable.push(format!("{}: {err}", path::join(service_path, &child.name))),
        }
    }
    Ok(ServiceInstancesView { path: service_path.to_owned(), instances, unreadable })
}

/// JSON data as stored, on one line: as it is, unless it has line breaks (a node written by hand,
/// not by Curator or zk-recipes), which outside strings are only whitespace.
fn one_line(data: &[u8]) -> String {
    String::from_utf8_lossy(data).trim().replace(['\r', '\n'], " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stored_json_is_printed_as_it_is_on_one_line() {
        let curator = br#"{"name":"api","id":"a","address":"10.0.0.7","port":8080,"sslPort":null}"#;
        assert_eq!(one_line(curator).as_bytes(), curator);
        let by_hand = b"{\n  \"name\": \"api\",\r\n  \"id\": \"a\"\n}\n";
        let line = one_line(by_hand);
        assert!(!line.contains(['\n', '\r']), "{line:?}");
        let read: serde_json::Value = serde_json::from_str(&line).expect("still JSON");
        assert_eq!(read, serde_json::json!({"name": "api", "id": "a"}));
    }
}
