//! `zk-recipes-tests`: the workspace's cross-recipe and interop tests (`tests/*.rs`, not
//! published), and this library of the helpers they share (servers, deadlines, listings, the
//! Curator driver's steps).

use std::future::IntoFuture;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_recipes::framework::zookeeper_client::{self, Stat};
use zk_recipes::framework::{path, Deadline, Framework, Session};
use zk_recipes_testing::{CuratorProcess, ServerSlot, TestingServer};

/// The deadline of one step (an acquire, a listing, a line from the driver).
pub const STEP: Duration = Duration::from_secs(30);

/// How long a test waits for the server to delete empty containers.
pub const CLEANUP: Duration = Duration::from_secs(20);

/// Awaits `future` within [`STEP`], panicking with `what` otherwise.
pub async fn within<T>(what: &str, future: impl IntoFuture<Output = T>) -> T {
    within_for(what, STEP, future).await
}

/// Awaits `future` within `timeout`, panicking with `what` otherwise.
pub async fn within_for<T>(what: &str, timeout: Duration, future: impl IntoFuture<Output = T>) -> T {
    tokio::time::timeout(timeout, future)
        .await
        .unwrap_or_else(|_| panic!("timed out after {timeout:?}: {what}"))
}

/// A server for one test. The slot is taken first, without a deadline (tests of this binary run
/// one after another and may take a while), then the start gets its own deadline.
pub struct Env {
    /// The server.
    pub server: TestingServer,
    _slot: ServerSlot,
}

impl Env {
    /// Takes a server slot, then starts a server (within 60 s).
    pub async fn start() -> Env {
        let slot = ServerSlot::acquire().await;
        let server = within_for(
            "starting ZooKeeper",
            Duration::from_secs(60),
            TestingServer::builder().without_slot().start(),
        )
        .await
        .expect("ZooKeeper server");
        Env { server, _slot: slot }
    }

    /// The server's connect string.
    pub fn connect(&self) -> String {
        self.server.connect_string()
    }

    /// A connected framework (its own session).
    pub async fn framework(&self) -> Framework {
        let framework = Framework::builder(self.connect())
            .session_timeout(Duration::from_secs(10))
            .start()
            .expect("framework");
        within("connecting", framework.block_until_connected(STEP)).await.expect("connected");
        framework
    }
}

/// A live session of `framework`.
pub async fn session(framework: &Framework) -> Session {
    within("session", framework.session(Deadline::after(STEP))).await.expect("session")
}

/// The data and stat of `node`, `None` if it does not exist.
pub async fn read(framework: &Framework, node: &str) -> Option<(Vec<u8>, Stat)> {
    let session = session(framework).await;
    match within("get data", session.client().get_data(node)).await {
        Ok(found) => Some(found),
        Err(zookeeper_client::Error::NoNode) => None,
        Err(err) => panic!("get data {node}: {err}"),
    }
}

/// The children of `dir` (empty if it does not exist).
pub async fn children(framework: &Framework, dir: &str) -> Vec<String> {
    let session = session(framework).await;
    match within("list", session.client().list_children(dir)).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(err) => panic!("list {dir}: {err}"),
    }
}

/// Every node under `root` (not `root` itself), depth first.
pub async fn descendants(framework: &Framework, root: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for child in children(framework, &dir).await {
            let child = path::join(&dir, &child);
            found.push(child.clone());
            stack.push(child);
        }
    }
    found
}

/// Polls until `root` is gone (the server reaps empty containers every 500 ms): the test left
/// nothing behind.
pub async fn assert_gone(framework: &Framework, root: &str) {
    let started = std::time::Instant::now();
    loop {
        if read(framework, root).await.is_none() {
            return;
        }
        if started.elapsed() > CLEANUP {
            let left = descendants(framework, root).await;
            panic!("{root} still exists after {CLEANUP:?}; left under it: {left:?}");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Polls until `node` no longer exists.
pub async fn wait_deleted(framework: &Framework, node: &str) {
    let started = std::time::Instant::now();
    while read(framework, node).await.is_some() {
        assert!(started.elapsed() < STEP, "{node} still exists after {STEP:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Microseconds since the epoch, the clock the Java side prints.
pub fn epoch_micros() -> i64 {
    let since = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock after 1970");
    i64::try_from(since.as_micros()).expect("micros fit in i64")
}

/// Starts the Curator driver with `args`.
pub fn curator<I, S>(args: I) -> CuratorProcess
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    CuratorProcess::spawn(args).expect("Curator driver (needs javac and libcurator-recipes-java)")
}

/// Ends a driver that finished its command: it must exit with status 0.
pub async fn expect_success(mut driver: CuratorProcess) {
    let status = within("driver exit", driver.wait(STEP)).await.expect("driver exits");
    assert!(status.success(), "driver exited with {status}; stderr:\n{}", driver.log_tail(30));
}

/// The session id in a driver's `SESSION <hex> timeout-ms=<ms>` line, as the `ephemeral_owner`
/// of its nodes.
pub fn parse_session(line: &str) -> i64 {
    let hex = line.split_whitespace().next().unwrap_or_default();
    u64::from_str_radix(hex, 16).map(|id| id as i64).unwrap_or_else(|_| panic!("session id in {line:?}"))
}

/// One protected ephemeral-sequential node, taken apart.
#[derive(Debug)]
pub struct Protected {
    /// The node's path.
    pub path: String,
    /// The name without the protected prefix and the sequence: `lock-`, `lease-`.
    pub stem: String,
    /// The ten-character sequence.
    pub sequence: String,
    /// The node's data.
    pub data: Vec<u8>,
    /// The owning session.
    pub ephemeral_owner: i64,
}

/// Takes a protected node's name apart (checking the UUID and the `%010d` sequence) and reads it.
pub async fn protected(framework: &Framework, node_path: &str) -> Protected {
    let name = path::name(node_path);
    let rest = name.strip_prefix("_c_").unwrap_or_else(|| panic!("{node_path}: no protected prefix"));
    let (uuid, rest) = rest.split_at(36.min(rest.len()));
    assert!(is_lowercase_v4_uuid(uuid), "{node_path}: {uuid:?} is not a lowercase hyphenated v4 uuid");
    let rest = rest.strip_prefix('-').unwrap_or_else(|| panic!("{node_path}: no '-' after the uuid"));
    assert!(rest.len() > 10, "{node_path}: no sequence");
    let (stem, sequence) = rest.split_at(rest.len() - 10);
    assert!(
        sequence.chars().all(|c| c.is_ascii_digit()) || sequence.starts_with('-'),
        "{node_path}: sequence {sequence:?} is not %010d"
    );
    let (data, stat) = read(framework, node_path).await.unwrap_or_else(|| panic!("{node_path} is gone"));
    Protected {
        path: node_path.to_owned(),
        stem: stem.to_owned(),
        sequence: sequence.to_owned(),
        data,
        ephemeral_owner: stat.ephemeral_owner,
    }
}

/// The ACL of `node`, printed (`Acl` has no `PartialEq`).
pub async fn acl(framework: &Framework, node: &str) -> String {
    let session = session(framework).await;
    let (acl, _) =
        within("get acl", session.client().get_acl(node)).await.unwrap_or_else(|err| panic!("{node}: {err}"));
    format!("{acl:?}")
}

/// Whether `text` is a lowercase hyphenated version-4 UUID.
pub fn is_lowercase_v4_uuid(text: &str) -> bool {
    text.len() == 36
        && text.char_indices().all(|(index, c)| match index {
            8 | 13 | 18 | 23 => c == '-',
            14 => c == '4',
            19 => matches!(c, '8' | '9' | 'a' | 'b'),
            _ => matches!(c, '0'..='9' | 'a'..='f'),
        })
}

/// Adds 1 to the decimal counter at `counter_path` with a versioned write, retrying on BadVersion;
/// returns how many BadVersions it met (a concurrent writer).
pub async fn increment_counter(framework: &Framework, counter_path: &str) -> u64 {
    let mut conflicts = 0;
    loop {
        let session = session(framework).await;
        let (data, stat) =
            within("read counter", session.client().get_data(counter_path)).await.expect("counter");
        let value: u64 = String::from_utf8(data).expect("utf-8").trim().parse().expect("decimal counter");
        let next = (value + 1).to_string();
        match within(
            "write counter",
            session.client().set_data(counter_path, next.as_bytes(), Some(stat.version)),
        )
        .await
        {
            Ok(_) => return conflicts,
            Err(zookeeper_client::Error::BadVersion) => conflicts += 1,
            Err(err) => panic!("write counter: {err}"),
        }
    }
}

/// The check inside one exclusive hold (a mutex, a write lock), the same on every side of the
/// mixed runs: create the EPHEMERAL `<marker_dir>/writer` (it must not exist), find no other marker,
/// add 1 to the counter with a versioned write (a BadVersion means another writer), delete the
/// marker. Returns the violations seen.
pub async fn exclusive_section(framework: &Framework, marker_dir: &str, counter_path: &str) -> u64 {
    let session = session(framework).await;
    let writer = path::join(marker_dir, "writer");
    let mut violations = 0;
    let options = session.create_options(zookeeper_client::CreateMode::Ephemeral);
    match within("writer marker", session.client().create(&writer, b"", &options)).await {
        Ok(_) => {}
        Err(zookeeper_client::Error::NodeExists) => violations += 1,
        Err(err) => panic!("writer marker: {err}"),
    }
    let markers = within("markers", session.client().list_children(marker_dir)).await.expect("markers");
    if markers.len() > 1 {
        violations += 1;
    }
    violations += increment_counter(framework, counter_path).await;
    match within("delete marker", session.client().delete(&writer, None)).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
        Err(err) => panic!("delete marker: {err}"),
    }
    violations
}

/// The check inside one shared hold (a read lock): create an EPHEMERAL_SEQUENTIAL
/// `<marker_dir>/reader-`, find no writer marker, add 1 to the counter (BadVersion: another reader;
/// retried), delete it. Returns the violations seen.
pub async fn shared_section(framework: &Framework, marker_dir: &str, counter_path: &str) -> u64 {
    let session = session(framework).await;
    let options = session.create_options(zookeeper_client::CreateMode::EphemeralSequential);
    let reader_prefix = path::join(marker_dir, "reader-");
    let (_, sequence) = within("reader marker", session.client().create(&reader_prefix, b"", &options))
        .await
        .expect("reader");
    let reader = format!("{reader_prefix}{sequence}");
    let writer = path::join(marker_dir, "writer");
    let writer_there = within("writer?", session.client().check_stat(&writer)).await.expect("check");
    increment_counter(framework, counter_path).await;
    within("delete reader", session.client().delete(&reader, None)).await.expect("delete reader");
    u64::from(writer_there.is_some())
}

/// `key=value` out of a driver's `DONE k1=v1 k2=v2` line.
pub fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|pair| pair.strip_prefix(key)?.strip_prefix('='))
        .unwrap_or_else(|| panic!("{key}= in {line:?}"))
        .parse()
        .unwrap_or_else(|_| panic!("a number for {key} in {line:?}"))
}

/// Polls `condition` every 20 ms until it holds; panics naming `what` after [`STEP`].
pub async fn eventually_true<F, Fut>(what: &str, mut condition: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    within(what, async {
        while !condition().await {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await;
}
