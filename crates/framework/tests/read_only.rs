//! Read-only mode on a real 3-member ensemble started with `readonlymode.enabled=true`: with two
//! members stopped, a framework that allows read-only servers (`can_be_read_only(true)`) is served
//! by the third, reports `ReadOnly`, reads, and has every write (a create, a conditional write, a
//! mutex acquire) refused at once with `Error::ReadOnly`; once a quorum is back it returns to a
//! read-write session and the acquire succeeds.

use std::time::{Duration, Instant};

use zk_recipes_framework::{ConditionalWrite, ConnectionState, Error, Framework};
use zk_recipes_mutex::{LockError, Mutex};
use zk_recipes_test_support::*;
use zk_recipes_testing::{ServerMode, TestingCluster};

/// How long a wait that spans an election, a JVM start or a member turning read-only may take.
const LONG_STEP: Duration = Duration::from_secs(120);
/// A refused write must come back well under the acquire's own timeout.
const FAST: Duration = Duration::from_secs(3);

/// Waits until the framework reports `state` (from the events, or already now).
async fn until(framework: &Framework, state: ConnectionState) {
    let mut events = framework.connection_events();
    within_for(LONG_STEP, &format!("{state:?}"), async {
        if framework.current().state == Some(state) {
            return;
        }
        while let Some(update) = events.next().await {
            if update.state() == state {
                return;
            }
        }
        panic!("the framework closed");
    })
    .await;
}

#[tokio::test]
async fn a_read_only_server_serves_reads_and_refuses_writes_fast_until_a_quorum_returns() {
    init_tracing();
    let mut cluster =
        within_for(SERVER_START, "ensemble start", TestingCluster::builder().read_only_mode(true).start())
            .await
            .expect("ensemble");
    let framework = builder(&cluster.connect_string(), Duration::from_secs(4))
        .can_be_read_only(true)
        .start()
        .expect("framework");
    within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    within("parent", framework.ensure_path("/read-only", step())).await.expect("parent");
    within("create", framework.create("/read-only/config").data(b"v1".to_vec())).await.expect("create");

    within_for(LONG_STEP, "stop member 0", cluster.stop(0)).await.expect("stop");
    within_for(LONG_STEP, "stop member 1", cluster.stop(1)).await.expect("stop");
    // The last member, cut off from its quorum, turns read-only (after a pause of its own).
    within_for(LONG_STEP, "member 2 read-only", async {
        while !matches!(cluster.mode(2).await, Ok(ServerMode::ReadOnly)) {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await;
    until(&framework, ConnectionState::ReadOnly).await;

    // Reads work.
    let read = within("read", framework.get_data("/read-only/config", step())).await.expect("read");
    assert_eq!(read.data, b"v1");

    // A create through the node API is refused at once, typed, and changes nothing.
    let started = Instant::now();
    let refused = within("create", framework.create("/read-only/refused")).await.expect_err("read-only");
    assert!(matches!(refused, Error::ReadOnly), "{refused:?}");
    assert!(!refused.is_retryable());
    assert!(started.elapsed() < FAST, "refused after {:?}", started.elapsed());

    // A conditional write (sent once, outside the retry policy) is refused alike, both kinds.
    let read = within("read", framework.get_data("/read-only/config", step())).await.expect("read");
    for write in [ConditionalWrite::create(b"v2"), ConditionalWrite::set_if_unchanged(b"v2", &read.stat)] {
        let path = match write {
            ConditionalWrite::Create { .. } => "/read-only/refused-once",
            _ => "/read-only/config",
        };
        let started = Instant::now();
        let refused =
            within("write_once", framework.write_once(path, write, step())).await.expect_err("read-only");
        assert!(matches!(refused, Error::ReadOnly), "{write:?}: {refused:?}");
        assert!(started.elapsed() < FAST, "refused after {:?}", started.elapsed());
    }
    let unchanged = within("read", framework.get_data("/read-only/config", step())).await.expect("read");
    assert_eq!((unchanged.data, unchanged.stat.version), (b"v1".to_vec(), read.stat.version));

    // A mutex acquire (a protected create in lock-internals) fails fast with the same error.
    let mutex = Mutex::new(&framework, "/read-only/lock").expect("mutex");
    let started = Instant::now();
    let refused =
        within("acquire", mutex.lock_timeout(Duration::from_secs(15))).await.expect_err("read-only");
    assert!(matches!(refused, LockError::Framework(Error::ReadOnly)), "{refused:?}");
    assert!(!refused.is_retryable());
    assert!(started.elapsed() < FAST, "refused after {:?}", started.elapsed());
    assert!(children(&framework, "/read-only").await.iter().all(|child| child == "config"));

    // A quorum returns: back on a read-write session, the acquire succeeds.
    within_for(LONG_STEP, "restart member 0", cluster.restart(0)).await.expect("restart");
    within_for(LONG_STEP, "restart member 1", cluster.restart(1)).await.expect("restart");
    until(&framework, ConnectionState::Reconnected).await;
    let guard = within("acquire", mutex.lock_timeout(STEP)).await.expect("lock after recovery");
    assert_eq!(children(&framework, "/read-only/lock").await.len(), 1);
    within("release", guard.release()).await.expect("release");
    no_children_left(&framework, "/read-only/lock").await;
    close_all([framework]).await;
}
