//! ZooKeeper's own queue recipe (Curator's `SimpleDistributedQueue`): `qn-<seq>` nodes holding the
//! raw bytes, taken by deleting them.

use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info_span, Instrument};
use zk_recipes_framework::zookeeper_client::{self, CreateMode, OneshotWatcher};
use zk_recipes_framework::{path, ConnectionEvents, Deadline, Error as FrameworkError, Framework, Session};

use crate::error::{QueueError, Result};
use crate::names::SIMPLE_PREFIX;
use crate::options::DEFAULT_MAX_NODE_BYTES;

/// A FIFO queue of byte strings on ZooKeeper — ZooKeeper's own queue recipe, Curator's
/// `SimpleDistributedQueue`, with the same nodes: `<path>/qn-<seq>`, PERSISTENT_SEQUENTIAL,
/// holding the item's raw bytes. The directory is a container node (the server deletes it once
/// it is empty), created again by the next offer. Readers never create it (Curator's do): they
/// wait for it, so a reaped directory is never made again only to stay behind, empty and
/// childless, which the server would never reap.
///
/// Taking an item reads the head and deletes it: whoever deletes it first gets it
/// (delete-to-claim), so an item is handed out at most once. If the connection breaks while the
/// delete is in flight the outcome is unknown; a taker that cannot prove its delete won gives
/// the item up, so an item can be lost then (at most once, as ZooKeeper's recipe and Curator).
/// Use [`crate::DistributedQueue`] with a lock path for at-least-once delivery.
///
/// `take` waits on a children watch (no polling) and survives the directory's container being
/// reaped meanwhile. On connection loss every call retries per the framework's retry policy;
/// an [`offer`](Self::offer) whose create was in flight may then store the item twice.
///
/// ```no_run
/// use std::time::Duration;
/// use zk_recipes_framework::Framework;
/// use zk_recipes_queue::SimpleQueue;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let framework = Framework::builder("127.0.0.1:2181").start()?;
/// let queue = SimpleQueue::new(&framework, "/app/simple-jobs")?;
/// queue.offer(b"first").await?;
/// queue.offer(b"second").await?;
/// assert_eq!(queue.peek().await?.as_deref(), Some(&b"first"[..]));
/// assert_eq!(queue.take().await?, b"first");
/// assert_eq!(queue.poll().await?.as_deref(), Some(&b"second"[..]));
/// assert_eq!(queue.take_timeout(Duration::from_millis(100)).await?, None);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SimpleQueue {
    framework: Framework,
    path: Arc<str>,
}

impl SimpleQueue {
    /// A queue at `path` (nothing is sent until the first call).
    ///
    /// # Errors
    /// [`FrameworkError::InvalidPath`] (inside [`QueueError::Framework`]) for an invalid path.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        path::validate(path)
            .map_err(|reason| FrameworkError::InvalidPath { path: path.to_owned(), reason })?;
        if path == "/" {
            return Err(QueueError::InvalidArgument("a queue cannot live at the root".into()));
        }
        Ok(Self { framework: framework.clone(), path: path.into() })
    }

    /// The queue's directory.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Appends `data` as a new `qn-<seq>` node and returns the node's name.
    ///
    /// # Errors
    /// [`QueueError::ItemTooLarge`] above [`DEFAULT_MAX_NODE_BYTES`] and
    /// [`FrameworkError::Closed`] on a closed framework, both before anything is sent; otherwise
    /// as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the item may or may not have been
    /// stored, and nothing tells which. Cancelled before, nothing was stored.
    pub async fn offer(&self, data: &[u8]) -> Result<String> {
        if data.len() > DEFAULT_MAX_NODE_BYTES {
            return Err(QueueError::ItemTooLarge { size: data.len(), limit: DEFAULT_MAX_NODE_BYTES });
        }
        if self.framework.is_closed() {
            return Err(FrameworkError::Closed.into());
        }
        let prefix = path::join(&self.path, SIMPLE_PREFIX);
        let (prefix, dir, framework) = (&prefix, &*self.path, &self.framework);
        let created = framework
            .retry(Deadline::never(), |session| async move {
                let options = session.create_options_for(prefix, CreateMode::PersistentSequential);
                match session.client().create(prefix, data, &options).await {
                    Err(zookeeper_client::Error::NoNode) => {
                        framework.ensure_path(dir, Deadline::never()).await?;
                        Ok(session.client().create(prefix, data, &options).await?)
                    }
                    other => Ok(other?),
                }
            })
            .await?;
        Ok(format!("{SIMPLE_PREFIX}{}", created.1))
    }

    /// The head's data without removing it; `None` if the queue is empty.
    ///
    /// # Errors
    /// As [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn peek(&self) -> Result<Option<Vec<u8>>> {
        self.head(false, Deadline::never()).await
    }

    /// Removes the head and returns its data; `None` if the queue is empty.
    ///
    /// # Errors
    /// As [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the delete was sent, the head may have been removed, and
    /// its item is then lost: nobody gets it.
    pub async fn poll(&self) -> Result<Option<Vec<u8>>> {
        self.head(true, Deadline::never()).await
    }

    /// Removes the head and returns its data, waiting (on a children watch) until there is one.
    ///
    /// # Errors
    /// [`FrameworkError::Closed`] when the framework is closed; as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe while it waits for an item: it removes nothing then, and a later call takes the
    /// next one. Not cancel safe once it removes the head: cancelled after the delete was sent, the
    /// item may have been removed, and is then lost.
    pub async fn take(&self) -> Result<Vec<u8>> {
        let span = info_span!("simple_queue_take", path = %self.path);
        let taken = self.take_until(Deadline::never()).instrument(span).await?;
        taken.ok_or_else(|| {
            FrameworkError::Timeout { waited: Duration::ZERO, last_connection_failure: None }.into()
        })
    }

    /// As [`take`](Self::take), but gives up after `timeout` and returns `None` (Curator's
    /// `poll(timeout, unit)`).
    ///
    /// # Errors
    /// As [`take`](Self::take); a timeout is `Ok(None)`, not an error.
    ///
    /// # Cancel safety
    /// As [`take`](Self::take).
    pub async fn take_timeout(&self, timeout: Duration) -> Result<Option<Vec<u8>>> {
        let span = info_span!("simple_queue_take", path = %self.path, ?timeout);
        match self.take_until(Deadline::after(timeout)).instrument(span).await {
            Err(err) if err.is_timeout() => Ok(None),
            other => other,
        }
    }

    async fn take_until(&self, deadline: Deadline) -> Result<Option<Vec<u8>>> {
        let mut events = self.framework.connection_events();
        loop {
            let (children, watcher) = self.list(true, deadline).await?;
            if let Some(data) = self.claim_first(children, true, deadline).await? {
                return Ok(Some(data));
            }
            if let Some(watcher) = watcher {
                wait_for_change(watcher, &mut events, deadline).await?;
            }
        }
    }

    async fn head(&self, remove: bool, deadline: Deadline) -> Result<Option<Vec<u8>>> {
        let (children, _) = self.list(false, deadline).await?;
        self.claim_first(children, remove, deadline).await
    }

    /// The sorted `qn-` children, and a watch when asked for: on the children, or, while the
    /// directory is missing, on its creation.
    ///
    /// A missing directory is never created here (Curator's consumers create it): an empty
    /// container that never had a child is never reaped, so a reader that re-created its reaped
    /// directory would leave it behind for good. Producers create it.
    async fn list(&self, watch: bool, deadline: Deadline) -> Result<(Vec<String>, Option<OneshotWatcher>)> {
        let dir = &*self.path;
        let (mut children, watcher) = self
            .framework
            .retry(deadline, |session| async move {
                loop {
                    let listed = if watch {
                        session.client().list_and_watch_children(dir).await.map(|(c, w)| (c, Some(w)))
                    } else {
                        session.client().list_children(dir).await.map(|c| (c, None))
                    };
                    match listed {
                        Err(zookeeper_client::Error::NoNode) if watch => {
                            debug!(
                                path = dir,
                                "queue directory missing: waiting for a producer to create it"
                            );
                            match session.client().check_and_watch_stat(dir).await? {
                                (None, created) => return Ok((Vec::new(), Some(created))),
                                (Some(_), _) => continue,
                            }
                        }
                        Err(zookeeper_client::Error::NoNode) => return Ok((Vec::new(), None)),
                        other => return Ok(other?),
                    }
                }
            })
            .await?;
        children.retain(|child| child.starts_with(SIMPLE_PREFIX));
        children.sort_unstable();
        Ok((children, watcher))
    }

    /// Reads (and, with `remove`, deletes) the first child still there.
    async fn claim_first(
        &self,
        children: Vec<String>,
        remove: bool,
        deadline: Deadline,
    ) -> Result<Option<Vec<u8>>> {
        for child in children {
            let node = path::join(&self.path, &child);
            let node = &node;
            let claimed = self
                .framework
                .retry(deadline, |session| async move { claim(&session, node, remove).await })
                .await?;
            if claimed.is_some() {
                debug!(node = %node, remove, "queue head");
                return Ok(claimed);
            }
        }
        Ok(None)
    }
}

/// Reads `node` and, with `remove`, deletes it in the same round trip (both requests are sent
/// back to back on one session and run in order). `None` when someone else had it first.
async fn claim(session: &Session, node: &str, remove: bool) -> Result<Option<Vec<u8>>, FrameworkError> {
    let read = session.client().get_data(node);
    let delete = remove.then(|| session.client().delete(node, None));
    let data = match read.await {
        Ok((data, _)) => Some(data),
        Err(zookeeper_client::Error::NoNode) => None,
        Err(err) => return Err(err.into()),
    };
    match delete {
        None => Ok(data),
        Some(delete) => match delete.await {
            Ok(()) => Ok(data),
            Err(zookeeper_client::Error::NoNode) => Ok(None),
            Err(err) => Err(err.into()),
        },
    }
}

/// Waits until `watcher` fires, the session changes, or the deadline passes.
pub(crate) async fn wait_for_change(
    watcher: OneshotWatcher,
    events: &mut ConnectionEvents,
    deadline: Deadline,
) -> Result<()> {
    let session_changed = async {
        loop {
            match events.next().await {
                None => return Err(QueueError::from(FrameworkError::Closed)),
                Some(update) if !update.state().is_connected() => {}
                Some(_) => return Ok(()),
            }
        }
    };
    let wait = async {
        tokio::select! {
            _ = watcher.changed() => Ok(()),
            changed = session_changed => changed,
        }
    };
    match deadline.instant() {
        None => wait.await,
        Some(at) => tokio::time::timeout_at(at, wait).await.map_err(|_| deadline.timeout_error())?,
    }
}
