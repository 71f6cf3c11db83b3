//! Workers sharing jobs through per-job locks: each job is run by exactly one worker, whatever
//! the timing. Shows `lock_timeout` (an `Err` when it expires, not `false`), fencing tokens, and a
//! guarded write that commits only while our lock node still exists.
//!
//! `cargo run -p zk-recipes-examples --example job_locks` (uses `ZK_CONNECT`, or an embedded ZooKeeper).

use std::time::Duration;

use zk_recipes::framework::zookeeper_client::CreateMode;
use zk_recipes::framework::{Deadline, Framework};
use zk_recipes::mutex::{Hold, LockError, Mutex, TransactionOp};

mod support;

const JOBS: usize = 6;
const WORKERS: usize = 3;

/// One worker: for every job, take its lock (giving up after 2 s), run it unless it is done, and
/// record the result in one multi with a check of our lock node.
async fn worker(
    connect: String,
    worker: usize,
) -> Result<Vec<String>, Box<dyn std::error::Error + Send + Sync>> {
    let framework = Framework::builder(connect.as_str()).namespace("zk-recipes-example").start()?;
    framework.block_until_connected(Duration::from_secs(15)).await?;
    let mut ran = Vec::new();
    for job in (0..JOBS).map(|index| (index + worker) % JOBS) {
        let lock = Mutex::new(&framework, &format!("/jobs/job-{job}/lock"))?;
        let guard = match lock.lock_timeout(Duration::from_secs(2)).await {
            Ok(guard) => guard,
            Err(err) if err.is_timeout() => continue, // someone is on it; try the next job
            Err(err) => return Err(err.into()),
        };
        let done = format!("/jobs/job-{job}/done");
        if framework.exists(&done, Deadline::after(Duration::from_secs(5))).await?.is_none() {
            // "Run" the job, then commit its result only if we still hold the lock, stamped with
            // our fencing token (a store downstream would reject tokens lower than it has seen).
            let result = format!("worker {worker}, token {}", guard.fencing_token());
            let write =
                TransactionOp::Create { path: done, data: result.into_bytes(), mode: CreateMode::Persistent };
            match guard.write_guarded(&[write], Deadline::after(Duration::from_secs(5))).await {
                Ok(_) => ran.push(format!("job-{job}")),
                Err(LockError::NodeLost { .. }) => eprintln!("worker {worker}: lost job-{job}'s lock"),
                Err(err) => return Err(err.into()),
            }
        }
        guard.release().await?;
    }
    framework.close().await;
    Ok(ran)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    support::init_logging();
    let (connect, _embedded) = support::zookeeper().await?;
    let workers: Vec<_> = (0..WORKERS).map(|index| tokio::spawn(worker(connect.clone(), index))).collect();
    let mut all = Vec::new();
    for (index, handle) in workers.into_iter().enumerate() {
        let ran = handle.await??;
        println!("worker {index} ran {ran:?}");
        all.extend(ran);
    }
    all.sort();
    all.dedup();
    println!("{} jobs, each run once: {}", JOBS, all.len() == JOBS);
    assert_eq!(all.len(), JOBS, "every job ran exactly once");

    let framework = Framework::builder(connect.as_str()).namespace("zk-recipes-example").start()?;
    framework.block_until_connected(Duration::from_secs(15)).await?;
    framework.delete_recursive("/jobs", Deadline::after(Duration::from_secs(10))).await?;
    framework.close().await;
    Ok(())
}
