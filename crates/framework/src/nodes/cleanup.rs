//! The framework-owned worker that deletes nodes nobody is waiting on any more: guards dropped
//! without an explicit release, acquires cancelled after their create was sent.
//!
//! Handing work over is a plain channel send, so `Drop` implementations need no runtime.

use std::sync::Arc;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use tokio::sync::mpsc;
use tracing::{debug, warn};

use super::on_session::{delete_children, delete_if_created, delete_if_marked};
use super::session_marker::UndecidedCreate;
use crate::path;
use crate::session::duration::ReadableDuration;
use crate::session::in_flight::InFlight;
use crate::session::retry::Backoff;
use crate::session::{Deadline, Error, Framework, Result, Session};

/// A node (or nodes) to delete.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum CleanupTask {
    /// Delete this exact path (any version).
    /// A node's path, and its czxid when known: then only the node that create made is deleted,
    /// not a node made later under the same name.
    Node { path: String, czxid: Option<i64> },
    /// A guaranteed delete: `path` at `version`, and its descendants first if `with_children`.
    Guaranteed { path: String, version: Option<i32>, with_children: bool },
    /// Delete every child of `parent` whose name starts with `prefix` (a protected create whose
    /// outcome is unknown: the prefix holds a UUID of ours, so whatever carries it is ours).
    Protected { parent: String, prefix: String },
    /// Delete `path` if it is still the ephemeral node of session `session_id` holding `mark` (a
    /// node at a fixed path, which another may hold later); nothing once that session is gone.
    Marked { path: String, session_id: zookeeper_client::SessionId, mark: Vec<u8> },
    /// The node (if any) of a create whose name names only the session (ZooKeeper's lock recipe):
    /// told apart from the session's other nodes by its lane's floor ([`crate::session_marker`]).
    Undecided(UndecidedCreate),
}

/// The sending side, owned by the framework core.
#[derive(Debug)]
pub(crate) struct CleanupQueue {
    sending: CleanupSender,
    receiver: parking_lot::Mutex<Option<mpsc::UnboundedReceiver<CleanupTask>>>,
}

/// See [`CleanupQueue::settling`].
pub(crate) struct SettlingGuard {
    pending: Arc<InFlight>,
}

impl Drop for SettlingGuard {
    fn drop(&mut self) {
        self.pending.finish_one();
    }
}

impl CleanupQueue {
    pub(crate) fn new() -> Self {
        let (sender, receiver) = mpsc::unbounded_channel();
        let sending = CleanupSender { sender, pending: Arc::default() };
        Self { sending, receiver: parking_lot::Mutex::new(Some(receiver)) }
    }

    /// Counts a background task that may still create a node to clean up (an exclusive create
    /// whose caller may be gone) as pending until the guard is dropped, so that
    /// [`Framework::wait_for_cleanups`] waits for it too.
    pub(crate) fn settling(&self) -> SettlingGuard {
        self.sending.settling()
    }

    /// Hands `task` to the worker. Never blocks, never needs a runtime.
    pub(crate) fn submit(&self, task: CleanupTask) {
        self.sending.submit(task);
    }

    /// A sending side of its own, for a session's batcher (which has no framework handle).
    pub(crate) fn sender(&self) -> CleanupSender {
        self.sending.clone()
    }
}

/// A clone of the queue's sending side: see [`CleanupQueue::sender`].
#[derive(Debug, Clone)]
pub(crate) struct CleanupSender {
    sender: mpsc::UnboundedSender<CleanupTask>,
    pending: Arc<InFlight>,
}

impl CleanupSender {
    /// As [`CleanupQueue::submit`].
    pub(crate) fn submit(&self, task: CleanupTask) {
        self.pending.start_one();
        if self.sender.send(task).is_err() {
            // The worker is gone: the framework is closed and its session with it.
            self.pending.finish_one();
        }
    }

    /// As [`CleanupQueue::settling`].
    pub(crate) fn settling(&self) -> SettlingGuard {
        self.pending.start_one();
        SettlingGuard { pending: self.pending.clone() }
    }
}

impl Framework {
    /// Deletes `path` in the background, retrying through connection losses until it is gone or
    /// the framework is closed. For nodes with a unique name (every protected node is).
    pub fn delete_in_background(&self, path: impl Into<String>) {
        self.upper::<CleanupQueue>().submit(CleanupTask::Node { path: path.into(), czxid: None });
    }

    /// Hands a guaranteed delete ([`crate::DeleteBuilder::guaranteed`]) to the worker.
    pub(crate) fn delete_in_background_guaranteed(
        &self,
        path: String,
        version: Option<i32>,
        with_children: bool,
    ) {
        self.upper::<CleanupQueue>().submit(CleanupTask::Guaranteed { path, version, with_children });
    }

    /// How many background deletions are not finished yet.
    pub fn pending_cleanups(&self) -> usize {
        self.upper::<CleanupQueue>().sending.pending.count()
    }

    /// Waits until every background deletion handed over so far has finished, and every
    /// exclusive create still running for a caller that may be gone has settled (see
    /// [`Framework::create_exclusive_ephemeral`]).
    ///
    /// # Errors
    /// [`Error::Timeout`] if they have not by `deadline`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits. The cleanups go on in the background either way.
    pub async fn wait_for_cleanups(&self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        let pending = self.upper::<CleanupQueue>().sending.pending.clone();
        deadline
            .run(async move {
                pending.idle().await;
                Ok(())
            })
            .await
    }
}

/// The worker: runs every task concurrently until it is done or the framework closes.
///
/// It must not keep the framework open: it works through a handle that does not close it on drop
/// ([`Framework::without_keeping_open`]), and stops when the framework closes.
pub(crate) async fn run_worker(framework: Framework) {
    let queue = framework.upper::<CleanupQueue>();
    let Some(mut receiver) = queue.receiver.lock().take() else {
        return;
    };
    let pending = queue.sending.pending.clone();
    let mut closed = framework.core().subscribe();
    let mut running = FuturesUnordered::new();
    loop {
        tokio::select! {
            _ = closed.wait_for(|snapshot| snapshot.closed) => break,
            task = receiver.recv() => match task {
                Some(task) => running.push(run_task(&framework, task)),
                None => break,
            },
            Some(()) = running.next(), if !running.is_empty() => pending.finish_one(),
        }
    }
    // Closed: the session is closed with the framework, and its ephemeral nodes with it.
    for _ in 0..running.len() {
        pending.finish_one();
    }
    receiver.close();
    while receiver.try_recv().is_ok() {
        pending.finish_one();
    }
}

async fn run_task(framework: &Framework, mut task: CleanupTask) {
    let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
    loop {
        let session = match framework.session(Deadline::never()).await {
            Ok(session) => session,
            Err(_) => return,
        };
        match perform(&session, &mut task).await {
            Ok(()) => {
                debug!(?task, "cleaned up");
                return;
            }
            Err(err) if err.is_retryable() || err.is_session_lost() => {
                let pause = backoff.next_pause();
                debug!(?task, %err, backoff = %ReadableDuration(pause), "cleanup will retry");
                tokio::time::sleep(pause).await;
            }
            Err(err) => {
                warn!(?task, %err, "cleanup failed for good");
                return;
            }
        }
    }
}

async fn perform(session: &Session, task: &mut CleanupTask) -> Result<()> {
    match task {
        CleanupTask::Node { path, czxid: None } => delete_if_exists(session, path).await,
        CleanupTask::Node { path, czxid: Some(czxid) } => delete_if_created(session, path, *czxid).await,
        CleanupTask::Guaranteed { path, version, with_children } => {
            if *with_children {
                delete_children(session, path).await?;
            }
            match session.client().delete(path, *version).await {
                Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                Err(err) => Err(Error::from(err)),
            }
        }
        CleanupTask::Marked { path, session_id, mark } => {
            if session.id() != *session_id {
                // The node went with its session.
                return Ok(());
            }
            delete_if_marked(session, path, mark).await.map(drop)
        }
        CleanupTask::Undecided(create) => create.clean(session).await,
        CleanupTask::Protected { parent, prefix } => {
            let children = match session.client().list_children(parent).await {
                Ok(children) => children,
                Err(zookeeper_client::Error::NoNode) => return Ok(()),
                Err(err) => return Err(err.into()),
            };
            for child in children.iter().filter(|child| child.starts_with(prefix.as_str())) {
                delete_if_exists(session, &path::join(parent, child)).await?;
            }
            Ok(())
        }
    }
}

async fn delete_if_exists(session: &Session, path: &str) -> Result<()> {
    match session.client().delete(path, None).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
        Err(err) => Err(Error::from(err)),
    }
}
