//! Leader election on kazoo's layout: kazoo's `Election` (`kazoo/recipe/election.py`, 2.11) is
//! its `Lock` — the leader is the holder — so ours is the mutex on the kazoo layout.

use std::future::Future;

use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_lock_internals::KazooDriver;
use zk_recipes_mutex::{Hold, LockLayout, LostReason, Mutex, MutexGuard};

use crate::error::{LeaderError, Result};

/// An election that kazoo's `Election` on the same path takes part in: nodes
/// `<path>/<uuid hex>__lock__<seq>` holding our identifier; the contender with the lowest
/// sequence leads, the others wait in line, each behind the one before it.
///
/// Cheap to clone; each [`lead`](Self::lead) queues on its own.
///
/// ## Connection loss and session expiry
/// A waiting `lead` fails with a [`LeaderError::Lock`] node-lost error if the session is lost. A
/// leader should watch [`KazooLeadership::lost`]: from then on another contender may lead.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_leader::Result<()> {
/// use zk_recipes_leader::KazooElection;
///
/// let election = KazooElection::new(&framework, "/app/election", "worker-7")?;
/// let leadership = election.lead().await?;
/// println!("leading; contenders: {:?}", election.contenders().await?);
/// leadership.release().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct KazooElection {
    mutex: Mutex,
    identifier: String,
}

impl KazooElection {
    /// An election on `path`, taking part as `identifier` (what kazoo's `contenders()` lists).
    ///
    /// # Errors
    /// An invalid path, before anything is sent.
    pub fn new(framework: &Framework, path: &str, identifier: impl Into<String>) -> Result<Self> {
        let identifier = identifier.into();
        let mutex = Mutex::with_layout(framework, path, LockLayout::Kazoo)?.node_data(identifier.as_bytes());
        Ok(Self { mutex, identifier })
    }

    /// Our identifier.
    pub fn identifier(&self) -> &str {
        &self.identifier
    }

    /// Waits until we lead, as long as it takes.
    ///
    /// # Errors
    /// [`LeaderError::Lock`] if our node is lost (session lost) while waiting; framework errors.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lead` loses its place in line; its node, if it was created, is
    /// deleted by the framework's cleanup worker.
    pub async fn lead(&self) -> Result<KazooLeadership> {
        self.lead_until(Deadline::never()).await
    }

    /// Waits until we lead, at most until `deadline`.
    ///
    /// # Errors
    /// A timeout at the deadline ([`LeaderError::Framework`] with a timeout,
    /// [`LeaderError::is_timeout`]): our node is deleted.
    /// Otherwise as [`lead`](Self::lead).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled `lead_until` loses its place in line; its node, if it was created,
    /// is deleted by the framework's cleanup worker.
    pub async fn lead_until(&self, deadline: impl Into<Deadline>) -> Result<KazooLeadership> {
        let deadline = deadline.into();
        Ok(KazooLeadership { guard: self.mutex.lock_until(deadline).await? })
    }

    /// kazoo's `Election.run`: waits until we lead, runs `leading`, then gives leadership up
    /// (whatever `leading` returned).
    ///
    /// # Errors
    /// As [`lead`](Self::lead); releasing failed.
    ///
    /// # Cancel safety
    /// Cancel safe, but `leading` is dropped where it stands: a cancelled `run` gives up leadership
    /// (or its place in line), and the framework's cleanup worker deletes its node in the
    /// background.
    pub async fn run<T, Fut>(&self, leading: impl FnOnce(&KazooLeadership) -> Fut) -> Result<T>
    where
        Fut: Future<Output = T>,
    {
        let leadership = self.lead().await?;
        let outcome = leading(&leadership).await;
        leadership.release().await?;
        Ok(outcome)
    }

    /// The identifiers of the contenders in line order, the leader first, as kazoo's
    /// `Election.contenders()` lists them (kazoo's and ours alike; nodes of other layouts are not
    /// contenders).
    ///
    /// # Errors
    /// As [`zk_recipes_framework::Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn contenders(&self) -> Result<Vec<String>> {
        let participants = self.mutex.participants().await?;
        let driver = KazooDriver::lock();
        Ok(participants
            .into_iter()
            .filter(|(node_path, _)| driver.is_contender(zk_recipes_framework::path::name(node_path)))
            .map(|(_, data)| String::from_utf8_lossy(&data).into_owned())
            .collect())
    }
}

/// Leadership in a [`KazooElection`]: we hold its lock. Given up by
/// [`release`](Self::release), or in the background when dropped.
///
/// ```no_run
/// # async fn demo(election: zk_recipes_leader::KazooElection) -> zk_recipes_leader::Result<()> {
/// let leadership = election.lead().await?;
/// tokio::select! {
///     reason = leadership.lost() => println!("leadership lost: {reason:?}"),
///     _ = tokio::time::sleep(std::time::Duration::from_secs(1)) => leadership.release().await?,
/// }
/// # Ok(()) }
/// ```
#[must_use = "dropping a leadership gives it up"]
#[derive(Debug)]
pub struct KazooLeadership {
    guard: MutexGuard,
}

impl KazooLeadership {
    /// Our node's full path.
    pub fn node_path(&self) -> &str {
        self.guard.node_path()
    }

    /// A token that grows strictly from one leader to the next (our node's `czxid`).
    pub fn fencing_token(&self) -> i64 {
        self.guard.fencing_token()
    }

    /// Resolves when this leadership can no longer be trusted (see [`Hold::lost`]).
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads and waits, and a later call checks the current state first, so a
    /// loss that came meanwhile is not missed.
    pub async fn lost(&self) -> LostReason {
        self.guard.lost().await
    }

    /// Gives leadership up: deletes our node on the session that owns it.
    ///
    /// # Errors
    /// As [`MutexGuard::release`].
    ///
    /// # Cancel safety
    /// Cancel safe: leadership is given up either way. A cancelled release leaves the delete to the
    /// framework's cleanup worker, which deletes the node in the background.
    pub async fn release(self) -> Result<()> {
        self.guard.release().await.map_err(LeaderError::from)
    }
}
