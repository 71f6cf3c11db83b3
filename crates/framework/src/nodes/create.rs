//! Creating a node: [`Framework::create`] and its [`CreateBuilder`] (Curator's `create()`).

use std::future::IntoFuture;
use std::time::Duration;

use futures::future::BoxFuture;
use zookeeper_client::{Acl, CreateMode, Stat};

use super::limit::{Limit, DEFAULT_OPERATION_TIMEOUT};
use super::on_session::{ensure_parents, ParentMode};
use super::protected_options::ProtectedCreate;
use crate::path;
use crate::session::duration::ReadableDuration;
use crate::session::{Deadline, Error, Framework, Result, Session};

/// The longest TTL the server accepts: 2^40 − 1 ms (about 34.8 years).
pub const MAX_TTL: Duration = Duration::from_millis(0xFF_FFFF_FFFF);

/// A created node: its path (with the sequence a sequential mode appended) and its `Stat`.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::{zookeeper_client::CreateMode, Created};
///
/// let Created { path, stat, .. } =
///     framework.create("/app/jobs/job-").mode(CreateMode::PersistentSequential).await?;
/// assert!(path.starts_with("/app/jobs/job-"));
/// assert_eq!(stat.version, 0);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Created {
    /// The node's full path, within the namespace.
    pub path: String,
    /// The node's `Stat` at creation.
    pub stat: Stat,
}

/// Creates a node ([`Framework::create`], Curator's `create()`).
///
/// Defaults: persistent, empty data, parents must exist, not protected, the framework's ACL, a
/// deadline [`DEFAULT_OPERATION_TIMEOUT`] from when it is awaited.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::{zookeeper_client::CreateMode, ParentMode};
///
/// let created = framework
///     .create("/app/jobs/job-")
///     .mode(CreateMode::PersistentSequential)
///     .data(b"payload")
///     .creating_parents(ParentMode::Container)
///     .protected()
///     .await?;
/// println!("{} (czxid {})", created.path, created.stat.czxid);
/// let ttl = framework.create("/app/heartbeat").ttl(Duration::from_secs(60)).await?;
/// # let _ = ttl;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it is awaited"]
pub struct CreateBuilder {
    framework: Framework,
    path: String,
    data: Vec<u8>,
    mode: CreateMode,
    ttl: Option<Duration>,
    parents: Option<ParentMode>,
    protected: bool,
    acl: Option<Vec<Acl>>,
    limit: Limit,
}

impl CreateBuilder {
    /// The node's data. Defaults to empty.
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into();
        self
    }

    /// The node's mode. Defaults to [`CreateMode::Persistent`].
    pub fn mode(mut self, mode: CreateMode) -> Self {
        self.mode = mode;
        self
    }

    /// Makes the node a TTL node: the server deletes it once it has had no change and no child for
    /// `ttl` (Curator's `withTtl`, `CreateMode.PERSISTENT_WITH_TTL`). Persistent modes only; the
    /// server must allow it (`zookeeper.extendedTypesEnabled=true`).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Creates missing parents, empty, as `parents` says (Curator's `creatingParentsIfNeeded` /
    /// `creatingParentContainersIfNeeded`). Defaults to none: a missing parent fails with `NoNode`.
    pub fn creating_parents(mut self, parents: ParentMode) -> Self {
        self.parents = Some(parents);
        self
    }

    /// Curator's protection: the node's name gets a `_c_<uuid>-` prefix, so a create whose reply
    /// was lost is found again (by that prefix) instead of repeated. Ephemeral nodes are found
    /// only on the session that created them (a new session starts over with a new prefix, the
    /// old one handed to the cleanup worker); other nodes on any session. A dropped call leaves no
    /// node behind.
    pub fn protected(mut self) -> Self {
        self.protected = true;
        self
    }

    /// The node's ACL instead of the framework's default.
    pub fn acl(mut self, acl: Vec<Acl>) -> Self {
        self.acl = Some(acl);
        self
    }

    /// How long the call may take, retries included, from when it is awaited. Defaults to
    /// [`DEFAULT_OPERATION_TIMEOUT`].
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.limit = Limit::Timeout(timeout);
        self
    }

    /// The deadline of the whole call, retries included, instead of a timeout.
    pub fn deadline(mut self, deadline: impl Into<Deadline>) -> Self {
        let deadline = deadline.into();
        self.limit = Limit::Deadline(deadline);
        self
    }

    /// Checks what can be checked before anything is sent.
    fn validate(&self) -> Result<()> {
        let sequential =
            matches!(self.mode, CreateMode::PersistentSequential | CreateMode::EphemeralSequential);
        let valid =
            if sequential { path::validate_sequential(&self.path) } else { path::validate(&self.path) };
        valid.map_err(|reason| Error::invalid_path(&self.path, reason))?;
        if self.path == "/" {
            return Err(Error::InvalidArgument("the root exists already".into()));
        }
        self.framework.check_data_size(self.data.len())?;
        if let Some(ttl) = self.ttl {
            if !matches!(self.mode, CreateMode::Persistent | CreateMode::PersistentSequential) {
                return Err(Error::InvalidArgument(format!(
                    "a TTL needs a persistent mode, not {:?}",
                    self.mode
                )));
            }
            if ttl < Duration::from_millis(1) || ttl > MAX_TTL {
                return Err(Error::InvalidArgument(format!(
                    "a TTL must be from 1 ms to {}, not {}",
                    ReadableDuration(MAX_TTL),
                    ReadableDuration(ttl)
                )));
            }
        }
        if self.acl.as_ref().is_some_and(Vec::is_empty) {
            return Err(Error::InvalidArgument("an empty ACL".into()));
        }
        Ok(())
    }

    async fn run(self) -> Result<Created> {
        self.validate()?;
        let deadline = self.limit.deadline();
        if self.protected {
            let parent = path::parent(&self.path).unwrap_or("/");
            let name = path::name(&self.path);
            let request = ProtectedCreate::new(parent, name)
                .data(&self.data)
                .mode(self.mode)
                .parents(self.parents)
                .ttl(self.ttl)
                .acl(self.acl.as_deref());
            let node = self.framework.create_protected(request, deadline).await?;
            let stat = *node.stat();
            return Ok(Created { path: node.forget(), stat });
        }
        let this = &self;
        let created = self
            .framework
            .retry_across_sessions(deadline, |session| async move { this.create_on(&session).await })
            .await;
        created.map_err(map_server_refusals)
    }

    async fn create_on(&self, session: &Session) -> Result<Created> {
        let options = match &self.acl {
            Some(acl) => self.mode.with_acls(zookeeper_client::Acls::new(acl)),
            None => session.create_options_for(&self.path, self.mode),
        };
        let options = match self.ttl {
            Some(ttl) => options.with_ttl(ttl),
            None => options,
        };
        let created = match (session.client().create(&self.path, &self.data, &options).await, self.parents) {
            (Err(zookeeper_client::Error::NoNode), Some(parents)) => {
                ensure_parents(session, path::parent(&self.path).unwrap_or("/"), parents).await?;
                session.client().create(&self.path, &self.data, &options).await
            }
            (created, _) => created,
        };
        let (stat, sequence) = created?;
        let sequential =
            matches!(self.mode, CreateMode::PersistentSequential | CreateMode::EphemeralSequential);
        let path = if sequential { format!("{}{sequence}", self.path) } else { self.path.clone() };
        let stat = if stat.is_invalid() {
            // A server before 3.5 answers a plain create without a stat.
            session.client().check_stat(&path).await?.ok_or(zookeeper_client::Error::NoNode)?
        } else {
            stat
        };
        Ok(Created { path, stat })
    }
}

/// The server's refusals that a caller can act on, in the framework's words.
fn map_server_refusals(err: Error) -> Error {
    match err {
        Error::ZooKeeper(zookeeper_client::Error::Unimplemented) => Error::InvalidArgument(
            "the server refused the node type: TTL nodes need zookeeper.extendedTypesEnabled=true".into(),
        ),
        other => other,
    }
}

impl Framework {
    /// Starts a create of `path` (Curator's `create().forPath(path)`): see [`CreateBuilder`].
    pub fn create(&self, path: &str) -> CreateBuilder {
        CreateBuilder {
            framework: self.clone(),
            path: path.to_owned(),
            data: Vec::new(),
            mode: CreateMode::Persistent,
            ttl: None,
            parents: None,
            protected: false,
            acl: None,
            limit: Limit::Timeout(DEFAULT_OPERATION_TIMEOUT),
        }
    }
}

impl IntoFuture for CreateBuilder {
    type Output = Result<Created>;
    type IntoFuture = BoxFuture<'static, Result<Created>>;

    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.run())
    }
}
