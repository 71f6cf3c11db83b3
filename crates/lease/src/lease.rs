//! [`Lease`], its builder and its layouts; [`Lease::acquire`] runs the layout's acquire in a task
//! of its own, so that a cancelled acquire leaves nothing behind.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tracing::Instrument;
use zk_recipes_framework::{path, Deadline, Framework, ReadableDuration, MAX_TTL};
use zk_recipes_mutex::MutexGuard;

use crate::error::{LeaseError, Result};
use crate::held::HeldLease;
use crate::holder::LeaseHolder;
use crate::layout::LeaseLayout;
use crate::state::LeaseConfig;

/// The longest holder identifier, in bytes of UTF-8.
pub const MAX_IDENTIFIER_LEN: usize = 1024;

/// The default deadline of one call ([`LeaseBuilder::timeout`]): 30 s.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);

/// A lease on a path: at most one holder at a time, each for a duration (kazoo's
/// `NonBlockingLease`, or the native TTL-node layout). Cheap to clone.
///
/// Built with [`Lease::builder`]; bad input is refused there, before anything is sent.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_lease::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_lease::Lease;
///
/// let lease = Lease::builder(&framework, "/app/leases/nightly", Duration::from_secs(60))
///     .identifier("worker-7")
///     .build()?;
/// match lease.acquire().await {
///     Ok(held) => {
///         println!("ours until {:?}, fencing token {}", held.valid_until(), held.fencing_token());
///         held.release().await?;
///     }
///     Err(err) if err.is_held() => println!("someone else runs it: {err}"),
///     Err(err) => return Err(err),
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
pub struct Lease {
    pub(crate) config: Arc<LeaseConfig>,
    pub(crate) layout: LeaseLayout,
}

/// Builds a [`Lease`] or a [`MultiLease`](crate::MultiLease): see [`Lease::builder`].
///
/// Defaults: the native layout, the identifier this host's name (kazoo's default,
/// `socket.gethostname()`), each call within [`DEFAULT_TIMEOUT`] (30 s).
///
/// ```no_run
/// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_lease::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_lease::{Lease, LeaseLayout};
///
/// let lease = Lease::builder(&framework, "/db_leases/hourly_cleanup", Duration::from_secs(70 * 60))
///     .layout(LeaseLayout::Kazoo)
///     .identifier("DB hourly cleanup on host-3")
///     .timeout(Duration::from_secs(10))
///     .build()?;
/// # let _ = lease; Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it is built"]
pub struct LeaseBuilder {
    framework: Framework,
    path: String,
    duration: Duration,
    identifier: Option<String>,
    layout: LeaseLayout,
    timeout: Duration,
}

impl LeaseBuilder {
    /// The holder's identifier: what other clients read as the holder. Defaults to this host's
    /// name, as kazoo's. In the kazoo layout a holder with the same identifier may take over an
    /// unexpired lease (kazoo's renewal); in the native layout it may not (each acquire is its
    /// own holder).
    pub fn identifier(mut self, identifier: impl Into<String>) -> Self {
        self.identifier = Some(identifier.into());
        self
    }

    /// The layout. Defaults to [`LeaseLayout::Native`].
    pub fn layout(mut self, layout: LeaseLayout) -> Self {
        self.layout = layout;
        self
    }

    /// How long each call (acquire, renew, release, holder) may take, retries and kazoo's lock
    /// wait included. Defaults to [`DEFAULT_TIMEOUT`] (30 s).
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The lease. In the kazoo layout the end is written in whole seconds (kazoo's format), cut
    /// down: a kazoo lease holds up to a second less than its duration, and one under a second
    /// may have ended when it is taken.
    ///
    /// # Errors
    /// [`LeaseError::InvalidPath`] (the root too), [`LeaseError::InvalidDuration`] (zero, under
    /// 1 ms, or over [`MAX_TTL`], the longest TTL the server takes),
    /// [`LeaseError::InvalidIdentifier`]. Nothing is sent.
    pub fn build(self) -> Result<Lease> {
        let path = self.path.clone();
        self.build_at(path)
    }

    /// The lease at `lease_path`, with the builder's settings (a multi-lease's slots are built
    /// with it too).
    pub(crate) fn build_at(self, lease_path: String) -> Result<Lease> {
        let invalid_path = |reason: String| LeaseError::InvalidPath { path: lease_path.clone(), reason };
        path::validate(&lease_path).map_err(|reason| invalid_path(reason.to_string()))?;
        if lease_path == "/" {
            return Err(invalid_path("the root cannot be a lease".into()));
        }
        validate_duration(self.duration)?;
        let identifier = match self.identifier {
            Some(identifier) => identifier,
            None => default_identifier(),
        };
        validate_identifier(&identifier)?;
        let mutex = self.layout.lock(&self.framework, &lease_path, &identifier)?;
        Ok(Lease {
            config: Arc::new(LeaseConfig {
                framework: self.framework,
                path: lease_path,
                duration: self.duration,
                identifier,
                timeout: self.timeout,
                mutex,
            }),
            layout: self.layout,
        })
    }
}

fn validate_duration(duration: Duration) -> Result<()> {
    let invalid = |reason: String| Err(LeaseError::InvalidDuration { duration, reason });
    if duration.is_zero() {
        return invalid("a lease needs a positive duration".into());
    }
    if duration < Duration::from_millis(1) {
        return invalid("the server counts a TTL in whole milliseconds: at least 1 ms".into());
    }
    if duration > MAX_TTL {
        return invalid(format!("longer than the server's longest TTL, {}", ReadableDuration(MAX_TTL)));
    }
    Ok(())
}

fn validate_identifier(identifier: &str) -> Result<()> {
    let invalid = |reason: String| Err(LeaseError::InvalidIdentifier { reason });
    if identifier.is_empty() {
        return invalid("empty".into());
    }
    if identifier.len() > MAX_IDENTIFIER_LEN {
        return invalid(format!("{} bytes, more than {MAX_IDENTIFIER_LEN}", identifier.len()));
    }
    if identifier.chars().any(char::is_control) {
        return invalid(format!("{identifier:?} holds a control character"));
    }
    Ok(())
}

/// This host's name (`uname`'s node name, what Python's `socket.gethostname()` returns).
fn default_identifier() -> String {
    let name = rustix::system::uname().nodename().to_string_lossy().into_owned();
    if name.is_empty() {
        "localhost".to_owned()
    } else {
        name
    }
}

impl Lease {
    /// Starts building a lease on `path`, held `duration` at a time.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_lease::Result<()> {
    /// use std::time::Duration;
    /// let lease = zk_recipes_lease::Lease::builder(&framework, "/app/lease", Duration::from_secs(30)).build()?;
    /// # let _ = lease; Ok(()) }
    /// ```
    pub fn builder(framework: &Framework, path: &str, duration: Duration) -> LeaseBuilder {
        LeaseBuilder {
            framework: framework.clone(),
            path: path.to_owned(),
            duration,
            identifier: None,
            layout: LeaseLayout::default(),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The lease's path.
    pub fn path(&self) -> &str {
        &self.config.path
    }

    /// Our holder identifier.
    pub fn identifier(&self) -> &str {
        &self.config.identifier
    }

    /// How long one acquire or renew holds the lease.
    pub fn duration(&self) -> Duration {
        self.config.duration
    }

    /// The layout.
    pub fn layout(&self) -> LeaseLayout {
        self.layout
    }

    /// Takes the lease if nobody else holds it (kazoo's `NonBlockingLease(...)`; it does not
    /// wait for the holder to finish).
    ///
    /// Native layout: creates the TTL node. The lease is ours from just before the create was
    /// sent until that instant plus the duration, by our monotonic clock. A create whose reply
    /// was lost is resolved by reading the node back (its data names this acquire): we hold it,
    /// or another holder does, never "unknown".
    ///
    /// kazoo layout: takes kazoo's lock on the path (waiting for it within the timeout, as kazoo
    /// waits), reads `lease_holder`, and if it is free, ended (by our wall clock), or ours by
    /// identifier, replaces it in one transaction guarded by the lock, then releases the lock.
    ///
    /// # Errors
    /// [`LeaseError::Held`] when another holder has it (nothing of ours is left on the server);
    /// native layout: a framework `MissingFeature` before anything is sent when the server has no
    /// TTL nodes;
    /// kazoo layout: [`LeaseError::UnknownVersion`], [`LeaseError::Malformed`],
    /// [`LeaseError::Lock`]; framework errors (a timeout at the builder's timeout).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled acquire holds nothing and leaves nothing. The acquire runs in a
    /// task of its own: cancelled while it waits for kazoo's lock, that wait ends (the lock node
    /// goes to the framework's cleanup worker); cancelled once the write was sent, the task
    /// finishes it and deletes what it wrote (for the native layout only while the lease would
    /// still be valid, so it can never delete a later holder's node: past that, the server's TTL
    /// ends it). A write whose reply was lost is resolved, not left unknown: natively the retried
    /// create finds our node by its data; in the kazoo layout (a transaction, sent once) the
    /// record is read back, and if it is ours the acquire holds it. A native acquire that still
    /// fails with its outcome unknown deletes its node if it finds it.
    pub async fn acquire(&self) -> Result<HeldLease> {
        self.layout.check_server(&self.config).await?;
        let lease = self.clone();
        let (mut reply, outcome) = oneshot::channel();
        let span = tracing::info_span!("lease", path = %self.config.path, layout = ?self.layout);
        tokio::spawn(
            async move {
                let deadline = Deadline::after(lease.config.timeout);
                // Waiting for kazoo's lock is the one step a caller's cancellation may end.
                let prepared = tokio::select! {
                    biased;
                    () = reply.closed() => return,
                    prepared = lease.prepare(deadline) => prepared,
                };
                let acquired = match prepared {
                    Ok(lock) => lease.commit(lock, deadline).await,
                    Err(err) => Err(err),
                };
                if let Err(Ok(unwanted)) = reply.send(acquired) {
                    tracing::debug!("the acquire was cancelled after it took the lease: giving it back");
                    if let Err(err) = unwanted.release().await {
                        tracing::warn!(%err, "giving back the lease of a cancelled acquire failed");
                    }
                }
            }
            .instrument(span),
        );
        match outcome.await {
            Ok(acquired) => acquired,
            Err(_) => Err(LeaseError::Framework(zk_recipes_framework::Error::Closed)),
        }
    }

    /// The layout's first step, which a cancellation may end: kazoo's lock.
    async fn prepare(&self, deadline: Deadline) -> Result<Option<MutexGuard>> {
        match &self.config.mutex {
            Some(mutex) => Ok(Some(mutex.lock_until(deadline).await?)),
            None => Ok(None),
        }
    }

    /// The write that takes the lease, run to its end.
    async fn commit(&self, lock: Option<MutexGuard>, deadline: Deadline) -> Result<HeldLease> {
        let state = self.layout.acquire(&self.config, lock, deadline).await?;
        Ok(HeldLease::new(Arc::clone(&self.config), self.layout, state))
    }

    /// Who holds the lease now, as stored; `None` if nobody does. kazoo's record stays after its
    /// end until somebody takes the lease: compare [`LeaseHolder::end`] with the time.
    ///
    /// # Errors
    /// [`LeaseError::Malformed`], [`LeaseError::UnknownVersion`]; framework errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    ///
    /// ```no_run
    /// # async fn demo(lease: zk_recipes_lease::Lease) -> zk_recipes_lease::Result<()> {
    /// match lease.holder().await? {
    ///     Some(holder) => println!("held by {}", holder.identifier),
    ///     None => println!("free"),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn holder(&self) -> Result<Option<LeaseHolder>> {
        let deadline = Deadline::after(self.config.timeout);
        self.layout.holder(&self.config, deadline).await
    }
}
