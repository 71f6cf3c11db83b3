//! The one-request calls on one path: read data, write data, exists, children, sync, the
//! session's ephemerals, descendant counts, who am I. Each runs under the retry policy.

use std::future::Future;

use zookeeper_client::Stat;

use crate::path;
use crate::session::calls::Nesting;
use crate::session::waiting::Sessions;
use crate::session::{Deadline, Error, Framework, Result, Session};

/// A node's data and `Stat` ([`Framework::get_data`]).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::{Deadline, NodeData};
///
/// let NodeData { data, stat, .. } = framework.get_data("/app/config", Deadline::never()).await?;
/// // Write back only if nobody changed it since the read.
/// let mut next = data;
/// next.extend_from_slice(b";reviewed");
/// framework.set_data("/app/config", &next, Some(stat.version), Deadline::never()).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct NodeData {
    /// The data.
    pub data: Vec<u8>,
    /// The node's `Stat` when it was read.
    pub stat: Stat,
}

/// Reads of one path, each a future under the retry policy.
impl Framework {
    /// `path`'s data and `Stat` (Curator's `getData().storingStatIn(stat).forPath(path)`).
    ///
    /// # Errors
    /// `NoNode` ([`Error::is_no_node`]) if it does not exist; [`Error::InvalidPath`] before anything
    /// is sent; otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// let node = framework.get_data("/app/config", zk_recipes_framework::Deadline::never()).await?;
    /// println!("{} bytes at version {}", node.data.len(), node.stat.version);
    /// # Ok(()) }
    /// ```
    pub async fn get_data(&self, path: &str, deadline: impl Into<Deadline>) -> Result<NodeData> {
        let deadline = deadline.into();
        self.read(path, deadline, |session, path| async move {
            let (data, stat) = session.client().get_data(&path).await?;
            Ok(NodeData { data, stat })
        })
        .await
    }

    /// Sets `path`'s data, if its version is `version` (any when `None`); returns the new `Stat`
    /// (Curator's `setData().withVersion(v).forPath(path, data)`). Retried after a connection
    /// loss: a versioned set whose first try committed then fails with `BadVersion`.
    ///
    /// # Errors
    /// `NoNode`, `BadVersion` from the server; [`Error::InvalidPath`] and [`Error::DataTooLarge`]
    /// before anything is sent; otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// If cancelled after the request was sent, the data may or may not have been set. Cancelled
    /// before, nothing was written.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// let stat = framework.set_data("/app/config", b"v2", Some(1), zk_recipes_framework::Deadline::never()).await?;
    /// assert_eq!(stat.version, 2);
    /// # Ok(()) }
    /// ```
    pub async fn set_data(
        &self,
        path: &str,
        data: &[u8],
        version: Option<i32>,
        deadline: impl Into<Deadline>,
    ) -> Result<Stat> {
        let deadline = deadline.into();
        self.check_data_size(data.len())?;
        self.read(path, deadline, |session, path| async move {
            Ok(session.client().set_data(&path, data, version).await?)
        })
        .await
    }

    /// `path`'s `Stat`, or `None` if it does not exist (Curator's `checkExists()`).
    ///
    /// # Errors
    /// [`Error::InvalidPath`] before anything is sent; otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// if framework.exists("/app/config", zk_recipes_framework::Deadline::never()).await?.is_none() {
    ///     println!("not configured yet");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn exists(&self, path: &str, deadline: impl Into<Deadline>) -> Result<Option<Stat>> {
        let deadline = deadline.into();
        self.read(
            path,
            deadline,
            |session, path| async move { Ok(session.client().check_stat(&path).await?) },
        )
        .await
    }

    /// `path`'s children (names, in the server's order) and its `Stat` (Curator's
    /// `getChildren().storingStatIn(stat)`).
    ///
    /// # Errors
    /// `NoNode` if it does not exist; otherwise as [`get_data`](Self::get_data).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// let (children, stat) = framework.children("/app/jobs", zk_recipes_framework::Deadline::never()).await?;
    /// assert_eq!(children.len(), stat.num_children as usize);
    /// # Ok(()) }
    /// ```
    pub async fn children(&self, path: &str, deadline: impl Into<Deadline>) -> Result<(Vec<String>, Stat)> {
        let deadline = deadline.into();
        self.read(
            path,
            deadline,
            |session, path| async move { Ok(session.client().get_children(&path).await?) },
        )
        .await
    }

    /// Makes the server this session talks to catch up with the leader on `path` (Curator's
    /// `sync()`), so that a read after it sees every write committed before it.
    ///
    /// # Errors
    /// As [`exists`](Self::exists).
    ///
    /// # Cancel safety
    /// Cancel safe: it writes nothing; a cancelled call only leaves the server's catching up
    /// unconfirmed.
    pub async fn sync(&self, path: &str, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        self.read(path, deadline, |session, path| async move { Ok(session.client().sync(&path).await?) })
            .await
    }

    /// The ephemeral nodes of this session at or below `path` (ZooKeeper's `getEphemerals`, 3.6+;
    /// Curator has none).
    ///
    /// # Errors
    /// As [`exists`](Self::exists).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn ephemerals(&self, path: &str, deadline: impl Into<Deadline>) -> Result<Vec<String>> {
        let deadline = deadline.into();
        self.read(path, deadline, |session, path| async move {
            Ok(session.client().list_ephemerals(&path).await?)
        })
        .await
    }

    /// How many nodes are below `path`, at any depth (ZooKeeper's `getAllChildrenNumber`, 3.6+).
    ///
    /// # Errors
    /// `NoNode` if it does not exist; otherwise as [`exists`](Self::exists).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn descendant_count(&self, path: &str, deadline: impl Into<Deadline>) -> Result<usize> {
        let deadline = deadline.into();
        self.read(path, deadline, |session, path| async move {
            Ok(session.client().count_descendants_number(&path).await?)
        })
        .await
    }

    /// Who the server takes this session for: the authenticated identities (ZooKeeper's `whoami`,
    /// 3.7+), as `(scheme, id)`.
    ///
    /// # Errors
    /// As [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn whoami(&self, deadline: impl Into<Deadline>) -> Result<Vec<(String, String)>> {
        let deadline = deadline.into();
        self.retry_across_sessions(deadline, |session| async move {
            let users = session.client().list_auth_users().await?;
            Ok(users.into_iter().map(|user| (user.scheme().to_owned(), user.user().to_owned())).collect())
        })
        .await
    }

    /// Runs a read (or an idempotent write) of `path` under the retry policy, across sessions.
    async fn read<T, F, Fut>(&self, path: &str, deadline: Deadline, operation: F) -> Result<T>
    where
        F: Fn(Session, String) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        path::validate(path).map_err(|reason| Error::invalid_path(path, reason))?;
        let operation = &operation;
        self.retry_across_sessions(deadline, |session| operation(session, path.to_owned())).await
    }

    /// `path`'s children, listed on the session of `generation`; `None` if `path` does not exist.
    ///
    /// # Errors
    /// [`Error::SessionLost`] once that session is gone; otherwise as [`retry`](Self::retry).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub fn children_on_session<'a>(
        &'a self,
        generation: u64,
        path: &'a str,
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<Option<Vec<String>>>> + Send + 'a {
        self.retry_loop(
            deadline.into(),
            Sessions::Only(generation),
            Nesting::Never,
            move |session| async move {
                match session.client().list_children(path).await {
                    Ok(children) => Ok(Some(children)),
                    Err(zookeeper_client::Error::NoNode) => Ok(None),
                    Err(err) => Err(err.into()),
                }
            },
        )
    }

    /// A data watch on `path` (get-data, not exists: no watch is left on a missing node), set on
    /// the session of `generation`, with the node's `Stat` as the watch was set; `None` if `path`
    /// does not exist. The watch fires when the node changes or is deleted, or when the session
    /// ends.
    ///
    /// # Errors
    /// [`Error::SessionLost`] once that session is gone; otherwise as [`retry`](Self::retry).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads. A watch the server set for a cancelled call is dropped with it,
    /// unread.
    pub fn watch_data_on_session<'a>(
        &'a self,
        generation: u64,
        path: &'a str,
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<Option<(Stat, zookeeper_client::OneshotWatcher)>>> + Send + 'a {
        self.retry_loop(
            deadline.into(),
            Sessions::Only(generation),
            Nesting::Never,
            move |session| async move {
                match session.client().get_and_watch_data(path).await {
                    Ok((_, stat, watcher)) => Ok(Some((stat, watcher))),
                    Err(zookeeper_client::Error::NoNode) => Ok(None),
                    Err(err) => Err(err.into()),
                }
            },
        )
    }
}
