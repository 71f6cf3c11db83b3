//! A periodic task only the leader runs: two service instances elect a leader with
//! `LeaderLatch`; the leader ticks until it loses leadership, and a graceful shutdown (closing
//! the latch) hands leadership to the other instance at once.
//!
//! `cargo run -p zk-recipes-examples --example leader_service` (uses `ZK_CONNECT`, or an embedded ZooKeeper).

use std::time::Duration;

use zk_recipes::framework::Framework;
use zk_recipes::leader::{CloseMode, LeaderLatch, LeadershipEvent};

mod support;

/// Runs the periodic task while `latch` leads; returns how many ticks it ran.
async fn run_while_leader(latch: &LeaderLatch, name: &str) -> usize {
    let mut events = latch.subscribe();
    let mut ticks = 0;
    if latch.await_leadership().await.is_err() {
        return 0; // closed before it led
    }
    println!("{name}: leading (fencing token {:?})", latch.fencing_token());
    let mut interval = tokio::time::interval(Duration::from_millis(100));
    loop {
        tokio::select! {
            _ = interval.tick() => {
                ticks += 1; // the periodic work; pass latch.fencing_token() to what it writes
            }
            event = events.next() => match event {
                Some(LeadershipEvent::NotLeader { reason }) => {
                    println!("{name}: not leader any more ({reason:?}): stopping the task");
                    return ticks;
                }
                None => return ticks, // the latch was closed
                Some(_) => {}
            },
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    support::init_logging();
    let (connect, _embedded) = support::zookeeper().await?;
    let start = |id: &'static str| {
        let connect = connect.clone();
        async move {
            let framework = Framework::builder(connect.as_str()).namespace("zk-recipes-example").start()?;
            framework.block_until_connected(Duration::from_secs(15)).await?;
            let latch = LeaderLatch::new(&framework, "/services/report/leader", id)?;
            latch.start()?;
            Ok::<_, Box<dyn std::error::Error + Send + Sync>>((framework, latch))
        }
    };
    let (first_framework, first) = start("instance-a").await?;
    let (second_framework, second) = start("instance-b").await?;
    let (first, second) = (std::sync::Arc::new(first), std::sync::Arc::new(second));

    // The first instance leads and ticks; the second waits its turn.
    let leading = tokio::spawn({
        let first = first.clone();
        async move { run_while_leader(&first, "instance-a").await }
    });
    let waiting = tokio::spawn({
        let second = second.clone();
        async move { run_while_leader(&second, "instance-b").await }
    });
    tokio::time::sleep(Duration::from_millis(600)).await;
    // Graceful shutdown: NotifyLeader stops our own task first, then the node's delete hands over.
    first.close(CloseMode::NotifyLeader).await?;
    println!("instance-a: shut down after {} ticks", leading.await?);
    first_framework.close().await;

    tokio::time::sleep(Duration::from_millis(500)).await;
    println!("instance-b leads: {}", second.has_leadership());
    assert!(second.has_leadership(), "leadership moved to the other instance");
    second.close(CloseMode::NotifyLeader).await?;
    let ticks = waiting.await?;
    println!("instance-b ran {ticks} ticks while it led");
    second_framework.close().await;
    Ok(())
}
