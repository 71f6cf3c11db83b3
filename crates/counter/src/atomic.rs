//! `DistributedAtomicValue`: compare-and-set with retries, then promotion to a mutex (Curator's
//! `DistributedAtomicValue`, `PromotedToLock`, `AtomicValue`, `AtomicStats`). The numeric
//! counters on top of it are in `number`.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;
use tracing::{debug, info_span, warn, Instrument};
use zk_recipes_framework::retry::{NoRetry, RetryPolicy};
use zk_recipes_framework::zookeeper_client::Stat;
use zk_recipes_framework::{
    path, ConditionalWrite, Deadline, Error as FrameworkError, Framework, ParentMode, WriteOutcome,
};
use zk_recipes_mutex::Mutex;

use crate::error::{CounterError, Result};

/// How an atomic operation went (Curator's `AtomicStats`).
///
/// ```
/// let stats = zk_recipes_counter::AtomicStats::default();
/// assert_eq!(stats.optimistic_tries + stats.promoted_tries, 0);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct AtomicStats {
    /// Optimistic (compare-and-set) tries made.
    pub optimistic_tries: u32,
    /// Tries made holding the promoted lock.
    pub promoted_tries: u32,
    /// Time spent trying optimistically.
    pub optimistic_time: Duration,
    /// Time spent in the promoted phase, waiting for the lock included.
    pub promoted_time: Duration,
}

/// What an atomic operation did (Curator's `AtomicValue`): whether it succeeded, the value before
/// (as last read) and after, and its [`AtomicStats`]. Always check [`succeeded`](Self::succeeded):
/// only `get` always succeeds.
///
/// ```no_run
/// # async fn demo(counter: zk_recipes_counter::DistributedAtomicLong) -> zk_recipes_counter::Result<()> {
/// let deadline = zk_recipes_framework::Deadline::after(std::time::Duration::from_secs(10));
/// let result = counter.increment(deadline).await?;
/// if result.succeeded() {
///     println!("{} -> {}", result.pre_value(), result.post_value());
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use = "an atomic operation may fail: check succeeded()"]
pub struct AtomicValue<T> {
    succeeded: bool,
    pre_value: T,
    post_value: T,
    stats: AtomicStats,
}

impl<T> AtomicValue<T> {
    /// Whether the operation was applied.
    pub fn succeeded(&self) -> bool {
        self.succeeded
    }

    /// The value before the operation (the last one read).
    pub fn pre_value(&self) -> &T {
        &self.pre_value
    }

    /// The value the operation wrote (when it succeeded; for a failed one, as Curator: "none" —
    /// `None` for bytes, 0 for a long).
    pub fn post_value(&self) -> &T {
        &self.post_value
    }

    /// How it went.
    pub fn stats(&self) -> AtomicStats {
        self.stats
    }

    /// The same outcome with both values converted.
    ///
    /// # Errors
    /// The first error `convert` returns.
    pub fn try_map<U, E>(self, mut convert: impl FnMut(T) -> Result<U, E>) -> Result<AtomicValue<U>, E> {
        Ok(AtomicValue {
            succeeded: self.succeeded,
            pre_value: convert(self.pre_value)?,
            post_value: convert(self.post_value)?,
            stats: self.stats,
        })
    }
}

/// Promotion to a mutex after the optimistic tries failed (Curator's `PromotedToLock`): the
/// lock's path, the longest wait for it (none by default: as long as the call's deadline allows),
/// and the retry policy of the tries made holding it (by default one try, as Curator's
/// `RetryNTimes(0, 0)`). The lock is a [`zk_recipes_mutex::Mutex`], Curator's `InterProcessMutex`
/// on the same path, so Java and Rust clients promoted on one counter exclude each other.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::RetryNTimes;
/// use zk_recipes_counter::PromotedToLock;
///
/// let promoted = PromotedToLock::new("/app/counter-lock")
///     .max_lock_time(Duration::from_secs(2))
///     .retry_policy(RetryNTimes::new(3, Duration::from_millis(10)));
/// assert_eq!(promoted.lock_path(), "/app/counter-lock");
/// ```
#[derive(Clone)]
pub struct PromotedToLock {
    lock_path: String,
    max_lock_time: Option<Duration>,
    retry_policy: Arc<dyn RetryPolicy>,
}

impl PromotedToLock {
    /// Promotion to a mutex at `lock_path` (Curator's `PromotedToLock.builder().lockPath(p)`).
    /// The path is checked when the counter is built.
    pub fn new(lock_path: &str) -> Self {
        Self { lock_path: lock_path.to_owned(), max_lock_time: None, retry_policy: Arc::new(NoRetry) }
    }

    /// Waits at most this long for the lock (Curator's `timeout`); when it passes the operation
    /// reports not succeeded. Defaults to no limit but the call's deadline.
    pub fn max_lock_time(mut self, max_lock_time: Duration) -> Self {
        self.max_lock_time = Some(max_lock_time);
        self
    }

    /// The retry policy of the tries made holding the lock (Curator's `retryPolicy`). Defaults to
    /// one try.
    pub fn retry_policy(mut self, retry_policy: impl RetryPolicy) -> Self {
        self.retry_policy = Arc::new(retry_policy);
        self
    }

    /// The lock's path.
    pub fn lock_path(&self) -> &str {
        &self.lock_path
    }
}

impl fmt::Debug for PromotedToLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PromotedToLock")
            .field("lock_path", &self.lock_path)
            .field("max_lock_time", &self.max_lock_time)
            .field("retry_policy", &self.retry_policy)
            .finish()
    }
}

/// The promoted phase: the settings and the mutex on their path.
#[derive(Debug)]
struct Promotion {
    settings: PromotedToLock,
    mutex: Mutex,
}

/// Computes a change's new bytes from the current ones (`None`: no node); Curator's `MakeValue`.
type MakeValue<'a> = dyn Fn(Option<&[u8]>) -> Result<Vec<u8>> + Sync + 'a;

/// A node's bytes as an atomic value reads them: `None` when the node does not exist.
///
/// ```no_run
/// # async fn demo(value: zk_recipes_counter::DistributedAtomicValue) -> zk_recipes_counter::Result<()> {
/// use zk_recipes_counter::Bytes;
/// use zk_recipes_framework::Deadline;
///
/// let read = value.get(Deadline::after(std::time::Duration::from_secs(5))).await?;
/// let current: &Bytes = read.post_value();
/// match current {
///     None => println!("no node yet"),
///     Some(bytes) => println!("{} bytes", bytes.len()),
/// }
/// # Ok(()) }
/// ```
pub type Bytes = Option<Vec<u8>>;

/// A value in one node, changed by compare-and-set (Curator's `DistributedAtomicValue`): each
/// change reads the node and writes it back conditionally on the version read, retried under a
/// retry policy; if that fails and a [`PromotedToLock`] is set, the change is tried again holding
/// a mutex. The node is created (missing parents as containers) by the first change.
///
/// Every write is sent once: after a lost reply the node is read back, and the write is repeated
/// only if the node is provably unchanged; otherwise the operation fails with
/// [`CounterError::OutcomeUnknown`] instead of trying again (Curator's retry would apply the
/// change twice).
///
/// Cheap to clone.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_counter::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::{retry::RetryNTimes, Deadline};
/// use zk_recipes_counter::DistributedAtomicValue;
///
/// let value = DistributedAtomicValue::new(&framework, "/app/leader-epoch", RetryNTimes::new(10, Duration::from_millis(20)))?;
/// let deadline = Deadline::after(Duration::from_secs(10));
/// value.initialize(b"epoch-0", deadline).await?;
/// let swapped = value.compare_and_set(b"epoch-0", b"epoch-1", deadline).await?;
/// println!("swapped: {}", swapped.succeeded());
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct DistributedAtomicValue {
    framework: Framework,
    path: Arc<str>,
    retry_policy: Arc<dyn RetryPolicy>,
    promotion: Option<Arc<Promotion>>,
}

impl fmt::Debug for DistributedAtomicValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedAtomicValue")
            .field("path", &self.path)
            .field("retry_policy", &self.retry_policy)
            .field("promotion", &self.promotion.as_ref().map(|promotion| &promotion.settings))
            .finish()
    }
}

impl DistributedAtomicValue {
    /// An optimistic-only value at `path` (Curator's `new DistributedAtomicValue(client, path,
    /// retryPolicy)`); `retry_policy` decides how often a lost compare-and-set is tried again.
    ///
    /// # Errors
    /// An invalid path (or the root), before anything is sent.
    pub fn new(framework: &Framework, path: &str, retry_policy: impl RetryPolicy) -> Result<Self> {
        path::validate(path)
            .map_err(|reason| FrameworkError::InvalidPath { path: path.to_owned(), reason })?;
        if path == "/" {
            return Err(CounterError::InvalidArgument("the root cannot hold an atomic value".into()));
        }
        Ok(Self {
            framework: framework.clone(),
            path: path.into(),
            retry_policy: Arc::new(retry_policy),
            promotion: None,
        })
    }

    /// Adds promotion to a mutex when the optimistic tries fail (Curator's constructor with a
    /// `PromotedToLock`).
    ///
    /// # Errors
    /// An invalid lock path, before anything is sent.
    pub fn promoted_to_lock(mut self, promoted: PromotedToLock) -> Result<Self> {
        let mutex = Mutex::new(&self.framework, &promoted.lock_path)?;
        self.promotion = Some(Arc::new(Promotion { settings: promoted, mutex }));
        Ok(self)
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The current value (Curator's `get`): always succeeds; `None` if the node does not exist.
    ///
    /// # Errors
    /// Framework errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn get(&self, deadline: impl Into<Deadline>) -> Result<AtomicValue<Bytes>> {
        let deadline = deadline.into();
        let current = self.read_current(deadline).await?.map(|(data, _)| data);
        Ok(AtomicValue {
            succeeded: true,
            pre_value: current.clone(),
            post_value: current,
            stats: AtomicStats::default(),
        })
    }

    /// Sets the value with no atomicity (Curator's `forceSet`): sets it, or creates the node if it
    /// is missing. Retried after a connection loss (the same bytes set twice are the same value).
    ///
    /// # Errors
    /// `DataTooLarge` before anything is sent; framework errors.
    ///
    /// # Cancel safety
    /// If dropped after sending, the value may or may not have been set.
    pub async fn force_set(&self, value: &[u8], deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        self.framework.check_data_size(value.len())?;
        loop {
            match self.framework.set_data(&self.path, value, None, deadline).await {
                Ok(_) => return Ok(()),
                Err(err) if err.is_no_node() => {}
                Err(err) => return Err(err.into()),
            }
            let created = self
                .framework
                .create(&self.path)
                .data(value)
                .creating_parents(ParentMode::Container)
                .deadline(deadline)
                .await;
            match created {
                Ok(_) => return Ok(()),
                // Created meanwhile (perhaps by our own create's lost reply): set it.
                Err(err) if err.is_node_exists() => continue,
                Err(err) => return Err(err.into()),
            }
        }
    }

    /// Sets `new_value` if the value is `expected` (Curator's `compareAndSet`): one read and one
    /// conditional write, no retries. A missing node never matches (as Curator).
    ///
    /// # Errors
    /// [`CounterError::OutcomeUnknown`] after a lost reply that cannot be resolved;
    /// `DataTooLarge` before anything is sent; framework errors.
    ///
    /// # Cancel safety
    /// If dropped after sending, the value may or may not have been set.
    pub async fn compare_and_set(
        &self,
        expected: &[u8],
        new_value: &[u8],
        deadline: impl Into<Deadline>,
    ) -> Result<AtomicValue<Bytes>> {
        let deadline = deadline.into();
        self.framework.check_data_size(new_value.len())?;
        let current = self.read_current(deadline).await?;
        let mut result = AtomicValue {
            succeeded: false,
            pre_value: current.as_ref().map(|(data, _)| data.clone()),
            post_value: None,
            stats: AtomicStats::default(),
        };
        let Some((data, stat)) = current else { return Ok(result) };
        if data != expected {
            return Ok(result);
        }
        let write = ConditionalWrite::set_if_unchanged(new_value, &stat);
        if self.framework.write_once(&self.path, write, deadline).await?.is_applied() {
            result.succeeded = true;
            result.post_value = Some(new_value.to_vec());
        }
        Ok(result)
    }

    /// Sets `new_value` atomically (Curator's `trySet`): optimistic tries under the retry policy,
    /// then, if set up, tries holding the promoted lock.
    ///
    /// # Errors
    /// As [`compare_and_set`](Self::compare_and_set); a timeout if `deadline` passes; the
    /// promoted lock's errors.
    ///
    /// # Cancel safety
    /// If cancelled after a write was sent, the value may or may not have been set (at most once).
    /// A promoted lock it held or waited for is given up: the framework's cleanup worker deletes
    /// its node.
    pub async fn try_set(
        &self,
        new_value: &[u8],
        deadline: impl Into<Deadline>,
    ) -> Result<AtomicValue<Bytes>> {
        let deadline = deadline.into();
        self.framework.check_data_size(new_value.len())?;
        self.apply(&|_| Ok(new_value.to_vec()), deadline).await
    }

    /// Creates the node with `value` if it does not exist (Curator's `initialize`): `true` if this
    /// call created it, `false` if it existed. Sent once, as every write here.
    ///
    /// # Errors
    /// [`CounterError::OutcomeUnknown`] if a lost reply left the node existing (perhaps ours);
    /// `DataTooLarge` before anything is sent; framework errors.
    ///
    /// # Cancel safety
    /// If dropped after sending, the node may or may not have been created.
    pub async fn initialize(&self, value: &[u8], deadline: impl Into<Deadline>) -> Result<bool> {
        let deadline = deadline.into();
        self.framework.check_data_size(value.len())?;
        match self.framework.write_once(&self.path, ConditionalWrite::create(value), deadline).await? {
            WriteOutcome::Applied(_) => Ok(true),
            WriteOutcome::Refused(_) => Ok(false),
        }
    }

    /// Runs one change (`make` computes the new bytes from the current ones): optimistic, then
    /// promoted (Curator's `trySet(MakeValue)`).
    pub(crate) async fn apply(&self, make: &MakeValue<'_>, deadline: Deadline) -> Result<AtomicValue<Bytes>> {
        let span =
            info_span!("atomic_value", path = %self.path, session = ?self.framework.current().session_id);
        self.apply_in_span(make, deadline).instrument(span).await
    }

    async fn apply_in_span(&self, make: &MakeValue<'_>, deadline: Deadline) -> Result<AtomicValue<Bytes>> {
        let mut result = AtomicValue {
            succeeded: false,
            pre_value: None,
            post_value: None,
            stats: AtomicStats::default(),
        };
        let started = Instant::now();
        result.succeeded = self.tries(make, &*self.retry_policy, false, &mut result, deadline).await?;
        result.stats.optimistic_time = started.elapsed();
        if let (false, Some(promotion)) = (result.succeeded, &self.promotion) {
            debug!(path = %self.path, tries = result.stats.optimistic_tries, "optimistic tries failed; promoting to the lock");
            let started = Instant::now();
            let promoted = self.with_lock(promotion, make, &mut result, deadline).await;
            result.stats.promoted_time = started.elapsed();
            result.succeeded = promoted?;
        }
        Ok(result)
    }

    /// The promoted phase: the mutex (within the max lock time), then tries under its policy.
    async fn with_lock(
        &self,
        promotion: &Promotion,
        make: &MakeValue<'_>,
        result: &mut AtomicValue<Bytes>,
        deadline: Deadline,
    ) -> Result<bool> {
        let lock_deadline = deadline.min(promotion.settings.max_lock_time.map(|max| Instant::now() + max));
        let guard = match promotion.mutex.lock_until(lock_deadline).await {
            Ok(guard) => guard,
            Err(err) if err.is_timeout() && !deadline.is_expired() => {
                debug!(path = %self.path, "the promoted lock was not acquired within the max lock time");
                return Ok(false);
            }
            Err(err) => return Err(err.into()),
        };
        let tried = self.tries(make, &*promotion.settings.retry_policy, true, result, deadline).await;
        if let Err(err) = guard.release().await {
            // The change (if made) stands; the lock node is deleted in the background.
            warn!(path = %self.path, %err, "releasing the promoted lock failed");
        }
        tried
    }

    /// Tries until one succeeds or `policy` gives up; counts the tries in `result`.
    async fn tries(
        &self,
        make: &MakeValue<'_>,
        policy: &dyn RetryPolicy,
        promoted: bool,
        result: &mut AtomicValue<Bytes>,
        deadline: Deadline,
    ) -> Result<bool> {
        let started = Instant::now();
        for retry_count in 0.. {
            if promoted {
                result.stats.promoted_tries += 1;
            } else {
                result.stats.optimistic_tries += 1;
            }
            if self.try_once(make, result, deadline).await? {
                return Ok(true);
            }
            match policy.allow_retry(retry_count, started.elapsed()) {
                Some(sleep) => deadline.sleep(sleep).await?,
                None => break,
            }
        }
        Ok(false)
    }

    /// One read and one conditional write (a create if the node is missing).
    async fn try_once(
        &self,
        make: &MakeValue<'_>,
        result: &mut AtomicValue<Bytes>,
        deadline: Deadline,
    ) -> Result<bool> {
        let current = self.read_current(deadline).await?;
        result.pre_value = current.as_ref().map(|(data, _)| data.clone());
        let new_value = make(result.pre_value.as_deref())?;
        self.framework.check_data_size(new_value.len())?;
        let write = match &current {
            None => ConditionalWrite::create(&new_value),
            Some((_, stat)) => ConditionalWrite::set_if_unchanged(&new_value, stat),
        };
        match self.framework.write_once(&self.path, write, deadline).await? {
            WriteOutcome::Applied(_) => {
                result.post_value = Some(new_value);
                Ok(true)
            }
            WriteOutcome::Refused(reason) => {
                debug!(path = %self.path, %reason, "lost a compare-and-set");
                Ok(false)
            }
        }
    }

    async fn read_current(&self, deadline: Deadline) -> Result<Option<(Vec<u8>, Stat)>> {
        match self.framework.get_data(&self.path, deadline).await {
            Ok(node) => Ok(Some((node.data, node.stat))),
            Err(err) if err.is_no_node() => Ok(None),
            Err(err) => Err(err.into()),
        }
    }
}
