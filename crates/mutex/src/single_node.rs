//! The single-node lock: one EPHEMERAL node at the lock path, taken or reported as held.

use std::fmt;

use zk_recipes_framework::{local_address, path, Deadline, Error as FrameworkError, Framework};
use zk_recipes_lock_internals::{HeldLease, Hold, LockError, Result, RELEASE_TIMEOUT};

/// A lock that is one EPHEMERAL node at its path, holding its owner's id: `try_lock` creates it,
/// or reports who holds it. No queue, no waiting, no herd: a holder is whoever created the node.
///
/// Cheaper than [`Mutex`](crate::Mutex) (one create to take it, one read and one delete to give
/// it back, no sequential node, no listing) and right for "run once" work where a fair queue is
/// not needed: a cron job that one of many replicas should run, a migration, a singleton worker
/// that others poll for. Waiters poll or give up. Use [`Mutex`](crate::Mutex) when waiters
/// should queue and be woken in order.
///
/// The node's data is the hold's owner id, `<owner>#<uuid>`: the owner (this host's address
/// unless [given](SingleNodeLock::owned_by)) and a UUID of this try, so every hold's id is
/// unique. It is how our node is told apart from a node another holder (or another try of ours)
/// created at the same path. Release reads the node and deletes it, at the version read, only
/// while it is still ours (our session's, with our id): nobody deletes a lock they do not hold.
///
/// Like the other locks' guards, its guard is a [`Hold`]: [`lost`](Hold::lost), a
/// [fencing token](Hold::fencing_token) (the node's `czxid`), guarded writes.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_mutex::Result<()> {
/// use zk_recipes_mutex::{SingleNodeLock, TryLock};
///
/// let lock = SingleNodeLock::new(&framework, "/jobs/nightly-report/lock")?;
/// match lock.try_lock().await? {
///     TryLock::Acquired(guard) => {
///         // ... run the job; stop if guard.lost() resolves ...
///         guard.release().await?;
///     }
///     TryLock::Held(holder) => println!("running on {}", String::from_utf8_lossy(holder.owner())),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct SingleNodeLock {
    framework: Framework,
    path: String,
    owner: Vec<u8>,
}

/// What [`SingleNodeLock::try_lock`] found.
///
/// ```no_run
/// # async fn demo(lock: zk_recipes_mutex::SingleNodeLock) -> zk_recipes_mutex::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_mutex::{Hold, TryLock};
///
/// match lock.try_lock_until(Deadline::after(Duration::from_secs(5))).await? {
///     TryLock::Acquired(guard) => {
///         println!("ours: {}", guard.node_path());
///         guard.release().await?;
///     }
///     TryLock::Held(holder) => println!("held by session {:#x}", holder.session_id),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug)]
#[must_use = "an acquired lock is released when its guard is dropped"]
pub enum TryLock {
    /// The node is ours.
    Acquired(SingleNodeGuard),
    /// Another holds it.
    Held(Holder),
}

/// Who holds a single-node lock.
///
/// ```
/// use zk_recipes_mutex::Holder;
///
/// let holder = Holder {
///     owner_id: b"10.0.0.7#9b2f0c3e-5d1a-4e8b-a1f4-2c6d8e0b7a13".to_vec(),
///     session_id: 0x1000_0000_0000_0001,
///     fencing_token: 4_294_967_302,
/// };
/// assert_eq!(holder.owner(), b"10.0.0.7");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The data of the lock node: the hold's owner id, `<owner>#<uuid>` for ours.
    pub owner_id: Vec<u8>,
    /// The holder's session (the node's `ephemeral_owner`).
    pub session_id: i64,
    /// The holder's fencing token (the node's `czxid`).
    pub fencing_token: i64,
}

impl Holder {
    /// The owner part of the owner id (before its last `#`), or all of it.
    pub fn owner(&self) -> &[u8] {
        match self.owner_id.iter().rposition(|byte| *byte == b'#') {
            Some(at) => &self.owner_id[..at],
            None => &self.owner_id,
        }
    }
}

impl SingleNodeLock {
    /// A lock at `path`, owned by this host's address.
    ///
    /// # Errors
    /// [`LockError::Framework`] with `InvalidPath` for an invalid path or the root; nothing is
    /// sent.
    pub fn new(framework: &Framework, path: &str) -> Result<Self> {
        path::validate(path).map_err(|reason| {
            LockError::Framework(FrameworkError::InvalidPath { path: path.to_owned(), reason })
        })?;
        if path == "/" {
            return Err(LockError::Framework(FrameworkError::InvalidArgument(
                "the root cannot be a lock node".into(),
            )));
        }
        Ok(Self { framework: framework.clone(), path: path.to_owned(), owner: local_address() })
    }

    /// Sets the owner written into the node (before `#<uuid>`): a host, a process, a job name;
    /// read it back with [`owner`](Self::owner). The node's data is checked against the
    /// framework's limit by `try_lock`.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_mutex::Result<()> {
    /// use zk_recipes_mutex::SingleNodeLock;
    ///
    /// let lock = SingleNodeLock::new(&framework, "/jobs/nightly-report/lock")?.owned_by("cron-7");
    /// assert_eq!(lock.owner(), b"cron-7");
    /// # Ok(()) }
    /// ```
    pub fn owned_by(mut self, owner: impl Into<Vec<u8>>) -> Self {
        self.owner = owner.into();
        self
    }

    /// The lock path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The owner this lock writes (before `#<uuid>`).
    pub fn owner(&self) -> &[u8] {
        &self.owner
    }

    /// Tries once to take the lock, within the framework's default operation timeout. See
    /// [`try_lock_until`](Self::try_lock_until).
    ///
    /// # Errors
    /// As [`try_lock_until`](Self::try_lock_until).
    ///
    /// # Cancel safety
    /// As [`try_lock_until`](Self::try_lock_until).
    pub async fn try_lock(&self) -> Result<TryLock> {
        self.try_lock_until(Deadline::after(zk_recipes_framework::DEFAULT_OPERATION_TIMEOUT)).await
    }

    /// Tries once to take the lock: creates the node, or reports its holder. Connection losses
    /// are retried until `deadline`; a create whose reply was lost is found again, never made
    /// twice.
    ///
    /// # Errors
    /// [`LockError::Framework`]: a timeout at the deadline, `DataTooLarge` for an owner id over
    /// the limit (nothing sent), a closed framework, server errors. [`LockError::NodeLost`] is
    /// never returned here.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled try takes nothing. Its create runs on in a task of its own; a node
    /// it makes for the caller that is gone is deleted by the framework's cleanup worker (only
    /// while it is still ours), so others may see the lock held for that moment.
    pub async fn try_lock_until(&self, deadline: impl Into<Deadline>) -> Result<TryLock> {
        let deadline = deadline.into();
        let mut owner_id = self.owner.clone();
        owner_id.push(b'#');
        owner_id.extend_from_slice(uuid::Uuid::new_v4().to_string().as_bytes());
        loop {
            match self.framework.create_exclusive_ephemeral(&self.path, &owner_id, deadline).await {
                Ok(node) => {
                    let lease = HeldLease::new(node);
                    return Ok(TryLock::Acquired(SingleNodeGuard { lease, owner_id }));
                }
                Err(err) if err.is_node_exists() => {}
                Err(err) => return Err(LockError::from(err)),
            }
            match self.framework.get_data(&self.path, deadline).await {
                Ok(read) => {
                    return Ok(TryLock::Held(Holder {
                        owner_id: read.data,
                        session_id: read.stat.ephemeral_owner,
                        fencing_token: read.stat.czxid,
                    }))
                }
                // Released between the create and the read: try again.
                Err(err) if err.is_no_node() => {}
                Err(err) => return Err(LockError::from(err)),
            }
        }
    }

    /// Who holds the lock now, if anyone.
    ///
    /// # Errors
    /// [`LockError::Framework`] from the read.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn holder(&self, deadline: impl Into<Deadline>) -> Result<Option<Holder>> {
        let deadline = deadline.into();
        match self.framework.get_data(&self.path, deadline).await {
            Ok(read) => Ok(Some(Holder {
                owner_id: read.data,
                session_id: read.stat.ephemeral_owner,
                fencing_token: read.stat.czxid,
            })),
            Err(err) if err.is_no_node() => Ok(None),
            Err(err) => Err(LockError::from(err)),
        }
    }
}

/// A held single-node lock. Dropping it releases in the background (only while the node is
/// still ours); [`release`](Self::release) releases and reports. What a holder does with the hold
/// (node path, fencing token, `lost()`, guarded writes) is [`Hold`]'s.
///
/// ```no_run
/// # async fn demo(lock: zk_recipes_mutex::SingleNodeLock) -> zk_recipes_mutex::Result<()> {
/// use zk_recipes_mutex::{Hold, TryLock};
///
/// if let TryLock::Acquired(guard) = lock.try_lock().await? {
///     println!("running as {}", String::from_utf8_lossy(guard.owner_id()));
///     tokio::select! {
///         reason = guard.lost() => println!("lost ({reason:?}): stop the job"),
///         () = tokio::time::sleep(std::time::Duration::from_secs(60)) => println!("job done"),
///     }
///     guard.release().await?;
/// }
/// # Ok(()) }
/// ```
#[must_use = "if unused the lock is immediately released"]
pub struct SingleNodeGuard {
    lease: HeldLease,
    owner_id: Vec<u8>,
}

impl SingleNodeGuard {
    /// This hold's owner id: the node's data, `<owner>#<uuid>`.
    pub fn owner_id(&self) -> &[u8] {
        &self.owner_id
    }

    /// Releases: on our node's session, reads the node and deletes it at the version read if it
    /// is still ours. A node already gone from a live session counts as released.
    ///
    /// # Errors
    /// [`LockError::NodeLost`] if our session is gone, or another holder's node now stands at
    /// the path (left alone): the lock was lost before this release. A failed delete within
    /// [`RELEASE_TIMEOUT`] (the cleanup worker goes on in the background).
    ///
    /// # Cancel safety
    /// Cancel safe: the node is not left behind. A cancelled release leaves the delete to the
    /// framework's cleanup worker, which deletes the node in the background (only while it is still
    /// ours).
    pub async fn release(self) -> Result<()> {
        self.lease.release(Deadline::after(RELEASE_TIMEOUT)).await
    }
}

impl Hold for SingleNodeGuard {
    fn held_lease(&self) -> &HeldLease {
        &self.lease
    }
}

impl fmt::Debug for SingleNodeGuard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SingleNodeGuard")
            .field("node_path", &self.node_path())
            .field("fencing_token", &self.fencing_token())
            .finish()
    }
}
