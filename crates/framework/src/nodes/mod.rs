//! The nodes floor: everything the framework does with znodes, on top of the session floor
//! ([`crate::session`]), which it imports and which never imports it.
//!
//! The node API is Curator's `CuratorFramework` verbs as by-value builders on [`Framework`]:
//! every call runs under the framework's retry policy within one [`Deadline`] (default
//! [`DEFAULT_OPERATION_TIMEOUT`]), inside the namespace, with the framework's default ACL unless
//! the builder says otherwise. A builder is a future: `.await` it. Retried after a connection
//! loss, as Curator does. Where a retry cannot tell its own earlier success from someone else's
//! write, the builder says so: a plain create retried may find its own node (`NodeExists`), a
//! sequential one may create two (use [`CreateBuilder::protected`]); a versioned set or delete
//! retried may find its own new version (`BadVersion`). A transaction is never retried once sent.
//!
//! - [`create`], [`delete`], [`transaction`], [`requests`], [`limit`]: the node API (create,
//!   delete, multi, get/set/exists/children/sync/..., and how long a call may take);
//! - [`parents`]: ensure a path, delete a subtree, make missing parents;
//! - [`protected`] and [`protected_try`], [`marker`], [`session_marker`]: the protected create
//!   (one entry point, [`Framework::create_protected`], its variants as [`ProtectedCreate`]
//!   options), the markers it finds its node by, and the lanes of session-marked creates;
//! - [`owned`]: [`OwnedNode`], a node we own, deleted when dropped;
//! - [`exclusive`], [`conditional`]: a create at a fixed path that is ours alone, and writes sent
//!   exactly once;
//! - [`batch`], [`layers`]: a busy session's creates and deletes sent together, in layers;
//! - [`cleanup`]: the worker that deletes what nobody waits on any more;
//! - [`watch`]: persistent watches;
//! - [`floor`]: the floor's own state, kept in the framework and in each session.
//!
//! [`Framework`]: crate::Framework
//! [`Deadline`]: crate::Deadline
//! [`DEFAULT_OPERATION_TIMEOUT`]: crate::DEFAULT_OPERATION_TIMEOUT
//! [`CreateBuilder::protected`]: crate::CreateBuilder::protected
//! [`Framework::create_protected`]: crate::Framework::create_protected
//! [`ProtectedCreate`]: crate::ProtectedCreate
//! [`OwnedNode`]: crate::OwnedNode

pub(crate) mod batch;
mod batch_send;
pub(crate) mod cleanup;
pub(crate) mod conditional;
pub(crate) mod create;
pub(crate) mod delete;
pub(crate) mod exclusive;
pub(crate) mod floor;
pub(crate) mod layers;
pub(crate) mod limit;
pub(crate) mod marker;
pub(crate) mod on_session;
pub(crate) mod owned;
pub(crate) mod paths;
pub(crate) mod protected;
pub(crate) mod protected_options;
pub(crate) mod protected_try;
pub(crate) mod requests;
pub(crate) mod session_marker;
pub(crate) mod transaction;
pub(crate) mod watch;
