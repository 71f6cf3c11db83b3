//! Double-barrier rounds: our `DistributedDoubleBarrier` against the raw protocol floor and Curator
//! 5.4's on the same ZooKeeper server, in one run.
//!
//! ```sh
//! cargo bench -p zk-recipes-benches --bench barriers                      # 3 interleaved rounds
//! cargo bench -p zk-recipes-benches --bench barriers -- --rounds 5 --barrier-rounds 50
//! ```
//!
//! Uses `ZK_CONNECT` if set, else starts a `TestingServer` with both JVMs compiling as in
//! production (see `support`). N members (4, then 16; one session and one task or thread each)
//! loop `--barrier-rounds` rounds of enter + leave on one barrier of N, each member starting a
//! round once all left the last one (an in-process barrier, on every side: Curator 5.4's
//! deadlocks when a member enters the next round while others still leave); reported: rounds per
//! second (from the start to the last member's last leave).
//!
//! - Ours: `DistributedDoubleBarrier::enter`, then `Entered::leave`.
//! - Curator's: a new `DistributedDoubleBarrier` per round (its object reused lets members in
//!   early, GH-1290: see tests/interop_barrier.rs), `enter` + `leave` (the driver's
//!   `bench-double-barrier`, timed in the JVM from after the clients connected).
//! - The floor: our double barrier's protocol (`crates/barrier/src/double.rs`) on bare calls.
//!   Enter: a persistent watch on the barrier path (added per enter, removed after, as ours),
//!   an EPHEMERAL member node, then a listing: `ready` there means in (one `exists` for its
//!   czxid); N members there, create `ready` (its czxid); else wait for the watch and list again.
//!   Leave: the persistent watch again, then list and delete the member node in Curator's order
//!   (at once unless it is the lowest listed; the lowest keeps it until it is alone): no other
//!   member left, delete `ready` if still this round's (`exists`, then a versioned delete); `ready` gone or replaced
//!   and no member created before it left, done; else wait for the watch and list again.
//!
//! Each round of the bench runs every size for ours, the floor and Curator, taking turns going
//! first; medians over the rounds and ratios (of the medians, and in brackets the median of the
//! per-round ratios) are printed. With `--json PATH` (or `ZKR_BENCH_JSON`) each is also appended
//! as JSON lines (`bench` = `barriers`, `scenario` = `double`, `param` = `members`, unit
//! rounds/s).

use std::sync::Arc;
use std::time::{Duration, Instant};

use zk_recipes::barrier::{DistributedDoubleBarrier, READY_NODE};
use zk_recipes::framework::zookeeper_client::{self, AddWatchMode, Client, CreateMode};
use zk_recipes::framework::{Deadline, Framework};

mod support;

/// The sides measured, in their JSON names: ours, the raw floor, Curator's.
const SIDES: [&str; 3] = ["ours", "floor", "curator"];
/// Barrier sizes (members per barrier).
const SIZES: [usize; 2] = [4, 16];
/// How long one enter, leave or run may take.
const STEP: Duration = Duration::from_secs(300);

/// Double-barrier rounds, ours against the floor and Curator's (the module docs say what runs).
#[derive(clap::Parser, Debug)]
#[command(name = "barriers", bin_name = "cargo bench -p zk-recipes-benches --bench barriers --")]
struct Args {
    /// Interleaved rounds of the bench; medians over them are reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Barrier rounds (enter + leave) per run.
    #[arg(long, default_value_t = 30)]
    barrier_rounds: usize,
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

/// One floor member: our double barrier's protocol on one bare session.
struct RawMember {
    client: Client,
    dir: String,
    ready: String,
    members: usize,
    index: usize,
}

impl RawMember {
    /// Enters, then leaves, round `round`.
    async fn round(&self, round: usize) {
        let member_name = format!("{:08x}-0000-4000-8000-{round:012x}", self.index);
        let member = format!("{}/{member_name}", self.dir);
        let ready_czxid = self.enter(&member, &member_name).await;
        self.leave(&member, &member_name, ready_czxid).await;
    }

    async fn enter(&self, member: &str, member_name: &str) -> i64 {
        let mut watcher = self.client.watch(&self.dir, AddWatchMode::Persistent).await.expect("watch");
        self.client
            .create(member, b"", &support::anyone(CreateMode::Ephemeral))
            .await
            .expect("the member node");
        loop {
            let children = self.client.list_children(&self.dir).await.expect("list");
            assert!(children.iter().any(|child| child == member_name), "our member node is there");
            if children.iter().any(|child| child == READY_NODE) {
                match self.client.check_stat(&self.ready).await.expect("exists") {
                    Some(stat) => return stat.czxid,
                    None => continue,
                }
            }
            let members = children.iter().filter(|child| *child != READY_NODE).count();
            if members >= self.members {
                match self.client.create(&self.ready, b"", &support::anyone(CreateMode::Persistent)).await {
                    Ok((stat, _)) => return stat.czxid,
                    Err(zookeeper_client::Error::NodeExists) => continue,
                    Err(err) => panic!("creating ready: {err}"),
                }
            }
            watcher.changed().await;
        }
    }

    /// Leaves in Curator's order: the lowest member listed keeps its node until it is alone,
    /// the others delete theirs at once.
    async fn leave(&self, member: &str, member_name: &str, ready_czxid: i64) {
        let mut watcher = self.client.watch(&self.dir, AddWatchMode::Persistent).await.expect("watch");
        let mut ours_there = true;
        loop {
            let children = self.client.list_children(&self.dir).await.expect("list");
            let members: Vec<&String> = children.iter().filter(|child| *child != READY_NODE).collect();
            let others: Vec<&String> = members.iter().copied().filter(|name| *name != member_name).collect();
            let lowest = members.iter().min().is_some_and(|name| *name == member_name);
            if ours_there && (others.is_empty() || !lowest) {
                self.client.delete(member, None).await.expect("delete the member node");
                ours_there = false;
            }
            if others.is_empty() {
                if let Some(stat) = self.client.check_stat(&self.ready).await.expect("exists") {
                    if stat.czxid == ready_czxid {
                        match self.client.delete(&self.ready, Some(stat.version)).await {
                            Ok(())
                            | Err(zookeeper_client::Error::BadVersion | zookeeper_client::Error::NoNode) => {}
                            Err(err) => panic!("deleting ready: {err}"),
                        }
                    }
                }
                return;
            }
            let ready = if children.iter().any(|child| child == READY_NODE) {
                self.client.check_stat(&self.ready).await.expect("exists")
            } else {
                None
            };
            let round_open = ready.is_some_and(|stat| stat.czxid == ready_czxid);
            if !round_open && !self.any_entered_before(&others, ready_czxid).await {
                if ours_there {
                    self.client.delete(member, None).await.expect("delete the member node");
                }
                return;
            }
            watcher.changed().await;
        }
    }

    /// Whether one of `members` was created before this round's `ready` node.
    async fn any_entered_before(&self, members: &[&String], ready_czxid: i64) -> bool {
        for member in members {
            let path = format!("{}/{member}", self.dir);
            if let Some(stat) = self.client.check_stat(&path).await.expect("exists") {
                if stat.czxid < ready_czxid {
                    return true;
                }
            }
        }
        false
    }
}

/// One member of a run: ours or the floor's.
enum Member {
    Ours(DistributedDoubleBarrier),
    Floor(RawMember),
}

impl Member {
    /// One barrier round: enter, then leave.
    async fn round(&self, round: usize) {
        match self {
            Member::Ours(barrier) => {
                let entered = barrier.enter(Deadline::after(STEP)).await.expect("enter");
                entered.leave(Deadline::after(STEP)).await.expect("leave");
            }
            Member::Floor(raw) => raw.round(round).await,
        }
    }
}

/// Ours (or with `floor`, the floor): `members` sessions, `rounds` rounds each; rounds/s.
async fn measure(connect: &str, path: &str, members: usize, rounds: usize, floor: bool) -> f64 {
    let mut frameworks: Vec<Framework> = Vec::new();
    for _ in 0..members {
        frameworks.push(support::start_framework(connect).await);
    }
    let mut joined = Vec::new();
    for (index, framework) in frameworks.iter().enumerate() {
        joined.push(if floor {
            let client = support::bare_client(framework).await;
            if index == 0 {
                support::ensure_dir(&client, path).await;
            }
            let ready = format!("{path}/{READY_NODE}");
            Member::Floor(RawMember { client, dir: path.to_owned(), ready, members, index })
        } else {
            Member::Ours(DistributedDoubleBarrier::new(framework, path, members).expect("barrier"))
        });
    }
    let started = Instant::now();
    let round_done = Arc::new(tokio::sync::Barrier::new(members));
    let tasks: Vec<_> = joined
        .into_iter()
        .map(|member| {
            let round_done = round_done.clone();
            tokio::spawn(async move {
                for round in 0..rounds {
                    member.round(round).await;
                    round_done.wait().await;
                }
            })
        })
        .collect();
    for task in tasks {
        tokio::time::timeout(STEP, task).await.expect("the run ends").expect("member");
    }
    let elapsed = started.elapsed();
    for framework in frameworks {
        framework.close().await;
    }
    rounds as f64 / elapsed.as_secs_f64()
}

/// Curator's run (the driver's `bench-double-barrier`): its `ops=`, or why it failed. Curator 5.4's
/// double barrier can time out in `leave` (its member node and `ready` race between rounds); a
/// failed run is reported as such, not measured, and the bench goes on.
async fn curator(connect: &str, path: &str, members: usize, rounds: usize) -> Result<f64, String> {
    let args = [
        "bench-double-barrier".to_owned(),
        connect.to_owned(),
        path.to_owned(),
        members.to_string(),
        rounds.to_string(),
    ];
    let mut driver = support::spawn_curator(&args);
    driver.expect_line("READY", STEP).await.map_err(|err| format!("READY: {err}"))?;
    driver.send_line("go").await.map_err(|err| format!("go: {err}"))?;
    let line = match driver.expect_line("RESULT", STEP).await {
        Ok(line) => line,
        Err(err) => {
            let _ = driver.wait(Duration::from_secs(60)).await;
            let failure = err.to_string();
            let reason =
                failure.lines().find(|line| line.contains("timed out")).unwrap_or(&failure).to_owned();
            eprintln!("Curator's double barrier failed ({members} members): {reason}");
            return Err(reason);
        }
    };
    let status = driver.wait(Duration::from_secs(60)).await.expect("the Curator driver exits");
    assert!(status.success(), "the Curator driver failed: {status}\n{}", driver.log_tail(30));
    Ok(support::field(&line, "ops").unwrap_or_else(|| panic!("no ops= in {line:?}")))
}

#[tokio::main]
async fn main() {
    let args: Args = support::parse();
    let json = support::JsonLines::new("barriers", &args.json);
    let smoke = args.harness.is_smoke_run();
    let (rounds, barrier_rounds) = if smoke { (1, 2) } else { (args.rounds, args.barrier_rounds) };
    // A smoke run tries the small barrier only.
    let sizes = if smoke { &SIZES[..1] } else { &SIZES[..] };
    let (connect, _server) = support::server(None).await;
    // [size][side] -> rounds/s per bench round.
    let mut results: Vec<[Vec<f64>; 3]> = sizes.iter().map(|_| [vec![], vec![], vec![]]).collect();
    // [size] -> Curator's failed runs (the reason of each).
    let mut curator_failures: Vec<Vec<String>> = sizes.iter().map(|_| Vec::new()).collect();
    for round in 0..rounds {
        eprintln!("round {} of {rounds}", round + 1);
        for (index, members) in sizes.iter().enumerate() {
            for turn in 0..SIDES.len() {
                let side = (turn + round) % SIDES.len();
                let path = format!("/bench/barriers/{}-{members}-{round}", SIDES[side]);
                let rate = match SIDES[side] {
                    "curator" => match curator(&connect, &path, *members, barrier_rounds).await {
                        Ok(rate) => rate,
                        Err(reason) => {
                            curator_failures[index].push(reason);
                            continue;
                        }
                    },
                    name => measure(&connect, &path, *members, barrier_rounds, name == "floor").await,
                };
                results[index][side].push(rate);
            }
        }
    }

    println!(
        "\ndouble barrier, {barrier_rounds} rounds (enter + leave) per run, medians of {rounds} interleaved rounds \
         (ratios: of the medians [median of the per-round ratios]):"
    );
    println!(
        "{:<8} {:>12} {:>12} {:>14} {:>14} {:>16}",
        "members", "ours rnd/s", "floor rnd/s", "Curator rnd/s", "ours / floor", "ours / Curator",
    );
    let median = |values: &[f64]| if values.is_empty() { f64::NAN } else { support::median(values) };
    let ratios = |a: &[f64], b: &[f64]| {
        if b.len() != a.len() {
            // Rounds with a failed side do not pair up.
            return format!("{:.2}", median(a) / median(b));
        }
        let per_round: Vec<f64> = a.iter().zip(b).map(|(a, b)| a / b).collect();
        format!("{:.2} [{:.2}]", median(a) / median(b), median(&per_round))
    };
    for (index, members) in sizes.iter().enumerate() {
        let [ours, floor, theirs] = &results[index];
        println!(
            "{:<8} {:>12.1} {:>12.1} {:>14.1} {:>14} {:>16}",
            members,
            median(ours),
            median(floor),
            median(theirs),
            ratios(ours, floor),
            ratios(ours, theirs),
        );
        for (side, runs) in SIDES.iter().zip(&results[index]) {
            let mut fields =
                serde_json::json!({ "param": "members", "value": members, "barrier_rounds": barrier_rounds });
            if *side == "curator" && !curator_failures[index].is_empty() {
                fields["failed_runs"] = serde_json::json!(curator_failures[index].len());
                fields["failure"] = serde_json::json!(curator_failures[index][0]);
            }
            if runs.is_empty() {
                json.emit("double", side, fields);
            } else {
                json.emit_series("double", side, "rounds/s", runs, fields);
            }
        }
        if !curator_failures[index].is_empty() {
            println!(
                "{:<8} Curator failed {} of {rounds} runs: {}",
                "",
                curator_failures[index].len(),
                curator_failures[index][0]
            );
        }
        println!("{:<8} rounds: ours {:.1?}, floor {:.1?}, Curator {:.1?}", "", ours, floor, theirs);
    }
}
