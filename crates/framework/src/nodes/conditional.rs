//! Conditional writes sent exactly once, with an honest outcome after a lost reply
//! ([`Framework::write_once`]).
//!
//! A versioned `setData` (or a plain create) that is retried after a connection loss cannot tell
//! its own earlier success from someone else's write: the retry fails with `BadVersion`
//! (`NodeExists`). A caller that takes that as "lost the race, try again" applies one change
//! twice; Curator's retried calls behave that way. Here each write is one plain request (a create,
//! or a versioned `setData`) sent once on the session, outside the retry policy, and after a
//! connection loss the node is read back: if it is provably unchanged the write is sent again,
//! otherwise the caller gets [`Error::OutcomeUnknown`]. The guarantee comes from sending once and
//! reading back, not from the request's kind: a one-operation multi would buy nothing and cost
//! the server more.

use tracing::{debug, warn};
use zookeeper_client::{CreateMode, Stat};

use crate::path;
use crate::session::{Deadline, Error, Framework, Result, Session};

/// A write of one node's data that the server applies only if the node is as the caller last saw
/// it: for [`Framework::write_once`].
///
/// ```
/// use zk_recipes_framework::zookeeper_client::Stat;
/// use zk_recipes_framework::ConditionalWrite;
///
/// let create = ConditionalWrite::create(b"0");
/// assert_eq!(create, ConditionalWrite::Create { data: &b"0"[..] });
/// let read = Stat {
///     czxid: 17, mzxid: 20, pzxid: 17, ctime: 0, mtime: 0, version: 4, cversion: 0, aversion: 0,
///     ephemeral_owner: 0, data_length: 1, num_children: 0,
/// };
/// let set = ConditionalWrite::set_if_unchanged(b"1", &read);
/// assert!(matches!(set, ConditionalWrite::SetIfUnchanged { version: 4, czxid: 17, .. }));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConditionalWrite<'a> {
    /// Create the node (PERSISTENT) holding `data`; refused if it exists. Missing parents are
    /// created as containers (Curator's `creatingParentContainersIfNeeded`).
    Create {
        /// The new node's data.
        data: &'a [u8],
    },
    /// Set the node's data if its version is still `version` (the server's check). `czxid`, the
    /// node's creation when read, tells a node deleted and created again apart when a lost reply
    /// is settled by reading the node back.
    SetIfUnchanged {
        /// The new data.
        data: &'a [u8],
        /// The version read (never negative: -1 would mean "any version" to the server).
        version: i32,
        /// The node's `czxid` when read.
        czxid: i64,
    },
}

impl<'a> ConditionalWrite<'a> {
    /// Create the node with `data`, if it does not exist.
    pub fn create(data: &'a [u8]) -> Self {
        ConditionalWrite::Create { data }
    }

    /// Set the data to `data`, if the node is still at the version of the `Stat` it was `read`
    /// with.
    pub fn set_if_unchanged(data: &'a [u8], read: &Stat) -> Self {
        ConditionalWrite::SetIfUnchanged { data, version: read.version, czxid: read.czxid }
    }

    fn data(&self) -> &'a [u8] {
        match *self {
            ConditionalWrite::Create { data } | ConditionalWrite::SetIfUnchanged { data, .. } => data,
        }
    }
}

/// What [`Framework::write_once`] did.
///
/// ```
/// use zk_recipes_framework::zookeeper_client::Error as ZkError;
/// use zk_recipes_framework::WriteOutcome;
///
/// let outcome = WriteOutcome::Refused(ZkError::BadVersion);
/// assert!(!outcome.is_applied());
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "a refused write changed nothing: look at the outcome"]
pub enum WriteOutcome {
    /// Applied exactly once. The node's new `Stat` when the server sent one: a set always does,
    /// and so does a create on every server from ZooKeeper 3.5 on (create2).
    Applied(Option<Stat>),
    /// The server refused it, so nothing changed: `BadVersion`, `NodeExists` or `NoNode`
    /// (someone else wrote first, or the node is gone).
    Refused(zookeeper_client::Error),
}

impl WriteOutcome {
    /// Whether the write was applied.
    pub fn is_applied(&self) -> bool {
        matches!(self, WriteOutcome::Applied(_))
    }
}

impl Framework {
    /// Sends a conditional `write` to `path` once, and again only when a lost reply is proven
    /// not to have been applied: a compare-and-set whose outcome a connection loss never hides.
    ///
    /// The framework's retried calls ([`set_data`](Framework::set_data), [`create`](Framework::create))
    /// behave as Curator's: after a lost reply, the retry of a versioned set that was applied
    /// fails with `BadVersion`, and the retry of a create that was applied fails with
    /// `NodeExists`. Here the write is one plain request (a PERSISTENT `create`, or a `setData` at
    /// the version read) sent once on the session, outside the retry policy: never repeated
    /// blindly. After a connection loss (or a lost session) the node is read back, after a `sync`:
    /// - unchanged (a create's node absent; a set's node at the version and creation it expected):
    ///   the write was not applied and is sent again;
    /// - changed: [`Error::OutcomeUnknown`], with `likely_applied` set when the node holds exactly
    ///   what was written (perhaps by another writer of the same bytes).
    ///
    /// # Errors
    /// [`Error::InvalidPath`], [`Error::DataTooLarge`] and [`Error::InvalidArgument`] (a negative
    /// version, the root) before anything is sent; [`Error::OutcomeUnknown`] as above;
    /// [`Error::Timeout`] if the deadline passes before the write is sent (if it passes while the
    /// write is in flight, the outcome is unknown); [`Error::ReadOnly`] at once from a read-only
    /// server (nothing written); otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// If cancelled after the write was sent, the write may or may not have been applied, and
    /// nothing reads it back: read the node to find out. Cancelled before, nothing was written.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::{ConditionalWrite, Deadline, WriteOutcome};
    ///
    /// let deadline = Deadline::after(std::time::Duration::from_secs(5));
    /// let read = framework.get_data("/app/balance", deadline).await?;
    /// let balance: i64 = String::from_utf8_lossy(&read.data).parse().unwrap_or(0);
    /// let new_balance = (balance + 10).to_string();
    /// let write = ConditionalWrite::set_if_unchanged(new_balance.as_bytes(), &read.stat);
    /// match framework.write_once("/app/balance", write, deadline).await? {
    ///     WriteOutcome::Applied(_) => println!("credited once"),
    ///     WriteOutcome::Refused(reason) => println!("someone else wrote first ({reason}): read again"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn write_once(
        &self,
        path: &str,
        write: ConditionalWrite<'_>,
        deadline: impl Into<Deadline>,
    ) -> Result<WriteOutcome> {
        let deadline = deadline.into();
        path::validate(path).map_err(|reason| Error::invalid_path(path, reason))?;
        self.check_data_size(write.data().len())?;
        match write {
            ConditionalWrite::Create { .. } if path == "/" => {
                return Err(Error::InvalidArgument("the root exists already".into()));
            }
            ConditionalWrite::SetIfUnchanged { version, .. } if version < 0 => {
                return Err(Error::InvalidArgument(format!(
                    "expected version {version}: a version is never negative (-1 would set any version)"
                )));
            }
            _ => {}
        }
        let mut parents_ensured = false;
        loop {
            // Waiting for a connection happens here, so a timeout below means the write was sent.
            let session = self.session(deadline).await?;
            match self.send_once(&session, path, write, deadline).await {
                Ok(Ok(stat)) => return Ok(WriteOutcome::Applied(stat)),
                Ok(Err(zookeeper_client::Error::NoNode))
                    if matches!(write, ConditionalWrite::Create { .. }) && !parents_ensured =>
                {
                    if let Some(parent) = path::parent(path) {
                        self.ensure_path(parent, deadline).await?;
                    }
                    parents_ensured = true;
                }
                Ok(Err(source)) if is_refusal(&source) => return Ok(WriteOutcome::Refused(source)),
                Ok(Err(source)) => {
                    let err = Error::from(source);
                    if err.is_read_only() {
                        // As the retried calls answer it: the server refused, nothing was written.
                        return Err(Error::ReadOnly);
                    }
                    if !(err.is_retryable() || err.is_session_lost()) {
                        return Err(err);
                    }
                    if err.is_session_lost() && self.is_closed() {
                        return Err(Error::Closed);
                    }
                    debug!(path, %err, "the connection broke with a write in flight; reading the node back");
                    self.settle_lost_reply(path, write, deadline).await?;
                    debug!(path, "the write was not applied; sending it again");
                }
                Err(err) => {
                    // The request may still be on its way: a read now proves nothing.
                    warn!(path, %err, "the deadline passed with a write in flight; its outcome is unknown");
                    return Err(Error::OutcomeUnknown { path: path.to_owned(), likely_applied: false });
                }
            }
        }
    }

    /// Sends `write` once on `session`, as a plain create (create2: the answer carries the new
    /// node's `Stat`) or a plain versioned `setData`: the server's answer, or [`Error::Timeout`]
    /// if `deadline` passes with the request in flight.
    async fn send_once(
        &self,
        session: &Session,
        path: &str,
        write: ConditionalWrite<'_>,
        deadline: Deadline,
    ) -> Result<std::result::Result<Option<Stat>, zookeeper_client::Error>> {
        let client = session.client();
        match write {
            ConditionalWrite::Create { data } => {
                let options = session.create_options_for(path, CreateMode::Persistent);
                let created = deadline.run(async { Ok(client.create(path, data, &options).await) }).await?;
                // A server before 3.5 (no create2) answers without a stat.
                Ok(created.map(|(stat, _)| (!stat.is_invalid()).then_some(stat)))
            }
            ConditionalWrite::SetIfUnchanged { data, version, .. } => {
                let set =
                    deadline.run(async { Ok(client.set_data(path, data, Some(version)).await) }).await?;
                Ok(set.map(Some))
            }
        }
    }

    /// After a lost reply: `Ok(())` if the node proves the write was not applied, otherwise
    /// [`Error::OutcomeUnknown`].
    async fn settle_lost_reply(
        &self,
        path: &str,
        write: ConditionalWrite<'_>,
        deadline: Deadline,
    ) -> Result<()> {
        let unknown = |likely_applied| {
            warn!(
                path,
                likely_applied, "a write's reply was lost and the node changed; its outcome is unknown"
            );
            Err(Error::OutcomeUnknown { path: path.to_owned(), likely_applied })
        };
        // Catch up with the leader first, so that a write the old connection delivered is visible.
        let read = async {
            self.sync(path, deadline).await?;
            self.get_data(path, deadline).await
        };
        match (read.await, write) {
            (Err(err), ConditionalWrite::Create { .. }) if err.is_no_node() => Ok(()),
            (Ok(node), ConditionalWrite::Create { data }) => {
                unknown(node.stat.version == 0 && node.data == data)
            }
            (Ok(node), ConditionalWrite::SetIfUnchanged { version, czxid, .. })
                if node.stat.czxid == czxid && node.stat.version == version =>
            {
                Ok(())
            }
            (Ok(node), ConditionalWrite::SetIfUnchanged { data, version, czxid }) => unknown(
                node.stat.czxid == czxid && node.stat.version == version.wrapping_add(1) && node.data == data,
            ),
            (Err(err), ConditionalWrite::SetIfUnchanged { .. }) if err.is_no_node() => unknown(false),
            (Err(err), _) => {
                warn!(path, %err, "reading the node back after a lost reply failed");
                unknown(false)
            }
        }
    }
}

/// The refusals that mean "someone else wrote first" (or the node is gone): nothing changed.
fn is_refusal(err: &zookeeper_client::Error) -> bool {
    matches!(
        err,
        zookeeper_client::Error::BadVersion
            | zookeeper_client::Error::NodeExists
            | zookeeper_client::Error::NoNode
    )
}
