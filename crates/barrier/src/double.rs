//! `DistributedDoubleBarrier`: N members enter together and leave together (Curator's
//! `DistributedDoubleBarrier`).

use tracing::{debug, info_span, Instrument};
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{local_address, path, Deadline, Framework, ParentMode, PersistentWatch};

use crate::error::{validate_path, BarrierError, Result};
use crate::leave::leave_step;

/// The name of the node that says "everyone has entered", a child of the barrier path
/// (Curator's `READY_NODE`).
///
/// ```
/// assert_eq!(zk_recipes_barrier::READY_NODE, "ready");
/// ```
pub const READY_NODE: &str = "ready";

/// A double barrier: [`enter`](Self::enter) blocks until `member_count` members have entered,
/// and [`Entered::leave`] blocks until every member has left (Curator's
/// `DistributedDoubleBarrier`).
///
/// Layout, as Curator's: each member is an EPHEMERAL node `<barrier_path>/<uuid>` holding this
/// host's address, with `<barrier_path>` (and its missing parents) created as containers; the
/// first member to count `member_count` members creates `<barrier_path>/ready` (PERSISTENT, this
/// host's address), and whoever sees every member gone deletes it. A member arriving while
/// `ready` exists goes straight in (`member_count` is a threshold, not a limit). Rust and Java
/// members share one barrier.
///
/// Unlike Curator (GH-1290), nothing but the server's state lets a member in: after every watch
/// event, reconnection or new session it counts the members again, and it goes in only once it
/// has read `ready` or counted `member_count` members with its own node among them. A member whose
/// session is lost while it waits gets [`BarrierError::MemberLost`] instead of going in, and no
/// longer counts (its node was ephemeral).
///
/// The handle is cheap to clone; every `enter` is a new member with a new node.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_barrier::BarrierError> {
/// use std::time::Duration;
/// use zk_recipes_barrier::DistributedDoubleBarrier;
/// use zk_recipes_framework::Deadline;
///
/// let barrier = DistributedDoubleBarrier::new(&framework, "/jobs/nightly/workers", 3)?;
/// let entered = barrier.enter(Deadline::after(Duration::from_secs(60))).await?;
/// // ... all three workers compute ...
/// entered.leave(Deadline::after(Duration::from_secs(60))).await?;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DistributedDoubleBarrier {
    framework: Framework,
    barrier_path: String,
    ready_path: String,
    member_count: usize,
}

impl DistributedDoubleBarrier {
    /// A double barrier of `member_count` members on `barrier_path` (Curator's
    /// `new DistributedDoubleBarrier(client, path, memberQty)`). Sends nothing.
    ///
    /// # Errors
    /// [`BarrierError::InvalidMemberCount`] for 0; [`BarrierError::Framework`] with `InvalidPath`
    /// for a path ZooKeeper refuses; [`BarrierError::InvalidPath`] for the root. Nothing is sent.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) {
    /// use zk_recipes_barrier::{BarrierError, DistributedDoubleBarrier};
    ///
    /// let barrier = DistributedDoubleBarrier::new(&framework, "/jobs/workers", 3).unwrap();
    /// assert_eq!(barrier.member_count(), 3);
    /// assert!(matches!(
    ///     DistributedDoubleBarrier::new(&framework, "/jobs/workers", 0),
    ///     Err(BarrierError::InvalidMemberCount(0))
    /// ));
    /// # }
    /// ```
    pub fn new(framework: &Framework, barrier_path: &str, member_count: usize) -> Result<Self> {
        validate_path(barrier_path)?;
        if member_count == 0 {
            return Err(BarrierError::InvalidMemberCount(member_count));
        }
        Ok(Self {
            framework: framework.clone(),
            barrier_path: barrier_path.to_owned(),
            ready_path: path::join(barrier_path, READY_NODE),
            member_count,
        })
    }

    /// The barrier's path (the members' parent).
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// let barrier = zk_recipes_barrier::DistributedDoubleBarrier::new(&framework, "/jobs/workers", 3)?;
    /// assert_eq!(barrier.path(), "/jobs/workers");
    /// # Ok(()) }
    /// ```
    pub fn path(&self) -> &str {
        &self.barrier_path
    }

    /// The path of the `ready` node.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// let barrier = zk_recipes_barrier::DistributedDoubleBarrier::new(&framework, "/jobs/workers", 3)?;
    /// assert_eq!(barrier.ready_path(), "/jobs/workers/ready");
    /// # Ok(()) }
    /// ```
    pub fn ready_path(&self) -> &str {
        &self.ready_path
    }

    /// How many members must enter before any goes in.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// let barrier = zk_recipes_barrier::DistributedDoubleBarrier::new(&framework, "/jobs/workers", 3)?;
    /// assert_eq!(barrier.member_count(), 3);
    /// # Ok(()) }
    /// ```
    pub fn member_count(&self) -> usize {
        self.member_count
    }

    /// Enters the barrier as a new member and waits until `member_count` members have entered
    /// (Curator's `enter`). Returns the member, to [`leave`](Entered::leave) with.
    ///
    /// # Errors
    /// A framework timeout at `deadline` ([`BarrierError::is_timeout`]; Curator returns
    /// `false`): the member's node is deleted, so it does not count for the others.
    /// [`BarrierError::MemberLost`] if the member's node vanishes while it waits (its session
    /// was lost). Framework errors from the server (`Closed`, ...).
    ///
    /// # Cancel safety
    /// Dropping the future deletes the member's node (in the background, through the
    /// framework's cleanup worker): a cancelled enter leaves no member behind.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes_barrier::DistributedDoubleBarrier) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// use std::time::Duration;
    /// use zk_recipes_barrier::BarrierError;
    /// use zk_recipes_framework::Deadline;
    ///
    /// let entered = loop {
    ///     match barrier.enter(Deadline::after(Duration::from_secs(60))).await {
    ///         Ok(entered) => break entered,
    ///         // Our session was lost while we waited: we no longer count; enter again.
    ///         Err(BarrierError::MemberLost { .. }) => continue,
    ///         Err(err) => return Err(err),
    ///     }
    /// };
    /// entered.leave(Deadline::after(Duration::from_secs(60))).await?;
    /// # Ok(()) }
    /// ```
    pub async fn enter(&self, deadline: impl Into<Deadline>) -> Result<Entered> {
        let deadline = deadline.into();
        let member_name = uuid::Uuid::new_v4().to_string();
        let member_path = path::join(&self.barrier_path, &member_name);
        let session = self.framework.current().session_id;
        let span =
            info_span!("double_barrier_enter", path = %self.barrier_path, member = %member_name, ?session);
        async {
            // The watch is set before our node exists, so no change after it is missed.
            let mut watch = self.framework.watch(&self.barrier_path, false, deadline).await?;
            // Armed before the create is sent: a create dropped in flight is followed, on the
            // same session, by the delete.
            let cleanup =
                MemberCleanup { framework: self.framework.clone(), path: member_path.clone(), armed: true };
            self.create_member(&member_path, deadline).await?;
            let waited =
                deadline.run(async { Ok(self.wait_for_members(&mut watch, &member_name, deadline).await) });
            let ready_czxid = match waited.await {
                Ok(Ok(czxid)) => czxid,
                Ok(Err(err)) => return Err(err),
                Err(err) => {
                    debug!(%err, "not everyone entered in time: leaving");
                    return Err(err.into());
                }
            };
            debug!("everyone entered");
            Ok(Entered {
                framework: self.framework.clone(),
                barrier_path: self.barrier_path.clone(),
                ready_path: self.ready_path.clone(),
                member_path: member_path.clone(),
                ready_czxid,
                cleanup,
            })
        }
        .instrument(span)
        .await
    }

    async fn create_member(&self, member_path: &str, deadline: Deadline) -> Result<()> {
        let created = self
            .framework
            .create(member_path)
            .mode(CreateMode::Ephemeral)
            .data(local_address())
            .creating_parents(ParentMode::Container)
            .deadline(deadline)
            .await;
        match created {
            Ok(_) => Ok(()),
            // Our own create, retried after a connection loss (the name is a fresh UUID); if it
            // belonged to a lost session, the wait finds it gone.
            Err(err) if err.is_node_exists() => Ok(()),
            Err(err) => Err(err.into()),
        }
    }

    /// Reads the barrier until `ready` exists or enough members are there (then creates
    /// `ready`); returns the `ready` node's czxid, which tells this round's node from a later
    /// round's.
    async fn wait_for_members(
        &self,
        watch: &mut PersistentWatch,
        member_name: &str,
        deadline: Deadline,
    ) -> Result<i64> {
        loop {
            let children = match self.framework.children(&self.barrier_path, deadline).await {
                Ok((children, _)) => children,
                Err(err) if err.is_no_node() => Vec::new(),
                Err(err) => return Err(err.into()),
            };
            if !children.iter().any(|child| child == member_name) {
                return Err(BarrierError::MemberLost { path: path::join(&self.barrier_path, member_name) });
            }
            if children.iter().any(|child| child == READY_NODE) {
                match self.framework.exists(&self.ready_path, deadline).await? {
                    Some(stat) => return Ok(stat.czxid),
                    None => continue,
                }
            }
            let members = children.iter().filter(|child| *child != READY_NODE).count();
            if members >= self.member_count {
                let created =
                    self.framework.create(&self.ready_path).data(local_address()).deadline(deadline).await;
                match created {
                    Ok(created) => {
                        debug!(members, "created ready");
                        return Ok(created.stat.czxid);
                    }
                    // Someone else's (or our retried create's): read it.
                    Err(err) if err.is_node_exists() => continue,
                    Err(err) => return Err(err.into()),
                }
            }
            debug!(members, needed = self.member_count, "waiting for members");
            // Any event only says "read again": never taken as the barrier opening.
            if watch.next().await.is_none() {
                return Err(zk_recipes_framework::Error::Closed.into());
            }
        }
    }
}

/// A member inside a [`DistributedDoubleBarrier`], from a successful
/// [`enter`](DistributedDoubleBarrier::enter) until it leaves.
///
/// [`leave`](Self::leave) takes its node away (in Curator's order) and waits until every member of
/// the round has left.
/// Dropping it leaves without waiting: its node is deleted in the background. After its session
/// is lost its node is gone already; `leave` then only waits for the others.
///
/// ```no_run
/// # async fn demo(barrier: zk_recipes_barrier::DistributedDoubleBarrier) -> Result<(), zk_recipes_barrier::BarrierError> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
///
/// let entered = barrier.enter(Deadline::after(Duration::from_secs(30))).await?;
/// println!("in as {}", entered.member_path());
/// entered.leave(Deadline::after(Duration::from_secs(30))).await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping it leaves the barrier at once, without waiting for the other members"]
pub struct Entered {
    framework: Framework,
    barrier_path: String,
    ready_path: String,
    member_path: String,
    /// The czxid of the `ready` node of the round this member entered.
    ready_czxid: i64,
    cleanup: MemberCleanup,
}

impl Entered {
    /// This member's node, `<barrier_path>/<uuid>`.
    ///
    /// ```no_run
    /// # async fn demo(barrier: zk_recipes_barrier::DistributedDoubleBarrier) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// let entered = barrier.enter(zk_recipes_framework::Deadline::never()).await?;
    /// assert!(entered.member_path().starts_with(barrier.path()));
    /// # drop(entered);
    /// # Ok(()) }
    /// ```
    pub fn member_path(&self) -> &str {
        &self.member_path
    }

    /// Leaves the barrier: waits until every member has left (Curator's `leave`), then deletes
    /// `ready`.
    ///
    /// The node goes in Curator's order: a member whose name is not the lowest of those listed
    /// deletes its node at once; the lowest keeps its node until every other member is gone.
    /// Curator 5.4's members take the lowest node's going for the end of the round (woken with one
    /// member listed, they return), so a lowest member that left first would let them out while
    /// another member is still inside.
    ///
    /// The round is over, too, once this round's `ready` node is gone or replaced and no member
    /// that entered before it was created is left: members already entering the next round on
    /// the same path are not waited for (Curator's `leave` waits for them, and can deadlock with
    /// them), while a member of this round that has not left yet still is, even after Curator
    /// 5.4 deleted `ready` early.
    ///
    /// # Errors
    /// A framework timeout at `deadline` ([`BarrierError::is_timeout`]): this member has left
    /// (its node is deleted, in the background if it was still the lowest), others had not.
    /// Framework errors from the server.
    ///
    /// # Cancel safety
    /// Dropping the future still deletes the member's node (in the background); it stops only
    /// the wait for the others.
    ///
    /// ```no_run
    /// # async fn demo(entered: zk_recipes_barrier::Entered) -> Result<(), zk_recipes_barrier::BarrierError> {
    /// use std::time::Duration;
    /// match entered.leave(zk_recipes_framework::Deadline::after(Duration::from_secs(30))).await {
    ///     Ok(()) => println!("everyone is out"),
    ///     Err(err) if err.is_timeout() => println!("we are out; some others are not yet"),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn leave(mut self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        let session = self.framework.current().session_id;
        let span = info_span!(
            "double_barrier_leave",
            path = %self.barrier_path,
            member = %path::name(&self.member_path),
            ?session
        );
        async {
            let mut watch = self.framework.watch(&self.barrier_path, false, deadline).await?;
            deadline.run(async { Ok(self.wait_for_all_gone(&mut watch, deadline).await) }).await?
        }
        .instrument(span)
        .await
    }

    async fn wait_for_all_gone(&mut self, watch: &mut PersistentWatch, deadline: Deadline) -> Result<()> {
        let our_name = path::name(&self.member_path).to_owned();
        loop {
            let children = match self.framework.children(&self.barrier_path, deadline).await {
                Ok((children, _)) => children,
                Err(err) if err.is_no_node() => Vec::new(),
                Err(err) => return Err(err.into()),
            };
            let members: Vec<&String> = children.iter().filter(|child| *child != READY_NODE).collect();
            let others: Vec<&String> =
                members.iter().copied().filter(|member| **member != our_name).collect();
            let step = leave_step(&members, &our_name);
            // Gone already if our session was lost: the delete is then a no-op.
            if step.delete_own_node {
                self.delete_own_node(deadline).await?;
            }
            if step.everyone_left {
                self.delete_ready(deadline).await?;
                debug!("everyone left");
                return Ok(());
            }
            let ready = if children.iter().any(|child| child == READY_NODE) {
                self.framework.exists(&self.ready_path, deadline).await?
            } else {
                None
            };
            let round_open = ready.is_some_and(|stat| stat.czxid == self.ready_czxid);
            if !round_open && !self.any_entered_before_ready(&others, deadline).await? {
                self.delete_own_node(deadline).await?;
                debug!(members = others.len(), "this round's ready node is gone: everyone of the round left");
                return Ok(());
            }
            debug!(
                members = members.len(),
                round_open,
                kept_own_node = !step.delete_own_node,
                "waiting for members to leave"
            );
            if watch.next().await.is_none() {
                return Err(zk_recipes_framework::Error::Closed.into());
            }
        }
    }

    /// Deletes this member's node (once; a node already gone is fine).
    async fn delete_own_node(&mut self, deadline: Deadline) -> Result<()> {
        if self.cleanup.armed {
            self.framework.delete(&self.member_path).quietly().guaranteed().deadline(deadline).await?;
            self.cleanup.armed = false;
        }
        Ok(())
    }

    /// Whether one of `members` was created before this round's `ready` node: a member of this
    /// round for sure, still inside although `ready` is gone (Curator 5.4's `leave` deletes
    /// `ready` once only the lowest member is left, whether or not that one has left). Members
    /// created later may be late arrivals or the next round's; they are not waited for then.
    async fn any_entered_before_ready(&self, members: &[&String], deadline: Deadline) -> Result<bool> {
        for member in members {
            let member_path = path::join(&self.barrier_path, member);
            if let Some(stat) = self.framework.exists(&member_path, deadline).await? {
                if stat.czxid < self.ready_czxid {
                    return Ok(true);
                }
            }
        }
        Ok(false)
    }

    /// Deletes `ready` if it is still this round's.
    async fn delete_ready(&self, deadline: Deadline) -> Result<()> {
        let Some(stat) = self.framework.exists(&self.ready_path, deadline).await? else { return Ok(()) };
        if stat.czxid != self.ready_czxid {
            return Ok(());
        }
        let deleted =
            self.framework.delete(&self.ready_path).version(stat.version).quietly().deadline(deadline).await;
        match deleted {
            Ok(()) => Ok(()),
            // Changed meanwhile: not ours to delete any more.
            Err(zk_recipes_framework::Error::ZooKeeper(
                zk_recipes_framework::zookeeper_client::Error::BadVersion,
            )) => Ok(()),
            Err(err) => Err(err.into()),
        }
    }
}

impl std::fmt::Debug for DistributedDoubleBarrier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DistributedDoubleBarrier")
            .field("barrier_path", &self.barrier_path)
            .field("member_count", &self.member_count)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Entered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Entered")
            .field("member_path", &self.member_path)
            .field("ready_czxid", &self.ready_czxid)
            .finish_non_exhaustive()
    }
}

/// Deletes a member node in the background when dropped, unless disarmed.
struct MemberCleanup {
    framework: Framework,
    path: String,
    armed: bool,
}

impl Drop for MemberCleanup {
    fn drop(&mut self) {
        if self.armed {
            debug!(path = %self.path, "member dropped: deleting its node in the background");
            self.framework.delete_in_background(self.path.clone());
        }
    }
}
