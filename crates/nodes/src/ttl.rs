//! `PersistentTtlNode`: a container kept alive by a TTL'd child (Curator's `PersistentTtlNode`).

use std::fmt;
use std::time::Duration;

use tokio::task::JoinHandle;
use tracing::{debug, info_span, Instrument};
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{
    local_address, path, Deadline, Error as FrameworkError, Framework, DEFAULT_OPERATION_TIMEOUT, MAX_TTL,
};

use crate::error::{NodeError, Result};
use crate::persistent::PersistentNode;

/// The touch child's name (Curator's `DEFAULT_CHILD_NODE_NAME`).
pub const DEFAULT_TOUCH_CHILD: &str = "touch";
/// The child is touched every `ttl / DEFAULT_TOUCH_FACTOR` (Curator's
/// `DEFAULT_TOUCH_SCHEDULE_FACTOR`).
pub const DEFAULT_TOUCH_FACTOR: u32 = 2;

/// Configures a [`PersistentTtlNode`] ([`PersistentTtlNode::builder`]).
///
/// Defaults: empty data, the touch child [`DEFAULT_TOUCH_CHILD`], touched every `ttl /`
/// [`DEFAULT_TOUCH_FACTOR`].
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_nodes::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_nodes::PersistentTtlNode;
///
/// // Touched every 20 s: the node goes about a minute after this process stops.
/// let node = PersistentTtlNode::builder(&framework, "/jobs/nightly/running", Duration::from_secs(60))
///     .data(b"worker-3")
///     .touch_child("heartbeat")
///     .touch_factor(3)
///     .start()?;
/// # drop(node);
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until start() is called"]
#[derive(Debug)]
pub struct PersistentTtlNodeBuilder {
    framework: Framework,
    path: String,
    ttl: Duration,
    data: Vec<u8>,
    touch_child: String,
    touch_factor: u32,
}

impl PersistentTtlNodeBuilder {
    /// The container's data. Defaults to empty.
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into();
        self
    }

    /// The touch child's name. Defaults to [`DEFAULT_TOUCH_CHILD`] (`touch`), as Curator's.
    pub fn touch_child(mut self, name: impl Into<String>) -> Self {
        self.touch_child = name.into();
        self
    }

    /// Touches the child every `ttl / factor`. Defaults to [`DEFAULT_TOUCH_FACTOR`] (2).
    pub fn touch_factor(mut self, factor: u32) -> Self {
        self.touch_factor = factor;
        self
    }

    /// Starts keeping the node: the container is created (and created again whenever it goes),
    /// and its child is touched as soon as the container exists, then every `ttl / factor`.
    /// Needs a tokio runtime.
    ///
    /// # Errors
    /// Before anything is sent: [`NodeError::Framework`] with `InvalidPath` or `DataTooLarge`;
    /// [`NodeError::InvalidArgument`] for a touch child that is not one node name, a TTL outside
    /// 1 ms ..= [`MAX_TTL`], a touch factor of 0, or a touch period under 1 ms.
    pub fn start(self) -> Result<PersistentTtlNode> {
        if self.touch_child.is_empty() || self.touch_child.contains('/') {
            return Err(NodeError::InvalidArgument(format!(
                "the touch child {:?} is not one node name",
                self.touch_child
            )));
        }
        path::validate(&self.path).map_err(|reason| {
            NodeError::Framework(FrameworkError::InvalidPath { path: self.path.clone(), reason })
        })?;
        let child_path = path::join(&self.path, &self.touch_child);
        path::validate(&child_path).map_err(|reason| {
            NodeError::Framework(FrameworkError::InvalidPath { path: child_path.clone(), reason })
        })?;
        if self.ttl < Duration::from_millis(1) || self.ttl > MAX_TTL {
            return Err(NodeError::InvalidArgument(format!(
                "a TTL must be from 1 ms to {} ms",
                MAX_TTL.as_millis()
            )));
        }
        if self.touch_factor == 0 {
            return Err(NodeError::InvalidArgument("the touch factor must be at least 1".into()));
        }
        let period = self.ttl / self.touch_factor;
        if period < Duration::from_millis(1) {
            return Err(NodeError::InvalidArgument("ttl / touch factor must be at least 1 ms".into()));
        }
        let node = PersistentNode::builder(&self.framework, &self.path)
            .mode(CreateMode::Container)
            .data(self.data)
            .keep_when_done()
            .needs_ttl_nodes()
            .start()?;
        let toucher = Toucher { framework: self.framework, child_path, ttl: self.ttl, period };
        let created = node.created();
        let span = info_span!("persistent_ttl_node", path = %self.path);
        let touching = tokio::spawn(toucher.run(created).instrument(span));
        Ok(PersistentTtlNode { node: Some(node), touching, ttl: self.ttl })
    }
}

/// A node that stays while this process runs, and goes a TTL after it stops (Curator's
/// `PersistentTtlNode`): a [container](CreateMode::Container) at the path, kept present as a
/// [`PersistentNode`], with a TTL'd child (`touch`) touched every `ttl / 2`.
///
/// While touched, the child keeps the container (a container with a child is never reaped).
/// Once this process stops (closed, dropped or crashed), the child expires one TTL after its
/// last touch, and the server then reaps the container. The touch is a write to the child, so
/// it sends no event to a watcher of the container's data or children.
///
/// Unlike Curator's, the first touch comes as soon as the container exists (Curator's comes
/// after `ttl / 2`), and the child is touched again at once whenever the container is created
/// again. The layout and data are Curator's: the child's data is the local address, as Curator's
/// default data.
///
/// Needs a server with TTL nodes enabled (`zookeeper.extendedTypesEnabled=true`).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_nodes::NodeError> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_nodes::PersistentTtlNode;
///
/// let node = PersistentTtlNode::builder(&framework, "/jobs/nightly/running", Duration::from_secs(30))
///     .data(b"worker-3")
///     .start()?;
/// node.wait_for_initial_create(Deadline::after(Duration::from_secs(10))).await?;
/// // ... the node stays while we work, and goes 30 s after we stop.
/// node.close().await?;
/// # Ok(()) }
/// ```
#[must_use = "the node is no longer touched once this is dropped"]
pub struct PersistentTtlNode {
    node: Option<PersistentNode>,
    touching: JoinHandle<()>,
    ttl: Duration,
}

impl PersistentTtlNode {
    /// A builder for a TTL node at `path` that goes `ttl` after this process stops touching it.
    pub fn builder(framework: &Framework, path: &str, ttl: Duration) -> PersistentTtlNodeBuilder {
        PersistentTtlNodeBuilder {
            framework: framework.clone(),
            path: path.to_owned(),
            ttl,
            data: Vec::new(),
            touch_child: DEFAULT_TOUCH_CHILD.to_owned(),
            touch_factor: DEFAULT_TOUCH_FACTOR,
        }
    }

    fn node(&self) -> &PersistentNode {
        self.node.as_ref().expect("present until close")
    }

    /// The container's path.
    pub fn path(&self) -> &str {
        self.node().base_path()
    }

    /// The TTL it was built with.
    pub fn ttl(&self) -> Duration {
        self.ttl
    }

    /// The container's data.
    pub fn data(&self) -> Vec<u8> {
        self.node().data()
    }

    /// Waits until the container exists (Curator's `waitForInitialCreate`).
    ///
    /// # Errors
    /// As [`PersistentNode::wait_for_initial_create`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits. The container's task goes on creating it either way.
    pub async fn wait_for_initial_create(&self, deadline: impl Into<Deadline>) -> Result<String> {
        let deadline = deadline.into();
        self.node().wait_for_initial_create(deadline).await
    }

    /// Sets the container's data (Curator's `setData`).
    ///
    /// # Errors
    /// As [`PersistentNode::set_data`].
    ///
    /// # Cancel safety
    /// Cancel safe in effect: once the call is first polled, the new data is with the node's task,
    /// which keeps it for later re-creations and sets it on the server whether or not the call
    /// still waits. A cancelled call only misses the outcome (a failed set is not reported).
    pub async fn set_data(&self, data: Vec<u8>) -> Result<()> {
        self.node().set_data(data).await
    }

    /// Stops touching the child. The nodes stay: the child expires one TTL after its last touch,
    /// and the server then reaps the container (Curator's `close`).
    ///
    /// # Errors
    /// [`NodeError::Closed`] if the keeper had already ended with its framework.
    ///
    /// # Cancel safety
    /// Cancel safe: the touching stops when the call is first polled (or when the node is dropped);
    /// the nodes stay either way. A cancelled call only misses the outcome.
    pub async fn close(mut self) -> Result<()> {
        self.touching.abort();
        match self.node.take() {
            Some(node) => node.close().await,
            None => Ok(()),
        }
    }
}

impl Drop for PersistentTtlNode {
    fn drop(&mut self) {
        self.touching.abort();
    }
}

impl fmt::Debug for PersistentTtlNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PersistentTtlNode")
            .field("path", &self.node.as_ref().map(PersistentNode::base_path))
            .field("ttl", &self.ttl)
            .finish_non_exhaustive()
    }
}

/// Touches the child while the container exists.
struct Toucher {
    framework: Framework,
    child_path: String,
    ttl: Duration,
    period: Duration,
}

impl Toucher {
    async fn run(self, mut created: tokio::sync::watch::Receiver<Option<String>>) {
        loop {
            if created.wait_for(Option::is_some).await.is_err() {
                return;
            }
            match self.touch().await {
                Ok(()) => debug!(child = self.child_path, "touched"),
                Err(FrameworkError::Closed) => return,
                Err(err) => debug!(%err, child = self.child_path, "could not touch; trying again"),
            }
            tokio::select! {
                () = tokio::time::sleep(self.period) => {}
                // The container went, or was created again: touch as soon as it is back.
                changed = created.changed() => if changed.is_err() { return },
            }
        }
    }

    /// Sets the child's data; creates it with the TTL if it is missing (Curator's touch). A
    /// missing container is not an error: the next touch follows its re-creation.
    async fn touch(&self) -> std::result::Result<(), FrameworkError> {
        let data = local_address();
        let deadline =
            Deadline::after(DEFAULT_OPERATION_TIMEOUT.min(self.period.max(Duration::from_secs(1))));
        match self.framework.set_data(&self.child_path, &data, None, deadline).await {
            Err(err) if err.is_no_node() => {}
            other => return other.map(drop),
        }
        let created = self
            .framework
            .create(&self.child_path)
            .mode(CreateMode::Persistent)
            .ttl(self.ttl)
            .data(data.clone())
            .deadline(deadline)
            .await;
        match created {
            Ok(_) => Ok(()),
            // Created meanwhile: touched by its create; or the container is gone: wait for it.
            Err(err) if err.is_node_exists() || err.is_no_node() => Ok(()),
            Err(err) => Err(err),
        }
    }
}
