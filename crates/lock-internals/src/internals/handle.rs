//! [`LockInternals`]: one lock directory with its driver, its settings and accessors, and the
//! listing of its participants. The acquire itself is in [`super::acquire`].

use std::sync::Arc;

use futures::future::BoxFuture;
use zk_recipes_framework::zookeeper_client;
use zk_recipes_framework::{path, Deadline, Error as FrameworkError, Framework};

use super::same_session::SameSessionWarning;
use crate::driver::LockDriver;
use crate::error::{LockError, Result};
use crate::listing::PipelinedFlag;

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
    pub(super) framework: Framework,
    pub(super) dir: String,
    pub(super) driver: Arc<dyn LockDriver>,
    pub(super) pipelined: PipelinedFlag,
    pub(super) max_leases: u32,
    pub(super) revocable: bool,
    pub(super) same_session_warning: Arc<SameSessionWarning>,
    pub(super) metrics: crate::metrics::LockMetrics,
    pub(super) before_watch: Option<BeforeWatchHook>,
}

/// A test hook run after a listing chose the node to watch and before the watch is set.
#[derive(Clone)]
pub(super) struct BeforeWatchHook(pub(super) Arc<dyn Fn(String) -> BoxFuture<'static, ()> + Send + Sync>);

impl std::fmt::Debug for BeforeWatchHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BeforeWatchHook")
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
