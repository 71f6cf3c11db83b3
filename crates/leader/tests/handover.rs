//! Hand-over measurements (ignored by default):
//! `cargo test -p zk-recipes-leader --test handover -- --ignored --nocapture`.

mod common;

use std::time::Duration;

use common::*;
use tokio::time::Instant;
use zk_recipes_framework::ErrorPolicy;
use zk_recipes_leader::{CloseMode, LeaderLatch, LeadershipEvent};
use zk_recipes_testing::{FaultProxy, TestingServer};

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * fraction).round() as usize]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "a measurement: run with --ignored --nocapture"]
async fn hand_over_times() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");

    // Graceful: the leader closes; time until the next participant's listener hears it leads.
    let frameworks: Vec<_> = (0..2)
        .map(|_| framework(&server.connect_string(), Duration::from_secs(10), ErrorPolicy::Standard))
        .collect();
    let path = "/handover/latch";
    let mut leader = LeaderLatch::new(&frameworks[0], path, "l0").expect("latch");
    leader.start().expect("start");
    within("leads", leader.await_leadership()).await.expect("leads");
    let mut follower = LeaderLatch::new(&frameworks[1], path, "l1").expect("latch");
    follower.start().expect("start");
    let mut samples = Vec::new();
    for round in 0..60usize {
        eventually("two participants", || async { children(&frameworks[0], path).await.len() == 2 }).await;
        let mut events = follower.subscribe();
        let started = Instant::now();
        let (closed, led) = tokio::join!(leader.close(CloseMode::Silent), async {
            loop {
                match events.next().await {
                    Some(LeadershipEvent::IsLeader { .. }) => return Instant::now(),
                    Some(_) => {}
                    None => panic!("follower closed"),
                }
            }
        });
        closed.expect("close");
        samples.push(led - started);
        leader = follower;
        follower = LeaderLatch::new(&frameworks[round % 2], path, format!("l{}", round + 2)).expect("latch");
        follower.start().expect("start");
    }
    within("close", leader.close(CloseMode::Silent)).await.expect("close");
    within("close", follower.close(CloseMode::Silent)).await.expect("close");
    samples.sort();
    eprintln!(
        "graceful close -> new leader over {} hand-overs: p50 {:?}, p90 {:?}, min {:?}, max {:?}",
        samples.len(),
        percentile(&samples, 0.5),
        percentile(&samples, 0.9),
        samples[0],
        samples[samples.len() - 1]
    );

    // Baselines on the same server: one create + delete of a plain ephemeral node, one listing.
    let mut deletes = Vec::new();
    let mut listings = Vec::new();
    for _ in 0..60 {
        let session =
            frameworks[0].session(zk_recipes_framework::Deadline::after(STEP)).await.expect("session");
        let options = session.create_options(zk_recipes_framework::zookeeper_client::CreateMode::Ephemeral);
        session.client().create("/handover-baseline", b"", &options).await.expect("create");
        let started = Instant::now();
        session.client().delete("/handover-baseline", None).await.expect("delete");
        deletes.push(started.elapsed());
        let started = Instant::now();
        session.client().list_children("/").await.expect("list");
        listings.push(started.elapsed());
    }
    deletes.sort();
    listings.sort();
    eprintln!(
        "baseline round trips: delete p50 {:?}, list p50 {:?}",
        percentile(&deletes, 0.5),
        percentile(&listings, 0.5)
    );
    for framework in frameworks {
        within("close", framework.close()).await;
    }

    // Crash without SIGKILL: the leader's connection is black-holed; time until the other leads.
    let session_timeout = Duration::from_secs(2);
    let mut crashes = Vec::new();
    for round in 0..5 {
        let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
        let crashed_framework = framework(&proxy.connect_string(), session_timeout, ErrorPolicy::Standard);
        let other_framework = framework(&server.connect_string(), session_timeout, ErrorPolicy::Standard);
        let path = format!("/crash{round}/latch");
        let crashed = LeaderLatch::new(&crashed_framework, &path, "crashed").expect("latch");
        crashed.start().expect("start");
        within("leads", crashed.await_leadership()).await.expect("leads");
        let other = LeaderLatch::new(&other_framework, &path, "other").expect("latch");
        other.start().expect("start");
        eventually("two participants", || async { children(&other_framework, &path).await.len() == 2 }).await;
        let started = Instant::now();
        proxy.black_hole(Duration::from_secs(60));
        within("the other leads", other.await_leadership()).await.expect("leads");
        crashes.push(started.elapsed());
        proxy.heal();
        within("close", crashed.close(CloseMode::Silent)).await.expect("close");
        within("close", other.close(CloseMode::Silent)).await.expect("close");
        within("close", crashed_framework.close()).await;
        within("close", other_framework.close()).await;
    }
    crashes.sort();
    eprintln!(
        "crash (black hole) -> new leader, session timeout {session_timeout:?}: {crashes:?} (p50 {:?})",
        percentile(&crashes, 0.5)
    );
}
