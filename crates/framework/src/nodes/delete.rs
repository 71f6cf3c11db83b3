//! Deleting a node: [`Framework::delete`] and its [`DeleteBuilder`] (Curator's `delete()`).

use std::future::IntoFuture;
use std::time::Duration;

use futures::future::BoxFuture;

use super::limit::{Limit, DEFAULT_OPERATION_TIMEOUT};
use super::on_session::delete_children;
use crate::path;
use crate::session::{Deadline, Error, Framework, Result};

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

impl Framework {
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
}

impl IntoFuture for DeleteBuilder {
    type Output = Result<()>;
    type IntoFuture = BoxFuture<'static, Result<()>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}
