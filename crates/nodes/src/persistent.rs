//! `PersistentNode`: a node kept present (Curator's `PersistentNode`).

use std::fmt;
use std::time::Duration;

use parking_lot::Mutex;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};
use tracing::{debug, info_span, warn, Instrument};
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{
    path, Deadline, Error as FrameworkError, Feature, Framework, ParentMode, WatchEvent,
    DEFAULT_OPERATION_TIMEOUT,
};

use crate::error::{NodeError, Result};

/// Configures a [`PersistentNode`] ([`PersistentNode::builder`]).
///
/// Defaults: [`CreateMode::Ephemeral`], not protected, empty data, no TTL; missing parents are
/// created as containers (as Curator's).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_nodes::Result<()> {
/// use zk_recipes_framework::zookeeper_client::CreateMode;
/// use zk_recipes_nodes::PersistentNode;
///
/// // `/services/api/_c_<uuid>-instance-<seq>`, found again after a connection loss during the create.
/// let node = PersistentNode::builder(&framework, "/services/api/instance-")
///     .mode(CreateMode::EphemeralSequential)
///     .protected()
///     .data(b"10.0.0.7:8080")
///     .start()?;
/// # drop(node);
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until start() is called"]
#[derive(Debug)]
pub struct PersistentNodeBuilder {
    framework: Framework,
    settings: Settings,
}

#[derive(Debug, Clone)]
struct Settings {
    base_path: String,
    mode: CreateMode,
    protected: bool,
    ttl: Option<Duration>,
    data: Vec<u8>,
    /// Whether closing or dropping deletes the node (not for a `PersistentTtlNode`'s container,
    /// which its TTL'd child keeps, and the server reaps once that has expired).
    delete_when_done: bool,
    /// Whether the server must have TTL nodes (a TTL, or a `PersistentTtlNode`'s container, whose
    /// child has one): checked before the first create, so that nothing is created without them.
    needs_ttl_nodes: bool,
}

impl Settings {
    fn sequential(&self) -> bool {
        matches!(self.mode, CreateMode::PersistentSequential | CreateMode::EphemeralSequential)
    }

    fn ephemeral(&self) -> bool {
        matches!(self.mode, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
    }

    /// Whether the created node's name differs from the base path (a sequence or a protection
    /// prefix): then a node found at the base path is never ours.
    fn unique_name(&self) -> bool {
        self.sequential() || self.protected
    }
}

impl PersistentNodeBuilder {
    /// The node's mode (Curator's `mode`). Defaults to [`CreateMode::Ephemeral`].
    pub fn mode(mut self, mode: CreateMode) -> Self {
        self.settings.mode = mode;
        self
    }

    /// Creates the node with Curator's protection (`_c_<uuid>-` prefix), found again after a
    /// connection loss during the create (Curator's `useProtection`).
    pub fn protected(mut self) -> Self {
        self.settings.protected = true;
        self
    }

    /// The node's data when created (Curator's `initData`).
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.settings.data = data.into();
        self
    }

    /// A TTL for a persistent mode (Curator's `PersistentNode` with `ttl`): the server deletes
    /// the node once it has had no children for this long; it is then created again. Needs a
    /// server with `zookeeper.extendedTypesEnabled`.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.settings.ttl = Some(ttl);
        self
    }

    /// Closing or dropping leaves the node on the server (Curator's `PersistentTtlNode` overrides
    /// `deleteNode` to do nothing).
    pub(crate) fn keep_when_done(mut self) -> Self {
        self.settings.delete_when_done = false;
        self
    }

    /// The server must have TTL nodes before anything is created (a `PersistentTtlNode`'s
    /// container, whose child has a TTL).
    pub(crate) fn needs_ttl_nodes(mut self) -> Self {
        self.settings.needs_ttl_nodes = true;
        self
    }

    /// Starts keeping the node: a background task creates it, watches it, and creates it again
    /// whenever it is deleted or its session is lost. Needs a tokio runtime.
    ///
    /// # Errors
    /// [`NodeError::Framework`] with `InvalidPath` or `DataTooLarge`, or
    /// [`NodeError::InvalidArgument`] (the root, a TTL on an ephemeral mode), before anything is
    /// sent.
    pub fn start(self) -> Result<PersistentNode> {
        let settings = self.settings;
        path::validate(&settings.base_path).map_err(|reason| {
            NodeError::Framework(FrameworkError::InvalidPath { path: settings.base_path.clone(), reason })
        })?;
        if settings.base_path == "/" {
            return Err(NodeError::InvalidArgument("the root cannot be a persistent node".into()));
        }
        if settings.ttl.is_some() && settings.ephemeral() {
            return Err(NodeError::InvalidArgument(format!(
                "a TTL needs a persistent mode, not {:?}",
                settings.mode
            )));
        }
        self.framework.check_data_size(settings.data.len())?;
        let (created, _) = watch::channel(None);
        let (failed, _) = watch::channel(None);
        let shared = Arc::new(Shared { data: Mutex::new(settings.data.clone()), created, failed });
        let (commands, receiver) = mpsc::unbounded_channel();
        let span = info_span!("persistent_node", path = %settings.base_path);
        tokio::spawn(
            Keeper {
                framework: self.framework,
                settings: settings.clone(),
                shared: Arc::clone(&shared),
                commands: receiver,
            }
            .run()
            .instrument(span),
        );
        Ok(PersistentNode { base_path: settings.base_path, shared, commands })
    }
}

struct Shared {
    /// The data the node is (re)created with.
    data: Mutex<Vec<u8>>,
    /// The node's full path while we hold it.
    created: watch::Sender<Option<String>>,
    /// Why the task stopped before it created anything (a server without TTL nodes).
    failed: watch::Sender<Option<FrameworkError>>,
}

enum Command {
    SetData(Vec<u8>, oneshot::Sender<Result<()>>),
    Close(oneshot::Sender<Result<()>>),
}

/// A node kept present (Curator's `PersistentNode`): created when started, and created again
/// when it is deleted, when its session is lost (an ephemeral node), or when a TTL removes it.
/// Its data can be changed at any time, and is what it is created with again.
///
/// A node that already exists at the path is taken over as Curator does (its data is set)
/// unless it is an ephemeral node of another live session: then this one waits for it to go,
/// and creates its own; two processes never both believe they hold one ephemeral node.
///
/// Dropping it deletes the node in the background; [`close`](Self::close) deletes it and waits.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_nodes::NodeError> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_nodes::PersistentNode;
///
/// let node = PersistentNode::builder(&framework, "/services/api/10.0.0.7").data(b"port=8080").start()?;
/// node.wait_for_initial_create(Deadline::after(Duration::from_secs(10))).await?;
/// node.set_data(b"port=8081".to_vec()).await?;
/// node.close().await?;
/// # Ok(()) }
/// ```
#[must_use = "the node is deleted when this is dropped"]
pub struct PersistentNode {
    base_path: String,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedSender<Command>,
}

impl PersistentNode {
    /// A builder for a node at `base_path` (with a sequential or protected mode, the parent and
    /// name prefix of the created node).
    pub fn builder(framework: &Framework, base_path: &str) -> PersistentNodeBuilder {
        PersistentNodeBuilder {
            framework: framework.clone(),
            settings: Settings {
                base_path: base_path.to_owned(),
                mode: CreateMode::Ephemeral,
                protected: false,
                ttl: None,
                data: Vec::new(),
                delete_when_done: true,
                needs_ttl_nodes: false,
            },
        }
    }

    /// The path it was built with.
    pub fn base_path(&self) -> &str {
        &self.base_path
    }

    /// The node's full path while it exists as ours (Curator's `getActualPath`): with a
    /// sequential or protected mode, the created name.
    pub fn actual_path(&self) -> Option<String> {
        self.shared.created.borrow().clone()
    }

    /// The data the node holds (or is created with).
    pub fn data(&self) -> Vec<u8> {
        self.shared.data.lock().clone()
    }

    /// Follows [`actual_path`](Self::actual_path): `Some` while the node exists as ours.
    pub(crate) fn created(&self) -> watch::Receiver<Option<String>> {
        self.shared.created.subscribe()
    }

    /// Waits until the node exists as ours (Curator's `waitForInitialCreate`); returns its path.
    ///
    /// # Errors
    /// A framework timeout at the deadline; [`NodeError::Closed`] if the node was closed;
    /// [`FrameworkError::MissingFeature`] (in [`NodeError::Framework`]) when the node needs TTL
    /// nodes (a [`ttl`](PersistentNodeBuilder::ttl), a `PersistentTtlNode`) and the server has
    /// none: the node's task then stopped before creating anything.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits. The node's task goes on creating it either way.
    pub async fn wait_for_initial_create(&self, deadline: impl Into<Deadline>) -> Result<String> {
        let deadline = deadline.into();
        let mut created = self.shared.created.subscribe();
        let mut failed = self.shared.failed.subscribe();
        let found = deadline
            .run(async {
                Ok(tokio::select! {
                    created = created.wait_for(Option::is_some) => {
                        created.map(|path| path.clone().unwrap_or_default()).map_err(|_| NodeError::Closed)
                    }
                    Ok(failed) = failed.wait_for(Option::is_some) => {
                        Err(NodeError::Framework(failed.clone().expect("waited for Some")))
                    }
                })
            })
            .await?;
        found
    }

    /// Sets the node's data: on the server now if the node exists, and for every later
    /// re-creation (Curator's `setData`).
    ///
    /// # Errors
    /// [`NodeError::Framework`] with `DataTooLarge` (nothing changes); errors from the server's
    /// set; [`NodeError::Closed`] once closed.
    ///
    /// # Cancel safety
    /// Cancel safe in effect: once the call is first polled, the new data is with the node's task,
    /// which keeps it for later re-creations and sets it on the server whether or not the call
    /// still waits. A cancelled call only misses the outcome (a failed set is not reported).
    pub async fn set_data(&self, data: Vec<u8>) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::SetData(data, reply)).map_err(|_| NodeError::Closed)?;
        answer.await.map_err(|_| NodeError::Closed)?
    }

    /// Stops keeping the node and deletes it, waiting for the delete (Curator's `close`).
    ///
    /// # Errors
    /// From the delete (then it is retried in the background, as Curator's guaranteed delete).
    ///
    /// # Cancel safety
    /// Cancel safe: the node's task stops and deletes the node once the call is first polled,
    /// whether or not the call still waits (and a node dropped before that is deleted in the
    /// background). A cancelled call only misses the outcome.
    pub async fn close(self) -> Result<()> {
        let (reply, answer) = oneshot::channel();
        self.commands.send(Command::Close(reply)).map_err(|_| NodeError::Closed)?;
        answer.await.map_err(|_| NodeError::Closed)?
    }
}

impl fmt::Debug for PersistentNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PersistentNode")
            .field("base_path", &self.base_path)
            .field("actual_path", &self.actual_path())
            .finish_non_exhaustive()
    }
}

/// What trying to create the node found.
enum Ensured {
    /// The node is ours, at this path.
    Ours(String),
    /// Another live session's ephemeral node is at the path: wait for it to go.
    HeldByOther,
}

/// How the wait for the next thing to do ended.
enum Next {
    /// Create the node (again).
    Recreate,
    /// Closed: the task ends.
    Stop,
}

struct Keeper {
    framework: Framework,
    settings: Settings,
    shared: Arc<Shared>,
    commands: mpsc::UnboundedReceiver<Command>,
}

impl Keeper {
    async fn run(mut self) {
        // Between failed creates; commands are still served during each pause.
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(2));
        if self.settings.needs_ttl_nodes || self.settings.ttl.is_some() {
            loop {
                let required = self
                    .framework
                    .require(Feature::TtlNodes, Deadline::after(DEFAULT_OPERATION_TIMEOUT))
                    .await;
                match required {
                    Ok(()) => break,
                    Err(FrameworkError::Closed) => {
                        self.stopped().await;
                        return;
                    }
                    Err(err @ FrameworkError::MissingFeature { .. }) => {
                        warn!(%err, "the server cannot keep this node: stopped, nothing created");
                        self.shared.failed.send_replace(Some(err));
                        return;
                    }
                    Err(err) => {
                        debug!(%err, "could not ask the server for TTL nodes yet; asking again");
                        if let Next::Stop = self.wait(None, None, backoff.next_pause()).await {
                            return;
                        }
                    }
                }
            }
        }
        loop {
            let ensured = self.ensure().await;
            let (watched, ours) = match ensured {
                Ok(Ensured::Ours(path)) => {
                    debug!(path, "node present");
                    self.shared.created.send_replace(Some(path.clone()));
                    backoff.reset();
                    (path, true)
                }
                Ok(Ensured::HeldByOther) => {
                    debug!("an ephemeral node of another session is at the path; waiting for it to go");
                    (self.settings.base_path.clone(), false)
                }
                Err(NodeError::Framework(FrameworkError::Closed)) => {
                    self.stopped().await;
                    return;
                }
                Err(err) => {
                    warn!(%err, "could not create the node; trying again");
                    match self.wait(None, None, backoff.next_pause()).await {
                        Next::Stop => return,
                        Next::Recreate => {}
                    }
                    continue;
                }
            };
            let watch =
                self.framework.watch(&watched, false, Deadline::after(DEFAULT_OPERATION_TIMEOUT)).await;
            let watch = match watch {
                Ok(watch) => watch,
                Err(FrameworkError::Closed) => {
                    self.stopped().await;
                    return;
                }
                Err(err) => {
                    warn!(%err, "could not watch the node; checking it again");
                    continue;
                }
            };
            let owned = ours.then_some(watched.clone());
            // What happened between the create and the watch (a delete, a lost session) sent
            // no event to it: look once now that the watch is set.
            if !self.still_ours(owned.as_deref()).await {
                self.shared.created.send_replace(None);
                continue;
            }
            match self.wait(Some(watch), owned, Duration::MAX).await {
                Next::Stop => return,
                Next::Recreate => {
                    self.shared.created.send_replace(None);
                }
            }
        }
    }

    /// Creates the node, or finds it present and ours.
    async fn ensure(&self) -> Result<Ensured> {
        let data = self.shared.data.lock().clone();
        let mut create = self
            .framework
            .create(&self.settings.base_path)
            .mode(self.settings.mode)
            .data(data.clone())
            .creating_parents(ParentMode::Container);
        if self.settings.protected {
            create = create.protected();
        }
        if let Some(ttl) = self.settings.ttl {
            create = create.ttl(ttl);
        }
        match create.await {
            Ok(created) => Ok(Ensured::Ours(created.path)),
            Err(err) if err.is_node_exists() && !self.settings.unique_name() => {
                let deadline = Deadline::after(DEFAULT_OPERATION_TIMEOUT);
                let path = &self.settings.base_path;
                let Some(stat) = self.framework.exists(path, deadline).await? else {
                    // Gone again already: the next attempt creates it.
                    return Ok(Ensured::HeldByOther);
                };
                let current = self.framework.current();
                if stat.ephemeral_owner != 0
                    && Some(stat.ephemeral_owner) != current.session_id.map(|id| id.0)
                {
                    return Ok(Ensured::HeldByOther);
                }
                // Ours from an earlier attempt, or a persistent node: taken over, as Curator does.
                self.framework.set_data(path, &data, None, deadline).await?;
                Ok(Ensured::Ours(path.clone()))
            }
            Err(err) => Err(err.into()),
        }
    }

    /// Serves commands until the node must be created again (deleted, its session gone, or after
    /// `pause` when there is no watch) or the keeper is closed.
    async fn wait(
        &mut self,
        mut watch: Option<zk_recipes_framework::PersistentWatch>,
        owned: Option<String>,
        pause: Duration,
    ) -> Next {
        let sleep = tokio::time::sleep(pause.min(Duration::from_secs(365 * 24 * 3600)));
        tokio::pin!(sleep);
        loop {
            let event = async {
                match watch.as_mut() {
                    Some(watch) => watch.next().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                command = self.commands.recv() => match command {
                    None => {
                        // Dropped: delete in the background and end.
                        if let Some(path) = owned.as_ref().filter(|_| self.settings.delete_when_done) {
                            self.framework.delete_in_background(path.clone());
                        }
                        return Next::Stop;
                    }
                    Some(Command::Close(reply)) => {
                        let _ = reply.send(self.delete(owned.as_deref()).await);
                        return Next::Stop;
                    }
                    Some(Command::SetData(data, reply)) => {
                        if let Err(too_large) = self.framework.check_data_size(data.len()) {
                            let _ = reply.send(Err(too_large.into()));
                            continue;
                        }
                        *self.shared.data.lock() = data.clone();
                        let Some(path) = &owned else {
                            let _ = reply.send(Ok(()));
                            continue;
                        };
                        let set = self.framework.set_data(path, &data, None, Deadline::after(DEFAULT_OPERATION_TIMEOUT)).await;
                        match set {
                            Ok(_) => { let _ = reply.send(Ok(())); }
                            // Deleted meanwhile: created again with the new data.
                            Err(err) if err.is_no_node() => {
                                let _ = reply.send(Ok(()));
                                return Next::Recreate;
                            }
                            Err(err) => { let _ = reply.send(Err(err.into())); }
                        }
                    }
                },
                event = event => match event {
                    None => return self.stopped().await,
                    Some(WatchEvent::Deleted { .. }) => return Next::Recreate,
                    // Changes may have been missed (a new session, a reconnection): check.
                    Some(WatchEvent::Reset) => {
                        if !self.still_ours(owned.as_deref()).await {
                            return Next::Recreate;
                        }
                    }
                    Some(_) => {}
                },
                () = &mut sleep => return Next::Recreate,
            }
        }
    }

    /// Whether the node we hold (or wait on) is still as it was: present, and for an ephemeral
    /// node of ours, owned by the current session. Waiting on another's node: whether it is gone.
    async fn still_ours(&self, owned: Option<&str>) -> bool {
        let path = owned.unwrap_or(&self.settings.base_path);
        match self.framework.exists(path, Deadline::after(DEFAULT_OPERATION_TIMEOUT)).await {
            Ok(Some(stat)) => match owned {
                None => true,
                Some(_) if stat.ephemeral_owner == 0 => true,
                Some(_) => Some(stat.ephemeral_owner) == self.framework.current().session_id.map(|id| id.0),
            },
            Ok(None) => false,
            Err(_) => false,
        }
    }

    async fn delete(&self, owned: Option<&str>) -> Result<()> {
        self.shared.created.send_replace(None);
        let Some(path) = owned.filter(|_| self.settings.delete_when_done) else { return Ok(()) };
        match self.framework.delete(path).quietly().guaranteed().await {
            Ok(()) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// The framework closed under us: nothing to delete with (its session is gone with it).
    async fn stopped(&mut self) -> Next {
        self.shared.created.send_replace(None);
        self.commands.close();
        while let Some(command) = self.commands.recv().await {
            match command {
                Command::Close(reply) => drop(reply.send(Err(NodeError::Framework(FrameworkError::Closed)))),
                Command::SetData(_, reply) => {
                    drop(reply.send(Err(NodeError::Framework(FrameworkError::Closed))))
                }
            }
        }
        Next::Stop
    }
}
