//! Transactions: [`Framework::transaction`], its ops and results (Curator's `transaction()`).

use std::future::IntoFuture;
use std::time::Duration;

use futures::future::BoxFuture;
use zookeeper_client::{CreateMode, Stat};

use super::limit::{Limit, DEFAULT_OPERATION_TIMEOUT};
use super::owned::OwnedNode;
use crate::path;
use crate::session::{Deadline, Error, Framework, Result};

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
    /// The node of ours the transaction builds on ([`Transaction::while_exists`]): its path and
    /// its session's generation.
    anchor: Option<(String, u64)>,
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

    /// Builds the transaction on `node`, a node of ours (a lock's node, for a write only its
    /// holder may make): it runs on `node`'s session only, as one multi that first checks that
    /// `node` still exists. Nothing is written unless `node` is there at that moment, and nothing
    /// is ever sent on a newer session: the call fails with [`Error::NodeLost`] (naming `node`)
    /// instead. The results (and a failed operation's index) are those of the caller's ops, without
    /// the check.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework, lock_node: zk_recipes_framework::OwnedNode) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::Error;
    ///
    /// match framework.transaction().while_exists(&lock_node).set_data("/app/config", b"v2", None).await {
    ///     Ok(_) => println!("written while {} was held", lock_node.path()),
    ///     Err(Error::NodeLost { path }) => println!("{path} is gone: nothing was written"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub fn while_exists(mut self, node: &OwnedNode) -> Self {
        self.anchor = Some((node.path().to_owned(), node.generation()));
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
        let session = match &self.anchor {
            None => self.framework.session(deadline).await?,
            Some((path, generation)) => match self.framework.session_of(*generation, deadline).await {
                Err(Error::SessionLost) => return Err(Error::NodeLost { path: path.clone() }),
                other => other?,
            },
        };
        let mut writer = session.client().new_multi_writer();
        if let Some((path, _)) = &self.anchor {
            // Any version: the check is that the node exists.
            writer.add_check_version(path, -1)?;
        }
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
        let checks = usize::from(self.anchor.is_some());
        let results = match (committed, &self.anchor) {
            (Ok(results), _) => results,
            (Err(zookeeper_client::MultiWriteError::OperationFailed { index: 0, .. }), Some((path, _))) => {
                return Err(Error::NodeLost { path: path.clone() })
            }
            (Err(zookeeper_client::MultiWriteError::OperationFailed { index, source }), _) => {
                return Err(Error::TransactionFailed { index: index - checks, source })
            }
            (Err(zookeeper_client::MultiWriteError::RequestFailed { source }), _) => {
                return Err(self.framework_error(source))
            }
        };
        results
            .into_iter()
            .skip(checks)
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
            if self.framework.is_closed() {
                return Error::Closed;
            }
            return match &self.anchor {
                // The node went with its session.
                Some((path, _)) => Error::NodeLost { path: path.clone() },
                None => Error::SessionLost,
            };
        }
        err
    }
}

impl Framework {
    /// Starts a transaction: see [`Transaction`].
    pub fn transaction(&self) -> Transaction {
        Transaction {
            framework: self.clone(),
            ops: Vec::new(),
            limit: Limit::Timeout(DEFAULT_OPERATION_TIMEOUT),
            anchor: None,
        }
    }
}

impl IntoFuture for Transaction {
    type Output = Result<Vec<TransactionResult>>;
    type IntoFuture = BoxFuture<'static, Result<Vec<TransactionResult>>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}
