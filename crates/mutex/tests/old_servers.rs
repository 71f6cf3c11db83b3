//! Servers before ZooKeeper 3.6 have no multi-read, and close the connection on one.
//! Batched writes read stats behind a batch with one: the framework must learn that the server
//! refuses it without ever costing a hold its connection.

use std::sync::{Arc, Mutex as SyncMutex};
use std::time::Duration;

use zk_recipes_framework::ConnectionState;
use zk_recipes_mutex::{Hold, Mutex};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, RequestMatch, TestingServer, SERVER_START};

/// The multi-read op code.
const MULTI_READ: i32 = 22;

#[tokio::test]
async fn a_server_without_multi_read_never_costs_a_hold_its_connection() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    proxy.refuse_requests(RequestMatch::op_codes([MULTI_READ]));
    let framework = builder(&proxy.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let session = within("session", framework.session(step())).await.expect("session").id();

    // Every transition from here on.
    let states = Arc::new(SyncMutex::new(Vec::new()));
    let recorder = {
        let (states, mut events) = (states.clone(), framework.connection_events());
        tokio::spawn(async move {
            while let Some(update) = events.next().await {
                states.lock().unwrap().push(update.state());
            }
        })
    };
    let held = Arc::new(
        within("lock", Mutex::new(&framework, "/old-server/held").expect("mutex").lock())
            .await
            .expect("held"),
    );
    let lost = {
        let held = held.clone();
        tokio::spawn(async move { held.lost().await })
    };

    let mut refused_after_first_round = None;
    for round in 0..3 {
        // 20 acquires at once on one session: their creates and deletes travel in batches.
        let mut acquires = tokio::task::JoinSet::new();
        for index in 0..20 {
            let framework = framework.clone();
            acquires.spawn(async move {
                let mutex =
                    Mutex::new(&framework, &format!("/old-server/{round}/lock-{index}")).expect("mutex");
                let guard = mutex.lock_timeout(STEP).await.expect("a batched acquire");
                guard.release().await.expect("release");
            });
        }
        within("20 batched acquires", async {
            while let Some(done) = acquires.join_next().await {
                done.expect("an acquire task");
            }
        })
        .await;
        if round == 0 {
            // The framework asked (a probe of its own) and heard the refusal.
            eventually("the multi-read was refused once", || async { proxy.stats().refused >= 1 }).await;
            refused_after_first_round = Some(proxy.stats().refused);
        }
    }
    assert_eq!(
        Some(proxy.stats().refused),
        refused_after_first_round,
        "learned once: no multi-read sent after the refusal"
    );
    assert!(!lost.is_finished(), "a hold was lost: {:?}", states.lock().unwrap());
    let seen = states.lock().unwrap().clone();
    assert!(
        !seen.iter().any(|state| matches!(state, ConnectionState::Suspended | ConnectionState::Lost)),
        "the session's connection dropped: {seen:?}"
    );
    assert_eq!(within("session", framework.session(step())).await.expect("session").id(), session);
    lost.abort();
    recorder.abort();
    // The aborted task gives its guard back once it is gone.
    assert!(within("abort", lost).await.is_err_and(|err| err.is_cancelled()));
    let held = Arc::into_inner(held).expect("the only guard");
    within("release", held.release()).await.expect("release");
    within("close", framework.close()).await;
}
