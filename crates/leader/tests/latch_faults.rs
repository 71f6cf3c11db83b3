//! The leader latch under faults: an expired leader, a server restart, a lost ensemble member.

mod checks;
mod common;
mod contender;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use checks::*;
use common::*;
use contender::*;
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{ConnectionState, Deadline, ErrorPolicy, Framework};
use zk_recipes_leader::{CloseMode, LeaderLatch, LeadershipEvent, NotLeaderReason};
use zk_recipes_testing::{FaultProxy, TestingCluster, TestingServer};

/// A store that refuses writes with a fencing token lower than the highest it has seen: the
/// guard a leader puts in front of its side effects. Returns whether the write was accepted.
async fn fenced_write(store: &Framework, path: &str, token: i64) -> bool {
    store
        .retry(Deadline::after(STEP), |session| async move {
            loop {
                let (data, stat) = session.client().get_data(path).await?;
                let highest: i64 = String::from_utf8_lossy(&data).parse().unwrap_or(i64::MIN);
                if token < highest {
                    return Ok(false);
                }
                match session.client().set_data(path, token.to_string().as_bytes(), Some(stat.version)).await
                {
                    Ok(_) => return Ok(true),
                    Err(zookeeper_client::Error::BadVersion) => continue,
                    Err(err) => return Err(err.into()),
                }
            }
        })
        .await
        .expect("fenced write")
}

/// The leader's session is expired through a black-holed proxy while a second participant waits.
async fn expired_leader(server: &TestingServer, policy: ErrorPolicy, dir: &str) {
    let session_timeout = Duration::from_secs(4);
    let (path, store_path) = (format!("{dir}/latch"), format!("{dir}/store"));
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let store = framework(&server.connect_string(), Duration::from_secs(30), ErrorPolicy::Standard);
    store
        .retry(Deadline::after(STEP), |session| {
            let store_path = store_path.clone();
            async move {
                session.client().mkdir(dir, &session.create_options(CreateMode::Persistent)).await?;
                let options = session.create_options(CreateMode::Persistent);
                match session.client().create(&store_path, b"0", &options).await {
                    Ok(_) | Err(zookeeper_client::Error::NodeExists) => Ok(()),
                    Err(err) => Err(err.into()),
                }
            }
        })
        .await
        .expect("store");

    let old_framework = framework(&proxy.connect_string(), session_timeout, policy);
    let old = LeaderLatch::new(&old_framework, &path, "old").expect("latch");
    let mut old_events = old.subscribe();
    old.start().expect("start");
    let old_token = within("old leads", old.await_leadership()).await.expect("leads");
    let old_node = old.our_node_path().expect("node");
    let new_framework = framework(&server.connect_string(), session_timeout, policy);
    let new = LeaderLatch::new(&new_framework, &path, "new").expect("latch");
    new.start().expect("start");
    eventually("both joined", || async { children(&store, &path).await.len() == 2 }).await;
    assert!(fenced_write(&store, &store_path, old_token).await, "the leader writes");

    // Silence the leader's connection past its session timeout: the server expires its session.
    proxy.black_hole(Duration::from_secs(120));
    if policy == ErrorPolicy::Standard {
        // Its listener fires once the connection is suspended, before the server expires it.
        assert_eq!(
            within("the first event", old_events.next()).await,
            Some(LeadershipEvent::IsLeader { fencing_token: old_token })
        );
        let event = within("the old leader hears it", old_events.next()).await;
        assert_eq!(
            event,
            Some(LeadershipEvent::NotLeader {
                reason: NotLeaderReason::Connection(ConnectionState::Suspended)
            })
        );
        assert!(!old.has_leadership());
    }
    let new_token = within("the new participant leads", new.await_leadership()).await.expect("leads");
    assert!(new_token > old_token, "fencing tokens grow: {new_token} > {old_token}");
    assert!(fenced_write(&store, &store_path, new_token).await, "the new leader writes");
    // Whatever the old leader believes (under SessionOnly it may still believe it leads), its
    // writes guarded with its token are refused from now on.
    assert!(!fenced_write(&store, &store_path, old_token).await, "a deposed leader's write is refused");
    eventually("the old leader knows it does not lead", || async { !old.has_leadership() }).await;

    // Back online: the old participant joins again on a new session, behind the new leader, and
    // never leads with its stale node.
    proxy.heal();
    eventually("the old participant joined again", || async {
        old.our_node_path().is_some_and(|node| node != old_node) && children(&store, &path).await.len() == 2
    })
    .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!old.has_leadership() && new.has_leadership());
    let mut heard = Vec::new();
    while let Some(Some(event)) = futures_now(old_events.next()) {
        heard.push(event);
    }
    // Under SessionOnly the stream still starts with the first leadership.
    let after_first =
        heard.iter().skip_while(|event| **event == LeadershipEvent::IsLeader { fencing_token: old_token });
    assert!(
        !after_first.clone().any(LeadershipEvent::is_leader),
        "the old participant never led again: {heard:?}"
    );
    if policy == ErrorPolicy::SessionOnly {
        assert!(
            heard.iter().any(|event| matches!(event, LeadershipEvent::NotLeader { .. })),
            "the listener fired when the session was lost: {heard:?}"
        );
    }

    within("close", old.close(CloseMode::Silent)).await.expect("close");
    within("close", new.close(CloseMode::Silent)).await.expect("close");
    for framework in [old_framework, new_framework] {
        within("close", framework.close()).await;
    }
    eventually("no latch node left", || async { children(&store, &path).await.is_empty() }).await;
    store.delete_recursive(dir, Deadline::after(STEP)).await.expect("delete the store");
    within("close", store.close()).await;
}

/// Polls a future once.
fn futures_now<F: std::future::Future>(future: F) -> Option<F::Output> {
    use futures::FutureExt;
    future.now_or_never()
}

#[tokio::test]
async fn an_expired_leader_steps_down_and_its_fenced_writes_are_refused_under_both_policies() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    within_for(Duration::from_secs(60), "both scenarios", async {
        tokio::join!(
            expired_leader(&server, ErrorPolicy::Standard, "/expiry-standard"),
            expired_leader(&server, ErrorPolicy::SessionOnly, "/expiry-session"),
        )
    })
    .await;
    eventually("no watch left", || async { server.watch_count().await.expect("wchc") == 0 }).await;
}

#[tokio::test]
async fn no_leader_while_the_server_is_down_and_exactly_one_after_it_restarts() {
    init_tracing();
    let mut server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let session_timeout = Duration::from_secs(20);
    let admin = framework(&server.connect_string(), session_timeout, ErrorPolicy::Standard);
    let (path, marker) = ("/restart/latch", "/restart/marker");
    let violations = Arc::new(AtomicU32::new(0));
    let contenders: Vec<Contender> = (0..3)
        .map(|index| {
            let framework = framework(&server.connect_string(), session_timeout, ErrorPolicy::Standard);
            Contender::start(framework, path, marker, &format!("r{index}"), violations.clone())
        })
        .collect();
    let before = exactly_one_leader(&admin, &contenders, marker).await;

    within("stop", server.stop()).await.expect("stop");
    eventually("no leader while the server is down", || async { leaders(&contenders).is_empty() }).await;
    within("restart", server.restart()).await.expect("restart");
    let after = exactly_one_leader(&admin, &contenders, marker).await;
    assert_eq!(before, after, "the sessions survived, and so did the order");
    assert_eq!(violations.load(Ordering::SeqCst), 0, "two leaders at once");

    for contender in contenders {
        contender.close(CloseMode::Silent).await;
    }
    assert_clean(&admin, &[path], || async { server.watch_count().await.expect("wchc") }).await;
    within("close", admin.close()).await;
}

/// The session ids a member serves, from its `cons` output (`sid=0x...`).
async fn served_sessions(cluster: &TestingCluster, index: usize) -> Vec<i64> {
    let Ok(cons) = cluster.four_letter_word(index, "cons").await else { return Vec::new() };
    cons.split("sid=0x")
        .skip(1)
        .filter_map(|rest| {
            let hex: String = rest.chars().take_while(char::is_ascii_hexdigit).collect();
            u64::from_str_radix(&hex, 16).ok().map(|sid| sid as i64)
        })
        .collect()
}

#[tokio::test]
async fn killing_the_server_the_leader_is_connected_to_leaves_exactly_one_leader() {
    init_tracing();
    let mut cluster = within_for(SERVER_START, "cluster", TestingCluster::start(3)).await.expect("cluster");
    let session_timeout = Duration::from_secs(15);
    let admin = framework(&cluster.connect_string(), session_timeout, ErrorPolicy::Standard);
    let (path, marker) = ("/ensemble/latch", "/ensemble/marker");
    let violations = Arc::new(AtomicU32::new(0));
    let contenders: Vec<Contender> = (0..3)
        .map(|index| {
            let framework = framework(&cluster.connect_string(), session_timeout, ErrorPolicy::Standard);
            Contender::start(framework, path, marker, &format!("e{index}"), violations.clone())
        })
        .collect();
    let leader = exactly_one_leader(&admin, &contenders, marker).await;
    let session = contenders[leader].framework.current().session_id.expect("session").0;
    let mut serving = None;
    for index in 0..cluster.size() {
        if served_sessions(&cluster, index).await.contains(&session) {
            serving = Some(index);
        }
    }
    let serving = serving.expect("a member serves the leader's session");
    within("kill", cluster.kill(serving)).await.expect("kill");
    eventually("the leader noticed", || async {
        contenders[leader].framework.current().state != Some(ConnectionState::Connected)
    })
    .await;
    within_for(
        Duration::from_secs(60),
        "ensemble serves",
        cluster.wait_until_serving(Duration::from_secs(60)),
    )
    .await
    .expect("serving");
    exactly_one_leader(&admin, &contenders, marker).await;
    assert_eq!(violations.load(Ordering::SeqCst), 0, "two leaders at once");

    for contender in contenders {
        contender.close(CloseMode::Silent).await;
    }
    for dir in [path] {
        eventually("no node left", || async { children(&admin, dir).await.is_empty() }).await;
    }
    eventually("no watch left", || async {
        let mut watches = 0;
        for member in cluster.members().iter().filter(|member| member.is_running()) {
            watches += member.watch_count().await.unwrap_or(usize::MAX / 4);
        }
        watches == 0
    })
    .await;
    within("close", admin.close()).await;
}
