//! A held lease: our node, while it is the one that holds; and [`Hold`], what every guard does
//! with it.

use std::fmt;
use std::future::Future;
use std::time::Duration;

use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::zookeeper_client::{self, CreateMode, EventType};
use zk_recipes_framework::{
    ConnectionState, ConnectionUpdate, Deadline, Error as FrameworkError, Framework, OwnedNode,
    ProtectedCreate, Transaction, TransactionOp, TransactionResult,
};

use crate::error::{LockError, Result};
use crate::expiry::until_hold_deadline;
use crate::lost::LostReason;

/// How long a recipe's `release().await` (and an explicit give-back of a lease it did not want)
/// tries before it gives up and leaves the delete to the framework's cleanup worker.
pub const RELEASE_TIMEOUT: Duration = Duration::from_secs(30);

/// Our node while it holds a lease. Deleted when released or dropped. What a holder does with it
/// is the [`Hold`] trait's, which every recipe's guard shares.
///
/// ```no_run
/// # use zk_recipes_lock_internals::LockInternals;
/// # async fn demo(internals: LockInternals) -> zk_recipes_lock_internals::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::{Hold, Wait};
///
/// let held = internals.acquire(b"", Wait::Until(Deadline::never())).await?.expect("waited until held");
/// println!("{} holds, fencing token {}", held.node_path(), held.fencing_token());
/// tokio::select! {
///     reason = held.lost() => println!("lost ({reason:?}): stop"),
///     () = tokio::time::sleep(Duration::from_secs(1)) => println!("work done"),
/// }
/// held.release(Deadline::after(Duration::from_secs(5))).await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a HeldLease releases it"]
pub struct HeldLease {
    node: OwnedNode,
    fencing_token: i64,
    /// Times the hold and counts its loss (for leases a lock's acquire made).
    timer: Option<crate::metrics::HoldTimer>,
}

impl HeldLease {
    /// Wraps a node that holds a lease (for recipes that decide holding by their own rule, such as
    /// the semaphore's lease count).
    pub fn new(node: OwnedNode) -> Self {
        let fencing_token = node.stat().czxid;
        Self { node, fencing_token, timer: None }
    }

    /// With the lock's metrics: hold time when released or dropped, and the loss counted once
    /// (see [`crate::LockMetrics`]).
    pub fn timed(mut self, timer: crate::metrics::HoldTimer) -> Self {
        self.timer = Some(timer);
        self
    }

    /// Wraps a node that continues an earlier hold, with that hold's fencing token: the read node
    /// of a downgrade carries the writer's token.
    pub fn continuing(node: OwnedNode, fencing_token: i64) -> Self {
        Self { node, fencing_token, timer: None }
    }

    /// Our node's name.
    pub fn name(&self) -> &str {
        self.node.name()
    }

    /// The session that owns our node.
    pub fn session_id(&self) -> zookeeper_client::SessionId {
        self.node.session_id()
    }

    /// The framework.
    pub fn framework(&self) -> &Framework {
        self.node.framework()
    }

    /// Releases: deletes our node on its own session and reports the outcome (a node already gone
    /// from a live session counts as released). On an error the cleanup worker goes on deleting it
    /// in the background.
    ///
    /// # Errors
    /// [`LockError::NodeLost`] if our node's session is gone: the hold was lost before this
    /// release. Otherwise as [`OwnedNode::delete`].
    ///
    /// # Cancel safety
    /// Cancel safe: the hold ends either way. A cancelled release leaves the delete to the
    /// framework's cleanup worker, which deletes the node in the background.
    pub fn release(self, deadline: impl Into<Deadline>) -> impl Future<Output = Result<()>> + Send {
        let Self { node, timer, .. } = self;
        // Boxed, not an `async fn`: see "Why some futures are boxed" in the crate docs.
        let deleting = Box::pin(node.delete(deadline.into()));
        async move {
            let released = deleting.await;
            // The hold ends when the release is done.
            drop(timer);
            Ok(released?)
        }
    }

    /// Creates a protected node that builds on this hold (a downgrade's read node, a lease taken
    /// under an internal lock): on our node's session only, in one transaction with a check that
    /// our node still exists. See [`ProtectedCreate::while_exists`].
    ///
    /// # Errors
    /// [`LockError::NodeLost`] (our node's path) if our node is gone or its session is: nothing
    /// was created, and nothing is tried on a newer session. Otherwise framework errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled call returns no node and leaves none behind: a node it may have
    /// created is found by its `_c_<uuid>-` prefix and deleted by the framework's cleanup worker.
    /// Our hold is not affected.
    ///
    /// ```no_run
    /// # async fn demo(held: zk_recipes_lock_internals::HeldLease) -> zk_recipes_lock_internals::Result<()> {
    /// use std::time::Duration;
    /// use zk_recipes_framework::{zookeeper_client::CreateMode, Deadline};
    /// use zk_recipes_lock_internals::Hold;
    ///
    /// let deadline = Deadline::after(Duration::from_secs(5));
    /// let lease = held.create_while_held("/app/sem/leases", "lease-", b"", CreateMode::EphemeralSequential, deadline).await?;
    /// println!("{} created while {} was held", lease.path(), held.node_path());
    /// # Ok(()) }
    /// ```
    pub async fn create_while_held(
        &self,
        parent: &str,
        name: &str,
        data: &[u8],
        mode: CreateMode,
        deadline: impl Into<Deadline>,
    ) -> Result<OwnedNode> {
        let deadline = deadline.into();
        let request = ProtectedCreate::new(parent, name).data(data).mode(mode).while_exists(&self.node);
        Ok(self.node.framework().create_protected(request, deadline).await?)
    }

    async fn lost_reason(&self) -> LostReason {
        let framework = self.node.framework();
        let policy = framework.error_policy();
        let mut events = framework.connection_events();
        let snapshot = framework.current();
        if snapshot.closed || framework.is_closing() {
            return LostReason::Closed;
        }
        if snapshot.generation != self.node.generation() {
            return LostReason::Connection(ConnectionState::Lost);
        }
        if let Some(state) = snapshot.state.filter(|state| policy.is_error_state(*state)) {
            return LostReason::Connection(state);
        }
        let generation = self.node.generation();
        let connection = async {
            loop {
                match events.next().await {
                    None => return LostReason::Closed,
                    Some(update @ ConnectionUpdate::Lagged { .. }) => {
                        return LostReason::Connection(update.state())
                    }
                    Some(ConnectionUpdate::Changed(event)) => {
                        let ours = event.generation == self.node.generation();
                        if (ours && policy.is_error_state(event.state))
                            || event.state == ConnectionState::Lost
                        {
                            return LostReason::Connection(event.state);
                        }
                    }
                }
            }
        };
        tokio::select! {
            // Closing ends every hold before the session ends (`Framework::close`).
            () = framework.closing() => LostReason::Closed,
            reason = connection => reason,
            reason = self.node_deleted() => reason,
            () = until_hold_deadline(framework, generation, None) => LostReason::SessionMayExpire,
        }
    }

    /// Resolves when our node is deleted (re-watching on data changes).
    async fn node_deleted(&self) -> LostReason {
        let framework = self.node.framework();
        let mut backoff = Backoff::new(Duration::from_millis(50), Duration::from_secs(1));
        loop {
            let Ok(session) = framework.session(Deadline::never()).await else {
                return LostReason::Closed;
            };
            if session.generation() != self.node.generation() {
                return LostReason::Connection(ConnectionState::Lost);
            }
            let watcher = match session.client().get_and_watch_data(self.node.path()).await {
                Ok((_, _, watcher)) => watcher,
                Err(zookeeper_client::Error::NoNode) => return LostReason::NodeDeleted,
                Err(_) => {
                    // Connection trouble: the connection side reports what matters; look again.
                    backoff.pause().await;
                    continue;
                }
            };
            drop(session);
            let event = watcher.changed().await;
            match event.event_type {
                EventType::NodeDeleted => return LostReason::NodeDeleted,
                EventType::Session => return LostReason::Connection(ConnectionState::Lost),
                _ => {}
            }
        }
    }
}

/// What a holder does with the lock it holds, written once for every guard: its node, its
/// fencing token, whether it can still be trusted, and writes that commit only while it holds.
///
/// Every recipe's guard implements it by naming its [`HeldLease`] ([`held_lease`](Self::held_lease)),
/// and so does [`HeldLease`] itself; the other methods are provided. Each recipe crate re-exports
/// it (`use zk_recipes_mutex::Hold;`), so generic code can take any guard. What differs between
/// guards (`release`, `reenter`, `downgrade`) stays on the guards.
///
/// ```no_run
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::{TransactionOp, Hold, Result};
///
/// /// Writes `value`, stamped with the fencing token, under whatever lock `guard` holds.
/// async fn write_fenced(guard: &impl Hold, value: &str) -> Result<()> {
///     let data = format!("{value}@{}", guard.fencing_token()).into_bytes();
///     let ops = [TransactionOp::SetData { path: "/app/config".into(), data, version: None }];
///     tokio::select! {
///         reason = guard.lost() => println!("{} lost ({reason:?}): not written", guard.node_path()),
///         written = guard.write_guarded(&ops, Deadline::after(Duration::from_secs(5))) => {
///             written?;
///         }
///     }
///     Ok(())
/// }
/// ```
pub trait Hold {
    /// The lease this guard holds by (for the guards of one reentered hold, the one they share).
    fn held_lease(&self) -> &HeldLease;

    /// The lock node's full path.
    fn node_path(&self) -> &str {
        self.held_lease().node.path()
    }

    /// A token that grows strictly from one holder to the next: our node's creation zxid
    /// (`czxid`), or the token of the hold this one continues (the read hold of a downgrade keeps
    /// the writer's; see [`HeldLease::continuing`]). A later holder's node was created after ours,
    /// so its token is larger: hand it to the store you write to, and have the store reject tokens
    /// lower than the highest it has seen.
    fn fencing_token(&self) -> i64 {
        self.held_lease().fencing_token
    }

    /// The generation of the session that owns the lock node: the hold lasts as long as that
    /// session (compare with [`ConnectionSnapshot::generation`](zk_recipes_framework::ConnectionSnapshot::generation);
    /// see [`Session::generation`](zk_recipes_framework::Session::generation)).
    fn session_generation(&self) -> u64 {
        self.held_lease().node.generation()
    }

    /// Resolves when the lock can no longer be trusted: the connection entered an error state per
    /// the framework's error policy (or the session was lost), the server may expire the session
    /// soon by the framework's expiry clock, whatever the connection says
    /// ([`LostReason::SessionMayExpire`]), our node was deleted, or the framework began closing
    /// (before [`Framework::close`](zk_recipes_framework::Framework::close) ends the session that
    /// holds our node). From then on another process may hold the lock.
    /// Checks the current state first, so it resolves at once if the lock is already unsafe.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads and waits, and a later call checks the current state first, so a
    /// loss that came meanwhile is not missed. A cancelled call may leave a data watch on our node,
    /// which fires when the node is deleted.
    fn lost(&self) -> impl Future<Output = LostReason> + Send {
        let lease = self.held_lease();
        async move {
            let reason = lease.lost_reason().await;
            if let Some(timer) = &lease.timer {
                timer.lost(lease.node.path(), reason);
            }
            reason
        }
    }

    /// Commits `ops` atomically and only if our lock node still exists: one multi that checks our
    /// node and then runs the writes, on the session that owns the node (the framework's
    /// [`Transaction::while_exists`], whose ops these are). A holder whose lock was
    /// lost (session expired, node deleted) cannot write this way, however late it notices.
    ///
    /// Not retried: after a connection loss the outcome is unknown, and only the caller knows
    /// whether its writes may be repeated (the error says [`LockError::is_retryable`]).
    ///
    /// # Errors
    /// [`LockError::NodeLost`] if our node is gone (nothing was written);
    /// [`LockError::GuardedWriteFailed`] if one of the writes failed (nothing was written);
    /// framework errors (connection loss, timeout, closed; `InvalidPath`, and `DataTooLarge` when
    /// the writes' data together exceed the framework's limit, before anything is sent).
    ///
    /// # Cancel safety
    /// If cancelled after the multi was sent, its writes may or may not have been committed (all of
    /// them or none). Cancelled before, nothing was written. The hold is not affected either way.
    ///
    /// ```no_run
    /// # async fn demo(held: zk_recipes_lock_internals::HeldLease) -> zk_recipes_lock_internals::Result<()> {
    /// use zk_recipes_framework::Deadline;
    /// use zk_recipes_lock_internals::{TransactionOp, Hold};
    ///
    /// let ops = [TransactionOp::SetData { path: "/app/config".into(), data: b"v2".to_vec(), version: None }];
    /// held.write_guarded(&ops, Deadline::after(std::time::Duration::from_secs(5))).await?;
    /// # Ok(()) }
    /// ```
    fn write_guarded(
        &self,
        ops: &[TransactionOp],
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<Vec<TransactionResult>>> + Send {
        let lease = self.held_lease();
        let deadline = deadline.into();
        async move {
            let node = &lease.node;
            let guarded = node.framework().transaction().while_exists(node).deadline(deadline);
            match ops.iter().cloned().fold(guarded, Transaction::op).await {
                Ok(results) => Ok(results),
                Err(FrameworkError::TransactionFailed { index, source }) => {
                    Err(LockError::GuardedWriteFailed { index, source })
                }
                Err(FrameworkError::NodeLost { path }) => Err(LockError::NodeLost { path }),
                Err(err) => Err(err.into()),
            }
        }
    }

    /// Resolves with `Ok` when someone asks us to give the lock up ([`crate::revoke`], or a Curator
    /// `Revoker`), for locks made revocable (the mutex's and the read-write lock's
    /// `make_revocable`). The holder decides whether to release.
    ///
    /// # Errors
    /// [`LockError::NodeLost`] if our node goes first (released, or its session lost); framework
    /// errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads and watches our node's data. A later call reads it again, so a
    /// request that came meanwhile is not missed.
    fn revocation_requested(&self) -> impl Future<Output = Result<()>> + Send {
        let lease = self.held_lease();
        async move {
            let node = &lease.node;
            crate::revocation::wait_for_revocation(node.framework(), node.path(), node.generation()).await?;
            if let Some(timer) = &lease.timer {
                timer.revoked();
            }
            Ok(())
        }
    }
}

impl Hold for HeldLease {
    fn held_lease(&self) -> &HeldLease {
        self
    }
}

impl fmt::Debug for HeldLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeldLease")
            .field("path", &self.node_path())
            .field("fencing_token", &self.fencing_token())
            .finish()
    }
}
