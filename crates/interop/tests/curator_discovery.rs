//! The Curator driver's service-discovery commands (`CuratorDiscovery`) against a real server:
//! what Curator's `ServiceDiscovery` writes, checked from the server side with zookeeper-client.
//! Run with `--nocapture` to see the bytes Curator wrote.

use std::time::Duration;

use zk_recipes_interop::{
    CuratorDiscovery, CuratorInstanceSpec, CuratorProviderStrategy, CuratorServiceType,
};
use zk_recipes_testing::{eventually, within, within_for, TestingError, TestingServer, SERVER_START};
use zookeeper_client::{Client, Stat};

/// Everything this test writes lives under here.
const BASE: &str = "/curator-discovery-self-test/services";

/// How long a JVM start (with the driver's first compile) may take.
const JVM_START: Duration = Duration::from_secs(90);

/// A fixed registration time, so that Curator's bytes are predictable.
const REGISTERED_AT: i64 = 1_700_000_000_000;

fn orders_1() -> CuratorInstanceSpec {
    CuratorInstanceSpec::new("orders")
        .id("orders-1")
        .address("10.0.0.7")
        .port(8080)
        .payload_json(r#"{"zone":"eu-1","weight":3}"#)
        .service_type(CuratorServiceType::Dynamic)
        .uri_spec("{scheme}://{address}:{port}")
        .registration_time_utc(REGISTERED_AT)
}

fn orders_2() -> CuratorInstanceSpec {
    CuratorInstanceSpec::new("orders")
        .id("orders-2")
        .address("10.0.0.8")
        .port(8081)
        .ssl_port(8443)
        .payload_json(
            r#"{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance","id":"orders","name":"orders","metadata":{"instance_status":"UP"}}"#,
        )
        .service_type(CuratorServiceType::Static)
        .registration_time_utc(REGISTERED_AT + 1)
}

fn billing_1() -> CuratorInstanceSpec {
    CuratorInstanceSpec::new("billing")
        .id("billing-1")
        .address("10.0.0.9")
        .port(9090)
        .service_type(CuratorServiceType::Permanent)
        .registration_time_utc(REGISTERED_AT + 2)
}

/// A zookeeper-client session on the server, to look at what Curator wrote.
async fn connect(connect_string: &str) -> Client {
    within(
        "connecting",
        Client::connector().with_session_timeout(Duration::from_secs(10)).connect(connect_string),
    )
    .await
    .expect("connect")
}

/// The data and stat of `path`, `None` if it does not exist.
async fn node(client: &Client, path: &str) -> Option<(Vec<u8>, Stat)> {
    match within("get data", client.get_data(path)).await {
        Ok(found) => Some(found),
        Err(zookeeper_client::Error::NoNode) => None,
        Err(err) => panic!("get data {path}: {err}"),
    }
}

/// Reads `path`, prints its bytes and stat for the record, and returns them.
async fn show(client: &Client, path: &str) -> (Vec<u8>, Stat) {
    let (data, stat) = node(client, path).await.unwrap_or_else(|| panic!("{path} does not exist"));
    println!(
        "{path}: ephemeral_owner={:#x} version={} {} bytes:\n{}",
        stat.ephemeral_owner,
        stat.version,
        data.len(),
        String::from_utf8_lossy(&data)
    );
    (data, stat)
}

#[tokio::test]
async fn curator_registers_queries_caches_and_provides_instances() {
    let server =
        within_for(SERVER_START, "starting ZooKeeper", TestingServer::start()).await.expect("server");
    let client = connect(&server.connect_string()).await;
    let mut curator = within_for(JVM_START, "starting Curator's discovery", async {
        CuratorDiscovery::start(&server.connect_string(), BASE).await
    })
    .await
    .expect("Curator discovery (needs libcurator-discovery-java: scripts/install-deps.sh)");

    // Register from Java: two instances of one service, one of another.
    let written_1 = within("register orders-1", curator.register(&orders_1())).await.expect("register");
    let written_2 = within("register orders-2", curator.register(&orders_2())).await.expect("register");
    let written_billing =
        within("register billing-1", curator.register(&billing_1())).await.expect("register");
    assert_eq!(
        written_1,
        r#"{"name":"orders","id":"orders-1","address":"10.0.0.7","port":8080,"sslPort":null,"payload":{"@class":"java.util.LinkedHashMap","zone":"eu-1","weight":3},"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC","uriSpec":{"parts":[{"value":"scheme","variable":true},{"value":"://","variable":false},{"value":"address","variable":true},{"value":":","variable":false},{"value":"port","variable":true}]}}"#
    );
    assert_eq!(
        written_2,
        r#"{"name":"orders","id":"orders-2","address":"10.0.0.8","port":8081,"sslPort":8443,"payload":{"@class":"org.springframework.cloud.zookeeper.discovery.ZookeeperInstance","id":"orders","name":"orders","metadata":{"instance_status":"UP"}},"registrationTimeUTC":1700000000001,"serviceType":"STATIC","uriSpec":null}"#
    );
    assert_eq!(
        written_billing,
        r#"{"name":"billing","id":"billing-1","address":"10.0.0.9","port":9090,"sslPort":null,"payload":null,"registrationTimeUTC":1700000000002,"serviceType":"PERMANENT","uriSpec":null}"#
    );

    // Query them back from Java: Curator reads its own nodes and serializes them again unchanged.
    assert_eq!(within("names", curator.query_for_names()).await.expect("names"), ["billing", "orders"]);
    assert_eq!(
        within("instances", curator.query_for_instances("orders")).await.expect("instances"),
        [written_1.clone(), written_2.clone()]
    );
    assert_eq!(
        within("instance", curator.query_for_instance("orders", "orders-2")).await.expect("instance"),
        Some(written_2.clone())
    );
    assert_eq!(
        within("no instance", curator.query_for_instance("orders", "orders-9")).await.expect("query"),
        None
    );
    assert!(within("no service", curator.query_for_instances("nothing")).await.expect("query").is_empty());

    // The server's side: <base>/<name>/<id>, DYNAMIC ephemeral (Curator's session), STATIC and
    // PERMANENT persistent, data the bytes Curator reported; parents with no data and no owner
    // (containers: the server reaps them once the instances are gone, below).
    println!("Curator's session: {:#x}", curator.session_id());
    let (data_1, stat_1) = show(&client, &format!("{BASE}/orders/orders-1")).await;
    let (data_2, stat_2) = show(&client, &format!("{BASE}/orders/orders-2")).await;
    let (data_billing, stat_billing) = show(&client, &format!("{BASE}/billing/billing-1")).await;
    assert_eq!(data_1, written_1.as_bytes());
    assert_eq!(data_2, written_2.as_bytes());
    assert_eq!(data_billing, written_billing.as_bytes());
    assert_eq!(stat_1.ephemeral_owner, curator.session_id(), "DYNAMIC is ephemeral");
    assert_eq!(stat_2.ephemeral_owner, 0, "STATIC is persistent");
    assert_eq!(stat_billing.ephemeral_owner, 0, "PERMANENT is persistent");
    for parent in
        ["/curator-discovery-self-test", BASE, &format!("{BASE}/orders"), &format!("{BASE}/billing")]
    {
        let (data, stat) = node(&client, parent).await.unwrap_or_else(|| panic!("{parent} exists"));
        assert_eq!(stat.ephemeral_owner, 0, "{parent} is not ephemeral");
        assert!(data.is_empty(), "{parent} has no data");
    }

    // Update: same node, new data.
    let updated = within("update", curator.update(&orders_1().port(8090))).await.expect("update");
    assert!(updated.contains(r#""port":8090"#), "{updated}");
    let (data, stat) = show(&client, &format!("{BASE}/orders/orders-1")).await;
    assert_eq!(data, updated.as_bytes());
    assert_eq!(stat.version, stat_1.version + 1);
    assert_eq!(stat.ephemeral_owner, curator.session_id());

    // A provider picks round-robin over what its cache holds.
    within("provider", curator.start_provider("orders", CuratorProviderStrategy::RoundRobin))
        .await
        .expect("provider");
    let mut picked = Vec::new();
    for _ in 0..3 {
        let provided = within("provide", curator.provider_instance("orders")).await.expect("provide");
        picked.push(provided.expect("an instance"));
    }
    assert_ne!(picked[0], picked[1], "round-robin moves on: {picked:?}");
    assert_eq!(picked[0], picked[2], "round-robin wraps around: {picked:?}");
    assert!(picked.contains(&updated) && picked.contains(&written_2), "{picked:?}");
    within("close provider", curator.close_provider("orders")).await.expect("close provider");

    // A cache follows the service: unregistering orders-2 deletes its node and leaves the cache.
    within("cache", curator.start_cache("orders")).await.expect("cache");
    let cached = within("cached", curator.cache_instances("orders")).await.expect("cached");
    assert_eq!(cached.instances, [updated.clone(), written_2.clone()]);
    within("unregister", curator.unregister("orders", "orders-2")).await.expect("unregister");
    assert!(node(&client, &format!("{BASE}/orders/orders-2")).await.is_none(), "unregister deletes the node");
    let mut last = cached;
    let mut followed = false;
    within("the cache follows", async {
        while !followed {
            last = curator.cache_instances("orders").await.expect("cached");
            followed = last.instances == [updated.clone()];
            if !followed {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    })
    .await;
    assert!(last.changes >= 1, "the listener was told: {last:?}");
    within("close cache", curator.close_cache("orders")).await.expect("close cache");

    // Closing the discovery deletes the nodes of what it registered, the persistent ones too.
    within("close", curator.close()).await.expect("close");
    for gone in [format!("{BASE}/orders/orders-1"), format!("{BASE}/billing/billing-1")] {
        assert!(node(&client, &gone).await.is_none(), "{gone} is deleted on close");
    }

    // Every parent Curator made is a container: the server reaps them all (every 500 ms, one
    // level at a time), and the test leaves nothing behind.
    eventually("the server reaps Curator's parents", || async {
        node(&client, "/curator-discovery-self-test").await.is_none()
    })
    .await;
}

#[tokio::test]
async fn curator_options_sequential_instances_and_provider_strategies() {
    const JOBS: &str = "/curator-discovery-self-test/options";
    let server =
        within_for(SERVER_START, "starting ZooKeeper", TestingServer::start()).await.expect("server");
    let client = connect(&server.connect_string()).await;
    let mut curator = within_for(JVM_START, "starting Curator's discovery", async {
        CuratorDiscovery::builder(server.connect_string(), JOBS)
            .watch_instances(true)
            .enabled_field(true)
            .session_timeout(Duration::from_secs(4))
            .start()
            .await
    })
    .await
    .expect("Curator discovery");

    // DYNAMIC_SEQUENTIAL: an ephemeral-sequential node named <id><sequence>; the data keeps the id.
    let sequential = CuratorInstanceSpec::new("jobs")
        .id("seq-")
        .address("10.0.0.10")
        .port(7000)
        .service_type(CuratorServiceType::DynamicSequential)
        .registration_time_utc(REGISTERED_AT);
    let written_sequential = within("register", curator.register(&sequential)).await.expect("register");
    assert_eq!(
        written_sequential,
        r#"{"name":"jobs","id":"seq-","address":"10.0.0.10","port":7000,"sslPort":null,"payload":null,"registrationTimeUTC":1700000000000,"serviceType":"DYNAMIC_SEQUENTIAL","uriSpec":null,"enabled":true}"#,
        "enabled-field writes \"enabled\" last"
    );
    let children = within("list", client.list_children(&format!("{JOBS}/jobs"))).await.expect("list");
    assert_eq!(children.len(), 1, "{children:?}");
    let sequence = children[0].strip_prefix("seq-").expect("named after the id");
    assert!(sequence.len() == 10 && sequence.bytes().all(|b| b.is_ascii_digit()), "{children:?}");
    let (data, stat) = show(&client, &format!("{JOBS}/jobs/{}", children[0])).await;
    assert_eq!(data, written_sequential.as_bytes());
    assert_eq!(stat.ephemeral_owner, curator.session_id());
    assert_eq!(
        within("query", curator.query_for_instance("jobs", "seq-")).await.expect("query"),
        None,
        "Curator looks for <name>/<id>, not the sequential node"
    );

    // A payload of a class named in "@class", UTF-8 both ways. Jackson 2.14 writes characters of
    // the Basic Multilingual Plane as raw UTF-8, and the others as escaped surrogate pairs.
    let tree = CuratorInstanceSpec::new("jobs")
        .id("tree")
        .address("10.0.0.11")
        .payload_json(r#"{"@class":"java.util.TreeMap","b":1,"a":"é ü 🦀"}"#)
        .service_type(CuratorServiceType::Static)
        .enabled(false)
        .registration_time_utc(REGISTERED_AT);
    let written_tree = within("register", curator.register(&tree)).await.expect("register");
    assert!(
        written_tree.contains(r#""payload":{"@class":"java.util.TreeMap","a":"é ü \uD83E\uDD80","b":1}"#),
        "{written_tree}"
    );
    assert!(written_tree.ends_with(r#""enabled":false}"#), "{written_tree}");
    let (data, _) = show(&client, &format!("{JOBS}/jobs/tree")).await;
    assert_eq!(data, written_tree.as_bytes());
    let instances = within("instances", curator.query_for_instances("jobs")).await.expect("instances");
    assert_eq!(instances, [written_sequential.clone(), written_tree.clone()], "sorted by id");

    // Providers never give a disabled instance: a sticky one keeps to the only enabled one, and
    // has nothing to give once that one is noted down.
    within(
        "sticky",
        curator.start_provider_with_down_policy(
            "jobs",
            CuratorProviderStrategy::Sticky,
            Duration::from_secs(60),
            1,
        ),
    )
    .await
    .expect("provider");
    for _ in 0..4 {
        let provided = within("provide", curator.provider_instance("jobs")).await.expect("provide");
        assert_eq!(provided, Some(written_sequential.clone()));
    }
    within("note error", curator.note_error("jobs", "seq-")).await.expect("noted");
    assert_eq!(within("provide", curator.provider_instance("jobs")).await.expect("provide"), None);
    within("close provider", curator.close_provider("jobs")).await.expect("closed");

    // Enabled again (an update), a random provider gives both.
    let enabled_tree = within("update", curator.update(&tree.enabled(true))).await.expect("update");
    assert!(enabled_tree.ends_with(r#""enabled":true}"#), "{enabled_tree}");
    within("random", curator.start_provider("jobs", CuratorProviderStrategy::Random))
        .await
        .expect("provider");
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..50 {
        seen.insert(
            within("provide", curator.provider_instance("jobs")).await.expect("provide").expect("one"),
        );
    }
    assert_eq!(seen, [written_sequential.clone(), enabled_tree].into_iter().collect());

    // No instances: the provider has none to give.
    within("provider", curator.start_provider("none", CuratorProviderStrategy::RoundRobin))
        .await
        .expect("provider");
    assert_eq!(within("provide", curator.provider_instance("none")).await.expect("provide"), None);

    // Closing deletes <base>/jobs/tree; the unregister of "seq-" misses the sequential node, which
    // goes with the session. The provider of "none" made <base>/none, a container that never had
    // a child, so the server keeps it: delete it, then the server reaps the rest.
    within("close", curator.close()).await.expect("close");
    eventually("the sequential node goes with the session", || async {
        within("list", client.list_children(&format!("{JOBS}/jobs")))
            .await
            .map_or(true, |left| left.is_empty())
    })
    .await;
    let (none_data, _) =
        node(&client, &format!("{JOBS}/none")).await.expect("the provider's empty container");
    assert!(none_data.is_empty());
    within("delete", client.delete(&format!("{JOBS}/none"), None)).await.expect("delete");
    eventually("the server reaps Curator's parents", || async {
        node(&client, "/curator-discovery-self-test").await.is_none()
    })
    .await;
}

#[tokio::test]
async fn a_failing_line_is_reported_with_curators_message() {
    let server =
        within_for(SERVER_START, "starting ZooKeeper", TestingServer::start()).await.expect("server");
    let mut curator = within_for(JVM_START, "starting Curator's discovery", async {
        CuratorDiscovery::start(&server.connect_string(), BASE).await
    })
    .await
    .expect("Curator discovery");
    let refused = within("update", curator.update(&orders_1())).await.expect_err("not registered here");
    assert!(matches!(refused, TestingError::Io { .. }), "{refused:?}");
    assert!(refused.to_string().contains("Service not registered"), "{refused}");
    let status = within("exit", curator.process().wait(Duration::from_secs(10))).await.expect("exits");
    assert_eq!(status.code(), Some(1));

    assert!(matches!(curator.unregister("two words", "x").await, Err(TestingError::InvalidArgument(_))));
}

#[tokio::test]
async fn curators_default_instance_names_an_address_and_a_uuid() {
    let json = within_for(JVM_START, "default instance", CuratorDiscovery::default_instance())
        .await
        .expect("default instance");
    println!("Curator's default instance: {json}");
    assert!(json.starts_with(r#"{"name":"defaults","id":""#), "{json}");
    assert!(json.contains(r#","port":null,"sslPort":null,"payload":null,"registrationTimeUTC":"#), "{json}");
    assert!(json.ends_with(r#","serviceType":"DYNAMIC","uriSpec":null}"#), "{json}");
}
