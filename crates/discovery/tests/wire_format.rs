//! The JSON of service instances, byte for byte against what Curator 5.4.0's
//! `JsonInstanceSerializer` wrote (Debian's `libcurator-discovery-java`, Jackson 2.14): the
//! fixtures in `tests/fixtures/curator-5.4.0` are its output, unchanged (see the README there).
//! No server needed.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};
use zk_recipes_discovery::{JsonInstanceSerializer, ServiceInstance, ServiceType, UriSpec};

const TIME: i64 = 1_700_000_000_123;

fn fixture(name: &str) -> Vec<u8> {
    let path = format!("{}/tests/fixtures/curator-5.4.0/{name}.json", env!("CARGO_MANIFEST_DIR"));
    std::fs::read(&path).unwrap_or_else(|err| panic!("{path}: {err}"))
}

fn compatible() -> JsonInstanceSerializer {
    JsonInstanceSerializer::new()
}

fn with_enabled() -> JsonInstanceSerializer {
    JsonInstanceSerializer::new().write_enabled(true)
}

/// Serializes with `serializer`, asserts the bytes are the fixture's, and reads the fixture back
/// into an equal instance.
fn same_as_curator<P>(name: &str, serializer: JsonInstanceSerializer, instance: &ServiceInstance<P>)
where
    P: Serialize + serde::de::DeserializeOwned + PartialEq + std::fmt::Debug,
{
    let expected = fixture(name);
    let written = serializer.serialize(instance).expect("serialize");
    assert_eq!(
        String::from_utf8_lossy(&written),
        String::from_utf8_lossy(&expected),
        "{name}: Rust's bytes differ from Curator's"
    );
    let read: ServiceInstance<P> = serializer.deserialize(&expected).expect("deserialize");
    assert_eq!(&read, instance, "{name}: read back");
}

fn base(name: &str, id: &str) -> zk_recipes_discovery::ServiceInstanceBuilder {
    ServiceInstance::builder(name).id(id).registration_time_utc(TIME)
}

#[test]
fn a_null_payload_and_no_uri_spec() {
    let instance = base("api", "id-1").address("10.0.0.7").port(8080).build();
    same_as_curator("null-payload", compatible(), &instance);
}

#[test]
fn a_map_payload_with_its_class_a_uri_spec_and_an_ssl_port() {
    // Java's LinkedHashMap keeps its keys' order: a typed payload writes its fields in order.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Settings {
        #[serde(rename = "@class")]
        class: String,
        zone: String,
        weight: i32,
        #[serde(rename = "1st")]
        first: bool,
    }
    let settings =
        Settings { class: "java.util.LinkedHashMap".into(), zone: "eu-1".into(), weight: 3, first: true };
    let instance = base("api", "id-2")
        .address("10.0.0.8")
        .port(8080)
        .ssl_port(8443)
        .payload(settings)
        .service_type(ServiceType::Static)
        .uri_spec(UriSpec::parse("{scheme}://{address}:{port}").expect("spec"))
        .build();
    same_as_curator("map-payload-uri-ssl", compatible(), &instance);
    assert_eq!(instance.resolve_uri().as_deref(), Some("https://10.0.0.8:8080"), "Curator's buildUriSpec()");

    // As raw JSON: the payload keeps Jackson's "@class"; read as a RawValue it is written back
    // byte for byte.
    let raw: ServiceInstance = compatible().deserialize(&fixture("map-payload-uri-ssl")).expect("read");
    assert_eq!(
        raw.payload,
        Some(json!({"@class": "java.util.LinkedHashMap", "zone": "eu-1", "weight": 3, "1st": true}))
    );
    let verbatim: ServiceInstance<Box<RawValue>> =
        compatible().deserialize(&fixture("map-payload-uri-ssl")).expect("read");
    assert_eq!(compatible().serialize(&verbatim).expect("write"), fixture("map-payload-uri-ssl"));
}

#[test]
fn a_hash_map_payload_as_raw_json() {
    // One key besides "@class": serde_json's sorted keys give Jackson's order here.
    let payload = json!({"@class": "java.util.HashMap", "zone": "eu-1"});
    let instance = base("api", "id-2b").address("10.0.0.8").port(8080).payload(payload).build();
    same_as_curator("hashmap-payload", compatible(), &instance);
}

#[test]
fn a_string_payload_a_sequential_instance_without_port_and_every_uri_variable() {
    let spec =
        "{scheme}://{address}:{ssl-port}/x/{name}/{id}?t={registration-time-utc}&s={service-type}&{[}lit{]}";
    let instance = base("worker", "id-3")
        .address("10.0.0.9")
        .payload("hello".to_owned())
        .service_type(ServiceType::DynamicSequential)
        .uri_spec(UriSpec::parse(spec).expect("spec"))
        .build();
    same_as_curator("string-payload-sequential", compatible(), &instance);
    // Curator's buildUriSpec() of the same instance.
    assert_eq!(
        instance.resolve_uri().as_deref(),
        Some("http://10.0.0.9:/x/worker/id-3?t=1700000000123&s=dynamic_sequential&{lit}")
    );
    let raw: ServiceInstance = compatible().deserialize(&fixture("string-payload-sequential")).expect("read");
    assert_eq!(raw.payload, Some(json!("hello")));
}

#[test]
fn enabled_is_written_only_by_the_serializer_that_writes_it() {
    let disabled = base("cron", "id-4")
        .no_address()
        .port(1)
        .ssl_port(2)
        .payload(json!(42))
        .service_type(ServiceType::Permanent)
        .enabled(false)
        .build();
    // Curator's default (compatible) serializer leaves `enabled` out: read back, it is true.
    assert_eq!(compatible().serialize(&disabled).expect("write"), fixture("permanent-compat"));
    let read: ServiceInstance = compatible().deserialize(&fixture("permanent-compat")).expect("read");
    assert!(read.enabled, "a missing `enabled` reads as true");
    assert_eq!(read.address, None);
    assert_eq!(read.payload, Some(json!(42)));
    // `new JsonInstanceSerializer(cls, false)` writes it last.
    same_as_curator("permanent-enabled-false", with_enabled(), &disabled);
    let enabled = base("cron", "id-5").address("h").port(1).build();
    same_as_curator("enabled-true", with_enabled(), &enabled);
}

#[test]
fn strings_are_escaped_as_jackson_escapes_them() {
    let instance = base("esc", "id-6")
        .address("a\"b\\c")
        .port(1)
        .payload(json!("tab\t nl\n cr\r bs\u{8} ff\u{c} ctl\u{1}\u{1f} del\u{7f} é € 𝄞 </script> \u{2028}"))
        .build();
    same_as_curator("escaping", compatible(), &instance);
}

#[test]
fn numbers_lists_and_nested_objects() {
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Numbers {
        #[serde(rename = "@class")]
        class: String,
        d: f64,
        big: f64,
        long: i64,
        list: Vec<Value>,
        inner: HashMap<String, Option<String>>,
    }
    let numbers = Numbers {
        class: "java.util.LinkedHashMap".into(),
        d: 1.5,
        big: 1e10,
        long: 12_345_678_901_234,
        list: vec![json!(1), json!("two")],
        inner: HashMap::from([("x".to_owned(), None)]),
    };
    let instance = base("num", "id-7").address("h").port(1).payload(numbers).build();
    same_as_curator("numbers-payload", compatible(), &instance);
    // Read as raw JSON and written again: Java's `1.0E10` stays `1.0E10`.
    let raw: ServiceInstance<Box<RawValue>> =
        compatible().deserialize(&fixture("numbers-payload")).expect("read");
    assert_eq!(compatible().serialize(&raw).expect("write"), fixture("numbers-payload"));
    let value: ServiceInstance = compatible().deserialize(&fixture("numbers-payload")).expect("read");
    assert_eq!(value.payload.as_ref().and_then(|payload| payload["big"].as_f64()), Some(1e10));
}

#[test]
fn a_list_payload_keeps_jacksons_type_wrapper() {
    let payload = json!(["java.util.ArrayList", ["a", 1]]);
    let instance = base("list", "id-8").address("h").port(1).payload(payload).build();
    same_as_curator("list-payload", compatible(), &instance);
}

#[test]
fn a_spring_cloud_zookeeper_payload_reads_raw_and_typed() {
    let bytes = fixture("spring");
    // Raw: every field, "@class" included.
    let raw: ServiceInstance = compatible().deserialize(&bytes).expect("read raw");
    assert_eq!(raw.name, "app");
    assert_eq!(raw.id, "6c3f0a6e-1b7e-4d1a-9a55-0c8f4f3b2f10");
    assert_eq!(raw.address.as_deref(), Some("10.0.0.5"));
    assert_eq!((raw.port, raw.ssl_port), (Some(8080), None));
    assert_eq!(raw.registration_time_utc, TIME);
    assert_eq!(raw.service_type, ServiceType::Dynamic);
    assert!(raw.enabled);
    assert_eq!(raw.resolve_uri().as_deref(), Some("http://10.0.0.5:8080"));
    assert_eq!(
        raw.payload,
        Some(json!({
            "@class": "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance",
            "id": "app",
            "name": "app",
            "metadata": {"k": "v"}
        }))
    );

    // Typed: "@class" ignored, ...
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct ZookeeperInstance {
        id: String,
        name: String,
        metadata: HashMap<String, String>,
    }
    let typed: ServiceInstance<ZookeeperInstance> = compatible().deserialize(&bytes).expect("read typed");
    let payload = typed.payload.as_ref().expect("payload");
    assert_eq!((payload.id.as_str(), payload.name.as_str()), ("app", "app"));
    assert_eq!(payload.metadata.get("k").map(String::as_str), Some("v"));

    // ... or kept, and then written back as Spring wrote it.
    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct SpringPayload {
        #[serde(rename = "@class")]
        class: String,
        id: String,
        name: String,
        metadata: HashMap<String, String>,
    }
    let kept: ServiceInstance<SpringPayload> = compatible().deserialize(&bytes).expect("read typed");
    assert_eq!(compatible().serialize(&kept).expect("write"), bytes);
}
