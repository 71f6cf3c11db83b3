//! `watch_instances(true)` against a real ZooKeeper server: data another writer sets on an
//! instance's node is what the re-registration after a session expiry writes (and without the
//! watch, ours is); our own updates, whose watch events come late, are never undone.

use std::time::Duration;

use serde_json::json;
use zk_recipes_discovery::{JsonInstanceSerializer, ServiceDiscovery, ServiceInstance, ServiceType};
use zk_recipes_framework::{ConnectionState, Framework};
use zk_recipes_test_support::*;
use zk_recipes_testing::FaultProxy;

fn instance(id: &str) -> ServiceInstance {
    ServiceInstance::builder("svc")
        .id(id)
        .address("10.0.0.7")
        .port(8080)
        .service_type(ServiceType::Dynamic)
        .registration_time_utc(1_700_000_000_123)
        .build()
}

fn bytes(instance: &ServiceInstance) -> Vec<u8> {
    JsonInstanceSerializer::new().write_enabled(true).serialize(instance).expect("serialize")
}

/// Expires `framework`'s session (the proxy a black hole for three session timeouts) and waits
/// for the new one.
async fn expire(proxy: &FaultProxy, framework: &Framework) -> i64 {
    let first_session = session_of(framework);
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    until_state(&mut events, ConnectionState::Suspended).await;
    lost_then_reconnected(&mut events).await;
    let new_session = session_of(framework);
    assert_ne!(new_session, first_session);
    new_session
}

/// Registers an instance, lets another writer disable it, expires the session: the data the
/// re-registered node holds.
async fn re_registered_after_another_writer(watch: bool) -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(2)).await;
    let base_path = format!("/watch-{watch}");
    let discovery = ServiceDiscovery::builder(&framework, &base_path)
        .serializer(JsonInstanceSerializer::new().write_enabled(true))
        .watch_instances(watch)
        .build()
        .expect("discovery");
    let ours = instance("one");
    within("register", discovery.register(&ours, step())).await.expect("register");
    let path = format!("{base_path}/svc/one");

    // An operator disables the instance from another client.
    let mut disabled = ours.clone();
    disabled.enabled = false;
    within("set", observer.set_data(&path, &bytes(&disabled), None, step())).await.expect("set");
    tokio::time::sleep(STILL_WAITING).await;

    let new_session = expire(&proxy, &framework).await;
    eventually("re-registered on the new session", || async {
        data_and_owner(&observer, &path).await.is_some_and(|(_, owner)| owner == new_session)
    })
    .await;
    let (data, _) = data_and_stat(&observer, &path).await;
    within("close", discovery.close(step())).await.expect("close");
    close_all([framework, observer]).await;
    (data, bytes(&ours), bytes(&disabled))
}

#[tokio::test]
async fn another_writers_data_is_adopted_only_when_watching() {
    init_tracing();
    let (data, _, disabled) = re_registered_after_another_writer(true).await;
    assert_eq!(String::from_utf8_lossy(&data), String::from_utf8_lossy(&disabled), "adopted");
    let (data, ours, _) = re_registered_after_another_writer(false).await;
    assert_eq!(String::from_utf8_lossy(&data), String::from_utf8_lossy(&ours), "not watched: ours");
}

#[tokio::test]
async fn late_events_of_our_own_updates_never_undo_them() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(2)).await;
    let discovery = ServiceDiscovery::builder(&framework, "/watch-updates")
        .serializer(JsonInstanceSerializer::new().write_enabled(true))
        .watch_instances(true)
        .build()
        .expect("discovery");
    let ours = instance("one");
    let path = "/watch-updates/svc/one";
    within("register", discovery.register(&ours, step())).await.expect("register");

    // Another writer's change, adopted; then two quick updates of ours, whose events (and the
    // other writer's) come after them.
    let mut other = ours.clone();
    other.payload = Some(json!("operator"));
    within("set", observer.set_data(path, &bytes(&other), None, step())).await.expect("set");
    let mut first = ours.clone();
    first.port = Some(9001);
    let mut second = ours.clone();
    second.port = Some(9002);
    within("update", discovery.update(&first, step())).await.expect("update");
    within("update", discovery.update(&second, step())).await.expect("update");
    tokio::time::sleep(STILL_WAITING).await;
    assert_eq!(data_and_stat(&observer, path).await.0, bytes(&second));

    let new_session = expire(&proxy, &framework).await;
    eventually("re-registered with the last update", || async {
        data_and_owner(&observer, path).await == Some((bytes(&second), new_session))
    })
    .await;
    within("close", discovery.close(step())).await.expect("close");
    assert!(children(&observer, "/watch-updates/svc").await.is_empty());
    close_all([framework, observer]).await;
}
