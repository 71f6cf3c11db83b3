//! The distributed-queue family (Curator's `DistributedQueue` and its kin): the handles, their
//! puts and their builder. The state they share with the consumers ([`crate::shared`]), the
//! options ([`crate::options`]) and the znode writes ([`crate::nodes`]) stand under this folder
//! and under [`crate::consumer`].
//!
//! - [`distributed`]: [`DistributedQueue`], the handle;
//! - [`put`]: its puts;
//! - [`kinds`]: the priority, delay and id queues, each a [`DistributedQueue`] with its own names;
//! - [`builder`]: [`QueueBuilder`], which checks the settings and builds any of them.
//!
//! Each file imports only the ones before it in this list.

pub(crate) mod builder;
pub(crate) mod distributed;
pub(crate) mod kinds;
pub(crate) mod put;

pub use builder::QueueBuilder;
pub use distributed::DistributedQueue;
pub use kinds::{DistributedDelayQueue, DistributedIdQueue, DistributedPriorityQueue};
