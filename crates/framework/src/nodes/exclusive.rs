//! An ephemeral node at a fixed path that only one process can hold.

use tokio::sync::oneshot;
use tracing::debug;
use zookeeper_client::{CreateMode, Stat};

use super::cleanup::CleanupQueue;
use super::cleanup::CleanupTask;
use super::on_session::ensure_containers;
use super::owned::OwnedNode;
use crate::path;
use crate::session::{Deadline, Error, Framework, Result, Session};

impl Framework {
    /// Creates `path` as an EPHEMERAL node holding `data` and returns it as ours: a node only one
    /// process can hold at a time (the single-node lock's node). `data` marks it as ours, so it
    /// must be unique to this attempt (an owner id with a random part): after a connection loss
    /// during the create, a node at `path` of our session with our data is found again, never
    /// created twice; and the node is deleted (on release or drop) only while it is still ours,
    /// at the version read, never another holder's node that stands at the path later.
    ///
    /// Missing parents are created as containers. A lost session is retried on the next one.
    ///
    /// # Errors
    /// [`Error::ZooKeeper`] with `NodeExists` ([`Error::is_node_exists`]) when another holds the
    /// node; [`Error::InvalidPath`] and [`Error::DataTooLarge`] before anything is sent; otherwise
    /// as [`Framework::retry_across_sessions`].
    ///
    /// # Cancel safety
    /// Cancel safe: the create runs in its own task, and a node it creates for a caller that is
    /// gone is deleted (if still ours). A call that fails (a timeout after a create whose reply
    /// was lost) hands the path to the cleanup worker too, so it leaves no node behind.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use std::time::Duration;
    /// use zk_recipes_framework::Deadline;
    ///
    /// let deadline = Deadline::after(Duration::from_secs(5));
    /// match framework.create_exclusive_ephemeral("/jobs/nightly/lock", b"host-7:3f2a", deadline).await {
    ///     Ok(node) => println!("ours until released: {}", node.path()),
    ///     Err(err) if err.is_node_exists() => println!("another process holds it"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn create_exclusive_ephemeral(
        &self,
        path: &str,
        data: &[u8],
        deadline: impl Into<Deadline>,
    ) -> Result<OwnedNode> {
        let deadline = deadline.into();
        path::validate(path).map_err(|reason| Error::invalid_path(path, reason))?;
        if path == "/" {
            return Err(Error::InvalidArgument("the root cannot be an ephemeral node".into()));
        }
        self.check_data_size(data.len())?;
        let (reply, answer) = oneshot::channel();
        let framework = self.clone();
        let (path, data) = (path.to_owned(), data.to_vec());
        // Pending for wait_for_cleanups until the task has settled (and handed over any cleanup).
        let settling = self.upper::<CleanupQueue>().settling();
        tokio::spawn(async move {
            // Every session a try was sent on: a try whose reply never came may have created the
            // node there.
            let tried = parking_lot::Mutex::new(Vec::new());
            let created = framework
                .retry_across_sessions(deadline, |session| {
                    let (path, data, tried) = (&path, &data, &tried);
                    async move {
                        {
                            let mut tried = tried.lock();
                            if !tried.contains(&session.id()) {
                                tried.push(session.id());
                            }
                        }
                        create_or_find(&session, path, data).await.map(|stat| (stat, session))
                    }
                })
                .await
                .map(|(stat, session)| {
                    debug!(path, session = %session.id(), "exclusive node created");
                    OwnedNode::exclusive(framework.clone(), path.clone(), stat, &session, data.clone())
                });
            if created.is_err() {
                // A failed call leaves nothing behind: the cleanup worker deletes a node a lost
                // reply created, if it is still ours (that session's, with our data).
                for session_id in tried.into_inner() {
                    let task = CleanupTask::Marked { path: path.clone(), session_id, mark: data.clone() };
                    framework.upper::<CleanupQueue>().submit(task);
                }
            }
            // A caller that is gone drops the node here, which deletes it if still ours.
            let _ = reply.send(created);
            drop(settling);
        });
        answer.await.map_err(|_| Error::Closed)?
    }
}

/// One try on `session`: our node's `Stat`, created now or found from an earlier try whose reply
/// was lost (our session's, with our data).
async fn create_or_find(session: &Session, path: &str, data: &[u8]) -> Result<Stat> {
    let options = session.create_options_for(path, CreateMode::Ephemeral);
    loop {
        match session.client().create(path, data, &options).await {
            Ok((stat, _)) => return Ok(stat),
            Err(zookeeper_client::Error::NoNode) => {
                if let Some(parent) = path::parent(path) {
                    ensure_containers(session, parent).await?;
                }
            }
            Err(zookeeper_client::Error::NodeExists) => match session.client().get_data(path).await {
                Ok((found, stat)) if stat.ephemeral_owner == session.id().0 && found == data => {
                    return Ok(stat)
                }
                Ok(_) => return Err(zookeeper_client::Error::NodeExists.into()),
                // Gone meanwhile: try the create again.
                Err(zookeeper_client::Error::NoNode) => {}
                Err(err) => return Err(err.into()),
            },
            Err(err) => return Err(err.into()),
        }
    }
}
