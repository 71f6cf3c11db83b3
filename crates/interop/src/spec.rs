//! What goes to and comes from the Java side: the instance specs, Curator's service types and
//! provider strategies, and what a Curator `ServiceCache` holds; the default timeouts.

use std::time::Duration;

/// How long [`CuratorDiscoveryBuilder::start`](crate::CuratorDiscoveryBuilder::start) waits by default for the JVM to start, connect and
/// start its `ServiceDiscovery` (the first start in a test process also compiles the driver).
pub const DISCOVERY_START: Duration = Duration::from_secs(60);

/// How long each typed call of a [`CuratorDiscovery`](crate::CuratorDiscovery) waits by default for Curator's answer.
pub const DISCOVERY_REPLY: Duration = Duration::from_secs(30);

/// Curator's `ServiceType`: which kind of node an instance is registered as.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum CuratorServiceType {
    /// `DYNAMIC`: an ephemeral node, gone with the session (Curator's default).
    #[default]
    Dynamic,
    /// `DYNAMIC_SEQUENTIAL`: an ephemeral-sequential node (`<id><sequence>`).
    DynamicSequential,
    /// `STATIC`: a persistent node.
    Static,
    /// `PERMANENT`: a persistent node.
    Permanent,
}

impl CuratorServiceType {
    /// The name Curator writes in `serviceType`, e.g. `"DYNAMIC"`.
    ///
    /// ```
    /// use zk_recipes_interop::CuratorServiceType;
    /// assert_eq!(CuratorServiceType::DynamicSequential.as_str(), "DYNAMIC_SEQUENTIAL");
    /// ```
    pub fn as_str(self) -> &'static str {
        match self {
            CuratorServiceType::Dynamic => "DYNAMIC",
            CuratorServiceType::DynamicSequential => "DYNAMIC_SEQUENTIAL",
            CuratorServiceType::Static => "STATIC",
            CuratorServiceType::Permanent => "PERMANENT",
        }
    }
}

/// The `ProviderStrategy` of a Curator `ServiceProvider`
/// ([`CuratorDiscovery::start_provider`](crate::CuratorDiscovery::start_provider)).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CuratorProviderStrategy {
    /// `RoundRobinStrategy`.
    RoundRobin,
    /// `RandomStrategy`.
    Random,
    /// `StickyStrategy` over a `RoundRobinStrategy`.
    Sticky,
}

impl CuratorProviderStrategy {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            CuratorProviderStrategy::RoundRobin => "round-robin",
            CuratorProviderStrategy::Random => "random",
            CuratorProviderStrategy::Sticky => "sticky",
        }
    }
}

/// An instance for the Java side to register or update, built with Curator's
/// `ServiceInstance.builder()`: every field left unset keeps Curator's default (a random UUID id,
/// the first non-loopback local address, now as the registration time, [`CuratorServiceType::Dynamic`],
/// no ports, no payload, no URI spec, enabled).
///
/// # Example
/// ```
/// use zk_recipes_interop::{CuratorInstanceSpec, CuratorServiceType};
///
/// let spec = CuratorInstanceSpec::new("orders")
///     .id("orders-1")
///     .address("10.0.0.7")
///     .port(8080)
///     .payload_json(r#"{"zone":"eu-1"}"#)
///     .service_type(CuratorServiceType::Static)
///     .uri_spec("{scheme}://{address}:{port}")
///     .registration_time_utc(1_700_000_000_000);
/// assert_eq!(
///     spec.to_json(),
///     r#"{"name":"orders","id":"orders-1","address":"10.0.0.7","port":8080,"payload":{"zone":"eu-1"},"serviceType":"STATIC","uriSpec":"{scheme}://{address}:{port}","registrationTimeUTC":1700000000000}"#
/// );
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuratorInstanceSpec {
    name: String,
    id: Option<String>,
    address: Option<String>,
    port: Option<u16>,
    ssl_port: Option<u16>,
    payload_json: Option<String>,
    service_type: Option<CuratorServiceType>,
    uri_spec: Option<String>,
    registration_time_utc: Option<i64>,
    enabled: Option<bool>,
}

impl CuratorInstanceSpec {
    /// An instance of the service `name`, every other field Curator's default.
    pub fn new(name: impl Into<String>) -> CuratorInstanceSpec {
        CuratorInstanceSpec {
            name: name.into(),
            id: None,
            address: None,
            port: None,
            ssl_port: None,
            payload_json: None,
            service_type: None,
            uri_spec: None,
            registration_time_utc: None,
            enabled: None,
        }
    }

    /// The instance id (the node's name). Defaults to Curator's random UUID.
    pub fn id(mut self, id: impl Into<String>) -> CuratorInstanceSpec {
        self.id = Some(id.into());
        self
    }

    /// The address. Defaults to Curator's choice: the first non-loopback local address.
    pub fn address(mut self, address: impl Into<String>) -> CuratorInstanceSpec {
        self.address = Some(address.into());
        self
    }

    /// The port. Defaults to none (`null`).
    pub fn port(mut self, port: u16) -> CuratorInstanceSpec {
        self.port = Some(port);
        self
    }

    /// The SSL port. Defaults to none (`null`).
    pub fn ssl_port(mut self, ssl_port: u16) -> CuratorInstanceSpec {
        self.ssl_port = Some(ssl_port);
        self
    }

    /// The payload, as JSON text (sent as is; line breaks become spaces). The Java side reads it
    /// with Jackson: an object becomes a `LinkedHashMap` (written back with
    /// `"@class":"java.util.LinkedHashMap"`), an array an `ArrayList`, a scalar its Java type;
    /// an object with `"@class"` becomes an instance of that class, such as
    /// `org.springframework.cloud.zookeeper.discovery.ZookeeperInstance` (a stand-in the driver
    /// carries, with Spring Cloud Zookeeper's `id`, `name` and `metadata`) or `java.util.TreeMap`.
    /// Defaults to none (`null`).
    pub fn payload_json(mut self, payload_json: impl Into<String>) -> CuratorInstanceSpec {
        self.payload_json = Some(payload_json.into());
        self
    }

    /// The service type. Defaults to [`CuratorServiceType::Dynamic`].
    pub fn service_type(mut self, service_type: CuratorServiceType) -> CuratorInstanceSpec {
        self.service_type = Some(service_type);
        self
    }

    /// The URI spec template, e.g. `{scheme}://{address}:{port}` (Curator's `new UriSpec(...)`).
    /// Defaults to none (`null`).
    pub fn uri_spec(mut self, template: impl Into<String>) -> CuratorInstanceSpec {
        self.uri_spec = Some(template.into());
        self
    }

    /// The registration time, in milliseconds since the epoch: set it to make Curator's bytes
    /// predictable. Defaults to the time the Java side builds the instance.
    pub fn registration_time_utc(mut self, epoch_millis: i64) -> CuratorInstanceSpec {
        self.registration_time_utc = Some(epoch_millis);
        self
    }

    /// Whether the instance is enabled (only written with
    /// [`CuratorDiscoveryBuilder::enabled_field`](crate::CuratorDiscoveryBuilder::enabled_field)). Defaults to `true`.
    pub fn enabled(mut self, enabled: bool) -> CuratorInstanceSpec {
        self.enabled = Some(enabled);
        self
    }

    /// The spec as the one line of JSON the driver reads (its keys are `ServiceInstance`'s field
    /// names; unset fields are left out).
    pub fn to_json(&self) -> String {
        let mut fields = vec![format!("\"name\":{}", json_string(&self.name))];
        let mut text = |key: &str, value: &Option<String>| {
            if let Some(value) = value {
                fields.push(format!("\"{key}\":{}", json_string(value)));
            }
        };
        text("id", &self.id);
        text("address", &self.address);
        if let Some(port) = self.port {
            fields.push(format!("\"port\":{port}"));
        }
        if let Some(ssl_port) = self.ssl_port {
            fields.push(format!("\"sslPort\":{ssl_port}"));
        }
        if let Some(payload) = &self.payload_json {
            fields.push(format!("\"payload\":{}", payload.replace(['\n', '\r'], " ")));
        }
        if let Some(service_type) = self.service_type {
            fields.push(format!("\"serviceType\":\"{}\"", service_type.as_str()));
        }
        if let Some(uri_spec) = &self.uri_spec {
            fields.push(format!("\"uriSpec\":{}", json_string(uri_spec)));
        }
        if let Some(millis) = self.registration_time_utc {
            fields.push(format!("\"registrationTimeUTC\":{millis}"));
        }
        if let Some(enabled) = self.enabled {
            fields.push(format!("\"enabled\":{enabled}"));
        }
        format!("{{{}}}", fields.join(","))
    }
}

/// A JSON string literal for `text`.
fn json_string(text: &str) -> String {
    let mut quoted = String::with_capacity(text.len() + 2);
    quoted.push('"');
    for character in text.chars() {
        match character {
            '"' => quoted.push_str("\\\""),
            '\\' => quoted.push_str("\\\\"),
            '\n' => quoted.push_str("\\n"),
            '\r' => quoted.push_str("\\r"),
            '\t' => quoted.push_str("\\t"),
            control if u32::from(control) < 0x20 => {
                quoted.push_str(&format!("\\u{:04x}", u32::from(control)));
            }
            other => quoted.push(other),
        }
    }
    quoted.push('"');
    quoted
}

/// What a Curator `ServiceCache` holds ([`CuratorDiscovery::cache_instances`](crate::CuratorDiscovery::cache_instances)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuratorCachedInstances {
    /// `getInstances()`, each as Curator serializes it, sorted by id.
    pub instances: Vec<String>,
    /// How many times the cache's listener was told `cacheChanged` since the cache started.
    pub changes: u64,
}

/// A Curator `ServiceCache` started for a benchmark ([`CuratorDiscovery::watch_cache`](crate::CuratorDiscovery::watch_cache)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CuratorCacheWatch {
    /// Java heap in use after full GCs, after the cache's first load minus before it was built.
    pub heap_bytes: i64,
    /// How many instances it held after its first load.
    pub instances: usize,
}

/// An instance a watched Curator `ServiceCache` got ([`CuratorDiscovery::cache_arrivals`](crate::CuratorDiscovery::cache_arrivals)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuratorArrival {
    /// When Curator called the cache's listener, in microseconds since the Unix epoch (the JVM's
    /// clock: this machine's).
    pub epoch_micros: u64,
    /// The id of the instance that was added or re-read.
    pub id: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_are_one_line_of_json_with_curators_keys() {
        let spec = CuratorInstanceSpec::new("a \"quoted\"\nname")
            .ssl_port(8443)
            .payload_json("{\n  \"k\": [1, 2]\n}")
            .enabled(false);
        assert_eq!(
            spec.to_json(),
            r#"{"name":"a \"quoted\"\nname","sslPort":8443,"payload":{   "k": [1, 2] },"enabled":false}"#
        );
        assert!(!spec.to_json().contains('\n'));
        assert_eq!(json_string("tab\tbell\u{7}é"), r#""tab\tbell\u0007é""#);
    }

    #[test]
    fn service_types_are_curators_names() {
        let names: Vec<_> = [
            CuratorServiceType::Dynamic,
            CuratorServiceType::DynamicSequential,
            CuratorServiceType::Static,
            CuratorServiceType::Permanent,
        ]
        .iter()
        .map(|kind| kind.as_str())
        .collect();
        assert_eq!(names, ["DYNAMIC", "DYNAMIC_SEQUENTIAL", "STATIC", "PERMANENT"]);
        assert_eq!(CuratorServiceType::default(), CuratorServiceType::Dynamic);
    }
}
