//! A counter as `DistributedAtomicLong` offers it: get, add-and-get, compare-and-set.

use crate::Model;

/// A 64-bit counter: `get`, `add` (and `increment`, `decrement`: add 1 and -1) answering the value
/// after, `compareAndSet` answering whether it wrote. Arithmetic wraps, as Java's `long` does.
///
/// A lost increment (two increments answering the same value, or a final value below what the
/// successful increments add up to) and an increment applied twice but reported once (a final
/// value above what the increments and the unknown outcomes can explain) both show as histories
/// that are not linearizable.
///
/// ```
/// use zk_recipes_history::models::{Counter, CounterInput, CounterOutput};
/// use zk_recipes_history::{check, History};
///
/// let mut history = History::new();
/// history.ok(1, 0, 10, CounterInput::Add(1), CounterOutput::Value(1))?;
/// history.ok(2, 5, 15, CounterInput::Add(1), CounterOutput::Value(1))?; // the same value: one is lost
/// assert!(!check(&history, Counter::new(0)).is_linearizable());
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counter {
    initial: i64,
}

impl Counter {
    /// A counter at `initial` before the first operation (`DistributedAtomicLong` reads a missing
    /// node as 0).
    pub fn new(initial: i64) -> Self {
        Counter { initial }
    }
}

/// An operation on a [`Counter`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterInput {
    /// Read the value: answers [`CounterOutput::Value`].
    Get,
    /// Add to the value: answers [`CounterOutput::Value`], the value after (Curator's
    /// `AtomicValue.postValue`).
    Add(i64),
    /// Write `new` if the counter holds `expected`: answers [`CounterOutput::Swapped`].
    CompareAndSet {
        /// The value the counter must hold.
        expected: i64,
        /// The value written if it does.
        new: i64,
    },
}

/// What an operation on a [`Counter`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CounterOutput {
    /// The value read, or the value after an add.
    Value(i64),
    /// Whether a compare-and-set wrote.
    Swapped(bool),
}

impl Model for Counter {
    type State = i64;
    type Input = CounterInput;
    type Output = CounterOutput;

    fn init(&self) -> i64 {
        self.initial
    }

    fn step(&self, value: &i64, input: &CounterInput) -> (i64, CounterOutput) {
        match *input {
            CounterInput::Get => (*value, CounterOutput::Value(*value)),
            CounterInput::Add(delta) => {
                let after = value.wrapping_add(delta);
                (after, CounterOutput::Value(after))
            }
            CounterInput::CompareAndSet { expected, new } if expected == *value => {
                (new, CounterOutput::Swapped(true))
            }
            CounterInput::CompareAndSet { .. } => (*value, CounterOutput::Swapped(false)),
        }
    }
}
