//! The checker: its bounds, and what it decides.

use std::collections::BTreeMap;
use std::fmt::{self, Debug};
use std::time::{Duration, Instant};

use crate::explain::{explain, Violation};
use crate::history::{Completion, History, Operation, OperationId};
use crate::search::{search, Budget, Candidate, Candidates, Found, Limit};
use crate::Model;

/// Checks `history` against `model` with the default bounds of [`Checker::new`].
///
/// ```
/// use zk_recipes_history::models::{Register, RegisterInput, RegisterOutput};
/// use zk_recipes_history::{check, History, Outcome};
///
/// // Porcupine's first example (MIT 6.824): a write of 100 overlapping two reads, one of which
/// // saw it and one of which did not; the one that did not completed first.
/// let mut history = History::new();
/// history.ok(0, 0, 100, RegisterInput::Write(100), RegisterOutput::Written)?;
/// history.ok(1, 25, 75, RegisterInput::Read, RegisterOutput::Value(100))?;
/// history.ok(2, 30, 60, RegisterInput::Read, RegisterOutput::Value(0))?;
/// match check(&history, Register::new(0)) {
///     Outcome::Linearizable(linearization) => assert_eq!(linearization.order().len(), 3),
///     other => panic!("{other}"),
/// }
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
pub fn check<M: Model>(history: &History<M::Input, M::Output>, model: M) -> Outcome {
    Checker::new(model).check(history)
}

/// A linearizability checker for one model, with bounds so that a pathological history ends in
/// [`Outcome::Unknown`] instead of running for hours.
///
/// The search remembers each (set of operations that took effect, state) pair it reached; the
/// states bound counts those, per search (per key with [`Checker::check_per_key`]). Each costs
/// the state's size plus one bit per operation of the history. The time bound is for the whole
/// check.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_history::models::{Counter, CounterInput, CounterOutput};
/// use zk_recipes_history::{Checker, History};
///
/// let checker = Checker::new(Counter::new(0)).max_states(100_000).time_limit(Duration::from_secs(5));
/// let mut history = History::new();
/// history.ok(1, 0, 10, CounterInput::Add(2), CounterOutput::Value(2))?;
/// let reply_lost = history.info(2, 5, None, CounterInput::Add(1))?;
/// history.ok(3, 20, 30, CounterInput::Get, CounterOutput::Value(3))?;
/// let outcome = checker.check(&history);
/// assert!(outcome.linearization().expect("linearizable").took_effect(reply_lost));
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone)]
pub struct Checker<M> {
    model: M,
    max_states: usize,
    time_limit: Duration,
}

impl<M: Model> Checker<M> {
    /// A checker of `model` that remembers at most 1,000,000 states per search and gives up after
    /// 60 s.
    pub fn new(model: M) -> Self {
        Checker { model, max_states: 1_000_000, time_limit: Duration::from_secs(60) }
    }

    /// At most this many (set of operations, state) pairs per search (defaults to 1,000,000).
    pub fn max_states(self, max_states: usize) -> Self {
        Checker { max_states, ..self }
    }

    /// Give up after this long (defaults to 60 s).
    pub fn time_limit(self, time_limit: Duration) -> Self {
        Checker { time_limit, ..self }
    }

    /// Checks `history`.
    pub fn check(&self, history: &History<M::Input, M::Output>) -> Outcome {
        let budget = self.budget();
        let candidates = history
            .iter()
            .filter_map(|(id, operation)| candidate(id, operation, operation.input()))
            .collect::<Vec<_>>();
        self.search(&candidates, budget, None)
    }

    /// Checks a history of operations on independent keys, each key's operations against its own
    /// copy of the model (P-compositionality: a history is linearizable if and only if each key's
    /// part is). Much faster than one model of the whole map: the search of each key only sees the
    /// operations on that key.
    ///
    /// The witness order lists each key's operations, key after key; a total order across keys
    /// exists (linearizability is local, Herlihy & Wing) but is not built. A violation names its
    /// key. A key whose search runs out of states leaves the outcome [`Outcome::Unknown`] unless
    /// another key is not linearizable.
    ///
    /// ```
    /// use zk_recipes_history::models::{Register, RegisterInput, RegisterOutput};
    /// use zk_recipes_history::{Checker, History};
    ///
    /// let mut history = History::new();
    /// history.ok(1, 0, 10, ("/a", RegisterInput::Write(1)), RegisterOutput::Written)?;
    /// history.ok(2, 0, 10, ("/b", RegisterInput::Write(2)), RegisterOutput::Written)?;
    /// history.ok(1, 20, 30, ("/a", RegisterInput::Read), RegisterOutput::Value(2))?;
    /// let outcome = Checker::new(Register::new(0)).check_per_key(&history);
    /// let violation = outcome.violation().expect("a read of /b's value on /a");
    /// assert_eq!(violation.key(), Some("\"/a\""));
    /// # Ok::<(), zk_recipes_history::HistoryError>(())
    /// ```
    pub fn check_per_key<K: Ord + Debug>(&self, history: &History<(K, M::Input), M::Output>) -> Outcome {
        let budget = self.budget();
        let mut per_key: BTreeMap<&K, Candidates<'_, M>> = BTreeMap::new();
        for (id, operation) in history.iter() {
            let (key, input) = operation.input();
            if let Some(candidate) = candidate(id, operation, input) {
                per_key.entry(key).or_default().push(candidate);
            }
        }
        let mut order = Vec::new();
        let mut undecided = None;
        for (key, candidates) in per_key {
            match self.search(&candidates, budget, Some(format!("{key:?}"))) {
                Outcome::Linearizable(linearization) => order.extend(linearization.order),
                Outcome::Unknown(running_out @ Undecided { limit: Limit::States(_), .. }) => {
                    undecided.get_or_insert(running_out);
                }
                stop @ (Outcome::NotLinearizable(_) | Outcome::Unknown(_)) => return stop,
            }
        }
        match undecided {
            Some(undecided) => Outcome::Unknown(undecided),
            None => Outcome::Linearizable(Linearization { order }),
        }
    }

    fn budget(&self) -> Budget {
        Budget { max_states: self.max_states, started: Instant::now(), time_limit: self.time_limit }
    }

    fn search(
        &self,
        candidates: &[Candidate<'_, M::Input, M::Output>],
        budget: Budget,
        key: Option<String>,
    ) -> Outcome {
        match search(&self.model, candidates, budget) {
            Found::Linearizable(order) => Outcome::Linearizable(Linearization {
                order: order.into_iter().map(|operation| candidates[operation].id).collect(),
            }),
            Found::NotLinearizable { longest_prefix, state } => {
                Outcome::NotLinearizable(explain(&self.model, candidates, &longest_prefix, &state, key))
            }
            Found::Undecided(limit) => Outcome::Unknown(Undecided { limit, key }),
        }
    }
}

/// The operation as the search sees it; `None` for a `Fail` one (dropped).
fn candidate<'h, Recorded, I, O>(
    id: OperationId,
    operation: &'h Operation<Recorded, O>,
    input: &'h I,
) -> Option<Candidate<'h, I, O>> {
    let output = match operation.completion() {
        Completion::Ok(output) => Some(output),
        Completion::Info => None,
        Completion::Fail => return None,
    };
    Some(Candidate {
        id,
        process: operation.process(),
        invoked: operation.invoked(),
        completed: operation.completed(),
        input,
        output,
    })
}

/// What the checker decided.
///
/// ```
/// use zk_recipes_history::models::{Register, RegisterInput, RegisterOutput};
/// use zk_recipes_history::{check, History, Outcome};
///
/// let mut history = History::new();
/// history.ok(1, 0, 10, RegisterInput::Write(1), RegisterOutput::Written)?;
/// history.ok(2, 20, 30, RegisterInput::Read, RegisterOutput::Value(0))?; // stale
/// let outcome = check(&history, Register::new(0));
/// assert!(matches!(outcome, Outcome::NotLinearizable(_)));
/// assert!(outcome.to_string().starts_with("not linearizable"));
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[must_use]
pub enum Outcome {
    /// Some order of the operations, each at a point within its interval, fits the model.
    Linearizable(Linearization),
    /// None does.
    NotLinearizable(Violation),
    /// The search ran out of its bounds before it decided.
    Unknown(Undecided),
}

impl Outcome {
    /// Whether the history is linearizable (`false` also when undecided).
    pub fn is_linearizable(&self) -> bool {
        matches!(self, Outcome::Linearizable(_))
    }

    /// The witness order, if linearizable.
    pub fn linearization(&self) -> Option<&Linearization> {
        match self {
            Outcome::Linearizable(linearization) => Some(linearization),
            _ => None,
        }
    }

    /// What does not fit, if not linearizable.
    pub fn violation(&self) -> Option<&Violation> {
        match self {
            Outcome::NotLinearizable(violation) => Some(violation),
            _ => None,
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Linearizable(linearization) => {
                write!(formatter, "linearizable ({} operations took effect)", linearization.order.len())
            }
            Outcome::NotLinearizable(violation) => fmt::Display::fmt(violation, formatter),
            Outcome::Unknown(undecided) => fmt::Display::fmt(undecided, formatter),
        }
    }
}

/// One order in which the operations took effect (there may be others).
///
/// It lists every `Ok` operation, and the `Info` operations that took effect in it; an `Info`
/// operation missing from it did not take effect before the last `Ok` operation did (it may have
/// later, or never). `Fail` operations are never in it.
///
/// ```
/// use zk_recipes_history::models::{Register, RegisterInput, RegisterOutput};
/// use zk_recipes_history::{check, History};
///
/// let mut history = History::new();
/// let write = history.ok(1, 0, 30, RegisterInput::Write(1), RegisterOutput::Written)?;
/// let read = history.ok(2, 10, 20, RegisterInput::Read, RegisterOutput::Value(1))?;
/// let outcome = check(&history, Register::new(0));
/// assert_eq!(outcome.linearization().expect("linearizable").order(), [write, read]);
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Linearization {
    order: Vec<OperationId>,
}

impl Linearization {
    /// The operations in the order they took effect.
    pub fn order(&self) -> &[OperationId] {
        &self.order
    }

    /// Whether `operation` took effect in this order.
    pub fn took_effect(&self, operation: OperationId) -> bool {
        self.order.contains(&operation)
    }
}

/// A search that ran out of its bounds.
///
/// ```
/// use zk_recipes_history::models::{Register, RegisterInput, RegisterOutput};
/// use zk_recipes_history::{Checker, History, Limit, Outcome};
///
/// let mut history = History::new();
/// for process in 0..4 {
///     history.ok(process, 0, 10, RegisterInput::Write(process), RegisterOutput::Written)?;
/// }
/// history.ok(9, 20, 30, RegisterInput::Read, RegisterOutput::Value(7))?; // never written
/// match Checker::new(Register::new(0)).max_states(3).check(&history) {
///     Outcome::Unknown(undecided) => assert_eq!(undecided.limit(), Limit::States(3)),
///     other => panic!("{other}"),
/// }
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Undecided {
    limit: Limit,
    key: Option<String>,
}

impl Undecided {
    /// The bound it reached.
    pub fn limit(&self) -> Limit {
        self.limit
    }

    /// The key whose search it was ([`Checker::check_per_key`]), as `{:?}`.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }
}

impl fmt::Display for Undecided {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str("unknown: the search ")?;
        if let Some(key) = &self.key {
            write!(formatter, "of key {key} ")?;
        }
        match self.limit {
            Limit::States(states) => write!(formatter, "remembered {states} states without deciding"),
            Limit::Time(limit) => write!(formatter, "ran {limit:?} without deciding"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::models::{Register, RegisterInput, RegisterOutput};

    #[test]
    fn public_types_are_send_and_sync() {
        fn send_and_sync<T: Send + Sync>() {}
        send_and_sync::<Checker<Register<u64>>>();
        send_and_sync::<History<RegisterInput<u64>, RegisterOutput<u64>>>();
        send_and_sync::<Outcome>();
        send_and_sync::<Linearization>();
        send_and_sync::<Violation>();
        send_and_sync::<Undecided>();
        send_and_sync::<crate::HistoryError>();
    }
}
