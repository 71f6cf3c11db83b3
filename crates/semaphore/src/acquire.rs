//! Acquiring a [`Semaphore`]'s leases: one or many, waiting or not. The internal lock is held
//! while the lease nodes are created and waited on, and given back whatever happens.

use std::time::Duration;

use tracing::debug;
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{local_address, Deadline, Error as FrameworkError, OwnedNode};
use zk_recipes_lock_internals::{HeldLease, LockError, Wait, RELEASE_TIMEOUT};

use crate::error::{Result, SemaphoreError};
use crate::layout::LEASE_NAME;
use crate::lease::Lease;
use crate::semaphore::Semaphore;

impl Semaphore {
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
}

async fn release_quietly(internal_lock: HeldLease) {
    if let Err(err) = internal_lock.release(Deadline::after(RELEASE_TIMEOUT)).await {
        debug!(%err, "releasing the internal lock failed; the cleanup worker deletes it");
    }
}
