//! `DistributedDoubleBarrier` against a real ZooKeeper server: enter together, leave together,
//! a late member, rounds on one path, GH-1290 (no member let in by events that do not complete
//! the barrier), deadlines and cancellation leaving no node.

mod common;

use std::time::Duration;

use common::*;
use zk_recipes_barrier::{DistributedDoubleBarrier, READY_NODE};
use zk_recipes_framework::{local_address, path, Deadline, Framework};
use zk_recipes_testing::{FaultProxy, TestingServer};

async fn server() -> TestingServer {
    within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server")
}

/// A framework with a 10 s session on `connect`.
fn framework(connect: &str) -> Framework {
    common::framework(connect, Duration::from_secs(10))
}

#[tokio::test]
async fn members_enter_together_and_leave_together_on_curators_layout() {
    init_tracing();
    let server = server().await;
    let frameworks: Vec<Framework> = (0..3).map(|_| framework(&server.connect_string())).collect();
    let observer = framework(&server.connect_string());
    let barrier_path = "/double/basic/workers";
    let barriers: Vec<_> = frameworks
        .iter()
        .map(|framework| DistributedDoubleBarrier::new(framework, barrier_path, 3).expect("barrier"))
        .collect();

    let mut first = spawn_enter(&barriers[0]);
    let mut second = spawn_enter(&barriers[1]);
    eventually("two members", || async { members(&observer, barrier_path).await.len() == 2 }).await;
    assert_still_waiting("the first of three", &mut first).await;
    assert_still_waiting("the second of three", &mut second).await;
    assert_eq!(data_and_owner(&observer, &path::join(barrier_path, READY_NODE)).await, None);

    let third = spawn_enter(&barriers[2]);
    let entered = vec![
        finished("first in", first).await,
        finished("second in", second).await,
        finished("third in", third).await,
    ];

    // Curator's layout: members EPHEMERAL `<uuid>` with the address, `ready` PERSISTENT with the
    // address, the barrier and its parents empty containers (the server's stat does not say
    // "container": they are checked below by the server reaping them once empty).
    for (entered, framework) in entered.iter().zip(&frameworks) {
        let name = path::name(entered.member_path());
        assert!(
            uuid::Uuid::parse_str(name).is_ok_and(|id| id.get_version_num() == 4 && id.to_string() == name)
        );
        assert_eq!(path::parent(entered.member_path()), Some(barrier_path));
        let node = data_and_owner(&observer, entered.member_path()).await;
        assert_eq!(node, Some((local_address(), session_of(framework))));
    }
    assert_eq!(
        data_and_owner(&observer, &path::join(barrier_path, READY_NODE)).await,
        Some((local_address(), 0))
    );
    assert_eq!(data_and_owner(&observer, barrier_path).await, Some((Vec::new(), 0)));
    assert_eq!(data_and_owner(&observer, "/double/basic").await, Some((Vec::new(), 0)));

    // The first to leave is not the lowest-named member (Curator's order: the lowest keeps its
    // node until it is alone, the others delete theirs at once).
    let mut entered = entered;
    entered.sort_by(|a, b| path::name(a.member_path()).cmp(path::name(b.member_path())));
    let mut entered = entered.into_iter().rev();
    let mut first_out = spawn_leave(entered.next().expect("first"));
    eventually("the first member's node gone", || async {
        members(&observer, barrier_path).await.len() == 2
    })
    .await;
    assert_still_waiting("leaving while two are inside", &mut first_out).await;
    let rest: Vec<_> = entered.map(spawn_leave).collect();
    finished("first out", first_out).await;
    for leave in rest {
        finished("out", leave).await;
    }
    assert_eq!(children(&observer, barrier_path).await, Vec::<String>::new(), "nothing left, ready deleted");
    eventually("the emptied containers reaped", || async {
        data_and_owner(&observer, "/double").await.is_none()
    })
    .await;
    for framework in frameworks.iter().chain([&observer]) {
        within("close", framework.close()).await;
    }
}

#[tokio::test]
async fn a_member_arriving_after_ready_goes_straight_in_and_is_waited_for() {
    init_tracing();
    let server = server().await;
    let connect = server.connect_string();
    let (one, two, late, observer) =
        (framework(&connect), framework(&connect), framework(&connect), framework(&connect));
    let barrier_path = "/double/late";
    let new =
        |framework: &Framework| DistributedDoubleBarrier::new(framework, barrier_path, 2).expect("barrier");
    let (first, second) = (spawn_enter(&new(&one)), spawn_enter(&new(&two)));
    let (first, second) = (finished("first in", first).await, finished("second in", second).await);

    // `ready` exists: a third member is not held, although only two were asked for.
    let late_member = finished("late member in", spawn_enter(&new(&late))).await;
    assert_eq!(members(&observer, barrier_path).await.len(), 3);

    let mut first_out = spawn_leave(first);
    let mut second_out = spawn_leave(second);
    assert_still_waiting("leaving while the late member is inside", &mut first_out).await;
    assert_still_waiting("leaving while the late member is inside", &mut second_out).await;
    finished("late member out", spawn_leave(late_member)).await;
    finished("first out", first_out).await;
    finished("second out", second_out).await;
    assert_eq!(children(&observer, barrier_path).await, Vec::<String>::new());
    for framework in [one, two, late, observer] {
        within("close", framework.close()).await;
    }
}

/// GH-1290: Curator's timed `enter` waits once and then goes in if anything woke it (a watch
/// event, a `SyncConnected` after a reconnection, a spurious wakeup), without counting again.
/// Here every kind of event that does not complete the barrier reaches the waiting member; it
/// must stay out until the members are really there.
#[tokio::test]
async fn events_that_do_not_complete_the_barrier_let_no_member_in() {
    init_tracing();
    let server = server().await;
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let waiting_framework = framework(&proxy.connect_string());
    let other = framework(&server.connect_string());
    let observer = framework(&server.connect_string());
    let barrier_path = "/double/gh-1290";
    let waiting = DistributedDoubleBarrier::new(&waiting_framework, barrier_path, 3).expect("barrier");
    let others = DistributedDoubleBarrier::new(&other, barrier_path, 3).expect("barrier");

    let mut entering = spawn_enter(&waiting);
    eventually("the waiting member's node", || async { members(&observer, barrier_path).await.len() == 1 })
        .await;
    assert_still_waiting("alone of three", &mut entering).await;

    // A member's node created and deleted: two child events.
    let mut passing = spawn_enter(&others);
    eventually("a second member", || async { members(&observer, barrier_path).await.len() == 2 }).await;
    passing.abort();
    let _ = (&mut passing).await;
    eventually("the dropped member gone", || async { members(&observer, barrier_path).await.len() == 1 })
        .await;
    assert_still_waiting("after a member came and went", &mut entering).await;

    // The barrier node's data changed.
    within("set data", observer.set_data(barrier_path, b"poke", None, step())).await.expect("set data");
    assert_still_waiting("after a data change", &mut entering).await;

    // The connection cut and back on the same session (Curator's SyncConnected wakeup).
    let session = session_of(&waiting_framework);
    let mut events = waiting_framework.connection_events();
    proxy.cut_now();
    within("reconnected", async {
        while let Some(update) = events.next().await {
            if update.state().is_connected()
                && update.state() != zk_recipes_framework::ConnectionState::Connected
            {
                return;
            }
        }
    })
    .await;
    assert_eq!(session_of(&waiting_framework), session, "the same session");
    assert_still_waiting("after a reconnection", &mut entering).await;
    assert_eq!(children(&observer, barrier_path).await.len(), 1, "no ready node");

    // The real thing: two more members.
    let second = spawn_enter(&others);
    let third = spawn_enter(&others);
    let entered = [finished("in", entering).await, finished("in", second).await, finished("in", third).await];
    let leaving: Vec<_> = entered.into_iter().map(spawn_leave).collect();
    for leave in leaving {
        finished("out", leave).await;
    }
    for framework in [waiting_framework, other, observer] {
        within("close", framework.close()).await;
    }
}

/// Three members run rounds back to back on one path, each entering the next round as soon as
/// its leave returns (no pause between rounds): nobody gets in before all three arrived (each
/// writes a marker before entering and counts the markers once in), and no leave waits for a
/// member already in the next round.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn back_to_back_rounds_on_one_path_let_nobody_in_early() {
    init_tracing();
    const ROUNDS: usize = 20;
    const MEMBERS: usize = 3;
    let server = server().await;
    let barrier_path = "/double/rounds/barrier";
    let markers = "/double/rounds/markers";
    let mut tasks = Vec::new();
    for member in 0..MEMBERS {
        let framework = framework(&server.connect_string());
        tasks.push(tokio::spawn(async move {
            let barrier = DistributedDoubleBarrier::new(&framework, barrier_path, MEMBERS).expect("barrier");
            let mut early = Vec::new();
            for round in 0..ROUNDS {
                if round % MEMBERS == member {
                    // One member arrives late each round.
                    tokio::time::sleep(Duration::from_millis(30)).await;
                }
                let marker = format!("{markers}/{round}/{member}");
                framework
                    .create(&marker)
                    .creating_parents(zk_recipes_framework::ParentMode::Persistent)
                    .deadline(step())
                    .await
                    .expect("marker");
                let entered = barrier.enter(step()).await.expect("enter");
                let (seen, _) =
                    framework.children(&format!("{markers}/{round}"), step()).await.expect("markers");
                if seen.len() < MEMBERS {
                    early.push((round, seen.len()));
                }
                entered.leave(step()).await.expect("leave");
            }
            framework.close().await;
            early
        }));
    }
    for task in tasks {
        let early = within_for(Duration::from_secs(60), "rounds", task).await.expect("member");
        assert!(early.is_empty(), "members got in before everyone arrived (round, markers seen): {early:?}");
    }
}

#[tokio::test]
async fn an_enter_past_its_deadline_is_a_timeout_and_leaves_no_node() {
    init_tracing();
    let server = server().await;
    let framework = framework(&server.connect_string());
    let barrier = DistributedDoubleBarrier::new(&framework, "/double/deadline", 2).expect("barrier");
    let err = within("enter", barrier.enter(Deadline::after(Duration::from_millis(300))))
        .await
        .expect_err("alone of two at the deadline");
    assert!(err.is_timeout(), "{err:?}");
    within("cleanups", framework.wait_for_cleanups(step())).await.expect("cleanups");
    assert_eq!(children(&framework, "/double/deadline").await, Vec::<String>::new());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_dropped_enter_leaves_no_node() {
    init_tracing();
    let server = server().await;
    let framework = framework(&server.connect_string());
    let observer = self::framework(&server.connect_string());
    let barrier = DistributedDoubleBarrier::new(&framework, "/double/dropped", 2).expect("barrier");
    {
        let enter = barrier.enter(step());
        tokio::pin!(enter);
        assert!(tokio::time::timeout(STILL_WAITING, &mut enter).await.is_err(), "alone of two: in");
        // The enter keeps running while its node is looked for: on a busy machine the framework
        // may still be connecting when STILL_WAITING is over.
        tokio::select! {
            result = &mut enter => panic!("alone of two, the enter ended: {result:?}"),
            () = eventually("the member's node there", || async {
                members(&observer, "/double/dropped").await.len() == 1
            }) => {}
        }
    }
    eventually("the dropped member's node gone", || async {
        children(&observer, "/double/dropped").await.is_empty()
    })
    .await;
    // Dropped at once, in the middle of its create: still nothing left.
    for _ in 0..20 {
        let enter = barrier.enter(step());
        tokio::pin!(enter);
        let _ = futures::poll!(&mut enter);
    }
    within("cleanups", framework.wait_for_cleanups(step())).await.expect("cleanups");
    within("sync", observer.sync("/double", step())).await.expect("sync");
    assert_eq!(children(&observer, "/double/dropped").await, Vec::<String>::new());
    for framework in [framework, observer] {
        within("close", framework.close()).await;
    }
}

#[tokio::test]
async fn dropping_a_member_inside_leaves_without_waiting() {
    init_tracing();
    let server = server().await;
    let framework = framework(&server.connect_string());
    let barrier = DistributedDoubleBarrier::new(&framework, "/double/single", 1).expect("barrier");
    let entered = within("enter", barrier.enter(step())).await.expect("one of one: in");
    let member = entered.member_path().to_owned();
    assert!(data_and_owner(&framework, &member).await.is_some());
    drop(entered);
    within("cleanups", framework.wait_for_cleanups(step())).await.expect("cleanups");
    assert_eq!(data_and_owner(&framework, &member).await, None);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_dropped_leave_still_deletes_the_member_node() {
    init_tracing();
    let server = server().await;
    let (one, two) = (framework(&server.connect_string()), framework(&server.connect_string()));
    let barrier_path = "/double/dropped-leave";
    let first = spawn_enter(&DistributedDoubleBarrier::new(&one, barrier_path, 2).expect("barrier"));
    let second = spawn_enter(&DistributedDoubleBarrier::new(&two, barrier_path, 2).expect("barrier"));
    let (first, second) = (finished("in", first).await, finished("in", second).await);
    let member = first.member_path().to_owned();
    {
        // Dropped before its first step has answered: the node must still go.
        let leave = first.leave(step());
        tokio::pin!(leave);
        let _ = futures::poll!(&mut leave);
    }
    within("cleanups", one.wait_for_cleanups(step())).await.expect("cleanups");
    assert_eq!(data_and_owner(&two, &member).await, None, "the dropped leave's member node is gone");
    finished("the other one out", spawn_leave(second)).await;
    assert!(children(&two, barrier_path).await.is_empty());
    for framework in [one, two] {
        within("close", framework.close()).await;
    }
}

/// The lowest member keeps its node in `leave` while another member is inside (Curator's order);
/// if its deadline passes meanwhile, `leave` is a timeout and its node still goes.
#[tokio::test]
async fn a_lowest_member_whose_leave_times_out_leaves_no_node() {
    init_tracing();
    let server = server().await;
    let (one, two) = (framework(&server.connect_string()), framework(&server.connect_string()));
    let barrier_path = "/double/lowest-times-out";
    let first = spawn_enter(&DistributedDoubleBarrier::new(&one, barrier_path, 2).expect("barrier"));
    let second = spawn_enter(&DistributedDoubleBarrier::new(&two, barrier_path, 2).expect("barrier"));
    let (first, second) = (finished("in", first).await, finished("in", second).await);
    let ((lowest, lowest_framework), (other, _)) = if first.member_path() < second.member_path() {
        ((first, &one), (second, &two))
    } else {
        ((second, &two), (first, &one))
    };
    let lowest_member = lowest.member_path().to_owned();

    let err = within("leave", lowest.leave(Deadline::after(Duration::from_millis(300))))
        .await
        .expect_err("the other member is still inside at the deadline");
    assert!(err.is_timeout(), "{err:?}");
    within("cleanups", lowest_framework.wait_for_cleanups(step())).await.expect("cleanups");
    assert_eq!(data_and_owner(&two, &lowest_member).await, None, "the lowest member's node is gone");
    finished("the other one out", spawn_leave(other)).await;
    assert!(children(&two, barrier_path).await.is_empty());
    for framework in [one, two] {
        within("close", framework.close()).await;
    }
}
