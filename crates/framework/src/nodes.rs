//! Node helpers every recipe needs: ensure a path (as containers), delete a subtree, and the
//! protected ephemeral-sequential create.

use std::fmt;
use std::future::Future;
use std::sync::Arc;

use futures::future::{Either, TryFutureExt};

use parking_lot::Mutex;
use tracing::debug;
use zookeeper_client::{CheckWriteError, CreateMode, MultiWriteResult, Stat};

use crate::batch;
use crate::cleanup::CleanupTask;
use crate::deadline::Deadline;
use crate::error::{Error, Result};
use crate::framework::{Framework, Nesting, Sessions};
use crate::path;
use crate::session::Session;
use crate::session_marker::{
    children_after_sync, find_undecided, MarkerLane, SequenceFloor, UndecidedCreate,
};

impl Framework {
    /// Creates `path` and every missing ancestor as CONTAINER nodes with empty data (the server
    /// deletes a container once it has had children and is empty again). Existing nodes are left
    /// as they are.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] before anything is sent; otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// If cancelled after a create was sent, some of the missing containers may have been created
    /// (and an empty container is reaped by the server only once it has had children). Calling it
    /// again finishes the path.
    pub async fn ensure_path(&self, path: &str, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        validate(path)?;
        if path == "/" {
            return Ok(());
        }
        let created = self
            .create(path)
            .mode(CreateMode::Container)
            .creating_parents(ParentMode::Container)
            .deadline(deadline)
            .await;
        match created {
            Err(err) if !err.is_node_exists() => Err(err),
            _ => {
                // In place now: protected creates under it need not send it ahead.
                self.core().known_parents.insert(path);
                Ok(())
            }
        }
    }

    /// Deletes `path` and everything below it. A missing node is not an error.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] before anything is sent; otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Not cancel safe: a cancelled call may have deleted part of the tree (descendants go first,
    /// so `path` itself is deleted last). Calling it again finishes the delete.
    pub async fn delete_recursive(&self, path: &str, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        self.delete(path).deleting_children_if_needed().quietly().deadline(deadline).await
    }

    /// Creates `<parent>/_c_<uuid>-<name>` as an EPHEMERAL_SEQUENTIAL node holding `data`, with
    /// Curator's protection, creating missing parents as containers.
    ///
    /// If the connection is lost while the create is in flight, the node is looked for among the
    /// siblings by its `_c_<uuid>-` prefix after reconnecting, and taken only if its ephemeral owner
    /// is our current session. If the session is lost instead, the attempt starts over on the new
    /// session with a new UUID, and the old prefix is handed to the cleanup worker. If the call
    /// fails or is dropped while the outcome is unknown, the cleanup worker finds and deletes
    /// the node.
    ///
    /// The returned [`OwnedNode`] deletes the node when dropped.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a bad parent or a name with a `/`, before anything is sent;
    /// [`Error::Timeout`] at the deadline; otherwise as [`Framework::retry_across_sessions`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled create returns no node and leaves none behind: a node it may have
    /// created (a reply still in flight) is found by its `_c_<uuid>-` prefix and deleted by the
    /// framework's cleanup worker.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use std::time::Duration;
    /// use zk_recipes_framework::Deadline;
    ///
    /// let node = framework
    ///     .create_protected("/app/lock", "lock-", b"10.0.0.7", Deadline::after(Duration::from_secs(5)))
    ///     .await?;
    /// println!("created {} with sequence {:?}", node.path(), node.sequence());
    /// node.delete(Deadline::after(Duration::from_secs(5))).await?;
    /// # Ok(()) }
    /// ```
    pub fn create_protected<'a>(
        &'a self,
        parent: &'a str,
        name: &'a str,
        data: &'a [u8],
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<OwnedNode>> + Send + 'a {
        let request = ProtectedCreate::new(parent, name, data, CreateMode::EphemeralSequential);
        self.create_protected_inner(request, deadline.into()).map_ok(|(node, _)| node)
    }

    /// Creates `<parent>/_c_<uuid>-<name>` as a plain EPHEMERAL node (no sequence appended), with
    /// the same protection as [`create_protected`](Self::create_protected). For nodes whose name
    /// already carries a sequence, such as the read node of a read-write lock's downgrade, which
    /// reuses its writer's sequence (as Curator 5.5+ does).
    ///
    /// # Errors
    /// As [`create_protected`](Self::create_protected).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled create returns no node and leaves none behind: a node it may have
    /// created (a reply still in flight) is found by its `_c_<uuid>-` prefix and deleted by the
    /// framework's cleanup worker.
    pub fn create_protected_ephemeral<'a>(
        &'a self,
        parent: &'a str,
        name: &'a str,
        data: &'a [u8],
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<OwnedNode>> + Send + 'a {
        let request = ProtectedCreate::new(parent, name, data, CreateMode::Ephemeral);
        self.create_protected_inner(request, deadline.into()).map_ok(|(node, _)| node)
    }

    /// As [`create_protected`](Self::create_protected), and lists the parent's children in the same
    /// round trip: the listing is sent right behind the create, on the same session, and ZooKeeper
    /// executes one session's requests in order, so the listing already holds our node. Returns
    /// the listing only when it succeeded and holds our node (else list again yourself).
    ///
    /// # Errors
    /// As [`create_protected`](Self::create_protected).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled create returns no node and leaves none behind: a node it may have
    /// created (a reply still in flight) is found by its `_c_<uuid>-` prefix and deleted by the
    /// framework's cleanup worker.
    pub fn create_protected_and_list<'a>(
        &'a self,
        parent: &'a str,
        name: &'a str,
        data: &'a [u8],
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<(OwnedNode, Option<Vec<String>>)>> + Send + 'a {
        self.create_marked_and_list(parent, &NodeMarker::Protected, name, data, deadline)
    }

    /// As [`create_protected_and_list`](Self::create_protected_and_list), with the name prefix
    /// `marker` instead of Curator's `_c_<uuid>-`: the node is `<parent>/<marker><name><sequence>`,
    /// EPHEMERAL_SEQUENTIAL, and found again after a connection loss by its marker, as the lock
    /// layouts of ZooKeeper's own recipe and of kazoo do.
    ///
    /// With [`NodeMarker::SessionId`] the marker names the session, not the call: such creates of
    /// one session under one parent go one at a time (each waits until the one before it knows its
    /// outcome), and after a lost reply a create takes, or its cleanup deletes, only the session's
    /// node above the highest sequence its earlier creates made: never a node another hold of the
    /// session still owns. The argument is in the framework's `session_marker` module.
    ///
    /// # Errors
    /// As [`create_protected`](Self::create_protected).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled create returns no node and leaves none behind: a node it may have
    /// created (a reply still in flight) is found by its marker and deleted by the framework's
    /// cleanup worker. A session marker's turn in its lane is given up with it.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use std::time::Duration;
    /// use zk_recipes_framework::{Deadline, NodeMarker};
    ///
    /// let marker = NodeMarker::SessionId { prefix: "x-".into() };
    /// let deadline = Deadline::after(Duration::from_secs(5));
    /// let (node, _siblings) = framework.create_marked_and_list("/app/lock", &marker, "", b"", deadline).await?;
    /// println!("queued as {}", node.name()); // x-<session id>-0000000000
    /// # Ok(()) }
    /// ```
    pub fn create_marked_and_list<'a>(
        &'a self,
        parent: &'a str,
        marker: &'a NodeMarker,
        name: &'a str,
        data: &'a [u8],
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<(OwnedNode, Option<Vec<String>>)>> + Send + 'a {
        let request =
            ProtectedCreate { list_siblings: true, ..ProtectedCreate::marked(parent, marker, name, data) };
        self.create_protected_inner(request, deadline.into())
    }

    /// As [`create_marked_and_list`](Self::create_marked_and_list), without the listing: for
    /// callers that list the parent in another way (several creates sharing one listing).
    ///
    /// # Errors
    /// As [`create_protected`](Self::create_protected).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled create returns no node and leaves none behind: a node it may have
    /// created (a reply still in flight) is found by its marker and deleted by the framework's
    /// cleanup worker. A session marker's turn in its lane is given up with it.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use std::time::Duration;
    /// use zk_recipes_framework::{Deadline, NodeMarker};
    ///
    /// let deadline = Deadline::after(Duration::from_secs(5));
    /// let node = framework.create_marked("/app/lock", &NodeMarker::Protected, "lock-", b"", deadline).await?;
    /// println!("queued as {}", node.name()); // _c_<uuid>-lock-0000000000
    /// # Ok(()) }
    /// ```
    pub fn create_marked<'a>(
        &'a self,
        parent: &'a str,
        marker: &'a NodeMarker,
        name: &'a str,
        data: &'a [u8],
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<OwnedNode>> + Send + 'a {
        let request = ProtectedCreate::marked(parent, marker, name, data);
        self.create_protected_inner(request, deadline.into()).map_ok(|(node, _)| node)
    }

    /// A protected create as the node API's [`CreateBuilder::protected`](crate::CreateBuilder::protected)
    /// asks for it: any mode, parents, TTL and ACL as given.
    pub(crate) async fn create_protected_node(
        &self,
        parent: &str,
        name: &str,
        data: &[u8],
        mode: CreateMode,
        creation: crate::api::Creation<'_>,
        deadline: Deadline,
    ) -> Result<OwnedNode> {
        let request = ProtectedCreate {
            parents: creation.parents,
            ttl: creation.ttl,
            acl: creation.acl,
            ..ProtectedCreate::new(parent, name, data, mode)
        };
        Ok(self.create_protected_inner(request, deadline).await?.0)
    }

    /// The protected create every entry point above runs. Not an `async fn`: that would keep its
    /// arguments twice in its state (as passed, and moved into the body), and every lock waiter
    /// carries this future while its node is being created.
    fn create_protected_inner<'a>(
        &'a self,
        request: ProtectedCreate<'a>,
        deadline: Deadline,
    ) -> impl Future<Output = Result<(OwnedNode, Option<Vec<String>>)>> + Send + 'a {
        // Checked before anything is sent; the future keeps nothing of the check.
        if let Err(err) = self.check_protected(&request) {
            return Either::Left(std::future::ready(Err(err)));
        }
        Either::Right(async move {
            let attempt = Mutex::new(ProtectedAttempt::new(self, &request, !request.is_ephemeral()));
            let attempt = &attempt;
            let request = &request;
            let try_once = |session: Session| async move {
                // A session marker's create waits for its lane's turn (see `session_marker`).
                let needs_lane = matches!(request.marker, NodeMarker::SessionId { .. })
                    && !attempt.lock().holds_lane_of(&session);
                let lane = match needs_lane {
                    false => None,
                    true => {
                        let prefix = request.marker.render(session.id());
                        Some(Box::pin(session.marker_lanes().turn(request.parent, &prefix)).await)
                    }
                };
                let (prefix, search_first, floor) = attempt.lock().prefix_for(&session, lane);
                let known_parents = &self.core().known_parents;
                let outcome =
                    create_or_find(&session, request, &prefix, search_first, floor, known_parents).await;
                if let Err(err) = &outcome {
                    if !is_connection_error_or_lost(err) {
                        // The server answered: nothing was created by this try.
                        attempt.lock().settle(None);
                    }
                }
                outcome.map(|created| (created, session))
            };
            let created = match request.anchor {
                // A fresh node: after a lost session, start over on the next one (as
                // `retry_across_sessions`, whose wrapper would only add to the state).
                None => self.retry_loop(deadline, Sessions::StartingOver, Nesting::Never, try_once).await,
                // Built on an existing node: on its session, or not at all. Boxed: rare.
                Some(anchor) => {
                    let on_its_session = Sessions::Only(anchor.generation);
                    match Box::pin(self.retry_loop(deadline, on_its_session, Nesting::Never, try_once)).await
                    {
                        Err(Error::SessionLost) => Err(Error::NodeLost { path: anchor.path.to_owned() }),
                        other => other,
                    }
                }
            };
            let (mut created, session) = created?;
            attempt.lock().settle(created.sequence);
            debug!(path = %created.path, session = %session.id(), "protected node created");
            let siblings = created.siblings.take();
            Ok((OwnedNode::new(self.clone(), created, &session), siblings))
        })
    }

    /// What a protected create checks before anything is sent.
    fn check_protected(&self, request: &ProtectedCreate<'_>) -> Result<()> {
        let ProtectedCreate { parent, name, data, .. } = *request;
        validate(parent)?;
        if name.contains('/') {
            return Err(Error::InvalidArgument(format!("node name {name:?} contains '/'")));
        }
        // The node's name is the marker (not known before the session is), then `name`: with a
        // valid parent, only a character of `name` can make the path invalid. The path is built
        // (with the marker's stand-in) only to report one.
        if path::has_refused_character(name) {
            let candidate = path::join(parent, &format!("{}{name}", path::PROTECTED_MARKER));
            path::validate_sequential(&candidate)
                .map_err(|reason| Error::invalid_path(&candidate, reason))?;
        }
        self.check_data_size(data.len())
    }
}

/// What one protected create asks for, the same on every try.
#[derive(Clone, Copy)]
struct ProtectedCreate<'a> {
    parent: &'a str,
    name: &'a str,
    data: &'a [u8],
    mode: CreateMode,
    /// List the parent's children right behind the create.
    list_siblings: bool,
    /// The existing node this create builds on: the create runs only on its session, in one
    /// multi with a check that it still exists.
    anchor: Option<Anchor<'a>>,
    /// How missing parents are created; `None`: a missing parent fails the create.
    parents: Option<ParentMode>,
    /// A TTL (persistent modes only).
    ttl: Option<std::time::Duration>,
    /// The node's ACL, instead of the framework's default.
    acl: Option<&'a [zookeeper_client::Acl]>,
    /// How the name starts, to find the node again.
    marker: &'a NodeMarker,
}

impl<'a> ProtectedCreate<'a> {
    fn new(parent: &'a str, name: &'a str, data: &'a [u8], mode: CreateMode) -> Self {
        Self {
            parent,
            name,
            data,
            mode,
            list_siblings: false,
            anchor: None,
            parents: Some(ParentMode::Container),
            ttl: None,
            acl: None,
            marker: &NodeMarker::Protected,
        }
    }

    /// A queued node: `<parent>/<marker><name><sequence>`, EPHEMERAL_SEQUENTIAL.
    fn marked(parent: &'a str, marker: &'a NodeMarker, name: &'a str, data: &'a [u8]) -> Self {
        Self { marker, ..Self::new(parent, name, data, CreateMode::EphemeralSequential) }
    }

    fn is_ephemeral(&self) -> bool {
        matches!(self.mode, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
    }

    fn options(&self, session: &'a Session, node_path: &str) -> zookeeper_client::CreateOptions<'a> {
        let options = match self.acl {
            Some(acl) => self.mode.with_acls(zookeeper_client::Acls::new(acl)),
            None => session.create_options_for(node_path, self.mode),
        };
        match self.ttl {
            Some(ttl) => options.with_ttl(ttl),
            None => options,
        }
    }
}

/// How a queued node's name starts, so that its creator finds it again among its siblings after a
/// connection loss (the create may have succeeded without our hearing of it). Each lock layout
/// has its own.
///
/// ```
/// use zk_recipes_framework::zookeeper_client::SessionId;
/// use zk_recipes_framework::{path, NodeMarker};
///
/// let marker = NodeMarker::SessionId { prefix: "x-".into() };
/// assert_eq!(marker.render(SessionId(72_057_600_000_000_001)), "x-72057600000000001-");
/// let protected = NodeMarker::Protected.render(SessionId(1));
/// assert!(protected.starts_with("_c_") && protected.ends_with('-'));
/// let name = format!("{protected}lock-0000000001");
/// let id = uuid::Uuid::parse_str(path::protected_id(&name).unwrap()).unwrap();
/// assert_eq!(id.get_version_num(), 4);
/// assert_eq!(NodeMarker::UuidHex.render(SessionId(1)).len(), 32);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeMarker {
    /// Curator's `_c_<uuid>-` (`ProtectedUtils`): a lowercase hyphenated v4 UUID, fresh for each
    /// session the create runs on.
    Protected,
    /// kazoo's `<uuid hex>`: a v4 UUID as 32 lowercase hex digits, fresh for each session.
    UuidHex,
    /// ZooKeeper's lock recipe: `<prefix><session id>-`, the session id as a signed decimal (Java's
    /// `long`). A session's creates with it under one parent go one at a time (see
    /// [`Framework::create_marked_and_list`]).
    SessionId {
        /// The text before the session id (`x-` in the recipe).
        prefix: String,
    },
}

impl NodeMarker {
    /// The marker for a create on the session `session_id`.
    pub fn render(&self, session_id: zookeeper_client::SessionId) -> String {
        match self {
            NodeMarker::Protected => fresh_protected_prefix(&mut [0; path::PROTECTED_PREFIX_LEN]).to_owned(),
            NodeMarker::UuidHex => {
                let mut buffer = uuid::Uuid::encode_buffer();
                crate::random_ids::fresh_v4().simple().encode_lower(&mut buffer).to_owned()
            }
            NodeMarker::SessionId { prefix } => format!("{prefix}{}-", session_id.0),
        }
    }

    /// As [`render`](Self::render), shared by a protected create's tries: Curator's marker is
    /// written on the stack and copied once, into the shared string (one allocation per create).
    fn render_shared(&self, session_id: zookeeper_client::SessionId) -> Arc<str> {
        match self {
            NodeMarker::Protected => Arc::from(fresh_protected_prefix(&mut [0; path::PROTECTED_PREFIX_LEN])),
            other => Arc::from(other.render(session_id)),
        }
    }
}

/// Writes a fresh `_c_<uuid>-` into `buffer`, and returns it.
fn fresh_protected_prefix(buffer: &mut [u8; path::PROTECTED_PREFIX_LEN]) -> &str {
    let (marker, rest) = buffer.split_at_mut(path::PROTECTED_MARKER.len());
    let (id, separator) = rest.split_at_mut(uuid::fmt::Hyphenated::LENGTH);
    marker.copy_from_slice(path::PROTECTED_MARKER.as_bytes());
    crate::random_ids::fresh_v4().hyphenated().encode_lower(id);
    separator.copy_from_slice(b"-");
    std::str::from_utf8(buffer).expect("the marker, a UUID and a hyphen are ASCII")
}

/// How a create makes missing parents (Curator's `creatingParentsIfNeeded` /
/// `creatingParentContainersIfNeeded`): empty nodes with the framework's default ACL.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::ParentMode;
///
/// // `/app` and `/app/jobs` are made as containers if missing: the server reaps them when empty.
/// framework.create("/app/jobs/nightly").creating_parents(ParentMode::Container).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParentMode {
    /// Persistent parents: they stay until deleted.
    Persistent,
    /// Container parents: the server deletes each once it has had children and is empty again.
    Container,
}

impl ParentMode {
    fn create_mode(self) -> CreateMode {
        match self {
            ParentMode::Persistent => CreateMode::Persistent,
            ParentMode::Container => CreateMode::Container,
        }
    }
}

/// The parents a framework's protected creates have found in place, so that only the first create
/// under a parent sends the parent's create ahead of its own. A parent deleted since (a reaped
/// container) fails the node create with NoNode, which makes the parents again: the set only
/// chooses the order of requests, never what is on the server.
#[derive(Debug, Default)]
pub(crate) struct KnownParents {
    paths: parking_lot::Mutex<std::collections::HashSet<String>>,
}

impl KnownParents {
    /// At most this many are remembered; past it the set starts again (each forgotten parent
    /// costs one NodeExists on its next create).
    const CAPACITY: usize = 100_000;

    fn contains(&self, parent: &str) -> bool {
        self.paths.lock().contains(parent)
    }

    fn insert(&self, parent: &str) {
        let mut paths = self.paths.lock();
        if paths.contains(parent) {
            return;
        }
        if paths.len() >= Self::CAPACITY {
            paths.clear();
        }
        paths.insert(parent.to_owned());
    }

    fn forget(&self, parent: &str) {
        self.paths.lock().remove(parent);
    }
}

/// An existing node of ours, on the session of `generation`.
#[derive(Clone, Copy)]
struct Anchor<'a> {
    path: &'a str,
    generation: u64,
}

impl Framework {
    /// As [`retry`](Self::retry), but only on the session of `generation` (the session that owns
    /// some ephemeral node of ours): once that session is gone the call fails with
    /// [`Error::SessionLost`] instead of running on the next session, where the node no longer
    /// exists. A call waiting for its session to reconnect (after a connection loss) ends so the
    /// moment the framework declares that session lost, even while the server is out of reach.
    ///
    /// # Cancel safety
    /// As [`retry`](Self::retry).
    pub fn retry_on_session<'a, T, F, Fut>(
        &'a self,
        generation: u64,
        deadline: impl Into<Deadline>,
        operation: F,
    ) -> impl Future<Output = Result<T>> + 'a
    where
        F: FnMut(Session) -> Fut + 'a,
        Fut: Future<Output = Result<T>> + 'a,
        T: 'a,
    {
        self.retry_loop(deadline.into(), Sessions::Only(generation), Nesting::Possible, operation)
    }

    /// `path`'s children, listed on the session of `generation`; `None` if `path` does not exist.
    ///
    /// # Errors
    /// [`Error::SessionLost`] once that session is gone; otherwise as [`retry`](Self::retry).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub fn children_on_session<'a>(
        &'a self,
        generation: u64,
        path: &'a str,
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<Option<Vec<String>>>> + Send + 'a {
        self.retry_loop(
            deadline.into(),
            Sessions::Only(generation),
            Nesting::Never,
            move |session| async move {
                match session.client().list_children(path).await {
                    Ok(children) => Ok(Some(children)),
                    Err(zookeeper_client::Error::NoNode) => Ok(None),
                    Err(err) => Err(err.into()),
                }
            },
        )
    }

    /// A data watch on `path` (get-data, not exists: no watch is left on a missing node), set on
    /// the session of `generation`, with the node's `Stat` as the watch was set; `None` if `path`
    /// does not exist. The watch fires when the node changes or is deleted, or when the session
    /// ends.
    ///
    /// # Errors
    /// [`Error::SessionLost`] once that session is gone; otherwise as [`retry`](Self::retry).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads. A watch the server set for a cancelled call is dropped with it,
    /// unread.
    pub fn watch_data_on_session<'a>(
        &'a self,
        generation: u64,
        path: &'a str,
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<Option<(Stat, zookeeper_client::OneshotWatcher)>>> + Send + 'a {
        self.retry_loop(
            deadline.into(),
            Sessions::Only(generation),
            Nesting::Never,
            move |session| async move {
                match session.client().get_and_watch_data(path).await {
                    Ok((_, stat, watcher)) => Ok(Some((stat, watcher))),
                    Err(zookeeper_client::Error::NoNode) => Ok(None),
                    Err(err) => Err(err.into()),
                }
            },
        )
    }
}

fn validate(path: &str) -> Result<()> {
    path::validate(path).map_err(|reason| Error::invalid_path(path, reason))
}

fn is_connection_error_or_lost(err: &Error) -> bool {
    err.is_retryable() || err.is_session_lost() || matches!(err, Error::Timeout { .. })
}

/// Creates `path` and missing ancestors as containers on one session.
pub(crate) async fn ensure_containers(session: &Session, path: &str) -> Result<()> {
    ensure_parents(session, path, ParentMode::Container).await
}

/// Creates `path` and missing ancestors, empty, as `mode` says, on one session.
pub(crate) async fn ensure_parents(session: &Session, path: &str, mode: ParentMode) -> Result<()> {
    if path == "/" {
        return Ok(());
    }
    let mode = mode.create_mode();
    // Fast path: the node usually exists, or only it is missing.
    let missing = match session.client().create(path, &[], &session.create_options_for(path, mode)).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => return Ok(()),
        Err(zookeeper_client::Error::NoNode) => path::ancestors(path),
        Err(err) => return Err(err.into()),
    };
    for ancestor in missing.into_iter().chain(std::iter::once(path)) {
        match session.client().create(ancestor, &[], &session.create_options_for(ancestor, mode)).await {
            Ok(_) | Err(zookeeper_client::Error::NodeExists) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(())
}

pub(crate) async fn delete_tree(session: &Session, root: &str) -> Result<()> {
    // Depth first, deepest nodes first; a child created meanwhile makes the parent's delete fail
    // with NotEmpty, and the next round picks it up.
    for _round in 0..16 {
        let mut order = Vec::new();
        let mut stack = vec![root.to_owned()];
        while let Some(node) = stack.pop() {
            match session.client().list_children(&node).await {
                Ok(children) => stack.extend(children.iter().map(|child| path::join(&node, child))),
                Err(zookeeper_client::Error::NoNode) => continue,
                Err(err) => return Err(err.into()),
            }
            order.push(node);
        }
        let mut not_empty = false;
        for node in order.iter().rev() {
            match session.client().delete(node, None).await {
                Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
                Err(zookeeper_client::Error::NotEmpty) => not_empty = true,
                Err(err) => return Err(err.into()),
            }
        }
        if !not_empty {
            return Ok(());
        }
    }
    Err(Error::ZooKeeper(zookeeper_client::Error::NotEmpty))
}

/// What a protected create knows across its tries.
struct ProtectedAttempt<'a> {
    /// Borrowed from the create, not cloned: a clone would touch the framework's shared count
    /// twice per create.
    framework: &'a Framework,
    parent: &'a str,
    /// The prefix of the current try and the session generation it belongs to (shared with the
    /// try that uses it: one allocation per prefix).
    current: Option<(Arc<str>, u64)>,
    /// Whether a create with the current prefix may have reached the server.
    maybe_created: bool,
    /// Whether the node outlives its session (persistent, container, TTL): then the prefix is
    /// kept across sessions, and looked for on the next one.
    outlives_session: bool,
    /// How prefixes are made.
    marker: &'a NodeMarker,
    /// The name after the prefix.
    name: &'a str,
    /// With a session marker: the turn in the lane of the current try's session, held until the
    /// outcome is known, and that session's generation.
    lane: Option<(MarkerLane, u64)>,
}

impl<'a> ProtectedAttempt<'a> {
    fn new(framework: &'a Framework, request: &ProtectedCreate<'a>, outlives_session: bool) -> Self {
        Self {
            framework,
            parent: request.parent,
            current: None,
            maybe_created: false,
            outlives_session,
            marker: request.marker,
            name: request.name,
            lane: None,
        }
    }

    /// Whether this attempt holds its lane's turn on `session`.
    fn holds_lane_of(&self, session: &Session) -> bool {
        matches!(&self.lane, Some((_, generation)) if *generation == session.generation())
    }

    /// The prefix to use on `session`, and whether an earlier try with it may have created a node
    /// (so look before creating): the same prefix on the same session, a fresh one on a new
    /// session for an ephemeral node (whatever the old one created is handed to the cleanup
    /// worker); a node that outlives its session keeps its prefix and is looked for.
    ///
    /// `lane` is the turn just taken for `session` (session markers only), and the returned floor
    /// that of the turn held: with a session marker, only a node above it can be this create's.
    fn prefix_for(
        &mut self,
        session: &Session,
        lane: Option<MarkerLane>,
    ) -> (Arc<str>, bool, Option<SequenceFloor>) {
        let (prefix, search_first) = match &self.current {
            Some((prefix, generation)) if *generation == session.generation() || self.outlives_session => {
                let search_first = self.maybe_created;
                self.maybe_created = true;
                (prefix.clone(), search_first)
            }
            _ => {
                self.hand_over_unknown();
                let prefix = self.marker.render_shared(session.id());
                self.current = Some((prefix.clone(), session.generation()));
                // Set before the create is sent: a drop from here on may leave a node.
                self.maybe_created = true;
                (prefix, false)
            }
        };
        if let Some(lane) = lane {
            self.lane = Some((lane, session.generation()));
        }
        let floor = self.lane.as_ref().map(|(lane, _)| **lane);
        (prefix, search_first, floor)
    }

    /// The current prefix is known to have no node (created and handed out, with `created` its
    /// sequence, or refused): the lane's turn, if any, passes on.
    fn settle(&mut self, created: Option<i32>) {
        self.maybe_created = false;
        if let (Some((mut lane, _)), Some(sequence)) = (self.lane.take(), created) {
            lane.record(sequence);
        }
    }

    fn hand_over_unknown(&mut self) {
        let lane = self.lane.take();
        if let (true, Some((prefix, _))) = (self.maybe_created, self.current.take()) {
            let task = match lane {
                // The prefix names the session: the lane's floor tells this create's node.
                Some((lane, generation)) => CleanupTask::Undecided(UndecidedCreate {
                    parent: self.parent.to_owned(),
                    prefix: prefix.to_string(),
                    name: self.name.to_owned(),
                    generation,
                    lane,
                }),
                // The prefix names the call: whatever carries it is this create's.
                None => CleanupTask::Protected { parent: self.parent.to_owned(), prefix: prefix.to_string() },
            };
            self.framework.core().cleanup.submit(task);
        }
        self.maybe_created = false;
    }
}

impl Drop for ProtectedAttempt<'_> {
    fn drop(&mut self) {
        self.hand_over_unknown();
    }
}

/// A node a protected create made.
struct Created {
    path: String,
    stat: Stat,
    sequence: Option<i32>,
    /// The parent's children listed right behind the create, when asked for and holding our node.
    siblings: Option<Vec<String>>,
}

/// One try: find a node of ours from an earlier try on this session, else create one.
async fn create_or_find(
    session: &Session,
    request: &ProtectedCreate<'_>,
    prefix: &str,
    search_first: bool,
    floor: Option<SequenceFloor>,
    known_parents: &KnownParents,
) -> Result<Created> {
    let ProtectedCreate { parent, name, data, mode, anchor, parents, .. } = *request;
    // The paths off the common one are boxed, so that only the calls that take them pay for
    // their state.
    if search_first {
        let finding = Box::pin(find_protected(session, parent, prefix, name, request.is_ephemeral(), floor));
        if let Some(found) = finding.await? {
            return Ok(found);
        }
    }
    let (node_path, name_start) = protected_node_path(parent, prefix, name);
    if let Some(anchor) = anchor {
        return Box::pin(create_while_exists(session, anchor, parent, &node_path, name, data, mode)).await;
    }
    // A parent this framework has not seen in place goes on the wire first, in the same pipeline:
    // a new lock path costs one create more, not a failed create, a failed listing, the parent's
    // create and both again.
    // Looked up once: a known parent is not written to the set again (each lookup locks it).
    let mut parent_known = parents.is_some() && known_parents.contains(parent);
    let parent_mode = parents.filter(|_| !parent_known && parent != "/");
    let (mut created, mut listed) = send_create(session, request, &node_path, parent_mode).await;
    if let (Err(zookeeper_client::Error::NoNode), Some(parents)) = (&created, parents) {
        // The parent is missing, so the listing is worthless. Most often its container was
        // reaped: its create goes ahead of ours and the listing again, in one pipeline. If it
        // was sent already, or fails again, an ancestor further up is missing too: the parents
        // are made one by one, then the create and the listing again.
        known_parents.forget(parent);
        parent_known = false;
        let parent_was_sent = parent_mode.is_some();
        let again = Box::pin(async {
            if !parent_was_sent && parent != "/" {
                let answers = send_create(session, request, &node_path, Some(parents)).await;
                if !matches!(answers.0, Err(zookeeper_client::Error::NoNode)) {
                    return Ok(answers);
                }
            }
            ensure_parents(session, parent, parents).await?;
            Ok::<_, Error>(send_create(session, request, &node_path, None).await)
        });
        (created, listed) = again.await?;
    }
    let (stat, sequence) = created?;
    if parents.is_some() && !parent_known {
        known_parents.insert(parent);
    }
    let (path, sequence) = if batch::is_sequential(mode) {
        let mut path = node_path;
        path::push_sequence(&mut path, sequence);
        (path, i32::try_from(sequence).ok())
    } else {
        (node_path, None)
    };
    let siblings = listed
        .and_then(|listed| listed.ok())
        .filter(|children| children.iter().any(|child| *child == path[name_start..]));
    Ok(Created { path, stat, sequence, siblings })
}

/// `<parent>/<prefix><name>` (as [`path::join`] makes it), with room for the sequence number the
/// server may append: one allocation for the node's path. Also where the node's name starts in it.
fn protected_node_path(parent: &str, prefix: &str, name: &str) -> (String, usize) {
    /// A sequence number's width (ZooKeeper's `%010d`; 19 digits past `i32::MAX`).
    const SEQUENCE_ROOM: usize = 19;
    let parent = parent.trim_end_matches('/');
    let mut node_path = String::with_capacity(parent.len() + 1 + prefix.len() + name.len() + SEQUENCE_ROOM);
    for part in [parent, "/", prefix, name] {
        node_path.push_str(part);
    }
    (node_path, parent.len() + 1)
}

/// What the server answered to a create (its stat and sequence), and to the listing sent behind it
/// (if asked for).
type CreateAnswers = (batch::CreateAnswer, batch::ListingAnswer);

/// Sends, back to back, the parent's create (when `parent_mode` is set), the create of
/// `node_path` and the listing of the parent (when the request asks for it), and waits for their
/// answers. The server runs them in order: the parent's create fails with NodeExists when the
/// parent is there, and its outcome shows in the node create's.
///
/// On a session with many creates at once, a create without a parent ahead of it and with the
/// framework's ACL waits for the session's next batch instead ([`batch`]).
async fn send_create(
    session: &Session,
    request: &ProtectedCreate<'_>,
    node_path: &str,
    parent_mode: Option<ParentMode>,
) -> CreateAnswers {
    let parent = request.parent;
    // Not the ZooKeeper recipe's marker: its creates go one at a time per session and parent (so
    // that a lost reply's node can be told from the session's others), never many in a batch.
    let batchable = parent_mode.is_none()
        && request.acl.is_none()
        && request.data.len() <= batch::MAX_QUEUED_DATA
        && !matches!(request.marker, NodeMarker::SessionId { .. });
    let _slot = match batchable {
        false => None,
        true => match session.batcher().create_turn(session, || batch::QueuedCreate {
            path: node_path.to_owned(),
            data: request.data.to_vec(),
            mode: request.mode,
            ttl: request.ttl,
            list: request.list_siblings.then(|| parent.to_owned()),
        }) {
            batch::Turn::Now(slot) => slot,
            batch::Turn::Queued(answer) => {
                return answer.await.unwrap_or((Err(zookeeper_client::Error::ConnectionLoss), None))
            }
        },
    };
    // Boxed: only the first create under a parent sends it.
    let parent_create = parent_mode.map(|mode| {
        let options = session.create_options_for(parent, mode.create_mode());
        Box::pin(session.client().create(parent, &[], &options))
    });
    // Pinned in place and awaited by reference, so that the state keeps each future once.
    let mut create = std::pin::pin!({
        let options = request.options(session, node_path);
        session.client().create(node_path, request.data, &options)
    });
    let mut listing = std::pin::pin!(request.list_siblings.then(|| session.client().list_children(parent)));
    if let Some(parent_create) = parent_create {
        let _ = parent_create.await;
    }
    let created = create.as_mut().await.map(|(stat, sequence)| (stat, sequence.into_i64()));
    let listed = match listing.as_mut().as_pin_mut() {
        Some(listing) => Some(listing.await),
        None => None,
    };
    (created, listed)
}

/// One multi on `session`: check that the anchor exists, create `node_path`. Creates a missing
/// parent (as containers) and tries once more.
async fn create_while_exists(
    session: &Session,
    anchor: Anchor<'_>,
    parent: &str,
    node_path: &str,
    name: &str,
    data: &[u8],
    mode: CreateMode,
) -> Result<Created> {
    let options = session.create_options_for(node_path, mode);
    let mut parent_created = false;
    let (path, stat) = loop {
        let mut writer = session.client().new_check_writer(anchor.path, None)?;
        writer.add_create(node_path, data, &options)?;
        match writer.commit().await {
            Ok(mut results) => match results.pop() {
                Some(MultiWriteResult::Create { path, stat }) => break (path, stat),
                other => {
                    let message = format!("a checked create answered {other:?}");
                    return Err(zookeeper_client::Error::UnexpectedError(message).into());
                }
            },
            Err(CheckWriteError::CheckFailed { .. }) => {
                return Err(Error::NodeLost { path: anchor.path.to_owned() })
            }
            Err(CheckWriteError::OperationFailed { source: zookeeper_client::Error::NoNode, .. })
                if !parent_created =>
            {
                ensure_containers(session, parent).await?;
                parent_created = true;
            }
            Err(
                CheckWriteError::OperationFailed { source, .. } | CheckWriteError::RequestFailed { source },
            ) => return Err(source.into()),
        }
    };
    // Servers before 3.7.2 / 3.8.2 answer a multi's create without a stat (ZOOKEEPER-4026): read
    // it on the same session, which sees our create.
    let stat = if stat.is_invalid() {
        session.client().check_stat(&path).await?.ok_or(zookeeper_client::Error::NoNode)?
    } else {
        stat
    };
    let sequence = path::sequence_after(path::name(&path), name);
    Ok(Created { path, stat, sequence, siblings: None })
}

/// Our node from an earlier try of this session, if the server has it. With a session marker
/// (`floor` set) the prefix names every node of the session: only a node above the lane's floor
/// is this create's ([`crate::session_marker`]).
async fn find_protected(
    session: &Session,
    parent: &str,
    prefix: &str,
    name: &str,
    ephemeral: bool,
    floor: Option<SequenceFloor>,
) -> Result<Option<Created>> {
    if let Some(floor) = floor {
        let Some((child, sequence)) = find_undecided(session, &floor, parent, prefix, name).await? else {
            return Ok(None);
        };
        let child_path = path::join(parent, &child);
        return match session.client().check_stat(&child_path).await {
            Ok(Some(stat)) if session.owns(stat.ephemeral_owner) => {
                debug!(path = %child_path, "found our node above the lane's floor after a connection loss");
                Ok(Some(Created { path: child_path, stat, sequence: Some(sequence), siblings: None }))
            }
            Ok(_) => Ok(None),
            Err(err) => Err(err.into()),
        };
    }
    let Some(children) = children_after_sync(session, parent).await? else {
        return Ok(None);
    };
    for child in children.iter().filter(|child| child.starts_with(prefix)) {
        let child_path = path::join(parent, child);
        match session.client().check_stat(&child_path).await {
            // An ephemeral node of ours belongs to this session; a persistent one is ours by its
            // prefix alone (a UUID of ours).
            Ok(Some(stat)) if !ephemeral || session.owns(stat.ephemeral_owner) => {
                debug!(path = %child_path, "found our protected node after a connection loss");
                let sequence = path::sequence_after(child, &format!("{prefix}{name}"));
                return Ok(Some(Created { path: child_path, stat, sequence, siblings: None }));
            }
            Ok(_) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(None)
}

/// A node this process created and owns: deleted when dropped (in the background, by the
/// framework's cleanup worker), or explicitly with [`delete`](Self::delete).
///
/// Not `Clone`: exactly one owner decides when the node goes.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::Deadline;
/// let node = framework.create_protected("/app/members", "member-", b"", Deadline::never()).await?;
/// assert!(node.name().starts_with("_c_"));
/// drop(node); // deleted in the background
/// # Ok(()) }
/// ```
#[must_use = "dropping an OwnedNode deletes its node"]
pub struct OwnedNode {
    framework: Framework,
    path: String,
    /// Where the node's name starts in `path`, found once: recipes ask for the name on every
    /// listing.
    name_start: usize,
    stat: Stat,
    sequence: Option<i32>,
    session_id: zookeeper_client::SessionId,
    generation: u64,
    armed: bool,
    /// For a node at a fixed path ([`Framework::create_exclusive_ephemeral`]): the data that
    /// marks it as ours. Another node may be at that path later, so a delete first checks the
    /// node's owner and data, and deletes at the version it read.
    mark: Option<Vec<u8>>,
}

impl OwnedNode {
    fn new(framework: Framework, created: Created, session: &Session) -> Self {
        let Created { path, stat, sequence, .. } = created;
        Self {
            framework,
            name_start: name_start(&path),
            path,
            stat,
            sequence,
            session_id: session.id(),
            generation: session.generation(),
            armed: true,
            mark: None,
        }
    }

    /// Our node at a fixed path, marked by its data.
    pub(crate) fn exclusive(
        framework: Framework,
        path: String,
        stat: Stat,
        session: &Session,
        mark: Vec<u8>,
    ) -> Self {
        Self {
            framework,
            name_start: name_start(&path),
            path,
            stat,
            sequence: None,
            session_id: session.id(),
            generation: session.generation(),
            armed: true,
            mark: Some(mark),
        }
    }

    /// The node's full path (within the namespace).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The node's name (the last path segment).
    pub fn name(&self) -> &str {
        &self.path[self.name_start..]
    }

    /// The sequence number the server appended.
    pub fn sequence(&self) -> Option<i32> {
        self.sequence
    }

    /// The node's `Stat` at creation (`czxid` orders holders: it only grows).
    pub fn stat(&self) -> &Stat {
        &self.stat
    }

    /// The session that owns the node.
    pub fn session_id(&self) -> zookeeper_client::SessionId {
        self.session_id
    }

    /// The generation of the session that owns the node.
    pub fn generation(&self) -> u64 {
        self.generation
    }

    /// The framework the node was created through.
    pub fn framework(&self) -> &Framework {
        &self.framework
    }

    /// Deletes the node now and reports the outcome, on the node's own session: a node already
    /// gone from a live session counts as deleted. A node at a fixed path
    /// ([`Framework::create_exclusive_ephemeral`]) is read first, and deleted at the version read
    /// only if it is still ours (our session's, with our data).
    ///
    /// # Errors
    /// [`Error::NodeLost`] if the node's session is gone (the node went with it; nothing is sent on
    /// a newer session), or if another node now stands at a fixed path (it is left alone);
    /// otherwise as [`Framework::retry`]. On an error the node is handed to the cleanup worker,
    /// which goes on trying in the background.
    ///
    /// # Cancel safety
    /// Cancel safe: the node is not lost track of. A cancelled delete drops the `OwnedNode` it
    /// took, which hands the node to the framework's cleanup worker: it is deleted in the
    /// background (a node at a fixed path only if it is still ours).
    pub async fn delete(mut self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        let path = self.path.as_str();
        let result = self
            .framework
            .retry_loop(deadline, Sessions::Only(self.generation), Nesting::Never, |session| {
                let mark = self.mark.as_deref();
                async move {
                    match mark {
                        None => match batch::delete(&session, path).await {
                            Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(true),
                            Err(err) => Err(Error::from(err)),
                        },
                        Some(mark) => delete_if_marked(&session, path, mark).await,
                    }
                }
            })
            .await;
        match result {
            Ok(true) => {
                self.armed = false;
                Ok(())
            }
            Ok(false) => {
                self.armed = false;
                Err(Error::NodeLost { path: self.path.clone() })
            }
            Err(Error::SessionLost) => Err(Error::NodeLost { path: self.path.clone() }),
            Err(err) => Err(err),
        }
    }

    /// Creates `<parent>/_c_<uuid>-<name>` with Curator's protection, as
    /// [`Framework::create_protected`] does, but built on this node: on this node's session only,
    /// in one transaction with a check that this node still exists. Nothing is created unless this
    /// node is there at that moment, and nothing is ever created on a newer session. For a node
    /// that continues a hold: the read node of a read-write lock's downgrade, a lease taken under
    /// a semaphore's internal lock.
    ///
    /// `mode` is [`CreateMode::Ephemeral`] or [`CreateMode::EphemeralSequential`]. A lost
    /// connection is retried on the same session; a node created by a try whose reply was lost is
    /// found again by its prefix. Missing parents are created as containers.
    ///
    /// # Errors
    /// [`Error::NodeLost`] (with this node's path) if this node is gone, or its session is; nothing
    /// was created. [`Error::InvalidPath`], [`Error::InvalidArgument`] (a persistent `mode`) and
    /// [`Error::DataTooLarge`] before anything is sent; otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled create returns no node and leaves none behind: a node it may have
    /// created (a reply still in flight) is found by its `_c_<uuid>-` prefix and deleted by the
    /// framework's cleanup worker. This node is left as it was.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use std::time::Duration;
    /// use zk_recipes_framework::zookeeper_client::CreateMode;
    /// use zk_recipes_framework::{Deadline, Error};
    ///
    /// let deadline = Deadline::after(Duration::from_secs(5));
    /// let holder = framework.create_protected("/app/lock", "lock-", b"", deadline).await?;
    /// match holder.create_protected_while_exists("/app/leases", "lease-", b"", CreateMode::EphemeralSequential, deadline).await {
    ///     Ok(lease) => println!("{} created while {} held", lease.path(), holder.path()),
    ///     Err(Error::NodeLost { path }) => println!("{path} is gone: nothing was created"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn create_protected_while_exists(
        &self,
        parent: &str,
        name: &str,
        data: &[u8],
        mode: CreateMode,
        deadline: impl Into<Deadline>,
    ) -> Result<OwnedNode> {
        let deadline = deadline.into();
        if !matches!(mode, CreateMode::Ephemeral | CreateMode::EphemeralSequential) {
            return Err(Error::InvalidArgument(format!("a protected node is ephemeral, not {mode:?}")));
        }
        let anchor = Anchor { path: &self.path, generation: self.generation };
        let request =
            ProtectedCreate { anchor: Some(anchor), ..ProtectedCreate::new(parent, name, data, mode) };
        Ok(self.framework.create_protected_inner(request, deadline).await?.0)
    }

    /// Gives up ownership without deleting: the node stays until its session ends. Returns its path.
    pub fn forget(mut self) -> String {
        self.armed = false;
        std::mem::take(&mut self.path)
    }
}

impl Drop for OwnedNode {
    fn drop(&mut self) {
        if self.armed {
            let path = std::mem::take(&mut self.path);
            let task = match self.mark.take() {
                None => CleanupTask::Node { path },
                Some(mark) => CleanupTask::Marked { path, session_id: self.session_id, mark },
            };
            self.framework.core().cleanup.submit(task);
        }
    }
}

/// Where the last name of `path` starts (as [`path::name`] finds it).
fn name_start(path: &str) -> usize {
    path.len() - path::name(path).len()
}

/// Deletes `path` on `session` if it is that session's ephemeral node holding `mark`, at the
/// version read: `Ok(true)` once it is gone (or was), `Ok(false)` if another node stands there
/// (left alone).
pub(crate) async fn delete_if_marked(session: &Session, path: &str, mark: &[u8]) -> Result<bool> {
    loop {
        let (data, stat) = match session.client().get_data(path).await {
            Ok(found) => found,
            Err(zookeeper_client::Error::NoNode) => return Ok(true),
            Err(err) => return Err(err.into()),
        };
        if stat.ephemeral_owner != session.id().0 || data != mark {
            return Ok(false);
        }
        match session.client().delete(path, Some(stat.version)).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => return Ok(true),
            // Our own data changed between the read and the delete: read again.
            Err(zookeeper_client::Error::BadVersion) => continue,
            Err(err) => return Err(err.into()),
        }
    }
}

impl fmt::Debug for OwnedNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OwnedNode")
            .field("path", &self.path)
            .field("session_id", &self.session_id)
            .field("generation", &self.generation)
            .finish_non_exhaustive()
    }
}
