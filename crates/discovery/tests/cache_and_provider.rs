//! `ServiceCache` and `ServiceProvider` against real ZooKeeper servers: events that name the
//! instance added, updated or removed; a cache through the registering side's session expiry and
//! through its own connection loss and session expiry; the provider's strategies, `note_error`
//! and disabled instances.

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use zk_recipes_discovery::{
    DownInstancePolicy, JsonInstanceSerializer, ProviderStrategy, ServiceCache, ServiceCacheEvent,
    ServiceCacheEvents, ServiceDiscovery, ServiceProvider, ServiceType,
};
use zk_recipes_framework::{ConnectionState, Framework};
use zk_recipes_test_support::*;

mod common;
use common::{discovery, instance};

async fn cache_of(discovery: &ServiceDiscovery, name: &str) -> ServiceCache {
    within("start the cache", discovery.service_cache(name).start(step())).await.expect("cache")
}

/// The next event, within [`STEP`].
async fn next_event(events: &mut ServiceCacheEvents) -> ServiceCacheEvent {
    within("the next service cache event", events.next()).await.expect("the cache is running")
}

/// A short form of an event, for assertions: `+id`, `~id`, `-id`, `loaded`.
fn short(event: &ServiceCacheEvent) -> String {
    match event {
        ServiceCacheEvent::Added(instance) => format!("+{}", instance.id),
        ServiceCacheEvent::Updated { new, .. } => format!("~{}", new.id),
        ServiceCacheEvent::Removed(instance) => format!("-{}", instance.id),
        ServiceCacheEvent::Loaded => "loaded".to_owned(),
        other => format!("{other:?}"),
    }
}

/// Events (short forms) up to and including the first for which `last` holds.
async fn events_until(
    events: &mut ServiceCacheEvents,
    last: impl Fn(&ServiceCacheEvent) -> bool,
) -> Vec<String> {
    let mut seen = Vec::new();
    loop {
        let event = next_event(events).await;
        seen.push(short(&event));
        if last(&event) {
            return seen;
        }
    }
}

fn is_added(id: &str) -> impl Fn(&ServiceCacheEvent) -> bool + '_ {
    move |event| matches!(event, ServiceCacheEvent::Added(instance) if instance.id == id)
}

/// What the cache holds equals what a query of the server finds, in the same (node-name) order.
async fn cache_equals_server(cache: &ServiceCache, reader: &ServiceDiscovery) {
    let on_server = within("query", reader.query_for_instances(cache.name(), step())).await.expect("query");
    assert_eq!(cache.instances(), on_server, "the cache holds what the server holds");
}

#[tokio::test]
async fn the_cache_names_each_instance_added_updated_and_removed() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let discovery = discovery(&framework, "/cache-crud");
    let a = instance("api", "a", ServiceType::Dynamic);
    let b = instance("api", "b", ServiceType::Static);
    for registered in [&a, &b] {
        within("register", discovery.register(registered, step())).await.expect("register");
    }
    let cache = cache_of(&discovery, "api").await;
    assert!(cache.is_loaded());
    assert_eq!(cache.instances(), vec![a.clone(), b.clone()], "loaded before start returns");
    let mut events = cache.events();
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Added(a.clone()));
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Added(b.clone()));
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Loaded);

    let mut moved = a.clone();
    moved.port = Some(9000);
    within("update", discovery.update(&moved, step())).await.expect("update");
    assert_eq!(
        next_event(&mut events).await,
        ServiceCacheEvent::Updated { old: a.clone(), new: moved.clone() },
        "the update names the instance, with what it was and what it is"
    );
    let worker = instance("api", "worker", ServiceType::DynamicSequential);
    within("register", discovery.register(&worker, step())).await.expect("register");
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Added(worker.clone()));
    within("unregister", discovery.unregister(&b, step())).await.expect("unregister");
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Removed(b.clone()));

    // A node that is not an instance is left out (logged), with no event; once it holds an
    // instance, it is added.
    let garbled = "/cache-crud/api/garbled";
    within("garbled", framework.create(garbled).data(b"not json")).await.expect("create");
    let c = instance("api", "c", ServiceType::Dynamic);
    within("register", discovery.register(&c, step())).await.expect("register");
    assert_eq!(
        next_event(&mut events).await,
        ServiceCacheEvent::Added(c.clone()),
        "no event for the garbled node"
    );
    let fixed = instance("api", "garbled", ServiceType::Static);
    let fixed_bytes = JsonInstanceSerializer::new().serialize(&fixed).expect("serialize");
    within("fix", framework.set_data(garbled, &fixed_bytes, None, step())).await.expect("set");
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Added(fixed.clone()));
    // ... and removed when it no longer reads as one.
    within("garble", framework.set_data(garbled, b"{", None, step())).await.expect("set");
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Removed(fixed));

    cache_equals_server(&cache, &discovery).await;
    let ids: Vec<String> = cache.instances().into_iter().map(|instance| instance.id).collect();
    assert_eq!(ids, ["worker", "a", "c"], "node-name order (`_c_...` first), the garbled node left out");

    // A late subscriber gets what the cache holds, then `Loaded`, then what follows.
    let mut late = cache.events();
    let replay: Vec<String> =
        [next_event(&mut late).await, next_event(&mut late).await, next_event(&mut late).await]
            .iter()
            .map(short)
            .collect();
    assert_eq!(replay, ["+worker", "+a", "+c"]);
    assert_eq!(next_event(&mut late).await, ServiceCacheEvent::Loaded);

    // Closing the discovery removes its instances; the cache sees each go.
    within("close", discovery.close(step())).await.expect("close");
    let mut gone = BTreeSet::new();
    while gone.len() < 3 {
        match next_event(&mut events).await {
            ServiceCacheEvent::Removed(instance) => assert!(gone.insert(instance.id)),
            other => panic!("expected a removal, got {other:?}"),
        }
    }
    assert!(cache.is_empty());
    within("close the cache", cache.close()).await;
    assert!(within("events end", events.next()).await.is_none(), "subscriptions end with the cache");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_missing_service_loads_empty_and_fills_and_bad_names_are_refused() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let discovery = discovery(&framework, "/cache-empty");
    let cache = cache_of(&discovery, "later").await;
    assert!(cache.is_loaded() && cache.is_empty());
    let mut events = cache.events();
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Loaded);
    let first = instance("later", "first", ServiceType::Dynamic);
    within("register", discovery.register(&first, step())).await.expect("register");
    assert_eq!(next_event(&mut events).await, ServiceCacheEvent::Added(first));

    for bad in ["", "a/b", ".."] {
        let refused = within("start", discovery.service_cache(bad).start(step())).await;
        assert!(
            matches!(refused, Err(zk_recipes_discovery::DiscoveryError::InvalidArgument(_))),
            "{bad:?}: {refused:?}"
        );
    }
    within("close", discovery.close(step())).await.expect("close");
    within("close the cache", cache.close()).await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_cache_follows_the_registering_side_through_its_session_expiry() {
    init_tracing();
    // The registering side goes through the proxy (2 s sessions); the cache reads directly.
    let (_server, proxy, registering, observer) = proxied(Duration::from_secs(2)).await;
    let discovery = discovery(&registering, "/cache-expiry");
    let dynamic = instance("svc", "dynamic", ServiceType::Dynamic);
    let sequential = instance("svc", "sequential", ServiceType::DynamicSequential);
    let persistent = instance("svc", "static", ServiceType::Static);
    for registered in [&dynamic, &sequential, &persistent] {
        within("register", discovery.register(registered, step())).await.expect("register");
    }
    let reader = self::discovery(&observer, "/cache-expiry");
    let cache = cache_of(&reader, "svc").await;
    let mut events = cache.events();
    let loaded = events_until(&mut events, |event| *event == ServiceCacheEvent::Loaded).await;
    assert_eq!(loaded.len(), 4, "three instances, then loaded: {loaded:?}");
    let old_sequential_path = discovery.instance_path("sequential").expect("path");

    // The registering side is cut off for three session timeouts: the server ends its session
    // (its ephemeral nodes go) well before it can reach the server again and register anew.
    let mut connection = registering.connection_events();
    let negotiated = registering.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    let mut removed = vec![short(&next_event(&mut events).await), short(&next_event(&mut events).await)];
    removed.sort();
    assert_eq!(removed, ["-dynamic", "-sequential"], "the ephemeral instances leave with their session");
    lost_then_reconnected(&mut connection).await;
    let mut added = vec![short(&next_event(&mut events).await), short(&next_event(&mut events).await)];
    added.sort();
    assert_eq!(added, ["+dynamic", "+sequential"], "registered again on the new session");
    assert_ne!(discovery.instance_path("sequential").expect("path"), old_sequential_path, "a new node");

    cache_equals_server(&cache, &reader).await;
    let ids: BTreeSet<String> = cache.instances().into_iter().map(|instance| instance.id).collect();
    assert_eq!(ids, BTreeSet::from(["dynamic".into(), "sequential".into(), "static".into()]));
    assert!(cache.instances().contains(&dynamic), "with the same data");
    assert!(events.try_next().is_none(), "nothing else: the persistent instance was left alone");

    within("close", discovery.close(step())).await.expect("close");
    within("close the cache", cache.close()).await;
    close_all([registering, observer]).await;
}

/// Changes made by a writer while the cache's connection is down: `changed` updated, `gone`
/// unregistered, `new` registered (`same` left alone).
async fn change_while_down(writer: &ServiceDiscovery) {
    let mut changed = instance("svc", "changed", ServiceType::Static);
    changed.port = Some(1);
    within("update", writer.update(&changed, step())).await.expect("update");
    let gone = instance("svc", "gone", ServiceType::Static);
    within("unregister", writer.unregister(&gone, step())).await.expect("unregister");
    let new = instance("svc", "new", ServiceType::Static);
    within("register", writer.register(&new, step())).await.expect("register");
}

/// A cache on the proxied framework of a server where `writer` registered `changed`, `gone` and
/// `same`; the cache is loaded and its subscription has read the load.
async fn loaded_cache_of_three(
    writer: &ServiceDiscovery,
    cache_side: &Framework,
) -> (ServiceCache, ServiceCacheEvents) {
    for id in ["changed", "gone", "same"] {
        within("register", writer.register(&instance("svc", id, ServiceType::Static), step()))
            .await
            .expect("register");
    }
    let cache = cache_of(&discovery(cache_side, writer.base_path()), "svc").await;
    let mut events = cache.events();
    events_until(&mut events, |event| *event == ServiceCacheEvent::Loaded).await;
    (cache, events)
}

#[tokio::test]
async fn across_its_own_connection_loss_the_cache_reports_exactly_what_changed() {
    init_tracing();
    let (_server, proxy, cache_side, writer_side) = proxied(Duration::from_secs(10)).await;
    let writer = discovery(&writer_side, "/cache-reconnect");
    let (cache, mut events) = loaded_cache_of_three(&writer, &cache_side).await;
    let session = session_of(&cache_side);
    let mut connection = cache_side.connection_events();

    proxy.black_hole(Duration::from_secs(30));
    until_state(&mut connection, ConnectionState::Suspended).await;
    change_while_down(&writer).await;
    assert!(events.try_next().is_none(), "nothing is heard while the connection is down");
    assert_eq!(cache.len(), 3, "the cache keeps what it last read");
    proxy.heal();
    until_state(&mut connection, ConnectionState::Reconnected).await;
    assert_eq!(session_of(&cache_side), session, "the same session");

    // A marker registered after the reconnection: its event comes after the reload's differences.
    let marker = instance("svc", "zz-marker", ServiceType::Static);
    within("register", writer.register(&marker, step())).await.expect("register");
    let mut seen = events_until(&mut events, is_added("zz-marker")).await;
    seen.pop();
    seen.sort();
    assert_eq!(seen, ["+new", "-gone", "~changed"], "exactly the differences, no reset, nothing for `same`");
    cache_equals_server(&cache, &writer).await;
    within("close", writer.close(step())).await.expect("close");
    within("close the cache", cache.close()).await;
    close_all([cache_side, writer_side]).await;
}

#[tokio::test]
async fn across_its_own_session_expiry_the_cache_reports_exactly_what_changed() {
    init_tracing();
    let (_server, proxy, cache_side, writer_side) = proxied(Duration::from_secs(2)).await;
    let writer = discovery(&writer_side, "/cache-own-expiry");
    let (cache, mut events) = loaded_cache_of_three(&writer, &cache_side).await;
    let mut connection = cache_side.connection_events();
    let negotiated = cache_side.current().session_timeout.expect("session");

    proxy.black_hole(negotiated * 3);
    change_while_down(&writer).await;
    lost_then_reconnected(&mut connection).await;

    let marker = instance("svc", "zz-marker", ServiceType::Static);
    within("register", writer.register(&marker, step())).await.expect("register");
    let mut seen = events_until(&mut events, is_added("zz-marker")).await;
    seen.pop();
    seen.sort();
    assert_eq!(seen, ["+new", "-gone", "~changed"], "exactly the differences, on the new session");
    cache_equals_server(&cache, &writer).await;
    within("close", writer.close(step())).await.expect("close");
    within("close the cache", cache.close()).await;
    close_all([cache_side, writer_side]).await;
}

async fn provider(discovery: &ServiceDiscovery, name: &str, strategy: ProviderStrategy) -> ServiceProvider {
    within("start the provider", discovery.service_provider(name).strategy(strategy).start(step()))
        .await
        .expect("provider")
}

fn drawn_ids(provider: &ServiceProvider, draws: usize) -> Vec<String> {
    (0..draws).map(|_| provider.get_instance().expect("an instance").id).collect()
}

#[tokio::test]
async fn strategies_round_robin_random_and_sticky() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let discovery = discovery(&framework, "/strategies");
    for id in ["a", "b", "c"] {
        within("register", discovery.register(&instance("svc", id, ServiceType::Dynamic), step()))
            .await
            .expect("register");
    }

    // Round robin: each in turn, in node-name order, the same cycle over and over.
    let round_robin = provider(&discovery, "svc", ProviderStrategy::RoundRobin).await;
    assert_eq!(drawn_ids(&round_robin, 9), ["a", "b", "c", "a", "b", "c", "a", "b", "c"]);
    assert_eq!(round_robin.get_all_instances().len(), 3);

    // Random: every instance comes up. The chance that one of 3 is missed in 100 independent
    // uniform draws is at most 3 * (2/3)^100 ≈ 7.4e-18.
    let random = provider(&discovery, "svc", ProviderStrategy::Random).await;
    let drawn: BTreeSet<String> = drawn_ids(&random, 100).into_iter().collect();
    assert_eq!(drawn, BTreeSet::from(["a".into(), "b".into(), "c".into()]));

    // Sticky: the same instance until it leaves, then another one, which sticks in turn.
    let sticky = provider(&discovery, "svc", ProviderStrategy::Sticky).await;
    let first = sticky.get_instance().expect("an instance");
    assert!(drawn_ids(&sticky, 50).iter().all(|id| *id == first.id), "sticks to {}", first.id);
    within("unregister", discovery.unregister(&first, step())).await.expect("unregister");
    eventually("the sticky instance replaced", || async {
        sticky.get_instance().is_some_and(|instance| instance.id != first.id)
    })
    .await;
    let second = sticky.get_instance().expect("an instance");
    assert!(drawn_ids(&sticky, 50).iter().all(|id| *id == second.id), "sticks to {}", second.id);
    // The first one back does not take over.
    within("register", discovery.register(&first, step())).await.expect("register");
    eventually("back in the cache", || async { sticky.cache().len() == 3 }).await;
    assert!(drawn_ids(&sticky, 50).iter().all(|id| *id == second.id));

    for provider in [round_robin, random, sticky] {
        within("close the provider", provider.close()).await;
    }
    within("close", discovery.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn note_error_takes_an_instance_out_for_the_policy_timeout() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let discovery = discovery(&framework, "/down");
    for id in ["a", "b"] {
        within("register", discovery.register(&instance("svc", id, ServiceType::Dynamic), step()))
            .await
            .expect("register");
    }
    let timeout = Duration::from_millis(1500);
    let provider = within(
        "start the provider",
        discovery
            .service_provider("svc")
            .down_instance_policy(DownInstancePolicy::new(timeout, 2))
            .start(step()),
    )
    .await
    .expect("provider");
    let a = provider.cache().instances().into_iter().find(|instance| instance.id == "a").expect("a");
    let ids = |provider: &ServiceProvider| -> Vec<String> {
        provider.get_all_instances().into_iter().map(|instance| instance.id).collect()
    };

    let first_error = Instant::now();
    provider.note_error(&a);
    assert_eq!(ids(&provider), ["a", "b"], "one error is below the threshold of 2");
    provider.note_error(&a);
    assert_eq!(ids(&provider), ["b"], "two errors: out");
    assert!(drawn_ids(&provider, 10).iter().all(|id| id == "b"), "never picked while out");
    eventually("back after the timeout", || async { ids(&provider) == ["a", "b"] }).await;
    let out_for = first_error.elapsed();
    assert!(out_for >= timeout, "out until the timeout after the first error, back after {out_for:?}");
    let drawn: BTreeSet<String> = drawn_ids(&provider, 4).into_iter().collect();
    assert_eq!(drawn, BTreeSet::from(["a".into(), "b".into()]), "both in rotation again");

    within("close the provider", provider.close()).await;
    within("close", discovery.close(step())).await.expect("close");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn disabled_instances_are_never_returned_and_filters_add_up() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    // `enabled` is written only by a serializer that writes it (Curator's non-compatible mode).
    let discovery = ServiceDiscovery::builder(&framework, "/disabled")
        .serializer(JsonInstanceSerializer::new().write_enabled(true))
        .build()
        .expect("discovery");
    let on = instance("svc", "on", ServiceType::Dynamic);
    let mut off = instance("svc", "off", ServiceType::Dynamic);
    off.enabled = false;
    let mut other_port = instance("svc", "other-port", ServiceType::Dynamic);
    other_port.port = Some(1);
    for registered in [&on, &off, &other_port] {
        within("register", discovery.register(registered, step())).await.expect("register");
    }
    let mut providers = Vec::new();
    for strategy in [ProviderStrategy::RoundRobin, ProviderStrategy::Random, ProviderStrategy::Sticky] {
        providers.push(provider(&discovery, "svc", strategy).await);
    }
    for provider in &providers {
        assert_eq!(provider.cache().len(), 3, "the cache holds the disabled instance too");
        assert!(drawn_ids(provider, 60).iter().all(|id| id != "off"), "{:?}", provider.strategy());
        let all: Vec<String> = provider.get_all_instances().into_iter().map(|instance| instance.id).collect();
        assert_eq!(all, ["on", "other-port"]);
    }

    // A filter leaves out more; filters add up with the rule on disabled instances.
    let filtered = within(
        "start the provider",
        discovery.service_provider("svc").filter(|instance| instance.port == Some(8080)).start(step()),
    )
    .await
    .expect("provider");
    assert!(drawn_ids(&filtered, 10).iter().all(|id| id == "on"));

    // Enabled again: it comes back; disabled: it goes.
    let mut enabled_again = off.clone();
    enabled_again.enabled = true;
    within("update", discovery.update(&enabled_again, step())).await.expect("update");
    let mut disabled_now = on.clone();
    disabled_now.enabled = false;
    within("update", discovery.update(&disabled_now, step())).await.expect("update");
    eventually("the round robin provider follows", || async {
        let all: Vec<String> =
            providers[0].get_all_instances().into_iter().map(|instance| instance.id).collect();
        all == ["off", "other-port"]
    })
    .await;
    eventually("the filtered provider follows", || async {
        filtered.get_all_instances().into_iter().map(|instance| instance.id).collect::<Vec<_>>() == ["off"]
    })
    .await;
    assert!(drawn_ids(&filtered, 10).iter().all(|id| id == "off"), "now the only enabled one on port 8080");

    for provider in providers.into_iter().chain([filtered]) {
        within("close the provider", provider.close()).await;
    }
    within("close", discovery.close(step())).await.expect("close");
    within("close", framework.close()).await;
}
