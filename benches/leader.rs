//! Leader hand-over times: our `LeaderLatch` against the raw protocol floor and Curator 5.4's on the
//! same ZooKeeper server, in one run.
//!
//! ```sh
//! cargo bench -p zk-recipes-benches --bench leader                    # 3 interleaved rounds
//! cargo bench -p zk-recipes-benches --bench leader -- --rounds 5 --hand-overs 100 --warm-up-hand-overs 500 \
//!     --session-ms 2000
//! ```
//!
//! Starts a `TestingServer` with both JVMs compiling as in production (see `support`; tick 200 ms, so an expired session is noticed within 200 ms of its
//! deadline). Two scenarios, each for us and for Curator (and the graceful one for the floor), the
//! sides taking turns going first:
//! - **graceful**: two participants (one session each) rotate: close the leader's latch, measure
//!   until the other's leadership callback (ours: the `IsLeader` event on its subscription;
//!   Curator: `LeaderLatchListener.isLeader`, the driver's `bench-latch`), rejoin the closed side,
//!   repeat. After 500 untimed hand-overs (warm-up, both sides), p50 and p90 over the timed
//!   hand-overs of a round; medians over the rounds.
//!   The floor (JSON client `floor`, graceful only, taking turns going first with the other two):
//!   the latch's protocol on two bare sessions (as `crates/leader/src/latch/election.rs`): each
//!   joins with a protected EPHEMERAL_SEQUENTIAL `latch-` node, lists, and sets a data watch on its
//!   own node when first, else on the node just before it; the leader deletes its node, and the
//!   hand-over is timed until the follower's watch fired and its listing again (which ours makes
//!   before it declares leadership) returned; then, untimed, the new leader watches its own node
//!   and the closed side joins again.
//! - **crash**: a Curator latch in its own JVM leads (session timeout `--session-ms`); the
//!   follower is ours or a Curator latch in another JVM; the leader's JVM is SIGKILLed and we
//!   measure until the follower leads. The server expires the dead session one session timeout
//!   after it last heard from it, so this is bounded by the session timeout; the follower adds
//!   its own reaction time.
//!
//! With `--json PATH` (or `ZKR_BENCH_JSON`) both scenarios are also appended as JSON lines
//! (`bench` = `leader`; `graceful` with `p50_ms`/`p90_ms` and `per_round_p50_ms`/
//! `per_round_p90_ms`, client `ours`, `floor` or `curator`; `crash` with `kill_to_leader_ms`,
//! `expiry_to_leader_ms` and `session_timeout_ms`; medians over the rounds).

use std::time::{Duration, Instant};

use zk_recipes::framework::zookeeper_client::{self, Client, CreateMode, EventType, OneshotWatcher};
use zk_recipes::framework::{Deadline, Framework};
use zk_recipes::leader::{CloseMode, LeaderLatch};
use zk_recipes_testing::CuratorProcess;

mod support;

/// Leader hand-over times, our latch against Curator's (the module docs say what runs).
#[derive(clap::Parser, Debug)]
#[command(name = "leader", bin_name = "cargo bench -p zk-recipes-benches --bench leader --")]
struct Args {
    /// Interleaved rounds; medians over them are reported.
    #[arg(long, default_value_t = 3)]
    rounds: usize,
    /// Timed graceful hand-overs per round and side.
    #[arg(long, default_value_t = 60)]
    hand_overs: usize,
    /// Untimed graceful hand-overs before the timed ones, per round and side.
    #[arg(long, default_value_t = 500)]
    warm_up_hand_overs: usize,
    /// The crashing leader's session timeout, in milliseconds.
    #[arg(long, default_value_t = 2_000)]
    session_ms: u64,
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

struct Options {
    rounds: usize,
    hand_overs: usize,
    warm_up_hand_overs: usize,
    session_ms: u64,
}

impl Options {
    fn new(args: &Args) -> Self {
        if args.harness.is_smoke_run() {
            return Options { rounds: 1, hand_overs: 5, warm_up_hand_overs: 2, session_ms: 1_000 };
        }
        Options {
            rounds: args.rounds,
            hand_overs: args.hand_overs,
            warm_up_hand_overs: args.warm_up_hand_overs,
            session_ms: args.session_ms,
        }
    }
}

const STEP: Duration = Duration::from_secs(30);

async fn start_framework(connect: &str) -> Framework {
    let framework = Framework::builder(connect).start().expect("framework");
    framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");
    framework
}

/// A started latch whose leadership events are timestamped (when the subscriber receives
/// `IsLeader`) into a watch channel.
fn join(
    framework: &Framework,
    path: &str,
    id: &str,
) -> (LeaderLatch, tokio::sync::watch::Receiver<Option<Instant>>) {
    let latch = LeaderLatch::new(framework, path, id).expect("latch");
    let mut events = latch.subscribe();
    let (led_at, receiver) = tokio::sync::watch::channel(None);
    latch.start().expect("start");
    tokio::spawn(async move {
        while let Some(event) = events.next().await {
            if event.is_leader() {
                led_at.send_replace(Some(Instant::now()));
            }
        }
    });
    (latch, receiver)
}

/// Waits until `receiver` holds a time.
async fn led_at(receiver: &mut tokio::sync::watch::Receiver<Option<Instant>>, what: &str) -> Instant {
    let led = tokio::time::timeout(STEP, receiver.wait_for(Option::is_some))
        .await
        .unwrap_or_else(|_| panic!("timed out waiting for {what}"))
        .expect("the latch's watcher");
    led.expect("a time")
}

/// Our graceful hand-overs: durations from `close` to the other's `IsLeader`.
async fn ours_graceful(connect_string: &str, path: &str, warm_up: usize, hand_overs: usize) -> Vec<Duration> {
    let frameworks = [start_framework(connect_string).await, start_framework(connect_string).await];
    let ids = ["a", "b"];
    let mut sides: Vec<_> = (0..2).map(|side| join(&frameworks[side], path, ids[side])).collect();
    let mut durations = Vec::with_capacity(hand_overs);
    for hand_over in 0..warm_up + hand_overs {
        let leader = tokio::time::timeout(STEP, async {
            loop {
                if let Some(side) =
                    (0..2).find(|side| sides[*side].0.has_leadership() && sides[*side].1.borrow().is_some())
                {
                    return side;
                }
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        })
        .await
        .expect("a leader");
        let other = 1 - leader;
        let closing = Instant::now();
        sides[leader].0.close(CloseMode::Silent).await.expect("close");
        let led = led_at(&mut sides[other].1, "the hand-over").await;
        if hand_over >= warm_up {
            durations.push(led.saturating_duration_since(closing));
        }
        sides[leader] = join(&frameworks[leader], path, ids[leader]);
        tokio::time::timeout(STEP, async {
            while sides[leader].0.our_node_path().is_none() {
                tokio::time::sleep(Duration::from_micros(200)).await;
            }
        })
        .await
        .expect("the rejoined latch's node");
    }
    for (latch, _) in &sides {
        latch.close(CloseMode::Silent).await.expect("close");
    }
    for framework in frameworks {
        framework.close().await;
    }
    durations
}

/// The floor's name of a latch node (ours: `latch-`).
const LATCH_NAME: &str = "latch-";

/// A floor participant's node and what it watches: its own node when first (leading), else the
/// node just before it.
struct RawLatch {
    node: String,
    watcher: OneshotWatcher,
    leading: bool,
}

/// The floor's join: the latch's protocol on bare calls. A protected EPHEMERAL_SEQUENTIAL
/// `latch-` node, then [`raw_check`].
async fn raw_join(client: &Client, path: &str, contender: usize) -> RawLatch {
    let prefix = support::protected_prefix(path, contender, LATCH_NAME);
    let options = support::anyone(CreateMode::EphemeralSequential);
    let (_, sequence) =
        client.create(&prefix, contender.to_string().as_bytes(), &options).await.expect("create");
    raw_check(client, path, format!("{prefix}{sequence}")).await
}

/// One look of the latch: list, then a data watch on our own node if first (leading), else on
/// the node just before ours (listing again if that went meanwhile).
async fn raw_check(client: &Client, path: &str, node: String) -> RawLatch {
    let name = node.rsplit('/').next().expect("a name").to_owned();
    loop {
        let mut children = client.list_children(path).await.expect("list");
        children.sort_by_cached_key(|child| support::sequence_of(child));
        let index = children.iter().position(|child| *child == name).expect("our node is listed");
        let watched = if index == 0 { node.clone() } else { format!("{path}/{}", children[index - 1]) };
        match client.get_and_watch_data(&watched).await {
            Ok((_, _, watcher)) => return RawLatch { node, watcher, leading: index == 0 },
            Err(zookeeper_client::Error::NoNode) if index > 0 => continue,
            Err(err) => panic!("watching {watched}: {err}"),
        }
    }
}

/// The floor's graceful hand-overs, on two bare sessions: the leader deletes its node; timed
/// until the follower's watch fired and its listing (which shows it first) returned. Then the
/// new leader watches its own node and the closed side joins again (untimed), as ours do.
async fn floor_graceful(
    connect_string: &str,
    path: &str,
    warm_up: usize,
    hand_overs: usize,
) -> Vec<Duration> {
    let sessions = [support::raw_client(connect_string).await, support::raw_client(connect_string).await];
    let clients = [sessions[0].1.clone(), sessions[1].1.clone()];
    support::ensure_dir(&clients[0], path).await;
    let first = raw_join(&clients[0], path, 0).await;
    let mut latches = [Some(first), Some(raw_join(&clients[1], path, 1).await)];
    let mut durations = Vec::with_capacity(hand_overs);
    for hand_over in 0..warm_up + hand_overs {
        let leader =
            (0..2).find(|side| latches[*side].as_ref().is_some_and(|latch| latch.leading)).expect("a leader");
        let other = 1 - leader;
        let closing = Instant::now();
        let closed = latches[leader].take().expect("the leader's latch");
        let delete = clients[leader].delete(&closed.node, None);
        drop(closed.watcher);
        let follower = latches[other].take().expect("the follower's latch");
        tokio::time::timeout(STEP, follower.watcher.changed()).await.expect("the follower's watch");
        let mut children = clients[other].list_children(path).await.expect("list");
        children.sort_by_cached_key(|child| support::sequence_of(child));
        let led = Instant::now();
        assert!(follower.node.ends_with(&children[0]), "the follower is first: {children:?}");
        delete.await.expect("delete");
        if hand_over >= warm_up {
            durations.push(led.saturating_duration_since(closing));
        }
        let (_, _, watcher) = clients[other].get_and_watch_data(&follower.node).await.expect("own watch");
        latches[other] = Some(RawLatch { node: follower.node, watcher, leading: true });
        latches[leader] = Some(raw_join(&clients[leader], path, leader).await);
    }
    for (side, latch) in latches.into_iter().enumerate() {
        if let Some(latch) = latch {
            clients[side].delete(&latch.node, None).await.expect("delete");
        }
    }
    drop(clients);
    for (framework, client) in sessions {
        // The bare client first: closed with a clone of it alive, a framework took seconds here.
        drop(client);
        framework.close().await;
    }
    durations
}

/// Curator's graceful hand-overs (the driver's `bench-latch`): (p50, p90).
async fn curator_graceful(
    connect: &str,
    path: &str,
    warm_up: usize,
    hand_overs: usize,
) -> (Duration, Duration) {
    let line = support::curator_result(&[
        "bench-latch".to_owned(),
        connect.to_owned(),
        path.to_owned(),
        hand_overs.to_string(),
        warm_up.to_string(),
    ])
    .await;
    let field = |name: &str| -> Duration {
        let micros = support::field(&line, name).unwrap_or_else(|| panic!("no {name}= in {line:?}"));
        Duration::from_secs_f64(micros / 1e6)
    };
    (field("p50_us"), field("p90_us"))
}

/// A Curator latch in its own JVM that leads, with a short session: (process, its node, negotiated
/// session timeout).
async fn curator_leader(connect: &str, path: &str, session_ms: u64) -> (CuratorProcess, String, Duration) {
    let args = [
        "--session-timeout-ms".to_owned(),
        session_ms.to_string(),
        "latch".into(),
        connect.into(),
        path.into(),
        "leader".into(),
    ];
    let mut leader = support::spawn_curator(&args);
    let session = leader.expect_line("SESSION", STEP).await.expect("SESSION");
    let timeout_ms: u64 = session
        .split_whitespace()
        .find_map(|field| field.strip_prefix("timeout-ms="))
        .and_then(|value| value.parse().ok())
        .expect("timeout-ms=");
    leader.expect_line("LEADER", STEP).await.expect("the Curator latch leads");
    let node = curator_node(&mut leader).await;
    (leader, node, Duration::from_millis(timeout_ms))
}

/// The node of a `latch` driver (asked until it has one: it is created in the background).
async fn curator_node(driver: &mut CuratorProcess) -> String {
    let started = Instant::now();
    loop {
        driver.send_line("node").await.expect("node");
        let node = driver.expect_line("NODE", STEP).await.expect("NODE");
        if node.starts_with('/') {
            return node;
        }
        assert!(started.elapsed() < STEP, "the Curator latch has no node");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Watches `node` from the observer's session; resolves to the epoch micros at which its deletion
/// (the server expiring the dead leader's session) was seen.
async fn observe_deletion(observer: &Framework, node: &str) -> tokio::task::JoinHandle<i64> {
    let session = observer.session(Deadline::after(STEP)).await.expect("observer session");
    let (stat, watcher) = session.client().check_and_watch_stat(node).await.expect("exists watch");
    assert!(stat.is_some(), "{node} exists");
    tokio::spawn(async move {
        let event = watcher.changed().await;
        let seen = epoch_micros();
        assert_eq!(event.event_type, EventType::NodeDeleted, "the leader's node went: {event:?}");
        seen
    })
}

/// One crash: when the leader was killed, when the server deleted its node, when the follower led
/// (epoch micros), and the leader's session timeout.
struct Crash {
    killed: i64,
    deleted: i64,
    led: i64,
    session_timeout: Duration,
}

impl Crash {
    fn kill_to_leader(&self) -> Duration {
        Duration::from_micros((self.led - self.killed).max(0) as u64)
    }

    /// The follower's reaction: from the expiry (as an observer saw it) to its leadership.
    fn expiry_to_leader(&self) -> Duration {
        Duration::from_micros((self.led - self.deleted).max(0) as u64)
    }
}

/// Waits a while before a kill, so the dead leader's last ping falls at different points of its
/// cycle (a third of the session timeout) across rounds, the same for both followers.
async fn settle(session_timeout: Duration, round: usize) {
    let jitter = session_timeout.mul_f64((round * 7 % 10) as f64 / 30.0);
    tokio::time::sleep(session_timeout / 2 + jitter).await;
}

/// Kill the Curator leader; our latch follows.
async fn ours_crash(
    connect_string: &str,
    observer: &Framework,
    path: &str,
    session_ms: u64,
    round: usize,
) -> Crash {
    let (mut leader, leader_node, session_timeout) = curator_leader(connect_string, path, session_ms).await;
    let framework = start_framework(connect_string).await;
    let (latch, mut led) = join(&framework, path, "follower");
    tokio::time::timeout(STEP, async {
        while latch.our_node_path().is_none() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    })
    .await
    .expect("our node");
    let deleted = observe_deletion(observer, &leader_node).await;
    settle(session_timeout, round).await;
    let killed = epoch_micros();
    let killed_at = Instant::now();
    leader.kill().expect("SIGKILL");
    let took = led_at(&mut led, "our latch after the crash").await.saturating_duration_since(killed_at);
    let deleted =
        tokio::time::timeout(STEP, deleted).await.expect("the leader's node deleted").expect("observer");
    latch.close(CloseMode::Silent).await.expect("close");
    framework.close().await;
    Crash { killed, deleted, led: killed + took.as_micros() as i64, session_timeout }
}

/// Kill the Curator leader; a Curator latch follows (in another JVM, printing `LEADER <epoch
/// micros>`).
async fn curator_crash(
    connect: &str,
    observer: &Framework,
    path: &str,
    session_ms: u64,
    round: usize,
) -> Crash {
    let (mut leader, leader_node, session_timeout) = curator_leader(connect, path, session_ms).await;
    let args = ["latch".to_owned(), connect.to_owned(), path.to_owned(), "follower".into()];
    let mut follower = support::spawn_curator(&args);
    follower.expect_line("STARTED", STEP).await.expect("STARTED");
    curator_node(&mut follower).await;
    let deleted = observe_deletion(observer, &leader_node).await;
    settle(session_timeout, round).await;
    let killed = epoch_micros();
    leader.kill().expect("SIGKILL");
    let led: i64 = follower.expect_line("LEADER", STEP).await.expect("LEADER").parse().expect("micros");
    let deleted =
        tokio::time::timeout(STEP, deleted).await.expect("the leader's node deleted").expect("observer");
    follower.send_line("close").await.expect("close");
    follower.expect_line("CLOSED", STEP).await.expect("CLOSED");
    Crash { killed, deleted, led, session_timeout }
}

fn epoch_micros() -> i64 {
    let since = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).expect("clock");
    since.as_micros() as i64
}

fn percentile(sorted: &[Duration], fraction: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * fraction).round() as usize]
}

fn ms(duration: Duration) -> String {
    format!("{:.2} ms", duration.as_secs_f64() * 1e3)
}

#[tokio::main]
async fn main() {
    let args: Args = support::parse();
    let options = Options::new(&args);
    let json = support::JsonLines::new("leader", &args.json);
    // The default tick (200 ms) notices an expired session within 200 ms of its deadline.
    let (connect, _server) = support::server(None).await;
    let (mut ours_p50, mut ours_p90, mut curator_p50, mut curator_p90) = (vec![], vec![], vec![], vec![]);
    let (mut floor_p50, mut floor_p90) = (vec![], vec![]);
    let observer = start_framework(&connect).await;
    let (mut ours_crashes, mut curator_crashes) = (Vec::new(), Vec::new());
    for round in 0..options.rounds {
        eprintln!("round {} of {}", round + 1, options.rounds);
        // Which side goes first turns with the rounds (the floor has no crash scenario).
        for turn in 0..3 {
            let side = (turn + round) % 3;
            if side == 2 {
                let mut durations = floor_graceful(
                    &connect,
                    &format!("/bench/floor-graceful-{round}"),
                    options.warm_up_hand_overs,
                    options.hand_overs,
                )
                .await;
                durations.sort_unstable();
                floor_p50.push(percentile(&durations, 0.5));
                floor_p90.push(percentile(&durations, 0.9));
            } else if side == 1 {
                let (p50, p90) = curator_graceful(
                    &connect,
                    &format!("/bench/curator-graceful-{round}"),
                    options.warm_up_hand_overs,
                    options.hand_overs,
                )
                .await;
                curator_p50.push(p50);
                curator_p90.push(p90);
                let path = format!("/bench/curator-crash-{round}");
                curator_crashes
                    .push(curator_crash(&connect, &observer, &path, options.session_ms, round).await);
            } else {
                let mut durations = ours_graceful(
                    &connect,
                    &format!("/bench/ours-graceful-{round}"),
                    options.warm_up_hand_overs,
                    options.hand_overs,
                )
                .await;
                durations.sort_unstable();
                ours_p50.push(percentile(&durations, 0.5));
                ours_p90.push(percentile(&durations, 0.9));
                let path = format!("/bench/ours-crash-{round}");
                ours_crashes.push(ours_crash(&connect, &observer, &path, options.session_ms, round).await);
            }
        }
    }
    observer.close().await;

    println!(
        "\nleader hand-over, medians of {} interleaved rounds ({} graceful hand-overs per round, 2 participants)",
        options.rounds, options.hand_overs
    );
    let ratio = |ours: Duration, theirs: Duration| ours.as_secs_f64() / theirs.as_secs_f64();
    let (o50, o90, c50, c90) = (
        support::median(&ours_p50),
        support::median(&ours_p90),
        support::median(&curator_p50),
        support::median(&curator_p90),
    );
    println!("graceful close -> new leader:");
    println!("  ours     p50 {:>10}   p90 {:>10}   (rounds p50 {:?})", ms(o50), ms(o90), ours_p50);
    println!("  Curator  p50 {:>10}   p90 {:>10}   (rounds p50 {:?})", ms(c50), ms(c90), curator_p50);
    let (f50, f90) = (support::median(&floor_p50), support::median(&floor_p90));
    println!("  floor    p50 {:>10}   p90 {:>10}   (rounds p50 {:?})", ms(f50), ms(f90), floor_p50);
    println!("  ours / Curator: p50 {:.2}, p90 {:.2} (lower is faster)", ratio(o50, c50), ratio(o90, c90));
    let paired = |ours: &[Duration], floor: &[Duration]| {
        support::median(&ours.iter().zip(floor).map(|(ours, floor)| ratio(*ours, *floor)).collect::<Vec<_>>())
    };
    println!(
        "  ours / floor:   p50 {:.2} [{:.2}], p90 {:.2} [{:.2}] (lower is faster; [median of the per-round ratios])",
        ratio(o50, f50),
        paired(&ours_p50, &floor_p50),
        ratio(o90, f90),
        paired(&ours_p90, &floor_p90)
    );
    let millis = |durations: &[Duration]| durations.iter().map(|d| d.as_secs_f64() * 1e3).collect::<Vec<_>>();
    for (client, p50s, p90s) in [
        ("ours", &ours_p50, &ours_p90),
        ("floor", &floor_p50, &floor_p90),
        ("curator", &curator_p50, &curator_p90),
    ] {
        json.emit(
            "graceful",
            client,
            serde_json::json!({
                "unit": "ms",
                "p50_ms": support::median(&millis(p50s)),
                "p90_ms": support::median(&millis(p90s)),
                "rounds": p50s.len(),
                "per_round_p50_ms": millis(p50s),
                "per_round_p90_ms": millis(p90s),
                "hand_overs_per_round": options.hand_overs,
            }),
        );
    }
    let session_timeout = support::median(
        &ours_crashes.iter().chain(&curator_crashes).map(|c| c.session_timeout).collect::<Vec<_>>(),
    );
    println!(
        "crash (SIGKILL of a Curator leader's JVM, session timeout {}; the server expires it one timeout after \
         it last heard from it) -> new leader:",
        ms(session_timeout)
    );
    for (who, client, crashes) in
        [("ours as follower", "ours", &ours_crashes), ("Curator as follower", "curator", &curator_crashes)]
    {
        let kill: Vec<Duration> = crashes.iter().map(Crash::kill_to_leader).collect();
        let reaction: Vec<Duration> = crashes.iter().map(Crash::expiry_to_leader).collect();
        json.emit(
            "crash",
            client,
            serde_json::json!({
                "unit": "ms",
                "kill_to_leader_ms": support::median(&millis(&kill)),
                "expiry_to_leader_ms": support::median(&millis(&reaction)),
                "session_timeout_ms": session_timeout.as_secs_f64() * 1e3,
                "rounds": kill.len(),
                "per_round_kill_to_leader_ms": millis(&kill),
            }),
        );
        println!(
            "  {who:<20} kill -> leader {:>10} = {:.2} x session timeout; expiry seen -> leader {:>9}   \
             (rounds {:?} / {:?})",
            ms(support::median(&kill)),
            ratio(support::median(&kill), session_timeout),
            ms(support::median(&reaction)),
            kill,
            reaction
        );
    }
}
