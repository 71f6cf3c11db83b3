//! The mutex under faults and at scale, against real ZooKeeper servers.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{path, Deadline, Framework};
use zk_recipes_mutex::{Mutex, MutexGuard};
use zk_recipes_testing::{TestingCluster, TestingServer};

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
