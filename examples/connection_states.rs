//! Reacting to the connection: `Suspended` (the connection broke; the session may live, so a held
//! lock can no longer be trusted), `Reconnected` (same session, or a new one after `Lost`), and
//! `Lost` (the session expired: its ephemeral nodes are gone). A fault proxy between us and the
//! server makes each happen.
//!
//! `cargo run -p zk-recipes-examples --example connection_states` (uses `ZK_CONNECT`, or an embedded
//! ZooKeeper).

use std::time::Duration;

use zk_recipes::framework::{ConnectionState, ConnectionUpdate, Framework};
use zk_recipes::mutex::{Hold, Mutex};
use zk_recipes_testing::FaultProxy;

mod support;

/// Prints connection events until `until` arrives.
async fn wait_for(events: &mut zk_recipes::framework::ConnectionEvents, until: ConnectionState) {
    while let Some(update) = events.next().await {
        match update {
            ConnectionUpdate::Changed(event) => {
                println!(
                    "  {:?} (session {}, generation {})",
                    event.state, event.session_id, event.generation
                );
                if event.state == until {
                    return;
                }
            }
            ConnectionUpdate::Lagged { .. } => {
                println!("  (events were missed: look at framework.current())")
            }
        }
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    support::init_logging();
    let (connect, _embedded) = support::zookeeper().await?;
    let proxy = FaultProxy::start(connect.as_str()).await?;
    let framework = Framework::builder(proxy.connect_string())
        .namespace("zk-recipes-example")
        .session_timeout(Duration::from_secs(2))
        .start()?;
    let mut events = framework.connection_events();
    wait_for(&mut events, ConnectionState::Connected).await;
    let guard =
        Mutex::new(&framework, "/locks/connection-demo")?.lock_timeout(Duration::from_secs(5)).await?;

    println!("a short cut: Suspended, then Reconnected on the same session");
    // `lost()` resolves while the hold is unsafe: wait on it from before the cut (as the task
    // that uses the lock would), or a cut that has healed by the time it is called goes unseen.
    let (reason, ()) = tokio::join!(guard.lost(), async {
        proxy.black_hole(Duration::from_millis(700));
        wait_for(&mut events, ConnectionState::Suspended).await;
    });
    println!("  the lock's lost() says: {reason:?} (stop using what it protects)");
    wait_for(&mut events, ConnectionState::Reconnected).await;

    println!("a cut past the session timeout: Lost, then Reconnected with a new session");
    let timeout = framework.current().session_timeout.unwrap_or(Duration::from_secs(2));
    proxy.black_hole(timeout * 3);
    wait_for(&mut events, ConnectionState::Lost).await;
    wait_for(&mut events, ConnectionState::Reconnected).await;
    match guard.release().await {
        Err(err) => println!("  releasing the old hold: {err} (it went with its session)"),
        Ok(()) => println!("  released"),
    }
    framework.close().await;
    Ok(())
}
