//! # zk-recipes-framework
//!
//! The session-owning ZooKeeper framework every zk-recipes recipe stands on: Apache Curator's
//! `CuratorFramework`, in Rust, on top of [`zookeeper_client`].
//!
//! - [`Framework`]: one cheap-to-clone handle that always gives recipes a live session. It
//!   re-creates the session after expiry, publishes every [`ConnectionState`] transition in order,
//!   and closes the session when the last handle goes.
//! - [`Framework::retry`]: runs an operation under a [`retry::RetryPolicy`] (Curator's policies)
//!   with one budget and one [`Deadline`] per top-level call.
//! - [`path`]: validation by ZooKeeper's rules, joining, splitting, sequence numbers, Curator's
//!   protected names.
//! - [`Framework::create_protected`]: Curator's protected ephemeral-sequential create, found again
//!   after a connection loss, never left behind by a cancelled call.
//! - A cleanup worker that deletes what dropped guards leave behind ([`OwnedNode`],
//!   [`Framework::delete_in_background`]), so no `Drop` needs a runtime.
//!
//! ## Why some futures are boxed
//! Every call of the framework, and every lock waiter, carries the retry loop's and the protected
//! create's futures for as long as it waits: their size is what each waiter costs, and the locks
//! bench showed it matters. So the paths that only some calls take (waiting for a connection, a
//! retry's pause, a create built on another node, a parent sent ahead, a search after a lost
//! reply) are boxed where they start, and the common path carries none of their state; the
//! operation's future is boxed once so that the wrappers around the loop do not move it again;
//! `retry`, `create_protected` and the like return a future instead of being `async fn`s, which
//! would keep their arguments twice; and the framework's own operations skip the nested-retry
//! scope (`Nesting::Never`), which saves a task-local swap on every poll. The code carries only
//! short pointers to this paragraph.
//!
//! ## Two floors
//! The crate has two floors, each a folder: the *session* floor (`session/`: the handle, the
//! supervisor that owns the session, connection states, retries, deadlines) and the *nodes*
//! floor on top of it (`nodes/`: the node API, protected creates, owned nodes, batches, the cleanup
//! worker, watches). The nodes floor imports the session floor, never the other way round.
//! Folders rather than two crates, because the node API is methods on [`Framework`], which a
//! second crate could only add through an extension trait every user would import. The map is in
//! `docs/framework.md`.
//!
//! ## Connection loss and session expiry
//! `Suspended` means the connection broke and the session may still live; `Lost` means it is gone
//! (the server expired it, or the connection stayed suspended for the session timeout). After
//! `Lost` the framework opens a new session, announced as `Reconnected` with a new session id and
//! a bumped generation. Recipes treat `Suspended` as an error too under [`ErrorPolicy::Standard`].
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_framework::{ConnectionState, Deadline, Framework, ProtectedCreate};
//!
//! # async fn demo() -> zk_recipes_framework::Result<()> {
//! let framework = Framework::builder("127.0.0.1:2181")
//!     .session_timeout(Duration::from_secs(10))
//!     .start()?;
//! let mut events = framework.connection_events();
//! framework.block_until_connected(Duration::from_secs(10)).await?;
//! let node = framework
//!     .create_protected(ProtectedCreate::new("/demo/members", "member-").data(b"hello"), Deadline::after(Duration::from_secs(5)))
//!     .await?;
//! println!("joined as {}", node.path());
//! if let Some(update) = events.next().await {
//!     assert_eq!(update.state(), ConnectionState::Connected);
//! }
//! # Ok(()) }
//! ```

mod nodes;
pub mod path;
mod session;
mod start;

pub use nodes::conditional::{ConditionalWrite, WriteOutcome};
pub use nodes::create::{CreateBuilder, Created, MAX_TTL};
pub use nodes::delete::DeleteBuilder;
pub use nodes::limit::DEFAULT_OPERATION_TIMEOUT;
pub use nodes::marker::NodeMarker;
pub use nodes::on_session::ParentMode;
pub use nodes::owned::OwnedNode;
pub use nodes::protected_options::ProtectedCreate;
pub use nodes::requests::NodeData;
pub use nodes::transaction::{Transaction, TransactionOp, TransactionResult};
pub use nodes::watch::{PersistentWatch, WatchEvent};
pub use session::acl::{AclProvider, PathAclProvider};
pub use session::builder::{
    FrameworkBuilder, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_MAX_NODE_DATA, DEFAULT_SESSION_TIMEOUT,
};
pub use session::close::CloseDelay;
pub use session::deadline::Deadline;
pub use session::duration::ReadableDuration;
pub use session::ensemble::{EnsembleChange, EnsembleConfig, EnsembleServer, ServerRole};
pub use session::error::{ConnectionFailure, Error, Result};
pub use session::events::ConnectionEvents;
pub use session::features::{Feature, ServerFeatures};
pub use session::handle::Framework;
pub use session::host::local_address;
pub use session::live_session::Session;
pub use session::metrics;
pub use session::retry;
pub use session::state::{
    ConnectionEvent, ConnectionSnapshot, ConnectionState, ConnectionUpdate, ErrorPolicy,
};
pub use zookeeper_client;

/// The framework's ownership decisions as pure functions, without I/O: the code the framework
/// runs and the models in the repository's `crates/model` check. Not part of the stable API.
#[doc(hidden)]
pub mod decisions {
    pub use crate::nodes::layers::batch_layers;
    pub use crate::nodes::session_marker::{undecided_node, SequenceFloor, SeveralAboveFloor};
    pub use crate::session::expiry_clock::{earliest_expiry, lost_at};
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<Framework>();
        assert_send_sync::<FrameworkBuilder>();
        assert_send_sync::<Session>();
        assert_send_sync::<OwnedNode>();
        assert_send_sync::<Error>();
        assert_send_sync::<Deadline>();
        assert_send_sync::<ConnectionFailure>();
        assert_send_sync::<PersistentWatch>();
        assert_send_sync::<ConnectionEvents>();
        assert_send_sync::<ConnectionSnapshot>();
        assert_send_sync::<ServerFeatures>();
    }
}
