//! # zk-recipes-rwlock
//!
//! A distributed read-write lock on ZooKeeper: Curator's `InterProcessReadWriteLock`, with the
//! same nodes, so Rust and Java readers and writers share one lock.
//!
//! One directory holds both kinds of node: `_c_<uuid>-__WRIT__<seq>` and `_c_<uuid>-__READ__<seq>`
//! (EPHEMERAL_SEQUENTIAL), sorted together by sequence. A writer holds when its node is first; a
//! reader holds when no writer sorts before it. It is fair: a reader that comes after a waiting
//! writer waits behind it. Both halves run on the shared lock driver with their own rule.
//!
//! ## Downgrade
//! [`RwLockWriteGuard::downgrade`] turns a write hold into a read hold with no writer slipping in
//! between (model: tokio's `RwLockWriteGuard::downgrade`): the read node is created as Curator
//! 5.5+ does — EPHEMERAL, not sequential, reusing the writer's sequence, so it sorts where the
//! writer stood — and only then is the write node deleted. Curator 5.4's form (a new sequential read
//! node) is read correctly too: it is just a reader. Upgrading a read hold to a write hold is
//! refused ([`RwLockReadGuard::upgrade`]): in Curator it deadlocks.
//!
//! ## Reentrancy
//! As the mutex: explicit, through the guard ([`RwLockReadGuard::reenter`],
//! [`RwLockWriteGuard::reenter`]); every `read`/`write` call queues.
//!
//! ## Holds belong to their session
//! A downgrade and a release build on a hold: they run on the session that owns its node, or fail
//! with [`LockError::NodeLost`]. They are never retried on a newer session.
//!
//! ## Connection loss and session expiry
//! As the mutex: a waiter waits out a suspended connection and fails with
//! [`LockError::NodeLost`] if the session is lost; a holder watches [`Hold::lost`].
//!
//! ## Guards
//! [`RwLockReadGuard`] and [`RwLockWriteGuard`] share what every lock's guard does with its hold
//! (node path, fencing token, `lost()`, guarded writes) through the [`Hold`] trait, re-exported
//! here: `use zk_recipes_rwlock::Hold;`. `release`, `reenter`, `downgrade` and `upgrade` are the
//! guards' own.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_framework::Framework;
//! use zk_recipes_rwlock::RwLock;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let lock = RwLock::new(&framework, "/app/config-lock")?;
//! let writer = lock.write_timeout(Duration::from_secs(5)).await?;
//! // ... write the configuration ...
//! let reader = writer.downgrade().await?; // readers may come in now, writers may not
//! // ... read it back ...
//! reader.release().await?;
//! # Ok(()) }
//! ```

mod driver;

use std::sync::Arc;
use std::time::Duration;

use tracing::debug;
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{local_address, path, Deadline, Framework};
use zk_recipes_lock_internals::futures_compat::BoxFuture;
use zk_recipes_lock_internals::{
    DistributedGuard, DistributedLock, HeldLease, KazooDriver, LockInternals, SharedHold, Wait,
    RELEASE_TIMEOUT,
};
pub use zk_recipes_lock_internals::{Hold, LockError, LostReason, Result, TransactionOp};

pub use driver::{ReadDriver, WriteDriver, READ_LOCK_NAME, WRITE_LOCK_NAME};

/// A distributed read-write lock on one path (Curator's `InterProcessReadWriteLock`).
///
/// Cheap to clone; each `read`/`write` call queues on its own, so tasks sharing one `RwLock`
/// behave like tasks sharing a tokio `RwLock`.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_rwlock::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_rwlock::RwLock;
///
/// let lock = RwLock::new(&framework, "/app/config-lock")?;
/// // Readers share the lock ...
/// let first = lock.read().await?;
/// let second = lock.read_timeout(Duration::from_secs(5)).await?;
/// // ... and keep writers out until both are released.
/// assert!(lock.try_write().await?.is_none());
/// first.release().await?;
/// second.release().await?;
/// let writer = lock.write_timeout(Duration::from_secs(5)).await?;
/// writer.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct RwLock {
    write: WriteLock,
}

/// The read half of an [`RwLock`] (Curator's `readLock()`).
///
/// ```no_run
/// # async fn demo(lock: zk_recipes_rwlock::RwLock) -> zk_recipes_rwlock::Result<()> {
/// use zk_recipes_framework::Deadline;
///
/// let reading = lock.read_lock();
/// let guard = reading.read_until(Deadline::after(std::time::Duration::from_secs(5))).await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct ReadLock {
    internals: LockInternals,
    data: Arc<[u8]>,
}

/// The write half of an [`RwLock`] (Curator's `writeLock()`).
///
/// ```no_run
/// # async fn demo(orders: zk_recipes_rwlock::RwLock, stock: zk_recipes_rwlock::RwLock)
/// #     -> zk_recipes_rwlock::Result<()> {
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::MultiLock;
///
/// // Write both, or neither: the halves take part in a `MultiLock`.
/// let both = MultiLock::new(vec![Box::new(orders.write_lock()), Box::new(stock.write_lock())]);
/// let guard = both.acquire_until(Deadline::after(std::time::Duration::from_secs(5))).await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct WriteLock {
    internals: LockInternals,
    data: Arc<[u8]>,
    /// The read half of the same lock, for downgrades.
    read: ReadLock,
}

impl RwLock {
    /// A read-write lock on `path`; nodes hold this host's address.
    ///
    /// # Errors
    /// An invalid path, before anything is sent.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        let data: Arc<[u8]> = local_address().into();
        let read = LockInternals::new(framework, path, Arc::new(ReadDriver), u32::MAX)?;
        let write = LockInternals::new(framework, path, Arc::new(WriteDriver::default()), 1)?;
        let read = ReadLock { internals: read, data: data.clone() };
        Ok(Self { write: WriteLock { internals: write, data, read } })
    }

    /// A read-write lock on `path` that queues with kazoo's `ReadLock` and `WriteLock` (kazoo
    /// 2.11, `kazoo/recipe/lock.py`): nodes `<path>/<uuid hex>__rlock__<seq>` and
    /// `<path>/<uuid hex>__lock__<seq>`, with empty data (kazoo's identifier; set it with
    /// [`node_data`](Self::node_data)). A reader waits only for earlier writers; a writer
    /// for everyone earlier. A downgrade creates the reader node `__rlock__<the writer's
    /// sequence>`, which kazoo's contenders also read as a reader.
    ///
    /// # Errors
    /// An invalid path, before anything is sent.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_rwlock::Result<()> {
    /// let lock = zk_recipes_rwlock::RwLock::kazoo(&framework, "/app/rw")?.node_data("rust-1");
    /// let reading = lock.read().await?;
    /// reading.release().await?;
    /// # Ok(()) }
    /// ```
    pub fn kazoo(framework: &Framework, path: &str) -> Result<Self> {
        let data: Arc<[u8]> = Arc::from(&[][..]);
        let read = LockInternals::new(framework, path, Arc::new(KazooDriver::read_lock()), u32::MAX)?;
        let write = LockInternals::new(framework, path, Arc::new(KazooDriver::write_lock()), 1)?;
        let read = ReadLock { internals: read, data: data.clone() };
        Ok(Self { write: WriteLock { internals: write, data, read } })
    }

    /// Uses `data` as the nodes' data instead of this host's address.
    pub fn node_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        let data: Arc<[u8]> = data.into().into();
        self.write.read.data = data.clone();
        self.write.data = data;
        self
    }

    /// Makes both halves revocable (empty node data; see
    /// [`zk_recipes_lock_internals::revoke`]).
    pub fn make_revocable(mut self) -> Self {
        self.write.read.internals = self.write.read.internals.revocable();
        self.write.internals = self.write.internals.revocable();
        self
    }

    /// The lock's path.
    pub fn path(&self) -> &str {
        self.write.internals.dir()
    }

    /// The read half, as its own lock (for [`zk_recipes_lock_internals::MultiLock`]).
    pub fn read_lock(&self) -> ReadLock {
        self.write.read.clone()
    }

    /// The write half, as its own lock.
    pub fn write_lock(&self) -> WriteLock {
        self.write.clone()
    }

    /// Waits for a read hold as long as it takes.
    ///
    /// # Errors
    /// [`LockError::NodeLost`] if the session is lost meanwhile; framework errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `read` loses its place in line; its node, if it was created, is
    /// deleted by the framework's cleanup worker.
    pub async fn read(&self) -> Result<RwLockReadGuard> {
        self.write.read.read_until(Deadline::never()).await
    }

    /// Waits for a read hold at most `timeout`.
    ///
    /// # Errors
    /// A timeout error ([`LockError::is_timeout`]); otherwise as [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `read_timeout` loses its place in line; its node, if it was
    /// created, is deleted by the framework's cleanup worker.
    pub async fn read_timeout(&self, timeout: Duration) -> Result<RwLockReadGuard> {
        self.write.read.read_until(Deadline::after(timeout)).await
    }

    /// Waits for a read hold until `deadline` (a [`Deadline`] or a `Duration`).
    ///
    /// ```no_run
    /// # async fn demo(lock: zk_recipes_rwlock::RwLock) -> zk_recipes_rwlock::Result<()> {
    /// use std::time::Duration;
    /// let guard = lock.read_until(Duration::from_secs(5)).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`read_timeout`](Self::read_timeout).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `read_until` loses its place in line; its node, if it was created,
    /// is deleted by the framework's cleanup worker.
    pub async fn read_until(&self, deadline: impl Into<Deadline>) -> Result<RwLockReadGuard> {
        self.write.read.read_until(deadline).await
    }

    /// Takes a read hold if no writer holds or waits now.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `try_read` takes nothing; its node, if it was created, is deleted
    /// by the framework's cleanup worker.
    pub async fn try_read(&self) -> Result<Option<RwLockReadGuard>> {
        let read = &self.write.read;
        let held =
            read.internals.acquire(&read.data, Wait::TryOnce(Deadline::after(RELEASE_TIMEOUT))).await?;
        Ok(held.map(|held| RwLockReadGuard { hold: SharedHold::new(held) }))
    }

    /// Waits for the write hold as long as it takes.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `write` loses its place in line; its node, if it was created, is
    /// deleted by the framework's cleanup worker.
    pub async fn write(&self) -> Result<RwLockWriteGuard> {
        self.write.write_until(Deadline::never()).await
    }

    /// Waits for the write hold at most `timeout`.
    ///
    /// # Errors
    /// A timeout error; otherwise as [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `write_timeout` loses its place in line; its node, if it was
    /// created, is deleted by the framework's cleanup worker.
    pub async fn write_timeout(&self, timeout: Duration) -> Result<RwLockWriteGuard> {
        self.write.write_until(Deadline::after(timeout)).await
    }

    /// Waits for the write hold until `deadline` (a [`Deadline`] or a `Duration`).
    ///
    /// # Errors
    /// As [`write_timeout`](Self::write_timeout).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `write_until` loses its place in line; its node, if it was created,
    /// is deleted by the framework's cleanup worker.
    pub async fn write_until(&self, deadline: impl Into<Deadline>) -> Result<RwLockWriteGuard> {
        self.write.write_until(deadline).await
    }

    /// Takes the write hold if nobody holds or waits now.
    ///
    /// # Errors
    /// As [`read`](Self::read).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `try_write` takes nothing; its node, if it was created, is deleted
    /// by the framework's cleanup worker.
    pub async fn try_write(&self) -> Result<Option<RwLockWriteGuard>> {
        let held = self
            .write
            .internals
            .acquire(&self.write.data, Wait::TryOnce(Deadline::after(RELEASE_TIMEOUT)))
            .await?;
        Ok(held.map(|held| RwLockWriteGuard { hold: SharedHold::new(held), read: self.write.read.clone() }))
    }

    /// Every contender, readers and writers, in queue order, with node data.
    ///
    /// # Errors
    /// As [`zk_recipes_framework::Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn participants(&self) -> Result<Vec<(String, Vec<u8>)>> {
        self.write.internals.participants(Deadline::after(RELEASE_TIMEOUT)).await
    }
}

impl ReadLock {
    /// Waits for a read hold until `deadline`.
    ///
    /// # Errors
    /// As [`RwLock::read_timeout`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `read_until` loses its place in line; its node, if it was created,
    /// is deleted by the framework's cleanup worker.
    pub async fn read_until(&self, deadline: impl Into<Deadline>) -> Result<RwLockReadGuard> {
        let deadline = deadline.into();
        let held = self.internals.acquire(&self.data, Wait::Until(deadline)).await?;
        let held = held.ok_or_else(|| LockError::from(deadline.timeout_error()))?;
        Ok(RwLockReadGuard { hold: SharedHold::new(held) })
    }
}

impl WriteLock {
    /// Waits for the write hold until `deadline`.
    ///
    /// # Errors
    /// As [`RwLock::write_timeout`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `write_until` loses its place in line; its node, if it was created,
    /// is deleted by the framework's cleanup worker.
    pub async fn write_until(&self, deadline: impl Into<Deadline>) -> Result<RwLockWriteGuard> {
        let deadline = deadline.into();
        let held = self.internals.acquire(&self.data, Wait::Until(deadline)).await?;
        let held = held.ok_or_else(|| LockError::from(deadline.timeout_error()))?;
        Ok(RwLockWriteGuard { hold: SharedHold::new(held), read: self.read.clone() })
    }
}

/// Proof of a read hold. Released by [`release`](Self::release), or in the background when the
/// last guard of the hold is dropped. What a holder does with the hold (node path, fencing token,
/// `lost()`, guarded writes) is [`Hold`]'s; after a downgrade the fencing token is the writer's.
///
/// ```no_run
/// # async fn demo(lock: zk_recipes_rwlock::RwLock) -> zk_recipes_rwlock::Result<()> {
/// use zk_recipes_rwlock::Hold;
///
/// let guard = lock.read().await?;
/// println!("reading under {} (fencing token {})", guard.node_path(), guard.fencing_token());
/// let nested = guard.reenter(); // the same read hold, no ZooKeeper traffic
/// nested.release().await?;
/// tokio::select! {
///     reason = guard.lost() => println!("lost ({reason:?}): a writer may hold it now"),
///     () = tokio::time::sleep(std::time::Duration::from_secs(1)) => println!("read done"),
/// }
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is immediately released"]
#[derive(Debug)]
pub struct RwLockReadGuard {
    hold: SharedHold,
}

impl RwLockReadGuard {
    /// Another guard for the same read hold, with no ZooKeeper traffic.
    pub fn reenter(&self) -> RwLockReadGuard {
        RwLockReadGuard { hold: self.hold.reenter() }
    }

    /// Refused: upgrading a read hold to a write hold would deadlock once two readers try it (each
    /// writer waits for the other's read node; Curator's upgrade deadlocks even alone). Release the
    /// read hold and take the write lock instead. The guard comes back inside the error.
    ///
    /// # Errors
    /// Always [`UpgradeRefused`].
    pub fn upgrade(self) -> std::result::Result<RwLockWriteGuard, UpgradeRefused> {
        Err(UpgradeRefused { guard: self })
    }

    /// Releases this guard; the last guard of the hold deletes the read node, on the session that
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

impl Hold for RwLockReadGuard {
    fn held_lease(&self) -> &HeldLease {
        &self.hold
    }
}

/// Upgrading a read hold is refused; the read guard is handed back.
///
/// ```no_run
/// # async fn demo(lock: zk_recipes_rwlock::RwLock) -> zk_recipes_rwlock::Result<()> {
/// use zk_recipes_rwlock::UpgradeRefused;
///
/// let reader = lock.read().await?;
/// let Err(UpgradeRefused { guard }) = reader.upgrade() else { unreachable!("always refused") };
/// // Release the read hold, then queue for the write hold.
/// guard.release().await?;
/// let writer = lock.write().await?;
/// writer.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, thiserror::Error)]
#[error("upgrading a read lock to a write lock is refused: it would deadlock")]
pub struct UpgradeRefused {
    /// The read guard, still held.
    pub guard: RwLockReadGuard,
}

/// Proof of the write hold. Released by [`release`](Self::release), or in the background when the
/// last guard of the hold is dropped. What a holder does with the hold (node path, fencing token,
/// `lost()`, guarded writes) is [`Hold`]'s.
///
/// ```no_run
/// # async fn demo(lock: zk_recipes_rwlock::RwLock) -> zk_recipes_rwlock::Result<()> {
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_rwlock::{TransactionOp, Hold};
///
/// let writer = lock.write().await?;
/// let update = [TransactionOp::SetData { path: "/app/config".into(), data: b"v2".to_vec(), version: None }];
/// writer.write_guarded(&update, Deadline::after(std::time::Duration::from_secs(5))).await?;
/// let reader = writer.downgrade().await?; // same fencing token, no writer in between
/// reader.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is immediately released"]
#[derive(Debug)]
pub struct RwLockWriteGuard {
    hold: SharedHold,
    read: ReadLock,
}

impl RwLockWriteGuard {
    /// Another guard for the same write hold, with no ZooKeeper traffic.
    pub fn reenter(&self) -> RwLockWriteGuard {
        RwLockWriteGuard { hold: self.hold.reenter(), read: self.read.clone() }
    }

    /// Turns this write hold into a read hold with no writer slipping in between: creates the read
    /// node where the writer stands (EPHEMERAL, the writer's sequence, as Curator 5.5+), then
    /// releases the write hold (if this is its last guard). The read guard keeps the writer's
    /// fencing token.
    ///
    /// The read node builds on the write hold, so it is created on the write node's own session,
    /// in one transaction with a check that the write node still exists: a writer whose session
    /// was lost (and whose place another writer may have taken) gets [`LockError::NodeLost`], and
    /// no read node is created anywhere.
    ///
    /// # Errors
    /// [`LockError::NodeLost`] if the write node or its session is gone; otherwise creating the read
    /// node failed. Either way no read node exists and the write hold is released all the same (by
    /// dropping it).
    ///
    /// # Cancel safety
    /// Not cancel safe: a cancelled downgrade loses the hold altogether. The write hold it took is
    /// released (if this was its last guard) and a read node it created is deleted, both by the
    /// framework's cleanup worker: the caller holds neither.
    pub async fn downgrade(self) -> Result<RwLockReadGuard> {
        let deadline = Deadline::after(RELEASE_TIMEOUT);
        let write_name = path::name(Hold::node_path(&self));
        // Readers and writers of one layout sort alike: by the sequence.
        let read_driver = self.read.internals.driver();
        let sequence = read_driver.sort_key(write_name);
        let read_name = format!("{}{sequence}", read_driver.lock_name());
        let data: &[u8] = if self.read.internals.is_revocable() { &[] } else { &self.read.data };
        let node = self
            .hold
            .create_while_held(self.read.internals.dir(), &read_name, data, CreateMode::Ephemeral, deadline)
            .await?;
        let read =
            RwLockReadGuard { hold: SharedHold::new(HeldLease::continuing(node, self.fencing_token())) };
        if let Some(write) = self.hold.into_last() {
            if let Err(err) = write.release(deadline).await {
                debug!(%err, "releasing the write node after a downgrade failed; the cleanup worker deletes it");
            }
        }
        Ok(read)
    }

    /// Releases this guard; the last guard of the hold deletes the write node, on the session
    /// that owns it, and reports the outcome (as [`SharedHold::release`]).
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

impl Hold for RwLockWriteGuard {
    fn held_lease(&self) -> &HeldLease {
        &self.hold
    }
}

impl DistributedLock for ReadLock {
    fn acquire_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn DistributedGuard>>> {
        Box::pin(async move { Ok(Box::new(self.read_until(deadline).await?) as Box<dyn DistributedGuard>) })
    }
}

impl DistributedLock for WriteLock {
    fn acquire_until(&self, deadline: Deadline) -> BoxFuture<'_, Result<Box<dyn DistributedGuard>>> {
        Box::pin(async move { Ok(Box::new(self.write_until(deadline).await?) as Box<dyn DistributedGuard>) })
    }
}

impl DistributedGuard for RwLockReadGuard {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        Box::pin(RwLockReadGuard::release(*self))
    }

    fn node_path(&self) -> &str {
        Hold::node_path(self)
    }
}

impl DistributedGuard for RwLockWriteGuard {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<()>> {
        Box::pin(RwLockWriteGuard::release(*self))
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
        assert_send_sync::<RwLock>();
        assert_send_sync::<RwLockReadGuard>();
        assert_send_sync::<RwLockWriteGuard>();
        assert_send_sync::<ReadLock>();
        assert_send_sync::<WriteLock>();
    }
}
