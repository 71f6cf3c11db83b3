//! The cache under chaos: each `zkr-chaos cache` process runs one writer session that changes the
//! subtree `<root>` at random (create with parents, set, delete with children, re-create, at
//! depths 1–3 over a few names, so that writers collide and nodes come and go) and `clients`
//! sessions that each follow the subtree with a `Cache` and a subscriber that replays every event
//! of [`Cache::events`] from the start into its own map.
//!
//! Stdin: `freeze` stops the writer (`F cache <holder> <micros>` in `cache-<tag>.log`); `check
//! <file>` compares every cache and every replay with the server's tree written to `<file>` by the
//! run (one line per node below the root: `<path> <czxid> <mzxid> <hex data>`), polling for up to
//! [`CONVERGE`], and logs `C cache <holder>/<cache|replay> <micros> ok <ms>` or `C ... differ
//! <count> <first difference>`; `stop` ends the process.
//!
//! Curator's side (`crates/chaos/java/CuratorMixChaos.java contend-cache`, tags `A...`) runs one
//! writer doing the same writes with Curator and a `CuratorCache` following `<root>`; it answers
//! `freeze` and `check <file>` alike, with the view `curator` (`C cache <holder>/curator ...`), so
//! [`verdicts`] reads both sides, within the same [`CONVERGE`].
//!
//! The negative control (`--drop-events`): the run's proxies in front of this process drop one
//! watch notification in four ([`CONTROL_DROPPED_WATCH_EVENTS`], with
//! `FaultProxy::drop_watch_events_seeded`) and keep the connections open, so the followers' caches
//! (and the replays of their events) lose changes without a reset and must be caught drifting.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zk_recipes_cache::{Cache, CacheEvent, CachedNode};
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{Deadline, Framework, ParentMode};

use crate::events::{epoch_micros, EventLog};
use crate::rng::Rng;
use crate::setup::ProcessSetup;

/// How long after `check` every cache and replay must hold exactly the server's tree (the faults
/// have stopped, the proxies healed and the writers frozen before). `CuratorMixChaos.java`'s
/// `CONVERGE_MS` is the same bound.
pub const CONVERGE: Duration = Duration::from_secs(15);
/// The deadline of one write.
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two writes of one writer (random in this range, milliseconds).
const WRITE_GAP_MS: (u64, u64) = (10, 60);
/// The share of watch notifications the negative control's proxies drop.
pub const CONTROL_DROPPED_WATCH_EVENTS: f64 = 0.25;
/// Node names at each depth.
const NAMES: [&str; 3] = ["a", "b", "c"];

/// One node as compared: czxid, mzxid, data.
pub type Snapshot = BTreeMap<String, (i64, i64, Vec<u8>)>;

/// What a cache process runs.
#[derive(Debug, Clone, clap::Args)]
pub struct CacheConfig {
    /// Where it connects, its name, its event log, its sessions' timeout.
    #[command(flatten)]
    pub setup: ProcessSetup,
    #[arg(long, default_value_t = 2)]
    pub clients: usize,
    #[arg(long)]
    pub root: String,
    /// The negative control: the run's proxies drop watch notifications; this process runs as in
    /// the real run (it only logs that it is the control).
    #[arg(long)]
    pub drop_events: bool,
}

/// Encodes a snapshot, one line per node.
pub fn encode(snapshot: &Snapshot) -> String {
    snapshot
        .iter()
        .map(|(path, (czxid, mzxid, data))| {
            format!(
                "{path} {czxid} {mzxid} {}\n",
                data.iter().map(|byte| format!("{byte:02x}")).collect::<String>()
            )
        })
        .collect()
}

/// Decodes [`encode`]'s text.
pub fn decode(text: &str) -> Option<Snapshot> {
    let mut snapshot = Snapshot::new();
    for line in text.lines().filter(|line| !line.is_empty()) {
        let mut fields = line.split(' ');
        let path = fields.next()?.to_owned();
        let czxid = fields.next()?.parse().ok()?;
        let mzxid = fields.next()?.parse().ok()?;
        let hex = fields.next().unwrap_or_default();
        let data = (0..hex.len())
            .step_by(2)
            .map(|at| u8::from_str_radix(hex.get(at..at + 2)?, 16).ok())
            .collect::<Option<Vec<u8>>>()?;
        snapshot.insert(path, (czxid, mzxid, data));
    }
    Some(snapshot)
}

/// The differences between what a follower holds and the server's tree, first few spelled out.
pub fn differences(held: &Snapshot, server: &Snapshot) -> Vec<String> {
    let mut found = Vec::new();
    for (path, node) in server {
        match held.get(path) {
            None => found.push(format!("missing {path}")),
            Some(mine) if mine != node => found.push(format!(
                "stale {path} (czxid/mzxid {:#x}/{:#x}, server {:#x}/{:#x})",
                mine.0, mine.1, node.0, node.1
            )),
            Some(_) => {}
        }
    }
    found.extend(held.keys().filter(|path| !server.contains_key(*path)).map(|path| format!("extra {path}")));
    found
}

fn entry(node: &CachedNode) -> (i64, i64, Vec<u8>) {
    (node.stat.czxid, node.stat.mzxid, node.data.as_deref().unwrap_or_default().to_vec())
}

/// Runs a cache process until `stop` (exit 0) or EOF on stdin (exit 3).
pub async fn run(config: CacheConfig) -> std::io::Result<i32> {
    let log = config.setup.open_log()?;
    if config.drop_events {
        tracing::info!(tag = %config.setup.tag, "negative control: the run's proxies drop watch notifications");
    }
    let crate::commands::Commands { freeze, check, stop } = crate::commands::listen();
    let framework = |config: &CacheConfig| config.setup.framework();
    let mut tasks = Vec::new();
    tasks.push(tokio::spawn(writer(
        framework(&config)?,
        config.setup.holder("w"),
        config.clone(),
        log.clone(),
        freeze,
        stop.clone(),
    )));
    for client in 0..config.clients {
        tasks.push(tokio::spawn(follower(
            framework(&config)?,
            config.setup.holder(client),
            config.clone(),
            log.clone(),
            check.clone(),
            stop.clone(),
        )));
    }
    println!("READY");
    for task in tasks {
        let _ = task.await;
    }
    println!("DONE");
    Ok(0)
}

async fn writer(
    framework: Framework,
    holder: String,
    config: CacheConfig,
    log: Arc<EventLog>,
    mut freeze: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let mut rng = Rng::with_seed(epoch_micros() as u64);
    let mut writes = 0_u64;
    loop {
        let gap = Duration::from_millis(rng.u64(WRITE_GAP_MS.0..=WRITE_GAP_MS.1));
        tokio::select! {
            () = tokio::time::sleep(gap) => {}
            () = until(&mut freeze) => break,
            () = until(&mut stop) => break,
        }
        let depth = rng.usize(1..=3);
        let path = (0..depth)
            .fold(config.root.clone(), |path, _| format!("{path}/{}", NAMES[rng.usize(..NAMES.len())]));
        writes += 1;
        let data = format!("{holder} {writes}").into_bytes();
        let deadline = Deadline::after(STEP_TIMEOUT);
        // Races with the other writers (NoNode, NodeExists, NotEmpty) are part of the mix.
        let _ = match framework.exists(&path, deadline).await {
            Ok(Some(_)) if rng.u64(..10) < 6 => {
                framework.set_data(&path, &data, None, deadline).await.map(drop)
            }
            Ok(Some(_)) => {
                framework.delete(&path).deleting_children_if_needed().deadline(deadline).await.map(drop)
            }
            Ok(None) => framework
                .create(&path)
                .data(data)
                .mode(CreateMode::Persistent)
                .creating_parents(ParentMode::Persistent)
                .deadline(deadline)
                .await
                .map(drop),
            Err(err) => Err(err),
        };
    }
    log.line(&format!("F cache {holder} {} {writes}", epoch_micros()));
    until(&mut stop).await;
    framework.close().await;
}

async fn follower(
    framework: Framework,
    holder: String,
    config: CacheConfig,
    log: Arc<EventLog>,
    mut check: watch::Receiver<Option<PathBuf>>,
    mut stop: watch::Receiver<bool>,
) {
    let cache = match Cache::builder(&framework, &config.root).start() {
        Ok(cache) => cache,
        Err(err) => {
            log.line(&format!("E cache {holder} {} starting: {err}", epoch_micros()));
            return;
        }
    };
    // The subscriber from the start: every event, replayed into its own map.
    let replay = Arc::new(parking_lot_free::Map::default());
    let mut events = cache.events();
    let replayed = replay.clone();
    let root = config.root.clone();
    let replayer = tokio::spawn(async move {
        while let Some(event) = events.next().await {
            let mut map = replayed.lock();
            match event {
                CacheEvent::Created { path, node } | CacheEvent::Changed { path, new: node, .. }
                    if path != root =>
                {
                    map.insert(path, entry(&node));
                }
                CacheEvent::Deleted { path, .. } => {
                    map.remove(&path);
                }
                _ => {}
            }
        }
    });
    let file = tokio::select! {
        checked = check.wait_for(Option::is_some) => checked.ok().and_then(|file| file.clone()),
        () = until(&mut stop) => None,
    };
    if let Some(file) = file {
        let server = std::fs::read_to_string(&file).ok().and_then(|text| decode(&text));
        let started = tokio::time::Instant::now();
        for view in ["cache", "replay"] {
            let Some(server) = server.as_ref() else {
                log.line(&format!(
                    "C cache {holder}/{view} {} differ 1 unreadable {}",
                    epoch_micros(),
                    file.display()
                ));
                continue;
            };
            loop {
                let held: Snapshot = match view {
                    "cache" => cache
                        .entries()
                        .into_iter()
                        .filter(|(path, _)| *path != config.root)
                        .map(|(path, node)| (path, entry(&node)))
                        .collect(),
                    _ => replay.lock().clone(),
                };
                let found = differences(&held, server);
                if found.is_empty() {
                    log.line(&format!(
                        "C cache {holder}/{view} {} ok {} nodes {}",
                        epoch_micros(),
                        started.elapsed().as_millis(),
                        server.len()
                    ));
                    break;
                }
                if started.elapsed() >= CONVERGE {
                    log.line(&format!(
                        "C cache {holder}/{view} {} differ {} {}",
                        epoch_micros(),
                        found.len(),
                        found.iter().take(3).cloned().collect::<Vec<_>>().join("; ")
                    ));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
    until(&mut stop).await;
    cache.close().await;
    replayer.abort();
    framework.close().await;
}

/// A map behind a std mutex (held only between awaits).
mod parking_lot_free {
    use super::Snapshot;

    #[derive(Debug, Default)]
    pub struct Map(std::sync::Mutex<Snapshot>);

    impl Map {
        pub fn lock(&self) -> std::sync::MutexGuard<'_, Snapshot> {
            self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
        }
    }
}

/// The `C` lines' verdicts: `(view, ok, detail)` per `<holder>/<view>`.
pub fn verdicts(text: &str) -> BTreeMap<String, (bool, String)> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.splitn(6, ' ').collect();
            match fields.as_slice() {
                ["C", "cache", view, _, word, rest] => {
                    Some(((*view).to_owned(), (*word == "ok", (*rest).to_owned())))
                }
                _ => None,
            }
        })
        .collect()
}

/// Resolves once `flag` is true (or its sender is gone).
async fn until(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snapshots_round_trip_and_differ() {
        let server: Snapshot = BTreeMap::from([
            ("/c/a".to_owned(), (5, 9, b"w 1".to_vec())),
            ("/c/a/b".to_owned(), (6, 6, Vec::new())),
        ]);
        assert_eq!(decode(&encode(&server)), Some(server.clone()));
        assert!(differences(&server, &server).is_empty());
        let mut held = server.clone();
        held.insert("/c/b".to_owned(), (7, 7, Vec::new()));
        held.insert("/c/a".to_owned(), (5, 8, b"w 0".to_vec()));
        held.remove("/c/a/b");
        let found = differences(&held, &server);
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(found[0].starts_with("stale /c/a"), "{found:?}");
        assert!(found[1].starts_with("missing /c/a/b"), "{found:?}");
        assert!(found[2].starts_with("extra /c/b"), "{found:?}");
    }

    #[test]
    fn verdicts_are_read_from_the_log() {
        let log = "F cache a0x1-w 1 5\nC cache a0x1-0/cache 2 ok 120 nodes 9\nC cache a0x1-0/replay 3 differ 2 missing /x; extra /y";
        let found = verdicts(log);
        assert_eq!(found["a0x1-0/cache"], (true, "120 nodes 9".to_owned()));
        assert_eq!(found["a0x1-0/replay"], (false, "2 missing /x; extra /y".to_owned()));
    }

    #[test]
    fn curator_verdicts_are_read_like_ours() {
        // As CuratorMixChaos.java's cacheFollower writes them.
        let log = "F cache A0x1-w 1 40\nC cache A0x1-0/curator 2 ok 35 nodes 6\n\
                   C cache A0x2-0/curator 3 differ 1 stale /c/a (czxid/mzxid 0x5/0x8, server 0x5/0x9)";
        let found = verdicts(log);
        assert_eq!(found["A0x1-0/curator"], (true, "35 nodes 6".to_owned()));
        assert_eq!(
            found["A0x2-0/curator"],
            (false, "1 stale /c/a (czxid/mzxid 0x5/0x8, server 0x5/0x9)".to_owned())
        );
    }
}
