//! [`OwnedNode`]: a node this process created and owns, deleted when dropped.

use std::fmt;

use zookeeper_client::Stat;

use super::batch;
use super::cleanup::{CleanupQueue, CleanupTask};
use super::on_session::{delete_if_created, delete_if_marked};
use crate::path;
use crate::session::calls::Nesting;
use crate::session::waiting::Sessions;
use crate::session::{Deadline, Error, Framework, Result, Session};

/// A node this process created and owns: deleted when dropped (in the background, by the
/// framework's cleanup worker), or explicitly with [`delete`](Self::delete).
///
/// Not `Clone`: exactly one owner decides when the node goes.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_framework::ProtectedCreate;
/// let node = framework.create_protected(ProtectedCreate::new("/app/members", "member-"), Deadline::never()).await?;
/// assert!(node.name().starts_with("_c_"));
/// drop(node); // deleted in the background
/// # Ok(()) }
/// ```
#[must_use = "dropping an OwnedNode deletes its node"]
pub struct OwnedNode {
    framework: Framework,
    path: String,
    /// Where the node's name starts in `path`, found once: recipes ask for the name on every
    /// listing.
    name_start: usize,
    stat: Stat,
    sequence: Option<i32>,
    session_id: zookeeper_client::SessionId,
    generation: u64,
    armed: bool,
    /// What the node carries beside its identity (one field: a waiter holds one `OwnedNode` per
    /// lock it waits for).
    extra: Extra,
}

impl OwnedNode {
    pub(super) fn new(framework: Framework, created: NewNode, session: &Session) -> Self {
        let NewNode { path, stat, sequence, siblings } = created;
        let extra = siblings.map_or(Extra::Nothing, Extra::Siblings);
        Self {
            framework,
            name_start: name_start(&path),
            path,
            stat,
            sequence,
            session_id: session.id(),
            generation: session.generation(),
            armed: true,
            extra,
        }
    }

    /// Our node at a fixed path, marked by its data.
    pub(crate) fn exclusive(
        framework: Framework,
        path: String,
        stat: Stat,
        session: &Session,
        mark: Vec<u8>,
    ) -> Self {
        Self {
            framework,
            name_start: name_start(&path),
            path,
            stat,
            sequence: None,
            session_id: session.id(),
            generation: session.generation(),
            armed: true,
            extra: Extra::Mark(mark),
        }
    }

    /// The node's full path (within the namespace).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The node's name (the last path segment).
    pub fn name(&self) -> &str {
        &self.path[self.name_start..]
    }

    /// The sequence number the server appended.
    pub fn sequence(&self) -> Option<i32> {
        self.sequence
    }

    /// The node's `Stat` at creation (`czxid` orders holders: it only grows).
    pub fn stat(&self) -> &Stat {
        &self.stat
    }

    /// The session that owns the node.
    pub fn session_id(&self) -> zookeeper_client::SessionId {
        self.session_id
    }

    /// The generation of the session that owns the node.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The node's czxid, when the create's reply carried it.
    fn known_czxid(&self) -> Option<i64> {
        (!self.stat.is_invalid()).then_some(self.stat.czxid)
    }

    /// The framework the node was created through.
    pub fn framework(&self) -> &Framework {
        &self.framework
    }

    /// Deletes the node now and reports the outcome, on the node's own session: a node already
    /// gone from a live session counts as deleted. A node at a fixed path
    /// ([`Framework::create_exclusive_ephemeral`]) is read first, and deleted at the version read
    /// only if it is still ours (our session's, with our data).
    ///
    /// # Errors
    /// [`Error::NodeLost`] if the node's session is gone (the node went with it; nothing is sent on
    /// a newer session), or if another node now stands at a fixed path (it is left alone);
    /// otherwise as [`Framework::retry`]. On an error the node is handed to the cleanup worker,
    /// which goes on trying in the background.
    ///
    /// # Cancel safety
    /// Cancel safe: the node is not lost track of. A cancelled delete drops the `OwnedNode` it
    /// took, which hands the node to the framework's cleanup worker: it is deleted in the
    /// background (a node at a fixed path only if it is still ours).
    pub async fn delete(mut self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        let path = self.path.as_str();
        let czxid = self.known_czxid();
        // A try after the first may follow a delete that the server did but whose reply was lost:
        // by then the name may be a newer node's (see `delete_if_created`).
        let retried = std::sync::atomic::AtomicBool::new(false);
        let retried = &retried;
        let result = self
            .framework
            .retry_loop(deadline, Sessions::Only(self.generation), Nesting::Never, |session| {
                let mark = match &self.extra {
                    Extra::Mark(mark) => Some(mark.as_slice()),
                    _ => None,
                };
                let retry = retried.swap(true, std::sync::atomic::Ordering::Relaxed);
                async move {
                    match (mark, czxid) {
                        (Some(mark), _) => delete_if_marked(&session, path, mark).await,
                        (None, Some(czxid)) if retry => {
                            delete_if_created(&session, path, czxid).await.map(|()| true)
                        }
                        (None, _) => match batch::delete(&session, path).await {
                            Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(true),
                            Err(err) => Err(Error::from(err)),
                        },
                    }
                }
            })
            .await;
        match result {
            Ok(true) => {
                self.armed = false;
                Ok(())
            }
            Ok(false) => {
                self.armed = false;
                Err(Error::NodeLost { path: self.path.clone() })
            }
            Err(Error::SessionLost) => Err(Error::NodeLost { path: self.path.clone() }),
            Err(err) => Err(err),
        }
    }

    /// The parent's children as listed right behind the create, if the create asked for them
    /// ([`ProtectedCreate::list_siblings`](crate::ProtectedCreate::list_siblings)) and the listing succeeded and holds this node; `None`
    /// otherwise, and after the first call.
    pub fn take_siblings(&mut self) -> Option<Vec<String>> {
        match std::mem::replace(&mut self.extra, Extra::Nothing) {
            Extra::Siblings(siblings) => Some(siblings),
            other => {
                self.extra = other;
                None
            }
        }
    }

    /// Gives up ownership without deleting: the node stays until its session ends. Returns its path.
    pub fn forget(mut self) -> String {
        self.armed = false;
        std::mem::take(&mut self.path)
    }
}

impl Drop for OwnedNode {
    fn drop(&mut self) {
        if self.armed {
            let path = std::mem::take(&mut self.path);
            let task = match std::mem::replace(&mut self.extra, Extra::Nothing) {
                Extra::Mark(mark) => CleanupTask::Marked { path, session_id: self.session_id, mark },
                _ => CleanupTask::Node { path, czxid: self.known_czxid() },
            };
            self.framework.upper::<CleanupQueue>().submit(task);
        }
    }
}

/// A node a protected create made.
pub(super) struct NewNode {
    pub(super) path: String,
    pub(super) stat: Stat,
    pub(super) sequence: Option<i32>,
    /// The parent's children listed right behind the create, when asked for and holding our node.
    pub(super) siblings: Option<Vec<String>>,
}

/// What an [`OwnedNode`] carries beside its identity.
enum Extra {
    Nothing,
    /// For a node at a fixed path ([`Framework::create_exclusive_ephemeral`]): the data that
    /// marks it as ours. Another node may be at that path later, so a delete first checks the
    /// node's owner and data, and deletes at the version it read.
    Mark(Vec<u8>),
    /// The parent's children listed right behind the create
    /// ([`ProtectedCreate::list_siblings`](crate::ProtectedCreate::list_siblings)), until taken.
    Siblings(Vec<String>),
}

/// Where the last name of `path` starts (as [`path::name`] finds it).
fn name_start(path: &str) -> usize {
    path.len() - path::name(path).len()
}

impl fmt::Debug for OwnedNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedNode")
            .field("path", &self.path)
            .field("session_id", &self.session_id)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}
