//! Service-discovery interop with Apache Curator 5.4's `curator-x-discovery` (a real JVM beside
//! Rust on the same server, each test under its own base path):
//!
//! - Rust registers instances of every service type (map payloads with and without `"@class"`, a
//!   Spring Cloud Zookeeper payload typed and untyped, ssl ports, URI specs, a string payload, no
//!   address): Curator's `queryForNames`, `queryForInstances`, `queryForInstance` and
//!   `ServiceCache` read every field, and serialize them again to the bytes Rust wrote, except for
//!   exact, known differences (Jackson's `"@class"` added to a map payload, and the property order
//!   of a payload class);
//! - Curator registers (both of its serializer modes): Rust's queries read every field, the
//!   payload as JSON, raw and typed, `enabled` missing as `true`, a `DYNAMIC_SEQUENTIAL` instance
//!   found by its id; Rust writes back Curator's bytes;
//! - Rust's `ServiceCache` (untyped, raw and typed payloads) sees Curator's registrations of every
//!   type with every field, and Curator's updates and unregistrations as `Updated` and `Removed`
//!   events naming the instance;
//! - updates from either side reach the other side's queries and Curator's `ServiceCache`;
//! - a Rust instance whose session expired (a fault proxy's black hole) is registered again with
//!   the data of an update made during the outage, and Curator's cache, queries and round-robin
//!   `ServiceProvider` hand it out beside Java's instances;
//! - Rust's `close` leaves a `PERMANENT` instance Curator still sees, and deletes the others;
//! - unregistering from either side removes the instance from the other side's view (and
//!   Curator's `unregisterService` of an instance it did not register does nothing).
//!
//! Needs Java, `javac` and Debian's `libcurator-discovery-java` (`scripts/install-deps.sh`).

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

use common::{assert_gone, read, within, within_for, Env, STEP};
use serde::{Deserialize, Serialize};
use serde_json::json;
use serde_json::value::RawValue;
use zk_recipes::discovery::{
    JsonInstanceSerializer, ServiceCacheEvent, ServiceCacheEvents, ServiceDiscovery, ServiceInstance,
    ServiceType, UriSpec,
};
use zk_recipes::framework::retry::ExponentialBackoffRetry;
use zk_recipes::framework::{Deadline, Framework};
use zk_recipes_interop::{
    CuratorCachedInstances, CuratorDiscovery, CuratorInstanceSpec, CuratorProviderStrategy,
    CuratorServiceType,
};
use zk_recipes_test_support::{lost_then_reconnected, session_of};
use zk_recipes_testing::FaultProxy;

/// How long a JVM start (with the driver's first compile) may take.
const JVM_START: Duration = Duration::from_secs(90);

/// A fixed registration time, so that both sides' bytes are predictable.
const REGISTERED_AT: i64 = 1_700_000_000_000;

/// Spring Cloud Zookeeper's payload class (the driver carries a stand-in with its properties).
const SPRING_CLASS: &str = "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance";

/// Spring Cloud Zookeeper's payload, typed, its fields in the Java class's property order (as
/// Jackson writes them), `"@class"` first (as Jackson writes the type id).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct ZookeeperInstance {
    #[serde(rename = "@class")]
    class: String,
    id: String,
    name: String,
    metadata: BTreeMap<String, String>,
}

fn spring_payload(service: &str) -> ZookeeperInstance {
    ZookeeperInstance {
        class: SPRING_CLASS.to_owned(),
        id: service.to_owned(),
        name: service.to_owned(),
        metadata: [("instance_status".to_owned(), "UP".to_owned())].into(),
    }
}

fn step() -> Deadline {
    Deadline::after(STEP)
}

fn uri_spec(template: &str) -> UriSpec {
    UriSpec::parse(template).expect("URI spec")
}

/// Curator's discovery on `base`: its own JVM and session, Curator's default serializer.
async fn curator(env: &Env, base: &str) -> CuratorDiscovery {
    within_for("starting Curator's discovery", JVM_START, CuratorDiscovery::start(&env.connect(), base))
        .await
        .expect("Curator discovery (needs libcurator-discovery-java: scripts/install-deps.sh)")
}

fn discovery(framework: &Framework, base: &str) -> ServiceDiscovery {
    ServiceDiscovery::builder(framework, base).build().expect("discovery")
}

/// The bytes Rust's (default) serializer writes for `instance`, as text.
fn rust_json<P: Serialize>(instance: &ServiceInstance<P>) -> String {
    let bytes = JsonInstanceSerializer::new().serialize(instance).expect("serialize");
    String::from_utf8(bytes).expect("UTF-8 JSON")
}

/// The data of the node of the instance `id` registered through `discovery`, as text.
async fn node_json<P>(framework: &Framework, discovery: &ServiceDiscovery<P>, id: &str) -> String {
    let node = discovery.instance_path(id).unwrap_or_else(|| panic!("{id} is not registered here"));
    let (data, _) = read(framework, &node).await.unwrap_or_else(|| panic!("{node} is missing"));
    String::from_utf8(data).expect("UTF-8 JSON")
}

/// `json` with `from` replaced by `to`, once; `from` must be in it (the difference is exact).
fn replaced(json: &str, from: &str, to: &str) -> String {
    assert!(json.contains(from), "{from} is not in {json}");
    json.replacen(from, to, 1)
}

/// The ids of Rust's instances, in its order.
fn ids<P>(instances: &[ServiceInstance<P>]) -> Vec<&str> {
    instances.iter().map(|instance| instance.id.as_str()).collect()
}

/// Polls Curator's `ServiceCache` of `name` until it holds exactly `expected` (sorted by id); the
/// cache's state then.
async fn cache_holds(
    curator: &mut CuratorDiscovery,
    name: &str,
    expected: &[String],
) -> CuratorCachedInstances {
    let started = Instant::now();
    loop {
        let cached = within("Curator's cache", curator.cache_instances(name)).await.expect("cached");
        if cached.instances == expected {
            return cached;
        }
        assert!(
            started.elapsed() < STEP,
            "Curator's cache of {name} after {STEP:?}: {:#?}\nexpected: {expected:#?}",
            cached.instances
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Polls Curator's `queryForInstances(name)` until it gives exactly `expected`.
async fn curator_query_gives(curator: &mut CuratorDiscovery, name: &str, expected: &[String]) {
    let started = Instant::now();
    loop {
        let found = within("Curator's query", curator.query_for_instances(name)).await.expect("query");
        if found == expected {
            return;
        }
        assert!(
            started.elapsed() < STEP,
            "Curator's query of {name} after {STEP:?}: {found:#?}\nexpected: {expected:#?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn rust_registrations_of_every_type_are_read_by_curator_with_the_same_fields() {
    const BASE: &str = "/interop-discovery/from-rust";
    let env = Env::start().await;
    let framework = env.framework().await;
    let untyped = discovery(&framework, BASE);
    let typed = ServiceDiscovery::builder(&framework, BASE)
        .payload_type::<ZookeeperInstance>()
        .build()
        .expect("typed");

    // A map payload without "@class", an ssl port and a URI spec.
    let map = ServiceInstance::builder("api")
        .id("api-1")
        .address("10.0.0.7")
        .port(8080)
        .ssl_port(8443)
        .payload(json!({"zone": "eu-1", "weight": 3, "ratio": 0.5}))
        .registration_time_utc(REGISTERED_AT)
        .uri_spec(uri_spec("{scheme}://{address}:{ssl-port}"))
        .build();
    // Spring Cloud Zookeeper's payload, typed (Jackson's property order).
    let spring_typed = ServiceInstance::builder("api")
        .id("api-2")
        .address("10.0.0.8")
        .port(8081)
        .payload(spring_payload("api"))
        .registration_time_utc(REGISTERED_AT + 1)
        .service_type(ServiceType::Static)
        .uri_spec(uri_spec("{scheme}://{address}:{port}"))
        .build();
    // A map payload that names Jackson's class first, as Jackson writes it; no port.
    let map_with_class = ServiceInstance::builder("api")
        .id("api-3")
        .address("10.0.0.9")
        .payload(json!({"@class": "java.util.LinkedHashMap", "region": "eu", "weight": 1}))
        .registration_time_utc(REGISTERED_AT + 2)
        .service_type(ServiceType::Permanent)
        .build();
    // Spring's payload as untyped JSON (serde_json writes the keys sorted).
    let spring_untyped = ServiceInstance::builder("api")
        .id("api-4")
        .address("10.0.0.10")
        .port(8082)
        .payload(serde_json::to_value(spring_payload("api")).expect("JSON"))
        .registration_time_utc(REGISTERED_AT + 3)
        .build();
    // A string payload, sequential.
    let sequential = ServiceInstance::builder("api")
        .id("worker-")
        .address("10.0.0.11")
        .port(9000)
        .payload(json!("nightly"))
        .registration_time_utc(REGISTERED_AT + 4)
        .service_type(ServiceType::DynamicSequential)
        .build();
    // Another service: no address, no payload.
    let bare = ServiceInstance::builder("billing")
        .id("billing-1")
        .no_address()
        .port(9090)
        .registration_time_utc(REGISTERED_AT + 5)
        .build();
    for instance in [&map, &map_with_class, &spring_untyped, &sequential, &bare] {
        within("register", untyped.register(instance, step())).await.expect("register");
    }
    within("register", typed.register(&spring_typed, step())).await.expect("register");

    // What Rust wrote, read from the server: its serializer's bytes.
    let written_map = node_json(&framework, &untyped, "api-1").await;
    let written_spring_typed = node_json(&framework, &typed, "api-2").await;
    let written_map_with_class = node_json(&framework, &untyped, "api-3").await;
    let written_spring_untyped = node_json(&framework, &untyped, "api-4").await;
    let written_sequential = node_json(&framework, &untyped, "worker-").await;
    let written_bare = node_json(&framework, &untyped, "billing-1").await;
    assert_eq!(written_map, rust_json(&map));
    assert_eq!(written_spring_typed, rust_json(&spring_typed));
    assert_eq!(written_map_with_class, rust_json(&map_with_class));
    assert_eq!(written_spring_untyped, rust_json(&spring_untyped));
    assert_eq!(written_sequential, rust_json(&sequential));
    assert_eq!(written_bare, rust_json(&bare));
    println!("Rust wrote:\n{written_map}\n{written_spring_typed}\n{written_spring_untyped}");

    // What Curator serializes again after reading each node. The same bytes, but where Jackson
    // writes a payload differently from what it read: a map read without "@class" becomes a
    // LinkedHashMap and is written with it, first; an object of a class is written in the class's
    // property order (id, name, metadata), not in the order read (serde_json's sorted keys).
    let curator_map = replaced(
        &written_map,
        r#""payload":{"ratio":0.5,"weight":3,"zone":"eu-1"}"#,
        r#""payload":{"@class":"java.util.LinkedHashMap","ratio":0.5,"weight":3,"zone":"eu-1"}"#,
    );
    let curator_spring_untyped = replaced(
        &written_spring_untyped,
        r#""payload":{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance","id":"api","metadata":{"instance_status":"UP"},"name":"api"}"#,
        r#""payload":{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance","id":"api","name":"api","metadata":{"instance_status":"UP"}}"#,
    );
    let api_in_curator = [
        curator_map.clone(),
        written_spring_typed.clone(),
        written_map_with_class.clone(),
        curator_spring_untyped.clone(),
        written_sequential.clone(),
    ];

    let mut curator = curator(&env, BASE).await;
    assert_eq!(within("names", curator.query_for_names()).await.expect("names"), ["api", "billing"]);
    assert_eq!(
        within("instances", curator.query_for_instances("api")).await.expect("instances"),
        api_in_curator
    );
    assert_eq!(
        within("instances", curator.query_for_instances("billing")).await.expect("instances"),
        [written_bare]
    );
    for (id, expected) in [
        ("api-1", &curator_map),
        ("api-2", &written_spring_typed),
        ("api-3", &written_map_with_class),
        ("api-4", &curator_spring_untyped),
    ] {
        let found = within("instance", curator.query_for_instance("api", id)).await.expect("instance");
        assert_eq!(found.as_ref(), Some(expected), "{id}");
    }
    // Curator looks for a sequential instance at <name>/<id>, and finds it only by its node name
    // (here `_c_<uuid>-worker-<sequence>`, the protected create's).
    assert_eq!(
        within("instance", curator.query_for_instance("api", "worker-")).await.expect("instance"),
        None
    );
    let sequential_node = untyped.instance_path("worker-").expect("registered");
    let sequential_name = sequential_node.rsplit('/').next().expect("a node name");
    assert!(sequential_name.starts_with("_c_") && sequential_name.contains("-worker-"), "{sequential_node}");
    assert_eq!(
        within("instance", curator.query_for_instance("api", sequential_name)).await.expect("instance"),
        Some(written_sequential.clone())
    );

    // Curator's ServiceCache reads them the same way.
    within("cache", curator.start_cache("api")).await.expect("cache");
    cache_holds(&mut curator, "api", &api_in_curator).await;

    within("close Curator", curator.close()).await.expect("close");
    within("close", typed.close(step())).await.expect("close");
    within("close", untyped.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

/// A Spring Cloud Zookeeper payload with `@class`, in a given status, as Curator writes it.
fn spring_json(status: &str) -> String {
    format!(
        r#"{{"@class":"{SPRING_CLASS}","id":"orders","name":"orders","metadata":{{"instance_status":"{status}"}}}}"#
    )
}

/// The Curator instances of service `orders` the Curator-to-Rust tests register: a dynamic one with
/// an ssl port, a map payload and a uriSpec; a static one with a Spring payload; a permanent one
/// with a list payload; a disabled static one (`orders_4`, for a Curator that writes `enabled`);
/// and a dynamic sequential one with a string payload.
struct CuratorOrders {
    orders_1: CuratorInstanceSpec,
    orders_2: CuratorInstanceSpec,
    orders_3: CuratorInstanceSpec,
    orders_4: CuratorInstanceSpec,
    sequential: CuratorInstanceSpec,
}

fn curator_orders() -> CuratorOrders {
    let orders_1 = CuratorInstanceSpec::new("orders")
        .id("orders-1")
        .address("10.0.0.7")
        .port(8080)
        .ssl_port(8443)
        .payload_json(r#"{"zone":"eu-1","weight":3}"#)
        .uri_spec("{scheme}://{address}:{port}")
        .registration_time_utc(REGISTERED_AT);
    let orders_2 = CuratorInstanceSpec::new("orders")
        .id("orders-2")
        .address("10.0.0.8")
        .port(8081)
        .payload_json(spring_json("UP"))
        .service_type(CuratorServiceType::Static)
        .uri_spec("{scheme}://{address}:{port}/{name}")
        .registration_time_utc(REGISTERED_AT + 1);
    let orders_3 = CuratorInstanceSpec::new("orders")
        .id("orders-3")
        .address("10.0.0.9")
        .payload_json(r#"[1,"two"]"#)
        .service_type(CuratorServiceType::Permanent)
        .registration_time_utc(REGISTERED_AT + 2);
    let orders_4 = CuratorInstanceSpec::new("orders")
        .id("orders-4")
        .address("10.0.0.10")
        .port(8084)
        .service_type(CuratorServiceType::Static)
        .enabled(false)
        .registration_time_utc(REGISTERED_AT + 3);
    let sequential = CuratorInstanceSpec::new("orders")
        .id("seq-")
        .address("10.0.0.11")
        .port(7000)
        .payload_json(r#""nightly""#)
        .service_type(CuratorServiceType::DynamicSequential)
        .registration_time_utc(REGISTERED_AT + 4);
    CuratorOrders { orders_1, orders_2, orders_3, orders_4, sequential }
}

#[tokio::test]
async fn curator_registrations_are_read_by_rust_with_the_same_fields() {
    const BASE: &str = "/interop-discovery/from-curator";
    let env = Env::start().await;
    let framework = env.framework().await;
    let mut curator = curator(&env, BASE).await;
    // A second Curator whose serializer writes "enabled" (JsonInstanceSerializer(cls, false)).
    let mut curator_enabled = within_for(
        "starting Curator's discovery",
        JVM_START,
        CuratorDiscovery::builder(env.connect(), BASE).enabled_field(true).start(),
    )
    .await
    .expect("Curator discovery");

    let CuratorOrders { orders_1, orders_2, orders_3, orders_4, sequential } = curator_orders();
    let written_1 = within("register", curator.register(&orders_1)).await.expect("register");
    let written_2 = within("register", curator.register(&orders_2)).await.expect("register");
    let written_3 = within("register", curator.register(&orders_3)).await.expect("register");
    let written_4 = within("register", curator_enabled.register(&orders_4)).await.expect("register");
    let written_sequential = within("register", curator.register(&sequential)).await.expect("register");
    assert!(!written_1.contains("enabled"), "Curator's default serializer leaves it out: {written_1}");
    assert!(written_4.ends_with(r#","uriSpec":null,"enabled":false}"#), "{written_4}");
    assert!(written_3.contains(r#""payload":["java.util.ArrayList",[1,"two"]]"#), "{written_3}");

    // Every field, the payload as JSON ("@class" and Jackson's list wrapper kept), `enabled`
    // missing read as true.
    let expected = [
        ServiceInstance::builder("orders")
            .id("orders-1")
            .address("10.0.0.7")
            .port(8080)
            .ssl_port(8443)
            .payload(json!({"@class": "java.util.LinkedHashMap", "zone": "eu-1", "weight": 3}))
            .registration_time_utc(REGISTERED_AT)
            .uri_spec(uri_spec("{scheme}://{address}:{port}"))
            .build(),
        ServiceInstance::builder("orders")
            .id("orders-2")
            .address("10.0.0.8")
            .port(8081)
            .payload(serde_json::to_value(spring_payload("orders")).expect("JSON"))
            .registration_time_utc(REGISTERED_AT + 1)
            .service_type(ServiceType::Static)
            .uri_spec(uri_spec("{scheme}://{address}:{port}/{name}"))
            .build(),
        ServiceInstance::builder("orders")
            .id("orders-3")
            .address("10.0.0.9")
            .payload(json!(["java.util.ArrayList", [1, "two"]]))
            .registration_time_utc(REGISTERED_AT + 2)
            .service_type(ServiceType::Permanent)
            .build(),
        ServiceInstance::builder("orders")
            .id("orders-4")
            .address("10.0.0.10")
            .port(8084)
            .no_payload()
            .registration_time_utc(REGISTERED_AT + 3)
            .service_type(ServiceType::Static)
            .enabled(false)
            .build(),
        ServiceInstance::builder("orders")
            .id("seq-")
            .address("10.0.0.11")
            .port(7000)
            .payload(json!("nightly"))
            .registration_time_utc(REGISTERED_AT + 4)
            .service_type(ServiceType::DynamicSequential)
            .build(),
    ];
    let rust = discovery(&framework, BASE);
    assert_eq!(within("names", rust.query_for_names(step())).await.expect("names"), ["orders"]);
    let found = within("instances", rust.query_for_instances("orders", step())).await.expect("instances");
    assert_eq!(found, expected, "every field, in node-name order");
    assert!(found[0].enabled, "`enabled` missing is read as true");
    assert!(!found[3].enabled, "`enabled` written false is read as false");
    assert_eq!(found[0].resolve_uri().as_deref(), Some("https://10.0.0.7:8080"), "an ssl port makes https");
    assert_eq!(found[1].resolve_uri().as_deref(), Some("http://10.0.0.8:8081/orders"));
    for instance in &expected[..4] {
        let one = within("instance", rust.query_for_instance("orders", &instance.id, step())).await;
        assert_eq!(one.expect("instance").as_ref(), Some(instance));
    }
    // Curator names its sequential node <id><sequence>: Rust finds it by its id, Curator does not.
    let one = within("instance", rust.query_for_instance("orders", "seq-", step())).await.expect("instance");
    assert_eq!(one.as_ref(), Some(&expected[4]));
    assert_eq!(
        within("instance", curator.query_for_instance("orders", "seq-")).await.expect("instance"),
        None
    );

    // Raw JSON: Rust writes back Curator's bytes, byte for byte (golden nodes, the other way).
    let raw =
        ServiceDiscovery::builder(&framework, BASE).payload_type::<Box<RawValue>>().build().expect("raw");
    let found_raw = within("instances", raw.query_for_instances("orders", step())).await.expect("instances");
    assert_eq!(ids(&found_raw), ["orders-1", "orders-2", "orders-3", "orders-4", "seq-"]);
    for (instance, written) in found_raw.iter().zip([&written_1, &written_2, &written_3]) {
        assert_eq!(&rust_json(instance), written, "{}", instance.id);
    }
    let with_enabled =
        JsonInstanceSerializer::new().write_enabled(true).serialize(&found_raw[3]).expect("serialize");
    assert_eq!(String::from_utf8(with_enabled).expect("UTF-8"), written_4);
    assert_eq!(rust_json(&found_raw[4]), written_sequential);

    // Typed: Spring's payload through serde; written back to Curator's bytes.
    let typed = ServiceDiscovery::builder(&framework, BASE)
        .payload_type::<ZookeeperInstance>()
        .build()
        .expect("typed");
    let spring = within("instance", typed.query_for_instance("orders", "orders-2", step()))
        .await
        .expect("instance")
        .expect("orders-2");
    assert_eq!(spring.payload, Some(spring_payload("orders")));
    assert_eq!(rust_json(&spring), written_2);

    within("close Curator", curator_enabled.close()).await.expect("close");
    within("close Curator", curator.close()).await.expect("close");
    within("close", rust.close(step())).await.expect("close");
    within("close", typed.close(step())).await.expect("close");
    within("close", raw.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

/// The next event of a Rust `ServiceCache`, within [`STEP`].
async fn next_event<P>(events: &mut ServiceCacheEvents<P>) -> ServiceCacheEvent<P> {
    within("the next service cache event", events.next()).await.expect("the cache is running")
}

/// The next `count` events, each an `Added`: the instances, by id.
async fn added<P: std::fmt::Debug>(
    events: &mut ServiceCacheEvents<P>,
    count: usize,
) -> BTreeMap<String, ServiceInstance<P>> {
    let mut instances = BTreeMap::new();
    for _ in 0..count {
        match next_event(events).await {
            ServiceCacheEvent::Added(instance) => {
                let id = instance.id.clone();
                assert!(instances.insert(id.clone(), instance).is_none(), "{id} added twice");
            }
            other => panic!("expected an Added event, got {other:?}"),
        }
    }
    instances
}

/// The next event is an `Updated` of `id`: its old and new instance.
async fn updated<P: std::fmt::Debug>(
    events: &mut ServiceCacheEvents<P>,
    id: &str,
) -> (ServiceInstance<P>, ServiceInstance<P>) {
    match next_event(events).await {
        ServiceCacheEvent::Updated { old, new } if old.id == id && new.id == id => (old, new),
        other => panic!("expected {id} Updated, got {other:?}"),
    }
}

/// The next event is a `Removed` of `id`: the instance the cache held.
async fn removed<P: std::fmt::Debug>(events: &mut ServiceCacheEvents<P>, id: &str) -> ServiceInstance<P> {
    match next_event(events).await {
        ServiceCacheEvent::Removed(instance) if instance.id == id => instance,
        other => panic!("expected {id} Removed, got {other:?}"),
    }
}

#[tokio::test]
async fn rusts_service_cache_sees_curators_instances_with_every_field_and_each_change_by_name() {
    const BASE: &str = "/interop-discovery/rust-cache";
    let env = Env::start().await;
    let framework = env.framework().await;

    // Three Rust caches of one service, started before it has a node: untyped (JSON payloads),
    // raw (the payload's text as Curator wrote it) and typed (Spring's payload through serde).
    let untyped = discovery(&framework, BASE);
    let raw =
        ServiceDiscovery::builder(&framework, BASE).payload_type::<Box<RawValue>>().build().expect("raw");
    let typed = ServiceDiscovery::builder(&framework, BASE)
        .payload_type::<ZookeeperInstance>()
        .build()
        .expect("typed");
    let cache =
        within("start the cache", untyped.service_cache("orders").start(step())).await.expect("cache");
    let raw_cache =
        within("start the cache", raw.service_cache("orders").start(step())).await.expect("cache");
    let typed_cache =
        within("start the cache", typed.service_cache("orders").start(step())).await.expect("cache");
    let (mut events, mut raw_events, mut typed_events) =
        (cache.events(), raw_cache.events(), typed_cache.events());
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Loaded, "loaded empty");
    assert!(matches!(next_event(&mut raw_events).await, ServiceCacheEvent::Loaded));
    assert_eq!(next_event(&mut typed_events).await, ServiceCacheEvent::Loaded);

    // Curator registers instances of every type, with payloads of every kind.
    let mut curator = curator(&env, BASE).await;
    let mut curator_enabled = within_for(
        "starting Curator's discovery",
        JVM_START,
        CuratorDiscovery::builder(env.connect(), BASE).enabled_field(true).start(),
    )
    .await
    .expect("Curator discovery");
    let CuratorOrders { orders_1, orders_2, orders_3, orders_4, sequential } = curator_orders();
    let orders_5 = CuratorInstanceSpec::new("orders")
        .id("orders-5")
        .address("10.0.0.12")
        .port(8085)
        .payload_json("42")
        .registration_time_utc(REGISTERED_AT + 5);
    let mut written = Vec::new();
    for spec in [&orders_1, &orders_2, &orders_3, &orders_5, &sequential] {
        written.push((spec.clone(), within("register", curator.register(spec)).await.expect("register")));
    }
    written.push((
        orders_4.clone(),
        within("register", curator_enabled.register(&orders_4)).await.expect("register"),
    ));
    let written_as = |spec: &CuratorInstanceSpec| {
        written
            .iter()
            .find(|(registered, _)| registered == spec)
            .map(|(_, json)| json.clone())
            .expect("registered")
    };
    assert!(written_as(&orders_5).contains(r#""payload":42,"#), "{}", written_as(&orders_5));

    // The untyped cache: an `Added` per instance, with every field (the payload as JSON, "@class"
    // and Jackson's list wrapper kept; `enabled` missing read as true).
    let expected_1 = ServiceInstance::builder("orders")
        .id("orders-1")
        .address("10.0.0.7")
        .port(8080)
        .ssl_port(8443)
        .payload(json!({"@class": "java.util.LinkedHashMap", "zone": "eu-1", "weight": 3}))
        .registration_time_utc(REGISTERED_AT)
        .uri_spec(uri_spec("{scheme}://{address}:{port}"))
        .build();
    let expected_2 = ServiceInstance::builder("orders")
        .id("orders-2")
        .address("10.0.0.8")
        .port(8081)
        .payload(serde_json::to_value(spring_payload("orders")).expect("JSON"))
        .registration_time_utc(REGISTERED_AT + 1)
        .service_type(ServiceType::Static)
        .uri_spec(uri_spec("{scheme}://{address}:{port}/{name}"))
        .build();
    let expected_3 = ServiceInstance::builder("orders")
        .id("orders-3")
        .address("10.0.0.9")
        .payload(json!(["java.util.ArrayList", [1, "two"]]))
        .registration_time_utc(REGISTERED_AT + 2)
        .service_type(ServiceType::Permanent)
        .build();
    let expected_4 = ServiceInstance::builder("orders")
        .id("orders-4")
        .address("10.0.0.10")
        .port(8084)
        .no_payload()
        .registration_time_utc(REGISTERED_AT + 3)
        .service_type(ServiceType::Static)
        .enabled(false)
        .build();
    let expected_5 = ServiceInstance::builder("orders")
        .id("orders-5")
        .address("10.0.0.12")
        .port(8085)
        .payload(json!(42))
        .registration_time_utc(REGISTERED_AT + 5)
        .build();
    let expected_sequential = ServiceInstance::builder("orders")
        .id("seq-")
        .address("10.0.0.11")
        .port(7000)
        .payload(json!("nightly"))
        .registration_time_utc(REGISTERED_AT + 4)
        .service_type(ServiceType::DynamicSequential)
        .build();
    // In node-name order (Curator names its sequential node `seq-<sequence>`).
    let expected = [
        expected_1.clone(),
        expected_2.clone(),
        expected_3.clone(),
        expected_4.clone(),
        expected_5.clone(),
        expected_sequential.clone(),
    ];
    let seen = added(&mut events, expected.len()).await;
    let by_id: BTreeMap<String, ServiceInstance> =
        expected.iter().map(|instance| (instance.id.clone(), instance.clone())).collect();
    assert_eq!(seen, by_id, "an Added per instance, with every field");
    assert_eq!(cache.instances(), expected, "the cache holds them, in node-name order");
    let cached_1 = &cache.instances()[0];
    assert!(cached_1.enabled, "`enabled` missing is read as true");
    assert_eq!(cached_1.resolve_uri().as_deref(), Some("https://10.0.0.7:8080"));
    assert_eq!(cache.instances()[1].resolve_uri().as_deref(), Some("http://10.0.0.8:8081/orders"));

    // The raw cache: each payload's text as Curator wrote it, so Rust writes back Curator's bytes.
    let raw_seen = added(&mut raw_events, expected.len()).await;
    let raw_instances = raw_cache.instances();
    assert_eq!(ids(&raw_instances), ["orders-1", "orders-2", "orders-3", "orders-4", "orders-5", "seq-"]);
    for (instance, spec) in
        raw_instances.iter().zip([&orders_1, &orders_2, &orders_3, &orders_4, &orders_5, &sequential])
    {
        // orders-4 (disabled) was written by the Curator whose serializer writes `enabled`.
        let bytes = JsonInstanceSerializer::new().write_enabled(!instance.enabled).serialize(instance);
        assert_eq!(
            String::from_utf8(bytes.expect("serialize")).expect("UTF-8"),
            written_as(spec),
            "{}",
            instance.id
        );
        assert_eq!(
            rust_json(&raw_seen[&instance.id]),
            rust_json(instance),
            "the event's instance is the cached one"
        );
    }
    assert_eq!(
        raw_instances[0].payload.as_ref().map(|payload| payload.get()),
        Some(r#"{"@class":"java.util.LinkedHashMap","zone":"eu-1","weight":3}"#)
    );

    // The typed cache: Spring's payload through serde; an instance without a payload fits too;
    // those whose payload is not a `ZookeeperInstance` are left out (logged), without an event.
    let typed_seen = added(&mut typed_events, 2).await;
    let typed_2 = ServiceInstance::builder("orders")
        .id("orders-2")
        .address("10.0.0.8")
        .port(8081)
        .payload(spring_payload("orders"))
        .registration_time_utc(REGISTERED_AT + 1)
        .service_type(ServiceType::Static)
        .uri_spec(uri_spec("{scheme}://{address}:{port}/{name}"))
        .build();
    let typed_4: ServiceInstance<ZookeeperInstance> = expected_4.clone().into_builder().no_payload().build();
    assert_eq!(typed_seen.into_values().collect::<Vec<_>>(), [typed_2.clone(), typed_4.clone()]);
    assert_eq!(typed_cache.instances(), [typed_2.clone(), typed_4]);

    // Curator updates orders-1: an `Updated` naming it, with what it was and what it is.
    let moved_1 = orders_1
        .clone()
        .port(9091)
        .payload_json(r#"{"zone":"eu-2","weight":5}"#)
        .uri_spec("{scheme}://{address}:{port}/v2");
    let written_moved_1 = within("update", curator.update(&moved_1)).await.expect("update");
    let mut expected_moved_1 = expected_1.clone();
    expected_moved_1.port = Some(9091);
    expected_moved_1.payload =
        Some(json!({"@class": "java.util.LinkedHashMap", "zone": "eu-2", "weight": 5}));
    expected_moved_1.uri_spec = Some(uri_spec("{scheme}://{address}:{port}/v2"));
    assert_eq!(
        next_event(&mut events).await,
        ServiceCacheEvent::Updated { old: expected_1.clone(), new: expected_moved_1.clone() }
    );
    let (raw_old, raw_new) = updated(&mut raw_events, "orders-1").await;
    assert_eq!((rust_json(&raw_old), rust_json(&raw_new)), (written_as(&orders_1), written_moved_1.clone()));

    // Curator updates orders-2's Spring payload: the typed cache's `Updated` carries both payloads,
    // and is its next event (none came for orders-1, which it leaves out).
    let down_2 = orders_2.clone().payload_json(spring_json("DOWN"));
    let written_down_2 = within("update", curator.update(&down_2)).await.expect("update");
    let mut spring_down = spring_payload("orders");
    spring_down.metadata.insert("instance_status".to_owned(), "DOWN".to_owned());
    let mut expected_down_2 = expected_2.clone();
    expected_down_2.payload = Some(serde_json::to_value(&spring_down).expect("JSON"));
    assert_eq!(
        next_event(&mut events).await,
        ServiceCacheEvent::Updated { old: expected_2.clone(), new: expected_down_2.clone() }
    );
    let mut typed_down_2 = typed_2.clone();
    typed_down_2.payload = Some(spring_down);
    assert_eq!(
        next_event(&mut typed_events).await,
        ServiceCacheEvent::Updated { old: typed_2.clone(), new: typed_down_2.clone() }
    );
    let (_, raw_new) = updated(&mut raw_events, "orders-2").await;
    assert_eq!(rust_json(&raw_new), written_down_2.clone());

    // Curator unregisters both: a `Removed` naming each, with its latest data.
    within("unregister", curator.unregister("orders", "orders-1")).await.expect("unregister");
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Removed(expected_moved_1));
    assert_eq!(rust_json(&removed(&mut raw_events, "orders-1").await), written_moved_1);
    within("unregister", curator.unregister("orders", "orders-2")).await.expect("unregister");
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Removed(expected_down_2));
    assert_eq!(next_event(&mut typed_events).await, ServiceCacheEvent::Removed(typed_down_2));
    assert_eq!(rust_json(&removed(&mut raw_events, "orders-2").await), written_down_2);
    assert_eq!(ids(&cache.instances()), ["orders-3", "orders-4", "orders-5", "seq-"]);

    // Curator closes: it deletes what it registered (its sequential node goes with its session),
    // and the cache sees each go.
    within("close Curator", curator.close()).await.expect("close");
    within("close Curator", curator_enabled.close()).await.expect("close");
    let mut gone = BTreeSet::new();
    for _ in 0..4 {
        match next_event(&mut events).await {
            ServiceCacheEvent::Removed(instance) => assert!(gone.insert(instance.id)),
            other => panic!("expected a removal, got {other:?}"),
        }
    }
    assert_eq!(gone, BTreeSet::from(["orders-3", "orders-4", "orders-5", "seq-"].map(str::to_owned)));
    assert!(cache.is_empty());

    within("close the cache", cache.close()).await;
    within("close the cache", raw_cache.close()).await;
    within("close the cache", typed_cache.close()).await;
    within("close", untyped.close(step())).await.expect("close");
    within("close", raw.close(step())).await.expect("close");
    within("close", typed.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn updates_from_either_side_reach_the_other_sides_queries_and_curators_cache() {
    const BASE: &str = "/interop-discovery/updates";
    let env = Env::start().await;
    let framework = env.framework().await;
    let rust = discovery(&framework, BASE);
    let mut curator = curator(&env, BASE).await;

    let first = ServiceInstance::builder("svc")
        .id("rust-1")
        .address("10.0.0.7")
        .port(8080)
        .payload(json!({"@class": "java.util.LinkedHashMap", "version": 1}))
        .registration_time_utc(REGISTERED_AT)
        .build();
    within("register", rust.register(&first, step())).await.expect("register");
    let java = CuratorInstanceSpec::new("svc")
        .id("java-1")
        .address("10.0.0.8")
        .port(9090)
        .payload_json(r#"{"version":1}"#)
        .registration_time_utc(REGISTERED_AT);
    let java_first = within("register", curator.register(&java)).await.expect("register");
    let rust_first = node_json(&framework, &rust, "rust-1").await;
    within("cache", curator.start_cache("svc")).await.expect("cache");
    let before = cache_holds(&mut curator, "svc", &[java_first.clone(), rust_first.clone()]).await;

    // Rust updates: Curator's query reads the new bytes, its cache follows.
    let mut moved = first.clone();
    moved.port = Some(8081);
    moved.ssl_port = Some(8443);
    moved.payload = Some(json!({"@class": "java.util.LinkedHashMap", "version": 2}));
    moved.uri_spec = Some(uri_spec("{scheme}://{address}:{ssl-port}"));
    within("update", rust.update(&moved, step())).await.expect("update");
    let rust_moved = node_json(&framework, &rust, "rust-1").await;
    assert_eq!(rust_moved, rust_json(&moved));
    assert_ne!(rust_moved, rust_first);
    assert_eq!(
        within("instance", curator.query_for_instance("svc", "rust-1")).await.expect("instance"),
        Some(rust_moved.clone())
    );
    let after_rust = cache_holds(&mut curator, "svc", &[java_first.clone(), rust_moved.clone()]).await;
    assert!(after_rust.changes > before.changes, "the listener was told: {before:?} then {after_rust:?}");

    // Curator updates: Rust's queries read the new fields, Curator's cache follows.
    let java_moved = within(
        "update",
        curator.update(
            &java.clone().port(9091).payload_json(r#"{"version":2}"#).uri_spec("{scheme}://{address}:{port}"),
        ),
    )
    .await
    .expect("update");
    let expected = ServiceInstance::builder("svc")
        .id("java-1")
        .address("10.0.0.8")
        .port(9091)
        .payload(json!({"@class": "java.util.LinkedHashMap", "version": 2}))
        .registration_time_utc(REGISTERED_AT)
        .uri_spec(uri_spec("{scheme}://{address}:{port}"))
        .build();
    let one = within("instance", rust.query_for_instance("svc", "java-1", step())).await.expect("instance");
    assert_eq!(one, Some(expected.clone()));
    let both = within("instances", rust.query_for_instances("svc", step())).await.expect("instances");
    assert_eq!(both, [expected, moved.clone()]);
    let raw =
        ServiceDiscovery::builder(&framework, BASE).payload_type::<Box<RawValue>>().build().expect("raw");
    let java_raw = within("instance", raw.query_for_instance("svc", "java-1", step()))
        .await
        .expect("instance")
        .expect("java-1");
    assert_eq!(rust_json(&java_raw), java_moved, "Curator's new bytes");
    let after_java = cache_holds(&mut curator, "svc", &[java_moved.clone(), rust_moved.clone()]).await;
    assert!(
        after_java.changes > after_rust.changes,
        "the listener was told: {after_rust:?} then {after_java:?}"
    );

    within("close Curator", curator.close()).await.expect("close");
    within("close", raw.close(step())).await.expect("close");
    within("close", rust.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_rust_instance_registered_again_after_its_session_expired_is_seen_and_provided_by_curator() {
    const BASE: &str = "/interop-discovery/expiry";
    let env = Env::start().await;
    let proxy = within("proxy", FaultProxy::start(env.server.address())).await.expect("proxy");
    let framework = Framework::builder(proxy.connect_string())
        .session_timeout(Duration::from_secs(2))
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(
            ExponentialBackoffRetry::new(Duration::from_millis(50), 10)
                .with_max_sleep(Duration::from_millis(500)),
        )
        .start()
        .expect("framework");
    within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    let rust = discovery(&framework, BASE);
    let mut curator = curator(&env, BASE).await;

    let first = ServiceInstance::builder("svc")
        .id("rust-1")
        .address("10.0.0.7")
        .port(8080)
        .payload(json!({"@class": "java.util.LinkedHashMap", "version": 1}))
        .registration_time_utc(REGISTERED_AT)
        .build();
    within("register", rust.register(&first, step())).await.expect("register");
    let rust_first = node_json(&framework, &rust, "rust-1").await;
    let mut java_written = Vec::new();
    for (id, port) in [("java-1", 9091), ("java-2", 9092)] {
        let spec = CuratorInstanceSpec::new("svc")
            .id(id)
            .address("10.0.0.8")
            .port(port)
            .registration_time_utc(REGISTERED_AT);
        java_written.push(within("register", curator.register(&spec)).await.expect("register"));
    }
    within("cache", curator.start_cache("svc")).await.expect("cache");
    let all_first = [java_written[0].clone(), java_written[1].clone(), rust_first];
    cache_holds(&mut curator, "svc", &all_first).await;

    // The Rust side's server goes out of reach until the server expires its session: Curator's
    // cache and queries see the instance go.
    let first_session = session_of(&framework);
    let mut events = framework.connection_events();
    proxy.black_hole(Duration::from_secs(120));
    cache_holds(&mut curator, "svc", &java_written).await;
    curator_query_gives(&mut curator, "svc", &java_written).await;

    // During the outage the instance changes: the update cannot reach the server, and it is what
    // the registration on the new session writes.
    let mut latest = first.clone();
    latest.port = Some(9999);
    latest.payload = Some(json!({"@class": "java.util.LinkedHashMap", "version": 2}));
    let short = Deadline::after(Duration::from_millis(300));
    assert!(within("update", rust.update(&latest, short)).await.is_err(), "no server to tell");
    proxy.heal();
    lost_then_reconnected(&mut events).await;
    let new_session = session_of(&framework);
    assert_ne!(new_session, first_session);

    // Curator's cache and queries see it again, with the latest data, on Rust's new session.
    let latest_json = rust_json(&latest);
    let all_latest = [java_written[0].clone(), java_written[1].clone(), latest_json.clone()];
    cache_holds(&mut curator, "svc", &all_latest).await;
    assert_eq!(within("instances", curator.query_for_instances("svc")).await.expect("instances"), all_latest);
    let node = rust.instance_path("rust-1").expect("registered");
    let (data, stat) = read(&framework, &node).await.expect("registered again");
    assert_eq!((String::from_utf8(data).expect("UTF-8"), stat.ephemeral_owner), (latest_json, new_session));

    // A round-robin ServiceProvider hands out Rust's and Java's instances alike, in turn.
    within("provider", curator.start_provider("svc", CuratorProviderStrategy::RoundRobin))
        .await
        .expect("provider");
    let everyone: BTreeSet<String> = all_latest.iter().cloned().collect();
    let started = Instant::now();
    loop {
        let mut round = BTreeSet::new();
        for _ in 0..everyone.len() {
            round.insert(
                within("provide", curator.provider_instance("svc")).await.expect("provide").expect("one"),
            );
        }
        if round == everyone {
            break;
        }
        assert!(started.elapsed() < STEP, "the provider's rounds never covered {everyone:#?}: {round:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut picked = Vec::new();
    for _ in 0..2 * everyone.len() {
        picked
            .push(within("provide", curator.provider_instance("svc")).await.expect("provide").expect("one"));
    }
    let (round_1, round_2) = picked.split_at(everyone.len());
    assert_eq!(round_1, round_2, "round-robin repeats its order: {picked:#?}");
    assert_eq!(
        round_1.iter().cloned().collect::<BTreeSet<_>>(),
        everyone,
        "each once per round: {picked:#?}"
    );

    within("close Curator", curator.close()).await.expect("close");
    within("close", rust.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn close_keeps_a_permanent_rust_instance_for_curator_and_removes_the_others() {
    const BASE: &str = "/interop-discovery/close";
    let env = Env::start().await;
    let framework = env.framework().await;
    let rust = discovery(&framework, BASE);
    let mut curator = curator(&env, BASE).await;

    let java = CuratorInstanceSpec::new("svc")
        .id("java-1")
        .address("10.0.0.8")
        .port(9090)
        .registration_time_utc(REGISTERED_AT);
    let java_written = within("register", curator.register(&java)).await.expect("register");
    let mut written = BTreeMap::new();
    for (id, service_type) in [
        ("rust-dynamic", ServiceType::Dynamic),
        ("rust-permanent", ServiceType::Permanent),
        ("rust-seq-", ServiceType::DynamicSequential),
        ("rust-static", ServiceType::Static),
    ] {
        let instance = ServiceInstance::builder("svc")
            .id(id)
            .address("10.0.0.7")
            .port(8080)
            .registration_time_utc(REGISTERED_AT)
            .service_type(service_type)
            .build();
        within("register", rust.register(&instance, step())).await.expect("register");
        written.insert(id, node_json(&framework, &rust, id).await);
    }
    let mut everyone = vec![java_written.clone()];
    everyone.extend(written.values().cloned());
    assert_eq!(within("instances", curator.query_for_instances("svc")).await.expect("instances"), everyone);
    within("cache", curator.start_cache("svc")).await.expect("cache");
    cache_holds(&mut curator, "svc", &everyone).await;

    // Closing waits for the deletes: Curator's next query sees them gone, its cache follows.
    within("close", rust.close(step())).await.expect("close");
    let left = [java_written.clone(), written["rust-permanent"].clone()];
    assert_eq!(within("instances", curator.query_for_instances("svc")).await.expect("instances"), left);
    assert_eq!(
        within("instance", curator.query_for_instance("svc", "rust-permanent")).await.expect("instance"),
        Some(written["rust-permanent"].clone())
    );
    for gone in ["rust-dynamic", "rust-static"] {
        assert_eq!(
            within("instance", curator.query_for_instance("svc", gone)).await.expect("instance"),
            None
        );
    }
    cache_holds(&mut curator, "svc", &left).await;

    // The PERMANENT node outlives Rust's session too.
    within("close", framework.close()).await;
    assert_eq!(within("instances", curator.query_for_instances("svc")).await.expect("instances"), left);
    cache_holds(&mut curator, "svc", &left).await;
    within("close Curator", curator.close()).await.expect("close");
}

#[tokio::test]
async fn unregistering_on_either_side_removes_the_instance_for_the_other() {
    const ROOT: &str = "/interop-discovery";
    const BASE: &str = "/interop-discovery/unregister";
    let env = Env::start().await;
    let framework = env.framework().await;
    let rust = discovery(&framework, BASE);
    let mut curator = curator(&env, BASE).await;

    let rust_instance = |id: &str, service_type: ServiceType| {
        ServiceInstance::builder("svc")
            .id(id)
            .address("10.0.0.7")
            .port(8080)
            .registration_time_utc(REGISTERED_AT)
            .service_type(service_type)
            .build()
    };
    let rust_dynamic = rust_instance("rust-1", ServiceType::Dynamic);
    let rust_static = rust_instance("rust-static", ServiceType::Static);
    for instance in [&rust_dynamic, &rust_static] {
        within("register", rust.register(instance, step())).await.expect("register");
    }
    let java_spec = |id: &str, service_type: CuratorServiceType| {
        CuratorInstanceSpec::new("svc")
            .id(id)
            .address("10.0.0.8")
            .port(9090)
            .service_type(service_type)
            .registration_time_utc(REGISTERED_AT)
    };
    let java_1 = within("register", curator.register(&java_spec("java-1", CuratorServiceType::Dynamic)))
        .await
        .expect("register");
    let java_seq =
        within("register", curator.register(&java_spec("java-seq-", CuratorServiceType::DynamicSequential)))
            .await
            .expect("register");
    let java_static =
        within("register", curator.register(&java_spec("java-static", CuratorServiceType::Static)))
            .await
            .expect("register");
    let rust_1 = node_json(&framework, &rust, "rust-1").await;
    let rust_static_json = node_json(&framework, &rust, "rust-static").await;
    within("cache", curator.start_cache("svc")).await.expect("cache");
    let mut present =
        vec![java_1.clone(), java_seq.clone(), java_static.clone(), rust_1.clone(), rust_static_json.clone()];
    cache_holds(&mut curator, "svc", &present).await;
    let rust_ids = |instances: &[ServiceInstance]| -> BTreeSet<String> {
        instances.iter().map(|instance| instance.id.clone()).collect()
    };
    let rust_view =
        |expected: &[&str]| -> BTreeSet<String> { expected.iter().map(|id| id.to_string()).collect() };

    // Rust unregisters its own instance: gone for Curator's query and cache.
    within("unregister", rust.unregister(&rust_dynamic, step())).await.expect("unregister");
    present.retain(|json| json != &rust_1);
    assert_eq!(within("instances", curator.query_for_instances("svc")).await.expect("instances"), present);
    cache_holds(&mut curator, "svc", &present).await;

    // Curator unregisters its own instance: gone for Rust's queries.
    within("unregister", curator.unregister("svc", "java-1")).await.expect("unregister");
    present.retain(|json| json != &java_1);
    let found = within("instances", rust.query_for_instances("svc", step())).await.expect("instances");
    assert_eq!(rust_ids(&found), rust_view(&["java-seq-", "java-static", "rust-static"]));
    assert_eq!(
        within("instance", rust.query_for_instance("svc", "java-1", step())).await.expect("read"),
        None
    );
    cache_holds(&mut curator, "svc", &present).await;

    // Rust unregisters Curator's instances by name and id (the sequential one found by its node
    // name, which Curator's own unregisterService misses): gone for Curator.
    let java_static_instance = rust_instance("java-static", ServiceType::Static);
    within("unregister", rust.unregister(&java_static_instance, step())).await.expect("unregister");
    let java_seq_instance = rust_instance("java-seq-", ServiceType::DynamicSequential);
    within("unregister", rust.unregister(&java_seq_instance, step())).await.expect("unregister");
    present.retain(|json| json != &java_static && json != &java_seq);
    assert_eq!(present, std::slice::from_ref(&rust_static_json));
    assert_eq!(within("instances", curator.query_for_instances("svc")).await.expect("instances"), present);
    cache_holds(&mut curator, "svc", &present).await;

    // Curator's unregisterService of an instance it did not register does nothing (Curator 5.4
    // looks it up in its own registry): Rust's STATIC instance stays for both sides.
    within("unregister", curator.unregister("svc", "rust-static")).await.expect("unregister");
    assert_eq!(within("instances", curator.query_for_instances("svc")).await.expect("instances"), present);
    let found = within("instances", rust.query_for_instances("svc", step())).await.expect("instances");
    assert_eq!(rust_ids(&found), rust_view(&["rust-static"]));

    // Rust unregisters it: nothing is left for either side, and the server reaps the containers.
    within("unregister", rust.unregister(&rust_static, step())).await.expect("unregister");
    assert!(within("instances", curator.query_for_instances("svc")).await.expect("instances").is_empty());
    assert!(within("instances", rust.query_for_instances("svc", step()))
        .await
        .expect("instances")
        .is_empty());
    cache_holds(&mut curator, "svc", &[]).await;
    within("close Curator", curator.close()).await.expect("close");
    within("close", rust.close(step())).await.expect("close");
    assert_gone(&framework, ROOT).await;
    within("close", framework.close()).await;
}
