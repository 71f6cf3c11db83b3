//! # zk-recipes-nodes
//!
//! Nodes that stay, as Apache Curator keeps them:
//!
//! | Curator | zk-recipes |
//! |---|---|
//! | `PersistentNode` | [`PersistentNode`] |
//! | `PersistentTtlNode` | [`PersistentTtlNode`] |
//! | `GroupMember` | [`GroupMember`] |
//!
//! A [`PersistentNode`] is created when started and created again whenever it is deleted, its
//! session is lost (an ephemeral node), or its TTL removes it; its data can change at any time.
//! It is built on the framework's node API and persistent watches: one `addWatch` per node, and
//! a check after each reconnection or new session.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_framework::{Deadline, Framework};
//! use zk_recipes_nodes::PersistentNode;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let node = PersistentNode::builder(&framework, "/services/api/worker-1").data(b"10.0.0.7:8080").start()?;
//! node.wait_for_initial_create(Deadline::after(Duration::from_secs(10))).await?;
//! // ... serve; the node is there as long as this process is.
//! node.close().await?;
//! # Ok(()) }
//! ```

mod error;
mod group;
mod persistent;
mod ttl;

pub use error::{NodeError, Result};
pub use group::{GroupMember, GroupMemberBuilder, MemberEvent, MemberEvents};
pub use persistent::{PersistentNode, PersistentNodeBuilder};
pub use ttl::{PersistentTtlNode, PersistentTtlNodeBuilder, DEFAULT_TOUCH_CHILD, DEFAULT_TOUCH_FACTOR};

#[cfg(test)]
mod send_sync {
    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<super::PersistentNode>();
        assert_send_sync::<super::PersistentNodeBuilder>();
        assert_send_sync::<super::PersistentTtlNode>();
        assert_send_sync::<super::GroupMember>();
        assert_send_sync::<super::MemberEvents>();
        assert_send_sync::<super::NodeError>();
    }
}
