//! Retry policies in the shape of Curator's `RetryPolicy`.
//!
//! A policy only answers "may I try again, and after how long?"; the loop that asks it is
//! [`crate::Framework::retry`], which gives each top-level call one budget and one deadline.
//!
//! ```
//! use std::time::Duration;
//! use zk_recipes_framework::retry::{ExponentialBackoffRetry, RetryPolicy};
//!
//! let policy = ExponentialBackoffRetry::new(Duration::from_millis(100), 3);
//! assert!(policy.allow_retry(0, Duration::ZERO).is_some());
//! assert!(policy.allow_retry(3, Duration::ZERO).is_none());
//! ```

use std::fmt::Debug;
use std::time::Duration;

/// Decides whether a failed operation may be tried again.
///
/// Implement it for a policy Curator does not have; hand it to
/// [`FrameworkBuilder::retry_policy`](crate::FrameworkBuilder::retry_policy).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::RetryPolicy;
///
/// /// Three quick retries, then give up.
/// #[derive(Debug)]
/// struct ThreeQuick;
///
/// impl RetryPolicy for ThreeQuick {
///     fn allow_retry(&self, retry_count: u32, _elapsed: Duration) -> Option<Duration> {
///         (retry_count < 3).then_some(Duration::from_millis(10))
///     }
/// }
///
/// assert_eq!(ThreeQuick.allow_retry(2, Duration::ZERO), Some(Duration::from_millis(10)));
/// assert_eq!(ThreeQuick.allow_retry(3, Duration::ZERO), None);
/// ```
pub trait RetryPolicy: Debug + Send + Sync + 'static {
    /// Called after a retryable failure. `retry_count` is the number of retries already made (0 on
    /// the first failure) and `elapsed` the time since the top-level call started. Returns how long
    /// to sleep before the next try, or `None` to give up.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zk_recipes_framework::retry::{RetryNTimes, RetryPolicy};
    ///
    /// let policy = RetryNTimes::new(1, Duration::from_millis(20));
    /// assert_eq!(policy.allow_retry(0, Duration::ZERO), Some(Duration::from_millis(20)));
    /// assert_eq!(policy.allow_retry(1, Duration::from_millis(20)), None);
    /// ```
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration>;
}

/// Curator caps `ExponentialBackoffRetry` at 29 retries (so that `1 << (n + 1)` fits an `i32`).
pub const MAX_EXPONENTIAL_RETRIES: u32 = 29;

/// Retries a set number of times with a growing, randomised sleep, exactly as Curator's
/// `ExponentialBackoffRetry`: before retry `n` it sleeps
/// `base_sleep × max(1, uniform integer in [0, 2^(n+1)))`, at most `max_sleep`.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::ExponentialBackoffRetry;
///
/// let policy = ExponentialBackoffRetry::new(Duration::from_millis(100), 5)
///     .with_max_sleep(Duration::from_secs(2));
/// # let _ = policy;
/// ```
#[derive(Debug, Clone)]
pub struct ExponentialBackoffRetry {
    base_sleep: Duration,
    max_retries: u32,
    max_sleep: Duration,
}

impl ExponentialBackoffRetry {
    /// `max_retries` above [`MAX_EXPONENTIAL_RETRIES`] is lowered to it (as Curator does).
    /// No limit on a single sleep unless [`Self::with_max_sleep`] sets one.
    pub fn new(base_sleep: Duration, max_retries: u32) -> Self {
        Self { base_sleep, max_retries: max_retries.min(MAX_EXPONENTIAL_RETRIES), max_sleep: Duration::MAX }
    }

    /// Caps each sleep at `max_sleep`.
    pub fn with_max_sleep(mut self, max_sleep: Duration) -> Self {
        self.max_sleep = max_sleep;
        self
    }

    /// The number of retries this policy allows.
    pub fn max_retries(&self) -> u32 {
        self.max_retries
    }

    /// The sleep for a draw from `[0, 2^(retry_count+1))`.
    fn sleep_for(&self, draw: u32) -> Duration {
        let factor = draw.max(1);
        self.base_sleep.saturating_mul(factor).min(self.max_sleep)
    }
}

impl RetryPolicy for ExponentialBackoffRetry {
    fn allow_retry(&self, retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        if retry_count >= self.max_retries {
            return None;
        }
        let draw = fastrand::u32(0..(1u32 << (retry_count + 1)));
        Some(self.sleep_for(draw))
    }
}

/// Curator's `BoundedExponentialBackoffRetry`: [`ExponentialBackoffRetry`] whose every sleep is at
/// most `max_sleep`.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::{BoundedExponentialBackoffRetry, RetryPolicy};
///
/// let policy =
///     BoundedExponentialBackoffRetry::new(Duration::from_millis(100), Duration::from_millis(500), 10);
/// let sleep = policy.allow_retry(9, Duration::ZERO).expect("the tenth retry is allowed");
/// assert!(sleep >= Duration::from_millis(100) && sleep <= Duration::from_millis(500));
/// assert_eq!(policy.allow_retry(10, Duration::ZERO), None);
/// ```
#[derive(Debug, Clone)]
pub struct BoundedExponentialBackoffRetry(ExponentialBackoffRetry);

impl BoundedExponentialBackoffRetry {
    /// Same arguments as Curator: base sleep, the largest single sleep, and the number of retries.
    pub fn new(base_sleep: Duration, max_sleep: Duration, max_retries: u32) -> Self {
        Self(ExponentialBackoffRetry::new(base_sleep, max_retries).with_max_sleep(max_sleep))
    }
}

impl RetryPolicy for BoundedExponentialBackoffRetry {
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration> {
        self.0.allow_retry(retry_count, elapsed)
    }
}

/// Retries `n` times with the same sleep between tries (Curator's `RetryNTimes`).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::{RetryNTimes, RetryPolicy};
///
/// let policy = RetryNTimes::new(3, Duration::from_millis(250));
/// assert_eq!(policy.allow_retry(2, Duration::ZERO), Some(Duration::from_millis(250)));
/// assert_eq!(policy.allow_retry(3, Duration::ZERO), None);
/// ```
#[derive(Debug, Clone)]
pub struct RetryNTimes {
    n: u32,
    sleep_between_retries: Duration,
}

impl RetryNTimes {
    /// Up to `n` retries, sleeping `sleep_between_retries` before each.
    pub fn new(n: u32, sleep_between_retries: Duration) -> Self {
        Self { n, sleep_between_retries }
    }
}

impl RetryPolicy for RetryNTimes {
    fn allow_retry(&self, retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        (retry_count < self.n).then_some(self.sleep_between_retries)
    }
}

/// Retries once (Curator's `RetryOneTime`).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::{RetryOneTime, RetryPolicy};
///
/// let policy = RetryOneTime::new(Duration::from_millis(100));
/// assert_eq!(policy.allow_retry(0, Duration::ZERO), Some(Duration::from_millis(100)));
/// assert_eq!(policy.allow_retry(1, Duration::ZERO), None);
/// ```
#[derive(Debug, Clone)]
pub struct RetryOneTime(RetryNTimes);

impl RetryOneTime {
    /// One retry after `sleep_before_retry`.
    pub fn new(sleep_before_retry: Duration) -> Self {
        Self(RetryNTimes::new(1, sleep_before_retry))
    }
}

impl RetryPolicy for RetryOneTime {
    fn allow_retry(&self, retry_count: u32, elapsed: Duration) -> Option<Duration> {
        self.0.allow_retry(retry_count, elapsed)
    }
}

/// Retries until `max_elapsed` has passed since the call started (Curator's `RetryUntilElapsed`).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::{RetryPolicy, RetryUntilElapsed};
///
/// let policy = RetryUntilElapsed::new(Duration::from_secs(30), Duration::from_secs(1));
/// assert_eq!(policy.allow_retry(100, Duration::from_secs(29)), Some(Duration::from_secs(1)));
/// assert_eq!(policy.allow_retry(0, Duration::from_secs(30)), None);
/// ```
#[derive(Debug, Clone)]
pub struct RetryUntilElapsed {
    max_elapsed: Duration,
    sleep_between_retries: Duration,
}

impl RetryUntilElapsed {
    /// Retries while less than `max_elapsed` has passed, sleeping `sleep_between_retries` each time.
    pub fn new(max_elapsed: Duration, sleep_between_retries: Duration) -> Self {
        Self { max_elapsed, sleep_between_retries }
    }
}

impl RetryPolicy for RetryUntilElapsed {
    fn allow_retry(&self, _retry_count: u32, elapsed: Duration) -> Option<Duration> {
        (elapsed < self.max_elapsed).then_some(self.sleep_between_retries)
    }
}

/// Retries forever (Curator's `RetryForever`); bound it with a deadline on the call.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::{RetryForever, RetryPolicy};
///
/// let policy = RetryForever::new(Duration::from_millis(500));
/// assert_eq!(policy.allow_retry(u32::MAX, Duration::MAX), Some(Duration::from_millis(500)));
/// ```
#[derive(Debug, Clone)]
pub struct RetryForever {
    retry_interval: Duration,
}

impl RetryForever {
    /// Sleeps `retry_interval` before every retry.
    pub fn new(retry_interval: Duration) -> Self {
        Self { retry_interval }
    }
}

impl RetryPolicy for RetryForever {
    fn allow_retry(&self, _retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        Some(self.retry_interval)
    }
}

/// Never retries.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::{NoRetry, RetryPolicy};
///
/// assert_eq!(NoRetry.allow_retry(0, Duration::ZERO), None);
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct NoRetry;

impl RetryPolicy for NoRetry {
    fn allow_retry(&self, _retry_count: u32, _elapsed: Duration) -> Option<Duration> {
        None
    }
}

/// The pause between rounds of a loop that keeps trying until it succeeds: a background task that
/// follows a node, a cleanup worker, a re-registration. Not a [`RetryPolicy`]: such a loop has no
/// budget and no deadline, only a pause that grows while it keeps failing and starts small again
/// after it succeeds.
///
/// The pauses are `first`, then doubled after each, up to `max`; [`reset`](Self::reset) goes back
/// to `first`. [`Backoff::default`] is 50 ms up to 1 s, what every loop of the framework and the
/// recipes uses unless it says otherwise.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::retry::Backoff;
///
/// let mut backoff = Backoff::default();
/// let pauses: Vec<u128> = (0..7).map(|_| backoff.next_pause().as_millis()).collect();
/// assert_eq!(pauses, [50, 100, 200, 400, 800, 1000, 1000]);
/// backoff.reset();
/// assert_eq!(backoff.next_pause(), Duration::from_millis(50));
///
/// let mut slow = Backoff::new(Duration::from_millis(20), Duration::from_secs(2));
/// assert_eq!(slow.next_pause(), Duration::from_millis(20));
/// # async fn sleeping(mut backoff: Backoff) { backoff.pause().await }
/// ```
#[derive(Debug, Clone)]
pub struct Backoff {
    first: Duration,
    max: Duration,
    next: Duration,
}

impl Backoff {
    /// Pauses from `first`, doubling up to `max` (`max` below `first` is raised to it).
    pub fn new(first: Duration, max: Duration) -> Self {
        Self { first, max: max.max(first), next: first }
    }

    /// The pause to take now; the next one is twice as long, up to the maximum.
    pub fn next_pause(&mut self) -> Duration {
        let now = self.next;
        self.next = self.next.saturating_mul(2).min(self.max);
        now
    }

    /// Sleeps for [`next_pause`](Self::next_pause).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled pause still counts as taken (the next one is longer).
    pub async fn pause(&mut self) {
        tokio::time::sleep(self.next_pause()).await;
    }

    /// The loop succeeded: the next pause is `first` again.
    pub fn reset(&mut self) {
        self.next = self.first;
    }
}

impl Default for Backoff {
    /// 50 ms, doubling up to 1 s.
    fn default() -> Self {
        Self::new(Duration::from_millis(50), Duration::from_secs(1))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn exponential_sleep_is_base_times_a_draw_of_at_least_one() {
        let policy = ExponentialBackoffRetry::new(10 * MS, 10);
        assert_eq!(policy.sleep_for(0), 10 * MS, "a zero draw still sleeps one base");
        assert_eq!(policy.sleep_for(1), 10 * MS);
        assert_eq!(policy.sleep_for(15), 150 * MS);
    }

    #[test]
    fn exponential_draws_stay_in_curators_range() {
        let policy = ExponentialBackoffRetry::new(MS, 29);
        for retry_count in 0..10u32 {
            let upper = (1u64 << (retry_count + 1)) - 1;
            let mut largest = 0;
            for _ in 0..2_000 {
                let sleep = policy.allow_retry(retry_count, Duration::ZERO).expect("within budget");
                let factor = sleep.as_millis() as u64;
                assert!((1..=upper).contains(&factor), "retry {retry_count}: factor {factor} > {upper}");
                largest = largest.max(factor);
            }
            if retry_count <= 5 {
                // 2,000 draws from at most 64 values miss the top with probability < 1e-13.
                assert_eq!(largest, upper.max(1), "retry {retry_count}: the top of the range is reachable");
            }
        }
    }

    #[test]
    fn exponential_retries_are_capped_at_29_and_counted() {
        let policy = ExponentialBackoffRetry::new(MS, 1_000);
        assert_eq!(policy.max_retries(), MAX_EXPONENTIAL_RETRIES);
        assert!(policy.allow_retry(28, Duration::ZERO).is_some());
        assert!(policy.allow_retry(29, Duration::ZERO).is_none());
        let three = ExponentialBackoffRetry::new(MS, 3);
        assert!(three.allow_retry(2, Duration::ZERO).is_some());
        assert!(three.allow_retry(3, Duration::ZERO).is_none());
    }

    #[test]
    fn max_sleep_bounds_every_sleep() {
        let policy = BoundedExponentialBackoffRetry::new(100 * MS, 250 * MS, 29);
        for _ in 0..500 {
            let sleep = policy.allow_retry(20, Duration::ZERO).expect("within budget");
            assert!(sleep <= 250 * MS && sleep >= 100 * MS, "{sleep:?}");
        }
        let unbounded = ExponentialBackoffRetry::new(Duration::from_secs(1), 29);
        assert_eq!(unbounded.sleep_for(u32::MAX >> 2), Duration::from_secs(u64::from(u32::MAX >> 2)));
    }

    #[test]
    fn fixed_count_policies() {
        let n = RetryNTimes::new(2, 5 * MS);
        assert_eq!(n.allow_retry(0, Duration::ZERO), Some(5 * MS));
        assert_eq!(n.allow_retry(1, Duration::ZERO), Some(5 * MS));
        assert_eq!(n.allow_retry(2, Duration::ZERO), None);
        let once = RetryOneTime::new(7 * MS);
        assert_eq!(once.allow_retry(0, Duration::ZERO), Some(7 * MS));
        assert_eq!(once.allow_retry(1, Duration::ZERO), None);
        assert_eq!(NoRetry.allow_retry(0, Duration::ZERO), None);
    }

    #[test]
    fn backoff_doubles_up_to_its_maximum_and_resets() {
        let mut backoff = Backoff::new(20 * MS, 100 * MS);
        let pauses: Vec<Duration> = (0..5).map(|_| backoff.next_pause()).collect();
        assert_eq!(pauses, [20 * MS, 40 * MS, 80 * MS, 100 * MS, 100 * MS]);
        backoff.reset();
        assert_eq!(backoff.next_pause(), 20 * MS);
        let inverted = Backoff::new(50 * MS, MS);
        assert_eq!(Backoff::clone(&inverted).next_pause(), 50 * MS, "max below first is raised to first");
    }

    #[test]
    fn elapsed_and_forever_policies() {
        let until = RetryUntilElapsed::new(100 * MS, 10 * MS);
        assert_eq!(until.allow_retry(1_000, 99 * MS), Some(10 * MS));
        assert_eq!(until.allow_retry(0, 100 * MS), None);
        let forever = RetryForever::new(3 * MS);
        assert_eq!(forever.allow_retry(u32::MAX, Duration::MAX), Some(3 * MS));
    }
}
