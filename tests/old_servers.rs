//! A recipe that needs ZooKeeper 3.6 (persistent watches) on a server that plays 3.5: the fault
//! proxy refuses `addWatch` as a 3.5 server does (it closes the connection on the unknown op code),
//! and the recipe fails with the documented `Error::MissingFeature`, not with a hang or a
//! connection loss of the framework's own session.

use std::time::Duration;

use zk_recipes::barrier::{BarrierError, DistributedBarrier};
use zk_recipes::framework::{ConnectionState, Error as FrameworkError, Feature};
use zk_recipes_test_support::*;
use zk_recipes_testing::RequestMatch;

/// ZooKeeper's `addWatch` op code (3.6+).
const ADD_WATCH: i32 = 106;

#[tokio::test]
async fn a_barrier_on_a_server_without_persistent_watches_fails_with_missing_feature() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    proxy.refuse_requests(RequestMatch::op_codes([ADD_WATCH]));
    let before = framework.current();

    let barrier = DistributedBarrier::new(&framework, "/old-servers/barrier").expect("barrier");
    within("barrier set", barrier.set(step())).await.expect("set");
    let err = within("barrier wait", barrier.wait(step())).await.expect_err("no persistent watches");
    match &err {
        BarrierError::Framework(FrameworkError::MissingFeature {
            feature: Feature::PersistentWatches,
            ..
        }) => {}
        other => panic!("expected MissingFeature(PersistentWatches), got {other:?}"),
    }
    assert!(!err.is_retryable() && !err.is_timeout(), "{err}");
    assert!(proxy.stats().refused >= 1, "the probe asked the server and was refused");

    // The question cost the framework's own session nothing: still connected, on the same
    // session, with no transition since.
    let after = framework.current();
    assert_eq!(after.state, Some(ConnectionState::Connected));
    assert_eq!((after.session_id, after.generation), (before.session_id, before.generation));
    assert_eq!(after.since, before.since, "the framework's connection changed state");
    within("barrier remove", barrier.remove(step())).await.expect("remove");
    close_all([framework, observer]).await;
}
