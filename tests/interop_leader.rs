//! Leader election interop with Apache Curator 5.4 (real JVMs on the same server):
//!
//! - Rust `LeaderLatch`es and Curator `LeaderLatch`es in one election: the nodes compared live
//!   (`_c_<uuid>-latch-<seq>`, data: the id), never two leaders (a marker protocol on both
//!   sides: the leader creates one EPHEMERAL marker node, and finding it taken is a violation),
//!   the participants lists of both sides agree, and closing the leader hands over across
//!   languages both ways;
//! - a Rust `LeaderSelector` and a Curator `LeaderSelector` with auto-requeue alternate, never
//!   overlapping;
//! - a Rust latch's proclaimed data is what Curator's `getLeader().getId()` returns, and a Rust
//!   `ElectionObserver` follows a Curator latch's leadership.
//!
//! Needs Java, `javac` and Debian's `libcurator-recipes-java` (`scripts/install-deps.sh`).

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant};

use common::{
    assert_gone, children, curator, epoch_micros, expect_success, parse_session, read, session, within,
    within_for, Env, STEP,
};
use zk_recipes::framework::zookeeper_client::{self, CreateMode};
use zk_recipes::framework::{path, Deadline, Framework};
use zk_recipes::leader::{
    CloseMode, ElectionObserver, LeaderChange, LeaderLatch, LeaderSelector, LeadershipEvent, LATCH_NAME,
    SELECTOR_LOCK_NAME,
};
use zk_recipes_testing::{CuratorProcess, TestingError};

/// Hand-overs in the latch rotation; override with `ZK_INTEROP_HAND_OVERS`.
const HAND_OVERS: usize = 20;
/// Leaderships per selector; override with `ZK_INTEROP_ROUNDS`.
const ROUNDS: usize = 25;
/// How long a selector leads each time.
const SELECTOR_HOLD: Duration = Duration::from_millis(5);
/// How long a participant that must not lead is watched after the leader was seen.
const QUIET: Duration = Duration::from_millis(200);

/// One leadership as its marker saw it: who, marked and unmarked, in epoch micros.
type Interval = (String, i64, i64);

/// Asserts no two leaderships overlap in time (the clocks are the machine's, shared by both
/// languages).
fn assert_disjoint(intervals: &[Interval]) {
    let mut sorted = intervals.to_vec();
    sorted.sort_by_key(|interval| interval.1);
    for pair in sorted.windows(2) {
        assert!(pair[0].2 <= pair[1].1, "leaderships overlap: {:?} and {:?}", pair[0], pair[1]);
    }
}

/// `_c_<lowercase v4 uuid>-<stem><%010d>`: the stem.
fn protected_stem(name: &str) -> &str {
    let rest = name.strip_prefix("_c_").unwrap_or_else(|| panic!("{name}: no protected prefix"));
    assert!(rest.len() > 37 + 10, "{name}: too short");
    let (uuid, rest) = rest.split_at(36);
    let uuid_ok = uuid.char_indices().all(|(index, c)| match index {
        8 | 13 | 18 | 23 => c == '-',
        14 => c == '4',
        19 => matches!(c, '8' | '9' | 'a' | 'b'),
        _ => matches!(c, '0'..='9' | 'a'..='f'),
    });
    assert!(uuid_ok, "{name}: {uuid:?} is not a lowercase hyphenated v4 uuid");
    let rest = rest.strip_prefix('-').unwrap_or_else(|| panic!("{name}: no '-' after the uuid"));
    let (stem, sequence) = rest.split_at(rest.len() - 10);
    assert!(sequence.chars().all(|c| c.is_ascii_digit()), "{name}: {sequence:?} is not %010d");
    stem
}

/// `(id, is_leader)` of every participant.
type View = Vec<(String, bool)>;

/// Reads `PARTICIPANT <id> <isLeader>` lines up to `PARTICIPANTS-END`; other lines go to `other`.
async fn java_view(driver: &mut CuratorProcess, mut other: impl FnMut(&str)) -> View {
    let (lines, _) =
        within("PARTICIPANTS-END", driver.lines_until("PARTICIPANTS-END", STEP)).await.expect("participants");
    let mut view = View::new();
    for line in &lines {
        match line.strip_prefix("PARTICIPANT ") {
            Some(rest) => {
                let (id, leader) = rest.rsplit_once(' ').expect("PARTICIPANT <id> <isLeader>");
                view.push((id.to_owned(), leader == "true"));
            }
            None => other(line),
        }
    }
    view
}

// ---------------------------------------------------------------------------------------------
// Latch participants

/// A Curator latch in its own JVM (`latch` command), and what it printed so far.
struct JavaLatch {
    id: String,
    driver: CuratorProcess,
    session_id: i64,
    leading: bool,
    /// Epoch micros of `LEADER` lines.
    led_at: Vec<i64>,
    marked_at: Option<i64>,
    intervals: Vec<Interval>,
    violations: Vec<String>,
}

impl JavaLatch {
    async fn spawn(env: &Env, election: &str, id: &str, marker: &str) -> JavaLatch {
        let mut driver = curator(["latch", &env.connect(), election, id, marker]);
        let (lines, _) = within("STARTED", driver.lines_until("STARTED", STEP)).await.expect("latch started");
        let session = lines.iter().find_map(|line| line.strip_prefix("SESSION ")).expect("SESSION line");
        let session_id = parse_session(session);
        let mut latch = JavaLatch {
            id: id.to_owned(),
            driver,
            session_id,
            leading: false,
            led_at: Vec::new(),
            marked_at: None,
            intervals: Vec::new(),
            violations: Vec::new(),
        };
        for line in &lines {
            latch.absorb(line);
        }
        latch
    }

    /// Takes note of one event line.
    fn absorb(&mut self, line: &str) {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        match word {
            "LEADER" => {
                self.leading = true;
                self.led_at.push(rest.parse().expect("micros"));
            }
            "NOT-LEADER" => self.leading = false,
            "MARKED" => self.marked_at = Some(rest.parse().expect("micros")),
            "UNMARKED" => {
                let marked = self.marked_at.take().expect("UNMARKED after MARKED");
                self.intervals.push((self.id.clone(), marked, rest.parse().expect("micros")));
            }
            "VIOLATION" => self.violations.push(rest.to_owned()),
            _ => {}
        }
    }

    /// Reads what the driver printed until `prefix` (absorbing it too).
    async fn until(&mut self, prefix: &str) -> String {
        let what = format!("{}: `{prefix}`", self.id);
        let (lines, line) = within(&what, self.driver.lines_until(prefix, STEP)).await.expect(&what);
        for line in lines.iter().chain(Some(&line)) {
            self.absorb(line);
        }
        line
    }

    /// Absorbs what the driver prints within [`QUIET`].
    async fn settle(&mut self) {
        loop {
            match self.driver.next_line(QUIET).await {
                Ok(Some(line)) => self.absorb(&line),
                Ok(None) => panic!("{}: the driver exited", self.id),
                Err(TestingError::Timeout { .. }) => return,
                Err(err) => panic!("{}: {err}", self.id),
            }
        }
    }

    /// Reads lines until this latch leads and holds the marker (or found it taken); returns when
    /// it started leading (epoch micros).
    async fn wait_leading(&mut self) -> i64 {
        let deadline = Instant::now() + STEP;
        while !(self.leading && (self.marked_at.is_some() || !self.violations.is_empty())) {
            let remaining = deadline.saturating_duration_since(Instant::now());
            match self.driver.next_line(remaining).await {
                Ok(Some(line)) => self.absorb(&line),
                Ok(None) => panic!("{}: the driver exited", self.id),
                Err(err) => panic!("{}: waiting to lead: {err}", self.id),
            }
        }
        *self.led_at.last().expect("led")
    }

    /// Closes the latch (the marker first) and joins again with a new one, at the back.
    async fn rejoin(&mut self) {
        within("rejoin", self.driver.send_line("rejoin")).await.expect("send rejoin");
        self.until("CLOSED ").await;
        assert!(!self.leading, "{}: still leading after close", self.id);
        self.until("STARTED").await;
    }

    async fn view(&mut self) -> View {
        within("participants", self.driver.send_line("participants")).await.expect("send");
        let mut events = Vec::new();
        let view = java_view(&mut self.driver, |line| events.push(line.to_owned())).await;
        for line in events {
            self.absorb(&line);
        }
        view
    }

    async fn node(&mut self) -> String {
        within("node", self.driver.send_line("node")).await.expect("send");
        let line = self.until("NODE ").await;
        line["NODE ".len()..].trim().to_owned()
    }

    /// Closes the latch (the marker first) and waits for the JVM to exit.
    async fn close(mut self) -> ClosedJavaLatch {
        within("close", self.driver.send_line("close")).await.expect("send close");
        self.until("CLOSED ").await;
        assert!(!self.leading, "{}: still leading after close", self.id);
        let JavaLatch { id, driver, led_at, intervals, violations, .. } = self;
        expect_success(driver).await;
        ClosedJavaLatch { id, led_at, intervals, violations }
    }
}

/// What a closed Curator latch printed.
struct ClosedJavaLatch {
    id: String,
    led_at: Vec<i64>,
    intervals: Vec<Interval>,
    violations: Vec<String>,
}

/// The marker protocol of a Rust participant.
#[derive(Debug, Default)]
struct RustMarks {
    marked_at: Option<i64>,
    intervals: Vec<Interval>,
    led_at: Vec<i64>,
    violations: Vec<String>,
}

/// A Rust latch (its own session) whose leaderships run the marker protocol.
struct RustLatch {
    id: String,
    election: String,
    framework: Framework,
    latch: LeaderLatch,
    marker: String,
    marks: Arc<tokio::sync::Mutex<RustMarks>>,
    follower: tokio::task::JoinHandle<()>,
}

impl RustLatch {
    /// A new session, and a latch on it.
    async fn start(env: &Env, election: &str, id: &str, marker: &str) -> RustLatch {
        let framework = env.framework().await;
        let marks = Arc::new(tokio::sync::Mutex::new(RustMarks::default()));
        RustLatch::join(framework, election, id, marker, marks)
    }

    /// A latch on `framework`'s session, adding to `marks`.
    fn join(
        framework: Framework,
        election: &str,
        id: &str,
        marker: &str,
        marks: Arc<tokio::sync::Mutex<RustMarks>>,
    ) -> RustLatch {
        let latch = LeaderLatch::new(&framework, election, id).expect("latch");
        let mut events = latch.subscribe();
        latch.start().expect("start");
        let follower = {
            let (framework, latch, marks, marker, id) =
                (framework.clone(), latch.clone(), marks.clone(), marker.to_owned(), id.to_owned());
            tokio::spawn(async move {
                while let Some(event) = events.next().await {
                    let mut marks = marks.lock().await;
                    match event {
                        LeadershipEvent::IsLeader { .. } => {
                            marks.led_at.push(epoch_micros());
                            if latch.has_leadership() {
                                mark(&framework, &marker, &id, &mut marks).await;
                            }
                        }
                        LeadershipEvent::NotLeader { .. } => {
                            unmark(&framework, &marker, &id, &mut marks).await
                        }
                        _ => {}
                    }
                }
            })
        };
        RustLatch {
            id: id.to_owned(),
            election: election.to_owned(),
            framework,
            latch,
            marker: marker.to_owned(),
            marks,
            follower,
        }
    }

    async fn wait_marked(&self) {
        within("our leader marks", async {
            while self.marks.lock().await.marked_at.is_none() {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await;
    }

    /// Unmarks, then closes the latch (NotifyLeader); the session stays.
    async fn leave(self) -> (Framework, Arc<tokio::sync::Mutex<RustMarks>>, String, String, String) {
        {
            let mut marks = self.marks.lock().await;
            unmark(&self.framework, &self.marker, &self.id, &mut marks).await;
            within("close latch", self.latch.close(CloseMode::NotifyLeader)).await.expect("close");
        }
        within("follower ends", self.follower).await.expect("follower");
        (self.framework, self.marks, self.election, self.id, self.marker)
    }

    /// Leaves and joins again (at the back of the queue) on the same session.
    async fn rejoin(self) -> RustLatch {
        let (framework, marks, election, id, marker) = self.leave().await;
        RustLatch::join(framework, &election, &id, &marker, marks)
    }

    /// Leaves and closes the session; returns the marks.
    async fn close(self) -> RustMarks {
        let (framework, marks, ..) = self.leave().await;
        within("close", framework.close()).await;
        Arc::try_unwrap(marks).expect("the follower is gone").into_inner()
    }
}

async fn mark(framework: &Framework, marker: &str, id: &str, marks: &mut RustMarks) {
    if marks.marked_at.is_some() {
        return;
    }
    let session = session(framework).await;
    let options = session.create_options(CreateMode::Ephemeral);
    match within("create marker", session.client().create(marker, id.as_bytes(), &options)).await {
        Ok(_) => marks.marked_at = Some(epoch_micros()),
        Err(zookeeper_client::Error::NodeExists) => {
            let holder =
                read(framework, marker).await.map(|(data, _)| String::from_utf8_lossy(&data).into_owned());
            marks.violations.push(holder.unwrap_or_else(|| "(gone)".to_owned()));
        }
        Err(err) => panic!("{id}: marker: {err}"),
    }
}

async fn unmark(framework: &Framework, marker: &str, id: &str, marks: &mut RustMarks) {
    let Some(marked) = marks.marked_at.take() else { return };
    let unmarked = epoch_micros();
    let session = session(framework).await;
    match within("delete marker", session.client().delete(marker, None)).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
        Err(err) => panic!("{id}: delete marker: {err}"),
    }
    // The delete was sent after `unmarked`: the next leader's marker comes later.
    marks.intervals.push((id.to_owned(), marked, unmarked));
}

/// `(id, is_leader)` from our side.
async fn rust_view(latch: &LeaderLatch) -> View {
    let participants = within("participants", latch.participants()).await.expect("participants");
    participants.into_iter().map(|participant| (participant.id, participant.is_leader)).collect()
}

/// Both sides list the same participants, in `expected` order, the first leading.
async fn assert_views(stage: &str, rust: &RustLatch, java: &mut JavaLatch, expected: &[&str]) {
    let expected: View =
        expected.iter().enumerate().map(|(index, id)| ((*id).to_owned(), index == 0)).collect();
    assert_eq!(rust_view(&rust.latch).await, expected, "{stage}: our participants ({})", rust.id);
    assert_eq!(java.view().await, expected, "{stage}: Curator's participants ({})", java.id);
}

/// Checks the election's nodes: every one `_c_<uuid>-latch-<seq>`, EPHEMERAL of its participant's
/// session, data = its id, sequences in join order; returns the nodes by id.
async fn check_latch_nodes(framework: &Framework, election: &str, owners: &[(&str, i64)]) -> Vec<String> {
    let mut names = children(framework, election).await;
    names.sort_by_key(|name| name.rsplit_once(LATCH_NAME).map(|(_, seq)| seq.to_owned()));
    let mut nodes = Vec::new();
    assert_eq!(names.len(), owners.len(), "nodes {names:?}");
    for (name, (id, owner)) in names.iter().zip(owners) {
        assert_eq!(protected_stem(name), LATCH_NAME, "{name}");
        let node = path::join(election, name);
        let (data, stat) = read(framework, &node).await.expect("node");
        assert_eq!(String::from_utf8_lossy(&data), *id, "{name}: data is the participant id");
        assert_eq!(stat.ephemeral_owner, *owner, "{name}: EPHEMERAL, owned by {id}'s session");
        nodes.push(node);
    }
    nodes
}

/// Curator and Rust latches on one path, joined in the order J-a, R-a, J-b, R-b; each leader
/// closes in turn, so leadership goes Java → Rust → Java → Rust. At each stage: exactly the
/// expected participant leads, the markers never collide, both sides list the same participants.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latches_elect_one_leader_across_languages_and_hand_over_both_ways() {
    let env = Env::start().await;
    let started = Instant::now();
    let admin = env.framework().await;
    let root = "/interop-latch";
    let election = format!("{root}/election");
    let markers = format!("{root}/markers");
    let marker = format!("{markers}/leader");
    within("root", admin.ensure_path(root, Deadline::after(STEP))).await.expect("root");
    {
        let session = session(&admin).await;
        let persistent = session.create_options(CreateMode::Persistent);
        within("markers", session.client().create(&markers, b"", &persistent)).await.expect("markers");
    }

    // J-a leads alone, then R-a, J-b and R-b queue behind it.
    let mut java_a = JavaLatch::spawn(&env, &election, "java-a", &marker).await;
    java_a.wait_leading().await;
    let rust_a = RustLatch::start(&env, &election, "rust-a", &marker).await;
    within("rust-a queued", async {
        while children(&admin, &election).await.len() < 2 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let mut java_b = JavaLatch::spawn(&env, &election, "java-b", &marker).await;
    within("java-b queued", async {
        while children(&admin, &election).await.len() < 3 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;
    let rust_b = RustLatch::start(&env, &election, "rust-b", &marker).await;
    within("rust-b queued", async {
        while children(&admin, &election).await.len() < 4 {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    })
    .await;

    // The nodes: Curator's and ours alike, in join order.
    let rust_a_session = session(&rust_a.framework).await.id().0;
    let rust_b_session = session(&rust_b.framework).await.id().0;
    let nodes = check_latch_nodes(
        &admin,
        &election,
        &[
            ("java-a", java_a.session_id),
            ("rust-a", rust_a_session),
            ("java-b", java_b.session_id),
            ("rust-b", rust_b_session),
        ],
    )
    .await;
    assert_eq!(java_a.node().await, nodes[0], "Curator's getOurPath");
    assert_eq!(rust_a.latch.our_node_path().as_deref(), Some(nodes[1].as_str()));
    assert_eq!(java_b.node().await, nodes[2], "Curator's getOurPath");
    assert_eq!(rust_b.latch.our_node_path().as_deref(), Some(nodes[3].as_str()));
    let (parent_data, parent_stat) = read(&admin, &election).await.expect("election path");
    assert!(
        parent_data.is_empty() && parent_stat.ephemeral_owner == 0,
        "the election path: empty, persistent"
    );

    // Stage 1: J-a leads.
    java_b.settle().await;
    assert!(java_a.leading && !java_b.leading, "only java-a leads");
    assert!(!rust_a.latch.has_leadership() && !rust_b.latch.has_leadership(), "no Rust latch leads");
    assert_views("stage 1", &rust_a, &mut java_b, &["java-a", "rust-a", "java-b", "rust-b"]).await;
    assert_eq!(java_a.view().await, rust_view(&rust_b.latch).await, "stage 1: the leader's view");
    // Curator's stand-alone view (a fresh client) agrees.
    let mut standalone = curator(["participants", &env.connect(), &election]);
    let view = java_view(&mut standalone, |_| {}).await;
    expect_success(standalone).await;
    assert_eq!(view, rust_view(&rust_a.latch).await, "stage 1: a fresh Curator client's view");

    // Stage 2: J-a closes, R-a leads (Java -> Rust).
    let close_sent = epoch_micros();
    let java_a = java_a.close().await;
    within("rust-a leads", rust_a.latch.await_leadership()).await.expect("rust-a leads");
    rust_a.wait_marked().await;
    let java_to_rust = *rust_a.marks.lock().await.led_at.last().expect("led") - close_sent;
    java_b.settle().await;
    assert!(!java_b.leading && !rust_b.latch.has_leadership(), "only rust-a leads");
    assert_views("stage 2", &rust_b, &mut java_b, &["rust-a", "java-b", "rust-b"]).await;

    // Stage 3: R-a closes, J-b leads (Rust -> Java).
    let close_started = epoch_micros();
    let rust_a_marks = rust_a.close().await;
    let java_led = java_b.wait_leading().await;
    let rust_to_java = java_led - close_started;
    assert!(!rust_b.latch.has_leadership(), "only java-b leads");
    assert_eq!(
        rust_view(&rust_b.latch).await,
        vec![("java-b".to_owned(), true), ("rust-b".to_owned(), false)],
        "stage 3: our participants"
    );
    assert_eq!(java_b.view().await, rust_view(&rust_b.latch).await, "stage 3: Curator's participants");

    // Stage 4: J-b closes, R-b leads (Java -> Rust); then R-b closes.
    let java_b = java_b.close().await;
    within("rust-b leads", rust_b.latch.await_leadership()).await.expect("rust-b leads");
    rust_b.wait_marked().await;
    assert_eq!(rust_view(&rust_b.latch).await, vec![("rust-b".to_owned(), true)], "stage 4");
    let rust_b_marks = rust_b.close().await;

    println!(
        "latch hand-over (close requested -> new leader's listener): Java -> Rust {java_to_rust} us, \
         Rust -> Java {rust_to_java} us"
    );
    let mut intervals = Vec::new();
    for java in [&java_a, &java_b] {
        assert!(java.violations.is_empty(), "{}: {:?}", java.id, java.violations);
        assert_eq!(java.led_at.len(), 1, "{} led once", java.id);
        intervals.extend(java.intervals.iter().cloned());
    }
    for (id, marks) in [("rust-a", &rust_a_marks), ("rust-b", &rust_b_marks)] {
        assert!(marks.violations.is_empty(), "{id}: {:?}", marks.violations);
        assert_eq!(marks.led_at.len(), 1, "{id} led once");
        intervals.extend(marks.intervals.iter().cloned());
    }
    let order: Vec<&str> = {
        let mut sorted = intervals.clone();
        sorted.sort_by_key(|interval| interval.1);
        sorted.iter().map(|interval| if interval.0.starts_with("java") { "J" } else { "R" }).collect()
    };
    assert_eq!(order, ["J", "R", "J", "R"], "leaderships {intervals:?}");
    assert_disjoint(&intervals);

    let session = session(&admin).await;
    within("delete markers", session.client().delete(&markers, None)).await.expect("delete markers");
    assert_gone(&admin, root).await;
    within("close", admin.close()).await;
    println!("latch interop: {:.1} s after the server started", started.elapsed().as_secs_f64());
}

/// A latch of either language.
enum Member {
    Java(JavaLatch),
    Rust(RustLatch),
}

impl Member {
    fn id(&self) -> &str {
        match self {
            Member::Java(java) => &java.id,
            Member::Rust(rust) => &rust.id,
        }
    }

    fn side(&self) -> char {
        match self {
            Member::Java(_) => 'J',
            Member::Rust(_) => 'R',
        }
    }
}

fn hand_overs() -> usize {
    std::env::var("ZK_INTEROP_HAND_OVERS").ok().and_then(|value| value.parse().ok()).unwrap_or(HAND_OVERS)
}

async fn wait_nodes(framework: &Framework, election: &str, count: usize) {
    within("participants' nodes", async {
        while children(framework, election).await.len() != count {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

fn percentile(sorted: &[i64], fraction: f64) -> i64 {
    sorted[((sorted.len() - 1) as f64 * fraction).round() as usize]
}

/// Two Curator and two Rust latches joined alternately; the leader leaves and joins again at the
/// back, `HAND_OVERS` times, so leadership keeps crossing languages. Each time: the expected
/// participant leads and holds the marker, nobody else leads, both sides list the same queue.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn latch_leadership_rotates_across_languages() {
    let env = Env::start().await;
    let started = Instant::now();
    let admin = env.framework().await;
    let root = "/interop-latch-rotate";
    let election = format!("{root}/election");
    let markers = format!("{root}/markers");
    let marker = format!("{markers}/leader");
    let hand_overs = hand_overs();
    within("root", admin.ensure_path(root, Deadline::after(STEP))).await.expect("root");
    {
        let session = session(&admin).await;
        let persistent = session.create_options(CreateMode::Persistent);
        within("markers", session.client().create(&markers, b"", &persistent)).await.expect("markers");
    }

    let mut queue = VecDeque::new();
    for index in 0..2 {
        let java = JavaLatch::spawn(&env, &election, &format!("java-{index}"), &marker).await;
        queue.push_back(Member::Java(java));
        wait_nodes(&admin, &election, queue.len()).await;
        let rust = RustLatch::start(&env, &election, &format!("rust-{index}"), &marker).await;
        queue.push_back(Member::Rust(rust));
        wait_nodes(&admin, &election, queue.len()).await;
    }

    // (from, to, close requested -> new leader's listener in micros)
    let mut samples: Vec<(char, char, i64)> = Vec::new();
    let mut requested: Option<(char, i64)> = None;
    for round in 0..=hand_overs {
        let leader = queue.front_mut().expect("a leader");
        let led_at = match leader {
            Member::Java(java) => java.wait_leading().await,
            Member::Rust(rust) => {
                within("Rust leads", rust.latch.await_leadership()).await.expect("leads");
                rust.wait_marked().await;
                *rust.marks.lock().await.led_at.last().expect("led")
            }
        };
        let (leader_id, leader_side) = (leader.id().to_owned(), leader.side());
        if let Some((from, at)) = requested {
            samples.push((from, leader_side, led_at - at));
        }
        let (holder, _) = read(&admin, &marker).await.expect("the leader's marker");
        assert_eq!(String::from_utf8_lossy(&holder), leader_id, "round {round}: the marker's holder");
        wait_nodes(&admin, &election, queue.len()).await;
        let expected: View =
            queue.iter().enumerate().map(|(index, member)| (member.id().to_owned(), index == 0)).collect();
        for member in queue.iter_mut().skip(1) {
            match member {
                Member::Java(java) => assert!(!java.leading, "round {round}: {} leads too", java.id),
                Member::Rust(rust) => {
                    assert!(!rust.latch.has_leadership(), "round {round}: {} leads too", rust.id)
                }
            }
        }
        let rust_member = queue.iter().find_map(|member| match member {
            Member::Rust(rust) => Some(rust.latch.clone()),
            Member::Java(_) => None,
        });
        let rust_view = rust_view(&rust_member.expect("a Rust member")).await;
        assert_eq!(rust_view, expected, "round {round}: our participants");
        for member in queue.iter_mut() {
            if let Member::Java(java) = member {
                assert_eq!(java.view().await, expected, "round {round}: Curator's participants");
                break;
            }
        }
        if round == hand_overs {
            break;
        }
        let member = queue.pop_front().expect("the leader");
        let at = epoch_micros();
        let member = match member {
            Member::Java(mut java) => {
                java.rejoin().await;
                Member::Java(java)
            }
            Member::Rust(rust) => Member::Rust(rust.rejoin().await),
        };
        requested = Some((member.side(), at));
        queue.push_back(member);
    }

    let mut intervals = Vec::new();
    let mut violations = Vec::new();
    // The waiting ones first, so leadership changes no more.
    while let Some(member) = queue.pop_back() {
        match member {
            Member::Java(java) => {
                let closed = java.close().await;
                violations.extend(closed.violations.iter().map(|holder| format!("{}: {holder}", closed.id)));
                intervals.extend(closed.intervals);
            }
            Member::Rust(rust) => {
                let id = rust.id.clone();
                let marks = rust.close().await;
                violations.extend(marks.violations.iter().map(|holder| format!("{id}: {holder}")));
                intervals.extend(marks.intervals);
            }
        }
    }
    assert!(violations.is_empty(), "two leaders: {violations:?}");
    assert_eq!(intervals.len(), hand_overs + 1, "one leadership per round: {intervals:?}");
    assert_disjoint(&intervals);
    intervals.sort_by_key(|interval| interval.1);
    let sides: String =
        intervals.iter().map(|interval| if interval.0.starts_with("java") { 'J' } else { 'R' }).collect();
    assert!(!sides.contains("JJ") && !sides.contains("RR"), "leadership alternates: {sides}");
    for (from, to) in [('J', 'R'), ('R', 'J')] {
        let mut times: Vec<i64> = samples
            .iter()
            .filter(|sample| sample.0 == from && sample.1 == to)
            .map(|sample| sample.2)
            .collect();
        times.sort_unstable();
        assert!(!times.is_empty(), "no {from} -> {to} hand-over");
        println!(
            "latch hand-over {from} -> {to} (close requested -> new leader's listener), {} samples: \
             p50 {} us, p90 {} us, max {} us",
            times.len(),
            percentile(&times, 0.5),
            percentile(&times, 0.9),
            times[times.len() - 1]
        );
    }

    let session = session(&admin).await;
    within("delete markers", session.client().delete(&markers, None)).await.expect("delete markers");
    assert_gone(&admin, root).await;
    within("close", admin.close()).await;
    println!(
        "latch rotation: {hand_overs} hand-overs, {:.1} s after the server started",
        started.elapsed().as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------------
// Selectors

fn rounds() -> usize {
    std::env::var("ZK_INTEROP_ROUNDS").ok().and_then(|value| value.parse().ok()).unwrap_or(ROUNDS)
}

/// A Rust selector and a Curator selector with auto-requeue on one path, each leading `rounds`
/// times (marker protocol inside, `SELECTOR_HOLD` each): their leaderships never overlap and
/// alternate between the languages; every node in the election is `_c_<uuid>-lock-<seq>` with
/// the participant's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_alternate_across_languages() {
    let env = Env::start().await;
    let started = Instant::now();
    let admin = env.framework().await;
    let root = "/interop-selector";
    let election = format!("{root}/election");
    let markers = format!("{root}/markers");
    let marker = format!("{markers}/leader");
    let rounds = rounds();
    within("root", admin.ensure_path(root, Deadline::after(STEP))).await.expect("root");
    {
        let session = session(&admin).await;
        let persistent = session.create_options(CreateMode::Persistent);
        within("markers", session.client().create(&markers, b"", &persistent)).await.expect("markers");
    }

    let hold_ms = SELECTOR_HOLD.as_millis().to_string();
    let rounds_arg = rounds.to_string();
    let mut java = curator(["selector", &env.connect(), &election, "java-s", &hold_ms, &rounds_arg, &marker]);
    within("READY", java.expect_line("READY", STEP)).await.expect("Java selector ready");

    // The Rust selector: `rounds` leaderships, the last one held until we close it.
    let framework = env.framework().await;
    let intervals: Arc<StdMutex<Vec<Interval>>> = Arc::default();
    let violations: Arc<StdMutex<Vec<String>>> = Arc::default();
    let led = Arc::new(AtomicUsize::new(0));
    let nodes_seen = Arc::new(AtomicU64::new(0));
    let (last_round, mut last_round_done) = tokio::sync::watch::channel(false);
    let last_round = Arc::new(last_round);
    let selector = {
        let (framework, marker) = (framework.clone(), marker.clone());
        let (intervals, violations, led) = (intervals.clone(), violations.clone(), led.clone());
        LeaderSelector::builder(&framework, &election)
            .id("rust-s")
            .auto_requeue(true)
            .build(move |leadership| {
                let (framework, marker) = (framework.clone(), marker.clone());
                let (intervals, violations, led) = (intervals.clone(), violations.clone(), led.clone());
                let last_round = last_round.clone();
                async move {
                    let round = led.fetch_add(1, Ordering::SeqCst) + 1;
                    let mut marks = RustMarks::default();
                    let leading = epoch_micros();
                    mark(&framework, &marker, "rust-s", &mut marks).await;
                    tokio::time::sleep(SELECTOR_HOLD).await;
                    unmark(&framework, &marker, "rust-s", &mut marks).await;
                    let done = epoch_micros();
                    violations.lock().expect("lock").extend(marks.violations);
                    intervals.lock().expect("lock").push(("rust-s".to_owned(), leading, done));
                    if round >= rounds {
                        let _ = last_round.send(true);
                        leadership.cancelled().await;
                    }
                }
            })
            .expect("selector")
    };
    within("go", java.send_line("go")).await.expect("go");
    selector.start().expect("start");

    // Meanwhile: every node in the election is a protected lock- node with a participant's id.
    let sampler = {
        let (admin, election, nodes_seen) = (admin.clone(), election.clone(), nodes_seen.clone());
        tokio::spawn(async move {
            loop {
                for name in children(&admin, &election).await {
                    assert_eq!(protected_stem(&name), SELECTOR_LOCK_NAME, "{name}");
                    if let Some((data, _)) = read(&admin, &path::join(&election, &name)).await {
                        let id = String::from_utf8_lossy(&data);
                        assert!(id == "java-s" || id == "rust-s", "{name}: data {id:?}");
                        nodes_seen.fetch_add(1, Ordering::Relaxed);
                    }
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        })
    };

    let java_side = async {
        let (lines, finished) =
            java.lines_until("FINISHED ", Duration::from_secs(120)).await.expect("Java selector FINISHED");
        (lines, finished)
    };
    let rust_side = async {
        last_round_done.wait_for(|done| *done).await.expect("Rust selector rounds");
        within("close selector", selector.close()).await.expect("close");
    };
    let ((lines, finished), ()) =
        within_for("selector run", Duration::from_secs(120), async { tokio::join!(java_side, rust_side) })
            .await;
    let elapsed = started.elapsed();
    expect_success(java).await;
    sampler.abort();
    if let Err(err) = sampler.await {
        if err.is_panic() {
            std::panic::resume_unwind(err.into_panic());
        }
    }

    let mut all = intervals.lock().expect("lock").clone();
    let mut leading: Option<i64> = None;
    let mut java_violations = Vec::new();
    for line in &lines {
        let fields: Vec<&str> = line.split_whitespace().collect();
        match fields[..] {
            ["LEADING", "java-s", micros] => leading = Some(micros.parse().expect("micros")),
            ["DONE-LEADING", "java-s", micros] => {
                let begun = leading.take().expect("DONE-LEADING after LEADING");
                all.push(("java-s".to_owned(), begun, micros.parse().expect("micros")));
            }
            ["VIOLATION", ..] => java_violations.push(line.clone()),
            _ => {}
        }
    }
    assert_eq!(finished, format!("FINISHED leaderships={rounds} violations=0"), "Java: {java_violations:?}");
    assert!(java_violations.is_empty());
    assert!(violations.lock().expect("lock").is_empty(), "Rust: {:?}", violations.lock().expect("lock"));
    assert_eq!(led.load(Ordering::SeqCst), rounds, "the Rust selector led {rounds} times");
    assert_eq!(all.len(), 2 * rounds);
    assert_disjoint(&all);
    all.sort_by_key(|interval| interval.1);
    let switches = all.windows(2).filter(|pair| pair[0].0 != pair[1].0).count();
    let sequence: String =
        all.iter().map(|interval| if interval.0 == "java-s" { 'J' } else { 'R' }).collect();
    let gaps: Vec<i64> = all.windows(2).map(|pair| pair[1].1 - pair[0].2).collect();
    let mut sorted_gaps = gaps.clone();
    sorted_gaps.sort_unstable();
    println!(
        "selectors: {} leaderships in {:.1} s, {switches} switches between languages ({sequence}); \
         hand-over gap p50 {} us, max {} us; {} node samples",
        all.len(),
        elapsed.as_secs_f64(),
        sorted_gaps[sorted_gaps.len() / 2],
        sorted_gaps[sorted_gaps.len() - 1],
        nodes_seen.load(Ordering::Relaxed),
    );
    // Strict alternation once both are queued; a start before the other joined and the end after
    // one side finished may repeat a side.
    assert!(switches + 6 >= all.len() - 1, "the selectors do not alternate: {sequence}");
    assert!(nodes_seen.load(Ordering::Relaxed) > 0, "the sampler saw the election's nodes");

    within("close", framework.close()).await;
    let session = session(&admin).await;
    within("delete markers", session.client().delete(&markers, None)).await.expect("delete markers");
    assert_gone(&admin, root).await;
    within("close", admin.close()).await;
}

// ---------------------------------------------------------------------------------------------
// Observing and proclaiming across languages

/// Curator's `getLeader()` in its own JVM (`leader` command): the leader's id, and whether there
/// is one.
async fn curator_get_leader(env: &Env, election: &str) -> (String, bool) {
    let mut driver = curator(["leader", &env.connect(), election]);
    let id = within("LEADER-ID", driver.expect_line("LEADER-ID", STEP)).await.expect("LEADER-ID");
    let is_leader = within("LEADER-IS", driver.expect_line("LEADER-IS", STEP)).await.expect("LEADER-IS");
    expect_success(driver).await;
    (id, is_leader == "true")
}

/// The observer's next report, within a step.
async fn next_change(observer: &mut ElectionObserver) -> LeaderChange {
    within("the next leader change", observer.next()).await.expect("the framework is open")
}

/// A Rust latch leads and proclaims new data: Curator's `getLeader().getId()` returns the new
/// value, and Curator's `getParticipants()` shows it for our node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_latch_proclaims_and_curators_get_leader_returns_the_new_value() {
    let env = Env::start().await;
    let election = "/interop-proclaim/election";
    let framework = env.framework().await;
    let latch = LeaderLatch::new(&framework, election, "rust-1").expect("latch");
    latch.start().expect("start");
    within("leads", latch.await_leadership()).await.expect("leads");
    assert_eq!(curator_get_leader(&env, election).await, ("rust-1".to_owned(), true));

    within("proclaim", latch.proclaim("rust-1 at 10.0.0.9:8080", Deadline::after(STEP)))
        .await
        .expect("proclaim");
    assert_eq!(curator_get_leader(&env, election).await, ("rust-1 at 10.0.0.9:8080".to_owned(), true));
    let mut driver = curator(["participants", &env.connect(), election]);
    let view = java_view(&mut driver, |line| panic!("unexpected line {line}")).await;
    expect_success(driver).await;
    assert_eq!(view, [("rust-1 at 10.0.0.9:8080".to_owned(), true)]);

    within("close", latch.close(CloseMode::Silent)).await.expect("close");
    assert_eq!(curator_get_leader(&env, election).await, (String::new(), false), "no leader");
    within("close", framework.close()).await;
}

/// A Rust observer follows a Curator latch: it reports the Java latch leading (its id and its
/// node, as Curator's `getOurPath()` names it), nothing when a Rust latch queues behind it, the
/// Rust latch once the Java one closes, and no leader at the end. It creates no node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rust_observer_sees_a_curator_latch_lead_and_hand_over() {
    let env = Env::start().await;
    let election = "/interop-observe/election";
    let admin = env.framework().await;
    let mut observer = ElectionObserver::latch(&admin, election).expect("observer");
    assert_eq!(next_change(&mut observer).await, LeaderChange::NoLeader);

    let mut java = JavaLatch::spawn(&env, election, "java-1", "-").await;
    java.until("LEADER ").await;
    let java_node = java.node().await;
    let change = next_change(&mut observer).await;
    assert_eq!(change.participant_id(), Some("java-1"), "{change:?}");
    assert_eq!(change.node_path(), Some(java_node.as_str()));

    let framework = env.framework().await;
    let latch = LeaderLatch::new(&framework, election, "rust-1").expect("latch");
    latch.start().expect("start");
    let rust_node = within("joined", async {
        loop {
            if let Some(node) = latch.our_node_path() {
                return node;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
    // A follower queueing changes nothing: the next report is the hand-over.
    java.close().await;
    let change = next_change(&mut observer).await;
    assert_eq!((change.participant_id(), change.node_path()), (Some("rust-1"), Some(rust_node.as_str())));
    within("leads", latch.await_leadership()).await.expect("leads");
    assert_eq!(children(&admin, election).await.len(), 1, "the observer joined nothing");

    within("close", latch.close(CloseMode::Silent)).await.expect("close");
    assert_eq!(next_change(&mut observer).await, LeaderChange::NoLeader);
    drop(observer);
    within("close", framework.close()).await;
    within("close", admin.close()).await;
}
