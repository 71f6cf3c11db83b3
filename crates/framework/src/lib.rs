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
//! ## Connection loss and session expiry
//! `Suspended` means the connection broke and the session may still live; `Lost` means it is gone
//! (the server expired it, or the connection stayed suspended for the session timeout). After
//! `Lost` the framework opens a new session, announced as `Reconnected` with a new session id and
//! a bumped generation. Recipes treat `Suspended` as an error too under [`ErrorPolicy::Standard`].
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_framework::{ConnectionState, Deadline, Framework};
//!
//! # async fn demo() -> zk_recipes_framework::Result<()> {
//! let framework = Framework::builder("127.0.0.1:2181")
//!     .session_timeout(Duration::from_secs(10))
//!     .start()?;
//! let mut events = framework.connection_events();
//! framework.block_until_connected(Duration::from_secs(10)).await?;
//! let node = framework
//!     .create_protected("/demo/members", "member-", b"hello", Deadline::after(Duration::from_secs(5)))
//!     .await?;
//! println!("joined as {}", node.path());
//! if let Some(update) = events.next().await {
//!     assert_eq!(update.state(), ConnectionState::Connected);
//! }
//! # Ok(()) }
//! ```

mod acl;
mod api;
mod batch;
mod builder;
mod cleanup;
mod close;
mod conditional;
mod deadline;
mod diagnose;
mod duration;
mod error;
mod exclusive;
mod features;
mod framework;
mod host;
pub mod metrics;
mod nodelay;
mod nodes;
pub mod path;
mod random_ids;
pub mod retry;
mod session;
mod session_marker;
mod state;
mod watch;

pub use acl::{AclProvider, PathAclProvider};
pub use api::{
    CreateBuilder, Created, DeleteBuilder, NodeData, Transaction, TransactionOp, TransactionResult,
    DEFAULT_OPERATION_TIMEOUT, MAX_TTL,
};
pub use builder::{
    FrameworkBuilder, DEFAULT_CONNECTION_TIMEOUT, DEFAULT_MAX_NODE_DATA, DEFAULT_SESSION_TIMEOUT,
};
pub use close::CloseDelay;
pub use conditional::{ConditionalWrite, WriteOutcome};
pub use deadline::Deadline;
pub use duration::ReadableDuration;
pub use error::{ConnectionFailure, Error, Result};
pub use framework::Framework;
pub use host::local_address;
pub use nodes::{NodeMarker, OwnedNode, ParentMode};
pub use session::Session;
pub use state::{
    ConnectionEvent, ConnectionEvents, ConnectionSnapshot, ConnectionState, ConnectionUpdate, ErrorPolicy,
};
pub use watch::{PersistentWatch, WatchEvent};
pub use zookeeper_client;

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
    }
}
