//! The mutex under faults and at scale, against real ZooKeeper servers.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{path, ConnectionState, Deadline, Framework};
use zk_recipes_mutex::{Hold, LockError, Mutex, MutexGuard, TransactionOp};
use zk_recipes_test_support::*;
use zk_recipes_testing::{
    capture_warnings, four_letter_word, parse_mntr, FaultProxy, RequestMatch, TestingCluster, TestingServer,
};

/// Inside the critical section: an ephemeral marker that must not exist yet (or only as ours,
/// when a connection loss hid the reply to our own create).
async fn enter(framework: &Framework, marker: &str) -> bool {
    let token = format!("{:?}", std::thread::current().id()) + &fastrand_token();
    let token = token.as_bytes();
    framework
        .retry(Deadline::after(STEP), |session| async move {
            let options = session.create_options(CreateMode::Ephemeral);
            match session.client().create(marker, token, &options).await {
                Ok(_) => Ok(true),
                Err(zookeeper_client::Error::NodeExists) => {
                    let (data, _) = session.client().get_data(marker).await?;
                    Ok(data == token)
                }
                Err(err) => Err(err.into()),
            }
        })
        .await
        .expect("marker")
}

fn fastrand_token() -> String {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    NEXT.fetch_add(1, Ordering::SeqCst).to_string()
}

async fn leave(framework: &Framework, marker: &str) {
    framework
        .retry(Deadline::after(STEP), |session| async move {
            match session.client().delete(marker, None).await {
                Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                Err(err) => Err(err.into()),
            }
        })
        .await
        .expect("delete marker");
}

#[tokio::test]
async fn a_server_restart_with_a_holder_and_waiters_never_makes_two_holders() {
    init_tracing();
    let mut server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let session_timeout = Duration::from_secs(12);
    let inside = Arc::new(AtomicU32::new(0));
    let most_inside = Arc::new(AtomicU32::new(0));
    let holder_framework = builder(&server.connect_string(), session_timeout).start().expect("framework");
    let holder = within("lock", Mutex::new(&holder_framework, "/restart/lock").expect("mutex").lock())
        .await
        .expect("lock");
    inside.fetch_add(1, Ordering::SeqCst);
    most_inside.store(1, Ordering::SeqCst);

    let mut waiters = Vec::new();
    for _ in 0..3 {
        let framework = builder(&server.connect_string(), session_timeout).start().expect("framework");
        let (inside, most_inside) = (inside.clone(), most_inside.clone());
        waiters.push(tokio::spawn(async move {
            let guard = Mutex::new(&framework, "/restart/lock")
                .expect("mutex")
                .lock_timeout(Duration::from_secs(60))
                .await
                .expect("every waiter acquires eventually");
            let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
            most_inside.fetch_max(now, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(20)).await;
            inside.fetch_sub(1, Ordering::SeqCst);
            guard.release().await.expect("release");
            framework.close().await;
        }));
    }
    eventually("the waiters queued", || async {
        Mutex::new(&holder_framework, "/restart/lock")
            .expect("mutex")
            .participants()
            .await
            .map(|participants| participants.len() == 4)
            .unwrap_or(false)
    })
    .await;

    within("stop", server.stop()).await.expect("stop");
    within("restart", server.restart()).await.expect("restart");
    within("holder reconnects", holder_framework.block_until_connected(STEP)).await.expect("reconnected");
    inside.fetch_sub(1, Ordering::SeqCst);
    within("release", holder.release()).await.expect("the holder's session and node survived");
    for waiter in waiters {
        within_for(Duration::from_secs(90), "waiter", waiter).await.expect("waiter task");
    }
    assert_eq!(most_inside.load(Ordering::SeqCst), 1, "never two holders");
    within("close", holder_framework.close()).await;
}

#[tokio::test]
async fn exclusion_holds_when_the_ensemble_leader_is_killed_mid_contention() {
    init_tracing();
    let mut cluster = within_for(SERVER_START, "cluster", TestingCluster::start(3)).await.expect("cluster");
    let violations = Arc::new(AtomicU32::new(0));
    let acquisitions = Arc::new(AtomicU32::new(0));
    let mut contenders = Vec::new();
    for _ in 0..3 {
        let framework =
            builder(&cluster.connect_string(), Duration::from_secs(15)).start().expect("framework");
        let (violations, acquisitions) = (violations.clone(), acquisitions.clone());
        contenders.push(tokio::spawn(async move {
            let mutex = Mutex::new(&framework, "/ensemble/lock").expect("mutex");
            for _ in 0..40 {
                let guard = mutex.lock_timeout(Duration::from_secs(60)).await.expect("lock");
                if !enter(&framework, "/ensemble/marker").await {
                    violations.fetch_add(1, Ordering::SeqCst);
                }
                tokio::time::sleep(Duration::from_millis(2)).await;
                leave(&framework, "/ensemble/marker").await;
                acquisitions.fetch_add(1, Ordering::SeqCst);
                guard.release().await.expect("release");
            }
            framework.close().await;
        }));
    }
    eventually("contention is under way", || async { acquisitions.load(Ordering::SeqCst) >= 20 }).await;
    let killed = within("kill leader", cluster.kill_leader()).await.expect("kill leader");
    for contender in contenders {
        within_for(Duration::from_secs(120), "contender", contender).await.expect("contender task");
    }
    assert_eq!(violations.load(Ordering::SeqCst), 0, "two holders at once");
    assert_eq!(acquisitions.load(Ordering::SeqCst), 120);
    let leader = within("leader", cluster.leader_index()).await.expect("a leader");
    assert_ne!(leader, killed);
}

/// Queues `waiters` lock calls on one session behind a holder, then releases one holder at a
/// time. Returns the sequence numbers in acquisition order and the server's packet counts per
/// hand-off.
async fn hand_offs(
    server: &TestingServer,
    dir: &str,
    waiters: usize,
    measured: usize,
) -> (Vec<i32>, Vec<u64>) {
    let framework = builder(&server.connect_string(), Duration::from_secs(30)).start().expect("framework");
    let mutex = Mutex::new(&framework, dir).expect("mutex");
    let mut current = within("first lock", mutex.lock()).await.expect("lock");
    let (sender, mut receiver) = tokio::sync::mpsc::unbounded_channel::<MutexGuard>();
    for index in 0..waiters {
        let (waiter, sender) = (mutex.clone(), sender.clone());
        tokio::spawn(async move {
            let guard = waiter.lock_timeout(Duration::from_secs(120)).await.expect("lock");
            let _ = sender.send(guard);
        });
        if index % 100 == 99 || index + 1 == waiters {
            let expected = index + 2;
            eventually("waiters queued", || async {
                mutex.participants().await.map(|participants| participants.len() == expected).unwrap_or(false)
            })
            .await;
        }
    }
    let mut order = Vec::with_capacity(waiters);
    let mut packets = Vec::new();
    for hand_off in 0..waiters {
        let before = packet_count(server).await;
        within("release", current.release()).await.expect("release");
        current = within_for(Duration::from_secs(60), "next holder", receiver.recv()).await.expect("a guard");
        if hand_off < measured {
            packets.push(packet_count(server).await - before);
        }
        let name = path::name(current.node_path());
        order.push(path::sequence_after(name, "lock-").expect("sequence"));
    }
    within("release", current.release()).await.expect("release");
    within("close", framework.close()).await;
    (order, packets)
}

async fn packet_count(server: &TestingServer) -> u64 {
    let mntr = within("mntr", server.mntr()).await.expect("mntr");
    let count = |key: &str| mntr.get(key).and_then(|value| value.parse::<u64>().ok()).expect(key);
    count("zk_packets_received") + count("zk_packets_sent")
}

fn median(mut values: Vec<u64>) -> u64 {
    values.sort_unstable();
    values[values.len() / 2]
}

#[tokio::test]
async fn a_thousand_waiters_on_one_session_are_woken_one_per_release_in_order() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let (small_order, small_packets) = hand_offs(&server, "/herd/ten", 10, 7).await;
    let (large_order, large_packets) =
        within_for(Duration::from_secs(240), "1,000 waiters", hand_offs(&server, "/herd/thousand", 1_000, 7))
            .await;
    for order in [&small_order, &large_order] {
        assert!(order.windows(2).all(|pair| pair[0] < pair[1]), "acquired in node-sequence order");
    }
    assert_eq!(large_order.len(), 1_000);
    let (small, large) = (median(small_packets.clone()), median(large_packets.clone()));
    assert_eq!(
        small, large,
        "server packets per hand-off must not grow with the number of waiters: 10 waiters {small_packets:?}, \
         1,000 waiters {large_packets:?}"
    );
}

/// A holder of `path` on a direct connection, and a waiter's framework (2 s sessions) behind a
/// fault proxy, connected: for the tests of a waiter's outages.
struct OutageSetup {
    server: TestingServer,
    proxy: FaultProxy,
    holder_framework: Framework,
    waiter_framework: Framework,
    holder: MutexGuard,
}

impl OutageSetup {
    async fn start(path: &str) -> OutageSetup {
        init_tracing();
        let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
        let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
        let holder_framework =
            builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
        let waiter_framework =
            builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
        let holder =
            within("lock", Mutex::new(&holder_framework, path).expect("mutex").lock()).await.expect("lock");
        within("connect", waiter_framework.block_until_connected(STEP)).await.expect("connected");
        OutageSetup { server, proxy, holder_framework, waiter_framework, holder }
    }

    /// The end of a test whose waiter's session is lost while the server is out of reach: the
    /// waiter has failed with `NodeLost` before the server could be reached again, and once it
    /// can, the waiter's node is gone (its session expired on the server).
    async fn expect_node_lost_while_unreachable(
        self,
        path: &str,
        waiter: tokio::task::JoinHandle<Result<MutexGuard, LockError>>,
    ) {
        let result = within("the waiter's answer, while unreachable", waiter).await.expect("task");
        assert!(matches!(result, Err(LockError::NodeLost { .. })), "{result:?}");
        assert!(self.proxy.is_black_holed(), "answered before the server could be reached");

        self.proxy.heal();
        eventually("the expired waiter's node gone", || async {
            children(&self.holder_framework, path).await.len() == 1
        })
        .await;
        within("release", self.holder.release()).await.expect("release");
        within("close", self.waiter_framework.close()).await;
        within("close", self.holder_framework.close()).await;
    }
}

/// a `Lost` of an earlier session, buffered while an acquire waited for a
/// connection, must not fail that acquire once its node is queued on the new session.
#[tokio::test]
async fn a_lost_of_an_earlier_session_does_not_fail_an_acquire_queued_on_the_new_one() {
    let path = "/stale-lost/lock";
    let OutageSetup { server: _server, proxy, holder_framework, waiter_framework, holder } =
        OutageSetup::start(path).await;
    let mut events = waiter_framework.connection_events();
    let negotiated = waiter_framework.current().session_timeout.expect("session");

    // The outage begins: the acquire starts while the connection is suspended.
    proxy.black_hole(negotiated * 3);
    eventually("suspended", || async {
        waiter_framework.current().state == Some(ConnectionState::Suspended)
    })
    .await;
    let waiter_mutex = Mutex::new(&waiter_framework, path).expect("mutex");
    let waiter = tokio::spawn(async move { waiter_mutex.lock_timeout(Duration::from_secs(60)).await });
    lost_then_reconnected(&mut events).await;
    eventually("the waiter queued behind the holder on its new session (or gave up)", || async {
        waiter.is_finished() || children(&holder_framework, path).await.len() == 2
    })
    .await;
    if waiter.is_finished() {
        let result = within("result", waiter).await.expect("task");
        panic!("the waiter, queued on its new session, must go on waiting: {result:?}");
    }

    within("release", holder.release()).await.expect("release");
    let guard = within("the waiter's turn", waiter).await.expect("task").expect("the waiter acquires");
    within("release", guard.release()).await.expect("release");
    within("close", waiter_framework.close()).await;
    within("close", holder_framework.close()).await;
}

/// A waiter whose session is lost while it waits fails with `NodeLost` once the session is
/// declared lost, while the server is still out of reach (so no reply or watch event of the
/// server's can tell it), and leaves no node once the server has expired the session.
#[tokio::test]
async fn a_waiter_fails_with_node_lost_when_its_session_is_lost_while_the_server_is_unreachable() {
    let path = "/lost-while-waiting/lock";
    let setup = OutageSetup::start(path).await;
    let waiter_mutex = Mutex::new(&setup.waiter_framework, path).expect("mutex");
    let waiter = tokio::spawn(async move { waiter_mutex.lock().await });
    // Waiting: its node is queued and its watch on the holder's node is set. (A node merely
    // listed may still have its create's reply on the way: an acquire whose create's reply is
    // lost goes on to the next session, as Curator's does, and the test below covers the watch.)
    eventually("the waiter queued and watching", || async {
        let watching = setup.server.watches().await.expect("wchc");
        children(&setup.holder_framework, path).await.len() == 2
            && watching.values().flatten().any(|watched| watched == setup.holder.node_path())
    })
    .await;
    let mut events = setup.waiter_framework.connection_events();

    // Out of reach for far longer than the test waits: no reply or watch event from the server
    // can tell the waiter; only the client's and the framework's own timers can.
    setup.proxy.black_hole(Duration::from_secs(600));
    until_state(&mut events, ConnectionState::Lost).await;
    setup.expect_node_lost_while_unreachable(path, waiter).await;
}

/// The interleaving behind an intermittent failure of the test above, made certain: the server
/// goes silent just as the waiter sends the request that sets its watch, so that request is lost
/// with the connection and the waiter is between two server calls when its session is declared
/// lost. It must fail with `NodeLost` then, not wait for a session that cannot come.
#[tokio::test]
async fn a_waiter_whose_watch_request_is_lost_with_the_connection_fails_with_node_lost_while_unreachable() {
    let path = "/lost-while-watching/lock";
    let setup = OutageSetup::start(path).await;
    let mut events = setup.waiter_framework.connection_events();
    // 4: getData, the waiter's watch on the node it waits behind.
    let held = setup
        .proxy
        .black_hole_at_next_request(RequestMatch::op_codes([4]).under(path), Duration::from_secs(600));
    let waiter_mutex = Mutex::new(&setup.waiter_framework, path).expect("mutex");
    let waiter = tokio::spawn(async move { waiter_mutex.lock().await });
    let watched = within("the watch request reached the black hole", held).await.expect("held");
    assert_eq!(watched.path, setup.holder.node_path(), "the waiter watches the holder");

    until_state(&mut events, ConnectionState::Lost).await;
    setup.expect_node_lost_while_unreachable(path, waiter).await;
}

/// A holder listening for a revocation request learns that its session is lost (`NodeLost`)
/// once the framework declares it lost, while the server is still out of reach: it does not wait
/// for a session that cannot come.
#[tokio::test]
async fn a_holder_listening_for_revocation_fails_with_node_lost_when_its_session_is_lost_while_unreachable() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let mutex = Mutex::new(&framework, "/revocation-while-lost/lock").expect("mutex").make_revocable();
    let guard = within("lock", mutex.lock()).await.expect("lock");
    let mut events = framework.connection_events();

    proxy.black_hole(Duration::from_secs(600));
    let listening = tokio::spawn(async move {
        let asked = guard.revocation_requested().await;
        (asked, guard)
    });
    until_state(&mut events, ConnectionState::Lost).await;
    let (asked, guard) = within("the holder's answer, while unreachable", listening).await.expect("task");
    assert!(matches!(asked, Err(LockError::NodeLost { .. })), "{asked:?}");
    assert!(proxy.is_black_holed(), "answered before the server could be reached");
    drop(guard);
    proxy.heal();
    within("close", framework.close()).await;
}

/// A guarded write of a holder whose session was lost while the server is out of reach fails
/// with `NodeLost` at once: it neither waits for its deadline nor runs on a later session.
#[tokio::test]
async fn a_guarded_write_after_the_session_is_lost_fails_with_node_lost_while_unreachable() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let mutex = Mutex::new(&framework, "/guarded-while-lost/lock").expect("mutex");
    let guard = within("lock", mutex.lock()).await.expect("lock");
    let mut events = framework.connection_events();

    proxy.black_hole(Duration::from_secs(600));
    until_state(&mut events, ConnectionState::Lost).await;
    let ops = [TransactionOp::Create {
        path: "/guarded-while-lost/written".into(),
        data: b"late".to_vec(),
        mode: CreateMode::Persistent,
    }];
    // A deadline well inside the test's step: before the fix, the write waited for it.
    let written =
        within("the write's answer", guard.write_guarded(&ops, Deadline::after(Duration::from_secs(10))))
            .await;
    assert!(matches!(written, Err(LockError::NodeLost { .. })), "{written:?}");
    assert!(proxy.is_black_holed(), "answered before the server could be reached");
    drop(guard);
    proxy.heal();
    within("close", framework.close()).await;
    let observer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let written = children(&observer, "/guarded-while-lost").await;
    assert!(!written.iter().any(|name| name == "written"), "nothing was written: {written:?}");
    within("close", observer.close()).await;
}

/// two reentered guards released at once from two threads: exactly one of them
/// awaits the delete, so the node is gone (not merely handed to the cleanup worker) when both
/// calls have returned.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_reentered_guards_released_at_once_await_the_delete_exactly_once() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mutex = Mutex::new(&framework, "/concurrent-release/lock").expect("mutex");
    let runtime = tokio::runtime::Handle::current();
    for round in 0..300 {
        let first = within("lock", mutex.lock()).await.expect("lock");
        let second = first.reenter();
        let node = first.node_path().to_owned();
        let ready = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let releases: Vec<_> = [first, second]
            .into_iter()
            .map(|guard| {
                let (runtime, ready) = (runtime.clone(), ready.clone());
                std::thread::spawn(move || {
                    // Both threads spin until both are here, then release together.
                    ready.fetch_add(1, Ordering::SeqCst);
                    while ready.load(Ordering::SeqCst) < 2 {
                        std::hint::spin_loop();
                    }
                    runtime.block_on(guard.release())
                })
            })
            .collect();
        let results: Vec<_> = within("both releases", async {
            let mut results = Vec::new();
            for release in releases {
                results.push(
                    tokio::task::spawn_blocking(move || release.join()).await.expect("join").expect("thread"),
                );
            }
            results
        })
        .await;
        let handed_over = framework.pending_cleanups();
        let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
        let exists = within("check", session.client().check_stat(&node)).await.expect("check").is_some();
        assert!(results.iter().all(Result::is_ok), "round {round}: {results:?}");
        assert!(
            handed_over == 0 && !exists,
            "round {round}: the last release must await the delete itself (cleanups handed over: {handed_over}, node exists: {exists})"
        );
    }
    within("close", framework.close()).await;
}

/// releasing a hold whose session is gone runs on no other session: it reports
/// `NodeLost`, once, from the guard that was last.
#[tokio::test]
async fn releasing_a_hold_whose_session_was_lost_reports_node_lost_once() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let first = within("lock", Mutex::new(&framework, "/release-lost/lock").expect("mutex").lock())
        .await
        .expect("lock");
    let second = first.reenter();
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    lost_then_reconnected(&mut events).await;
    let (first, second) =
        within("both releases", async { tokio::join!(first.release(), second.release()) }).await;
    let lost =
        [&first, &second].iter().filter(|result| matches!(result, Err(LockError::NodeLost { .. }))).count();
    let fine = [&first, &second].iter().filter(|result| result.is_ok()).count();
    assert_eq!(
        (lost, fine),
        (1, 1),
        "one guard was not the last, the last reports the loss: {first:?} {second:?}"
    );
    within("close", framework.close()).await;
}

/// a second `lock()` in the task that holds the lock waits for ever behind its own
/// node; the acquire notices that the node it watches is this session's and logs one WARN naming
/// the path and `reenter()`, and a timed acquire still times out cleanly.
#[tokio::test]
async fn locking_twice_on_one_session_warns_and_times_out_cleanly() {
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let path = "/double-lock/lock";
    let mutex = Mutex::new(&framework, path).expect("mutex");
    let logs = capture_warnings();
    let held = within("lock", mutex.lock()).await.expect("lock");
    assert_eq!(logs.count("reenter"), 0, "no warning for a plain lock: {logs:?}");
    let again = within("the second lock", mutex.lock_timeout(Duration::from_secs(1))).await;
    assert!(matches!(&again, Err(err) if err.is_timeout()), "{again:?}");
    assert_eq!(logs.count("reenter"), 1, "one warning naming reenter(): {logs:?}");
    assert!(logs.text().lines().any(|line| line.contains("WARN") && line.contains(path)), "{logs:?}");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups");
    assert_eq!(
        children(&framework, path).await,
        vec![path::name(held.node_path()).to_owned()],
        "nothing left behind"
    );
    within("release", held.release()).await.expect("release");
    within("close", framework.close()).await;
}

/// Waiters of one process queueing on one lock at once share their listings: a listing is sent
/// for the next round of whoever asked meanwhile, not one per waiter. Without sharing, the
/// server sends N listings of up to N names while they queue (about N/2 full listings' worth of
/// bytes); with it, a few rounds. Every waiter still gets the lock once, in node order.
#[tokio::test]
async fn waiters_queueing_at_once_on_one_session_share_their_listings() {
    const WAITERS: usize = 300;
    const PATH: &str = "/shared-listings/lock";
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let observer = Framework::builder(server.connect_string()).start().expect("observer");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = Framework::builder(proxy.connect_string()).start().expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    let holder = within("holder", Mutex::new(&framework, PATH).expect("mutex").lock()).await.expect("lock");
    let watches = || async {
        let mntr = four_letter_word(server.address(), "mntr", STEP).await.expect("mntr");
        parse_mntr(&mntr).get("zk_watch_count").and_then(|count| count.parse::<usize>().ok()).unwrap_or(0)
    };
    let watches_before = watches().await;
    let bytes_before = proxy.stats().bytes_to_client;
    let order = Arc::new(std::sync::Mutex::new(Vec::new()));
    let tasks: Vec<_> = (0..WAITERS)
        .map(|_| {
            let mutex = Mutex::new(&framework, PATH).expect("mutex");
            let order = order.clone();
            tokio::spawn(async move {
                let guard = mutex.lock().await.expect("lock");
                order.lock().expect("order").push(guard.node_path().to_owned());
                guard.release().await.expect("release");
            })
        })
        .collect();
    // Queued: every waiter's node is there, and every waiter watches its predecessor (so every
    // waiter's listing is done).
    eventually("every waiter queued and watching", || async {
        children(&observer, PATH).await.len() == WAITERS + 1 && watches().await >= watches_before + WAITERS
    })
    .await;
    let queueing_bytes = proxy.stats().bytes_to_client - bytes_before;
    // A full listing's size, as the server sends it: every name, with its length prefix.
    let names = children(&observer, PATH).await;
    let full_listing: u64 = names.iter().map(|name| name.len() as u64 + 4).sum();
    let listings_worth = queueing_bytes as f64 / full_listing as f64;
    assert!(
        listings_worth < (WAITERS / 10) as f64,
        "{queueing_bytes} bytes from the server while {WAITERS} waiters queued: {listings_worth:.1} full listings' \
         worth (one listing each would be about {})",
        WAITERS / 2
    );
    within("holder release", holder.release()).await.expect("release");
    for task in tasks {
        within("waiter", task).await.expect("waiter");
    }
    let order = order.lock().expect("order").clone();
    assert_eq!(order.len(), WAITERS, "every waiter held the lock once");
    let mut sorted = order.clone();
    sorted.sort_by_key(|node| node.rsplit('-').next().unwrap_or_default().to_owned());
    assert_eq!(order, sorted, "held in node-sequence order");
    within("close", framework.close()).await;
    within("close", observer.close()).await;
}
