//! `DistributedAtomicLong` / `DistributedAtomicValue` against a real ZooKeeper server: every
//! operation's semantics as Curator's, the encoding, missing and empty and corrupt nodes, typed
//! errors before anything is sent, concurrent increments from several sessions (exact, every post
//! value once), promotion to the lock, an increment whose reply is lost or whose request is held
//! back (applied at most once, and reported honestly), and an increment after a session expiry
//! (applied exactly once).

use std::collections::BTreeSet;
use std::time::Duration;

use zk_recipes_counter::{
    encode_long, CounterError, DistributedAtomicLong, DistributedAtomicValue, PromotedToLock,
};
use zk_recipes_framework::retry::{NoRetry, RetryNTimes};
use zk_recipes_framework::{Error as FrameworkError, Framework, ParentMode};
use zk_recipes_mutex::Mutex;
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, RequestMatch, TestingServer};

fn optimistic() -> RetryNTimes {
    RetryNTimes::new(20, Duration::from_millis(5))
}

#[tokio::test]
async fn every_operation_behaves_as_curators() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let counter = DistributedAtomicLong::new(&framework, "/atomic/a/n", optimistic()).expect("counter");

    // A missing node reads as 0, and never matches a compare-and-set (not even of 0).
    let got = within("get", counter.get(step())).await.expect("get");
    assert!(got.succeeded());
    assert_eq!((*got.pre_value(), *got.post_value()), (0, 0));
    let cas = within("cas", counter.compare_and_set(0, 5, step())).await.expect("cas");
    assert!(!cas.succeeded());
    assert_eq!(on_server(&framework, "/atomic/a/n").await, None);

    assert!(within("initialize", counter.initialize(5, step())).await.expect("initialize"));
    assert!(!within("initialize again", counter.initialize(6, step())).await.expect("initialize"));
    assert_eq!(on_server(&framework, "/atomic/a/n").await, Some((vec![0, 0, 0, 0, 0, 0, 0, 5], 0)));

    let cas = within("cas", counter.compare_and_set(5, 9, step())).await.expect("cas");
    assert!(cas.succeeded());
    assert_eq!((*cas.pre_value(), *cas.post_value()), (5, 9));
    let stale = within("cas", counter.compare_and_set(5, 10, step())).await.expect("cas");
    assert!(!stale.succeeded());
    assert_eq!((*stale.pre_value(), *stale.post_value()), (9, 0), "a failed operation's post value is 0");

    let set = within("try_set", counter.try_set(42, step())).await.expect("try_set");
    assert!(set.succeeded());
    assert_eq!((*set.pre_value(), *set.post_value()), (9, 42));
    assert_eq!(set.stats().optimistic_tries, 1);
    assert_eq!(set.stats().promoted_tries, 0);

    within("force_set", counter.force_set(-3, step())).await.expect("force_set");
    assert_eq!(
        on_server(&framework, "/atomic/a/n").await.map(|(data, _)| data),
        Some(vec![0xff; 7].into_iter().chain([0xfd]).collect())
    );
    let added = within("add", counter.add(10, step())).await.expect("add");
    assert_eq!((*added.pre_value(), *added.post_value()), (-3, 7));
    let subtracted = within("subtract", counter.subtract(2, step())).await.expect("subtract");
    assert_eq!(*subtracted.post_value(), 5);
    assert_eq!(*within("increment", counter.increment(step())).await.expect("increment").post_value(), 6);
    assert_eq!(*within("decrement", counter.decrement(step())).await.expect("decrement").post_value(), 5);
    assert_eq!(*within("get", counter.get(step())).await.expect("get").pre_value(), 5);

    // force_set and an increment of a missing node create it, parents as containers.
    let fresh = DistributedAtomicLong::new(&framework, "/atomic/b/c/n", optimistic()).expect("counter");
    let first = within("increment", fresh.increment(step())).await.expect("increment");
    assert!(first.succeeded());
    assert_eq!((*first.pre_value(), *first.post_value()), (0, 1));
    let forced = DistributedAtomicLong::new(&framework, "/atomic/d/e/n", optimistic()).expect("counter");
    within("force_set", forced.force_set(8, step())).await.expect("force_set");
    assert_eq!(on_server(&framework, "/atomic/d/e/n").await, Some((vec![0, 0, 0, 0, 0, 0, 0, 8], 0)));
    within("delete", framework.delete("/atomic/b/c/n")).await.expect("delete");
    eventually("the emptied container parents reaped", || async {
        framework.exists("/atomic/b", step()).await.expect("exists").is_none()
    })
    .await;
    within("close", framework.close()).await;
}

#[tokio::test]
async fn empty_data_is_zero_short_data_is_corrupt_and_long_data_is_truncated() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let create = |path: &'static str, data: Vec<u8>| {
        framework.create(path).data(data).creating_parents(ParentMode::Persistent)
    };
    within("create", create("/atomic/empty", Vec::new())).await.expect("create");
    within("create", create("/atomic/short", vec![1, 2, 3])).await.expect("create");
    within("create", create("/atomic/long", vec![0, 0, 0, 0, 0, 0, 0, 4, 9])).await.expect("create");

    let empty = DistributedAtomicLong::new(&framework, "/atomic/empty", optimistic()).expect("counter");
    assert_eq!(*within("get", empty.get(step())).await.expect("get").pre_value(), 0);
    let incremented = within("increment", empty.increment(step())).await.expect("increment");
    assert_eq!((*incremented.pre_value(), *incremented.post_value()), (0, 1));

    let short = DistributedAtomicLong::new(&framework, "/atomic/short", optimistic()).expect("counter");
    let corrupt = within("get", short.get(step())).await;
    assert!(
        matches!(&corrupt, Err(CounterError::CorruptData { data, .. }) if data == &[1, 2, 3]),
        "{corrupt:?}"
    );
    let corrupt = within("increment", short.increment(step())).await;
    assert!(matches!(corrupt, Err(CounterError::CorruptData { .. })), "{corrupt:?}");
    assert_eq!(on_server(&framework, "/atomic/short").await, Some((vec![1, 2, 3], 0)), "left alone");

    let long = DistributedAtomicLong::new(&framework, "/atomic/long", optimistic()).expect("counter");
    let incremented = within("increment", long.increment(step())).await.expect("increment");
    assert_eq!((*incremented.pre_value(), *incremented.post_value()), (4, 5));

    // The bytes-level value: None for a missing node, the bytes otherwise.
    let bytes = DistributedAtomicValue::new(&framework, "/atomic/bytes", NoRetry).expect("value");
    assert_eq!(within("get", bytes.get(step())).await.expect("get").pre_value(), &None);
    let set = within("try_set", bytes.try_set(b"hello", step())).await.expect("try_set");
    assert!(set.succeeded());
    assert_eq!(set.post_value().as_deref(), Some(&b"hello"[..]));
    let swapped = within("cas", bytes.compare_and_set(b"hello", b"world", step())).await.expect("cas");
    assert_eq!(swapped.pre_value().as_deref(), Some(&b"hello"[..]));
    assert!(swapped.succeeded());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn bad_input_fails_with_a_typed_error_before_anything_is_written() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(20)).start().expect("framework");
    within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    let before = proxy.stats().writes_to_server;

    let invalid = DistributedAtomicLong::new(&framework, "/atomic//x", NoRetry);
    assert!(
        matches!(invalid, Err(CounterError::Framework(FrameworkError::InvalidPath { .. }))),
        "{invalid:?}"
    );
    let root = DistributedAtomicValue::new(&framework, "/", NoRetry);
    assert!(matches!(root, Err(CounterError::InvalidArgument(_))), "{root:?}");
    let lock = DistributedAtomicLong::new(&framework, "/atomic/x", NoRetry)
        .expect("counter")
        .promoted_to_lock(PromotedToLock::new("bad lock path"));
    assert!(matches!(lock, Err(CounterError::Lock(_))), "{lock:?}");
    let value = DistributedAtomicValue::new(&framework, "/atomic/x", NoRetry).expect("value");
    let huge = vec![1u8; 2 << 20];
    let set = value.try_set(&huge, step()).await;
    assert!(matches!(set, Err(CounterError::Framework(FrameworkError::DataTooLarge { .. }))), "{set:?}");
    let forced = value.force_set(&huge, step()).await;
    assert!(
        matches!(forced, Err(CounterError::Framework(FrameworkError::DataTooLarge { .. }))),
        "{forced:?}"
    );
    let initialized = value.initialize(&huge, step()).await;
    assert!(matches!(initialized, Err(CounterError::Framework(FrameworkError::DataTooLarge { .. }))));
    let cas = value.compare_and_set(b"a", &huge, step()).await;
    assert!(matches!(cas, Err(CounterError::Framework(FrameworkError::DataTooLarge { .. }))), "{cas:?}");

    assert_eq!(proxy.stats().writes_to_server, before, "bad input wrote something");
    within("close", framework.close()).await;
}

/// Increments `per_task` times; every result must have succeeded. Returns the post values.
async fn increments(counter: DistributedAtomicLong, per_task: usize) -> Vec<(i64, u32)> {
    let mut posts = Vec::with_capacity(per_task);
    for _ in 0..per_task {
        let result = counter.increment(step()).await.expect("increment");
        assert!(result.succeeded(), "{result:?}");
        assert_eq!(*result.post_value(), *result.pre_value() + 1);
        posts.push((*result.post_value(), result.stats().promoted_tries));
    }
    posts
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_increments_from_several_sessions_are_exact() {
    init_tracing();
    let (server, observer) = server_and_framework().await;
    const SESSIONS: usize = 4;
    const TASKS_PER_SESSION: usize = 2;
    const PER_TASK: usize = 40;
    let frameworks: Vec<Framework> = (0..SESSIONS)
        .map(|_| builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework"))
        .collect();
    let mut tasks = Vec::new();
    for framework in &frameworks {
        for _ in 0..TASKS_PER_SESSION {
            // No optimistic retry: a lost race goes straight to the lock, retried there.
            let counter = DistributedAtomicLong::new(framework, "/atomic/hot/n", NoRetry)
                .expect("counter")
                .promoted_to_lock(
                    PromotedToLock::new("/atomic/hot/lock")
                        .retry_policy(RetryNTimes::new(1_000, Duration::from_millis(2))),
                )
                .expect("promoted");
            tasks.push(tokio::spawn(increments(counter, PER_TASK)));
        }
    }
    let mut posts = Vec::new();
    for task in tasks {
        posts.extend(within_for(STEP * 6, "increments", task).await.expect("task"));
    }
    let total = (SESSIONS * TASKS_PER_SESSION * PER_TASK) as i64;
    let distinct: BTreeSet<i64> = posts.iter().map(|(post, _)| *post).collect();
    assert_eq!(distinct, (1..=total).collect::<BTreeSet<_>>(), "every post value exactly once");
    let promoted = posts.iter().filter(|(_, promoted_tries)| *promoted_tries > 0).count();
    assert!(promoted > 0, "with 8 contenders and no optimistic retry some increments were promoted");
    let counter = DistributedAtomicLong::new(&observer, "/atomic/hot/n", NoRetry).expect("counter");
    assert_eq!(*within("get", counter.get(step())).await.expect("get").pre_value(), total);
    assert!(children(&observer, "/atomic/hot/lock").await.is_empty(), "no lock node left behind");
    for framework in frameworks {
        within("close", framework.close()).await;
    }
    within("close", observer.close()).await;
}

#[tokio::test]
async fn a_promoted_increment_waits_at_most_the_max_lock_time() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let holder = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mutex = Mutex::new(&holder, "/atomic/held/lock").expect("mutex");
    let guard = within("lock", mutex.lock()).await.expect("lock");
    let counter = DistributedAtomicLong::new(&framework, "/atomic/held/n", NoRetry)
        .expect("counter")
        .promoted_to_lock(PromotedToLock::new("/atomic/held/lock").max_lock_time(Duration::from_millis(300)));
    let counter = counter.expect("promoted");
    // Many contenders on the node make optimistic tries lose; the lock is held elsewhere, so every
    // promoted one gives up after the max lock time and reports not succeeded.
    let mut tasks = Vec::new();
    for _ in 0..6 {
        let counter = counter.clone();
        tasks.push(tokio::spawn(async move {
            let mut outcomes = Vec::new();
            for _ in 0..15 {
                outcomes.push(counter.increment(step()).await.expect("increment"));
            }
            outcomes
        }));
    }
    let mut outcomes = Vec::new();
    for task in tasks {
        outcomes.extend(within_for(STEP * 3, "increments", task).await.expect("task"));
    }
    let failed: Vec<_> = outcomes.iter().filter(|outcome| !outcome.succeeded()).collect();
    assert!(!failed.is_empty(), "some optimistic tries lost and could not take the lock");
    for outcome in &failed {
        let stats = outcome.stats();
        assert_eq!((stats.optimistic_tries, stats.promoted_tries), (1, 0), "{stats:?}");
        assert!(stats.promoted_time >= Duration::from_millis(300), "{stats:?}");
    }
    let succeeded = outcomes.iter().filter(|outcome| outcome.succeeded()).count() as i64;
    let total = DistributedAtomicLong::new(&framework, "/atomic/held/n", NoRetry).expect("counter");
    assert_eq!(
        *within("get", total.get(step())).await.expect("get").pre_value(),
        succeeded,
        "only successes count"
    );
    within("release", guard.release()).await.expect("release");
    within("close", framework.close()).await;
    within("close", holder.close()).await;
}

#[tokio::test]
async fn an_increment_whose_reply_is_lost_is_never_applied_twice() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    let counter = DistributedAtomicLong::new(&framework, "/atomic/cut/n", optimistic()).expect("counter");
    assert!(within("increment", counter.increment(step())).await.expect("increment").succeeded());

    // The set reaches the server and commits; its reply is dropped with the connection.
    let cut = proxy.cut_after_next_reply(RequestMatch::set_data().under("/atomic/cut/n"));
    let outcome = within("increment", counter.increment(step())).await;
    assert_eq!(within("cut", cut).await.expect("cut").server_error, 0, "committed");
    assert!(
        matches!(&outcome, Err(CounterError::OutcomeUnknown { likely_applied: true, .. })),
        "honest: unknown, likely applied; got {outcome:?}"
    );
    assert_eq!(on_server(&observer, "/atomic/cut/n").await, Some((vec![0, 0, 0, 0, 0, 0, 0, 2], 1)), "once");

    // The same through the first create of a fresh node.
    let fresh = DistributedAtomicLong::new(&framework, "/atomic/cut/fresh", optimistic()).expect("counter");
    let cut = proxy.cut_after_next_reply(RequestMatch::create().under("/atomic/cut/fresh"));
    let outcome = within("increment", fresh.increment(step())).await;
    within("cut", cut).await.expect("cut");
    assert!(
        matches!(&outcome, Err(CounterError::OutcomeUnknown { likely_applied: true, .. })),
        "{outcome:?}"
    );
    assert_eq!(on_server(&observer, "/atomic/cut/fresh").await, Some((vec![0, 0, 0, 0, 0, 0, 0, 1], 0)));
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn an_increment_held_back_by_a_partition_is_applied_exactly_once() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(4)).await;
    let counter =
        DistributedAtomicLong::new(&framework, "/atomic/held-back/n", optimistic()).expect("counter");
    within("initialize", counter.initialize(10, step())).await.expect("initialize");

    let held = proxy.black_hole_at_next_request(
        RequestMatch::set_data().under("/atomic/held-back"),
        Duration::from_millis(800),
    );
    let result = within("increment", counter.increment(step())).await.expect("resolved and sent again");
    within("held", held).await.expect("held");
    assert!(result.succeeded());
    assert_eq!((*result.pre_value(), *result.post_value()), (10, 11));
    assert_eq!(result.stats().optimistic_tries, 1, "one try: the resend is part of it");
    assert_eq!(on_server(&observer, "/atomic/held-back/n").await, Some((vec![0, 0, 0, 0, 0, 0, 0, 11], 1)));

    // The same for initialize: held back, then created exactly once and reported as created.
    let fresh =
        DistributedAtomicLong::new(&framework, "/atomic/held-back/fresh", optimistic()).expect("counter");
    let held = proxy.black_hole_at_next_request(
        RequestMatch::create().under("/atomic/held-back/fresh"),
        Duration::from_millis(800),
    );
    assert!(within("initialize", fresh.initialize(3, step())).await.expect("initialize"));
    within("held", held).await.expect("held");
    assert_eq!(
        on_server(&observer, "/atomic/held-back/fresh").await,
        Some((vec![0, 0, 0, 0, 0, 0, 0, 3], 0))
    );
    close_all([framework, observer]).await;
}

/// Across a session expiry: the counter is not tied to a session (only the promoted lock's node
/// is), so once the framework has a new session an increment applies exactly once, on top of what
/// another client wrote while ours was gone.
#[tokio::test]
async fn an_increment_after_a_session_expiry_applies_exactly_once() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(2)).await;
    let promoted = || PromotedToLock::new("/atomic/expiry/lock").max_lock_time(STEP);
    let counter = DistributedAtomicLong::new(&framework, "/atomic/expiry/n", optimistic())
        .expect("counter")
        .promoted_to_lock(promoted())
        .expect("promoted");
    within("initialize", counter.initialize(10, step())).await.expect("initialize");
    let incremented = within("increment", counter.increment(step())).await.expect("increment");
    assert_eq!((*incremented.pre_value(), *incremented.post_value()), (10, 11));

    // Our session expires (its connection black-holed past the session timeout); meanwhile
    // another client increments.
    let expired = framework.current().session_id.expect("a session");
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    let other = DistributedAtomicLong::new(&observer, "/atomic/expiry/n", optimistic())
        .expect("counter")
        .promoted_to_lock(promoted())
        .expect("promoted");
    let theirs = within("their increment", other.increment(step())).await.expect("increment");
    assert_eq!((*theirs.pre_value(), *theirs.post_value()), (11, 12));
    lost_then_reconnected(&mut events).await;
    assert_ne!(framework.current().session_id, Some(expired), "a new session");

    let ours = within("increment on the new session", counter.increment(step())).await.expect("increment");
    assert!(ours.succeeded(), "{ours:?}");
    assert_eq!((*ours.pre_value(), *ours.post_value()), (12, 13));
    // Created, then written three times (ours, theirs, ours): exactly once each.
    assert_eq!(on_server(&observer, "/atomic/expiry/n").await, Some((encode_long(13).to_vec(), 3)));
    assert_eq!(*within("get", counter.get(step())).await.expect("get").pre_value(), 13);
    assert!(children(&observer, "/atomic/expiry/lock").await.is_empty(), "no lock node left behind");
    close_all([framework, observer]).await;
}
