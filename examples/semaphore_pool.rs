//! N users of a resource that takes at most 2 at once: a semaphore of 2 leases, 6 tasks, each on
//! its own session, and a count of how many are inside at the same time.
//!
//! `cargo run -p zk-recipes-examples --example semaphore_pool` (uses `ZK_CONNECT`, or an embedded ZooKeeper).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes::framework::{Deadline, Framework};
use zk_recipes::semaphore::Semaphore;

mod support;

const LEASES: u32 = 2;
const USERS: usize = 6;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    support::init_logging();
    let (connect, _embedded) = support::zookeeper().await?;
    let inside = Arc::new(AtomicUsize::new(0));
    let most = Arc::new(AtomicUsize::new(0));
    let users: Vec<_> = (0..USERS)
        .map(|user| {
            let (connect, inside, most) = (connect.clone(), inside.clone(), most.clone());
            tokio::spawn(async move {
                let framework =
                    Framework::builder(connect.as_str()).namespace("zk-recipes-example").start()?;
                framework.block_until_connected(Duration::from_secs(15)).await?;
                let pool = Semaphore::new(&framework, "/pools/printer", LEASES)?;
                let lease = pool.acquire_timeout(Duration::from_secs(30)).await?;
                let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                most.fetch_max(now, Ordering::SeqCst);
                println!("user {user} got a lease ({now} inside)");
                tokio::time::sleep(Duration::from_millis(150)).await; // use the resource
                inside.fetch_sub(1, Ordering::SeqCst);
                lease.release().await?;
                framework.close().await;
                Ok::<_, Box<dyn std::error::Error + Send + Sync>>(())
            })
        })
        .collect();
    for user in users {
        user.await??;
    }
    let most = most.load(Ordering::SeqCst);
    println!("at most {most} users at once (the semaphore allows {LEASES})");
    assert!(most <= LEASES as usize, "never more than the leases");

    let framework = Framework::builder(connect.as_str()).namespace("zk-recipes-example").start()?;
    framework.block_until_connected(Duration::from_secs(15)).await?;
    framework.delete_recursive("/pools", Deadline::after(Duration::from_secs(10))).await?;
    framework.close().await;
    Ok(())
}
