//! Work a `Drop` cannot await: releasing a lock node, putting an item back. Handed over a channel
//! to one task per queue, so no `Drop` needs a runtime.
//!
//! Lock nodes of lock-safe queues are not protected names: every consumer of an item locks the
//! same `<lock_path>/<item>`. So a lock is only ever deleted on the session that created it (a
//! new session's consumer may hold a node of the same name), which is why this does not use the
//! framework's cleanup worker (it retries across sessions).

use std::collections::HashSet;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, LazyLock, OnceLock};
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use parking_lot::Mutex;
use tokio::sync::{mpsc, Notify};
use tracing::{debug, warn, Instrument};
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{Deadline, Error as FrameworkError, Framework};

/// How long a background job keeps trying.
const JOB_TIMEOUT: Duration = Duration::from_secs(60);

/// Lock nodes this process holds or is creating, by (session id, lock node path). A consumer
/// registers a lock before it sends the create, so a lock node of our session that is in here
/// is ours, and no two consumers of this process claim the same item on one session.
static HELD_LOCKS: LazyLock<Mutex<HashSet<(i64, String)>>> = LazyLock::new(Default::default);

/// Registers a lock we are about to create; `false` if this process already holds it.
pub(crate) fn register_lock(session_id: i64, lock_node: &str) -> bool {
    HELD_LOCKS.lock().insert((session_id, lock_node.to_owned()))
}

/// Forgets a lock (released, or known not to be ours).
pub(crate) fn unregister_lock(session_id: i64, lock_node: &str) {
    HELD_LOCKS.lock().remove(&(session_id, lock_node.to_owned()));
}

/// Whether this process holds (or is creating) the lock on this session.
pub(crate) fn holds_lock(session_id: i64, lock_node: &str) -> bool {
    HELD_LOCKS.lock().contains(&(session_id, lock_node.to_owned()))
}

/// One piece of background work.
#[derive(Debug)]
pub(crate) enum Job {
    /// Delete our lock node, on the session that created it only.
    ReleaseLock {
        lock_node: String,
        generation: u64,
        session_id: i64,
        /// Our create's outcome was unknown: delete only if the node's owner is our session.
        verify_owner: bool,
    },
    /// Put an item's bytes back as a new sequential node (an item taken from a queue without a
    /// lock path that never reached the application).
    Reput { prefix: String, bytes: Vec<u8> },
}

/// The queue's side of the channel; the task starts with the first job.
#[derive(Debug)]
pub(crate) struct Background {
    framework: Framework,
    queue_path: String,
    queue_data: Arc<[u8]>,
    sender: OnceLock<mpsc::UnboundedSender<Job>>,
    pending: Arc<Pending>,
}

#[derive(Debug, Default)]
struct Pending {
    count: AtomicUsize,
    idle: Notify,
}

impl Background {
    pub(crate) fn new(framework: Framework, queue_path: String, queue_data: Arc<[u8]>) -> Self {
        Self { framework, queue_path, queue_data, sender: OnceLock::new(), pending: Arc::default() }
    }

    /// Hands `job` to the task (starting it if needed). Never blocks; without a runtime (the
    /// task could not start) the job is dropped with a warning.
    pub(crate) fn submit(&self, job: Job) {
        let sender = self.sender.get_or_init(|| self.spawn());
        self.pending.count.fetch_add(1, Ordering::AcqRel);
        if let Err(err) = sender.send(job) {
            self.pending.count.fetch_sub(1, Ordering::AcqRel);
            if let Job::ReleaseLock { lock_node, session_id, .. } = &err.0 {
                // Nobody will release it here: its session ends it; forget it meanwhile.
                unregister_lock(*session_id, lock_node);
            }
            warn!(job = ?err.0, "queue background task is gone; job dropped");
        }
    }

    /// Waits until every job submitted so far is done.
    pub(crate) async fn idle(&self, deadline: Deadline) -> Result<(), FrameworkError> {
        deadline
            .run(async {
                loop {
                    let notified = self.pending.idle.notified();
                    if self.pending.count.load(Ordering::Acquire) == 0 {
                        return Ok(());
                    }
                    notified.await;
                }
            })
            .await
    }

    fn spawn(&self) -> mpsc::UnboundedSender<Job> {
        let (sender, receiver) = mpsc::unbounded_channel();
        let worker = Worker {
            framework: self.framework.clone(),
            queue_path: self.queue_path.clone(),
            queue_data: self.queue_data.clone(),
            pending: self.pending.clone(),
        };
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                let span = tracing::info_span!("queue_background", path = %self.queue_path);
                runtime.spawn(worker.run(receiver).instrument(span));
            }
            Err(_) => warn!("no tokio runtime: queue background jobs cannot run"),
        }
        sender
    }
}

struct Worker {
    framework: Framework,
    queue_path: String,
    queue_data: Arc<[u8]>,
    pending: Arc<Pending>,
}

impl Worker {
    /// Runs jobs concurrently until every sender is gone and every job is done.
    async fn run(self, mut receiver: mpsc::UnboundedReceiver<Job>) {
        let mut running = FuturesUnordered::new();
        let mut open = true;
        while open || !running.is_empty() {
            tokio::select! {
                job = receiver.recv(), if open => match job {
                    Some(job) => running.push(self.run_job(job)),
                    None => open = false,
                },
                Some(()) = running.next(), if !running.is_empty() => {
                    if self.pending.count.fetch_sub(1, Ordering::AcqRel) == 1 {
                        self.pending.idle.notify_waiters();
                    }
                }
            }
        }
    }

    async fn run_job(&self, job: Job) {
        let outcome = match &job {
            Job::ReleaseLock { lock_node, generation, session_id, verify_owner } => {
                let released = self.release_lock(lock_node, *generation, *session_id, *verify_owner).await;
                unregister_lock(*session_id, lock_node);
                released
            }
            Job::Reput { prefix, bytes } => self.reput(prefix, bytes).await,
        };
        match outcome {
            Ok(()) => debug!(?job, "background job done"),
            Err(FrameworkError::Closed) => debug!(?job, "framework closed; background job dropped"),
            Err(err) => warn!(?job, %err, "background job failed"),
        }
    }

    async fn release_lock(
        &self,
        lock_node: &str,
        generation: u64,
        session_id: i64,
        verify_owner: bool,
    ) -> Result<(), FrameworkError> {
        self.framework
            .retry(Deadline::after(JOB_TIMEOUT), |session| async move {
                if session.generation() != generation || session.id().0 != session_id {
                    // Our session is gone, and our ephemeral lock node with it.
                    return Ok(());
                }
                if verify_owner {
                    match session.client().check_stat(lock_node).await? {
                        Some(stat) if session.owns(stat.ephemeral_owner) => {}
                        _ => return Ok(()),
                    }
                }
                match session.client().delete(lock_node, None).await {
                    Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                    Err(err) => Err(err.into()),
                }
            })
            .await
    }

    async fn reput(&self, prefix: &str, bytes: &[u8]) -> Result<(), FrameworkError> {
        let (framework, queue_path, queue_data) = (&self.framework, &*self.queue_path, &*self.queue_data);
        framework
            .retry(Deadline::after(JOB_TIMEOUT), |session| async move {
                let options = session.create_options_for(prefix, CreateMode::PersistentSequential);
                match session.client().create(prefix, bytes, &options).await {
                    Ok(_) => Ok(()),
                    Err(zookeeper_client::Error::NoNode) => {
                        crate::nodes::create_persistent(framework, &session, queue_path, queue_data).await?;
                        session.client().create(prefix, bytes, &options).await?;
                        Ok(())
                    }
                    Err(err) => Err(err.into()),
                }
            })
            .await
    }
}
