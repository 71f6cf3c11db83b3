//! `ProviderStrategy`: how a provider picks one instance among the usable ones (Curator's
//! `RoundRobinStrategy`, `RandomStrategy` and `StickyStrategy`), and the picker that keeps each
//! strategy's state. Pure: no server, no task.

use std::sync::atomic::{AtomicUsize, Ordering};

use parking_lot::Mutex;

use crate::instance::ServiceInstance;

/// How a [`ServiceProvider`](crate::ServiceProvider) picks an instance (Curator's
/// `ProviderStrategy` implementations). Each picks among the *usable* instances only: enabled,
/// not taken out by [`note_error`](crate::ServiceProvider::note_error), and kept by the
/// provider's filters, in node-name order.
///
/// | strategy | picks | Curator |
/// |---|---|---|
/// | [`RoundRobin`](Self::RoundRobin) (the default) | the next one in node-name order, each in turn | `RoundRobinStrategy` |
/// | [`Random`](Self::Random) | one at random, each draw on its own | `RandomStrategy` |
/// | [`Sticky`](Self::Sticky) | the same one while it is usable; then a new one at random | `new StickyStrategy<>(new RandomStrategy<>())` |
///
/// ```no_run
/// # async fn demo(discovery: zk_recipes_discovery::ServiceDiscovery) -> zk_recipes_discovery::Result<()> {
/// use zk_recipes_discovery::ProviderStrategy;
///
/// let provider = discovery
///     .service_provider("db")
///     .strategy(ProviderStrategy::Sticky)
///     .start(std::time::Duration::from_secs(10))
///     .await?;
/// let primary = provider.get_instance(); // the same one, call after call, while it is there
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProviderStrategy {
    /// Each usable instance in turn, in node-name order (a counter modulo the number of usable
    /// instances, as Curator's: when the list changes, the turn goes on from the same count).
    #[default]
    RoundRobin,
    /// A usable instance at random (uniform, `fastrand`).
    Random,
    /// The instance picked first, as long as it is usable (its node there, enabled, not taken out
    /// by `note_error`, kept by the filters); then another, picked at random, so that clients that
    /// lose the same instance spread over the others. An update of the instance's data keeps it.
    Sticky,
}

/// A strategy and its state: the round-robin count, the sticky instance's id.
#[derive(Debug)]
pub(super) struct Picker {
    strategy: ProviderStrategy,
    turn: AtomicUsize,
    sticky: Mutex<Option<String>>,
}

impl Picker {
    pub(super) fn new(strategy: ProviderStrategy) -> Self {
        Self { strategy, turn: AtomicUsize::new(0), sticky: Mutex::new(None) }
    }

    pub(super) fn strategy(&self) -> ProviderStrategy {
        self.strategy
    }

    /// One of `usable` (in node-name order), or `None` when there is none.
    pub(super) fn pick<'a, P>(&self, usable: &[&'a ServiceInstance<P>]) -> Option<&'a ServiceInstance<P>> {
        match self.strategy {
            ProviderStrategy::RoundRobin => {
                if usable.is_empty() {
                    return None;
                }
                let turn = self.turn.fetch_add(1, Ordering::Relaxed);
                Some(usable[turn % usable.len()])
            }
            ProviderStrategy::Random => random(usable),
            ProviderStrategy::Sticky => {
                let mut sticky = self.sticky.lock();
                if let Some(id) = sticky.as_deref() {
                    if let Some(kept) = usable.iter().find(|instance| instance.id == id) {
                        return Some(kept);
                    }
                }
                let picked = random(usable);
                *sticky = picked.map(|instance| instance.id.clone());
                picked
            }
        }
    }
}

fn random<'a, P>(usable: &[&'a ServiceInstance<P>]) -> Option<&'a ServiceInstance<P>> {
    match usable.len() {
        0 => None,
        len => Some(usable[fastrand::usize(..len)]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn instances(ids: &[&str]) -> Vec<ServiceInstance> {
        ids.iter().map(|id| ServiceInstance::builder("api").id(*id).build()).collect()
    }

    fn ids<'a>(picked: impl Iterator<Item = Option<&'a ServiceInstance>>) -> Vec<&'a str> {
        picked.map(|instance| instance.map_or("-", |instance| instance.id.as_str())).collect()
    }

    #[test]
    fn round_robin_takes_each_in_turn_and_goes_on_counting_when_the_list_changes() {
        let picker = Picker::new(ProviderStrategy::RoundRobin);
        let all = instances(&["a", "b", "c"]);
        let usable: Vec<&ServiceInstance> = all.iter().collect();
        assert_eq!(ids((0..7).map(|_| picker.pick(&usable))), ["a", "b", "c", "a", "b", "c", "a"]);
        // Turn 7 of two instances: the second.
        assert_eq!(ids([picker.pick(&usable[..2])].into_iter()), ["b"]);
        assert!(picker.pick::<serde_json::Value>(&[]).is_none());
    }

    #[test]
    fn random_picks_only_from_the_usable_ones() {
        let picker = Picker::new(ProviderStrategy::Random);
        let all = instances(&["a", "b"]);
        let usable: Vec<&ServiceInstance> = all.iter().collect();
        for _ in 0..100 {
            let picked = picker.pick(&usable).expect("one");
            assert!(picked.id == "a" || picked.id == "b");
        }
        assert!(picker.pick::<serde_json::Value>(&[]).is_none());
    }

    #[test]
    fn sticky_keeps_its_instance_while_it_is_usable_then_picks_another() {
        let picker = Picker::new(ProviderStrategy::Sticky);
        let all = instances(&["a", "b", "c"]);
        let usable: Vec<&ServiceInstance> = all.iter().collect();
        let first = picker.pick(&usable).expect("one").id.clone();
        for _ in 0..20 {
            assert_eq!(picker.pick(&usable).expect("one").id, first);
        }
        let without: Vec<&ServiceInstance> = all.iter().filter(|instance| instance.id != first).collect();
        let second = picker.pick(&without).expect("one").id.clone();
        assert_ne!(second, first);
        // Back in the list, the old one does not take over again: the new one sticks.
        for _ in 0..20 {
            assert_eq!(picker.pick(&usable).expect("one").id, second);
        }
        // Updated data, same id: still that one.
        let updated: Vec<ServiceInstance> =
            all.iter().map(|instance| instance.clone().into_builder().port(9999).build()).collect();
        let updated_usable: Vec<&ServiceInstance> = updated.iter().collect();
        assert_eq!(picker.pick(&updated_usable).expect("one").id, second);
    }
}
