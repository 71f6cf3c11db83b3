//! The sequential specification a history is checked against.

use std::fmt::Debug;
use std::hash::Hash;

/// A sequential specification: what one operation does to the object's state and what it
/// answers, when operations run one at a time.
///
/// The step is deterministic: given a state and an input there is one next state and one answer.
/// The checker accepts an `Ok` operation at a point only if the model's answer there equals the
/// recorded one; an `Info` operation's answer is unknown, so any answer is accepted and only its
/// effect on the state counts. Where the real object may choose (which item an unordered queue
/// hands out), put the choice into the input, as [`crate::models::ItemSet`] does with
/// [`crate::models::SetInput::Take`].
///
/// States are compared and hashed to remember what the search has already tried: two equal
/// states must behave alike for every input that follows.
///
/// ```
/// use zk_recipes_history::{check, History, Model};
///
/// /// A flag that can be raised once: `raise` answers whether this call raised it.
/// struct Flag;
///
/// impl Model for Flag {
///     type State = bool;
///     type Input = ();
///     type Output = bool;
///
///     fn init(&self) -> bool {
///         false
///     }
///
///     fn step(&self, raised: &bool, _raise: &()) -> (bool, bool) {
///         (true, !*raised)
///     }
/// }
///
/// let mut history = History::new();
/// history.ok(1, 0, 10, (), true)?;
/// history.ok(2, 5, 15, (), true)?; // both claim to have raised it
/// assert!(!check(&history, Flag).is_linearizable());
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
pub trait Model {
    /// The object's state.
    type State: Clone + Eq + Hash + Debug;
    /// What an operation asks for.
    type Input: Debug;
    /// What an operation answers.
    type Output: PartialEq + Debug;

    /// The state before the first operation.
    fn init(&self) -> Self::State;

    /// Runs `input` on `state`: the next state and the answer.
    fn step(&self, state: &Self::State, input: &Self::Input) -> (Self::State, Self::Output);
}
