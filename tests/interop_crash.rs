//! A crashed Rust holder hands the lock to Apache Curator 5.4: the mirror image of
//! `interop_locks`' SIGKILLed Curator holder. The Rust holder runs in a process of its own (this
//! test binary, re-executed to run [`rust_holder_process`] only), so a SIGKILL drops its TCP
//! connection without closing its session: its lock node lives until the server expires the
//! session, and only then may the Curator waiter queued behind it hold.
//!
//! Needs Java, `javac` and Debian's `libcurator-recipes-java` (`scripts/install-deps.sh`).

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::os::unix::process::ExitStatusExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::{
    assert_gone, children, curator, descendants, epoch_micros, expect_success, parse_session, protected,
    read, session, within, Env, STEP,
};
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};
use zk_recipes::framework::{path, Framework};
use zk_recipes::mutex::{Hold, Mutex};

/// Set (to the connect string) in the environment of the re-executed holder process only.
const HOLDER_CONNECT_ENV: &str = "ZK_RECIPES_CRASH_HOLDER_CONNECT";
/// The lock path of the re-executed holder process.
const HOLDER_LOCK_PATH_ENV: &str = "ZK_RECIPES_CRASH_HOLDER_LOCK_PATH";
/// The Rust holder's session timeout (the server grants 1 s .. 60 s).
const HOLDER_SESSION_TIMEOUT: Duration = Duration::from_secs(2);
/// How long the holder process lives at most if nobody kills it (it also exits when its stdin
/// closes, i.e. when the test process dies).
const HOLDER_LIFETIME: Duration = Duration::from_secs(60);
/// Poll period while watching the holder's node disappear.
const POLL: Duration = Duration::from_millis(10);

/// Not a test of its own: the body of the holder process that
/// [`killed_rust_mutex_holder_hands_over_to_curator_after_session_timeout`] starts. Without
/// [`HOLDER_CONNECT_ENV`] it returns at once. With it, it connects with a
/// [`HOLDER_SESSION_TIMEOUT`] session, takes the mutex at [`HOLDER_LOCK_PATH_ENV`], prints
/// `HELD <node path> <session id hex> <negotiated timeout ms>` and holds until it is killed. It
/// never lingers: it returns as soon as its stdin closes (the test process is gone), and fails
/// once [`HOLDER_LIFETIME`] has passed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_holder_process() {
    let Ok(connect) = std::env::var(HOLDER_CONNECT_ENV) else {
        return;
    };
    let lock_path = std::env::var(HOLDER_LOCK_PATH_ENV).expect("the holder's lock path");
    let (stdin_closed_tx, stdin_closed) = tokio::sync::oneshot::channel::<()>();
    // A plain thread, not tokio's stdin: a blocked read must not hold up the runtime's shutdown.
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin().lock(), &mut std::io::sink());
        let _ = stdin_closed_tx.send(());
    });
    tokio::select! {
        _ = stdin_closed => {}
        () = hold_forever(connect, &lock_path) => {}
        () = tokio::time::sleep(HOLDER_LIFETIME) => {
            panic!("the holder was not killed within {HOLDER_LIFETIME:?}");
        }
    }
}

/// Takes the mutex at `lock_path` on a session of its own, prints `HELD …` and never returns.
async fn hold_forever(connect: String, lock_path: &str) {
    let framework =
        Framework::builder(connect).session_timeout(HOLDER_SESSION_TIMEOUT).start().expect("framework");
    within("connecting", framework.block_until_connected(STEP)).await.expect("connected");
    let mutex = Mutex::new(&framework, lock_path).expect("mutex");
    let guard = within("lock", mutex.lock_timeout(STEP)).await.expect("the holder locks");
    let session = session(&framework).await;
    println!("HELD {} {:x} {}", guard.node_path(), session.id().0, session.timeout().as_millis());
    drop(session);
    std::future::pending::<()>().await;
    drop(guard);
}

/// The holder process: this test binary running [`rust_holder_process`] with its environment
/// set. Dropping it SIGKILLs it.
struct RustHolder {
    child: Child,
    stdout: Lines<BufReader<ChildStdout>>,
}

impl RustHolder {
    fn spawn(connect: &str, lock_path: &str) -> RustHolder {
        let exe = std::env::current_exe().expect("the test binary's path");
        let mut child = Command::new(exe)
            .args(["rust_holder_process", "--exact", "--nocapture", "--quiet", "--test-threads=1"])
            .env(HOLDER_CONNECT_ENV, connect)
            .env(HOLDER_LOCK_PATH_ENV, lock_path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .expect("re-executing the test binary as the holder");
        let stdout = BufReader::new(child.stdout.take().expect("piped stdout")).lines();
        RustHolder { child, stdout }
    }

    /// The rest of the first stdout line holding `prefix`, after it (the test harness prints its
    /// own lines around ours, and may start ours with `test rust_holder_process ... `).
    async fn expect_line(&mut self, prefix: &str) -> String {
        loop {
            let line = self.stdout.next_line().await.expect("reading the holder's stdout");
            let Some(line) = line else {
                let status = self.child.wait().await.expect("the holder's status");
                panic!("the holder exited ({status}) before printing {prefix:?}");
            };
            if let Some((_, rest)) = line.split_once(prefix) {
                return rest.trim().to_owned();
            }
        }
    }

    /// SIGKILLs the holder and reaps it; checks that the signal is what ended it.
    async fn kill(&mut self) {
        self.child.start_kill().expect("SIGKILL the holder");
        let status = within("reaping the holder", self.child.wait()).await.expect("the holder's status");
        assert_eq!(status.signal(), Some(9), "the holder died of the SIGKILL, not on its own: {status}");
    }
}

/// The sequence number of a protected lock node.
async fn sequence(framework: &Framework, node: &str) -> i64 {
    let parsed = protected(framework, node).await;
    parsed.sequence.parse().unwrap_or_else(|_| panic!("sequence of {node}: {:?}", parsed.sequence))
}

/// A Rust mutex holder in another process is SIGKILLed while a Curator `InterProcessMutex` waits
/// behind it: the holder's node outlives the process until the server expires its session, and
/// Curator holds only once that node is gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killed_rust_mutex_holder_hands_over_to_curator_after_session_timeout() {
    let env = Env::start().await;
    let framework = env.framework().await;
    let root = "/interop-crash-rust-mutex";
    let lock_path = format!("{root}/lock");

    // The Rust holder, in its own process and session.
    let mut holder = RustHolder::spawn(&env.connect(), &lock_path);
    let held = within("the Rust holder's HELD", holder.expect_line("HELD ")).await;
    let fields: Vec<&str> = held.split_whitespace().collect();
    let [rust_node, rust_session, rust_timeout_ms] = fields[..] else {
        panic!("HELD <node> <session> <timeout-ms> expected, got {held:?}");
    };
    assert_eq!(
        rust_timeout_ms,
        HOLDER_SESSION_TIMEOUT.as_millis().to_string(),
        "negotiated session timeout of the holder"
    );
    let rust_session = parse_session(rust_session);
    let ours = protected(&framework, rust_node).await;
    assert_eq!(
        path::parent(rust_node),
        Some(lock_path.as_str()),
        "the holder's node is in the lock directory"
    );
    assert_eq!(ours.stem, "lock-", "the holder's node name");
    assert_eq!(ours.ephemeral_owner, rust_session, "the holder's node is EPHEMERAL, owned by its session");

    // The Curator waiter queues behind our node.
    let mut driver = curator(["hold", "mutex", &env.connect(), &lock_path]);
    let java_session = parse_session(
        &within("SESSION", driver.expect_line("SESSION ", STEP)).await.expect("Curator's session"),
    );
    let java_node = within("Curator's node in the lock directory", async {
        loop {
            for name in children(&framework, &lock_path).await {
                let node = path::join(&lock_path, &name);
                if let Some((_, stat)) = read(&framework, &node).await {
                    if stat.ephemeral_owner == java_session {
                        return node;
                    }
                }
            }
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    let contenders = children(&framework, &lock_path).await;
    assert_eq!(contenders.len(), 2, "the holder's and Curator's nodes only: {contenders:?}");
    let rust_sequence = sequence(&framework, rust_node).await;
    let java_sequence = sequence(&framework, &java_node).await;
    assert!(
        java_sequence > rust_sequence,
        "Curator's node {java_node} sorts after ours {rust_node} (its predecessor)"
    );
    // Curator prints nothing between SESSION and acquiring (NODE, HELD): it waits.
    match driver.next_line(Duration::ZERO).await {
        Err(_) => {}
        Ok(line) => panic!("Curator must wait while the Rust holder holds, but printed {line:?}"),
    }

    // The crash. Then our node lives until the server expires the holder's session.
    holder.kill().await;
    let killed_micros = epoch_micros();
    let killed = Instant::now();
    let mut last_seen_micros = killed_micros;
    within("the holder's node expiring with its session", async {
        loop {
            let asked_micros = epoch_micros();
            if read(&framework, rust_node).await.is_none() {
                break;
            }
            // The server found the node after `asked_micros`: it was deleted later than that.
            last_seen_micros = asked_micros;
            tokio::time::sleep(POLL).await;
        }
    })
    .await;
    let gone_after = killed.elapsed();

    // Curator holds, with the node it queued, after our node was deleted.
    let (before, held_line) = within("Curator's HELD", driver.lines_until("HELD ", STEP))
        .await
        .expect("Curator holds after the holder's session expired");
    assert_eq!(before, vec![format!("NODE {java_node}")], "Curator holds the node it queued");
    let java_held_micros: i64 = held_line["HELD ".len()..].trim().parse().expect("HELD <epoch-micros>");
    assert!(
        java_held_micros > last_seen_micros,
        "Curator held at {java_held_micros} µs, but our node still existed at {last_seen_micros} µs"
    );
    assert!(read(&framework, rust_node).await.is_none(), "our node is gone while Curator holds");
    let handed_over = Duration::from_micros(u64::try_from(java_held_micros - killed_micros).unwrap_or(0));
    println!(
        "crash: Curator held {handed_over:?} after the Rust holder was SIGKILLed (its node was seen gone \
         after {gone_after:?}; session timeout {HOLDER_SESSION_TIMEOUT:?})"
    );

    // Nothing but Curator's node (and its directories) is left.
    let mut left = descendants(&framework, root).await;
    left.sort();
    assert_eq!(left, vec![lock_path.clone(), java_node.clone()], "nodes under {root}");

    within("release", driver.send_line("release")).await.expect("release");
    within("RELEASED", driver.expect_line("RELEASED", STEP)).await.expect("Curator released");
    expect_success(driver).await;
    assert_gone(&framework, root).await;
    within("close", framework.close()).await;
}
