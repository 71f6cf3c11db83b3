//! # zk-recipes-history
//!
//! Checks recorded histories for linearizability, as Knossos and Porcupine do: given what
//! concurrent processes asked of an object, when, and what it answered, is there one order of the
//! operations, each taking effect at a single point between its invocation and its completion,
//! in which a sequential [`Model`] of the object gives every recorded answer?
//!
//! * A [`History`] holds the operations: a process, an invocation and a completion [`Stamp`], an
//!   input, and how it ended ([`Completion`]).
//! * A [`Model`] is the sequential specification; [`models`] has registers (by value and by
//!   version, as `SharedCount`), a counter (`DistributedAtomicLong`), a FIFO queue and a set of
//!   items taken at most once.
//! * [`check`] (or a [`Checker`] with its bounds) decides: [`Outcome::Linearizable`] with one
//!   witness order, [`Outcome::NotLinearizable`] with the longest order that fits and the
//!   operation that cannot follow it, or [`Outcome::Unknown`] when the search ran out of its
//!   bounds.
//!
//! ```
//! use zk_recipes_history::models::{Counter, CounterInput, CounterOutput};
//! use zk_recipes_history::{check, History};
//!
//! let mut history = History::new();
//! history.ok(1, 0, 10, CounterInput::Add(1), CounterOutput::Value(1))?;
//! history.ok(2, 5, 15, CounterInput::Add(1), CounterOutput::Value(2))?;
//! history.ok(3, 20, 30, CounterInput::Get, CounterOutput::Value(1))?; // an increment went missing
//! let outcome = check(&history, Counter::new(0));
//! assert!(!outcome.is_linearizable());
//! println!("{outcome}");
//! # Ok::<(), zk_recipes_history::HistoryError>(())
//! ```
//!
//! ## Operations of unknown outcome
//! Jepsen's `:info`: a call that timed out, whose connection broke with the request in flight, or
//! whose process was killed before it logged the reply ([`Completion::Info`], added with
//! [`History::info`]). It may have taken effect at any one point after its invocation, up to the
//! end of the history (and after), or never; its answer is unknown. The checker tries both, and
//! takes it into the witness order only where the rest of the history needs it. An operation
//! known not to have taken effect ([`Completion::Fail`]) is dropped.
//!
//! Every unknown operation stays open to the end of the history, which doubles the states the
//! search may visit from its invocation on: a history with many of them checks slower. Those that
//! cannot change the state (a read, a compare-and-set that does not match where it is tried) cost
//! nothing: they are never tried.
//!
//! ## Equal stamps
//! One operation precedes another only if it completed strictly before the other was invoked;
//! operations whose stamps touch are concurrent (see [`History`]).
//!
//! ## The search and its bounds
//! Wing & Gong's search with Lowe's memoization ("Testing for linearizability", 2017), as
//! Porcupine implements it: the calls and returns in one time-ordered list, operations lifted out
//! of it as they take effect, and every (set of operations that took effect, model state) pair
//! remembered so that no order is explored twice. The search is exponential in the worst case; a
//! [`Checker`] bounds it by the states it remembers and by time (defaults: 1,000,000 states,
//! 60 s) and answers [`Outcome::Unknown`] when a bound is reached, so that a pathological history
//! never hangs CI. [`Checker::check_per_key`] splits a history of independent keys into one
//! search per key (P-compositionality), which is how maps of registers or counters stay cheap.

mod check;
mod explain;
mod history;
mod model;
pub mod models;
mod search;

pub use check::{check, Checker, Linearization, Outcome, Undecided};
pub use explain::Violation;
pub use history::{Completion, History, HistoryError, Operation, OperationId, ProcessId, Stamp};
pub use model::Model;
pub use search::Limit;
