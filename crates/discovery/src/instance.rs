//! `ServiceInstance`, its builder and `ServiceType` (Curator's classes of the same names).

use std::collections::HashMap;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::address::default_address;
use crate::uri_spec::{
    UriSpec, FIELD_ADDRESS, FIELD_CLOSE_BRACE, FIELD_ID, FIELD_NAME, FIELD_OPEN_BRACE, FIELD_PORT,
    FIELD_REGISTRATION_TIME_UTC, FIELD_SCHEME, FIELD_SERVICE_TYPE, FIELD_SSL_PORT,
};

/// How an instance's node lives (Curator's `ServiceType`, written as `"DYNAMIC"` etc.).
///
/// | type | node | gone when |
/// |---|---|---|
/// | [`Dynamic`](Self::Dynamic) | EPHEMERAL `<base>/<name>/<id>` | unregistered, closed, or its session is lost (re-registered on the new session) |
/// | [`DynamicSequential`](Self::DynamicSequential) | EPHEMERAL_SEQUENTIAL `<base>/<name>/_c_<uuid>-<id><seq>` | as `Dynamic` |
/// | [`Static`](Self::Static) | PERSISTENT `<base>/<name>/<id>` | unregistered or closed (it outlives a crash) |
/// | [`Permanent`](Self::Permanent) | PERSISTENT `<base>/<name>/<id>` | only when unregistered: `close` leaves it |
///
/// ```
/// use zk_recipes_discovery::ServiceType;
///
/// assert_eq!(serde_json::to_string(&ServiceType::DynamicSequential).unwrap(), r#""DYNAMIC_SEQUENTIAL""#);
/// assert!(ServiceType::Dynamic.is_dynamic());
/// assert!(!ServiceType::Permanent.is_dynamic());
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum ServiceType {
    /// An ephemeral node: there while the registering process's session is (the default).
    #[default]
    Dynamic,
    /// A persistent node: it outlives its session and a crash, and is deleted by `unregister`
    /// and `close`.
    Static,
    /// A persistent node that `close` leaves behind (Curator deletes it on close: CURATOR-94).
    Permanent,
    /// An ephemeral-sequential node: a new unique node name per registration.
    DynamicSequential,
}

impl ServiceType {
    /// Whether the node is ephemeral (`Dynamic`, `DynamicSequential`; Curator's `isDynamic`).
    pub fn is_dynamic(self) -> bool {
        matches!(self, Self::Dynamic | Self::DynamicSequential)
    }

    /// The name Curator writes (`DYNAMIC`, `STATIC`, `PERMANENT`, `DYNAMIC_SEQUENTIAL`).
    pub fn wire_name(self) -> &'static str {
        match self {
            Self::Dynamic => "DYNAMIC",
            Self::Static => "STATIC",
            Self::Permanent => "PERMANENT",
            Self::DynamicSequential => "DYNAMIC_SEQUENTIAL",
        }
    }
}

/// One instance of a service (Curator's `ServiceInstance`): where it listens and what else its
/// clients should know, stored as Curator's JSON in its node.
///
/// `P` is the payload type: any JSON by default ([`serde_json::Value`]), or your own type through
/// serde. A payload written by Java carries Jackson's type id (`"@class"`) in its object; a typed
/// payload ignores it unless it has a field renamed `"@class"` (which a Java reader with a typed
/// `JsonInstanceSerializer` needs to find its class). A `null` payload is `None`.
///
/// Fields are public to read and change (an update is a changed copy); build a new one with
/// [`ServiceInstance::builder`].
///
/// ```
/// use serde::{Deserialize, Serialize};
/// use zk_recipes_discovery::{ServiceInstance, ServiceType, UriSpec};
///
/// let instance = ServiceInstance::builder("api")
///     .address("10.0.0.7")
///     .port(8080)
///     .payload(serde_json::json!({"zone": "eu-1"}))
///     .uri_spec(UriSpec::parse("{scheme}://{address}:{port}")?)
///     .build();
/// assert_eq!(instance.resolve_uri().as_deref(), Some("http://10.0.0.7:8080"));
/// assert_eq!(instance.service_type, ServiceType::Dynamic);
///
/// // A typed payload, with the class name a typed Java reader looks for.
/// #[derive(Debug, Clone, Serialize, Deserialize)]
/// struct Details {
///     #[serde(rename = "@class")]
///     class: String,
///     zone: String,
/// }
/// let typed: ServiceInstance<Details> = ServiceInstance::builder("api")
///     .payload(Details { class: "com.example.Details".into(), zone: "eu-1".into() })
///     .build();
/// assert_eq!(typed.payload.as_ref().map(|details| details.zone.as_str()), Some("eu-1"));
/// # Ok::<(), zk_recipes_discovery::DiscoveryError>(())
/// ```
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ServiceInstance<P = serde_json::Value> {
    /// The service's name: the node under the base path that holds its instances.
    pub name: String,
    /// This instance's id, unique within the service: its node's name (for
    /// `DynamicSequential`, the name before the sequence number).
    pub id: String,
    /// Where it listens (host name or address); `None` is written as `null`.
    pub address: Option<String>,
    /// Its port, if any.
    pub port: Option<i32>,
    /// Its TLS port, if any (`scheme` resolves to `https` when set).
    pub ssl_port: Option<i32>,
    /// What else its clients should know.
    pub payload: Option<P>,
    /// When it was registered, in milliseconds since the Unix epoch (UTC).
    pub registration_time_utc: i64,
    /// How its node lives.
    pub service_type: ServiceType,
    /// How to build its URI.
    pub uri_spec: Option<UriSpec>,
    /// Whether clients should use it (Curator's `enabled`; written only by a serializer set to
    /// [`write_enabled`](crate::JsonInstanceSerializer::write_enabled), read as `true` when absent).
    pub enabled: bool,
}

impl ServiceInstance {
    /// A builder for an instance of the service `name`, with Curator's defaults: a random UUID as
    /// the id, this host's address (below), registered now, [`ServiceType::Dynamic`], enabled,
    /// no port, payload or URI spec. [`payload`](ServiceInstanceBuilder::payload) picks the
    /// payload type (`serde_json::Value` until then).
    ///
    /// The address is Curator's: the first address of a network interface that is not a
    /// loopback address, nor link-local unless the interface is point-to-point
    /// (`ServiceInstanceBuilder.getAllLocalIPs()`), IPv4 first, as a JVM run with
    /// `java.net.preferIPv4Stack=true` picks it (a JVM without that flag may list an IPv6 address
    /// first); an IPv6 address is written as Java writes it (`fd00:0:0:0:0:0:0:2%eth0`). `None`
    /// when there is none, as in Curator.
    ///
    /// ```
    /// use zk_recipes_discovery::{ServiceInstance, ServiceType};
    ///
    /// let instance = ServiceInstance::builder("api").port(8080).build();
    /// assert_eq!(instance.name, "api");
    /// assert_eq!(instance.id.len(), 36);
    /// assert_eq!(instance.service_type, ServiceType::Dynamic);
    /// assert!(instance.enabled && instance.payload.is_none());
    /// ```
    pub fn builder(name: impl Into<String>) -> ServiceInstanceBuilder {
        ServiceInstanceBuilder::new(name)
    }
}

impl<P> ServiceInstance<P> {
    /// The instance's URI from its [`UriSpec`] (Curator's `buildUriSpec()`); `None` without a
    /// spec (where Curator returns `""`).
    ///
    /// ```
    /// use zk_recipes_discovery::{ServiceInstance, UriSpec};
    ///
    /// let instance = ServiceInstance::builder("api")
    ///     .address("10.0.0.7")
    ///     .ssl_port(8443)
    ///     .uri_spec(UriSpec::parse("{scheme}://{address}:{ssl-port}")?)
    ///     .build();
    /// assert_eq!(instance.resolve_uri().as_deref(), Some("https://10.0.0.7:8443"));
    /// # Ok::<(), zk_recipes_discovery::DiscoveryError>(())
    /// ```
    pub fn resolve_uri(&self) -> Option<String> {
        self.uri_spec.as_ref().map(|spec| spec.resolve(self))
    }

    /// The URI with extra `variables` overriding the instance's (Curator's
    /// `buildUriSpec(variables)`); `None` without a spec.
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use zk_recipes_discovery::{ServiceInstance, UriSpec};
    ///
    /// let instance = ServiceInstance::builder("api")
    ///     .address("h")
    ///     .port(80)
    ///     .uri_spec(UriSpec::parse("{scheme}://{address}:{port}/{path}")?)
    ///     .build();
    /// let variables = HashMap::from([("path".to_owned(), "health".to_owned())]);
    /// assert_eq!(instance.resolve_uri_with(&variables).as_deref(), Some("http://h:80/health"));
    /// # Ok::<(), zk_recipes_discovery::DiscoveryError>(())
    /// ```
    pub fn resolve_uri_with(&self, variables: &HashMap<String, String>) -> Option<String> {
        self.uri_spec.as_ref().map(|spec| spec.resolve_with(Some(self), variables))
    }

    /// A builder that starts from this instance (to register a changed copy, or to change the
    /// payload's type).
    ///
    /// ```
    /// use zk_recipes_discovery::ServiceInstance;
    ///
    /// let first = ServiceInstance::builder("api").port(8080).build();
    /// let moved = first.clone().into_builder().port(8081).build();
    /// assert_eq!((moved.id.as_str(), moved.port), (first.id.as_str(), Some(8081)));
    /// ```
    pub fn into_builder(self) -> ServiceInstanceBuilder<P> {
        ServiceInstanceBuilder { instance: self }
    }
}

/// Builds a [`ServiceInstance`] ([`ServiceInstance::builder`]); defaults as said there.
///
/// ```
/// use zk_recipes_discovery::{ServiceInstance, ServiceType};
///
/// let instance = ServiceInstance::builder("cron")
///     .id("cron-1")
///     .address("10.0.0.9")
///     .port(9000)
///     .payload("nightly")
///     .service_type(ServiceType::Permanent)
///     .build();
/// assert_eq!(instance.payload, Some("nightly"));
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until build() is called"]
pub struct ServiceInstanceBuilder<P = serde_json::Value> {
    instance: ServiceInstance<P>,
}

impl ServiceInstanceBuilder {
    /// A builder for an instance of `name`, with the defaults of [`ServiceInstance::builder`].
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            instance: ServiceInstance {
                name: name.into(),
                id: uuid::Uuid::new_v4().to_string(),
                address: default_address(),
                port: None,
                ssl_port: None,
                payload: None,
                registration_time_utc: now_utc_millis(),
                service_type: ServiceType::Dynamic,
                uri_spec: None,
                enabled: true,
            },
        }
    }
}

impl<P> ServiceInstanceBuilder<P> {
    /// The service's name.
    pub fn name(mut self, name: impl Into<String>) -> Self {
        self.instance.name = name.into();
        self
    }

    /// The instance's id. Defaults to a random UUID.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.instance.id = id.into();
        self
    }

    /// Where it listens. Defaults to this host's first interface address (see
    /// [`ServiceInstance::builder`]).
    pub fn address(mut self, address: impl Into<String>) -> Self {
        self.instance.address = Some(address.into());
        self
    }

    /// No address (written as `null`).
    pub fn no_address(mut self) -> Self {
        self.instance.address = None;
        self
    }

    /// Its port. Defaults to none.
    pub fn port(mut self, port: impl Into<i32>) -> Self {
        self.instance.port = Some(port.into());
        self
    }

    /// Its TLS port. Defaults to none.
    pub fn ssl_port(mut self, port: impl Into<i32>) -> Self {
        self.instance.ssl_port = Some(port.into());
        self
    }

    /// The payload; its type becomes the instance's payload type. Defaults to none (`null`).
    pub fn payload<Q>(self, payload: Q) -> ServiceInstanceBuilder<Q> {
        self.map_payload(Some(payload))
    }

    /// No payload (`null`), of payload type `Q`.
    pub fn no_payload<Q>(self) -> ServiceInstanceBuilder<Q> {
        self.map_payload(None)
    }

    fn map_payload<Q>(self, payload: Option<Q>) -> ServiceInstanceBuilder<Q> {
        let ServiceInstance {
            name,
            id,
            address,
            port,
            ssl_port,
            payload: _,
            registration_time_utc,
            service_type,
            uri_spec,
            enabled,
        } = self.instance;
        ServiceInstanceBuilder {
            instance: ServiceInstance {
                name,
                id,
                address,
                port,
                ssl_port,
                payload,
                registration_time_utc,
                service_type,
                uri_spec,
                enabled,
            },
        }
    }

    /// When it was registered, in ms since the Unix epoch. Defaults to now.
    pub fn registration_time_utc(mut self, millis: i64) -> Self {
        self.instance.registration_time_utc = millis;
        self
    }

    /// How its node lives. Defaults to [`ServiceType::Dynamic`].
    pub fn service_type(mut self, service_type: ServiceType) -> Self {
        self.instance.service_type = service_type;
        self
    }

    /// How to build its URI. Defaults to none.
    pub fn uri_spec(mut self, uri_spec: UriSpec) -> Self {
        self.instance.uri_spec = Some(uri_spec);
        self
    }

    /// Whether clients should use it. Defaults to `true`. Written only by a serializer set to
    /// [`write_enabled`](crate::JsonInstanceSerializer::write_enabled) (Curator's default leaves it
    /// out, and readers then take `true`).
    pub fn enabled(mut self, enabled: bool) -> Self {
        self.instance.enabled = enabled;
        self
    }

    /// The instance. Nothing is checked here; [`register`](crate::ServiceDiscovery::register)
    /// checks the name and id.
    pub fn build(self) -> ServiceInstance<P> {
        self.instance
    }
}

fn now_utc_millis() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|since| since.as_millis() as i64).unwrap_or(0)
}

/// Resolving a spec needs an instance's fields, so it lives beside the instance.
impl UriSpec {
    /// The URI for `instance` (Curator's `build(serviceInstance)`, and the instance's
    /// `buildUriSpec()`).
    pub fn resolve<P>(&self, instance: &ServiceInstance<P>) -> String {
        self.resolve_with(Some(instance), &HashMap::new())
    }

    /// The URI with the instance's variables (if any), overridden by `variables` (Curator's
    /// `build(serviceInstance, variables)`; without an instance, `build(variables)`).
    ///
    /// ```
    /// use std::collections::HashMap;
    /// use zk_recipes_discovery::{ServiceInstance, UriSpec};
    ///
    /// let spec = UriSpec::parse("{scheme}://{address}:{port}{path}")?;
    /// let variables = HashMap::from([("path".to_owned(), "/health".to_owned())]);
    /// assert_eq!(spec.resolve_with::<()>(None, &variables), "http://:/health");
    /// let instance = ServiceInstance::builder("api").address("h").port(80).build();
    /// assert_eq!(spec.resolve_with(Some(&instance), &variables), "http://h:80/health");
    /// # Ok::<(), zk_recipes_discovery::DiscoveryError>(())
    /// ```
    pub fn resolve_with<P>(
        &self,
        instance: Option<&ServiceInstance<P>>,
        variables: &HashMap<String, String>,
    ) -> String {
        let mut known: HashMap<&str, String> = HashMap::new();
        known.insert(FIELD_OPEN_BRACE, "{".into());
        known.insert(FIELD_CLOSE_BRACE, "}".into());
        known.insert(FIELD_SCHEME, "http".into());
        if let Some(instance) = instance {
            let number = |value: Option<i32>| value.map(|value| value.to_string()).unwrap_or_default();
            known.insert(FIELD_NAME, instance.name.clone());
            known.insert(FIELD_ID, instance.id.clone());
            known.insert(FIELD_ADDRESS, instance.address.clone().unwrap_or_default());
            known.insert(FIELD_PORT, number(instance.port));
            known.insert(FIELD_SSL_PORT, number(instance.ssl_port));
            known.insert(FIELD_REGISTRATION_TIME_UTC, instance.registration_time_utc.to_string());
            known.insert(FIELD_SERVICE_TYPE, instance.service_type.wire_name().to_lowercase());
            if instance.ssl_port.is_some() {
                known.insert(FIELD_SCHEME, "https".into());
            }
        }
        let mut uri = String::new();
        for part in self.parts() {
            if !part.variable {
                uri.push_str(&part.value);
            } else if let Some(value) = variables.get(&part.value) {
                uri.push_str(value);
            } else if let Some(value) = known.get(part.value.as_str()) {
                uri.push_str(value);
            }
        }
        uri
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolving_matches_curators_build() {
        // What Curator 5.4's buildUriSpec() returned for the same instances.
        let spec = UriSpec::parse(
            "{scheme}://{address}:{ssl-port}/x/{name}/{id}?t={registration-time-utc}&s={service-type}&{[}lit{]}",
        )
        .expect("spec");
        let instance = ServiceInstance::builder("worker")
            .id("id-3")
            .address("10.0.0.9")
            .registration_time_utc(1_700_000_000_123)
            .service_type(ServiceType::DynamicSequential)
            .build();
        assert_eq!(
            spec.resolve(&instance),
            "http://10.0.0.9:/x/worker/id-3?t=1700000000123&s=dynamic_sequential&{lit}"
        );
        let secure = ServiceInstance::builder("api").address("10.0.0.8").port(8080).ssl_port(8443).build();
        assert_eq!(
            UriSpec::parse("{scheme}://{address}:{port}").expect("spec").resolve(&secure),
            "https://10.0.0.8:8080"
        );
        let none = UriSpec::parse("{scheme}://{address}:{port}").expect("spec");
        assert_eq!(none.resolve_with::<()>(None, &HashMap::new()), "http://:");
        let spaced = UriSpec::parse("{scheme}://{ address }:{port}/{}{ }{unknown}x").expect("spec");
        let plain = ServiceInstance::builder("api").address("10.0.0.7").port(8080).build();
        assert_eq!(spaced.resolve(&plain), "http://10.0.0.7:8080/x");
        let overridden = HashMap::from([("scheme".to_owned(), "grpc".to_owned())]);
        assert_eq!(none.resolve_with(Some(&secure), &overridden), "grpc://10.0.0.8:8080");
    }
}
