//! The node API: Curator's `CuratorFramework` verbs as by-value builders on [`Framework`].
//!
//! Every call runs under the framework's retry policy within one [`Deadline`] (default
//! [`DEFAULT_OPERATION_TIMEOUT`]), inside the namespace, with the framework's default ACL unless
//! the builder says otherwise. A builder is a future: `.await` it.
//!
//! Retried after a connection loss, as Curator does. Where a retry cannot tell its own earlier
//! success from someone else's write, the builder says so: a plain create retried may find its own
//! node (`NodeExists`), a sequential one may create two (use [`CreateBuilder::protected`]); a
//! versioned set or delete retried may find its own new version (`BadVersion`). A transaction is
//! never retried once sent.

use std::future::{Future, IntoFuture};
use std::time::Duration;

use futures::future::BoxFuture;
use zookeeper_client::{Acl, CreateMode, Stat};

use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::framework::Framework;
use crate::nodes::{delete_tree, ensure_parents, ParentMode};
use crate::path;
use crate::session::Session;

/// How long a node API call may take, retries included, unless its builder sets a deadline:
/// defaults to 30 s.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// The longest TTL the server accepts: 2^40 − 1 ms (about 34.8 years).
pub const MAX_TTL: Duration = Duration::from_millis(0xFF_FFFF_FFFF);

/// How long a builder's call may take: a timeout counted from when it is awaited, or a deadline.
#[derive(Debug, Clone, Copy)]
enum Limit {
    Timeout(Duration),
    Deadline(Deadline),
}

impl Limit {
    fn deadline(self) -> Deadline {
        match self {
            Limit::Timeout(timeout) => Deadline::after(timeout),
            Limit::Deadline(deadline) => deadline,
        }
    }
}

/// A created node: its path (with the sequence a sequential mode appended) and its `Stat`.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::{zookeeper_client::CreateMode, Created};
///
/// let Created { path, stat, .. } =
///     framework.create("/app/jobs/job-").mode(CreateMode::PersistentSequential).await?;
/// assert!(path.starts_with("/app/jobs/job-"));
/// assert_eq!(stat.version, 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Created {
    /// The node's full path, within the namespace.
    pub path: String,
    /// The node's `Stat` at creation.
    pub stat: Stat,
}

/// Creates a node ([`Framework::create`], Curator's `create()`).
///
/// Defaults: persistent, empty data, parents must exist, not protected, the framework's ACL, a
/// deadline [`DEFAULT_OPERATION_TIMEOUT`] from when it is awaited.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::{zookeeper_client::CreateMode, ParentMode};
///
/// let created = framework
///     .create("/app/jobs/job-")
///     .mode(CreateMode::PersistentSequential)
///     .data(b"payload")
///     .creating_parents(ParentMode::Container)
///     .protected()
///     .await?;
/// println!("{} (czxid {})", created.path, created.stat.czxid);
/// let ttl = framework.create("/app/heartbeat").ttl(Duration::from_secs(60)).await?;
/// # let _ = ttl;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it is awaited"]
pub struct CreateBuilder {
    framework: Framework,
    path: String,
    data: Vec<u8>,
    mode: CreateMode,
    ttl: Option<Duration>,
    parents: Option<ParentMode>,
    protected: bool,
    acl: Option<Vec<Acl>>,
    limit: Limit,
}

impl CreateBuilder {
    /// The node's data. Defaults to empty.
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into();
        self
    }

    /// The node's mode. Defaults to [`CreateMode::Persistent`].
    pub fn mode(mut self, mode: CreateMode) -> Self {
        self.mode = mode;
        self
    }

    /// Makes the node a TTL node: the server deletes it once it has had no change and no child for
    /// `ttl` (Curator's `withTtl`, `CreateMode.PERSISTENT_WITH_TTL`). Persistent modes only; the
    /// server must allow it (`zookeeper.extendedTypesEnabled=true`).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Creates missing parents, empty, as `parents` says (Curator's `creatingParentsIfNeeded` /
    /// `creatingParentContainersIfNeeded`). Defaults to none: a missing parent fails with `NoNode`.
    pub fn creating_parents(mut self, parents: ParentMode) -> Self {
        self.parents = Some(parents);
        self
    }

    /// Curator's protection: the node's name gets a `_c_<uuid>-` prefix, so a create whose reply
    /// was lost is found again (by that prefix) instead of repeated. Ephemeral nodes are found
    /// only on the session that created them (a new session starts over with a new prefix, the
    /// old one handed to the cleanup worker); other nodes on any session. A dropped call leaves no
    /// node behind.
    pub fn protected(mut self) -> Self {
        self.protected = true;
        self
    }

    /// The node's ACL instead of the framework's default.
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = Some(acl);
        self
    }

    /// How long the call may take, retries included, from when it is awaited. Defaults to
    /// [`DEFAULT_OPERATION_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.limit = Limit::Timeout(timeout);
        self
    }

    /// The deadline of the whole call, retries included, instead of a timeout.
    pub fn deadline(mut self, deadline: impl Into<Deadline>) -> Self {
        let deadline = deadline.into();
        self.limit = Limit::Deadline(deadline);
        self
    }

    /// Checks what can be checked before anything is sent.
    fn validate(&self) -> Result<()> {
        let sequential =
            matches!(self.mode, CreateMode::PersistentSequential | CreateMode::EphemeralSequential);
        let valid =
            if sequential { path::validate_sequential(&self.path) } else { path::validate(&self.path) };
        valid.map_err(|reason| Error::invalid_path(&self.path, reason))?;
        if self.path == "/" {
            return Err(Error::InvalidArgument("the root exists already".into()));
        }
        self.framework.check_data_size(self.data.len())?;
        if let Some(ttl) = self.ttl {
            if !matches!(self.mode, CreateMode::Persistent | CreateMode::PersistentSequential) {
                return Err(Error::InvalidArgument(format!(
                    "a TTL needs a persistent mode, not {:?}",
                    self.mode
                )));
            }
            if ttl < Duration::from_millis(1) || ttl > MAX_TTL {
                return Err(Error::InvalidArgument(format!(
                    "a TTL must be from 1 ms to {}, not {}",
                    crate::ReadableDuration(MAX_TTL),
                    crate::ReadableDuration(ttl)
                )));
            }
        }
        if self.acl.as_ref().is_some_and(Vec::is_empty) {
            return Err(Error::InvalidArgument("an empty ACL".into()));
        }
        Ok(())
    }

    async fn run(self) -> Result<Created> {
        self.validate()?;
        let deadline = self.limit.deadline();
        if self.protected {
            let parent = path::parent(&self.path).unwrap_or("/");
            let name = path::name(&self.path);
            let node = self
                .framework
                .create_protected_node(parent, name, &self.data, self.mode, self.creation(), deadline)
                .await?;
            let stat = *node.stat();
            return Ok(Created { path: node.forget(), stat });
        }
        let this = &self;
        let created = self
            .framework
            .retry_across_sessions(deadline, |session| async move { this.create_on(&session).await })
            .await;
        created.map_err(map_server_refusals)
    }

    fn creation(&self) -> Creation<'_> {
        Creation { parents: self.parents, ttl: self.ttl, acl: self.acl.as_deref() }
    }

    async fn create_on(&self, session: &Session) -> Result<Created> {
        let options = match &self.acl {
            Some(acl) => self.mode.with_acls(zookeeper_client::Acls::new(acl)),
            None => session.create_options_for(&self.path, self.mode),
        };
        let options = match self.ttl {
            Some(ttl) => options.with_ttl(ttl),
            None => options,
        };
        let created = match (session.client().create(&self.path, &self.data, &options).await, self.parents) {
            (Err(zookeeper_client::Error::NoNode), Some(parents)) => {
                ensure_parents(session, path::parent(&self.path).unwrap_or("/"), parents).await?;
                session.client().create(&self.path, &self.data, &options).await
            }
            (created, _) => created,
        };
        let (stat, sequence) = created?;
        let sequential =
            matches!(self.mode, CreateMode::PersistentSequential | CreateMode::EphemeralSequential);
        let path = if sequential { format!("{}{sequence}", self.path) } else { self.path.clone() };
        let stat = if stat.is_invalid() {
            // A server before 3.5 answers a plain create without a stat.
            session.client().check_stat(&path).await?.ok_or(zookeeper_client::Error::NoNode)?
        } else {
            stat
        };
        Ok(Created { path, stat })
    }
}

/// What a create asks for beyond path, data and mode.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Creation<'a> {
    pub(crate) parents: Option<ParentMode>,
    pub(crate) ttl: Option<Duration>,
    pub(crate) acl: Option<&'a [Acl]>,
}

/// The server's refusals that a caller can act on, in the framework's words.
fn map_server_refusals(err: Error) -> Error {
    match err {
        Error::ZooKeeper(zookeeper_client::Error::Unimplemented) => Error::InvalidArgument(
            "the server refused the node type: TTL nodes need zookeeper.extendedTypesEnabled=true".into(),
        ),
        other => other,
    }
}

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

/// Deletes a node ([`Framework::delete`], Curator's `delete()`).
///
/// Defaults: any version, children must not exist, not guaranteed, a deadline
/// [`DEFAULT_OPERATION_TIMEOUT`] from when it is awaited. A missing node fails with `NoNode`
/// unless [`quietly`](Self::quietly).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// framework.delete("/app/jobs").deleting_children_if_needed().quietly().await?;
/// framework.delete("/app/lease").version(3).guaranteed().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it is awaited"]
pub struct DeleteBuilder {
    framework: Framework,
    path: String,
    version: Option<i32>,
    guaranteed: bool,
    children: bool,
    quietly: bool,
    limit: Limit,
}

impl DeleteBuilder {
    /// Deletes only if the node's data version is `version` (`BadVersion` otherwise).
    pub fn version(mut self, version: i32) -> Self {
        self.version = Some(version);
        self
    }

    /// Curator's `guaranteed()`: if the call fails for a connection or session reason (or its
    /// deadline), the delete is handed to the framework's cleanup worker, which goes on trying in
    /// the background, across sessions, until the node is gone or the framework is closed. The
    /// call still reports its error.
    pub fn guaranteed(mut self) -> Self {
        self.guaranteed = true;
        self
    }

    /// Deletes the node's descendants first (Curator's `deletingChildrenIfNeeded`).
    pub fn deleting_children_if_needed(mut self) -> Self {
        self.children = true;
        self
    }

    /// A node that does not exist is not an error (Curator's `quietly()`).
    pub fn quietly(mut self) -> Self {
        self.quietly = true;
        self
    }

    /// How long the call may take, retries included, from when it is awaited. Defaults to
    /// [`DEFAULT_OPERATION_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.limit = Limit::Timeout(timeout);
        self
    }

    /// The deadline of the whole call, retries included, instead of a timeout.
    pub fn deadline(mut self, deadline: impl Into<Deadline>) -> Self {
        let deadline = deadline.into();
        self.limit = Limit::Deadline(deadline);
        self
    }

    async fn run(self) -> Result<()> {
        path::validate(&self.path).map_err(|reason| Error::invalid_path(&self.path, reason))?;
        if self.path == "/" {
            return Err(Error::InvalidArgument("refusing to delete the root".into()));
        }
        let deadline = self.limit.deadline();
        let this = &self;
        let deleted = self
            .framework
            .retry_across_sessions(deadline, |session| async move {
                if this.children {
                    delete_children(&session, &this.path).await?;
                }
                Ok(session.client().delete(&this.path, this.version).await?)
            })
            .await;
        match deleted {
            Err(err) if err.is_no_node() && self.quietly => Ok(()),
            Err(err) if self.guaranteed && (err.is_retryable() || matches!(err, Error::Timeout { .. })) => {
                self.framework.delete_in_background_guaranteed(
                    self.path.clone(),
                    self.version,
                    self.children,
                );
                Err(err)
            }
            other => other,
        }
    }
}

/// Deletes everything below `path` (not `path` itself).
async fn delete_children(session: &Session, path: &str) -> Result<()> {
    let children = match session.client().list_children(path).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => return Ok(()),
        Err(err) => return Err(err.into()),
    };
    for child in children {
        delete_tree(session, &path::join(path, &child)).await?;
    }
    Ok(())
}

/// One write of a [`Transaction`].
///
/// [`Transaction`]'s `create`, `set_data`, `delete` and `check` each add one; build them yourself
/// to add a list at once with [`Transaction::op`].
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::TransactionOp;
///
/// let ops = ["/app/jobs/a", "/app/jobs/b"]
///     .into_iter()
///     .map(|path| TransactionOp::Delete { path: path.to_owned(), version: None });
/// let transaction = ops.fold(framework.transaction(), |transaction, op| transaction.op(op));
/// transaction.await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionOp {
    /// Create `path` with `data` in `mode`, with the framework's default ACL.
    Create {
        /// The node's path (the sequence is appended for a sequential mode).
        path: String,
        /// Its data.
        data: Vec<u8>,
        /// Its mode (no TTL in a transaction).
        mode: CreateMode,
    },
    /// Set `path`'s data, if its version is `version` (any when `None`).
    SetData {
        /// The node's path.
        path: String,
        /// The new data.
        data: Vec<u8>,
        /// The expected version.
        version: Option<i32>,
    },
    /// Delete `path`, if its version is `version` (any when `None`).
    Delete {
        /// The node's path.
        path: String,
        /// The expected version.
        version: Option<i32>,
    },
    /// Check that `path` exists with version `version` (any when `None`).
    Check {
        /// The node's path.
        path: String,
        /// The expected version.
        version: Option<i32>,
    },
}

/// What one operation of a committed [`Transaction`] did, in order.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::{zookeeper_client::CreateMode, TransactionResult};
///
/// let results = framework
///     .transaction()
///     .create("/app/history/v-", b"v5", CreateMode::PersistentSequential)
///     .set_data("/app/config", b"v5", None)
///     .await?;
/// for result in results {
///     match result {
///         TransactionResult::Created { path, .. } => println!("created {path}"),
///         TransactionResult::SetData { stat } => println!("config now at version {}", stat.version),
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum TransactionResult {
    /// A node was created, at this path.
    Created {
        /// The created path (with its sequence).
        path: String,
        /// Its `Stat` (servers before 3.8.2 / 3.7.2 send none in a transaction: then `is_invalid`).
        stat: Stat,
    },
    /// Data was set; the node's new `Stat`.
    SetData {
        /// The node's `Stat` after the write.
        stat: Stat,
    },
    /// A node was deleted.
    Deleted,
    /// A check passed.
    Checked,
}

/// One multi of creates, sets, deletes and checks that commits as a whole or not at all
/// ([`Framework::transaction`], Curator's `transaction().forOperations(...)`).
///
/// Sent once: after a connection loss its outcome is unknown, so it is not retried (the error says
/// [`Error::is_retryable`]; the caller decides). Waiting for a connection before it is sent counts
/// against its deadline.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::{zookeeper_client::CreateMode, Error, TransactionResult};
///
/// let results = framework
///     .transaction()
///     .check("/app/config", Some(4))
///     .set_data("/app/config", b"v5", Some(4))
///     .create("/app/history/v-", b"v5", CreateMode::PersistentSequential)
///     .await?;
/// assert!(matches!(results[2], TransactionResult::Created { .. }));
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a transaction does nothing until it is awaited"]
pub struct Transaction {
    framework: Framework,
    ops: Vec<TransactionOp>,
    limit: Limit,
}

impl Transaction {
    /// Adds a create.
    pub fn create(mut self, path: impl Into<String>, data: impl Into<Vec<u8>>, mode: CreateMode) -> Self {
        self.ops.push(TransactionOp::Create { path: path.into(), data: data.into(), mode });
        self
    }

    /// Adds a set-data.
    pub fn set_data(
        mut self,
        path: impl Into<String>,
        data: impl Into<Vec<u8>>,
        version: Option<i32>,
    ) -> Self {
        self.ops.push(TransactionOp::SetData { path: path.into(), data: data.into(), version });
        self
    }

    /// Adds a delete.
    pub fn delete(mut self, path: impl Into<String>, version: Option<i32>) -> Self {
        self.ops.push(TransactionOp::Delete { path: path.into(), version });
        self
    }

    /// Adds a version check.
    pub fn check(mut self, path: impl Into<String>, version: Option<i32>) -> Self {
        self.ops.push(TransactionOp::Check { path: path.into(), version });
        self
    }

    /// Adds `op`.
    pub fn op(mut self, op: TransactionOp) -> Self {
        self.ops.push(op);
        self
    }

    /// How long the call may take, waiting for a connection included, from when it is awaited.
    /// Defaults to [`DEFAULT_OPERATION_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.limit = Limit::Timeout(timeout);
        self
    }

    /// The deadline of the whole call instead of a timeout.
    pub fn deadline(mut self, deadline: impl Into<Deadline>) -> Self {
        let deadline = deadline.into();
        self.limit = Limit::Deadline(deadline);
        self
    }

    fn validate(&self) -> Result<()> {
        let mut data_size = 0;
        for op in &self.ops {
            let (path, sequential) = match op {
                TransactionOp::Create { path, data, mode } => {
                    data_size += data.len();
                    (path, matches!(mode, CreateMode::PersistentSequential | CreateMode::EphemeralSequential))
                }
                TransactionOp::SetData { path, data, .. } => {
                    data_size += data.len();
                    (path, false)
                }
                TransactionOp::Delete { path, .. } | TransactionOp::Check { path, .. } => (path, false),
            };
            let valid = if sequential { path::validate_sequential(path) } else { path::validate(path) };
            valid.map_err(|reason| Error::invalid_path(path, reason))?;
        }
        self.framework.check_data_size(data_size)
    }

    async fn run(self) -> Result<Vec<TransactionResult>> {
        self.validate()?;
        if self.ops.is_empty() {
            return Ok(Vec::new());
        }
        let deadline = self.limit.deadline();
        let session = self.framework.session(deadline).await?;
        let mut writer = session.client().new_multi_writer();
        for op in &self.ops {
            match op {
                TransactionOp::Create { path, data, mode } => {
                    writer.add_create(path, data, &session.create_options_for(path, *mode))?
                }
                TransactionOp::SetData { path, data, version } => {
                    writer.add_set_data(path, data, *version)?
                }
                TransactionOp::Delete { path, version } => writer.add_delete(path, *version)?,
                TransactionOp::Check { path, version } => {
                    writer.add_check_version(path, version.unwrap_or(-1))?
                }
            }
        }
        let committed = deadline.run(async { Ok(writer.commit().await) }).await?;
        let results = match committed {
            Ok(results) => results,
            Err(zookeeper_client::MultiWriteError::OperationFailed { index, source }) => {
                return Err(Error::TransactionFailed { index, source })
            }
            Err(zookeeper_client::MultiWriteError::RequestFailed { source }) => {
                return Err(self.framework_error(source))
            }
        };
        results
            .into_iter()
            .map(|result| match result {
                zookeeper_client::MultiWriteResult::Create { path, stat } => {
                    Ok(TransactionResult::Created { path, stat })
                }
                zookeeper_client::MultiWriteResult::SetData { stat } => {
                    Ok(TransactionResult::SetData { stat })
                }
                zookeeper_client::MultiWriteResult::Delete => Ok(TransactionResult::Deleted),
                zookeeper_client::MultiWriteResult::Check => Ok(TransactionResult::Checked),
                other => {
                    let message = format!("a transaction answered {other:?}");
                    Err(zookeeper_client::Error::UnexpectedError(message).into())
                }
            })
            .collect()
    }

    fn framework_error(&self, source: zookeeper_client::Error) -> Error {
        let err = Error::from(source);
        if err.is_session_lost() {
            return if self.framework.is_closed() { Error::Closed } else { Error::SessionLost };
        }
        err
    }
}

/// Reads of one path, each a future under the retry policy.
impl Framework {
    /// Starts a create of `path` (Curator's `create().forPath(path)`): see [`CreateBuilder`].
    pub fn create(&self, path: &str) -> CreateBuilder {
        CreateBuilder {
            framework: self.clone(),
            path: path.to_owned(),
            data: Vec::new(),
            mode: CreateMode::Persistent,
            ttl: None,
            parents: None,
            protected: false,
            acl: None,
            limit: Limit::Timeout(DEFAULT_OPERATION_TIMEOUT),
        }
    }

    /// Starts a delete of `path` (Curator's `delete().forPath(path)`): see [`DeleteBuilder`].
    pub fn delete(&self, path: &str) -> DeleteBuilder {
        DeleteBuilder {
            framework: self.clone(),
            path: path.to_owned(),
            version: None,
            guaranteed: false,
            children: false,
            quietly: false,
            limit: Limit::Timeout(DEFAULT_OPERATION_TIMEOUT),
        }
    }

    /// Starts a transaction: see [`Transaction`].
    pub fn transaction(&self) -> Transaction {
        Transaction {
            framework: self.clone(),
            ops: Vec::new(),
            limit: Limit::Timeout(DEFAULT_OPERATION_TIMEOUT),
        }
    }

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
}

impl IntoFuture for CreateBuilder {
    type Output = Result<Created>;
    type IntoFuture = BoxFuture<'static, Result<Created>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

impl IntoFuture for DeleteBuilder {
    type Output = Result<()>;
    type IntoFuture = BoxFuture<'static, Result<()>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}

impl IntoFuture for Transaction {
    type Output = Result<Vec<TransactionResult>>;
    type IntoFuture = BoxFuture<'static, Result<Vec<TransactionResult>>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}
