//! The registrar's types: the commands the handle sends, the registry it keeps (an entry per
//! registered instance) and the state of its task. The methods on [`State`] live in the files
//! above: `nodes.rs` (writing one node), `commands.rs` (serving commands, close) and
//! `sessions.rs` (following connection events, reconciling).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::{Deadline, Framework, WatchEvent};

use crate::error::Result;
use crate::instance::ServiceType;

/// How long one background write (a re-registration, a retried delete) may take.
pub(super) const BACKGROUND_OPERATION_TIMEOUT: Duration = Duration::from_secs(10);

/// How many times a write at a fixed path starts over when the node changes under it.
pub(super) const MAX_ATTEMPTS: usize = 4;

/// The paths of the instances registered here, by id: what `ServiceDiscovery::instance_path`
/// reads (`None` until the node was first created).
pub(crate) type RegisteredPaths = Arc<Mutex<BTreeMap<String, Option<String>>>>;

/// An instance to register: who it is and the bytes its node holds.
#[derive(Debug, Clone)]
pub(crate) struct Registration {
    pub(crate) name: String,
    pub(crate) id: String,
    pub(crate) service_type: ServiceType,
    pub(crate) data: Vec<u8>,
}

pub(crate) enum Command {
    Register {
        registration: Registration,
        deadline: Deadline,
        reply: oneshot::Sender<Result<()>>,
    },
    Update {
        registration: Registration,
        deadline: Deadline,
        reply: oneshot::Sender<Result<()>>,
    },
    Unregister {
        name: String,
        id: String,
        sequential: bool,
        deadline: Deadline,
        reply: oneshot::Sender<Result<()>>,
    },
    Close {
        deadline: Deadline,
        reply: oneshot::Sender<Result<()>>,
    },
}

/// One registered instance.
#[derive(Debug)]
pub(super) struct Entry {
    pub(super) registration: Registration,
    /// The node's path once created (for a fixed name, known from the start).
    pub(super) path: Option<String>,
    /// The session on which the node was last known to hold `registration.data` (for a persistent
    /// node, the session it was last written or checked on). `None`: to be written.
    pub(super) synced_on: Option<i64>,
    /// The node's `mzxid` after our last write to it (or check of it, or adoption of another
    /// writer's data): with `watch_instances`, only a newer change is another writer's to adopt.
    pub(super) written_mzxid: Option<i64>,
}

/// Where a write starts: creating the node, or setting the data of the node that should be there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum First {
    Create,
    Set,
}

pub(super) struct State {
    pub(super) framework: Framework,
    pub(super) base_path: String,
    pub(super) entries: BTreeMap<String, Entry>,
    /// Nodes to delete whose delete failed (an unregister, a replaced registration).
    pub(super) removals: BTreeSet<String>,
    pub(super) paths: RegisteredPaths,
    pub(super) backoff: Backoff,
    pub(super) retry_at: Option<Instant>,
    /// `watch_instances`: whether to follow our nodes, and the watch once set (`watch.rs`).
    pub(super) watch_instances: bool,
    pub(super) watch: Option<InstanceWatch>,
}

/// The discovery's one watch: a task that sets it (waiting for a session) and forwards its
/// events. Dropping it (on close, or with the registrar) aborts the task, which drops the watch
/// and so removes it from the server.
pub(crate) struct InstanceWatch {
    pub(super) events: mpsc::UnboundedReceiver<WatchEvent>,
    pub(super) task: JoinHandle<()>,
}

impl Drop for InstanceWatch {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl InstanceWatch {
    /// The next event; `None` once the watch is gone for good (the framework closed).
    pub(super) async fn next(&mut self) -> Option<WatchEvent> {
        self.events.recv().await
    }
}
