//! Partitions of a real ZooKeeper ensemble: each member in a network namespace of its own, the
//! links between members cut by routes. These tests need root (CI runs them as root); anywhere
//! that cannot make network namespaces they print why and skip.

mod common;

use std::collections::BTreeSet;
use std::time::{Duration, Instant};

use common::{connect, create};
use zk_recipes_testing::{
    eventually, init_tracing, within, within_for, Degradation, ServerMode, TestingCluster,
    TestingClusterBuilder, TestingError, SERVER_START,
};
use zookeeper_client::{Acls, Client, CreateMode};

/// How long a follower (or a leader) waits for the other side before it gives up on it.
const SYNC_LIMIT: Duration = Duration::from_secs(2);
/// The clients' session timeout: longer than an election, so a session outlives the tests' faults.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a write that must not commit is given before the test looks at the cluster: twice
/// the sync limit, so that the cut-off side has given up on the other by then.
const NO_COMMIT_WINDOW: Duration = Duration::from_secs(4);
/// How long the ensemble may take to serve again after a heal.
const HEAL_LIMIT: Duration = Duration::from_secs(60);

/// A builder for the tests' partitionable clusters: short limits, so faults show within seconds.
fn builder(size: usize) -> TestingClusterBuilder {
    TestingCluster::builder()
        .size(size)
        .partitionable(true)
        .sync_limit(SYNC_LIMIT)
        .init_limit(Duration::from_secs(5))
}

/// Starts the cluster; `None` (with the reason printed) only where network namespaces cannot be
/// made here.
async fn start(builder: TestingClusterBuilder) -> Option<TestingCluster> {
    init_tracing();
    match within_for(SERVER_START, "starting a partitionable ensemble", builder.start()).await {
        Ok(cluster) => Some(cluster),
        Err(TestingError::NetworkUnavailable { reason }) => {
            eprintln!("SKIPPED: partitionable clusters are unavailable here: {reason}");
            None
        }
        Err(err) => panic!("starting a partitionable ensemble: {err}"),
    }
}

fn persistent() -> zookeeper_client::CreateOptions<'static> {
    CreateMode::Persistent.with_acls(Acls::anyone_all())
}

/// Creates `path` through `client`, retrying while it reconnects (a member left the quorum).
async fn create_retrying(client: &Client, path: &str) {
    within(&format!("creating {path} on the majority"), async {
        loop {
            match client.create(path, b"", &persistent()).await {
                Ok(_) | Err(zookeeper_client::Error::NodeExists) => return,
                Err(zookeeper_client::Error::ConnectionLoss | zookeeper_client::Error::Custom(_)) => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(err) => panic!("create {path}: {err}"),
            }
        }
    })
    .await
}

/// Whether member `index` answers `srvr` with a mode, i.e. it serves clients.
async fn serves(cluster: &TestingCluster, index: usize) -> bool {
    within("srvr", cluster.mode(index)).await.is_ok()
}

/// The members that answer `srvr` with `mode`.
async fn members_in_mode(cluster: &TestingCluster, mode: ServerMode) -> Vec<usize> {
    let mut found = Vec::new();
    for index in 0..cluster.size() {
        if within("srvr", cluster.mode(index)).await.is_ok_and(|have| have == mode) {
            found.push(index);
        }
    }
    found
}

/// The sorted children of `path` on member `index` alone, after a `sync` there.
async fn children_on(cluster: &TestingCluster, index: usize, path: &str) -> Vec<String> {
    let client = connect(&cluster.members()[index].connect_string(), SESSION_TIMEOUT).await;
    within("sync", client.sync(path)).await.expect("sync");
    let mut children = within("list", client.list_children(path)).await.expect("list");
    children.sort();
    children
}

#[tokio::test]
async fn a_minority_serves_no_writes_and_the_ensemble_converges_after_heal() {
    let Some(mut cluster) = start(builder(3)).await else { return };
    let leader = within("leader", cluster.leader_index()).await.expect("leader");
    let (minority, majority) = ((leader + 1) % 3, (leader + 2) % 3);
    let on_majority = connect(&cluster.members()[majority].connect_string(), SESSION_TIMEOUT).await;
    let on_minority = connect(&cluster.members()[minority].connect_string(), SESSION_TIMEOUT).await;
    create(&on_majority, "/minority", b"").await;
    create(&on_majority, "/minority/before", b"").await;
    within("sync", on_minority.sync("/minority")).await.expect("sync");

    within("partitioning", cluster.partition(&[&[minority]])).await.expect("partition");
    assert_eq!(cluster.cut_links().expect("cuts").len(), 2, "the minority member is cut from both others");
    assert!(
        !cluster.can_talk(minority, leader).expect("can_talk")
            && cluster.can_talk(leader, majority).expect("x")
    );

    create_retrying(&on_majority, "/minority/majority-write").await;
    let started = Instant::now();
    let minority_write = tokio::time::timeout(
        NO_COMMIT_WINDOW,
        on_minority.create("/minority/minority-write", b"", &persistent()),
    )
    .await;
    assert!(
        !matches!(minority_write, Ok(Ok(_))),
        "a write through the minority committed: {minority_write:?}"
    );
    eprintln!("the minority write failed after {:?}: {minority_write:?}", started.elapsed());
    eventually("the minority member stops serving", || async { !serves(&cluster, minority).await }).await;
    let minority_read = tokio::time::timeout(Duration::from_secs(2), on_minority.get_data("/minority")).await;
    assert!(
        !matches!(minority_read, Ok(Ok(_))),
        "the minority (no read-only mode) served a read: {minority_read:?}"
    );
    let stat = within("reading on the majority", on_majority.check_stat("/minority/minority-write")).await;
    assert!(matches!(stat, Ok(None)), "the majority sees the minority's write: {stat:?}");
    drop(on_minority);

    within("healing", cluster.heal()).await.expect("heal");
    assert!(cluster.cut_links().expect("cuts").is_empty());
    within_for(HEAL_LIMIT, "serving after heal", cluster.wait_until_serving(HEAL_LIMIT))
        .await
        .expect("serving");
    let expected = children_on(&cluster, leader, "/minority").await;
    assert!(
        expected.contains(&"before".to_owned()) && expected.contains(&"majority-write".to_owned()),
        "{expected:?}"
    );
    for index in 0..cluster.size() {
        assert_eq!(
            children_on(&cluster, index, "/minority").await,
            expected,
            "server.{} converged",
            index + 1
        );
    }

    let namespaces: Vec<String> =
        cluster.members().iter().map(|member| member.namespace().expect("a namespace").to_owned()).collect();
    assert!(namespaces.iter().all(|namespace| std::path::Path::new("/run/netns").join(namespace).exists()));
    drop(cluster);
    for namespace in namespaces {
        assert!(!std::path::Path::new("/run/netns").join(&namespace).exists(), "{namespace} left behind");
        let host_side = namespace.replace("-m", "v");
        assert!(!std::path::Path::new("/sys/class/net").join(&host_side).exists(), "{host_side} left behind");
    }
}

#[tokio::test]
async fn an_isolated_leader_keeps_its_clients_commits_nothing_and_the_majority_elects_another() {
    // Three voters and an observer (member 3), which follows whoever leads the majority.
    let Some(mut cluster) = start(builder(3).observers(1)).await else { return };
    let leader = within("leader", cluster.leader_index()).await.expect("leader");
    let on_leader = connect(&cluster.members()[leader].connect_string(), SESSION_TIMEOUT).await;
    let others: Vec<String> = (0..3)
        .filter(|&index| index != leader)
        .map(|index| cluster.members()[index].connect_string())
        .collect();
    let on_majority = connect(&others.join(","), SESSION_TIMEOUT).await;
    create(&on_leader, "/isolated", b"kept").await;

    let isolated = within("isolating the leader", cluster.isolate_leader()).await.expect("isolate");
    assert_eq!(isolated, leader);
    // The client path is not cut: the isolated leader still answers its client.
    let (data, _) =
        within("reading from the isolated leader", on_leader.get_data("/isolated")).await.expect("read");
    assert_eq!(data, b"kept");

    let lost_write =
        tokio::time::timeout(NO_COMMIT_WINDOW, on_leader.create("/isolated/lost", b"", &persistent())).await;
    assert!(!matches!(lost_write, Ok(Ok(_))), "the isolated leader committed a write: {lost_write:?}");
    eventually("a new leader among the majority", || async {
        matches!(members_in_mode(&cluster, ServerMode::Leader).await.as_slice(), [new] if *new != leader)
    })
    .await;
    create_retrying(&on_majority, "/isolated/majority").await;
    let stat = within("reading on the majority", on_majority.check_stat("/isolated/lost")).await;
    assert!(matches!(stat, Ok(None)), "the majority sees the isolated leader's write: {stat:?}");
    drop(on_leader);

    within("healing", cluster.heal()).await.expect("heal");
    within_for(HEAL_LIMIT, "serving after heal", cluster.wait_until_serving(HEAL_LIMIT))
        .await
        .expect("serving");
    assert_eq!(within("srvr", cluster.mode(leader)).await.expect("mode"), ServerMode::Follower);
    assert_eq!(within("srvr", cluster.mode(3)).await.expect("mode"), ServerMode::Observer);
    for index in 0..cluster.size() {
        assert_eq!(children_on(&cluster, index, "/isolated").await, ["majority"], "server.{}", index + 1);
    }
}

#[tokio::test]
async fn a_read_only_member_answers_reads_only_when_cut_into_a_minority() {
    let Some(mut cluster) = start(builder(3).read_only_mode(true)).await else { return };
    let leader = within("leader", cluster.leader_index()).await.expect("leader");
    let (member, other) = ((leader + 1) % 3, (leader + 2) % 3);
    // The leader stays in the majority throughout. (With read-only mode a session is local to its
    // server, so a writer that moved to another member would be expired.)
    let writer = connect(&cluster.members()[leader].connect_string(), SESSION_TIMEOUT).await;
    create(&writer, "/read-only", b"before").await;

    // In the majority it stays a follower: cut the other follower off, wait until that one is
    // read-only (the cut took effect), and look at this one.
    within("partitioning", cluster.isolate(other)).await.expect("isolate");
    eventually("the isolated member turns read-only", || async {
        matches!(within("srvr", cluster.mode(other)).await, Ok(ServerMode::ReadOnly))
    })
    .await;
    assert_eq!(within("srvr", cluster.mode(member)).await.expect("mode"), ServerMode::Follower);

    within("healing", cluster.heal()).await.expect("heal");
    within_for(HEAL_LIMIT, "serving after heal", cluster.wait_until_serving(HEAL_LIMIT))
        .await
        .expect("serving");
    within("partitioning", cluster.isolate(member)).await.expect("isolate");
    eventually("the minority member turns read-only", || async {
        matches!(within("srvr", cluster.mode(member)).await, Ok(ServerMode::ReadOnly))
    })
    .await;
    let address = cluster.members()[member].connect_string();
    let reader = within(
        "a read-only session",
        Client::connector().with_readonly(true).with_session_timeout(SESSION_TIMEOUT).connect(&address),
    )
    .await
    .expect("read-only connect");
    let (data, _) =
        within("reading from the read-only member", reader.get_data("/read-only")).await.expect("read");
    assert_eq!(data, b"before");
    let write =
        within("writing to the read-only member", reader.create("/read-only/no", b"", &persistent())).await;
    assert!(write.is_err(), "a read-only member accepted a write: {write:?}");
    let writable = tokio::time::timeout(
        Duration::from_secs(3),
        Client::connector().with_session_timeout(SESSION_TIMEOUT).connect(&address),
    )
    .await;
    assert!(!matches!(writable, Ok(Ok(_))), "a read-only member opened a read-write session");
    create_retrying(&writer, "/read-only/majority").await;
}

/// Waits until the members that serve are exactly the leader and the members still linked to it.
async fn wait_for_leaders_side(cluster: &TestingCluster, leader: usize, what: &str) {
    let linked: BTreeSet<usize> =
        (0..cluster.size()).filter(|&index| cluster.can_talk(leader, index).expect("can_talk")).collect();
    eventually(what, || async {
        let mut serving = BTreeSet::new();
        for index in 0..cluster.size() {
            if serves(cluster, index).await {
                serving.insert(index);
            }
        }
        serving == linked && members_in_mode(cluster, ServerMode::Leader).await == [leader]
    })
    .await;
}

#[tokio::test]
async fn a_bridge_and_a_ring_keep_one_leader_serving_only_the_members_linked_to_it() {
    let Some(mut cluster) = start(builder(5)).await else { return };
    let client = connect(&cluster.connect_string(), SESSION_TIMEOUT).await;
    create(&client, "/shapes", b"").await;

    let leader = within("leader", cluster.leader_index()).await.expect("leader");
    let middle = within("bridging", cluster.bridge()).await.expect("bridge");
    assert_eq!(middle, 2);
    assert_eq!(cluster.cut_links().expect("cuts"), [(0, 3), (0, 4), (1, 3), (1, 4)]);
    wait_for_leaders_side(&cluster, leader, "the bridge: the leader's side serves, the far side does not")
        .await;
    let on_leader = connect(&cluster.members()[leader].connect_string(), SESSION_TIMEOUT).await;
    create_retrying(&on_leader, "/shapes/bridge").await;
    within("healing", cluster.heal()).await.expect("heal");
    within_for(HEAL_LIMIT, "serving after heal", cluster.wait_until_serving(HEAL_LIMIT))
        .await
        .expect("serving");

    let leader = within("leader", cluster.leader_index()).await.expect("leader");
    within("ring", cluster.ring()).await.expect("ring");
    assert_eq!(
        cluster.cut_links().expect("cuts").len(),
        5,
        "a ring of five cuts the five non-neighbour pairs"
    );
    wait_for_leaders_side(&cluster, leader, "the ring: the leader and its two neighbours serve").await;
    let on_leader = connect(&cluster.members()[leader].connect_string(), SESSION_TIMEOUT).await;
    create_retrying(&on_leader, "/shapes/ring").await;
    within("healing", cluster.heal()).await.expect("heal");
    within_for(HEAL_LIMIT, "serving after heal", cluster.wait_until_serving(HEAL_LIMIT))
        .await
        .expect("serving");
    for index in 0..cluster.size() {
        assert_eq!(children_on(&cluster, index, "/shapes").await, ["bridge", "ring"], "server.{}", index + 1);
    }
}

/// The median of `samples` round trips (a read of `path`) through `client`.
async fn median_round_trip(client: &Client, path: &str, samples: usize) -> Duration {
    let mut round_trips = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        within("a timed read", client.get_data(path)).await.expect("read");
        round_trips.push(started.elapsed());
    }
    round_trips.sort();
    round_trips[samples / 2]
}

#[tokio::test]
async fn a_degraded_member_answers_later_by_twice_the_delay_and_the_others_do_not() {
    let Some(mut cluster) = start(builder(3)).await else { return };
    let leader = within("leader", cluster.leader_index()).await.expect("leader");
    let (degraded, untouched) = ((leader + 1) % 3, (leader + 2) % 3);
    let on_degraded = connect(&cluster.members()[degraded].connect_string(), SESSION_TIMEOUT).await;
    let on_untouched = connect(&cluster.members()[untouched].connect_string(), SESSION_TIMEOUT).await;
    create(&on_degraded, "/degraded", b"").await;
    within("sync", on_untouched.sync("/degraded")).await.expect("sync");
    let before = median_round_trip(&on_degraded, "/degraded", 9).await;

    let delay = Duration::from_millis(100);
    within("degrading", cluster.degrade(degraded, Degradation::delay(delay))).await.expect("degrade");
    let slow = median_round_trip(&on_degraded, "/degraded", 5).await;
    let elsewhere = median_round_trip(&on_untouched, "/degraded", 5).await;
    eprintln!("read round trip: {before:?} before, {slow:?} degraded by {delay:?} each way, {elsewhere:?} elsewhere");
    assert!(slow >= before + delay * 3 / 2, "{slow:?} is not {before:?} + 2 × {delay:?}");
    assert!(elsewhere < delay / 2, "a member that is not degraded answers in {elsewhere:?}");
    // A write through it crosses its links four times: client -> it -> leader -> it -> client.
    let started = Instant::now();
    create(&on_degraded, "/degraded/write", b"").await;
    let write = started.elapsed();
    assert!(write >= delay * 3, "a write through the degraded member took {write:?}, not 4 × {delay:?}");
    let refused = within("partitioning", cluster.partition(&[&[degraded]])).await;
    assert!(matches!(refused, Err(TestingError::InvalidArgument(_))), "{refused:?}");

    within("healing", cluster.heal()).await.expect("heal");
    let healed = median_round_trip(&on_degraded, "/degraded", 9).await;
    assert!(healed < before + delay / 2, "healing took the delay away: {healed:?} (before {before:?})");
}

#[tokio::test]
async fn a_loopback_cluster_refuses_network_faults() {
    let mut cluster = within_for(SERVER_START, "starting", TestingCluster::start(1))
        .await
        .expect("start a loopback cluster");
    assert!(!cluster.is_partitionable());
    assert!(cluster.members()[0].namespace().is_none());
    let refused = within("partitioning", cluster.partition(&[&[0]])).await;
    assert!(matches!(refused, Err(TestingError::NotPartitionable)), "{refused:?}");
    assert!(matches!(cluster.heal().await, Err(TestingError::NotPartitionable)));
    let refused = TestingCluster::builder().partitionable(true).reconfig(true).start().await;
    assert!(matches!(refused, Err(TestingError::InvalidArgument(_))), "{refused:?}");
}
