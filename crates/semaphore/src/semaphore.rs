//! [`Semaphore`]: the handle, its construction and settings, and who holds and waits. Acquiring
//! is in [`crate::acquire`].

use std::sync::Arc;

use zk_recipes_framework::zookeeper_client;
use zk_recipes_framework::{local_address, path, Deadline, Error as FrameworkError, Framework};
use zk_recipes_lock_internals::{LockError, LockInternals, LockMetrics, StandardDriver, RELEASE_TIMEOUT};

use crate::error::Result;
use crate::layout::{LEASES_DIR, LEASE_NAME, LOCKS_DIR, LOCK_NAME};
use crate::participants::Participants;

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
    pub(crate) framework: Framework,
    pub(crate) path: String,
    pub(crate) internal_lock: LockInternals,
    pub(crate) leases_dir: String,
    pub(crate) max_leases: u32,
    pub(crate) data: Arc<[u8]>,
    pub(crate) metrics: LockMetrics,
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
