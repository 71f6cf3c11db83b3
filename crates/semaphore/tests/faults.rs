//! The semaphore under faults, against a real ZooKeeper.

use std::time::Duration;

use zk_recipes_framework::ConnectionState;
use zk_recipes_semaphore::{LockError, Semaphore, SemaphoreError};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, RequestMatch, TestingServer};

/// a lease is created under the internal lock, so only on the internal lock's
/// session. If that session expires while the lease create is in flight, the acquire fails with
/// `NodeLost` and creates nothing on the next session; a lease created there anyway (outside the
/// internal lock) would leave a later acquirer waiting for ever while it keeps the internal lock.
#[tokio::test]
async fn a_lease_create_cut_off_by_expiry_creates_nothing_and_the_semaphore_moves_on() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let path = "/lease-after-expiry/semaphore";
    let leases_dir = format!("{path}/leases");
    let locks_dir = format!("{path}/locks");
    let cut_framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let holder_framework =
        builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let late_framework =
        builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("connect", cut_framework.block_until_connected(STEP)).await.expect("connected");
    let mut events = cut_framework.connection_events();
    let negotiated = cut_framework.current().session_timeout.expect("session");

    // The lease create (plain, or inside a multi) never reaches the server; the session expires.
    let held = proxy.black_hole_at_next_request(
        RequestMatch::op_codes([1, 14, 15, 19]).under(leases_dir.as_str()),
        negotiated * 3,
    );
    let cut_semaphore = Semaphore::new(&cut_framework, path, 1).expect("semaphore");
    let cut = tokio::spawn(async move { cut_semaphore.acquire().await });
    within("the lease create held back", held).await.expect("held");
    within("Lost", async {
        while let Some(update) = events.next().await {
            if update.state() == ConnectionState::Lost {
                return;
            }
        }
    })
    .await;
    eventually("the expired session's internal lock node is gone", || async {
        children(&holder_framework, &locks_dir).await.is_empty()
    })
    .await;

    let holder = Semaphore::new(&holder_framework, path, 1).expect("semaphore");
    let lease = within("the holder's lease", holder.acquire_timeout(STEP)).await.expect("lease");
    // The cut acquirer's framework opens a new session once the partition ends; by then its
    // acquire has either failed or (the flaw) queued a lease outside the internal lock.
    eventually("the cut acquire gave up, or created a lease on its new session", || async {
        cut.is_finished() || children(&holder_framework, &leases_dir).await.len() == 2
    })
    .await;

    let late = Semaphore::new(&late_framework, path, 1).expect("semaphore");
    let late = tokio::spawn(async move { late.acquire_timeout(Duration::from_secs(30)).await });
    within("release", lease.release()).await.expect("release");
    let late_lease = within_for(Duration::from_secs(40), "the late acquirer", late)
        .await
        .expect("task")
        .expect("a later acquirer gets the lease once the holder releases");
    let cut = within("the cut acquire", cut).await.expect("task");
    assert!(
        matches!(cut, Err(SemaphoreError::Lock(LockError::NodeLost { .. }))),
        "the acquire whose internal lock session was lost fails with NodeLost: {cut:?}"
    );
    assert_eq!(children(&holder_framework, &leases_dir).await.len(), 1, "only the late acquirer's lease");
    within("release", late_lease.release()).await.expect("release");
    for framework in [cut_framework, holder_framework, late_framework] {
        within("close", framework.close()).await;
    }
}
