//! The cache through connection loss, session expiry and server restarts: it converges on the
//! server's state and reports exactly the differences.

mod common;

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use zk_recipes_cache::{Cache, CacheEvent, CacheEvents};
use zk_recipes_framework::{path, Deadline, Framework, ParentMode};
use zk_recipes_testing::{FaultProxy, TestingServer};

async fn create(framework: &Framework, path: &str, data: &[u8]) {
    within("create", framework.create(path).data(data).creating_parents(ParentMode::Persistent))
        .await
        .expect("create");
}

/// Every node at and below `root` on the server now: path -> (mzxid, data), read directly.
pub async fn listing(framework: &Framework, root: &str) -> BTreeMap<String, (i64, Vec<u8>)> {
    let mut found = BTreeMap::new();
    let mut to_read = vec![root.to_owned()];
    while let Some(node) = to_read.pop() {
        let read = within("get data", framework.get_data(&node, Deadline::after(STEP))).await;
        match read {
            Ok(read) => {
                found.insert(node.clone(), (read.stat.mzxid, read.data));
                for child in children(framework, &node).await {
                    to_read.push(path::join(&node, &child));
                }
            }
            Err(err) if err.is_no_node() => {}
            Err(err) => panic!("get data {node}: {err}"),
        }
    }
    found
}

/// What the cache holds, in the listing's form: path -> (mzxid, data).
fn cached(cache: &Cache) -> BTreeMap<String, (i64, Vec<u8>)> {
    cache
        .entries()
        .into_iter()
        .map(|(path, node)| (path, (node.stat.mzxid, node.data.as_deref().unwrap_or_default().to_vec())))
        .collect()
}

/// Applies a subscription's events to a map, checking each is consistent with what came before
/// (no create of a present node, no change or delete of an absent one, `old` as last reported).
#[derive(Default)]
struct Replayed(BTreeMap<String, (i64, Vec<u8>)>);

impl Replayed {
    fn apply(&mut self, event: CacheEvent) {
        let form = |node: &zk_recipes_cache::CachedNode| {
            (node.stat.mzxid, node.data.as_deref().unwrap_or_default().to_vec())
        };
        match event {
            CacheEvent::Created { path, node } => {
                assert!(self.0.insert(path.clone(), form(&node)).is_none(), "created twice: {path}");
            }
            CacheEvent::Changed { path, old, new } => {
                let before = self.0.insert(path.clone(), form(&new));
                assert_eq!(before, Some(form(&old)), "a change of {path} from what was last reported");
            }
            CacheEvent::Deleted { path, old } => {
                assert_eq!(self.0.remove(&path), Some(form(&old)), "a delete of {path} as last reported");
            }
            CacheEvent::Initialized => {}
            other => panic!("unexpected event {other:?}"),
        }
    }

    fn drain(&mut self, events: &mut CacheEvents) {
        while let Some(event) = events.try_next() {
            self.apply(event);
        }
    }
}

#[tokio::test]
async fn after_expiry_the_cache_reports_exactly_what_changed_meanwhile() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let writer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    for name in ["deleted", "same", "changed", "deleted-parent/child"] {
        create(&writer, &format!("/expiry/{name}"), b"before").await;
    }
    let cache = Cache::builder(&framework, "/expiry").start().expect("cache");
    let mut events = cache.events();
    within("initialized", cache.initialized(step())).await.expect("initialized");
    events_until(&mut events, |event| *event == CacheEvent::Initialized).await;
    let mut connection = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");

    proxy.black_hole(negotiated * 3);
    // Missed by the watch while the session is cut off and expires.
    create(&writer, "/expiry/created", b"new").await;
    within("delete", writer.delete("/expiry/deleted")).await.expect("delete");
    within("delete", writer.delete("/expiry/deleted-parent").deleting_children_if_needed())
        .await
        .expect("delete");
    within("set", writer.set_data("/expiry/changed", b"once", None, step())).await.expect("set");
    within("set", writer.set_data("/expiry/changed", b"twice", None, step())).await.expect("set");
    create(&writer, "/expiry/transient", b"").await;
    within("delete", writer.delete("/expiry/transient")).await.expect("delete");
    lost_then_reconnected(&mut connection).await;

    // A marker written after the reconnection: its event comes after the reload's differences.
    within("marker", framework.create("/expiry/zz-marker")).await.expect("marker");
    let mut seen = events_until(&mut events, |event| event.path() == Some("/expiry/zz-marker")).await;
    let marker = seen.pop();
    seen.sort();
    assert_eq!(
        seen,
        [
            "+/expiry/created",
            "-/expiry/deleted",
            "-/expiry/deleted-parent",
            "-/expiry/deleted-parent/child",
            "~/expiry/changed"
        ],
        "exactly the differences: one change for two sets, nothing for a node created and deleted meanwhile"
    );
    assert_eq!(marker.as_deref(), Some("+/expiry/zz-marker"));
    assert_eq!(cache.get("/expiry/changed").expect("cached").data.as_deref(), Some(&b"twice"[..]));
    assert_eq!(cached(&cache), listing(&writer, "/expiry").await);
    within("close", framework.close()).await;
    within("close", writer.close()).await;
}

#[tokio::test]
async fn changes_made_while_the_connection_was_down_reach_the_cache_on_the_same_session() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let writer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    create(&writer, "/reconnect/a", b"1").await;
    let cache = Cache::builder(&framework, "/reconnect").start().expect("cache");
    within("initialized", cache.initialized(step())).await.expect("initialized");
    let session = framework.current().session_id;
    let mut connection = framework.connection_events();

    proxy.black_hole(Duration::from_secs(30));
    within("suspended", async {
        while let Some(update) = connection.next().await {
            if update.state() == zk_recipes_framework::ConnectionState::Suspended {
                return;
            }
        }
    })
    .await;
    within("set", writer.set_data("/reconnect/a", b"2", None, step())).await.expect("set");
    create(&writer, "/reconnect/b", b"").await;
    proxy.heal();

    let expected = listing(&writer, "/reconnect").await;
    eventually("the cache holds what the server holds", || async { cached(&cache) == expected }).await;
    assert_eq!(framework.current().session_id, session, "the same session throughout");
    // The watch works again: a later change arrives too.
    within("set", writer.set_data("/reconnect/b", b"later", None, step())).await.expect("set");
    eventually("the later change", || async {
        cache.get("/reconnect/b").and_then(|node| node.data.map(|data| data.to_vec()))
            == Some(b"later".to_vec())
    })
    .await;
    within("close", framework.close()).await;
    within("close", writer.close()).await;
}

#[tokio::test]
async fn under_a_busy_writer_through_a_restart_and_an_expiry_the_cache_equals_the_server() {
    init_tracing();
    let mut server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let writer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    create(&writer, "/busy", b"").await;
    let cache = Cache::builder(&framework, "/busy").start().expect("cache");
    let mut events = cache.events();
    let mut replayed = Replayed::default();
    within("initialized", cache.initialized(step())).await.expect("initialized");

    let stop = Arc::new(AtomicBool::new(false));
    let writes = tokio::spawn({
        let writer = writer.clone();
        let stop = Arc::clone(&stop);
        async move {
            let mut round = 0u32;
            while !stop.load(Ordering::Relaxed) {
                round += 1;
                let slot = fastrand::u32(0..24);
                let node = format!("/busy/n{}/c{}", slot % 6, slot);
                let deadline = Deadline::after(Duration::from_secs(2));
                // Errors (no node, node exists, a restart in progress) are part of the load.
                let _ = match fastrand::u8(0..3) {
                    0 => writer
                        .create(&node)
                        .data(round.to_be_bytes())
                        .creating_parents(ParentMode::Persistent)
                        .deadline(deadline)
                        .await
                        .map(drop),
                    1 => writer.set_data(&node, &round.to_be_bytes(), None, deadline).await.map(drop),
                    _ => writer.delete(&node).deadline(deadline).await,
                };
                if round.is_multiple_of(16) {
                    let _ = writer
                        .delete(&format!("/busy/n{}", slot % 6))
                        .deleting_children_if_needed()
                        .deadline(deadline)
                        .await;
                }
            }
            round
        }
    });
    let mut connection = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");
    eventually("some writes cached", || async { cache.len() > 5 }).await;
    replayed.drain(&mut events);

    within_for(SERVER_START, "restart", server.restart()).await.expect("restart");
    eventually("writes cached after the restart", || async { cache.len() > 5 }).await;
    proxy.black_hole(negotiated * 3);
    lost_then_reconnected(&mut connection).await;
    replayed.drain(&mut events);

    stop.store(true, Ordering::Relaxed);
    let rounds = within("writer stops", writes).await.expect("writer");
    assert!(rounds > 50, "the writer kept busy: {rounds} rounds");
    let expected = listing(&writer, "/busy").await;
    eventually("the cache holds what the server holds", || async { cached(&cache) == expected }).await;
    // A marker makes sure every event up to now is queued for the subscriber.
    within("marker", writer.create("/busy/zz-marker")).await.expect("marker");
    loop {
        let event = next_event(&mut events).await;
        let done = event.path() == Some("/busy/zz-marker");
        replayed.apply(event);
        if done {
            break;
        }
    }
    replayed.0.remove("/busy/zz-marker");
    assert_eq!(replayed.0, expected, "the events, applied in order, give the server's state");
    within("close", framework.close()).await;
    within("close", writer.close()).await;
}
