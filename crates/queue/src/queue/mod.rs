//! The distributed-queue family (Curator's `DistributedQueue` and its kin): builder, shared
//! state, producers. Consumers are in [`crate::consumer`].
//!
//! - [`options`]: [`ErrorMode`] and [`DEFAULT_MAX_NODE_BYTES`];
//! - [`nodes`]: the znode writes (the queue's directories, item nodes in creates and multis);
//! - [`shared`]: [`Inner`], what every handle, consumer and delivery of one queue shares;
//! - [`distributed`]: [`DistributedQueue`], the handle;
//! - [`put`]: its puts;
//! - [`kinds`]: the priority, delay and id queues, each a [`DistributedQueue`] with its own names;
//! - [`builder`]: [`QueueBuilder`], which checks the settings and builds any of them.
//!
//! Each file imports only the ones before it in this list.

pub(crate) mod builder;
pub(crate) mod distributed;
pub(crate) mod kinds;
pub(crate) mod nodes;
pub(crate) mod options;
pub(crate) mod put;
pub(crate) mod shared;

pub use builder::QueueBuilder;
pub use distributed::DistributedQueue;
pub use kinds::{DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue};
pub(crate) use nodes::create_persistent;
pub use options::{ErrorMode, DEFAULT_MAX_NODE_BYTES};
pub(crate) use shared::Inner;
