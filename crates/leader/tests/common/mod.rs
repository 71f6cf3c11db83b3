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

/// The marker protocol: a leader creates the ephemeral `marker` on the session that owns its
/// latch node; `NodeExists` from someone else's marker means two leaders at once. Returns `false`
/// only for such a violation.
pub async fn mark(framework: &Framework, latch: &LeaderLatch, marker: &str) -> bool {
    let Some(node) = latch.our_node_path() else { return true };
    let Ok(session) = framework.session(Deadline::after(STEP)).await else { return true };
    // Only on the session that owns our node: the marker then dies with it.
    match session.client().check_stat(&node).await {
        Ok(Some(stat)) if session.owns(stat.ephemeral_owner) => {}
        _ => return true,
    }
    let options = session.create_options(CreateMode::Ephemeral);
    match session.client().create(marker, latch.id().as_bytes(), &options).await {
        Ok(_) => true,
        Err(zookeeper_client::Error::NodeExists) => match session.client().check_stat(marker).await {
            // Our own marker from before: not a second leader.
            Ok(Some(stat)) if session.owns(stat.ephemeral_owner) => true,
            Ok(None) => true,
            _ => false,
        },
        Err(_) => true,
    }
}

/// Deletes `marker` if our session owns it.
pub async fn unmark(framework: &Framework, marker: &str) {
    let _ = framework
        .retry(Deadline::after(STEP), |session| async move {
            match session.client().check_stat(marker).await {
                Ok(Some(stat)) if session.owns(stat.ephemeral_owner) => {
                    match session.client().delete(marker, Some(stat.version)).await {
                        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                        Err(err) => Err(err.into()),
                    }
                }
                Ok(_) => Ok(()),
                Err(err) => Err(err.into()),
            }
        })
        .await;
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
