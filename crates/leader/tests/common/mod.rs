//! Shared helpers for the leader crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

#[path = "../../../framework/tests/common/shared.rs"]
mod shared;

use std::future::Future;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use shared::builder;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{Deadline, ErrorPolicy, Framework};
use zk_recipes_leader::{CloseMode, LeaderLatch, LeadershipEvent};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};

/// A started framework with `policy`.
pub fn framework(connect_string: &str, session_timeout: Duration, policy: ErrorPolicy) -> Framework {
    builder(connect_string, session_timeout).error_policy(policy).start().expect("framework")
}

/// The children of `path` (none if it does not exist).
pub async fn children(framework: &Framework, path: &str) -> Vec<String> {
    framework
        .retry(Deadline::after(STEP), |session| async move {
            match session.client().list_children(path).await {
                Ok(children) => Ok(children),
                Err(zookeeper_client::Error::NoNode) => Ok(Vec::new()),
                Err(err) => Err(err.into()),
            }
        })
        .await
        .expect("list children")
}

/// The data of `path`, if it exists.
pub async fn data(framework: &Framework, path: &str) -> Option<Vec<u8>> {
    framework
        .retry(Deadline::after(STEP), |session| async move {
            match session.client().get_data(path).await {
                Ok((data, _)) => Ok(Some(data)),
                Err(zookeeper_client::Error::NoNode) => Ok(None),
                Err(err) => Err(err.into()),
            }
        })
        .await
        .expect("get data")
}

/// Polls until no node is left under any of `dirs` and the server holds no watch.
pub async fn assert_clean<F, Fut>(admin: &Framework, dirs: &[&str], watch_count: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = usize>,
{
    for dir in dirs {
        eventually(&format!("no node left under {dir}"), || async { children(admin, dir).await.is_empty() })
            .await;
    }
    eventually("no watch left on the server", || async { watch_count().await == 0 }).await;
}

/// The marker protocol, for any leader: it creates the ephemeral `marker` (data: its `id`) on the
/// session that owns its leader `node`, so the marker dies with that session. Someone else's
/// marker already there means two leaders at once.
///
/// `Ok(true)`: marked (or our marker was already there, as after a create whose reply was lost).
/// `Ok(false)`: a violation, someone else's marker is there (or was there, and went while we
/// looked). `Err`: the check could not be made, which must fail the test: an error that outlived
/// a step of retries, or a leader whose node is missing or belongs to another session.
pub async fn try_mark(framework: &Framework, node: &str, marker: &str, id: &str) -> Result<bool, String> {
    enum Found {
        Marked,
        Others(Option<(Vec<u8>, i64)>),
        NodeMissing,
        NodeNotOurs { owner: i64, session: i64 },
    }
    let found = framework
        .retry(Deadline::after(STEP), |session| async move {
            match session.client().check_stat(node).await? {
                None => return Ok(Found::NodeMissing),
                Some(stat) if !session.owns(stat.ephemeral_owner) => {
                    return Ok(Found::NodeNotOurs { owner: stat.ephemeral_owner, session: session.id().0 })
                }
                Some(_) => {}
            }
            let options = session.create_options(CreateMode::Ephemeral);
            match session.client().create(marker, id.as_bytes(), &options).await {
                Ok(_) => Ok(Found::Marked),
                Err(zookeeper_client::Error::NodeExists) => match session.client().get_data(marker).await {
                    Ok((_, stat)) if session.owns(stat.ephemeral_owner) => Ok(Found::Marked),
                    Ok((data, stat)) => Ok(Found::Others(Some((data, stat.ephemeral_owner)))),
                    // Someone else's marker stood while we led, and went: still two leaders.
                    Err(zookeeper_client::Error::NoNode) => Ok(Found::Others(None)),
                    Err(err) => Err(err.into()),
                },
                Err(err) => Err(err.into()),
            }
        })
        .await
        .map_err(|err| format!("{id} could not mark {marker} (leader node {node}): {err}"))?;
    match found {
        Found::Marked => Ok(true),
        Found::Others(other) => {
            let other = match other {
                Some((data, owner)) => format!("{:?} (session {owner:#x})", String::from_utf8_lossy(&data)),
                None => "a marker gone by the time we read it".to_owned(),
            };
            eprintln!("two leaders at once: {id} leads while {marker} is {other}");
            Ok(false)
        }
        Found::NodeMissing => Err(format!("{id} was told it leads, but its node {node} does not exist")),
        Found::NodeNotOurs { owner, session } => Err(format!(
            "{id} was told it leads, but its node {node} belongs to session {owner:#x}, not ours ({session:#x})"
        )),
    }
}

/// [`try_mark`] for a latch that was just told it leads: `false` only for a violation; panics
/// when the check could not be made (an error, a latch without a node, a node not ours).
pub async fn mark(framework: &Framework, latch: &LeaderLatch, marker: &str) -> bool {
    let Some(node) = latch.our_node_path() else {
        panic!("{} was told it leads, but the latch has no node", latch.id());
    };
    try_mark(framework, &node, marker, latch.id()).await.unwrap_or_else(|why| panic!("{why}"))
}

/// Deletes `marker` if our session owns it; `Err` if that could not be done within a step of
/// retries (a marker left behind would read as a second leader later).
pub async fn try_unmark(framework: &Framework, marker: &str) -> Result<(), String> {
    framework
        .retry(Deadline::after(STEP), |session| async move {
            match session.client().check_stat(marker).await? {
                Some(stat) if session.owns(stat.ephemeral_owner) => {
                    match session.client().delete(marker, Some(stat.version)).await {
                        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                        Err(err) => Err(err.into()),
                    }
                }
                _ => Ok(()),
            }
        })
        .await
        .map_err(|err| format!("could not delete our marker {marker}: {err}"))
}

/// [`try_unmark`], panicking if it fails.
pub async fn unmark(framework: &Framework, marker: &str) {
    try_unmark(framework, marker).await.unwrap_or_else(|why| panic!("{why}"));
}

/// A latch participant on its own framework (session) that follows the marker protocol.
pub struct Contender {
    pub id: String,
    pub framework: Framework,
    pub latch: LeaderLatch,
    close: mpsc::UnboundedSender<CloseMode>,
    task: JoinHandle<()>,
}

impl Contender {
    pub fn start(
        framework: Framework,
        path: &str,
        marker: &str,
        id: &str,
        violations: Arc<AtomicU32>,
    ) -> Self {
        let latch = LeaderLatch::new(&framework, path, id).expect("latch");
        let (close, mut close_requests) = mpsc::unbounded_channel::<CloseMode>();
        let mut events = latch.subscribe();
        latch.start().expect("start");
        let task = {
            let (framework, latch, marker) = (framework.clone(), latch.clone(), marker.to_owned());
            tokio::spawn(async move {
                loop {
                    tokio::select! {
                        event = events.next() => match event {
                            Some(LeadershipEvent::IsLeader { .. }) => {
                                if !mark(&framework, &latch, &marker).await {
                                    violations.fetch_add(1, Ordering::SeqCst);
                                }
                            }
                            Some(LeadershipEvent::NotLeader { .. }) => unmark(&framework, &marker).await,
                            Some(other) => panic!("unexpected event {other:?}"),
                            None => return,
                        },
                        Some(mode) = close_requests.recv() => {
                            // Step down first, then leave: the marker never outlives our leadership.
                            unmark(&framework, &marker).await;
                            latch.close(mode).await.expect("close");
                            // Events still queued (an IsLeader heard before the close) are stale:
                            // the latch has no node to mark with any more.
                            return;
                        }
                    }
                }
            })
        };
        Self { id: id.to_owned(), framework, latch, close, task }
    }

    /// Closes the latch (after removing the marker) and closes the framework.
    pub async fn close(self, mode: CloseMode) {
        let _ = self.close.send(mode);
        within("contender closes", self.task).await.expect("contender task");
        within("framework close", self.framework.close()).await;
    }
}

/// How many of `contenders` say they lead.
pub fn leaders(contenders: &[Contender]) -> Vec<usize> {
    contenders
        .iter()
        .enumerate()
        .filter(|(_, contender)| contender.latch.has_leadership())
        .map(|(i, _)| i)
        .collect()
}

/// Waits until exactly one contender leads and the marker names it; returns its index.
pub async fn exactly_one_leader(admin: &Framework, contenders: &[Contender], marker: &str) -> usize {
    let found = std::cell::Cell::new(None);
    eventually("exactly one leader, named by the marker", || {
        let found = &found;
        async move {
            let leaders = leaders(contenders);
            if leaders.len() != 1 {
                return false;
            }
            let marked = data(admin, marker).await;
            if marked.as_deref() == Some(contenders[leaders[0]].id.as_bytes()) {
                found.set(Some(leaders[0]));
                true
            } else {
                false
            }
        }
    })
    .await;
    found.get().expect("a leader")
}
