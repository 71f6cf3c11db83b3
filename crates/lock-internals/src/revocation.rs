//! Revocation, as Curator's `Revoker`: [`revoke`] asks a node's owner to give it up, and
//! [`wait_for_revocation`] is how an owner hears it.

use std::time::Duration;

use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::zookeeper_client::{self, EventType};
use zk_recipes_framework::{path, Deadline, Error as FrameworkError, Framework};

use crate::error::{LockError, Result};

/// The data Curator's `Revoker` writes to a lock node to ask its owner to let go.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Asks the owner of the revocable lock node `node_path` to give it up, as Curator's
/// `Revoker.attemptRevoke`: writes [`REVOKE_MESSAGE`] to the node. A node already gone is not an
/// error. Works on Rust and Java (Curator) holders alike.
///
/// # Errors
/// As [`Framework::retry`].
///
/// # Cancel safety
/// If cancelled after the request was sent, the revocation may or may not have been written;
/// writing it again is harmless.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_lock_internals::Result<()> {
/// use zk_recipes_framework::Deadline;
/// let holder = "/app/lock/_c_2b4c...-lock-0000000007";
/// zk_recipes_lock_internals::revoke(&framework, holder, Deadline::after(std::time::Duration::from_secs(5))).await?;
/// # Ok(()) }
/// ```
pub async fn revoke(framework: &Framework, node_path: &str, deadline: impl Into<Deadline>) -> Result<()> {
    let deadline = deadline.into();
    path::validate(node_path)
        .map_err(|reason| FrameworkError::InvalidPath { path: node_path.to_owned(), reason })?;
    framework
        .retry(deadline, |session| async move {
            match session.client().set_data(node_path, REVOKE_MESSAGE, None).await {
                Ok(_) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                Err(err) => Err(err.into()),
            }
        })
        .await?;
    Ok(())
}

/// Resolves with `Ok` when `node_path`'s data becomes [`REVOKE_MESSAGE`]; with
/// [`LockError::NodeLost`] when the node goes or its session (`generation`) is lost, as soon as
/// the framework declares it lost (even while the server is out of reach).
pub(crate) async fn wait_for_revocation(
    framework: &Framework,
    node_path: &str,
    generation: u64,
) -> Result<()> {
    tokio::select! {
        asked = watch_for_revocation(framework, node_path, generation) => asked,
        ended = framework.session_lost(generation) => Err(match ended {
            Ok(()) => LockError::NodeLost { path: node_path.to_owned() },
            Err(err) => err.into(),
        }),
    }
}

/// [`wait_for_revocation`] without the session's end: reads and watches the node's data.
async fn watch_for_revocation(framework: &Framework, node_path: &str, generation: u64) -> Result<()> {
    let lost = || LockError::NodeLost { path: node_path.to_owned() };
    let mut backoff = Backoff::new(Duration::from_millis(20), Duration::from_secs(1));
    loop {
        let session = framework
            .session_of(generation, Deadline::never())
            .await
            .map_err(LockError::of_call_on_node(node_path))?;
        let watcher = match session.client().get_and_watch_data(node_path).await {
            Ok((data, _, _)) if data == REVOKE_MESSAGE => return Ok(()),
            Ok((_, _, watcher)) => watcher,
            Err(zookeeper_client::Error::NoNode) => return Err(lost()),
            Err(err) if FrameworkError::from(err.clone()).is_retryable() => {
                backoff.pause().await;
                continue;
            }
            Err(err) => return Err(FrameworkError::from(err).into()),
        };
        drop(session);
        if watcher.changed().await.event_type == EventType::Session {
            return Err(lost());
        }
    }
}
