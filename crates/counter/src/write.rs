//! Conditional writes sent exactly once, with an honest outcome after a lost reply.
//!
//! A versioned `setData` (or a plain create) that the client retries after a connection loss
//! cannot tell its own earlier success from someone else's write: the retry fails with
//! `BadVersion` (`NodeExists`), and a counter that takes that as "lost the race, try again"
//! applies one increment twice. So each write here is sent once (a one-operation transaction,
//! which the framework never repeats), and after a connection loss the node is read back: if it
//! is provably unchanged the write is sent again, otherwise the caller gets
//! [`CounterError::OutcomeUnknown`].

use tracing::{debug, warn};
use zk_recipes_framework::zookeeper_client::{CreateMode, Error as ZkError, Stat};
use zk_recipes_framework::{path, Deadline, Error as FrameworkError, Framework, TransactionResult};

use crate::error::{CounterError, Result};

/// One conditional write of a node's data.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Write<'a> {
    /// Create the node (persistent) with `data`; fails if it exists.
    Create {
        /// The data.
        data: &'a [u8],
    },
    /// Set the data if the node is still the one read (`czxid`) at `version`.
    Set {
        /// The data.
        data: &'a [u8],
        /// The version read.
        version: i32,
        /// The node's creation zxid when read (tells a re-created node apart).
        czxid: i64,
    },
}

/// What a [`write_once`] did.
#[derive(Debug)]
pub(crate) enum Written {
    /// Applied; the node's new `Stat` when the server sent one (a set always does; a create in a
    /// transaction only from ZooKeeper 3.8.2 / 3.7.2).
    Applied(Option<Stat>),
    /// The server refused it: `BadVersion`, `NodeExists` or `NoNode` (someone else wrote first).
    Refused(ZkError),
}

/// Sends `write` to `path` once, and again only when a lost reply is proven not to have been
/// applied. A create's missing parents are created as containers (Curator's `EnsureContainers`).
pub(crate) async fn write_once(
    framework: &Framework,
    path: &str,
    write: Write<'_>,
    deadline: Deadline,
) -> Result<Written> {
    let mut parents_ensured = false;
    loop {
        // Waiting for a connection happens here, so a timeout below means the write was sent.
        framework.session(deadline).await?;
        let transaction = match write {
            Write::Create { data } => framework.transaction().create(path, data, CreateMode::Persistent),
            Write::Set { data, version, .. } => framework.transaction().set_data(path, data, Some(version)),
        };
        match transaction.deadline(deadline).await {
            Ok(results) => {
                let stat = results.into_iter().next().and_then(|result| match result {
                    TransactionResult::SetData { stat } | TransactionResult::Created { stat, .. } => {
                        (!stat.is_invalid()).then_some(stat)
                    }
                    _ => None,
                });
                return Ok(Written::Applied(stat));
            }
            Err(FrameworkError::TransactionFailed { source: ZkError::NoNode, .. })
                if matches!(write, Write::Create { .. }) && !parents_ensured =>
            {
                ensure_parents(framework, path, deadline).await?;
                parents_ensured = true;
            }
            Err(FrameworkError::TransactionFailed { source, .. })
                if matches!(source, ZkError::BadVersion | ZkError::NodeExists | ZkError::NoNode) =>
            {
                return Ok(Written::Refused(source));
            }
            Err(FrameworkError::TransactionFailed { source, .. }) => {
                return Err(FrameworkError::ZooKeeper(source).into());
            }
            Err(err @ FrameworkError::Timeout { .. }) => {
                // The request may still be on its way: a read now proves nothing.
                warn!(path, %err, "the deadline passed with a write in flight; its outcome is unknown");
                return Err(CounterError::OutcomeUnknown { path: path.to_owned(), likely_applied: false });
            }
            Err(err) if err.is_retryable() || err.is_session_lost() => {
                debug!(path, %err, "the connection broke with a write in flight; reading the node back");
                if resolve(framework, path, write, deadline).await? {
                    debug!(path, "the write was not applied; sending it again");
                    continue;
                }
            }
            Err(err) => return Err(err.into()),
        }
    }
}

/// After a lost reply: `Ok(true)` if the node proves the write was not applied, otherwise
/// [`CounterError::OutcomeUnknown`].
async fn resolve(framework: &Framework, path: &str, write: Write<'_>, deadline: Deadline) -> Result<bool> {
    let unknown = |likely_applied| {
        warn!(path, likely_applied, "a write's reply was lost and the node changed; its outcome is unknown");
        Err(CounterError::OutcomeUnknown { path: path.to_owned(), likely_applied })
    };
    // Catch up with the leader first, so that a write the old connection delivered is visible.
    let read = async {
        framework.sync(path, deadline).await?;
        framework.get_data(path, deadline).await
    };
    match (read.await, write) {
        (Err(err), Write::Create { .. }) if err.is_no_node() => Ok(true),
        (Ok(node), Write::Create { data }) => unknown(node.stat.version == 0 && node.data == data),
        (Ok(node), Write::Set { version, czxid, .. })
            if node.stat.czxid == czxid && node.stat.version == version =>
        {
            Ok(true)
        }
        (Ok(node), Write::Set { data, version, czxid }) => unknown(
            node.stat.czxid == czxid && node.stat.version == version.wrapping_add(1) && node.data == data,
        ),
        (Err(err), Write::Set { .. }) if err.is_no_node() => unknown(false),
        (Err(err), _) => {
            warn!(path, %err, "reading the node back after a lost reply failed");
            unknown(false)
        }
    }
}

/// Creates `path`'s missing ancestors as containers (Curator's `EnsureContainers`, excluding the
/// node itself).
pub(crate) async fn ensure_parents(framework: &Framework, node_path: &str, deadline: Deadline) -> Result<()> {
    match path::parent(node_path) {
        Some(parent) => Ok(framework.ensure_path(parent, deadline).await?),
        None => Ok(()),
    }
}
