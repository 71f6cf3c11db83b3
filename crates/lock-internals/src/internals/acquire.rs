//! The acquire loop every lock shares: [`LockInternals::acquire`], and its two halves
//! [`LockInternals::enqueue`] and [`LockInternals::wait_queued`]. Its `Box::pin`s and `*_inner`
//! functions keep a waiting acquire's future small: see "Why some futures are boxed" in the crate
//! docs.

use std::future::Future;
use std::time::Instant;

use futures::future::{FutureExt, TryFutureExt};
use tracing::{debug, debug_span, Instrument};
use zk_recipes_framework::zookeeper_client::{EventType, SessionState};
use zk_recipes_framework::{path, Deadline, OwnedNode, ProtectedCreate};

use super::handle::LockInternals;
use super::queued::QueuedNode;
use super::wait::Wait;
use crate::driver::{Decision, NextStep};
use crate::error::{LockError, Result};
use crate::lease::HeldLease;
use crate::listing::{self, SortedChildren};
use crate::revocation::wait_for_revocation;

impl LockInternals {
    /// Queues for the lock with a node holding `data` and, per `wait`, waits until it holds.
    /// `Ok(None)` only for [`Wait::TryOnce`] when the lock is taken.
    ///
    /// # Errors
    /// [`LockError::NodeLost`] if our node vanishes while we wait (session lost); framework errors
    /// (a timeout at the deadline, a closed framework, connection errors the retry policy gave up
    /// on). On every error our node is deleted.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled acquire loses its place in line; its node, if it was created (even
    /// if the create's reply was still in flight), is deleted by the framework's cleanup worker.
    pub async fn acquire(&self, data: &[u8], wait: Wait) -> Result<Option<HeldLease>> {
        let enqueuing = Box::pin(self.enqueue(data, wait.deadline()));
        let queued = enqueuing.await?;
        if queued.decision.holds {
            // Held at the first listing (the uncontended case): nothing to wait for.
            return Ok(Some(self.held(queued.node, queued.started)));
        }
        let waiting = Box::pin(self.wait_queued(queued, wait));
        waiting.await
    }

    /// Creates our node and lists the contenders once: the first half of [`acquire`](Self::acquire),
    /// for callers that want to know their place before waiting (ZooKeeper's recipe's non-blocking
    /// `lock()`). Finish with [`wait_queued`](Self::wait_queued), or drop the result to give the
    /// place up.
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire); on every error our node is deleted.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled enqueue gets no place in line; its node, if it was created, is
    /// deleted by the framework's cleanup worker.
    pub fn enqueue<'a>(
        &'a self,
        data: &'a [u8],
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<QueuedNode>> + Send + 'a {
        let span = debug_span!("enqueue", dir = %self.dir, lock = self.driver.lock_name());
        let started = Instant::now();
        self.enqueue_inner(data, deadline.into(), started).instrument(span).inspect_err(|err| {
            if err.is_timeout() {
                self.metrics.timed_out();
            }
        })
    }

    #[allow(clippy::manual_async_fn)] // see "Why some futures are boxed" in the crate docs
    fn enqueue_inner<'a>(
        &'a self,
        data: &'a [u8],
        deadline: Deadline,
        started: Instant,
    ) -> impl Future<Output = Result<QueuedNode>> + Send + 'a {
        async move {
            // Curator creates revocable nodes with empty data.
            let data = if self.revocable { &[][..] } else { data };
            // The first listing rides along with the create (one round trip for both), unless another
            // enqueue of this framework on this lock is doing that right now: then this one creates
            // alone and shares the next listing with the others (see `listing`).
            let marker = self.driver.marker();
            let name = self.driver.lock_name();
            let pipelined = self.pipelined.start();
            let request = ProtectedCreate::new(&self.dir, name)
                .data(data)
                .marker(&marker)
                .list_siblings(pipelined.is_some());
            let mut node = self.framework.create_protected(request, deadline).await?;
            drop(pipelined);
            let listing = node.take_siblings();
            debug!(node = %node.path(), "queued");
            let (decision, position) = match listing {
                Some(children) => {
                    let children = self.driver.sort_children(children);
                    self.decide(&node, &children)?
                }
                None => {
                    let listing = Box::pin(self.sorted_children_of(&node, deadline));
                    self.decide(&node, &listing.await?)?
                }
            };
            Ok(QueuedNode { node, decision, position, started })
        }
    }

    /// Our queued `node` holds: a lease, timed from `started` (when its enqueue began).
    fn held(&self, node: OwnedNode, started: Instant) -> HeldLease {
        HeldLease::new(node).timed(self.metrics.acquired(started))
    }

    /// Asks the driver about the sorted `children`; also our index among them.
    fn decide(&self, node: &OwnedNode, children: &[String]) -> Result<(Decision, usize)> {
        let lost = || LockError::NodeLost { path: node.path().to_owned() };
        let name = node.name();
        let decision = self.driver.gets_the_lock(children, name, self.max_leases).map_err(|_| lost())?;
        let position = children.iter().position(|child| child == name).ok_or_else(lost)?;
        Ok((decision, position))
    }

    /// Waits, per `wait`, until the node [`enqueue`](Self::enqueue) queued holds: the second half
    /// of [`acquire`](Self::acquire). `Ok(None)` only for [`Wait::TryOnce`] when the lock is taken
    /// (the node is given back).
    ///
    /// # Errors
    /// As [`acquire`](Self::acquire); on every error our node is deleted.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled wait loses its place in line: the `QueuedNode` it took is dropped,
    /// and the framework's cleanup worker deletes its node.
    pub fn wait_queued(
        &self,
        queued: QueuedNode,
        wait: Wait,
    ) -> impl Future<Output = Result<Option<HeldLease>>> + Send + '_ {
        let span = debug_span!("acquire", dir = %self.dir, node = %queued.node.path());
        let started = queued.started;
        self.wait_queued_inner(queued, wait).instrument(span).map(move |result| match result {
            Ok(Some(lease)) => Ok(Some(lease.timed(self.metrics.acquired(started)))),
            Err(err) => {
                if err.is_timeout() {
                    self.metrics.timed_out();
                }
                Err(err)
            }
            Ok(None) => Ok(None),
        })
    }

    /// The wait itself, for [`wait_queued`](Self::wait_queued).
    #[allow(clippy::manual_async_fn)] // see "Why some futures are boxed" in the crate docs
    fn wait_queued_inner(
        &self,
        queued: QueuedNode,
        wait: Wait,
    ) -> impl Future<Output = Result<Option<HeldLease>>> + Send + '_ {
        async move {
            let deadline = wait.deadline();
            let mut decided = Some(queued.decision);
            loop {
                let decision = match decided.take() {
                    Some(decision) => decision,
                    None => {
                        let listing = Box::pin(self.sorted_children_of(&queued.node, deadline));
                        let children = listing.await?;
                        self.decide(&queued.node, &children)?.0
                    }
                };
                let watched = match decision.next_step(matches!(wait, Wait::Until(_))) {
                    // The listing ran on the session that created our node and contains it, so
                    // the node's ephemeral owner is our current session (Curator's CURATOR-604
                    // check).
                    NextStep::Hold => return Ok(Some(HeldLease::new(queued.node))),
                    NextStep::GiveBack => {
                        let giving_back = Box::pin(give_back(queued.node, deadline));
                        giving_back.await;
                        return Ok(None);
                    }
                    NextStep::ListAgain => continue,
                    NextStep::Watch(watched) => watched,
                };
                if let Some(hook) = &self.before_watch {
                    (hook.0)(watched.clone()).await;
                }
                let watched_path = path::join(&self.dir, &watched);
                let waiting = Box::pin(self.wait_for_deletion(&queued.node, &watched_path, deadline));
                let deleted = matches!(waiting.await?, Watched::Deleted);
                if decision.after_watch(deleted) == NextStep::Hold {
                    debug!(%watched_path, "predecessor gone and it was first: held without listing again");
                    return Ok(Some(HeldLease::new(queued.node)));
                }
            }
        }
    }

    /// The lock directory's children in order, listed on the session that owns `node` after this
    /// call began; the listing is shared with this process's other acquires of the lock that ask
    /// at the same time (see `listing`).
    async fn sorted_children_of(&self, node: &OwnedNode, deadline: Deadline) -> Result<SortedChildren> {
        let sharing = listing::sorted_children(&self.framework, node.generation(), &self.dir, &self.driver);
        match deadline.run(sharing).await.map_err(LockError::of_call_on_node(node.path()))? {
            Some(children) => Ok(children),
            None => Err(LockError::NodeLost { path: node.path().to_owned() }),
        }
    }

    /// Waits until `watched_path` is deleted (or changes), with a data watch: no watch is left on
    /// a missing node.
    async fn wait_for_deletion(
        &self,
        node: &OwnedNode,
        watched_path: &str,
        deadline: Deadline,
    ) -> Result<Watched> {
        let generation = node.generation();
        let watching = Box::pin(self.framework.watch_data_on_session(generation, watched_path, deadline));
        let Some((stat, watcher)) = watching.await.map_err(LockError::of_call_on_node(node.path()))? else {
            return Ok(Watched::Deleted);
        };
        if stat.ephemeral_owner == node.session_id().0 {
            self.same_session_warning.warn(&self.dir, watched_path);
        }
        // Branches made in place, not moved in from locals (see the crate docs on boxed futures).
        tokio::select! {
            err = self.until_revoked(node, generation) => Err(err),
            event = watcher.changed() => match (event.event_type, event.session_state) {
                (EventType::NodeDeleted, _) => Ok(Watched::Deleted),
                (EventType::Session, SessionState::Expired | SessionState::Closed | SessionState::AuthFailed) => {
                    Err(LockError::NodeLost { path: node.path().to_owned() })
                }
                _ => Ok(Watched::Changed),
            },
            err = self.until_session_lost(node, generation) => Err(err),
            err = deadline.passed() => Err(err.into()),
        }
    }

    /// Resolves when our node's session is lost (or the framework closed).
    async fn until_session_lost(&self, node: &OwnedNode, generation: u64) -> LockError {
        match self.framework.session_lost(generation).await {
            Ok(()) => LockError::NodeLost { path: node.path().to_owned() },
            Err(err) => err.into(),
        }
    }

    /// Resolves when our (revocable) node is asked to give up its place; never for a lock that
    /// is not revocable.
    async fn until_revoked(&self, node: &OwnedNode, generation: u64) -> LockError {
        if !self.revocable {
            return std::future::pending().await;
        }
        let revocation = Box::pin(wait_for_revocation(&self.framework, node.path(), generation));
        match revocation.await {
            Ok(()) => LockError::Revoked { path: node.path().to_owned() },
            Err(err) => err,
        }
    }
}

/// How a wait on the watched node ended.
enum Watched {
    Deleted,
    Changed,
}

/// Deletes a node we queued with but do not want; on failure the node's drop hands it to the
/// cleanup worker.
async fn give_back(node: OwnedNode, deadline: Deadline) {
    if let Err(err) = node.delete(deadline).await {
        debug!(%err, "giving back the node failed; the cleanup worker deletes it");
    }
}
