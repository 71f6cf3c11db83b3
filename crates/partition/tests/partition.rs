//! The partitioner on a real ZooKeeper server: five workers over 64 items, a killed worker, a
//! black-holed worker, join and leave storms, the settle time, an item held by an outsider
//! (kazoo#392) and a join while a lock wait is under way (kazoo#259), bad input.

mod common;

use std::collections::BTreeSet;
use std::time::Duration;

use common::*;
use tokio::time::Instant;
use zk_recipes_mutex::Mutex;
use zk_recipes_partition::{PartitionError, PartitionEvent, PartitionLayout, Partitioner};
use zk_recipes_test_support::*;
use zk_recipes_testing::TestingServer;

const SESSION: Duration = Duration::from_secs(4);

async fn server() -> TestingServer {
    within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server")
}

fn observer(server: &TestingServer) -> zk_recipes_framework::Framework {
    builder(&server.connect_string(), Duration::from_secs(10)).start().expect("observer")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_workers_own_64_items_exactly_once_and_a_leaver_s_items_move() {
    init_tracing();
    let server = server().await;
    let observer = observer(&server);
    let (connect, path, items) = (server.connect_string(), "/partition/five", items(64));
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle: Duration::from_millis(500),
        layout: PartitionLayout::Native,
        session_timeout: SESSION,
    };
    let ledger = Ledger::new();
    let mut workers: Vec<Worker> =
        (1..=5).map(|index| spec.start(&format!("worker-{index}"), &ledger)).collect();
    until_stable(&observer, path, &items, &workers.iter().collect::<Vec<_>>()).await;
    let members = children(&observer, &format!("{path}/members")).await;
    assert_eq!(
        members.into_iter().collect::<BTreeSet<_>>(),
        workers.iter().map(|w| w.name.clone()).collect()
    );

    // One leaves: its items move to the other four, each still owned once.
    let leaver = workers.remove(2);
    let leaver_items = leaver.owned();
    assert!(!leaver_items.is_empty());
    leaver.close().await;
    let released: BTreeSet<String> = ledger
        .events_of("worker-3")
        .into_iter()
        .filter_map(|logged| match logged.event {
            PartitionEvent::Released(items) => Some(items),
            _ => None,
        })
        .flatten()
        .collect();
    assert_eq!(released, leaver_items, "close reports every item released");
    until_stable(&observer, path, &items, &workers.iter().collect::<Vec<_>>()).await;
    ledger.assert_no_violations();
    for worker in workers {
        worker.close().await;
    }
    no_children_left(&observer, &format!("{path}/members")).await;
    close_all([observer]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_worker_s_items_move_only_after_its_session_ends() {
    init_tracing();
    let server = server().await;
    let observer = observer(&server);
    let (connect, path, items) = (server.connect_string(), "/partition/killed", items(12));
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle: Duration::from_millis(300),
        layout: PartitionLayout::Native,
        session_timeout: SESSION,
    };
    let ledger = Ledger::new();
    let survivors = [spec.start("worker-1", &ledger), spec.start("worker-2", &ledger)];
    // The doomed worker runs on a runtime of its own, shut down to kill it: its tasks stop and
    // its socket closes without a CloseSession, as when a process dies.
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().expect("rt");
    let doomed = {
        let _entered = runtime.enter();
        spec.start("worker-3", &ledger)
    };
    let all = [&survivors[0], &survivors[1], &doomed];
    until_stable(&observer, path, &items, &all).await;
    let doomed_items = doomed.owned();
    runtime.shutdown_background();
    let killed_at = Instant::now();
    // Its handles belong to the dead runtime: nothing of them may run on ours.
    std::mem::forget(doomed);

    // Its member node lives until the server expires its session; until then nobody else owns its items.
    let member = format!("{path}/members/worker-3");
    eventually("the killed worker's session ends", || async {
        on_server(&observer, &member).await.is_none()
    })
    .await;
    let expired_at = Instant::now();
    assert!(expired_at - killed_at >= SESSION / 2, "expired {:?} after the kill", expired_at - killed_at);
    until_stable(&observer, path, &items, &[&survivors[0], &survivors[1]]).await;
    for logged in ledger.log.lock().iter().filter(|logged| logged.worker != "worker-3") {
        if let PartitionEvent::Acquired(acquired) = &logged.event {
            for owned in acquired.iter().filter(|owned| doomed_items.contains(owned.item())) {
                assert!(
                    logged.at >= expired_at - Duration::from_millis(500),
                    "{} taken before the session ended",
                    owned.item()
                );
            }
        }
    }
    // The dead worker's work markers stay set (its futures were never dropped): clear them by
    // checking only the survivors' starts.
    let violations: Vec<String> = ledger
        .violations
        .lock()
        .iter()
        .filter(|violation| !violation.contains("while worker-3"))
        .cloned()
        .collect();
    assert!(violations.is_empty(), "{violations:?}");
    let overlaps = ledger.overlaps(Some("worker-3"));
    assert!(overlaps.is_empty(), "{overlaps:?}");
    let [first, second] = survivors;
    first.close().await;
    second.close().await;
    close_all([observer]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_black_holed_worker_reports_lost_before_anyone_acquires_its_items() {
    init_tracing();
    let (server, proxy, proxied_framework, observer) = proxied(SESSION).await;
    let (connect, path, items) = (server.connect_string(), "/partition/black-hole", items(12));
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle: Duration::from_millis(300),
        layout: PartitionLayout::Native,
        session_timeout: SESSION,
    };
    let ledger = Ledger::new();
    let others = [spec.start("worker-1", &ledger), spec.start("worker-2", &ledger)];
    let cut_off = spec.start_on("worker-3", proxied_framework, &ledger);
    until_stable(&observer, path, &items, &[&others[0], &others[1], &cut_off]).await;
    let cut_items = cut_off.owned();
    assert!(!cut_items.is_empty());

    proxy.black_hole(Duration::from_secs(60));
    eventually("the others own every item", || async {
        let owned: BTreeSet<String> = others.iter().flat_map(Worker::owned).collect();
        owned.len() == items.len()
    })
    .await;
    let log = ledger.log.lock().clone();
    let lost_at = |item: &str| {
        log.iter().find_map(|logged| match &logged.event {
            PartitionEvent::Lost(lost)
                if logged.worker == "worker-3" && lost.iter().any(|lost| lost == item) =>
            {
                Some(logged.at)
            }
            _ => None,
        })
    };
    for item in &cut_items {
        let lost = lost_at(item).unwrap_or_else(|| panic!("worker-3 never reported {item} lost"));
        let taken = log
            .iter()
            .find_map(|logged| match &logged.event {
                PartitionEvent::Acquired(acquired)
                    if logged.worker != "worker-3" && acquired.iter().any(|owned| owned.item() == item) =>
                {
                    Some(logged.at)
                }
                _ => None,
            })
            .expect("taken by another worker");
        assert!(lost < taken, "{item}: lost at {lost:?}, taken at {taken:?}");
    }
    assert!(cut_off.owned().is_empty(), "worker-3 owns nothing while cut off");
    ledger.assert_no_violations();

    // Healed, it gets a new session, joins again, and the three split the items again.
    proxy.heal();
    until_stable(&observer, path, &items, &[&others[0], &others[1], &cut_off]).await;
    ledger.assert_no_violations();
    let [first, second] = others;
    for worker in [first, second, cut_off] {
        worker.close().await;
    }
    close_all([observer]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn join_and_leave_storms_never_own_an_item_twice() {
    init_tracing();
    let server = server().await;
    let observer = observer(&server);
    let (connect, path, items) = (server.connect_string(), "/partition/storm", items(24));
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle: Duration::from_millis(200),
        layout: PartitionLayout::Native,
        session_timeout: SESSION,
    };
    let ledger = Ledger::new();
    let steady = [spec.start("steady-1", &ledger), spec.start("steady-2", &ledger)];
    until_stable(&observer, path, &items, &[&steady[0], &steady[1]]).await;
    // Workers come and go, some faster than the settle time, some slower, some overlapping.
    let mut transient: Vec<Worker> = Vec::new();
    for round in 0..12 {
        transient.push(spec.start(&format!("storm-{round}"), &ledger));
        let pause = if round % 3 == 0 { 350 } else { 60 };
        tokio::time::sleep(Duration::from_millis(pause)).await;
        if round % 2 == 1 {
            let leaving = transient.remove(0);
            leaving.close().await;
        }
        ledger.assert_no_violations();
    }
    let mut all: Vec<&Worker> = steady.iter().collect();
    all.extend(transient.iter());
    until_stable(&observer, path, &items, &all).await;
    ledger.assert_no_violations();
    let tokens = ledger.tokens.lock().clone();
    assert!(tokens.values().any(|tokens| tokens.len() > 1), "items moved during the storm");
    for worker in transient {
        worker.close().await;
    }
    let [first, second] = steady;
    until_stable(&observer, path, &items, &[&first, &second]).await;
    ledger.assert_no_violations();
    first.close().await;
    second.close().await;
    close_all([observer]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_item_moves_while_the_party_keeps_changing() {
    init_tracing();
    let server = server().await;
    let observer = observer(&server);
    let (connect, path, items) = (server.connect_string(), "/partition/settle", items(10));
    let settle = Duration::from_millis(1500);
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle,
        layout: PartitionLayout::Native,
        session_timeout: SESSION,
    };
    let ledger = Ledger::new();
    let steady = [spec.start("steady-1", &ledger), spec.start("steady-2", &ledger)];
    until_stable(&observer, path, &items, &[&steady[0], &steady[1]]).await;
    let before: Vec<BTreeSet<String>> = steady.iter().map(Worker::owned).collect();
    let events_before = ledger.log.lock().len();

    // A newcomer joins and leaves every 400 ms, for 4 s: the party never stays still for 1.5 s.
    let churn_started = Instant::now();
    for round in 0..5 {
        let newcomer = spec.start(&format!("flicker-{round}"), &ledger);
        within("a member", async {
            while children(&observer, &format!("{path}/members")).await.len() < 3 {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
        .await;
        tokio::time::sleep(Duration::from_millis(400)).await;
        newcomer.close().await;
        tokio::time::sleep(Duration::from_millis(400)).await;
    }
    let churn_ended = Instant::now();
    assert!(churn_ended - churn_started > settle);
    let moved: Vec<Logged> = ledger.log.lock()[events_before..].to_vec();
    assert!(moved.is_empty(), "items moved while the party changed: {moved:?}");
    assert_eq!(steady.iter().map(Worker::owned).collect::<Vec<_>>(), before);

    // A newcomer that stays gets its share once the party has settled, not before.
    let stayer = spec.start("stayer", &ledger);
    let joined = Instant::now();
    until_stable(&observer, path, &items, &[&steady[0], &steady[1], &stayer]).await;
    let first_acquired = ledger
        .events_of("stayer")
        .into_iter()
        .find(|logged| matches!(logged.event, PartitionEvent::Acquired(_)))
        .expect("the stayer acquired");
    assert!(first_acquired.at - joined >= settle, "acquired {:?} after joining", first_acquired.at - joined);
    ledger.assert_no_violations();
    let [first, second] = steady;
    for worker in [first, second, stayer] {
        worker.close().await;
    }
    close_all([observer]).await;
}

/// kazoo#392: kazoo's partitioner sticks in "allocating" while one item's lock is held by someone
/// outside the party (a departed member whose session lives on). Ours waits for that item alone;
/// and (kazoo#259) a worker joining during that wait is not missed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_item_held_outside_the_party_holds_up_only_that_item_and_a_join_meanwhile_is_seen() {
    init_tracing();
    let server = server().await;
    let observer = observer(&server);
    let (connect, path, items) = (server.connect_string(), "/partition/outsider", items(8));
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle: Duration::from_millis(300),
        layout: PartitionLayout::Native,
        session_timeout: SESSION,
    };
    let outsider = Mutex::new(&observer, &format!("{path}/locks/item-03")).expect("mutex");
    let outsider_hold = within("outsider locks item-03", outsider.lock()).await.expect("lock");
    let ledger = Ledger::new();
    let first = spec.start("worker-1", &ledger);
    eventually("worker-1 owns every item but item-03", || async { first.owned().len() == items.len() - 1 })
        .await;
    assert!(!first.owned().contains("item-03"));

    // A second worker joins while worker-1 still waits for item-03.
    let second = spec.start("worker-2", &ledger);
    eventually("both own their share but item-03", || async {
        let (a, b) = (first.owned(), second.owned());
        a.is_disjoint(&b) && a.len() + b.len() == items.len() - 1 && a.len().abs_diff(b.len()) <= 1
    })
    .await;
    within("outsider releases", outsider_hold.release()).await.expect("release");
    until_stable(&observer, path, &items, &[&first, &second]).await;
    ledger.assert_no_violations();
    first.close().await;
    second.close().await;
    close_all([observer]).await;
}

/// kazoo#257 and #298: kazoo's party watch is a one-shot children watch that a connection loss
/// could leave unset, so a member that joined meanwhile went unseen. Ours is a persistent watch,
/// added again after a reconnection with a reset that makes the party be read again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_join_while_a_worker_is_disconnected_is_seen_after_it_reconnects() {
    init_tracing();
    let (server, proxy, proxied_framework, observer) = proxied(SESSION).await;
    let (connect, path, items) = (server.connect_string(), "/partition/reconnect", items(12));
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle: Duration::from_millis(300),
        layout: PartitionLayout::Native,
        session_timeout: SESSION,
    };
    let ledger = Ledger::new();
    let direct = spec.start("worker-1", &ledger);
    let cut_off = spec.start_on("worker-2", proxied_framework, &ledger);
    until_stable(&observer, path, &items, &[&direct, &cut_off]).await;
    let session_before = session_of(&cut_off.framework);

    // worker-2 hears nothing for a while (less than its session timeout), and meanwhile
    // worker-3 joins; when the connection comes back, worker-2 must see worker-3.
    proxy.black_hole(Duration::from_millis(1500));
    let newcomer = spec.start("worker-3", &ledger);
    within("worker-3 is a member", async {
        while children(&observer, &format!("{path}/members")).await.len() < 3 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    assert!(proxy.is_black_holed(), "worker-3 joined while worker-2 was cut off");
    until_stable(&observer, path, &items, &[&direct, &cut_off, &newcomer]).await;
    assert_eq!(session_of(&cut_off.framework), session_before, "the same session throughout");
    ledger.assert_no_violations();
    for worker in [direct, cut_off, newcomer] {
        worker.close().await;
    }
    close_all([observer]).await;
}

/// Our layout names a member node after its identifier: a second worker with an identifier in use
/// cannot join, owns nothing, and takes over when the first one leaves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_worker_with_an_identifier_in_use_waits_as_a_standby() {
    init_tracing();
    let server = server().await;
    let observer = observer(&server);
    let (connect, path, items) = (server.connect_string(), "/partition/standby", items(6));
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle: Duration::from_millis(300),
        layout: PartitionLayout::Native,
        session_timeout: SESSION,
    };
    let ledger = Ledger::new();
    let other = spec.start("other", &ledger);
    let first = spec.start("twin", &ledger);
    until_stable(&observer, path, &items, &[&other, &first]).await;
    let standby = spec.start("twin", &ledger);
    tokio::time::sleep(STILL_WAITING + Duration::from_millis(300)).await;
    assert!(standby.owned().is_empty(), "the standby owns nothing");
    assert_eq!(children(&observer, &format!("{path}/members")).await.len(), 2);
    first.close().await;
    until_stable(&observer, path, &items, &[&other, &standby]).await;
    ledger.assert_no_violations();
    other.close().await;
    standby.close().await;
    close_all([observer]).await;
}

/// A framework closed under a running partitioner: its items are lost (their work stopped), the
/// events end, and the server keeps nothing of it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_the_framework_under_a_partitioner_ends_it() {
    init_tracing();
    let server = server().await;
    let observer = observer(&server);
    let (connect, path, items) = (server.connect_string(), "/partition/framework-closed", items(4));
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle: Duration::from_millis(200),
        layout: PartitionLayout::Native,
        session_timeout: SESSION,
    };
    let ledger = Ledger::new();
    let worker = spec.start("alone", &ledger);
    let mut events = worker.partitioner.events();
    until_stable(&observer, path, &items, &[&worker]).await;
    let owned = worker.partitioner.owned();
    within("close the framework", worker.framework.close()).await;
    let mut ended = BTreeSet::new();
    while let Some(event) = within("the events end", events.next()).await {
        if let PartitionEvent::Lost(items) | PartitionEvent::Released(items) = event {
            ended.extend(items);
        }
    }
    assert_eq!(ended, items.iter().cloned().collect(), "every item reported lost or released");
    assert!(owned.iter().all(|owned| owned.has_ended()));
    assert!(worker.partitioner.owned().is_empty());
    within("close the partitioner", worker.partitioner.close(STEP)).await.expect("close");
    no_children_left(&observer, &format!("{path}/members")).await;
    for item in &items {
        no_children_left(&observer, &format!("{path}/locks/{item}")).await;
    }
    ledger.assert_no_violations();
    close_all([observer]).await;
}

#[tokio::test]
async fn bad_input_is_refused_and_nothing_is_sent() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    let start = |path: &str, items: Vec<&str>, identifier: &str, settle: Duration| {
        Partitioner::builder(&framework, path, items).identifier(identifier).settle(settle).start()
    };
    let second = Duration::from_secs(1);
    let refusals = [
        start("/partition/bad", vec![], "w", second),
        start("/partition/bad", vec!["a", "b/c"], "w", second),
        start("/partition/bad", vec!["a", ".."], "w", second),
        start("/partition/bad", vec!["a", ""], "w", second),
        start("/partition/bad", vec!["a", "nul\u{0}"], "w", second),
        start("/partition/bad", vec!["a", "b", "a"], "w", second),
        start("/partition/bad", vec!["a"], "", second),
        start("/partition/bad", vec!["a"], "x/y", second),
        start("/partition/bad", vec!["a"], "w", Duration::ZERO),
        start("partition/bad", vec!["a"], "w", second),
        start("/partition/bad/", vec!["a"], "w", second),
        start("/", vec!["a"], "w", second),
    ];
    let kinds: Vec<String> = refusals
        .into_iter()
        .map(|refused| match refused {
            Err(err) => format!("{err:?}").split([' ', '{', '(']).next().unwrap_or_default().to_owned(),
            Ok(partitioner) => panic!("started {partitioner:?}"),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "NoItems",
            "InvalidItem",
            "InvalidItem",
            "InvalidItem",
            "InvalidItem",
            "DuplicateItem",
            "InvalidIdentifier",
            "InvalidIdentifier",
            "ZeroSettle",
            "InvalidPath",
            "InvalidPath",
            "InvalidPath",
        ]
    );
    let kazoo = Partitioner::builder(&framework, "/partition/bad", ["a"])
        .identifier("")
        .layout(PartitionLayout::Kazoo)
        .start();
    assert!(matches!(kazoo, Err(PartitionError::InvalidIdentifier { .. })), "{kazoo:?}");
    assert!(on_server(&framework, "/partition").await.is_none(), "nothing was created");
    close_all([framework]).await;
}
