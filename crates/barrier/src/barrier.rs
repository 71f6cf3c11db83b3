//! `DistributedBarrier`: a node whose existence holds everyone waiting on it (Curator's
//! `DistributedBarrier`).

use tracing::{debug, info_span, Instrument};
use zk_recipes_framework::{local_address, Deadline, Framework, ParentMode, WatchEvent};

use crate::error::{validate_path, BarrierError, Result};

/// A barrier: while its node exists, [`wait`](Self::wait) blocks; once the node is removed,
/// every waiter goes on (Curator's `DistributedBarrier`).
///
/// The node is `<barrier_path>` itself, PERSISTENT, holding this host's address (Curator's default
/// data); missing parents are created as empty containers (Curator 5.4's
/// `creatingParentContainersIfNeeded`; newer Curator sources use `creatingParentsIfNeeded`).
/// A Java process with Curator's `DistributedBarrier` on the same path sets, removes and waits on
/// the same node.
///
/// The handle is cheap to clone and holds nothing on the server: a dropped or timed-out
/// [`wait`](Self::wait) leaves no node behind, and its watch is removed with it.
///
/// Connection loss and session expiry do not change the barrier (its node is persistent); a wait
/// reads the node again after each reconnection or new session, so a removal it missed meanwhile
/// still lets it through.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_barrier::BarrierError> {
/// use std::time::Duration;
/// use zk_recipes_barrier::DistributedBarrier;
/// use zk_recipes_framework::Deadline;
///
/// let barrier = DistributedBarrier::new(&framework, "/jobs/nightly/gate")?;
/// barrier.set(Deadline::after(Duration::from_secs(5))).await?;
/// // ... elsewhere, workers block until the gate is removed:
/// // barrier.wait(Deadline::after(Duration::from_secs(60))).await?;
/// barrier.remove(Deadline::after(Duration::from_secs(5))).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DistributedBarrier {
    framework: Framework,
    barrier_path: String,
}

impl DistributedBarrier {
    /// A barrier on `barrier_path` (Curator's `new DistributedBarrier(client, path)`). Sends
    /// nothing.
    ///
    /// # Errors
    /// [`BarrierError::Framework`] with `InvalidPath` for a path ZooKeeper refuses, and
    /// [`BarrierError::InvalidPath`] for the root; nothing is sent.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) {
    /// use zk_recipes_barrier::{BarrierError, DistributedBarrier};
    ///
    /// assert!(DistributedBarrier::new(&framework, "/gates/release").is_ok());
    /// assert!(matches!(DistributedBarrier::new(&framework, "no-slash"), Err(BarrierError::Framework(_))));
    /// # }
    /// ```
    pub fn new(framework: &Framework, barrier_path: &str) -> Result<Self> {
        validate_path(barrier_path)?;
        Ok(Self { framework: framework.clone(), barrier_path: barrier_path.to_owned() })
    }

    /// The barrier node's path.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// let barrier = zk_recipes_barrier::DistributedBarrier::new(&framework, "/gates/release")?;
    /// assert_eq!(barrier.path(), "/gates/release");
    /// # Ok(()) }
    /// ```
    pub fn path(&self) -> &str {
        &self.barrier_path
    }

    /// Sets the barrier: creates its node, or finds it there (Curator's `setBarrier`).
    ///
    /// # Errors
    /// A framework error from the create (a timeout at `deadline`, a closed framework, ...).
    ///
    /// # Cancel safety
    /// Cancelling may or may not have set the barrier.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes_barrier::DistributedBarrier) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// use std::time::Duration;
    /// barrier.set(zk_recipes_framework::Deadline::after(Duration::from_secs(5))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn set(&self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        let created = self
            .framework
            .create(&self.barrier_path)
            .data(local_address())
            .creating_parents(ParentMode::Container)
            .deadline(deadline)
            .await;
        match created {
            Ok(_) => {
                debug!(path = %self.barrier_path, "barrier set");
                Ok(())
            }
            Err(err) if err.is_node_exists() => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Removes the barrier: deletes its node, if it is there (Curator's `removeBarrier`). Every
    /// waiter goes on.
    ///
    /// # Errors
    /// A framework error from the delete.
    ///
    /// # Cancel safety
    /// Cancelling may or may not have removed the barrier.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes_barrier::DistributedBarrier) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// use std::time::Duration;
    /// barrier.remove(zk_recipes_framework::Deadline::after(Duration::from_secs(5))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn remove(&self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        self.framework.delete(&self.barrier_path).quietly().deadline(deadline).await?;
        debug!(path = %self.barrier_path, "barrier removed");
        Ok(())
    }

    /// Whether the barrier is set now (its node exists).
    ///
    /// # Errors
    /// A framework error from the read.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes_barrier::DistributedBarrier) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// use std::time::Duration;
    /// if barrier.is_set(zk_recipes_framework::Deadline::after(Duration::from_secs(5))).await? {
    ///     println!("{} holds its waiters", barrier.path());
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn is_set(&self, deadline: impl Into<Deadline>) -> Result<bool> {
        let deadline = deadline.into();
        Ok(self.framework.exists(&self.barrier_path, deadline).await?.is_some())
    }

    /// Waits until the barrier is not set (its node does not exist); returns at once if it is
    /// not (Curator's `waitOnBarrier`).
    ///
    /// Only the server's answer lets it through: every watch event, reconnection or new session
    /// is followed by a read of the node, never taken as the removal itself.
    ///
    /// # Errors
    /// A framework timeout at `deadline` ([`BarrierError::is_timeout`]; Curator returns `false`),
    /// `Closed` if the framework closes.
    ///
    /// # Cancel safety
    /// Cancel safe: it creates nothing, and its watch goes with it.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes_barrier::DistributedBarrier) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// use std::time::Duration;
    /// match barrier.wait(zk_recipes_framework::Deadline::after(Duration::from_secs(60))).await {
    ///     Ok(()) => println!("the barrier is down"),
    ///     Err(err) if err.is_timeout() => println!("still up after a minute"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn wait(&self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        let session = self.framework.current().session_id;
        let span = info_span!("barrier_wait", path = %self.barrier_path, ?session);
        deadline.run(self.wait_until_removed(deadline)).instrument(span).await.map_err(BarrierError::from)
    }

    async fn wait_until_removed(&self, deadline: Deadline) -> zk_recipes_framework::Result<()> {
        // The watch is set before the first read, so a removal after the read is an event.
        let mut watch = self.framework.watch(&self.barrier_path, false, deadline).await?;
        loop {
            if self.framework.exists(&self.barrier_path, deadline).await?.is_none() {
                debug!("barrier not set: through");
                return Ok(());
            }
            match watch.next().await {
                None => return Err(zk_recipes_framework::Error::Closed),
                Some(WatchEvent::Reset) => debug!("watch reset: reading the barrier again"),
                Some(event) => debug!(?event, "barrier changed: reading it again"),
            }
        }
    }
}

impl std::fmt::Debug for DistributedBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedBarrier").field("barrier_path", &self.barrier_path).finish_non_exhaustive()
    }
}
