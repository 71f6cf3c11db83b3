//! Following the ensemble (`track_ensemble`) on real ZooKeeper servers: a reconfigurable
//! ensemble whose servers are all replaced, and static servers (behind a proxy) where the
//! tracker must change nothing.

use std::collections::BTreeSet;
use std::time::Duration;

use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{ConnectionState, Deadline, EnsembleChange, ErrorPolicy, Framework};
use zk_recipes_mutex::{Hold, LostReason, Mutex};
use zk_recipes_test_support::*;
use zk_recipes_testing::{parse_wchc, FaultProxy, TestingCluster, TestingServer};

const CONFIG_NODE: &str = "/zookeeper/config";

/// How long a wait that spans a lost session, an election or a JVM start may take.
const LONG_STEP: Duration = Duration::from_secs(90);

/// The session id as `wchc` writes it.
fn wchc_session(framework: &Framework) -> String {
    format!("0x{:x}", session_of(framework))
}

/// The paths `session` watches on `member`, from `wchc` (empty if it does not answer).
async fn watched_paths(cluster: &TestingCluster, index: usize, session: &str) -> Vec<String> {
    match cluster.four_letter_word(index, "wchc").await {
        Ok(answer) => parse_wchc(&answer).remove(session).unwrap_or_default(),
        Err(_) => Vec::new(),
    }
}

/// How many watches on the config node `session` has over all running members.
async fn config_watches(cluster: &TestingCluster, session: &str) -> usize {
    let mut count = 0;
    for index in 0..cluster.size() {
        if cluster.members()[index].is_running() {
            count += watched_paths(cluster, index, session)
                .await
                .iter()
                .filter(|path| *path == CONFIG_NODE)
                .count();
        }
    }
    count
}

/// Waits for the next ensemble change naming exactly `servers`.
async fn change_to(
    changes: &mut tokio::sync::broadcast::Receiver<EnsembleChange>,
    servers: &[String],
) -> EnsembleChange {
    let wanted: BTreeSet<&String> = servers.iter().collect();
    within_for(LONG_STEP, "an ensemble change", async {
        loop {
            let change = changes.recv().await.expect("ensemble changes");
            if change.new_servers.iter().collect::<BTreeSet<_>>() == wanted {
                return change;
            }
        }
    })
    .await
}

fn client_addresses(cluster: &TestingCluster, indexes: impl IntoIterator<Item = usize>) -> Vec<String> {
    indexes.into_iter().map(|index| cluster.members()[index].connect_string()).collect()
}

/// Creates `/<name>` (persistent) within the framework's namespace, retrying across a session
/// loss, within [`LONG_STEP`].
async fn create_persistent(framework: &Framework, name: &str) {
    let path = format!("/{name}");
    within_for(LONG_STEP, "create after the change", async {
        loop {
            match framework.create(&path).await {
                Ok(_) => return,
                Err(err) => tracing::info!(%err, "create not yet"),
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn follows_an_ensemble_whose_servers_are_all_replaced() {
    init_tracing();
    let mut cluster = within_for(
        SERVER_START,
        "reconfigurable cluster start",
        TestingCluster::builder()
            .reconfig(true)
            .tick_time(Duration::from_millis(100))
            .init_limit(Duration::from_secs(5))
            .sync_limit(Duration::from_secs(5))
            .start(),
    )
    .await
    .expect("cluster");
    let framework = builder(&cluster.connect_string(), Duration::from_secs(4))
        .namespace("ensemble-tracking")
        // A held lock is lost only when its session is, not when a server leaves under it.
        .error_policy(ErrorPolicy::SessionOnly)
        .start()
        .expect("framework");
    let mut changes = framework.ensemble_changes();
    let mut events = framework.connection_events();
    assert_eq!(next_connection_state(&mut events).await.0, ConnectionState::Connected);

    // The configuration names the three members: the same servers, no change.
    let config = within("config", framework.ensemble_config(step())).await.expect("config");
    assert_eq!(
        config.client_addresses().into_iter().collect::<BTreeSet<_>>(),
        client_addresses(&cluster, 0..3).iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    let first_session = wchc_session(&framework);
    eventually("one config watch", || async { config_watches(&cluster, &first_session).await == 1 }).await;
    assert_eq!(
        framework.ensemble_connect_string(),
        cluster.connect_string(),
        "no change for the same servers"
    );

    // A held lock and an ephemeral node of the first session.
    let held =
        within("held", framework.create("/held").mode(CreateMode::Ephemeral)).await.expect("held node");
    let lock =
        within("lock", Mutex::new(&framework, "/held-lock").expect("mutex").lock()).await.expect("lock");
    let first_generation = framework.current().generation;
    assert_eq!(held.stat.ephemeral_owner, session_of(&framework));

    // Two new servers join.
    for _ in 0..2 {
        let joiner = within_for(LONG_STEP, "add member", cluster.add_member()).await.expect("joined");
        within_for(LONG_STEP, "reconfig add", cluster.reconfig_add(joiner)).await.expect("added");
        let wanted = client_addresses(&cluster, 0..=joiner);
        let change = change_to(&mut changes, &wanted).await;
        assert_eq!(change.new_servers.len(), joiner + 1);
    }
    assert_eq!(
        framework.ensemble_connect_string().split(',').collect::<BTreeSet<_>>(),
        client_addresses(&cluster, 0..5).iter().map(String::as_str).collect::<BTreeSet<_>>(),
        "the namespace is not part of the connect string"
    );

    // The three original servers leave, one by one.
    for original in 0..3 {
        within_for(LONG_STEP, "reconfig remove", cluster.reconfig_remove(original)).await.expect("removed");
        within_for(LONG_STEP, "stop", cluster.stop(original)).await.expect("stopped");
        let wanted = client_addresses(&cluster, original + 1..5);
        change_to(&mut changes, &wanted).await;
        create_persistent(&framework, &format!("after-removing-{original}")).await;
        if original < 2 {
            // One of the session's own servers still serves: the session moved there and lives.
            assert_eq!(framework.current().generation, first_generation, "the session survived");
            assert_eq!(
                framework.current().session_id.map(|id| format!("0x{:x}", id.0)),
                Some(first_session.clone())
            );
        }
        if framework.current().generation == first_generation {
            // The session moved to another server: its one watch moved with it (CURATOR-710).
            eventually("one config watch after moving", || async {
                config_watches(&cluster, &first_session).await == 1
            })
            .await;
        }
    }
    assert_eq!(
        framework.ensemble_connect_string().split(',').collect::<BTreeSet<_>>(),
        client_addresses(&cluster, 3..5).iter().map(String::as_str).collect::<BTreeSet<_>>()
    );

    // The held lock is lost, and its nodes gone, exactly when its session was lost.
    let observer = builder(&client_addresses(&cluster, 3..5).join(","), Duration::from_secs(10))
        .track_ensemble(false)
        .start()
        .expect("observer");
    let held_path = "/ensemble-tracking/held";
    let now = framework.current();
    if now.generation == first_generation {
        let (_, owner) = data_and_owner(&observer, held_path).await.expect("the held node stands");
        assert_eq!(owner, held.stat.ephemeral_owner, "still held by the first session");
        assert!(
            tokio::time::timeout(STILL_WAITING, lock.lost()).await.is_err(),
            "lost() fired while the session lived"
        );
        assert_eq!(children(&observer, "/ensemble-tracking/held-lock").await.len(), 1);
    } else {
        assert_eq!(within("lost", lock.lost()).await, LostReason::Connection(ConnectionState::Lost));
        within("session_lost", framework.session_lost(first_generation)).await.expect("the session is gone");
        eventually("the lost session's nodes are gone", || async {
            data_and_owner(&observer, held_path).await.is_none()
                && children(&observer, "/ensemble-tracking/held-lock").await.is_empty()
        })
        .await;
    }
    drop(lock);
    // The namespace is kept on the new servers.
    for original in 0..3 {
        let path = format!("/ensemble-tracking/after-removing-{original}");
        assert!(on_server(&observer, &path).await.is_some(), "{path} within the namespace");
    }

    // The watch is on the current session (set again on a new one), once.
    let session = wchc_session(&framework);
    eventually("one config watch on the current session", || async {
        config_watches(&cluster, &session).await == 1
    })
    .await;
    if session != first_session {
        assert_eq!(config_watches(&cluster, &first_session).await, 0, "no watch of the lost session");
    }
    // ... and it still follows: one more server joins.
    let joiner = within_for(LONG_STEP, "add member", cluster.add_member()).await.expect("joined");
    within_for(LONG_STEP, "reconfig add", cluster.reconfig_add(joiner)).await.expect("added");
    change_to(&mut changes, &client_addresses(&cluster, 3..=joiner)).await;
    create_persistent(&framework, "after-the-last-change").await;

    // Closed: no watch left behind.
    within("close", framework.close()).await;
    eventually("no config watch after close", || async { config_watches(&cluster, &session).await == 0 })
        .await;
    close_all([observer]).await;
}

#[tokio::test]
async fn a_static_ensemble_behind_a_proxy_keeps_the_proxy() {
    init_tracing();
    let cluster = within_for(SERVER_START, "cluster start", TestingCluster::builder().size(1).start())
        .await
        .expect("cluster");
    let proxy = within("proxy", FaultProxy::start(cluster.members()[0].address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let untracked = builder(&proxy.connect_string(), Duration::from_secs(10))
        .track_ensemble(false)
        .start()
        .expect("framework");
    for framework in [&framework, &untracked] {
        within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    }

    let config = within("config", framework.ensemble_config(step())).await.expect("config");
    assert!(!config.servers().is_empty(), "a quorum member publishes its servers: {config:?}");
    assert!(config.client_addresses().is_empty(), "a static zoo.cfg names no client address: {config:?}");

    // The tracker changes nothing: new sessions still go through the proxy. It sets no watch on
    // a configuration without client addresses (so the watch counts of the other crates' tests
    // on static servers stay as they were), and neither does a framework that does not track.
    within("a request after the tracker's read", framework.ensemble_config(step())).await.expect("config");
    assert_eq!(framework.ensemble_connect_string(), proxy.connect_string());
    assert!(framework.ensemble_changes().try_recv().is_err());
    for session in [wchc_session(&framework), wchc_session(&untracked)] {
        assert_eq!(watched_paths(&cluster, 0, &session).await, Vec::<String>::new(), "{session}");
    }

    // A new session (the proxy black-holes the old one until it is lost) still uses the proxy.
    let mut events = framework.connection_events();
    proxy.black_hole(Duration::from_secs(4));
    lost_then_reconnected(&mut events).await;
    assert_eq!(framework.ensemble_connect_string(), proxy.connect_string());
    within("create through the proxy", framework.create("/static-still-proxied")).await.expect("created");
    assert_eq!(within("connected server", framework.connected_server()).await, Some(proxy.local_address()));
    assert_eq!(watched_paths(&cluster, 0, &wchc_session(&framework)).await, Vec::<String>::new());
    close_all([framework, untracked]).await;
}

#[tokio::test]
async fn a_standalone_server_has_no_ensemble_to_follow() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let config = within("config", framework.ensemble_config(Deadline::after(STEP))).await.expect("config");
    assert!(config.client_addresses().is_empty(), "{config:?}");
    assert_eq!(framework.ensemble_connect_string(), server.connect_string());
    close_all([framework]).await;
}
