//! Configuration of a [`Framework`](crate::Framework), by value.

use std::sync::Arc;
use std::time::Duration;

use zookeeper_client::{Acl, Client, Connector};

use super::acl::{AclProvider, PathAclProvider};
use super::error::{Error, Result};
use super::retry::{ExponentialBackoffRetry, RetryPolicy};
use super::state::ErrorPolicy;
use crate::path;

/// Default session timeout (Curator's): 60 s.
pub const DEFAULT_SESSION_TIMEOUT: Duration = Duration::from_secs(60);
/// Default connection timeout (Curator's): 15 s.
pub const DEFAULT_CONNECTION_TIMEOUT: Duration = Duration::from_secs(15);
/// Default limit on the data of one node (or one multi): the server's default `jute.maxbuffer`
/// (1 MiB) less 4 KiB for the rest of the request.
pub const DEFAULT_MAX_NODE_DATA: usize = 1024 * 1024 - 4096;

/// Builds a [`Framework`](crate::Framework). Start from [`Framework::builder`](crate::Framework::builder).
///
/// Defaults: session timeout 60 s, connection timeout 15 s, retry policy
/// `ExponentialBackoffRetry(100 ms, 10 retries, at most 5 s a sleep)`, no authentication, ACL
/// open to anyone (`world:anyone` with all permissions), no namespace, [`ErrorPolicy::Standard`],
/// read-only servers not allowed, ensemble tracking on.
///
/// ```no_run
/// use std::time::Duration;
/// use zk_recipes_framework::{ErrorPolicy, Framework, retry::RetryNTimes};
///
/// # async fn demo() -> zk_recipes_framework::Result<()> {
/// let framework = Framework::builder("zk1:2181,zk2:2181,zk3:2181/chroot")
///     .session_timeout(Duration::from_secs(10))
///     .connection_timeout(Duration::from_secs(3))
///     .retry_policy(RetryNTimes::new(3, Duration::from_millis(100)))
///     .namespace("my-service")
///     .digest_auth("user", "secret")
///     .error_policy(ErrorPolicy::SessionOnly)
///     .start()?;
/// framework.block_until_connected(Duration::from_secs(10)).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `start` is called"]
pub struct FrameworkBuilder {
    pub(crate) connect_string: String,
    pub(crate) session_timeout: Duration,
    pub(crate) connection_timeout: Duration,
    pub(crate) retry_policy: Arc<dyn RetryPolicy>,
    pub(crate) auth: Vec<(String, Vec<u8>)>,
    pub(crate) acl: Arc<dyn AclProvider>,
    pub(crate) namespace: Option<String>,
    pub(crate) error_policy: ErrorPolicy,
    pub(crate) can_be_read_only: bool,
    pub(crate) event_capacity: usize,
    pub(crate) tcp_nodelay: bool,
    pub(crate) max_node_data: usize,
    pub(crate) metric_path_labels: bool,
    pub(crate) batch_writes: bool,
    pub(crate) track_ensemble: bool,
    #[cfg(feature = "tls")]
    pub(crate) tls: Option<zookeeper_client::TlsOptions>,
    #[cfg(feature = "sasl")]
    pub(crate) sasl: Option<zookeeper_client::SaslOptions>,
}

impl FrameworkBuilder {
    pub(crate) fn new(connect_string: impl Into<String>) -> Self {
        Self {
            connect_string: connect_string.into(),
            session_timeout: DEFAULT_SESSION_TIMEOUT,
            connection_timeout: DEFAULT_CONNECTION_TIMEOUT,
            retry_policy: Arc::new(
                ExponentialBackoffRetry::new(Duration::from_millis(100), 10)
                    .with_max_sleep(Duration::from_secs(5)),
            ),
            auth: Vec::new(),
            acl: Arc::new(PathAclProvider::open()),
            namespace: None,
            error_policy: ErrorPolicy::default(),
            can_be_read_only: false,
            event_capacity: 1024,
            tcp_nodelay: true,
            metric_path_labels: true,
            batch_writes: true,
            track_ensemble: true,
            max_node_data: DEFAULT_MAX_NODE_DATA,
            #[cfg(feature = "tls")]
            tls: None,
            #[cfg(feature = "sasl")]
            sasl: None,
        }
    }

    /// The session timeout to ask the server for (the server clamps it to its own bounds).
    /// Defaults to 60 s.
    pub fn session_timeout(mut self, timeout: Duration) -> Self {
        self.session_timeout = timeout;
        self
    }

    /// How long one try waits for a connection before it counts as a connection loss (which the
    /// retry policy may retry). Defaults to 15 s.
    pub fn connection_timeout(mut self, timeout: Duration) -> Self {
        self.connection_timeout = timeout;
        self
    }

    /// The retry policy for every call. Defaults to exponential back-off from 100 ms, 10 retries,
    /// at most 5 s a sleep.
    pub fn retry_policy(mut self, policy: impl RetryPolicy) -> Self {
        self.retry_policy = Arc::new(policy);
        self
    }

    /// Adds authentication info for `scheme` (sent on every connection).
    pub fn auth(mut self, scheme: impl Into<String>, auth: impl Into<Vec<u8>>) -> Self {
        self.auth.push((scheme.into(), auth.into()));
        self
    }

    /// Digest authentication as `user:password` (Curator's `authorization("digest", ...)`).
    pub fn digest_auth(self, user: &str, password: &str) -> Self {
        self.auth("digest", format!("{user}:{password}").into_bytes())
    }

    /// The ACL of every node the framework and the recipes create. Defaults to open to anyone.
    /// The same as `acl_provider(PathAclProvider::new(acl))`.
    pub fn default_acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = Arc::new(PathAclProvider::new(acl));
        self
    }

    /// Chooses the ACL of each node the framework and the recipes create, parents included, by
    /// path (Curator's `aclProvider`): a [`PathAclProvider`] with per-subtree rules, or a provider
    /// of your own. Replaces [`default_acl`](Self::default_acl).
    ///
    /// ```no_run
    /// # fn demo() -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::{Framework, PathAclProvider};
    /// use zk_recipes_framework::zookeeper_client::{Acl, AuthId, Permission};
    ///
    /// // Locks under /billing: anyone may read, only this service's identity may change them.
    /// let locked_down = vec![Acl::new(Permission::ALL, AuthId::authed()), Acl::new(Permission::READ, AuthId::anyone())];
    /// let framework = Framework::builder("127.0.0.1:2181")
    ///     .digest_auth("billing", "secret")
    ///     .acl_provider(PathAclProvider::open().with_path("/billing", locked_down))
    ///     .start()?;
    /// # Ok(()) }
    /// ```
    pub fn acl_provider(mut self, provider: impl AclProvider) -> Self {
        self.acl = Arc::new(provider);
        self
    }

    /// Every path is relative to `/<namespace>` (below any chroot of the connect string). The
    /// namespace node is created, as a persistent node, when a session is established.
    pub fn namespace(mut self, namespace: impl Into<String>) -> Self {
        self.namespace = Some(namespace.into());
        self
    }

    /// Which connection states recipes treat as an error. Defaults to [`ErrorPolicy::Standard`].
    pub fn error_policy(mut self, policy: ErrorPolicy) -> Self {
        self.error_policy = policy;
        self
    }

    /// Whether a read-only server may serve this client (state [`crate::ConnectionState::ReadOnly`]).
    /// Defaults to `false`.
    pub fn can_be_read_only(mut self, allowed: bool) -> Self {
        self.can_be_read_only = allowed;
        self
    }

    /// How many connection transitions a slow subscriber may fall behind before it receives
    /// [`crate::ConnectionUpdate::Lagged`]. Defaults to 1024.
    pub fn event_capacity(mut self, capacity: usize) -> Self {
        self.event_capacity = capacity.max(1);
        self
    }

    /// The most node data one create or set (or one multi, in total) may carry; larger data fails
    /// with [`Error::DataTooLarge`] before anything is sent. Defaults to
    /// [`DEFAULT_MAX_NODE_DATA`]; raise it only for servers started with a larger `jute.maxbuffer`.
    pub fn max_node_data(mut self, bytes: usize) -> Self {
        self.max_node_data = bytes;
        self
    }

    /// Whether to turn Nagle's algorithm off on the connection (`TCP_NODELAY`), as the Java
    /// ZooKeeper client does. Defaults to `true`.
    ///
    /// zookeeper-client leaves Nagle on, and then a request sent while an earlier one is
    /// unanswered waits in the kernel for the earlier reply: the recipes' pipelined requests (a
    /// lock's create and the listing behind it) would cost a round trip each. On Linux ≥ 5.6 the
    /// framework finds the connection among the process's sockets and sets the option after every
    /// (re)connection; elsewhere, or where the kernel refuses, this does nothing. It also sets
    /// the option on any other connection of this process to the same servers.
    pub fn tcp_nodelay(mut self, enabled: bool) -> Self {
        self.tcp_nodelay = enabled;
        self
    }

    /// Whether a session with many creates and deletes at once sends them together (default
    /// `true`).
    ///
    /// While a session has two of the recipes' creates or deletes unanswered (protected creates,
    /// lock releases: [`OwnedNode::delete`](crate::OwnedNode::delete)), the next ones wait and go
    /// to the server as one multi when one of those is answered; the listings and stats they need
    /// follow in one multi-read. The nodes are the same as when sent one by one, so other clients
    /// (Curator among them) see no difference but the grouping. A server spends most of a small
    /// write on the request, not the node: many locks cycled on one session run several times
    /// faster (see `docs/benchmarks.md`). A request alone is sent at once, as without batching.
    ///
    /// Needs ZooKeeper 3.6 or later (multi-read): a 3.5 server closes the connection on a
    /// multi-read, so there every batch costs a reconnection (the creates still end right, found
    /// again by their markers). Turn it off for such servers. See `docs/framework.md`, "Many
    /// writes at once".
    ///
    /// ```no_run
    /// # fn demo() -> zk_recipes_framework::Result<()> {
    /// // A ZooKeeper 3.5 ensemble: every create and delete as a request of its own.
    /// let framework = zk_recipes_framework::Framework::builder("zk1:2181").batch_writes(false).start()?;
    /// # Ok(()) }
    /// ```
    pub fn batch_writes(mut self, enabled: bool) -> Self {
        self.batch_writes = enabled;
        self
    }

    /// Whether to follow the ensemble's dynamic configuration (`/zookeeper/config`, ZooKeeper 3.5+
    /// `reconfig`) and open every new session with the servers it names (default `true`, as
    /// Curator's `ensembleTracker`). The chroot of the connect string and the namespace are kept.
    /// Observers are included. The configuration is read when a session opens and after each
    /// reconnection, and followed with one persistent watch per session when it names client
    /// addresses. A configuration that names no client address (a static `zoo.cfg`, a standalone
    /// server) changes nothing and gets no watch; nor does tracking do anything over TLS (the
    /// configuration names plaintext ports only).
    /// Turn it off when clients reach the servers through proxies or NAT under other addresses
    /// than the servers' own. See [`Framework::ensemble_changes`](crate::Framework::ensemble_changes)
    /// and `docs/operations.md`, "Ensemble changes".
    ///
    /// ```no_run
    /// # fn demo() -> zk_recipes_framework::Result<()> {
    /// // Clients reach the servers through a load balancer: keep its address.
    /// let framework = zk_recipes_framework::Framework::builder("zk-lb:2181").track_ensemble(false).start()?;
    /// # Ok(()) }
    /// ```
    pub fn track_ensemble(mut self, enabled: bool) -> Self {
        self.track_ensemble = enabled;
        self
    }

    /// Whether recipes' metrics carry their path as a label (default `true`). Turn it off when
    /// paths are per entity (a lock per order): each path would be a series of its own. See
    /// [`crate::metrics`].
    pub fn metric_path_labels(mut self, enabled: bool) -> Self {
        self.metric_path_labels = enabled;
        self
    }

    /// SASL authentication (feature `sasl`: DIGEST-MD5), done on every connection before the
    /// session is used. A server that refuses the credentials gives [`Error::AuthFailed`].
    ///
    /// ```no_run
    /// # fn demo() -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::{zookeeper_client::SaslOptions, Framework};
    ///
    /// let framework = Framework::builder("127.0.0.1:2181")
    ///     .sasl(SaslOptions::digest_md5("billing", "secret"))
    ///     .start()?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "sasl")]
    pub fn sasl(mut self, options: impl Into<zookeeper_client::SaslOptions>) -> Self {
        self.sasl = Some(options.into());
        self
    }

    /// Opens sessions over TLS with these options (feature `tls`): the CA that signed the
    /// servers' certificates and, for a server that needs client certificates
    /// (`ssl.clientAuth=need`), this client's certificate and key, all PEM. Every plain
    /// `host:port` entry of the connect string then uses TLS (as do `tcp+tls://host:port`
    /// entries; `tcp://host:port` stays plaintext). Give the servers' TLS ports
    /// (`secureClientPort`); a server's certificate must name the host as written there (an IP
    /// address needs an IP subject alternative name).
    ///
    /// A handshake that fails (a certificate the CA did not sign, no client certificate where
    /// one is needed) is a failed attempt like a refused connection: the framework keeps trying,
    /// and [`Framework::block_until_connected`](crate::Framework::block_until_connected) and other calls that wait for a session give
    /// [`Error::Timeout`] at their deadline, whose [`ConnectionFailure`](crate::ConnectionFailure)
    /// names the server and says what to check (zookeeper-client logs the handshake error itself
    /// only at DEBUG).
    ///
    /// ```no_run
    /// # async fn demo(ca_pem: &str, cert_pem: &str, key_pem: &str) -> Result<(), Box<dyn std::error::Error>> {
    /// use std::time::Duration;
    /// use zk_recipes_framework::{zookeeper_client::TlsOptions, Framework};
    ///
    /// let framework = Framework::builder("zk1.example.com:2281,zk2.example.com:2281")
    ///     .tls(TlsOptions::new().with_pem_ca(ca_pem)?.with_pem_identity(cert_pem, key_pem)?)
    ///     .start()?;
    /// framework.block_until_connected(Duration::from_secs(10)).await?;
    /// # Ok(()) }
    /// ```
    #[cfg(feature = "tls")]
    pub fn tls(mut self, options: zookeeper_client::TlsOptions) -> Self {
        self.tls = Some(options);
        self
    }

    /// Checks the settings before the framework starts ([`FrameworkBuilder::start`]).
    ///
    /// # Errors
    /// As [`FrameworkBuilder::start`].
    pub(crate) fn check(&self) -> Result<()> {
        if self.connect_string.trim().is_empty() {
            return Err(Error::InvalidArgument("the connect string is empty".into()));
        }
        if self.session_timeout.is_zero() {
            return Err(Error::InvalidArgument("the session timeout is zero".into()));
        }
        if self.acl.default_acl().is_empty() {
            return Err(Error::InvalidArgument("the default ACL is empty".into()));
        }
        if let Some(namespace) = &self.namespace {
            let namespace_path = path::join("/", namespace);
            path::validate(&namespace_path).map_err(|reason| Error::invalid_path(namespace, reason))?;
            if namespace_path == "/" {
                return Err(Error::InvalidArgument("the namespace is empty".into()));
            }
        }
        if tokio::runtime::Handle::try_current().is_err() {
            return Err(Error::InvalidArgument(
                "Framework::start must be called within a tokio runtime".into(),
            ));
        }
        Ok(())
    }

    /// Opens a new session on these servers with these settings (TLS, credentials), at the root.
    pub(crate) async fn open_client(&self) -> Result<Client> {
        self.open_client_at(&self.connect_string).await
    }

    /// Opens a new session on the servers of `connect_string` with these settings.
    pub(crate) async fn open_client_at(&self, connect_string: &str) -> Result<Client> {
        let connector = self.connector();
        #[cfg(feature = "tls")]
        let client = if self.tls.is_some() {
            connector.secure_connect(connect_string).await?
        } else {
            connector.connect(connect_string).await?
        };
        #[cfg(not(feature = "tls"))]
        let client = connector.connect(connect_string).await?;
        Ok(client)
    }

    pub(crate) fn connector(&self) -> Connector {
        let mut connector = Client::connector()
            .with_session_timeout(self.session_timeout)
            .with_readonly(self.can_be_read_only)
            .with_fail_eagerly();
        for (scheme, auth) in &self.auth {
            connector = connector.with_auth(scheme, auth);
        }
        #[cfg(feature = "tls")]
        if let Some(tls) = &self.tls {
            connector = connector.with_tls(tls.clone());
        }
        #[cfg(feature = "sasl")]
        if let Some(sasl) = &self.sasl {
            connector = connector.with_sasl(sasl.clone());
        }
        connector
    }

    /// Whether sessions are opened over TLS ([`tls`](Self::tls) was given).
    pub(crate) fn uses_tls(&self) -> bool {
        #[cfg(feature = "tls")]
        return self.tls.is_some();
        #[cfg(not(feature = "tls"))]
        false
    }

    pub(crate) fn namespace_path(&self) -> Option<String> {
        self.namespace.as_deref().map(|namespace| path::join("/", namespace))
    }
}
