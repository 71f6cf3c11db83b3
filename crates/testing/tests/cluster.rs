//! A three-member `TestingCluster` against the real ZooKeeper on this machine.

mod common;

use std::time::{Duration, Instant};

use common::{connect, create};
use zk_recipes_testing::{within, within_for, ServerMode, TestingCluster, TestingError, SERVER_START};
use zookeeper_client::{Acls, Client, CreateMode};

/// Creates `path`, retrying while the client reconnects after losing its server.
async fn create_retrying(client: &Client, path: &str) {
    within(&format!("creating {path} while the ensemble recovers"), async {
        loop {
            match client.create(path, b"", &CreateMode::Persistent.with_acls(Acls::anyone_all())).await {
                Ok(_) => return,
                // A retried create whose first attempt got through.
                Err(zookeeper_client::Error::NodeExists) => return,
                Err(zookeeper_client::Error::ConnectionLoss | zookeeper_client::Error::Custom(_)) => {
                    tokio::time::sleep(Duration::from_millis(50)).await
                }
                Err(err) => panic!("create {path}: {err}"),
            }
        }
    })
    .await
}

#[tokio::test]
async fn three_members_elect_one_leader_and_survive_losing_it() {
    let started = Instant::now();
    let mut cluster =
        within_for(SERVER_START, "starting the ensemble", TestingCluster::start(3)).await.expect("start");
    eprintln!("TestingCluster::start(3) took {:?} (including waiting for the slot)", started.elapsed());

    let expected: Vec<String> =
        cluster.members().iter().map(|member| format!("127.0.0.1:{}", member.port())).collect();
    assert_eq!(cluster.connect_string(), expected.join(","));
    let mut modes = Vec::new();
    for index in 0..cluster.size() {
        modes.push(within("srvr", cluster.mode(index)).await.expect("mode"));
    }
    assert_eq!(modes.iter().filter(|mode| **mode == ServerMode::Leader).count(), 1, "{modes:?}");
    assert_eq!(modes.iter().filter(|mode| **mode == ServerMode::Follower).count(), 2, "{modes:?}");
    let leader = within("finding the leader", cluster.leader_index()).await.expect("leader");
    assert_eq!(modes[leader], ServerMode::Leader);

    let client = connect(&cluster.connect_string(), Duration::from_secs(10)).await;
    create(&client, "/before", b"").await;

    let killed = within("killing the leader", cluster.kill_leader()).await.expect("kill leader");
    assert_eq!(killed, leader);
    assert!(!cluster.members()[killed].is_running());
    let reelection = Instant::now();
    within_for(SERVER_START, "re-election", cluster.wait_until_serving(Duration::from_secs(60)))
        .await
        .expect("re-elect");
    eprintln!("re-election took {:?}", reelection.elapsed());
    let new_leader = within("finding the new leader", cluster.leader_index()).await.expect("new leader");
    assert_ne!(new_leader, killed);

    create_retrying(&client, "/after").await;

    within_for(SERVER_START, "restarting the old leader", cluster.restart(killed)).await.expect("restart");
    assert_eq!(within("srvr", cluster.mode(killed)).await.expect("mode"), ServerMode::Follower);
    let direct = connect(&cluster.members()[killed].connect_string(), Duration::from_secs(10)).await;
    within("sync", direct.sync("/")).await.expect("sync");
    for path in ["/before", "/after"] {
        let stat = within("reading", direct.check_stat(path)).await.expect("check");
        assert!(stat.is_some(), "{path} is on the restarted member");
    }
    assert!(matches!(cluster.member(7), Err(TestingError::NoSuchMember { index: 7, size: 3 })));
}

#[tokio::test]
async fn a_one_member_cluster_is_a_quorum_of_one() {
    let cluster = within_for(SERVER_START, "starting", TestingCluster::start(1)).await.expect("start");
    assert_eq!(within("srvr", cluster.mode(0)).await.expect("mode"), ServerMode::Leader);
    let client = connect(&cluster.connect_string(), Duration::from_secs(10)).await;
    create(&client, "/alone", b"").await;
}

#[tokio::test]
async fn a_whole_ensemble_restart_keeps_the_data_and_elects_again() {
    let mut cluster =
        within_for(SERVER_START, "starting the ensemble", TestingCluster::start(3)).await.expect("start");
    let client = connect(&cluster.connect_string(), Duration::from_secs(10)).await;
    create(&client, "/kept", b"").await;
    let pids: Vec<Option<u32>> = cluster.members().iter().map(|member| member.pid()).collect();

    within_for(SERVER_START, "restarting every member", cluster.restart_all()).await.expect("restart all");

    for (member, old_pid) in cluster.members().iter().zip(&pids) {
        assert!(member.is_running());
        assert_ne!(member.pid(), *old_pid, "server.{} is a new process", member.server_id());
    }
    let leaders = within("finding the leader", cluster.leader_index()).await;
    assert!(leaders.is_ok(), "{leaders:?}");
    let fresh = connect(&cluster.connect_string(), Duration::from_secs(10)).await;
    let stat = within("reading", fresh.check_stat("/kept")).await.expect("check");
    assert!(stat.is_some(), "/kept survived the restart");
}
