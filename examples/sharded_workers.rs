//! Sharded work with the partitioner: three workers share 12 shards, each shard worked on by
//! exactly one worker at a time. When one worker stops, its shards move to the other two once the
//! party has settled, and each shard's new owner gets a larger fencing token than the last.
//!
//! `cargo run -p zk-recipes-examples --example sharded_workers` (uses `ZK_CONNECT`, or an embedded ZooKeeper).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use zk_recipes::framework::Framework;
use zk_recipes::partition::Partitioner;

mod support;

type Error = Box<dyn std::error::Error + Send + Sync>;

const SHARDS: usize = 12;
const PATH: &str = "/services/indexer/shards";

/// One worker: its own session, a partitioner over the shards, and a task per owned shard.
struct Worker {
    name: String,
    framework: Framework,
    partitioner: Partitioner,
}

/// Which worker works on each shard now, and with which fencing token (as the work itself would
/// stamp its writes).
type Board = Arc<Mutex<BTreeMap<String, (String, i64)>>>;

async fn start_worker(connect: &str, name: &str, board: &Board) -> Result<Worker, Error> {
    let framework = Framework::builder(connect).namespace("zk-recipes-example").start()?;
    framework.block_until_connected(Duration::from_secs(15)).await?;
    let shards: Vec<String> = (0..SHARDS).map(|shard| format!("shard-{shard:02}")).collect();
    let partitioner = Partitioner::builder(&framework, PATH, shards)
        .identifier(name)
        .settle(Duration::from_secs(1)) // move shards once the party has been still this long
        .start()?;
    let (owner, board) = (name.to_string(), board.clone());
    partitioner.run(move |shard, fencing_token| {
        let (owner, board) = (owner.clone(), board.clone());
        async move {
            // The shard's work. It is dropped when the shard moves, before its lock is released.
            let _entry = BoardEntry::claim(&board, &shard, &owner, fencing_token);
            std::future::pending::<()>().await;
        }
    })?;
    Ok(Worker { name: name.to_string(), framework, partitioner })
}

/// A shard's line on the board while its work runs; two workers on one shard would be a bug,
/// counted in `DOUBLE_CLAIMS` (a panic in a shard's task would only end that task) and checked at
/// the end.
struct BoardEntry {
    board: Board,
    shard: String,
}

static DOUBLE_CLAIMS: AtomicUsize = AtomicUsize::new(0);

impl BoardEntry {
    fn claim(board: &Board, shard: &str, owner: &str, fencing_token: i64) -> Self {
        let previous = board.lock().insert(shard.to_string(), (owner.to_string(), fencing_token));
        if let Some((other, _)) = previous {
            eprintln!("{shard} worked on by {other} and {owner} at once");
            DOUBLE_CLAIMS.fetch_add(1, Ordering::SeqCst);
        }
        Self { board: board.clone(), shard: shard.to_string() }
    }
}

impl Drop for BoardEntry {
    fn drop(&mut self) {
        self.board.lock().remove(&self.shard);
    }
}

/// Waits (at most 30 s) until every shard is worked on, split as evenly as `workers` allows.
async fn wait_for_even_split(board: &Board, workers: &[&Worker]) -> Result<(), Error> {
    let even = |board: &BTreeMap<String, (String, i64)>| {
        let per_worker =
            workers.iter().map(|worker| board.values().filter(|(owner, _)| *owner == worker.name).count());
        board.len() == SHARDS && per_worker.into_iter().all(|count| count >= SHARDS / workers.len())
    };
    tokio::time::timeout(Duration::from_secs(30), async {
        while !even(&board.lock()) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await
    .map_err(|_| format!("the shards were not split among {} workers within 30 s", workers.len()))?;
    Ok(())
}

fn print_board(board: &Board) {
    for (shard, (owner, fencing_token)) in board.lock().iter() {
        println!("  {shard}: {owner} (fencing token {fencing_token})");
    }
}

#[tokio::main]
async fn main() -> Result<(), Error> {
    support::init_logging();
    let (connect, _embedded) = support::zookeeper().await?;
    let board = Board::default();
    let a = start_worker(&connect, "worker-a", &board).await?;
    let b = start_worker(&connect, "worker-b", &board).await?;
    let c = start_worker(&connect, "worker-c", &board).await?;

    wait_for_even_split(&board, &[&a, &b, &c]).await?;
    println!("three workers, {SHARDS} shards:");
    print_board(&board);
    let tokens_before: BTreeMap<String, (String, i64)> = board.lock().clone();

    // worker-c stops: its shards' work ends and their locks are released; the others take them
    // once the party has settled.
    c.partitioner.close(Duration::from_secs(10)).await?;
    c.framework.close().await;
    println!("worker-c stopped");
    wait_for_even_split(&board, &[&a, &b]).await?;
    println!("two workers, {SHARDS} shards:");
    print_board(&board);
    for (shard, (owner, fencing_token)) in board.lock().iter() {
        let (previous_owner, previous_token) = &tokens_before[shard];
        if previous_owner == "worker-c" {
            assert!(fencing_token > previous_token, "{shard}: a new owner's token grows");
            println!("{shard} moved from worker-c to {owner}");
        }
    }

    for worker in [a, b] {
        worker.partitioner.close(Duration::from_secs(10)).await?;
        worker.framework.close().await;
    }
    let double_claims = DOUBLE_CLAIMS.load(Ordering::SeqCst);
    assert_eq!(double_claims, 0, "no shard is worked on by two workers at once");
    Ok(())
}
