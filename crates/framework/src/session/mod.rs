//! The session floor: the [`Framework`] handle and everything about the one ZooKeeper session it
//! owns at a time.
//!
//! - [`handle`]: the handle, the core its clones share, the connection as it is now;
//! - [`supervisor`]: the task that connects, publishes every transition, declares a session lost
//!   (under `SessionOnly` by the [`expiry_clock`]) and opens the next;
//! - [`waiting`] and [`calls`]: waiting for a session, and running a call on one with retries
//!   ([`Framework::retry`], [`Framework::retry_across_sessions`], [`Framework::retry_on_session`]);
//! - [`builder`], [`state`], [`live_session`], [`retry`], [`deadline`], [`error`], [`close`]: the
//!   settings, the connection states, one session, retry policies and backoff, deadlines, errors,
//!   the two-step close;
//! - [`features`], [`diagnose`], [`nodelay`], [`host`], [`acl`], [`metrics`], [`duration`]: what
//!   the server can do, why a connection failed, socket tuning, the local address, ACLs, metric
//!   names, readable durations;
//! - [`ensemble`]: following the servers' dynamic configuration (`/zookeeper/config`);
//! - [`upper`]: how the floor above keeps its own state in the framework and in each session.
//!
//! Nothing here imports the nodes floor ([`crate::nodes`]).

pub(crate) mod acl;
pub(crate) mod builder;
pub(crate) mod calls;
pub(crate) mod close;
pub(crate) mod deadline;
pub(crate) mod diagnose;
pub(crate) mod duration;
pub(crate) mod ensemble;
mod ensemble_config;
pub(crate) mod error;
pub(crate) mod events;
pub(crate) mod expiry_clock;
pub(crate) mod features;
pub(crate) mod handle;
pub(crate) mod host;
pub(crate) mod in_flight;
pub(crate) mod live_session;
pub mod metrics;
pub(crate) mod nodelay;
pub mod retry;
pub(crate) mod snapshot;
pub(crate) mod state;
pub(crate) mod supervisor;
pub(crate) mod upper;
pub(crate) mod waiting;

pub(crate) use deadline::Deadline;
pub(crate) use error::{Error, Result};
pub(crate) use handle::Framework;
pub(crate) use live_session::Session;
