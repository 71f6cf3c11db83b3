//! # zk-recipes-mutex
//!
//! A distributed mutex on ZooKeeper: Curator's `InterProcessMutex`, wire-compatible with it. A Rust
//! process and a Java process locking the same path exclude each other.
//!
//! Nodes: `<path>/_c_<uuid>-lock-<sequence>`, EPHEMERAL_SEQUENTIAL, holding this host's address by
//! default (as Curator writes it). Each waiter watches only its predecessor, so a release wakes
//! exactly one waiter.
//!
//! Also here: [`SingleNodeLock`], one EPHEMERAL node at the lock path, taken by `try_lock` or
//! reported as held — no queue, for "run once" work.
//!
//! ## Reentrancy
//! Curator's mutex is reentrant per thread. Async tasks hop threads, so here reentrancy is
//! explicit: [`MutexGuard::reenter`] gives another guard for the same hold, with no ZooKeeper
//! traffic, and the node is deleted when the last of them is released. [`Mutex::lock`] always
//! queues, so tasks sharing one `Mutex` (say in an `Arc`) exclude each other, like tokio's `Mutex`
//! — and a second `lock` in the task that holds the lock waits for ever (a WARN says so; see
//! [`Mutex::lock`]).
//!
//! ## Holds belong to their session
//! Whatever builds on a hold runs on the session that owns the lock node, or fails with
//! [`LockError::NodeLost`]: releasing a hold whose session was lost reports the loss and sends
//! nothing on the newer session.
//!
//! ## Connection loss and session expiry
//! A waiter waits out a suspended connection; if the session is lost its node is gone and `lock`
//! fails with [`LockError::NodeLost`]. A holder should watch [`Hold::lost`]: it resolves when the
//! connection enters an error state (per the framework's error policy) or the node is deleted, and
//! from then on another process may hold the lock. Use [`Hold::fencing_token`] to make a
//! downstream store reject writes from a stale holder.
//!
//! ## Guards
//! [`MutexGuard`] and [`SingleNodeGuard`] share what every lock's guard does with its hold (node
//! path, fencing token, `lost()`, guarded writes) through the [`Hold`] trait, re-exported here:
//! `use zk_recipes_mutex::Hold;`. `release` and `reenter` are the guards' own.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_framework::Framework;
//! use zk_recipes_mutex::{Hold, Mutex};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let mutex = Mutex::new(&framework, "/app/locks/orders")?;
//! let guard = mutex.lock_timeout(Duration::from_secs(5)).await?;
//! println!("holding with fencing token {}", guard.fencing_token());
//! guard.release().await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::{local_address, Deadline, Framework};
use zk_recipes_lock_internals::futures_compat::BoxFuture;
use zk_recipes_lock_internals::{
    DistributedGuard, DistributedLock, HeldLease, KazooDriver, LockDriver, LockInternals, QueuedNode,
    SharedHold, StandardDriver, Wait, ZooKeeperRecipeDriver, RELEASE_TIMEOUT, ZOOKEEPER_RECIPE_DATA,
};
pub use zk_recipes_lock_internals::{Hold, LockError, LockLayout, LostReason, Result, TransactionOp};

mod single_node;
pub use single_node::{Holder, SingleNodeGuard, SingleNodeLock, TryLock};

/// The lock name Curator's mutex gives its nodes.
pub const LOCK_NAME: &str = "lock-";

/// Curator's driver, one for every mutex of this layout: the acquires of one process on one lock
/// share their listings only when their drivers are the same (see `LockInternals`).
fn curator_driver() -> Arc<dyn LockDriver> {
    static DRIVER: std::sync::LazyLock<Arc<dyn LockDriver>> =
        std::sync::LazyLock::new(|| Arc::new(StandardDriver::new(LOCK_NAME)));
    DRIVER.clone()
}

/// A distributed mutex on one ZooKeeper path (Curator's `InterProcessMutex`).
///
/// Cheap to clone; clones share nothing but the path: each `lock` call queues on its own.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_mutex::Result<()> {
/// let mutex = zk_recipes_mutex::Mutex::new(&framework, "/app/lock")?;
/// if let Some(guard) = mutex.try_lock().await? {
///     // ... the lock is ours ...
///     guard.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Mutex {
    internals: LockInternals,
    data: Arc<[u8]>,
}

impl Mutex {
    /// A mutex on `path`, with node data this host's address.
    ///
    /// # Errors
    /// An invalid path, before anything is sent.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        let internals = LockInternals::new(framework, path, curator_driver(), 1)?;
        Ok(Self { internals, data: local_address().into() })
    }

    /// A mutex on `path` that queues with the clients of another lock layout (see
    /// [`LockLayout`]): ZooKeeper's own lock recipe (`x-<session id>-<seq>`, ordered by sequence
    /// only) or kazoo's `Lock` (`<uuid hex>__lock__<seq>`). Node data is the layout's default
    /// (this host's address for Curator's, the recipe's bytes `0x12 0x34`, an empty kazoo
    /// identifier); set it with [`node_data`](Self::node_data). Timeouts, `lost()`,
    /// fencing, `enqueue` and cancellation safety are the same on every layout.
    ///
    /// ZooKeeper's recipe names its node after the session, not the call. Several contenders of
    /// one session (one [`Framework`]) on one path are safe all the same: the framework sends
    /// their creates one at a time (one round trip apart), and a create whose reply was lost takes
    /// only the node its own create made ([`ProtectedCreate::marker`](zk_recipes_framework::ProtectedCreate::marker)).
    ///
    /// # Errors
    /// An invalid path, before anything is sent.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_mutex::Result<()> {
    /// use zk_recipes_mutex::{LockLayout, Mutex};
    ///
    /// let mutex = Mutex::with_layout(&framework, "/app/kazoo-lock", LockLayout::Kazoo)?
    ///     .node_data("worker-7"); // what kazoo's contenders() shows
    /// let guard = mutex.lock().await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn with_layout(framework: &Framework, path: &str, layout: LockLayout) -> Result<Self> {
        let (driver, data): (Arc<dyn LockDriver>, Arc<[u8]>) = match layout {
            LockLayout::ZooKeeperRecipe => (Arc::new(ZooKeeperRecipeDriver), ZOOKEEPER_RECIPE_DATA.into()),
            LockLayout::Kazoo => (Arc::new(KazooDriver::lock()), Arc::from(&[][..])),
            _ => (curator_driver(), local_address().into()),
        };
        let internals = LockInternals::new(framework, path, driver, 1)?;
        Ok(Self { internals, data })
    }

    /// Runs `hook` between the listing that chose the node to wait behind and the watch on it.
    #[doc(hidden)]
    pub fn before_watch_hook(
        mut self,
        hook: Arc<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>,
    ) -> Self {
        self.internals = self.internals.before_watch_hook(hook);
        self
    }

    /// Makes this mutex's nodes revocable (Curator's `makeRevocable`): created with empty data;
    /// anyone may ask the holder to let go with [`zk_recipes_lock_internals::revoke`], and the
    /// holder hears of it through [`Hold::revocation_requested`]. A waiter asked to let go
    /// gives up its place with [`LockError::Revoked`].
    pub fn make_revocable(mut self) -> Self {
        self.internals = self.internals.revocable();
        self
    }

    /// Uses `data` as the lock node's data instead of this host's address.
    pub fn node_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into().into();
        self
    }

    /// The lock's path.
    pub fn path(&self) -> &str {
        self.internals.dir()
    }

    /// Waits for the lock as long as it takes.
    ///
    /// Every call queues, even from the task that holds the lock: a second `lock` there waits for
    /// ever behind its own node. Take another guard of the hold with [`MutexGuard::reenter`]
    /// instead. When an acquire finds that the node it must wait behind belongs to this same
    /// framework's session, it logs a WARN naming the lock's path and pointing to `reenter` (first
    /// time at once, then at most once a minute per `Mutex` and its clones). It is not an error:
    /// other tasks of the process may legitimately wait their turn behind each other.
    ///
    /// # Errors
    /// [`LockError::NodeLost`] if the session is lost while waiting; framework errors (closed,
    /// connection errors the retry policy gave up on).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lock` loses its place in line; its node, if it was created, is
    /// deleted by the framework's cleanup worker.
    pub async fn lock(&self) -> Result<MutexGuard> {
        self.lock_until(Deadline::never()).await
    }

    /// Waits for the lock at most `timeout` (which also bounds waiting for a connection).
    ///
    /// # Errors
    /// A timeout error ([`LockError::is_timeout`]) after `timeout`; our node is deleted. Otherwise
    /// as [`lock`](Self::lock).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lock_timeout` loses its place in line; its node, if it was
    /// created, is deleted by the framework's cleanup worker.
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<MutexGuard> {
        self.lock_until(Deadline::after(timeout)).await
    }

    /// Waits for the lock until `deadline`.
    ///
    /// # Errors
    /// As [`lock_timeout`](Self::lock_timeout).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lock_until` loses its place in line; its node, if it was created,
    /// is deleted by the framework's cleanup worker.
    pub async fn lock_until(&self, deadline: impl Into<Deadline>) -> Result<MutexGuard> {
        let deadline = deadline.into();
        let held = self.internals.acquire(&self.data, Wait::Until(deadline)).await?;
        let held = held.ok_or_else(|| LockError::from(deadline.timeout_error()))?;
        Ok(MutexGuard { hold: SharedHold::new(held) })
    }

    /// Joins the queue now and returns our place in it, without waiting: the async form of
    /// ZooKeeper's recipe `lock()` (which returns whether we own the lock and tells a listener
    /// later). [`PendingLock::is_owner`] and [`PendingLock::position`] say where we stand; await
    /// the pending lock (or [`PendingLock::acquired`], with a deadline) for the guard; drop it to
    /// give the place up (its node is deleted).
    ///
    /// # Errors
    /// As [`lock_timeout`](Self::lock_timeout), within the connection timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `enqueue` gets no place in line; its node, if it was created, is
    /// deleted by the framework's cleanup worker.
    ///
    /// ```no_run
    /// # async fn demo(mutex: zk_recipes_mutex::Mutex) -> zk_recipes_mutex::Result<()> {
    /// let pending = mutex.enqueue().await?;
    /// if !pending.is_owner() {
    ///     println!("{} contenders before us", pending.position());
    /// }
    /// let guard = pending.await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    pub async fn enqueue(&self) -> Result<PendingLock> {
        let queued = self.internals.enqueue(&self.data, Deadline::after(RELEASE_TIMEOUT)).await?;
        Ok(PendingLock { internals: self.internals.clone(), queued })
    }

    /// Takes the lock if nobody holds it or waits for it now; `Ok(None)` otherwise. Costs a create,
    /// a listing and, when taken, a delete.
    ///
    /// # Errors
    /// As [`lock`](Self::lock), within the connection timeout.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `try_lock` takes nothing; its node, if it was created, is deleted
    /// by the framework's cleanup worker.
    pub async fn try_lock(&self) -> Result<Option<MutexGuard>> {
        let held =
            self.internals.acquire(&self.data, Wait::TryOnce(Deadline::after(RELEASE_TIMEOUT))).await?;
        Ok(held.map(|held| MutexGuard { hold: SharedHold::new(held) }))
    }

    /// The contenders in queue order (the holder first), with their node data.
    ///
    /// # Errors
    /// As [`zk_recipes_framework::Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn participants(&self) -> Result<Vec<(String, Vec<u8>)>> {
        self.internals.participants(Deadline::after(RELEASE_TIMEOUT)).await
    }
}

/// Our place in a mutex's queue, from [`Mutex::enqueue`]: our node exists; await this (or call
/// [`acquired`](Self::acquired)) for the guard. Dropping it gives the place up and deletes the node.
///
/// ```no_run
/// # async fn demo(mutex: zk_recipes_mutex::Mutex) -> zk_recipes_mutex::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
///
/// let pending = mutex.enqueue().await?;
/// println!("queued as {} at position {}", pending.node_path(), pending.position());
/// match pending.acquired(Deadline::after(Duration::from_secs(5))).await {
///     Ok(guard) => guard.release().await?,
///     Err(err) if err.is_timeout() => println!("not our turn within 5 s; our node is gone"),
///     Err(err) => return Err(err),
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping a pending lock gives up its place in the queue"]
#[derive(Debug)]
pub struct PendingLock {
    internals: LockInternals,
    queued: QueuedNode,
}

impl PendingLock {
    /// Whether we owned the lock when we joined the queue (then awaiting returns at once).
    pub fn is_owner(&self) -> bool {
        self.queued.is_owner()
    }

    /// How many contenders were before us when we joined the queue (0: we own the lock).
    pub fn position(&self) -> usize {
        self.queued.position()
    }

    /// Our lock node's full path.
    pub fn node_path(&self) -> &str {
        self.queued.node_path()
    }

    /// Waits until our node holds the lock, at most until `deadline`.
    ///
    /// # Errors
    /// A timeout error ([`LockError::is_timeout`]) at the deadline: our node is deleted.
    /// [`LockError::NodeLost`] if our node's session is lost meanwhile (nothing is retried on a
    /// newer session); framework errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled wait loses its place in line: the pending lock it took is dropped,
    /// and the framework's cleanup worker deletes its node.
    pub async fn acquired(self, deadline: impl Into<Deadline>) -> Result<MutexGuard> {
        let deadline = deadline.into();
        let held = self.internals.wait_queued(self.queued, Wait::Until(deadline)).await?;
        let held = held.ok_or_else(|| LockError::from(deadline.timeout_error()))?;
        Ok(MutexGuard { hold: SharedHold::new(held) })
    }
}

impl std::future::IntoFuture for PendingLock {
    type Output = Result<MutexGuard>;
    type IntoFuture = BoxFuture<'static, Result<MutexGuard>>;

    /// Waits as long as it takes: [`acquired`](PendingLock::acquired) without a deadline.
    fn into_future(self) -> Self::IntoFuture {
        Box::pin(self.acquired(Deadline::never()))
    }
}

/// Proof of holding the mutex. Released by [`release`](Self::release), or in the background when
/// the last guard of this hold (see [`reenter`](Self::reenter)) is dropped. What a holder does
/// with the hold (node path, fencing token, `lost()`, guarded writes) is [`Hold`]'s.
///
/// Not `Clone`: a second guard for the same hold is made explicitly with `reenter`.
///
/// ```no_run
/// # async fn demo(mutex: zk_recipes_mutex::Mutex) -> zk_recipes_mutex::Result<()> {
/// use zk_recipes_mutex::Hold;
///
/// let guard = mutex.lock().await?;
/// println!("{} holds, fencing token {}", guard.node_path(), guard.fencing_token());
/// let inner = guard.reenter(); // the same hold, for a callee that "locks" again
/// assert_eq!(guard.hold_count(), 2);
/// inner.release().await?; // not the last guard: the node stays
/// tokio::select! {
///     reason = guard.lost() => println!("lost ({reason:?}): another process may hold it now"),
///     () = tokio::time::sleep(std::time::Duration::from_secs(1)) => println!("work done"),
/// }
/// guard.release().await?; // the last guard: deletes the node
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is immediately released"]
#[derive(Debug)]
pub struct MutexGuard {
    hold: SharedHold,
}

impl MutexGuard {
    /// Another guard for the same hold, with no ZooKeeper traffic: the async counterpart of
    /// Curator's per-thread reentrancy. The node is deleted when the last guard is released.
    pub fn reenter(&self) -> MutexGuard {
        MutexGuard { hold: self.hold.reenter() }
    }

    /// How many guards share this hold.
    pub fn hold_count(&self) -> usize {
        self.hold.hold_count()
    }

    /// Releases this guard; the last guard of the hold deletes the lock node, on the session that
    /// owns it, and reports the outcome (as [`SharedHold::release`]).
    ///
    /// # Errors
    /// From the last guard only: as [`SharedHold::release`].
    ///
    /// # Cancel safety
    /// Cancel safe, as [`SharedHold::release`]: the node is not left behind.
    pub async fn release(self) -> Result<()> {
        self.hold.release().await
    }
}

impl Hold for MutexGuard {
    fn held_lease(&self) -> &HeldLease {
        &self.hold
    }
}

impl DistributedLock for Mutex {
    fn acquire_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn DistributedGuard>>> {
        Box::pin(async move {
            let guard = self.lock_until(deadline).await?;
            Ok(Box::new(guard) as Box<dyn DistributedGuard>)
        })
    }
}

impl DistributedGuard for MutexGuard {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        Box::pin(MutexGuard::release(*self))
    }

    fn node_path(&self) -> &str {
        Hold::node_path(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn public_types_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<Mutex>();
        assert_send_sync::<MutexGuard>();
        assert_send_sync::<PendingLock>();
        assert_send_sync::<SingleNodeLock>();
        assert_send_sync::<SingleNodeGuard>();
    }
}
