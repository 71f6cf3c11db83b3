//! # zk-recipes-semaphore
//!
//! A distributed counting semaphore on ZooKeeper — Curator's `InterProcessSemaphoreV2`, with the
//! same nodes — and a non-reentrant mutex on top of it (Curator's `InterProcessSemaphoreMutex`).
//!
//! Layout under the semaphore's path `P`, as Curator's:
//! - `P/locks`: an internal mutex (`_c_<uuid>-lock-<seq>`) serialising acquirers;
//! - `P/leases`: one node per lease, `_c_<uuid>-lease-<seq>`, EPHEMERAL_SEQUENTIAL, holding this
//!   host's address by default.
//!
//! An acquirer takes the internal mutex, creates its lease node, and holds the lease once the
//! number of lease nodes is at most `max_leases`; otherwise it waits (still holding the internal
//! mutex) for a lease to go. [`Semaphore::acquire_many`] keeps the internal mutex until all its
//! leases are held or given back, so two `acquire_many` callers never starve each other with
//! partial holdings. Releasing a lease deletes its node.
//!
//! ## Connection loss and session expiry
//! Leases are ephemeral: a crashed holder's leases go with its session. If our session is lost
//! while acquiring, the call fails with [`LockError::NodeLost`] and nothing is held. A lease is
//! created only on the internal lock's session, in one transaction with a check that the internal
//! lock node still exists, so no lease is ever created outside the internal lock (Curator retries
//! the lease create on a new session, which can leave its semaphore blocked for good). A holder
//! learns that a lease can no longer be trusted from [`Hold::lost`].
//!
//! ## Leases
//! A [`Lease`] shares what every lock's guard does with its hold (node path, fencing token,
//! `lost()`, guarded writes) through the [`Hold`] trait, re-exported here:
//! `use zk_recipes_semaphore::Hold;`. `release` is the lease's own.
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_framework::Framework;
//! use zk_recipes_semaphore::Semaphore;
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let semaphore = Semaphore::new(&framework, "/app/db-connections", 10)?;
//! let lease = semaphore.acquire_timeout(Duration::from_secs(5)).await?;
//! // ... use one of the 10 connections ...
//! lease.release().await?;
//! # Ok(()) }
//! ```

use std::sync::Arc;
use std::time::Duration;

use tracing::debug;
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{local_address, path, Deadline, Error as FrameworkError, Framework, OwnedNode};
use zk_recipes_lock_internals::futures_compat::BoxFuture;
use zk_recipes_lock_internals::{
    DistributedGuard, DistributedLock, HeldLease, LockInternals, LockMetrics, StandardDriver, Wait,
    RELEASE_TIMEOUT,
};
pub use zk_recipes_lock_internals::{Hold, LockError, LostReason, TransactionOp};

/// The internal mutex's directory under the semaphore's path.
pub const LOCKS_DIR: &str = "locks";
/// The leases' directory under the semaphore's path.
pub const LEASES_DIR: &str = "leases";
/// The internal mutex's node name.
pub const LOCK_NAME: &str = "lock-";
/// The lease nodes' name.
pub const LEASE_NAME: &str = "lease-";

/// What can go wrong with a semaphore.
///
/// ```
/// use zk_recipes_semaphore::{LockError, SemaphoreError};
///
/// let err = SemaphoreError::TooManyLeases { requested: 5, max_leases: 3 };
/// assert_eq!(err.to_string(), "asked for 5 leases of a semaphore with 3");
/// assert!(!err.is_retryable());
///
/// let lost = SemaphoreError::from(LockError::NodeLost { path: "/app/workers/leases/x".into() });
/// assert!(lost.is_node_lost() && !lost.is_timeout());
///
/// // Zero leases is the lock driver's error, as for every lock.
/// let zero = SemaphoreError::from(LockError::ZeroLeases);
/// assert!(matches!(zero, SemaphoreError::Lock(LockError::ZeroLeases)) && !zero.is_retryable());
/// ```
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum SemaphoreError {
    /// From the lock driver or the framework (invalid path, timeout, lost node, closed, ...), and
    /// [`LockError::ZeroLeases`] for `max_leases == 0` or zero leases asked for (nothing was sent).
    #[error(transparent)]
    Lock(#[from] LockError),
    /// More leases asked for than the semaphore has; nothing was sent.
    #[error("asked for {requested} leases of a semaphore with {max_leases}")]
    TooManyLeases {
        /// Asked for.
        requested: u32,
        /// The semaphore's size.
        max_leases: u32,
    },
}

impl SemaphoreError {
    /// Whether the caller's deadline passed.
    pub fn is_timeout(&self) -> bool {
        matches!(self, SemaphoreError::Lock(err) if err.is_timeout())
    }

    /// Whether trying again may succeed (a connection loss with unknown outcome).
    pub fn is_retryable(&self) -> bool {
        matches!(self, SemaphoreError::Lock(err) if err.is_retryable())
    }

    /// Whether the framework is closed.
    pub fn is_closed(&self) -> bool {
        matches!(self, SemaphoreError::Lock(err) if err.is_closed())
    }

    /// Whether a node of ours is gone with its session: no lease is held.
    pub fn is_node_lost(&self) -> bool {
        matches!(self, SemaphoreError::Lock(err) if err.is_node_lost())
    }
}

impl From<FrameworkError> for SemaphoreError {
    fn from(err: FrameworkError) -> Self {
        SemaphoreError::Lock(LockError::from(err))
    }
}

/// The semaphore's result type.
///
/// ```
/// use zk_recipes_semaphore::{Result, Semaphore};
///
/// /// Runs a job under one of the semaphore's leases, if one is free now.
/// async fn run_if_free(semaphore: &Semaphore) -> Result<bool> {
///     let Some(lease) = semaphore.try_acquire().await? else {
///         return Ok(false);
///     };
///     // ... the job ...
///     lease.release().await?;
///     Ok(true)
/// }
/// ```
pub type Result<T, E = SemaphoreError> = std::result::Result<T, E>;

/// A distributed semaphore with `max_leases` leases (Curator's `InterProcessSemaphoreV2`).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_semaphore::Result<()> {
/// let semaphore = zk_recipes_semaphore::Semaphore::new(&framework, "/app/workers", 3)?;
/// let leases = semaphore.acquire_many(2).await?;
/// assert_eq!(leases.len(), 2);
/// for lease in leases {
///     lease.release().await?;
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Semaphore {
    framework: Framework,
    path: String,
    internal_lock: LockInternals,
    leases_dir: String,
    max_leases: u32,
    data: Arc<[u8]>,
    metrics: LockMetrics,
}

impl Semaphore {
    /// A semaphore of `max_leases` at `path`; lease nodes hold this host's address.
    ///
    /// # Errors
    /// An invalid path, or `max_leases == 0`; nothing is sent.
    pub fn new(framework: &Framework, path: &str, max_leases: u32) -> Result<Self> {
        if max_leases == 0 {
            return Err(LockError::ZeroLeases.into());
        }
        path::validate(path)
            .map_err(|reason| FrameworkError::InvalidPath { path: path.to_owned(), reason })?;
        let internal_lock = LockInternals::new(
            framework,
            &path::join(path, LOCKS_DIR),
            Arc::new(StandardDriver::new(LOCK_NAME)),
            1,
        )?;
        Ok(Self {
            framework: framework.clone(),
            path: path.to_owned(),
            internal_lock,
            leases_dir: path::join(path, LEASES_DIR),
            max_leases,
            data: local_address().into(),
            metrics: LockMetrics::new(framework, &path::join(path, LEASES_DIR), LEASE_NAME),
        })
    }

    /// Uses `data` as the lease nodes' data instead of this host's address.
    pub fn lease_data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = data.into().into();
        self
    }

    /// The number of leases.
    pub fn max_leases(&self) -> u32 {
        self.max_leases
    }

    /// The semaphore's path (its `locks/` and `leases/` directories are below it).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Waits for one lease as long as it takes.
    ///
    /// # Errors
    /// As [`acquire_many_until`](Self::acquire_many_until).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled acquire gets no lease and loses its place in line; its nodes, if
    /// they were created (the internal lock's, and lease nodes of this call), are deleted by the
    /// framework's cleanup worker.
    pub async fn acquire(&self) -> Result<Lease> {
        self.acquire_one(Deadline::never()).await
    }

    /// Waits for one lease at most `timeout`.
    ///
    /// # Errors
    /// As [`acquire_many_until`](Self::acquire_many_until).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled acquire gets no lease and loses its place in line; its nodes, if
    /// they were created (the internal lock's, and lease nodes of this call), are deleted by the
    /// framework's cleanup worker.
    pub async fn acquire_timeout(&self, timeout: Duration) -> Result<Lease> {
        self.acquire_one(Deadline::after(timeout)).await
    }

    /// Waits for one lease until `deadline` (a [`Deadline`] or a `Duration` from now).
    ///
    /// ```no_run
    /// # async fn demo(semaphore: zk_recipes_semaphore::Semaphore) -> zk_recipes_semaphore::Result<()> {
    /// use zk_recipes_semaphore::Hold;
    ///
    /// let lease = semaphore.acquire_until(std::time::Duration::from_secs(5)).await?;
    /// println!("lease {} (fencing token {})", lease.node_path(), lease.fencing_token());
    /// lease.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`acquire_many_until`](Self::acquire_many_until).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled acquire gets no lease and loses its place in line; its nodes, if
    /// they were created (the internal lock's, and lease nodes of this call), are deleted by the
    /// framework's cleanup worker.
    pub async fn acquire_until(&self, deadline: impl Into<Deadline>) -> Result<Lease> {
        self.acquire_one(deadline.into()).await
    }

    /// Takes one lease if one is free now.
    ///
    /// # Errors
    /// As [`acquire_many_until`](Self::acquire_many_until).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled try gets no lease; its nodes, if they were created (the internal
    /// lock's, and a lease node), are deleted by the framework's cleanup worker.
    pub async fn try_acquire(&self) -> Result<Option<Lease>> {
        let leases = self.acquire_leases(1, Wait::TryOnce(Deadline::after(RELEASE_TIMEOUT))).await?;
        Ok(leases.and_then(|mut leases| leases.pop()))
    }

    /// Waits for `count` leases as long as it takes.
    ///
    /// # Errors
    /// As [`acquire_many_until`](Self::acquire_many_until).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled acquire gets none of the leases (never some of them) and loses its
    /// place in line; its nodes, if they were created (the internal lock's, and every lease node of
    /// this call), are deleted by the framework's cleanup worker.
    pub async fn acquire_many(&self, count: u32) -> Result<Vec<Lease>> {
        self.acquire_many_until(count, Deadline::never()).await
    }

    /// Takes `count` leases if they are free now; all or none.
    ///
    /// # Errors
    /// As [`acquire_many_until`](Self::acquire_many_until).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled try gets none of the leases; its nodes, if they were created (the
    /// internal lock's, and lease nodes), are deleted by the framework's cleanup worker.
    pub async fn try_acquire_many(&self, count: u32) -> Result<Option<Vec<Lease>>> {
        self.acquire_leases(count, Wait::TryOnce(Deadline::after(RELEASE_TIMEOUT))).await
    }

    /// Waits for `count` leases until `deadline`: all of them, or none.
    ///
    /// # Errors
    /// [`LockError::ZeroLeases`] for `count == 0` and [`SemaphoreError::TooManyLeases`] for
    /// `count > max_leases`, before anything is sent; a timeout at the deadline
    /// ([`SemaphoreError::is_timeout`]); [`LockError::NodeLost`] if the session is lost meanwhile;
    /// framework errors. On every error the nodes of this call are deleted.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled acquire gets none of the leases (never some of them) and loses its
    /// place in line; its nodes, if they were created (the internal lock's, and every lease node of
    /// this call), are deleted by the framework's cleanup worker.
    pub async fn acquire_many_until(&self, count: u32, deadline: impl Into<Deadline>) -> Result<Vec<Lease>> {
        let deadline = deadline.into();
        let leases = self.acquire_leases(count, Wait::Until(deadline)).await?;
        leases.ok_or_else(|| deadline.timeout_error().into())
    }

    async fn acquire_one(&self, deadline: Deadline) -> Result<Lease> {
        let mut leases = self.acquire_many_until(1, deadline).await?;
        leases.pop().ok_or_else(|| deadline.timeout_error().into())
    }

    async fn acquire_leases(&self, count: u32, wait: Wait) -> Result<Option<Vec<Lease>>> {
        if count == 0 {
            return Err(LockError::ZeroLeases.into());
        }
        if count > self.max_leases {
            return Err(SemaphoreError::TooManyLeases { requested: count, max_leases: self.max_leases });
        }
        let deadline = wait.deadline();
        let started = std::time::Instant::now();
        let taken = async {
            let Some(internal_lock) = self.internal_lock.acquire(&local_address(), wait).await? else {
                return Ok(None);
            };
            let taken = self.take_leases(&internal_lock, count, wait, deadline, started).await;
            // Given back whatever happened (on an error, the leases taken so far were dropped, and
            // so deleted, already).
            release_quietly(internal_lock).await;
            taken
        }
        .await;
        if matches!(&taken, Err(err) if err.is_timeout()) {
            self.metrics.timed_out();
        }
        taken
    }

    /// Creates and waits for `count` leases while `internal_lock` is held: all of them, or none
    /// (`Ok(None)` when not waiting and the semaphore is full).
    async fn take_leases(
        &self,
        internal_lock: &HeldLease,
        count: u32,
        wait: Wait,
        deadline: Deadline,
        started: std::time::Instant,
    ) -> Result<Option<Vec<Lease>>> {
        let mut leases = Vec::with_capacity(count as usize);
        for _ in 0..count {
            // Under the internal lock, so on its session only: a lease that landed on a newer
            // session would sit outside the internal lock, and can leave the semaphore waiting for
            // ever (a holder of the internal lock and this lease each waiting for the other).
            let node = internal_lock
                .create_while_held(
                    &self.leases_dir,
                    LEASE_NAME,
                    &self.data,
                    CreateMode::EphemeralSequential,
                    deadline,
                )
                .await?;
            if !self.wait_until_within_limit(&node, matches!(wait, Wait::Until(_)), deadline).await? {
                // Not waiting and full: give everything back (dropping the nodes deletes them).
                return Ok(None);
            }
            leases.push(Lease { held: HeldLease::new(node).timed(self.metrics.acquired(started)) });
        }
        Ok(Some(leases))
    }

    /// Waits until at most `max_leases` lease nodes exist (ours among them). Returns `false` if the
    /// semaphore is full and we must not wait.
    async fn wait_until_within_limit(
        &self,
        node: &OwnedNode,
        wait: bool,
        deadline: Deadline,
    ) -> Result<bool> {
        let leases_dir = self.leases_dir.as_str();
        let generation = node.generation();
        let mut watch = false;
        loop {
            let listed = self
                .framework
                .retry_on_session(generation, deadline, |session| async move {
                    if watch {
                        let (children, _, watcher) =
                            session.client().get_and_watch_children(leases_dir).await?;
                        Ok((children, Some(watcher)))
                    } else {
                        Ok((session.client().list_children(leases_dir).await?, None))
                    }
                })
                .await;
            let (children, watcher) = match listed {
                Ok(listed) => listed,
                Err(FrameworkError::SessionLost)
                | Err(FrameworkError::ZooKeeper(zookeeper_client::Error::NoNode)) => {
                    return Err(LockError::NodeLost { path: node.path().to_owned() }.into())
                }
                Err(err) => return Err(err.into()),
            };
            if !children.iter().any(|child| child == node.name()) {
                return Err(LockError::NodeLost { path: node.path().to_owned() }.into());
            }
            if children.len() <= self.max_leases as usize {
                return Ok(true);
            }
            if !wait {
                return Ok(false);
            }
            match watcher {
                // List again with a watch, so no change between the two listings is missed.
                None => watch = true,
                Some(watcher) => {
                    debug!(leases = children.len(), max = self.max_leases, "semaphore full; waiting");
                    deadline.run(async { Ok(watcher.changed().await) }).await?;
                }
            }
        }
    }

    /// Who holds a lease and who waits for one, by lease node (full paths), each in line order.
    ///
    /// An acquirer creates its lease node while it holds the semaphore's internal lock and waits
    /// there until at most `max_leases` nodes exist, so the first `max_leases` nodes by sequence
    /// hold and the rest wait. With a different `max_leases` than the other participants use, the
    /// split follows this handle's.
    ///
    /// ```no_run
    /// # async fn demo(semaphore: zk_recipes_semaphore::Semaphore) -> zk_recipes_semaphore::Result<()> {
    /// let participants = semaphore.participants().await?;
    /// println!("{} holding, {} waiting", participants.holders.len(), participants.waiting.len());
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn participants(&self) -> Result<Participants> {
        let nodes = self.participant_nodes().await?;
        Ok(Participants::split(nodes, self.max_leases))
    }

    /// Every lease node (full paths) in line order, holders and waiters alike (see
    /// [`participants`](Self::participants) for the split).
    ///
    /// # Errors
    /// As [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn participant_nodes(&self) -> Result<Vec<String>> {
        let leases_dir = self.leases_dir.as_str();
        let children = self
            .framework
            .retry(Deadline::after(RELEASE_TIMEOUT), |session| async move {
                match session.client().list_children(leases_dir).await {
                    Ok(children) => Ok(children),
                    Err(zookeeper_client::Error::NoNode) => Ok(Vec::new()),
                    Err(err) => Err(err.into()),
                }
            })
            .await?;
        let children = zk_recipes_lock_internals::sort_children(children, LEASE_NAME);
        Ok(children.iter().map(|child| path::join(leases_dir, child)).collect())
    }
}

/// A semaphore's lease nodes, split by [`Semaphore::participants`].
///
/// ```no_run
/// # async fn demo(semaphore: zk_recipes_semaphore::Semaphore) -> zk_recipes_semaphore::Result<()> {
/// let participants = semaphore.participants().await?;
/// for (place, node) in participants.waiting.iter().enumerate() {
///     println!("{node} waits, {} ahead of it", participants.holders.len() + place);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Participants {
    /// The nodes holding a lease (full paths), in line order.
    pub holders: Vec<String>,
    /// The nodes waiting for one (full paths), in line order.
    pub waiting: Vec<String>,
}

impl Participants {
    /// The first `max_leases` of `nodes` (in line order) hold; the rest wait.
    ///
    /// ```
    /// use zk_recipes_semaphore::Participants;
    /// let nodes: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    /// let split = Participants::split(nodes, 2);
    /// assert_eq!((split.holders.len(), split.waiting), (2, vec!["c".to_string()]));
    /// ```
    pub fn split(mut nodes: Vec<String>, max_leases: u32) -> Self {
        let waiting = nodes.split_off(nodes.len().min(max_leases as usize));
        Self { holders: nodes, waiting }
    }
}

async fn release_quietly(internal_lock: HeldLease) {
    if let Err(err) = internal_lock.release(Deadline::after(RELEASE_TIMEOUT)).await {
        debug!(%err, "releasing the internal lock failed; the cleanup worker deletes it");
    }
}

/// One lease of a [`Semaphore`]. Released by [`release`](Self::release), or in the background
/// when dropped. What a holder does with it (node path, fencing token, `lost()`, guarded writes)
/// is [`Hold`]'s: a lease taken later has a larger fencing token, so a resource that remembers the
/// largest token it has seen can refuse a writer whose lease was lost meanwhile.
///
/// ```no_run
/// # async fn demo(semaphore: zk_recipes_semaphore::Semaphore) -> zk_recipes_semaphore::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_semaphore::Hold;
///
/// let lease = semaphore.acquire_timeout(Duration::from_secs(5)).await?;
/// println!("{} (fencing token {})", lease.node_path(), lease.fencing_token());
/// tokio::select! {
///     reason = lease.lost() => println!("lost ({reason:?}): stop using the resource"),
///     () = tokio::time::sleep(Duration::from_secs(1)) => println!("work done"),
/// }
/// lease.release().await?;
/// # Ok(()) }
/// ```
#[must_use = "if unused the lease is immediately released"]
#[derive(Debug)]
pub struct Lease {
    held: HeldLease,
}

impl Lease {
    /// Releases the lease: deletes its node and reports the outcome.
    ///
    /// # Errors
    /// The delete failed within [`RELEASE_TIMEOUT`] (30 s); the cleanup worker goes on in the
    /// background.
    ///
    /// # Cancel safety
    /// Cancel safe: the lease is given up either way. A cancelled release leaves the delete to the
    /// framework's cleanup worker, which deletes the node in the background.
    pub async fn release(self) -> Result<()> {
        Ok(self.held.release(Deadline::after(RELEASE_TIMEOUT)).await?)
    }
}

impl Hold for Lease {
    fn held_lease(&self) -> &HeldLease {
        &self.held
    }
}

/// A non-reentrant distributed mutex: a [`Semaphore`] with one lease (Curator's
/// `InterProcessSemaphoreMutex`). Unlike the reentrant mutex, a second
/// `lock` by the same holder waits for the first to be released.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_semaphore::Result<()> {
/// let mutex = zk_recipes_semaphore::SemaphoreMutex::new(&framework, "/app/singleton")?;
/// let guard = mutex.lock_timeout(std::time::Duration::from_secs(5)).await?;
/// guard.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SemaphoreMutex {
    semaphore: Semaphore,
}

impl SemaphoreMutex {
    /// A semaphore mutex at `path`.
    ///
    /// # Errors
    /// An invalid path; nothing is sent.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        Ok(Self { semaphore: Semaphore::new(framework, path, 1)? })
    }

    /// Waits for the lock as long as it takes.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many_until`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lock` loses its place in line; its nodes, if they were created
    /// (the internal lock's and the lease's), are deleted by the framework's cleanup worker.
    pub async fn lock(&self) -> Result<Lease> {
        self.semaphore.acquire().await
    }

    /// Waits for the lock at most `timeout`.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many_until`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lock_timeout` loses its place in line; its nodes, if they were
    /// created (the internal lock's and the lease's), are deleted by the framework's cleanup
    /// worker.
    pub async fn lock_timeout(&self, timeout: Duration) -> Result<Lease> {
        self.semaphore.acquire_timeout(timeout).await
    }

    /// Waits for the lock until `deadline` (a [`Deadline`], or a `Duration` from now), as
    /// [`Semaphore::acquire_until`] and the other locks' `*_until` calls.
    ///
    /// ```no_run
    /// # async fn demo(mutex: zk_recipes_semaphore::SemaphoreMutex) -> zk_recipes_semaphore::Result<()> {
    /// use zk_recipes_framework::Deadline;
    /// let guard = mutex.lock_until(Deadline::after(std::time::Duration::from_secs(5))).await?;
    /// guard.release().await?;
    /// # Ok(()) }
    /// ```
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many_until`]: a timeout at the deadline
    /// ([`SemaphoreError::is_timeout`]), and the call's nodes are deleted.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lock_until` loses its place in line; its nodes, if they were
    /// created (the internal lock's and the lease's), are deleted by the framework's cleanup
    /// worker.
    pub async fn lock_until(&self, deadline: impl Into<Deadline>) -> Result<Lease> {
        self.semaphore.acquire_until(deadline).await
    }

    /// Takes the lock if it is free now.
    ///
    /// # Errors
    /// As [`Semaphore::acquire_many_until`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `try_lock` takes nothing; its nodes, if they were created, are
    /// deleted by the framework's cleanup worker.
    pub async fn try_lock(&self) -> Result<Option<Lease>> {
        self.semaphore.try_acquire().await
    }
}

impl From<SemaphoreError> for LockError {
    fn from(err: SemaphoreError) -> Self {
        match err {
            SemaphoreError::Lock(err) => err,
            other @ SemaphoreError::TooManyLeases { .. } => {
                LockError::Framework(FrameworkError::InvalidArgument(other.to_string()))
            }
        }
    }
}

impl DistributedLock for SemaphoreMutex {
    fn acquire_until(
        &self,
        deadline: Deadline,
    ) -> BoxFuture<'_, Result<Box<dyn DistributedGuard>, LockError>> {
        Box::pin(async move {
            let mut leases = self.semaphore.acquire_many_until(1, deadline).await?;
            let lease = leases.pop().ok_or_else(|| LockError::Framework(deadline.timeout_error()))?;
            Ok(Box::new(lease) as Box<dyn DistributedGuard>)
        })
    }
}

impl DistributedGuard for Lease {
    fn release(self: Box<Self>) -> BoxFuture<'static, Result<(), LockError>> {
        Box::pin(async move { Ok(Lease::release(*self).await?) })
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
        assert_send_sync::<Semaphore>();
        assert_send_sync::<SemaphoreMutex>();
        assert_send_sync::<Lease>();
        assert_send_sync::<SemaphoreError>();
    }
}
