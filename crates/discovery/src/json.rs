//! `JsonInstanceSerializer`: instances as Curator's `JsonInstanceSerializer` writes and reads them.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Deserializer, Serialize};

use crate::error::{DiscoveryError, Result};
use crate::instance::{ServiceInstance, ServiceType};
use crate::jackson::JacksonFormatter;
use crate::uri_spec::UriSpec;

/// Writes and reads instances as Curator 5.x's `JsonInstanceSerializer` does, byte for byte: the
/// fields in Curator's order (`name`, `id`, `address`, `port`, `sslPort`, `payload`,
/// `registrationTimeUTC`, `serviceType`, `uriSpec`), `null` for what is not set, and Jackson's
/// escapes and number forms.
///
/// - **`enabled`**: left out by default, as Curator's default (its "compatible serialization
///   mode", CURATOR-275); [`write_enabled(true)`](Self::write_enabled) writes it last, as
///   Curator's `new JsonInstanceSerializer(cls, false)`. A reader takes a missing `enabled` as
///   `true`, so with the default an instance set to disabled reads back enabled: write `enabled`
///   if you use it (Curator 5 readers accept it).
/// - **Payload**: written by serde, read into `P`. Unknown fields are ignored, missing ones take
///   Curator's defaults (an empty name and id, no address, time 0, `DYNAMIC`). Jackson's type id
///   in a Java payload (`"@class"`, or the `["java.util.ArrayList", [...]]` wrapper of a list) is
///   part of the payload's JSON: [`serde_json::Value`] keeps it, a typed payload ignores an
///   `"@class"` field it has no field for. The object keys of a `Value` are written in
///   serde_json's order (sorted), so a Java object payload read as `Value` and written again may
///   change its key order; read it as `Box<serde_json::value::RawValue>` to write it back byte
///   for byte.
///
/// ```
/// use zk_recipes_discovery::{JsonInstanceSerializer, ServiceInstance};
///
/// let instance = ServiceInstance::builder("api")
///     .id("id-1")
///     .address("10.0.0.7")
///     .port(8080)
///     .registration_time_utc(1_700_000_000_123)
///     .build();
/// let serializer = JsonInstanceSerializer::new();
/// let bytes = serializer.serialize(&instance)?;
/// assert_eq!(
///     std::str::from_utf8(&bytes).unwrap(),
///     r#"{"name":"api","id":"id-1","address":"10.0.0.7","port":8080,"sslPort":null,"payload":null,"registrationTimeUTC":1700000000123,"serviceType":"DYNAMIC","uriSpec":null}"#
/// );
/// let read: ServiceInstance = serializer.deserialize(&bytes)?;
/// assert_eq!(read, instance);
/// # Ok::<(), zk_recipes_discovery::DiscoveryError>(())
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct JsonInstanceSerializer {
    write_enabled: bool,
}

impl JsonInstanceSerializer {
    /// Curator's default serializer: `enabled` is not written.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether `enabled` is written (after `uriSpec`). Defaults to `false`, as Curator's default
    /// (`compatibleSerializationMode` true); `true` is Curator's
    /// `new JsonInstanceSerializer(cls, false)`.
    ///
    /// ```
    /// use zk_recipes_discovery::{JsonInstanceSerializer, ServiceInstance};
    ///
    /// let disabled = ServiceInstance::builder("api").enabled(false).build();
    /// let bytes = JsonInstanceSerializer::new().write_enabled(true).serialize(&disabled)?;
    /// assert!(bytes.ends_with(br#""uriSpec":null,"enabled":false}"#));
    /// # Ok::<(), zk_recipes_discovery::DiscoveryError>(())
    /// ```
    pub fn write_enabled(mut self, write_enabled: bool) -> Self {
        self.write_enabled = write_enabled;
        self
    }

    /// Whether `enabled` is written.
    pub fn writes_enabled(&self) -> bool {
        self.write_enabled
    }

    /// The instance as Curator's JSON.
    ///
    /// # Errors
    /// [`DiscoveryError::Serialize`] when the payload cannot be written as JSON (a map with
    /// non-string keys, a `Serialize` impl that fails).
    pub fn serialize<P: Serialize>(&self, instance: &ServiceInstance<P>) -> Result<Vec<u8>> {
        let wire = WireOut {
            name: &instance.name,
            id: &instance.id,
            address: instance.address.as_deref(),
            port: instance.port,
            ssl_port: instance.ssl_port,
            payload: instance.payload.as_ref(),
            registration_time_utc: instance.registration_time_utc,
            service_type: instance.service_type,
            uri_spec: instance.uri_spec.as_ref(),
            enabled: self.write_enabled.then_some(instance.enabled),
        };
        let mut bytes = Vec::with_capacity(256);
        let mut serializer = serde_json::Serializer::with_formatter(&mut bytes, JacksonFormatter);
        wire.serialize(&mut serializer).map_err(DiscoveryError::Serialize)?;
        Ok(bytes)
    }

    /// An instance from Curator's JSON (any of Curator's versions and modes: `enabled` or not,
    /// fields missing or unknown).
    ///
    /// # Errors
    /// [`DiscoveryError::Deserialize`] (without a path) when the data is not such JSON, or the
    /// payload does not fit `P`.
    pub fn deserialize<P: DeserializeOwned>(&self, data: &[u8]) -> Result<ServiceInstance<P>> {
        let wire: WireIn<P> = serde_json::from_slice(data)
            .map_err(|source| DiscoveryError::Deserialize { path: None, source })?;
        Ok(ServiceInstance {
            name: wire.name,
            id: wire.id,
            address: wire.address,
            port: wire.port,
            ssl_port: wire.ssl_port,
            payload: wire.payload,
            registration_time_utc: wire.registration_time_utc,
            service_type: wire.service_type,
            uri_spec: wire.uri_spec,
            enabled: wire.enabled.unwrap_or(true),
        })
    }
}

/// What is written, in Curator's (Jackson's) field order.
#[derive(Serialize)]
struct WireOut<'a, P> {
    name: &'a str,
    id: &'a str,
    address: Option<&'a str>,
    port: Option<i32>,
    #[serde(rename = "sslPort")]
    ssl_port: Option<i32>,
    payload: Option<&'a P>,
    #[serde(rename = "registrationTimeUTC")]
    registration_time_utc: i64,
    #[serde(rename = "serviceType")]
    service_type: ServiceType,
    #[serde(rename = "uriSpec")]
    uri_spec: Option<&'a UriSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    enabled: Option<bool>,
}

/// What is read: every field optional (Jackson fills what is missing with the defaults of
/// Curator's no-argument constructor), unknown fields ignored.
#[derive(Deserialize)]
#[serde(bound = "P: DeserializeOwned")]
struct WireIn<P> {
    #[serde(default, deserialize_with = "null_as_default")]
    name: String,
    #[serde(default, deserialize_with = "null_as_default")]
    id: String,
    #[serde(default)]
    address: Option<String>,
    #[serde(default)]
    port: Option<i32>,
    #[serde(default, rename = "sslPort")]
    ssl_port: Option<i32>,
    #[serde(default = "none")]
    payload: Option<P>,
    #[serde(default, rename = "registrationTimeUTC", deserialize_with = "null_as_default")]
    registration_time_utc: i64,
    #[serde(default, rename = "serviceType", deserialize_with = "null_as_default")]
    service_type: ServiceType,
    #[serde(default, rename = "uriSpec")]
    uri_spec: Option<UriSpec>,
    #[serde(default)]
    enabled: Option<bool>,
}

fn none<P>() -> Option<P> {
    None
}

/// `null` as the type's default (what Curator's constructor gives a missing field).
fn null_as_default<'de, D, T>(deserializer: D) -> std::result::Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Deserialize<'de> + Default,
{
    Ok(Option::<T>::deserialize(deserializer)?.unwrap_or_default())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_and_unknown_fields_read_as_curator_reads_them() {
        // Curator 5.4 read this as name x, id y, every other field its default, enabled true.
        let read: ServiceInstance =
            JsonInstanceSerializer::new().deserialize(br#"{"name":"x","id":"y"}"#).expect("read");
        let expected = ServiceInstance {
            name: "x".into(),
            id: "y".into(),
            address: None,
            port: None,
            ssl_port: None,
            payload: None,
            registration_time_utc: 0,
            service_type: ServiceType::Dynamic,
            uri_spec: None,
            enabled: true,
        };
        assert_eq!(read, expected);
        // ... and this with payload {a=1}, enabled false, `extra` ignored.
        let read: ServiceInstance = JsonInstanceSerializer::new()
            .deserialize(br#"{"name":"x","id":"y","payload":{"a":1},"extra":5,"enabled":false}"#)
            .expect("read");
        assert_eq!(read.payload, Some(serde_json::json!({"a": 1})));
        assert!(!read.enabled);
        let nulls: ServiceInstance = JsonInstanceSerializer::new()
            .deserialize(br#"{"name":null,"id":"y","serviceType":null,"registrationTimeUTC":null}"#)
            .expect("read");
        assert_eq!(
            (nulls.name.as_str(), nulls.service_type, nulls.registration_time_utc),
            ("", ServiceType::Dynamic, 0)
        );
    }

    #[test]
    fn a_payload_that_does_not_fit_its_type_is_a_typed_error() {
        let result =
            JsonInstanceSerializer::new().deserialize::<u32>(br#"{"name":"x","id":"y","payload":"text"}"#);
        assert!(matches!(result, Err(DiscoveryError::Deserialize { path: None, .. })), "{result:?}");
        let result =
            JsonInstanceSerializer::new().deserialize::<serde_json::Value>(br#"{"serviceType":"ODD"}"#);
        assert!(matches!(result, Err(DiscoveryError::Deserialize { .. })), "{result:?}");
    }
}
