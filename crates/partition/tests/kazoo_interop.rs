//! The kazoo layout against real kazoo 2.11 `SetPartitioner` workers (run by the Python of the
//! virtualenv `scripts/install-deps.sh` makes) on a real ZooKeeper server: a mixed party of Rust
//! and kazoo workers splits the items by kazoo's rule with no item owned twice, and when a kazoo
//! worker dies, the others (Rust among them) take its items.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use parking_lot::Mutex as SyncMutex;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use zk_recipes_partition::PartitionLayout;
use zk_recipes_test_support::*;
use zk_recipes_testing::{kazoo_python, TestingServer};

/// One kazoo `SetPartitioner` worker, driven as kazoo's docs show: prints `ACQUIRED <items>`
/// each time it holds a (new) set, `RELEASED` when it gave its set up; finishes (releasing and
/// leaving the party) when its stdin closes.
const KAZOO_WORKER: &str = r#"
import sys, threading, time
from kazoo.client import KazooClient

hosts, path, identifier, settle, items = sys.argv[1:6]
zk = KazooClient(hosts=hosts, timeout=4)
zk.start(timeout=20)
stop = threading.Event()

def watch_stdin():
    sys.stdin.read()
    stop.set()

threading.Thread(target=watch_stdin, daemon=True).start()
partitioner = zk.SetPartitioner(
    path=path, set=items.split(","), identifier=identifier,
    time_boundary=float(settle), max_reaction_time=0.2)
print("JOINED", flush=True)
last = None
while not stop.is_set():
    if partitioner.failed:
        print("FAILED", flush=True)
        break
    elif partitioner.release:
        partitioner.release_set()
        last = None
        print("RELEASED", flush=True)
    elif partitioner.acquired:
        owned = sorted(partitioner)
        if owned != last:
            last = owned
            print("ACQUIRED " + ",".join(owned), flush=True)
        time.sleep(0.05)
    elif partitioner.allocating:
        partitioner.wait_for_acquire(0.2)
if not partitioner.failed:
    partitioner.finish()
print("FINISHED", flush=True)
zk.stop()
zk.close()
"#;

/// A running kazoo worker and what it last said it owns (`None` while it owns no set).
struct KazooWorker {
    child: Child,
    owned: Arc<SyncMutex<Option<BTreeSet<String>>>>,
    lines: Arc<SyncMutex<Vec<String>>>,
}

impl KazooWorker {
    fn start(connect: &str, path: &str, identifier: &str, settle: Duration, items: &[String]) -> Self {
        let python = kazoo_python().unwrap_or_else(|err| panic!("{err}"));
        let mut child = Command::new(python)
            .arg("-u")
            .arg("-c")
            .arg(KAZOO_WORKER)
            .args([connect, path, identifier, &settle.as_secs_f64().to_string(), &items.join(",")])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn kazoo");
        let stdout = child.stdout.take().expect("stdout");
        let owned = Arc::new(SyncMutex::new(None));
        let lines = Arc::new(SyncMutex::new(Vec::new()));
        let (owned_by_reader, lines_by_reader) = (owned.clone(), lines.clone());
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if let Some(items) = line.strip_prefix("ACQUIRED") {
                    let items = items.trim().split(',').filter(|item| !item.is_empty()).map(String::from);
                    *owned_by_reader.lock() = Some(items.collect());
                } else if line == "RELEASED" || line == "FINISHED" {
                    *owned_by_reader.lock() = None;
                }
                lines_by_reader.lock().push(line);
            }
        });
        Self { child, owned, lines }
    }

    fn owned(&self) -> Option<BTreeSet<String>> {
        self.owned.lock().clone()
    }

    /// Closes its stdin: it finishes (releases, leaves the party) and exits.
    async fn finish(mut self) {
        drop(self.child.stdin.take());
        let status = within("kazoo finishes", self.child.wait()).await.expect("wait");
        assert!(status.success(), "kazoo exited with {status}: {:?}", self.lines.lock());
    }
}

/// kazoo's rule, written out: `sorted(items)[i::len(workers)]`.
fn kazoo_rule(items: &[String], workers: &[&str], identifier: &str) -> BTreeSet<String> {
    let mut sorted_items = items.to_vec();
    sorted_items.sort();
    let mut sorted_workers = workers.to_vec();
    sorted_workers.sort();
    let index = sorted_workers.iter().position(|worker| *worker == identifier).expect("a member");
    sorted_items.into_iter().skip(index).step_by(sorted_workers.len()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rust_and_kazoo_workers_split_the_items_and_take_a_dead_kazoo_worker_s_share() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let observer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("observer");
    let (connect, path, items) = (server.connect_string(), "/partition/kazoo-mixed", items(16));
    let settle = Duration::from_secs(1);
    let spec = WorkerSpec {
        connect: &connect,
        path,
        items: &items,
        settle,
        layout: PartitionLayout::Kazoo,
        session_timeout: Duration::from_secs(4),
    };
    let ledger = Ledger::new();
    let rust = [spec.start("rust-1", &ledger), spec.start("rust-2", &ledger)];
    let kazoo_1 = KazooWorker::start(&connect, path, "kazoo-1", settle, &items);
    let kazoo_2 = KazooWorker::start(&connect, path, "kazoo-2", settle, &items);

    // Each holds exactly its share by kazoo's rule; the server shows one lock node per item.
    let everyone = ["rust-1", "rust-2", "kazoo-1", "kazoo-2"];
    let split = |kazoo: Vec<(&str, &KazooWorker)>, workers: &[&str]| {
        let rust_ok = rust.iter().all(|worker| worker.owned() == kazoo_rule(&items, workers, &worker.name));
        let kazoo_ok =
            kazoo.iter().all(|(name, worker)| worker.owned() == Some(kazoo_rule(&items, workers, name)));
        rust_ok && kazoo_ok
    };
    let one_lock_node_each =
        || async { lock_nodes(&observer, path, &items).await.values().all(|holders| holders.len() == 1) };
    within_for(Duration::from_secs(60), "the four split the items by kazoo's rule", async {
        while !(split(vec![("kazoo-1", &kazoo_1), ("kazoo-2", &kazoo_2)], &everyone)
            && one_lock_node_each().await)
        {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    // Our party nodes are kazoo's ShallowParty nodes: `<uuid hex>-<identifier>`, the identifier as data.
    let party = format!("{path}/party");
    let members: BTreeMap<String, String> = {
        let mut members = BTreeMap::new();
        for child in children(&observer, &party).await {
            let (data, owner) = data_and_owner(&observer, &format!("{party}/{child}")).await.expect("member");
            assert_ne!(owner, 0, "{child} is ephemeral");
            let (hex, identifier) = child.split_once('-').expect("uuid hex, a dash, the identifier");
            assert!(hex.len() == 32 && hex.bytes().all(|byte| byte.is_ascii_hexdigit()), "{child}");
            assert_eq!(String::from_utf8(data).expect("utf-8"), identifier);
            members.insert(identifier.to_owned(), child);
        }
        members
    };
    assert_eq!(
        members.keys().map(String::as_str).collect::<Vec<_>>(),
        ["kazoo-1", "kazoo-2", "rust-1", "rust-2"]
    );

    // kazoo-2 dies: once its session ends and the party settles, the three take its items.
    let mut kazoo_2 = kazoo_2;
    kazoo_2.child.kill().await.expect("kill kazoo-2");
    let survivors = ["rust-1", "rust-2", "kazoo-1"];
    within_for(Duration::from_secs(60), "the three split the items by kazoo's rule", async {
        while !(split(vec![("kazoo-1", &kazoo_1)], &survivors) && one_lock_node_each().await) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    ledger.assert_no_violations();

    // A kazoo worker that finishes gives its items to the Rust workers.
    kazoo_1.finish().await;
    within_for(Duration::from_secs(60), "the Rust workers own everything", async {
        while !split(vec![], &["rust-1", "rust-2"]) {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    ledger.assert_no_violations();
    let [first, second] = rust;
    first.close().await;
    second.close().await;
    no_children_left(&observer, &party).await;
    close_all([observer]).await;
}
