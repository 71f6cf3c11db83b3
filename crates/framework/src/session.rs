//! A live session handed to recipes for one operation.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::{Acl, Acls, Client, CreateMode, CreateOptions, SessionId};

/// One ZooKeeper session of the framework, cheap to clone.
///
/// Take one from [`crate::Framework::session`] (or inside [`crate::Framework::retry`]) for an
/// operation and drop it afterwards: the framework abandons a session for good once it is lost,
/// and a `Session` kept around would keep that dead session's client alive.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::Deadline;
/// let session = framework.session(Deadline::after(std::time::Duration::from_secs(5))).await?;
/// let children = session.client().list_children("/").await?;
/// println!("session {} sees {children:?}", session.id());
/// # Ok(()) }
/// ```
#[derive(Clone, Debug)]
pub struct Session {
    client: Client,
    generation: u64,
    default_acl: Arc<[Acl]>,
}

impl Session {
    pub(crate) fn new(client: Client, generation: u64, default_acl: Arc<[Acl]>) -> Self {
        Self { client, generation, default_acl }
    }

    /// The zookeeper-client handle (paths are relative to the framework's namespace).
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The session id.
    pub fn id(&self) -> SessionId {
        self.client.session_id()
    }

    /// Counts sessions of this framework: 1 for the first, bumped for each new session.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The negotiated session timeout.
    pub fn timeout(&self) -> Duration {
        self.client.session_timeout()
    }

    /// Create options with `mode` and the framework's default ACL.
    pub fn create_options(&self, mode: CreateMode) -> CreateOptions<'_> {
        mode.with_acls(Acls::new(&self.default_acl))
    }

    /// Whether `ephemeral_owner` (from a node's `Stat`) is this session.
    pub fn owns(&self, ephemeral_owner: i64) -> bool {
        ephemeral_owner == self.id().0
    }
}
