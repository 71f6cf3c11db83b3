//! The cache against a real ZooKeeper server: load, follow, options, drop.

mod common;

use std::io::Write;
use std::time::Duration;

use common::*;
use zk_recipes_cache::{Cache, CacheError, CacheEvent};
use zk_recipes_framework::{zookeeper_client::CreateMode, Deadline, Error as FrameworkError, ParentMode};

async fn create(framework: &zk_recipes_framework::Framework, path: &str, data: &[u8]) {
    within("create", framework.create(path).data(data).creating_parents(ParentMode::Persistent))
        .await
        .expect("create");
}

#[tokio::test]
async fn a_cache_loads_the_subtree_then_follows_creates_changes_and_deletes() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    create(&framework, "/tree/a", b"a").await;
    create(&framework, "/tree/a/deep", b"deep").await;
    create(&framework, "/tree/b", b"b").await;
    create(&framework, "/tree-sibling", b"not below /tree").await;

    let cache = Cache::builder(&framework, "/tree").start().expect("cache");
    let mut events = cache.events();
    within("initialized", cache.initialized(step())).await.expect("initialized");
    let mut loaded = events_until(&mut events, |event| *event == CacheEvent::Initialized).await;
    loaded.sort();
    assert_eq!(loaded, ["+/tree", "+/tree/a", "+/tree/a/deep", "+/tree/b", "initialized"]);
    assert_eq!(cache.children("/tree"), ["a", "b"]);
    assert_eq!(cache.get("/tree/a/deep").expect("cached").data.as_deref(), Some(&b"deep"[..]));
    assert!(cache.get("/tree-sibling").is_none(), "a sibling with a longer name is not below");

    create(&framework, "/tree/c", b"c").await;
    assert_eq!(short(&next_event(&mut events).await), "+/tree/c");
    within("set", framework.set_data("/tree/a", b"a2", None, step())).await.expect("set");
    match next_event(&mut events).await {
        CacheEvent::Changed { path, old, new } => {
            assert_eq!(path, "/tree/a");
            assert_eq!(old.data.as_deref(), Some(&b"a"[..]));
            assert_eq!(new.data.as_deref(), Some(&b"a2"[..]));
            assert_eq!(new.stat.version, old.stat.version + 1);
        }
        other => panic!("expected a change of /tree/a, got {other:?}"),
    }
    within("delete", framework.delete("/tree/a").deleting_children_if_needed()).await.expect("delete");
    assert_eq!(
        events_until(&mut events, |event| event.path() == Some("/tree/a")).await,
        ["-/tree/a/deep", "-/tree/a"]
    );
    assert_eq!(cache.children("/tree"), ["b", "c"]);
    assert_eq!(cache.len(), 3);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_cache_of_a_missing_node_fills_when_it_is_created() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let cache = Cache::builder(&framework, "/later").start().expect("cache");
    within("initialized", cache.initialized(step())).await.expect("initialized");
    assert!(cache.is_empty());
    let mut events = cache.events();
    assert_eq!(short(&next_event(&mut events).await), "initialized", "an empty cache replays only that");
    create(&framework, "/later/child", b"x").await;
    assert_eq!(
        events_until(&mut events, |event| event.path() == Some("/later/child")).await,
        ["+/later", "+/later/child"]
    );
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_single_node_cache_follows_its_node_and_ignores_children() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    create(&framework, "/single", b"1").await;
    let cache = Cache::builder(&framework, "/single").single_node().start().expect("cache");
    let mut events = cache.events();
    within("initialized", cache.initialized(step())).await.expect("initialized");
    assert_eq!(
        events_until(&mut events, |event| *event == CacheEvent::Initialized).await,
        ["+/single", "initialized"]
    );
    create(&framework, "/single/child", b"").await;
    within("set", framework.set_data("/single", b"2", None, step())).await.expect("set");
    assert_eq!(short(&next_event(&mut events).await), "~/single", "the child's creation is not an event");
    assert_eq!(cache.len(), 1);
    assert!(cache.children("/single").is_empty());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn options_stats_only_compressed_data_and_a_filter() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let mut gzip = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzip.write_all(b"unpacked").expect("compress");
    create(&framework, "/opts/packed", &gzip.finish().expect("compress")).await;
    create(&framework, "/opts/private/secret", b"s").await;
    create(&framework, "/opts/public", b"p").await;

    let stats = Cache::builder(&framework, "/opts").stats_only().start().expect("cache");
    let compressed = Cache::builder(&framework, "/opts").compressed_data().start().expect("cache");
    let filtered = Cache::builder(&framework, "/opts")
        .filter(|path| !path.ends_with("/private"))
        .start()
        .expect("cache");
    for cache in [&stats, &compressed, &filtered] {
        within("initialized", cache.initialized(step())).await.expect("initialized");
    }
    let public = stats.get("/opts/public").expect("cached");
    assert_eq!(public.data, None, "a stats-only cache keeps no data");
    assert_eq!(public.stat.data_length, 1);
    assert_eq!(compressed.get("/opts/packed").expect("cached").data.as_deref(), Some(&b"unpacked"[..]));
    assert_eq!(
        compressed.get("/opts/public").expect("cached").data.as_deref(),
        Some(&b"p"[..]),
        "not gzip: as stored"
    );
    assert_eq!(filtered.children("/opts"), ["packed", "public"]);
    assert!(filtered.get("/opts/private/secret").is_none(), "nothing below a refused node");

    let mut stat_events = stats.events();
    events_until(&mut stat_events, |event| *event == CacheEvent::Initialized).await;
    within("set", framework.set_data("/opts/public", b"p2", None, step())).await.expect("set");
    match next_event(&mut stat_events).await {
        CacheEvent::Changed { path, old, new } => {
            assert_eq!(path, "/opts/public");
            assert!(new.stat.mzxid > old.stat.mzxid && new.data.is_none());
        }
        other => panic!("expected a change, got {other:?}"),
    }
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_late_subscriber_gets_the_contents_then_every_change() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    create(&framework, "/late/a", b"").await;
    let cache = Cache::builder(&framework, "/late").start().expect("cache");
    within("initialized", cache.initialized(step())).await.expect("initialized");
    create(&framework, "/late/b", b"").await;
    eventually("b cached", || async { cache.get("/late/b").is_some() }).await;
    let mut events = cache.events();
    assert_eq!(
        events_until(&mut events, |event| *event == CacheEvent::Initialized).await,
        ["+/late", "+/late/a", "+/late/b", "initialized"]
    );
    within("delete", framework.delete("/late/a")).await.expect("delete");
    assert_eq!(short(&next_event(&mut events).await), "-/late/a");
    drop(cache);
    assert_eq!(within("end", events.next()).await, None, "the subscription ends with the cache");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_dropped_cache_leaves_no_watch_on_the_server() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    create(&framework, "/dropped/a", b"").await;
    let cache = Cache::builder(&framework, "/dropped").start().expect("cache");
    within("initialized", cache.initialized(step())).await.expect("initialized");
    assert!(server.watch_count().await.expect("wchc") > 0, "the cache's watch is on the server");
    within("close", cache.close()).await;
    eventually("no watch left", || async { server.watch_count().await.expect("wchc") == 0 }).await;
    let another = Cache::builder(&framework, "/dropped").start().expect("cache");
    within("initialized", another.initialized(step())).await.expect("initialized");
    drop(another);
    eventually("no watch left after a drop", || async { server.watch_count().await.expect("wchc") == 0 })
        .await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_starts() {
    init_tracing();
    let framework = builder("127.0.0.1:1", Duration::from_secs(10)).start().expect("framework");
    match Cache::builder(&framework, "no-slash").start() {
        Err(CacheError::Framework(FrameworkError::InvalidPath { path, .. })) => assert_eq!(path, "no-slash"),
        other => panic!("expected an invalid path, got {other:?}"),
    }
    match Cache::builder(&framework, "/fine").load_concurrency(0).start() {
        Err(CacheError::InvalidArgument(reason)) => assert!(reason.contains("concurrency"), "{reason}"),
        other => panic!("expected an invalid argument, got {other:?}"),
    }
    let waiting = Cache::builder(&framework, "/fine").start().expect("cache");
    let err = waiting.initialized(Deadline::after(Duration::from_millis(200))).await.expect_err("no server");
    assert!(matches!(err, CacheError::Framework(FrameworkError::Timeout { .. })), "{err:?}");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn ephemeral_nodes_of_a_closed_session_leave_the_cache() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    create(&framework, "/members", b"").await;
    let cache = Cache::builder(&framework, "/members").start().expect("cache");
    let mut events = cache.events();
    within("initialized", cache.initialized(step())).await.expect("initialized");
    events_until(&mut events, |event| *event == CacheEvent::Initialized).await;
    let member = builder(&_server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("join", member.create("/members/m1").mode(CreateMode::Ephemeral)).await.expect("join");
    assert_eq!(short(&next_event(&mut events).await), "+/members/m1");
    within("close member", member.close()).await;
    assert_eq!(short(&next_event(&mut events).await), "-/members/m1");
    within("close", framework.close()).await;
}
