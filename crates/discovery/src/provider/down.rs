//! `DownInstancePolicy` and the provider's record of errors noted against instances (Curator's
//! `DownInstancePolicy` and `DownInstanceManager`). Pure: the time is passed in.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::instance::ServiceInstance;

/// When [`ServiceProvider::note_error`](crate::ServiceProvider::note_error) takes an instance out
/// of rotation (Curator's `DownInstancePolicy`): once `error_threshold` errors are noted within
/// `timeout` of the first, until `timeout` after that first error. Then its record is forgotten
/// and it counts from zero again.
///
/// Defaults to Curator's: a timeout of 30 s and a threshold of 2 errors. A threshold of 0 counts
/// as 1 (the first error takes the instance out), as in Curator.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_discovery::DownInstancePolicy;
///
/// let policy = DownInstancePolicy::default();
/// assert_eq!((policy.timeout(), policy.error_threshold()), (Duration::from_secs(30), 2));
/// // Out at the first error, for 5 s.
/// let strict = DownInstancePolicy::new(Duration::from_secs(5), 1);
/// assert_eq!(strict.error_threshold(), 1);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DownInstancePolicy {
    timeout: Duration,
    error_threshold: u32,
}

impl DownInstancePolicy {
    /// Curator's default timeout: 30 s.
    pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30);
    /// Curator's default error threshold: 2.
    pub const DEFAULT_ERROR_THRESHOLD: u32 = 2;

    /// A policy: out after `error_threshold` errors, until `timeout` after the first.
    pub fn new(timeout: Duration, error_threshold: u32) -> Self {
        Self { timeout, error_threshold }
    }

    /// How long after its first error an instance's errors are remembered (and it stays out).
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// How many errors take an instance out.
    pub fn error_threshold(&self) -> u32 {
        self.error_threshold
    }
}

impl Default for DownInstancePolicy {
    fn default() -> Self {
        Self::new(Self::DEFAULT_TIMEOUT, Self::DEFAULT_ERROR_THRESHOLD)
    }
}

/// The errors noted against instances, by instance id.
#[derive(Debug)]
pub(super) struct DownInstances {
    policy: DownInstancePolicy,
    statuses: Mutex<HashMap<String, Status>>,
}

/// One instance's record: when its first remembered error was, and how many since.
#[derive(Debug, Clone, Copy)]
struct Status {
    first_error: Instant,
    errors: u32,
}

impl DownInstances {
    pub(super) fn new(policy: DownInstancePolicy) -> Self {
        Self { policy, statuses: Mutex::new(HashMap::new()) }
    }

    pub(super) fn policy(&self) -> DownInstancePolicy {
        self.policy
    }

    /// Notes an error against instance `id` at `now`.
    pub(super) fn note_error(&self, id: &str, now: Instant) {
        let mut statuses = self.statuses.lock();
        self.forget_expired(&mut statuses, now);
        let status = statuses.entry(id.to_owned()).or_insert(Status { first_error: now, errors: 0 });
        status.errors = status.errors.saturating_add(1);
    }

    /// `candidates` without the instances that are out at `now`, in the same order.
    pub(super) fn retain_up<'a, P>(
        &self,
        mut candidates: Vec<&'a ServiceInstance<P>>,
        now: Instant,
    ) -> Vec<&'a ServiceInstance<P>> {
        let mut statuses = self.statuses.lock();
        self.forget_expired(&mut statuses, now);
        if !statuses.is_empty() {
            let threshold = self.policy.error_threshold.max(1);
            candidates
                .retain(|instance| statuses.get(&instance.id).is_none_or(|status| status.errors < threshold));
        }
        candidates
    }

    /// Forgets every record whose first error is `timeout` old (Curator's `purge`, done at every
    /// look rather than at most every half timeout, so an instance is out for exactly the timeout).
    fn forget_expired(&self, statuses: &mut HashMap<String, Status>, now: Instant) {
        let timeout = self.policy.timeout;
        statuses.retain(|_, status| now.saturating_duration_since(status.first_error) < timeout);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(down: &DownInstances, all: &[ServiceInstance], now: Instant) -> Vec<String> {
        down.retain_up(all.iter().collect(), now).into_iter().map(|instance| instance.id.clone()).collect()
    }

    #[test]
    fn out_at_the_threshold_until_the_timeout_after_the_first_error() {
        let down = DownInstances::new(DownInstancePolicy::new(Duration::from_secs(30), 2));
        let all: Vec<ServiceInstance> =
            ["a", "b"].iter().map(|id| ServiceInstance::builder("api").id(*id).build()).collect();
        let start = Instant::now();
        let at = |seconds: u64| start + Duration::from_secs(seconds);
        down.note_error("a", at(0));
        assert_eq!(up(&down, &all, at(1)), ["a", "b"], "one error: below the threshold");
        down.note_error("a", at(10));
        assert_eq!(up(&down, &all, at(10)), ["b"], "two errors: out");
        assert_eq!(up(&down, &all, at(29)), ["b"]);
        assert_eq!(up(&down, &all, at(30)), ["a", "b"], "30 s after the first error: back");
        // Forgotten: one new error does not take it out again.
        down.note_error("a", at(31));
        assert_eq!(up(&down, &all, at(31)), ["a", "b"]);
    }

    #[test]
    fn errors_older_than_the_timeout_do_not_add_up() {
        let down = DownInstances::new(DownInstancePolicy::new(Duration::from_secs(30), 2));
        let all = vec![ServiceInstance::builder("api").id("a").build()];
        let start = Instant::now();
        down.note_error("a", start);
        down.note_error("a", start + Duration::from_secs(30));
        assert_eq!(up(&down, &all, start + Duration::from_secs(31)), ["a"]);
    }

    #[test]
    fn a_threshold_of_zero_counts_as_one() {
        let down = DownInstances::new(DownInstancePolicy::new(Duration::from_secs(1), 0));
        let all = vec![ServiceInstance::builder("api").id("a").build()];
        let start = Instant::now();
        assert_eq!(up(&down, &all, start), ["a"], "no error: up");
        down.note_error("a", start);
        assert!(up(&down, &all, start).is_empty());
    }
}
