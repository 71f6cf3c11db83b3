//! Latch contenders that follow the marker protocol (see `checks`), for the tests that run
//! several latches at once and count leaders.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use zk_recipes_framework::zookeeper_client;
use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_leader::{CloseMode, LeaderLatch, LeadershipEvent};

use crate::checks::{try_mark, try_unmark};
use crate::common::{eventually, within, STEP};

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

/// [`try_mark`] for a latch that was just told it leads: `false` only for a violation; panics
/// when the check could not be made (an error, a latch without a node, a node not ours).
pub async fn mark(framework: &Framework, latch: &LeaderLatch, marker: &str) -> bool {
    let Some(node) = latch.our_node_path() else {
        panic!("{} was told it leads, but the latch has no node", latch.id());
    };
    try_mark(framework, &node, marker, latch.id()).await.unwrap_or_else(|why| panic!("{why}"))
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
