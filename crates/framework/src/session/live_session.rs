//! A live session handed to recipes for one operation.

use std::any::Any;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::{Acls, Client, CreateMode, CreateOptions, SessionId};

use super::acl::AclProvider;
use super::expiry_clock::ExpiryClock;
use super::features::FeatureProbe;
use super::upper::UpperParts;

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
    /// Shared: every call of the framework takes a clone, which is then one counter increment
    /// (a `Client`'s clone copies its password and several handles), and a clone is one pointer
    /// in each waiting call's state.
    inner: Arc<SessionParts>,
}

#[derive(Debug)]
struct SessionParts {
    client: Client,
    generation: u64,
    acl: Arc<dyn AclProvider>,
    /// What the servers can do (learned once per framework).
    features: Arc<FeatureProbe>,
    /// What the floor above keeps beside this session ([`super::upper`]).
    upper: UpperParts,
    /// When the server may expire this session ([`super::expiry_clock`]), started by the supervisor.
    expiry_clock: ExpiryClock,
}

impl Session {
    pub(crate) fn new(
        client: Client,
        generation: u64,
        acl: Arc<dyn AclProvider>,
        features: Arc<FeatureProbe>,
        upper: UpperParts,
    ) -> Self {
        let expiry_clock = ExpiryClock::default();
        Self { inner: Arc::new(SessionParts { client, generation, acl, features, upper, expiry_clock }) }
    }

    /// This session's expiry clock.
    pub(crate) fn expiry_clock(&self) -> &ExpiryClock {
        &self.inner.expiry_clock
    }

    /// The earliest moment the server may expire this session, by its expiry clock; `None` while
    /// the clock does not run (a read-only session).
    pub(crate) fn earliest_expiry(&self) -> Option<Instant> {
        self.inner.expiry_clock.earliest_expiry(self.timeout())
    }

    /// The floor above's part of type `T` beside this session ([`super::upper`]).
    pub(crate) fn upper<T: Any>(&self) -> &T {
        self.inner.upper.get()
    }

    /// What the servers can do.
    pub(crate) fn features(&self) -> &Arc<FeatureProbe> {
        &self.inner.features
    }

    /// The ACL the framework's provider gives a node at `path`.
    pub(crate) fn acl_for_path(&self, path: &str) -> &[zookeeper_client::Acl] {
        self.inner.acl.acl_for_path(path)
    }

    /// The zookeeper-client handle (paths are relative to the framework's namespace).
    ///
    /// zookeeper-client ends a session only when its last handle is dropped: a clone of this one
    /// kept past [`Framework::close`](crate::Framework::close) keeps the session open (and its
    /// ephemeral nodes on the server) until that clone is dropped, and `close` gives up waiting
    /// for the session's end after 2 s. Drop clones before closing.
    pub fn client(&self) -> &Client {
        &self.inner.client
    }

    /// The session id.
    pub fn id(&self) -> SessionId {
        self.inner.client.session_id()
    }

    /// Counts sessions of this framework: 1 for the first, bumped for each new session.
    pub fn generation(&self) -> u64 {
        self.inner.generation
    }

    /// The negotiated session timeout.
    pub fn timeout(&self) -> Duration {
        self.inner.client.session_timeout()
    }

    /// Create options for a node at `path`: `mode`, and the ACL the framework's
    /// [`AclProvider`] gives `path`. Every node the framework and the recipes create gets its
    /// options here.
    pub fn create_options_for(&self, path: &str, mode: CreateMode) -> CreateOptions<'_> {
        mode.with_acls(Acls::new(self.inner.acl.acl_for_path(path)))
    }

    /// Create options with `mode` and the provider's default ACL, whatever the path: for nodes of
    /// your own outside the provider's rules. Prefer [`create_options_for`](Self::create_options_for).
    pub fn create_options(&self, mode: CreateMode) -> CreateOptions<'_> {
        mode.with_acls(Acls::new(self.inner.acl.default_acl()))
    }

    /// Whether `ephemeral_owner` (from a node's `Stat`) is this session.
    pub fn owns(&self, ephemeral_owner: i64) -> bool {
        ephemeral_owner == self.id().0
    }
}
