//! The acquire loop every lock shares. Its `Box::pin`s and `*_inner` functions keep a waiting
//! acquire's future small: see "Why some futures are boxed" in the crate docs.

use std::sync::Arc;

use std::time::{Duration, Instant};

use tracing::{debug, debug_span, warn, Instrument};
use zk_recipes_framework::zookeeper_client::{self, EventType, SessionState};
use zk_recipes_framework::{path, Deadline, Error as FrameworkError, Framework, OwnedNode, ProtectedCreate};

use std::future::Future;

use futures::future::{BoxFuture, FutureExt, TryFutureExt};

use crate::driver::{Decision, LockDriver};
use crate::error::{LockError, Result};
use crate::lease::HeldLease;
use crate::listing::{self, PipelinedFlag, SortedChildren};

/// Whether an acquire waits for the holders, and the deadline of the whole call.
///
/// [`Wait::Until`] waits in line until the deadline; [`Wait::TryOnce`] takes the lock only if it
/// is free now, and its deadline bounds that one try: creating the node, listing once, and giving
/// the node back when the lock is taken.
///
/// ```no_run
/// # use zk_recipes_lock_internals::LockInternals;
/// # async fn demo(internals: LockInternals) -> zk_recipes_lock_internals::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::{Hold, Wait};
///
/// // Only if it is free now.
/// match internals.acquire(b"", Wait::TryOnce(Deadline::after(Duration::from_secs(5)))).await? {
///     Some(held) => println!("holding {}", held.node_path()),
///     None => println!("taken: our node was given back"),
/// }
/// // Waiting for it, at most ten seconds (a timeout is an error).
/// let held = internals.acquire(b"", Wait::Until(Deadline::after(Duration::from_secs(10)))).await?;
/// assert!(held.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Wait {
    /// Wait in line until the deadline (reaching it is a timeout error).
    Until(Deadline),
    /// Do not wait for the holders: take the lock if it is free now, else give the node back,
    /// all within the deadline.
    TryOnce(Deadline),
}

impl Wait {
    /// The deadline of the whole call.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zk_recipes_framework::Deadline;
    /// use zk_recipes_lock_internals::Wait;
    ///
    /// let wait = Wait::TryOnce(Deadline::after(Duration::from_secs(5)));
    /// assert!(wait.deadline().remaining().is_some());
    /// ```
    pub fn deadline(self) -> Deadline {
        match self {
            Wait::Until(deadline) | Wait::TryOnce(deadline) => deadline,
        }
    }
}

/// One lock directory with its driver: creates our contender node, lists and sorts the
/// contenders, asks the driver, and waits on exactly the one node it names.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_lock_internals::Result<()> {
/// use std::{sync::Arc, time::Duration};
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::{LockInternals, StandardDriver, Wait};
///
/// let internals = LockInternals::new(&framework, "/app/lock", Arc::new(StandardDriver::new("lock-")), 1)?;
/// let held = internals
///     .acquire(b"10.0.0.7", Wait::Until(Deadline::after(Duration::from_secs(5))))
///     .await?
///     .expect("waited until held");
/// held.release(Deadline::after(Duration::from_secs(5))).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct LockInternals {
    framework: Framework,
    dir: String,
    driver: Arc<dyn LockDriver>,
    pipelined: PipelinedFlag,
    max_leases: u32,
    revocable: bool,
    same_session_warning: Arc<SameSessionWarning>,
    metrics: crate::metrics::LockMetrics,
    before_watch: Option<BeforeWatchHook>,
}

/// A test hook run after a listing chose the node to watch and before the watch is set.
#[derive(Clone)]
struct BeforeWatchHook(Arc<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>);

impl std::fmt::Debug for BeforeWatchHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeWatchHook")
    }
}

/// Our node, queued in the lock directory, with what the listing right after its create said:
/// [`LockInternals::enqueue`] makes one, [`LockInternals::wait_queued`] waits on it. Dropping it
/// deletes the node (in the background).
///
/// ```no_run
/// # async fn demo(internals: zk_recipes_lock_internals::LockInternals) -> zk_recipes_lock_internals::Result<()> {
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::Wait;
///
/// let queued = internals.enqueue(b"", Deadline::never()).await?;
/// println!("{} is number {} in the queue", queued.node_path(), queued.position());
/// let held = internals.wait_queued(queued, Wait::Until(Deadline::never())).await?;
/// # Ok(()) }
/// ```
#[must_use = "dropping a queued node gives up its place (the node is deleted)"]
#[derive(Debug)]
pub struct QueuedNode {
    node: OwnedNode,
    decision: Decision,
    position: usize,
    started: Instant,
}

impl QueuedNode {
    /// Whether our node held the lock at the listing after its create.
    pub fn is_owner(&self) -> bool {
        self.decision.holds
    }

    /// Our node's index among the sorted contenders at that listing (0: first in line).
    pub fn position(&self) -> usize {
        self.position
    }

    /// Our node's full path.
    pub fn node_path(&self) -> &str {
        self.node.path()
    }

    /// The node we wait behind, if we do not hold (a name in the lock directory).
    pub fn waits_behind(&self) -> Option<&str> {
        self.decision.path_to_watch.as_deref()
    }
}

impl LockInternals {
    /// A lock on directory `dir`.
    ///
    /// # Errors
    /// [`FrameworkError::InvalidPath`] for a bad `dir`, [`LockError::ZeroLeases`] for
    /// `max_leases == 0`; nothing is sent.
    pub fn new(
        framework: &Framework,
        dir: &str,
        driver: Arc<dyn LockDriver>,
        max_leases: u32,
    ) -> Result<Self> {
        path::validate(dir).map_err(|reason| FrameworkError::InvalidPath { path: dir.to_owned(), reason })?;
        if max_leases == 0 {
            return Err(LockError::ZeroLeases);
        }
        Ok(Self {
            framework: framework.clone(),
            dir: dir.to_owned(),
            max_leases,
            revocable: false,
            same_session_warning: Arc::default(),
            metrics: crate::metrics::LockMetrics::new(framework, dir, driver.lock_name()),
            pipelined: PipelinedFlag::of(framework, dir, &driver),
            driver,
            before_watch: None,
        })
    }

    /// Runs `hook` with the name of the node an acquire is about to watch, after the listing that
    /// chose it and before the watch is set: for tests that change the directory in that window.
    #[doc(hidden)]
    pub fn before_watch_hook(
        mut self,
        hook: Arc<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>,
    ) -> Self {
        self.before_watch = Some(BeforeWatchHook(hook));
        self
    }

    /// The driver: the layout's node name, sort and rule.
    pub fn driver(&self) -> &Arc<dyn LockDriver> {
        &self.driver
    }

    /// Makes our nodes revocable, as Curator's `makeRevocable`: they are created with empty data,
    /// and anyone may ask their owner to give them up with [`crate::revoke`]. A waiter that is asked
    /// gives up its place ([`LockError::Revoked`]); a holder learns of it from
    /// [`Hold::revocation_requested`](crate::Hold::revocation_requested) and decides.
    pub fn revocable(mut self) -> Self {
        self.revocable = true;
        self
    }

    /// Whether our nodes are revocable.
    pub fn is_revocable(&self) -> bool {
        self.revocable
    }

    /// The lock directory.
    pub fn dir(&self) -> &str {
        &self.dir
    }

    /// The framework.
    pub fn framework(&self) -> &Framework {
        &self.framework
    }

    /// How many may hold at once.
    pub fn max_leases(&self) -> u32 {
        self.max_leases
    }

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
                if decision.holds {
                    // The listing ran on the session that created our node and contains it, so
                    // the node's ephemeral owner is our current session (Curator's CURATOR-604
                    // check).
                    return Ok(Some(HeldLease::new(queued.node)));
                }
                let Wait::Until(_) = wait else {
                    let giving_back = Box::pin(give_back(queued.node, deadline));
                    giving_back.await;
                    return Ok(None);
                };
                let Some(watched) = decision.path_to_watch else {
                    continue;
                };
                if let Some(hook) = &self.before_watch {
                    (hook.0)(watched.clone()).await;
                }
                let watched_path = path::join(&self.dir, &watched);
                let waiting = Box::pin(self.wait_for_deletion(&queued.node, &watched_path, deadline));
                let outcome = waiting.await?;
                match outcome {
                    Watched::Deleted if decision.holds_once_watched_node_goes => {
                        debug!(%watched_path, "predecessor gone and it was first: held without listing again");
                        return Ok(Some(HeldLease::new(queued.node)));
                    }
                    Watched::Deleted | Watched::Changed => {}
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

    /// The contenders in order, with their data: sorted full paths.
    ///
    /// # Errors
    /// As [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn participants(&self, deadline: impl Into<Deadline>) -> Result<Vec<(String, Vec<u8>)>> {
        let deadline = deadline.into();
        let dir = self.dir.as_str();
        let driver = &self.driver;
        let participants = self
            .framework
            .retry(deadline, |session| async move {
                let children = match session.client().list_children(dir).await {
                    Ok(children) => children,
                    Err(zookeeper_client::Error::NoNode) => return Ok(Vec::new()),
                    Err(err) => return Err(err.into()),
                };
                let mut participants = Vec::with_capacity(children.len());
                for child in driver.sort_children(children) {
                    let child_path = path::join(dir, &child);
                    match session.client().get_data(&child_path).await {
                        Ok((data, _)) => participants.push((child_path, data)),
                        Err(zookeeper_client::Error::NoNode) => {}
                        Err(err) => return Err(err.into()),
                    }
                }
                Ok(participants)
            })
            .await?;
        Ok(participants)
    }
}

/// The data Curator's `Revoker` writes to a lock node to ask its owner to let go.
pub const REVOKE_MESSAGE: &[u8] = b"__REVOKE__";

/// Asks the owner of the revocable lock node `node_path` to give it up, as Curator's
/// `Revoker.attemptRevoke`: writes [`REVOKE_MESSAGE`] to the node. A node already gone is not an
/// error. Works on Rust and Java (Curator) holders alike.
///
/// # Errors
/// As [`Framework::retry`].
///
/// # Cancel safety
/// If cancelled after the request was sent, the revocation may or may not have been written;
/// writing it again is harmless.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_lock_internals::Result<()> {
/// use zk_recipes_framework::Deadline;
/// let holder = "/app/lock/_c_2b4c...-lock-0000000007";
/// zk_recipes_lock_internals::revoke(&framework, holder, Deadline::after(std::time::Duration::from_secs(5))).await?;
/// # Ok(()) }
/// ```
pub async fn revoke(framework: &Framework, node_path: &str, deadline: impl Into<Deadline>) -> Result<()> {
    let deadline = deadline.into();
    path::validate(node_path)
        .map_err(|reason| FrameworkError::InvalidPath { path: node_path.to_owned(), reason })?;
    framework
        .retry(deadline, |session| async move {
            match session.client().set_data(node_path, REVOKE_MESSAGE, None).await {
                Ok(_) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                Err(err) => Err(err.into()),
            }
        })
        .await?;
    Ok(())
}

/// Resolves with `Ok` when `node_path`'s data becomes [`REVOKE_MESSAGE`]; with
/// [`LockError::NodeLost`] when the node goes or its session (`generation`) is lost, as soon as
/// the framework declares it lost (even while the server is out of reach).
pub(crate) async fn wait_for_revocation(
    framework: &Framework,
    node_path: &str,
    generation: u64,
) -> Result<()> {
    tokio::select! {
        asked = watch_for_revocation(framework, node_path, generation) => asked,
        ended = framework.session_lost(generation) => Err(match ended {
            Ok(()) => LockError::NodeLost { path: node_path.to_owned() },
            Err(err) => err.into(),
        }),
    }
}

/// [`wait_for_revocation`] without the session's end: reads and watches the node's data.
async fn watch_for_revocation(framework: &Framework, node_path: &str, generation: u64) -> Result<()> {
    let lost = || LockError::NodeLost { path: node_path.to_owned() };
    loop {
        let session = framework
            .session_of(generation, Deadline::never())
            .await
            .map_err(LockError::of_call_on_node(node_path))?;
        let watcher = match session.client().get_and_watch_data(node_path).await {
            Ok((data, _, _)) if data == REVOKE_MESSAGE => return Ok(()),
            Ok((_, _, watcher)) => watcher,
            Err(zookeeper_client::Error::NoNode) => return Err(lost()),
            Err(err) if FrameworkError::from(err.clone()).is_retryable() => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                continue;
            }
            Err(err) => return Err(FrameworkError::from(err).into()),
        };
        drop(session);
        if watcher.changed().await.event_type == EventType::Session {
            return Err(lost());
        }
    }
}

/// The warning for an acquire that waits behind a node of its own session: a second `lock()` in
/// the task that holds the lock waits for ever. It is not an error (other tasks of the process may
/// wait behind each other on purpose), so it is logged: the first time at once, then at most once
/// a minute per lock (its clones share this), with a count of the ones left out.
#[derive(Debug, Default)]
struct SameSessionWarning {
    /// When the last warning was logged, and how many were left out since.
    last: parking_lot::Mutex<Option<(Instant, u64)>>,
}

impl SameSessionWarning {
    const INTERVAL: Duration = Duration::from_secs(60);

    fn warn(&self, dir: &str, watched_path: &str) {
        let mut last = self.last.lock();
        let left_out = match &mut *last {
            Some((at, left_out)) if at.elapsed() < Self::INTERVAL => {
                *left_out += 1;
                return;
            }
            Some((_, left_out)) => *left_out,
            None => 0,
        };
        *last = Some((Instant::now(), 0));
        drop(last);
        warn!(
            lock = dir,
            watched = watched_path,
            left_out,
            "this acquire waits behind a node of its own session: if the task that holds this lock \
             locks it again, it waits for ever; take another guard of the hold with guard.reenter() \
             instead (other tasks of this process waiting their turn is fine)"
        );
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
