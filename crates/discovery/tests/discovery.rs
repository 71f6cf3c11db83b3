//! `ServiceDiscovery` against real ZooKeeper servers: register, query, update, unregister; each
//! service type's node; re-registration after a session expiry (once, with the latest data) and
//! none after a reconnection of the same session; close; container parents; lost replies; bad
//! input.

use std::collections::HashMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::json;
use zk_recipes_discovery::{
    DiscoveryError, JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, ServiceType, UriSpec,
};
use zk_recipes_framework::zookeeper_client::{CreateMode, Stat};
use zk_recipes_framework::{path, ConnectionState, Deadline, Error as FrameworkError, Framework};
use zk_recipes_test_support::*;

mod common;
use common::{discovery, instance};
use zk_recipes_testing::{RequestMatch, TestingServer};

fn bytes(instance: &ServiceInstance) -> Vec<u8> {
    JsonInstanceSerializer::new().serialize(instance).expect("serialize")
}

async fn stat_of(framework: &Framework, path: &str) -> Option<Stat> {
    within("exists", framework.exists(path, step())).await.expect("exists")
}

#[tokio::test]
async fn register_query_update_and_unregister() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let discovery = discovery(&framework, "/crud");
    let api = ServiceInstance::builder("api")
        .id("api-1")
        .address("10.0.0.7")
        .port(8080)
        .payload(json!({"zone": "eu-1"}))
        .uri_spec(UriSpec::parse("{scheme}://{address}:{port}").expect("spec"))
        .build();
    let static_api = instance("api", "api-2", ServiceType::Static);
    let db = instance("db", "db-1", ServiceType::Dynamic);
    for registered in [&api, &static_api, &db] {
        within("register", discovery.register(registered, step())).await.expect("register");
    }
    assert_eq!(within("names", discovery.query_for_names(step())).await.expect("names"), ["api", "db"]);
    let found = within("instances", discovery.query_for_instances("api", step())).await.expect("instances");
    assert_eq!(found, vec![api.clone(), static_api.clone()], "every field, in node-name order");
    assert_eq!(found[0].resolve_uri().as_deref(), Some("http://10.0.0.7:8080"));
    let one =
        within("instance", discovery.query_for_instance("api", "api-1", step())).await.expect("instance");
    assert_eq!(one, Some(api.clone()));
    assert_eq!(
        within("missing", discovery.query_for_instance("api", "nope", step())).await.expect("read"),
        None
    );
    assert!(within("none", discovery.query_for_instances("nothing", step())).await.expect("read").is_empty());
    assert_eq!(data_and_stat(&framework, "/crud/api/api-1").await.0, bytes(&api), "Curator's JSON");
    assert_eq!(discovery.instance_path("api-1").as_deref(), Some("/crud/api/api-1"));
    assert_eq!(discovery.registered_ids(), ["api-1", "api-2", "db-1"]);

    // An update sets the node's data in place.
    let czxid = data_and_stat(&framework, "/crud/api/api-1").await.1.czxid;
    let mut moved = api.clone();
    moved.port = Some(9090);
    moved.payload = Some(json!({"zone": "eu-2"}));
    within("update", discovery.update(&moved, step())).await.expect("update");
    let (data, stat) = data_and_stat(&framework, "/crud/api/api-1").await;
    assert_eq!((data, stat.czxid, stat.version), (bytes(&moved), czxid, 1));
    let read = within("instance", discovery.query_for_instance("api", "api-1", step())).await.expect("read");
    assert_eq!(read, Some(moved.clone()));

    // Updating what is not registered here, or changing an instance's name, is refused.
    let stranger = instance("api", "api-9", ServiceType::Dynamic);
    let refused = within("update", discovery.update(&stranger, step())).await;
    assert!(matches!(refused, Err(DiscoveryError::NotRegistered { .. })), "{refused:?}");
    let mut renamed = moved.clone();
    renamed.name = "other".into();
    let refused = within("update", discovery.update(&renamed, step())).await;
    assert!(matches!(refused, Err(DiscoveryError::InvalidArgument(_))), "{refused:?}");

    within("unregister", discovery.unregister(&moved, step())).await.expect("unregister");
    assert_eq!(stat_of(&framework, "/crud/api/api-1").await, None);
    let left = within("instances", discovery.query_for_instances("api", step())).await.expect("instances");
    assert_eq!(left, vec![static_api.clone()]);
    within("unregister again", discovery.unregister(&moved, step())).await.expect("a missing node is fine");
    within("close", discovery.close(step())).await.expect("close");
    assert!(children(&framework, "/crud/api").await.is_empty());
    assert!(children(&framework, "/crud/db").await.is_empty());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn each_service_type_gets_its_node_mode() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    let discovery = discovery(&framework, "/modes");
    let session = session_of(&framework);
    let types = [
        ("dynamic", ServiceType::Dynamic),
        ("sequential", ServiceType::DynamicSequential),
        ("static", ServiceType::Static),
        ("permanent", ServiceType::Permanent),
    ];
    for (id, service_type) in types {
        within("register", discovery.register(&instance("svc", id, service_type), step()))
            .await
            .expect("register");
    }
    let names = children(&framework, "/modes/svc").await;
    assert_eq!(names.len(), 4, "{names:?}");
    for (id, service_type) in types {
        let node_path = discovery.instance_path(id).expect("created");
        let (data, stat) = data_and_stat(&framework, &node_path).await;
        let recorded: ServiceInstance = JsonInstanceSerializer::new().deserialize(&data).expect("read");
        assert_eq!(recorded.id, id, "the data records the id as given");
        assert_eq!(recorded.service_type, service_type);
        let name = path::name(&node_path);
        match service_type {
            ServiceType::Dynamic => assert_eq!((name, stat.ephemeral_owner), ("dynamic", session)),
            ServiceType::DynamicSequential => {
                // Protected: `_c_<uuid>-<id><ten-digit sequence>`, found again after a lost reply.
                assert!(path::is_protected(name), "{name}");
                let unprotected = path::strip_protected(name);
                let (prefix, sequence) = unprotected.split_at(unprotected.len() - 10);
                assert_eq!(prefix, "sequential", "{name}");
                assert!(sequence.bytes().all(|byte| byte.is_ascii_digit()), "{name}");
                assert_eq!(stat.ephemeral_owner, session);
            }
            ServiceType::Static | ServiceType::Permanent => assert_eq!((name, stat.ephemeral_owner), (id, 0)),
        }
    }
    // (The parents are containers: a client's Stat does not show it, the server reaping them does,
    // in `the_service_node_goes_with_its_last_instance`.)
    // A sequential instance is found by its id (Curator's queryForInstance finds nothing).
    let found =
        within("instance", discovery.query_for_instance("svc", "sequential", step())).await.expect("read");
    assert_eq!(found.map(|found| found.service_type), Some(ServiceType::DynamicSequential));

    for (id, service_type) in types {
        within("unregister", discovery.unregister(&instance("svc", id, service_type), step()))
            .await
            .expect("unregister");
    }
    assert!(children(&framework, "/modes/svc").await.is_empty());
    within("close", discovery.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn close_deletes_every_instance_but_permanent_ones_and_drop_deletes_in_the_background() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let discovery = discovery(&framework, "/closing");
    let permanent = instance("svc", "permanent", ServiceType::Permanent);
    for registered in [
        instance("svc", "dynamic", ServiceType::Dynamic),
        instance("svc", "static", ServiceType::Static),
        instance("svc", "sequential", ServiceType::DynamicSequential),
        permanent.clone(),
    ] {
        within("register", discovery.register(&registered, step())).await.expect("register");
    }
    within("close", discovery.close(step())).await.expect("close");
    assert_eq!(children(&other, "/closing/svc").await, ["permanent"], "only the permanent instance stays");
    let seen = within("query", self::discovery(&other, "/closing").query_for_instances("svc", step()))
        .await
        .expect("query");
    assert_eq!(seen, vec![permanent.clone()]);

    // Dropped without close: deleted by the framework's cleanup worker (the permanent one stays).
    let dropped = discovery_on(&framework, "/closing");
    within("register", dropped.register(&instance("svc", "static-2", ServiceType::Static), step()))
        .await
        .expect("register");
    drop(dropped);
    eventually("deleted after drop", || async { children(&other, "/closing/svc").await == ["permanent"] })
        .await;

    // Unregistering a permanent instance (even one registered by another discovery) deletes it.
    let last = discovery_on(&other, "/closing");
    within("unregister", last.unregister(&permanent, step())).await.expect("unregister");
    assert!(children(&other, "/closing/svc").await.is_empty());
    within("close", last.close(step())).await.expect("close");
    close_all([framework, other]).await;
}

fn discovery_on(framework: &Framework, base_path: &str) -> ServiceDiscovery {
    discovery(framework, base_path)
}

#[tokio::test]
async fn the_service_node_goes_with_its_last_instance() {
    init_tracing();
    let server = within_for(
        SERVER_START,
        "server start",
        TestingServer::builder().container_check_interval(Duration::from_millis(200)).start(),
    )
    .await
    .expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let discovery = discovery(&framework, "/reaped");
    let first = instance("svc", "one", ServiceType::Dynamic);
    let second = instance("svc", "two", ServiceType::Static);
    within("register", discovery.register(&first, step())).await.expect("register");
    within("register", discovery.register(&second, step())).await.expect("register");
    within("unregister", discovery.unregister(&first, step())).await.expect("unregister");
    tokio::time::sleep(Duration::from_millis(600)).await;
    assert!(stat_of(&framework, "/reaped/svc").await.is_some(), "kept while an instance is left");
    within("unregister", discovery.unregister(&second, step())).await.expect("unregister");
    eventually("the service node reaped", || async { stat_of(&framework, "/reaped/svc").await.is_none() })
        .await;
    eventually("the base path reaped", || async { stat_of(&framework, "/reaped").await.is_none() }).await;
    assert!(within("names", discovery.query_for_names(step())).await.expect("names").is_empty());
    // Registering again makes them again.
    within("register", discovery.register(&first, step())).await.expect("register");
    assert!(stat_of(&framework, "/reaped/svc/one").await.is_some());
    within("close", discovery.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_session_expiry_re_registers_once_with_the_latest_data() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(2)).await;
    let discovery = discovery(&framework, "/expiry");
    let dynamic = instance("svc", "dynamic", ServiceType::Dynamic);
    let sequential = instance("svc", "sequential", ServiceType::DynamicSequential);
    let persistent = instance("svc", "static", ServiceType::Static);
    for registered in [&dynamic, &sequential, &persistent] {
        within("register", discovery.register(registered, step())).await.expect("register");
    }
    let first_session = session_of(&framework);
    let static_stat = data_and_stat(&observer, "/expiry/svc/static").await.1;
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");

    // While the server is out of reach, the data changes: the update cannot reach the server,
    // but it is what the re-registration writes.
    proxy.black_hole(negotiated * 3);
    until_state(&mut events, ConnectionState::Suspended).await;
    let mut latest = dynamic.clone();
    latest.port = Some(9999);
    let mut latest_sequential = sequential.clone();
    latest_sequential.payload = Some(json!("v2"));
    let short = Deadline::after(Duration::from_millis(300));
    assert!(within("update", discovery.update(&latest, short)).await.is_err(), "no server to tell");
    let short = Deadline::after(Duration::from_millis(300));
    assert!(within("update", discovery.update(&latest_sequential, short)).await.is_err());
    lost_then_reconnected(&mut events).await;
    let new_session = session_of(&framework);
    assert_ne!(new_session, first_session);

    eventually("dynamic re-registered with the latest data", || async {
        data_and_owner(&observer, "/expiry/svc/dynamic").await == Some((bytes(&latest), new_session))
    })
    .await;
    eventually("sequential re-registered with the latest data", || async {
        let Some(node_path) = discovery.instance_path("sequential") else { return false };
        data_and_owner(&observer, &node_path).await == Some((bytes(&latest_sequential), new_session))
    })
    .await;
    let sequential_path = only_child_named(&observer, "/expiry/svc", "sequential").await;
    assert_eq!(discovery.instance_path("sequential").as_deref(), Some(sequential_path.as_str()));

    // Exactly once: nothing is written again afterwards.
    let dynamic_stat = data_and_stat(&observer, "/expiry/svc/dynamic").await.1;
    let sequential_stat = data_and_stat(&observer, &sequential_path).await.1;
    tokio::time::sleep(negotiated).await;
    assert_eq!(data_and_stat(&observer, "/expiry/svc/dynamic").await.1, dynamic_stat);
    assert_eq!(data_and_stat(&observer, &sequential_path).await.1, sequential_stat);
    assert_eq!(children(&observer, "/expiry/svc").await.len(), 3, "one node per instance");
    // The persistent instance was there all along, with the same data: left alone.
    assert_eq!(data_and_stat(&observer, "/expiry/svc/static").await.1, static_stat);

    within("close", discovery.close(step())).await.expect("close");
    assert!(children(&observer, "/expiry/svc").await.is_empty());
    close_all([framework, observer]).await;
}

/// The path of the one child of `parent` that is `id`'s sequential node.
async fn only_child_named(framework: &Framework, parent: &str, id: &str) -> String {
    let matching: Vec<String> = children(framework, parent)
        .await
        .into_iter()
        .filter(|name| path::strip_protected(name).starts_with(id) && path::is_protected(name))
        .collect();
    assert_eq!(matching.len(), 1, "one node for {id}: {matching:?}");
    path::join(parent, &matching[0])
}

#[tokio::test]
async fn a_reconnection_of_the_same_session_re_registers_nothing() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(4)).await;
    let discovery = discovery(&framework, "/reconnect");
    for registered in [
        instance("svc", "dynamic", ServiceType::Dynamic),
        instance("svc", "sequential", ServiceType::DynamicSequential),
        instance("svc", "static", ServiceType::Static),
    ] {
        within("register", discovery.register(&registered, step())).await.expect("register");
    }
    let session = session_of(&framework);
    let paths: Vec<String> = children(&observer, "/reconnect/svc")
        .await
        .iter()
        .map(|name| path::join("/reconnect/svc", name))
        .collect();
    let mut before = Vec::new();
    for node_path in &paths {
        before.push(data_and_stat(&observer, node_path).await);
    }

    let mut events = framework.connection_events();
    for _ in 0..3 {
        proxy.cut_now();
        until_state(&mut events, ConnectionState::Suspended).await;
        until_state(&mut events, ConnectionState::Reconnected).await;
        assert_eq!(session_of(&framework), session, "the same session");
    }
    // Time for the discovery's task to act on the events, if it were to.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut after = Vec::new();
    for node_path in &paths {
        after.push(data_and_stat(&observer, node_path).await);
    }
    assert_eq!(after, before, "no node re-created or rewritten (same czxid, mzxid, version)");
    assert_eq!(children(&observer, "/reconnect/svc").await.len(), 3);
    within("close", discovery.close(step())).await.expect("close");
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn a_create_whose_reply_is_lost_is_resolved_not_duplicated() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    let discovery = discovery(&framework, "/lost-reply");
    let session = session_of(&framework);

    // A fixed name: the create is sent again, meets its own node and keeps it.
    let dynamic = instance("svc", "dynamic", ServiceType::Dynamic);
    let cut = proxy.cut_after_next_reply(RequestMatch::create().under("/lost-reply/svc/dynamic"));
    within("register", discovery.register(&dynamic, step())).await.expect("register");
    within("cut", cut).await.expect("cut");
    let (data, stat) = data_and_stat(&observer, "/lost-reply/svc/dynamic").await;
    assert_eq!((data, stat.ephemeral_owner), (bytes(&dynamic), session));

    // A sequential one: the protected create finds its node by its prefix.
    let sequential = instance("svc", "sequential", ServiceType::DynamicSequential);
    let cut = proxy.cut_after_next_reply(RequestMatch::create().under("/lost-reply/svc/_c_"));
    within("register", discovery.register(&sequential, step())).await.expect("register");
    within("cut", cut).await.expect("cut");
    assert_eq!(children(&observer, "/lost-reply/svc").await.len(), 2, "one node each");
    let node_path = discovery.instance_path("sequential").expect("path");
    assert_eq!(data_and_owner(&observer, &node_path).await, Some((bytes(&sequential), session)));
    within("close", discovery.close(step())).await.expect("close");
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn registering_an_id_again_replaces_its_node_and_a_stale_node_is_taken_over() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let other = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let discovery = discovery(&framework, "/again");
    let first = instance("svc", "one", ServiceType::Dynamic);
    within("register", discovery.register(&first, step())).await.expect("register");
    let czxid = data_and_stat(&framework, "/again/svc/one").await.1.czxid;
    let mut changed = first.clone();
    changed.port = Some(1);
    within("register again", discovery.register(&changed, step())).await.expect("register");
    let (data, stat) = data_and_stat(&framework, "/again/svc/one").await;
    assert_eq!((data, stat.czxid), (bytes(&changed), czxid), "set in place");
    // As a static instance now: a persistent node replaces the ephemeral one.
    let mut persistent = changed.clone();
    persistent.service_type = ServiceType::Static;
    within("register as static", discovery.register(&persistent, step())).await.expect("register");
    assert_eq!(data_and_owner(&framework, "/again/svc/one").await, Some((bytes(&persistent), 0)));

    // Another session's node at the id (our previous process's, say): replaced, as Curator does.
    within("stale", other.create("/again/svc/two").mode(CreateMode::Ephemeral).data(b"stale"))
        .await
        .expect("create");
    let two = instance("svc", "two", ServiceType::Dynamic);
    within("register", discovery.register(&two, step())).await.expect("register");
    assert_eq!(
        data_and_owner(&framework, "/again/svc/two").await,
        Some((bytes(&two), session_of(&framework)))
    );
    within("close", discovery.close(step())).await.expect("close");
    close_all([framework, other]).await;
}

#[tokio::test]
async fn typed_payloads_and_java_written_nodes() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
    struct Details {
        zone: String,
        weight: u32,
    }
    let typed =
        ServiceDiscovery::builder(&framework, "/typed").payload_type::<Details>().build().expect("discovery");
    let worker = ServiceInstance::builder("worker")
        .id("w-1")
        .port(7000)
        .payload(Details { zone: "eu-1".into(), weight: 3 })
        .build();
    within("register", typed.register(&worker, step())).await.expect("register");
    let found = within("query", typed.query_for_instances("worker", step())).await.expect("query");
    assert_eq!(found, vec![worker.clone()]);
    let raw = discovery(&framework, "/typed");
    let as_json = within("query", raw.query_for_instance("worker", "w-1", step())).await.expect("query");
    assert_eq!(as_json.and_then(|instance| instance.payload), Some(json!({"zone": "eu-1", "weight": 3})));

    // A node as Spring Cloud Zookeeper (Curator 5.4) writes it: read raw, "@class" and all.
    let spring =
        std::fs::read(format!("{}/tests/fixtures/curator-5.4.0/spring.json", env!("CARGO_MANIFEST_DIR")))
            .expect("fixture");
    let spring_path = "/typed/app/6c3f0a6e-1b7e-4d1a-9a55-0c8f4f3b2f10";
    within(
        "java's node",
        framework
            .create(spring_path)
            .data(spring)
            .creating_parents(zk_recipes_framework::ParentMode::Container),
    )
    .await
    .expect("create");
    let apps = within("query", raw.query_for_instances("app", step())).await.expect("query");
    assert_eq!(apps.len(), 1);
    let payload = apps[0].payload.as_ref().expect("payload");
    assert_eq!(payload["@class"], "org.springframework.cloud.zookeeper.discovery.ZookeeperInstance");
    assert_eq!(payload["metadata"], json!({"k": "v"}));
    // A node whose payload does not fit the typed discovery is left out of its query.
    let mismatched = within("query", typed.query_for_instances("app", step())).await.expect("query");
    assert!(mismatched.is_empty(), "{mismatched:?}");
    let direct =
        within("query", typed.query_for_instance("app", "6c3f0a6e-1b7e-4d1a-9a55-0c8f4f3b2f10", step()))
            .await;
    assert!(matches!(direct, Err(DiscoveryError::Deserialize { path: Some(_), .. })), "{direct:?}");

    within("close", typed.close(step())).await.expect("close");
    within("close", raw.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let invalid_base = ServiceDiscovery::builder(&framework, "relative").build();
    assert!(
        matches!(invalid_base, Err(DiscoveryError::Framework(FrameworkError::InvalidPath { .. }))),
        "{invalid_base:?}"
    );
    let discovery = discovery(&framework, "/bad");
    let cases = [
        instance("", "id", ServiceType::Dynamic),
        instance("a/b", "id", ServiceType::Dynamic),
        instance("svc", "", ServiceType::Dynamic),
        instance("svc", "x/y", ServiceType::DynamicSequential),
        instance("..", "id", ServiceType::Static),
    ];
    for bad in &cases {
        let refused = within("register", discovery.register(bad, step())).await;
        assert!(
            matches!(refused, Err(DiscoveryError::InvalidArgument(_))),
            "{}/{}: {refused:?}",
            bad.name,
            bad.id
        );
        let refused = within("unregister", discovery.unregister(bad, step())).await;
        assert!(matches!(refused, Err(DiscoveryError::InvalidArgument(_))), "{refused:?}");
    }
    let refused = within("query", discovery.query_for_instances("a/b", step())).await;
    assert!(matches!(refused, Err(DiscoveryError::InvalidArgument(_))), "{refused:?}");
    let oversized = ServiceInstance::builder("svc").payload(json!("x".repeat(2 << 20))).build();
    let refused = within("register", discovery.register(&oversized, step())).await;
    assert!(
        matches!(refused, Err(DiscoveryError::Framework(FrameworkError::DataTooLarge { .. }))),
        "{refused:?}"
    );
    let unserializable = ServiceInstance::builder("svc").payload(HashMap::from([((1, 2), 3)])).build();
    let typed =
        ServiceDiscovery::builder(&framework, "/bad").payload_type::<HashMap<(i32, i32), i32>>().build();
    let refused = within("register", typed.expect("discovery").register(&unserializable, step())).await;
    assert!(matches!(refused, Err(DiscoveryError::Serialize(_))), "{refused:?}");
    assert_eq!(stat_of(&framework, "/bad").await, None, "nothing written");
    assert!(discovery.registered_ids().is_empty());
    within("close", discovery.close(step())).await.expect("close");
    within("close", framework.close()).await;
}
