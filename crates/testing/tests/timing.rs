//! Start-up times, for the record: `cargo test -p zk-recipes-testing --test timing -- --ignored --nocapture`.

use std::time::{Duration, Instant};

use zk_recipes_testing::{within_for, TestingCluster, TestingServer, SERVER_START};

fn median(mut samples: Vec<Duration>) -> Duration {
    samples.sort();
    samples[samples.len() / 2]
}

#[tokio::test]
#[ignore = "measurement, not a check; run with --ignored --nocapture"]
async fn start_times() {
    let mut server_starts = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let server =
            within_for(SERVER_START, "starting a server", TestingServer::start()).await.expect("start");
        server_starts.push(started.elapsed());
        drop(server);
    }
    let mut cluster_starts = Vec::new();
    for _ in 0..5 {
        let started = Instant::now();
        let cluster =
            within_for(SERVER_START, "starting a cluster", TestingCluster::start(3)).await.expect("start");
        cluster_starts.push(started.elapsed());
        drop(cluster);
    }
    eprintln!(
        "TestingServer::start  (spawn -> imok + Mode):        {server_starts:?} median {:?}",
        median(server_starts.clone())
    );
    eprintln!(
        "TestingCluster::start(3) (spawn -> leader, all serve): {cluster_starts:?} median {:?}",
        median(cluster_starts.clone())
    );
}
