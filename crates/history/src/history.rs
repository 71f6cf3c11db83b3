//! What was recorded: operations with their invocation and completion times and how each ended.

use std::fmt;

/// A point in time: any monotonically ordered count (microseconds since the epoch, nanoseconds
/// since the start of a test, a logical clock). Only the order of stamps matters.
///
/// An [`std::time::Instant`] converts through a common origin:
///
/// ```
/// use std::time::Instant;
/// use zk_recipes_history::Stamp;
///
/// let origin = Instant::now();
/// let stamp = |at: Instant| -> Stamp { at.duration_since(origin).as_nanos() as Stamp };
/// assert!(stamp(Instant::now()) >= stamp(origin));
/// ```
pub type Stamp = u64;

/// The process (client) that ran an operation. A process is a label for explanations: the
/// checker relies only on the times, so a process may go on after an operation of unknown outcome
/// (whose request may still be in flight), as a chaos contender does.
pub type ProcessId = u64;

/// An operation's place in its [`History`], in the order the operations were added.
///
/// ```
/// use zk_recipes_history::History;
/// use zk_recipes_history::models::{RegisterInput, RegisterOutput};
///
/// let mut history = History::new();
/// let write = history.ok(1, 0, 10, RegisterInput::Write(5), RegisterOutput::<i32>::Written)?;
/// assert_eq!(write.index(), 0);
/// assert_eq!(write.to_string(), "#0");
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct OperationId(usize);

impl OperationId {
    pub(crate) fn at(index: usize) -> Self {
        OperationId(index)
    }

    /// The position in the history.
    pub fn index(self) -> usize {
        self.0
    }
}

impl fmt::Display for OperationId {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "#{}", self.0)
    }
}

/// How an operation ended, in Jepsen's terms.
///
/// ```
/// use zk_recipes_history::Completion;
///
/// let read: Completion<i64> = Completion::Ok(3);
/// assert_eq!(read.output(), Some(&3));
/// assert_eq!(Completion::<i64>::Info.output(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion<O> {
    /// It took effect, at one point between its invocation and its completion, and answered this.
    Ok(O),
    /// It is known not to have taken effect (refused before anything was sent, a version
    /// conflict that changed nothing): the checker drops it.
    Fail,
    /// Unknown outcome (a timeout, a connection loss with the request in flight, a process killed
    /// before it logged the reply): it may have taken effect at any one point after its
    /// invocation, up to the end of the history and beyond, or never. Its answer is unknown.
    Info,
}

impl<O> Completion<O> {
    /// The recorded answer of an [`Completion::Ok`] operation.
    pub fn output(&self) -> Option<&O> {
        match self {
            Completion::Ok(output) => Some(output),
            Completion::Fail | Completion::Info => None,
        }
    }
}

/// One recorded operation. Made by [`History::ok`], [`History::fail`] and [`History::info`],
/// which check its times.
///
/// ```
/// use zk_recipes_history::{Completion, History};
/// use zk_recipes_history::models::CounterInput;
///
/// let mut history = History::<CounterInput, ()>::new();
/// let timed_out = history.info(7, 100, Some(150), CounterInput::Add(1))?;
/// let operation = &history[timed_out];
/// assert_eq!((operation.process(), operation.invoked(), operation.completed()), (7, 100, Some(150)));
/// assert_eq!(operation.completion(), &Completion::Info);
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operation<I, O> {
    process: ProcessId,
    invoked: Stamp,
    completed: Option<Stamp>,
    input: I,
    completion: Completion<O>,
}

impl<I, O> Operation<I, O> {
    /// The process that ran it.
    pub fn process(&self) -> ProcessId {
        self.process
    }

    /// When it was invoked (the request may have been sent from then on).
    pub fn invoked(&self) -> Stamp {
        self.invoked
    }

    /// When its process saw it end: always known for [`Completion::Ok`]; for
    /// [`Completion::Info`] when the process gave up, which bounds nothing (the request may still
    /// take effect later).
    pub fn completed(&self) -> Option<Stamp> {
        self.completed
    }

    /// What it asked for.
    pub fn input(&self) -> &I {
        &self.input
    }

    /// How it ended.
    pub fn completion(&self) -> &Completion<O> {
        &self.completion
    }
}

/// Why an operation cannot be added to a [`History`].
///
/// ```
/// use zk_recipes_history::{History, HistoryError};
///
/// let mut history = History::<&str, &str>::new();
/// let backwards = history.ok(1, 20, 10, "read", "0");
/// assert_eq!(backwards, Err(HistoryError::CompletedBeforeInvoked { invoked: 20, completed: 10 }));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// The completion stamp is earlier than the invocation stamp.
    #[error("an operation completed at {completed}, before it was invoked at {invoked}")]
    CompletedBeforeInvoked {
        /// The invocation stamp.
        invoked: Stamp,
        /// The completion stamp.
        completed: Stamp,
    },
}

/// A history: the operations of concurrent processes, each with its invocation, its completion
/// and how it ended, in any order.
///
/// # Equal stamps
/// An operation precedes another only if it completed strictly before the other was invoked.
/// Operations whose stamps are equal (one completed at the stamp the other was invoked) are
/// concurrent: either order is allowed. Coarse or shared clocks then never make a correct history
/// look wrong; they can only hide an ordering the clock could not see.
///
/// ```
/// use zk_recipes_history::models::{Register, RegisterInput, RegisterOutput};
/// use zk_recipes_history::{check, History};
///
/// let mut history = History::new();
/// // The read completed at 10, the stamp at which the write was invoked: they are concurrent,
/// // and the read may have seen the write.
/// history.ok(1, 10, 20, RegisterInput::Write(1), RegisterOutput::Written)?;
/// history.ok(2, 0, 10, RegisterInput::Read, RegisterOutput::Value(1))?;
/// assert!(check(&history, Register::new(0)).is_linearizable());
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History<I, O> {
    operations: Vec<Operation<I, O>>,
}

impl<I, O> Default for History<I, O> {
    fn default() -> Self {
        History { operations: Vec::new() }
    }
}

impl<I, O> History<I, O> {
    /// An empty history.
    pub fn new() -> Self {
        History::default()
    }

    /// Adds an operation that took effect between `invoked` and `completed` and answered
    /// `output`.
    ///
    /// # Errors
    /// [`HistoryError::CompletedBeforeInvoked`] when `completed < invoked`.
    pub fn ok(
        &mut self,
        process: ProcessId,
        invoked: Stamp,
        completed: Stamp,
        input: I,
        output: O,
    ) -> Result<OperationId, HistoryError> {
        self.push(process, invoked, Some(completed), input, Completion::Ok(output))
    }

    /// Adds an operation known not to have taken effect (the checker drops it).
    ///
    /// # Errors
    /// [`HistoryError::CompletedBeforeInvoked`] when `completed < invoked`.
    pub fn fail(
        &mut self,
        process: ProcessId,
        invoked: Stamp,
        completed: Stamp,
        input: I,
    ) -> Result<OperationId, HistoryError> {
        self.push(process, invoked, Some(completed), input, Completion::Fail)
    }

    /// Adds an operation of unknown outcome, invoked at `invoked`; `gave_up` is when its process
    /// stopped waiting, if it logged that (a killed process did not). The operation may have taken
    /// effect at any point after `invoked`, even after `gave_up`, or never.
    ///
    /// # Errors
    /// [`HistoryError::CompletedBeforeInvoked`] when `gave_up < invoked`.
    pub fn info(
        &mut self,
        process: ProcessId,
        invoked: Stamp,
        gave_up: Option<Stamp>,
        input: I,
    ) -> Result<OperationId, HistoryError> {
        self.push(process, invoked, gave_up, input, Completion::Info)
    }

    fn push(
        &mut self,
        process: ProcessId,
        invoked: Stamp,
        completed: Option<Stamp>,
        input: I,
        completion: Completion<O>,
    ) -> Result<OperationId, HistoryError> {
        if let Some(completed) = completed.filter(|completed| *completed < invoked) {
            return Err(HistoryError::CompletedBeforeInvoked { invoked, completed });
        }
        let id = OperationId(self.operations.len());
        self.operations.push(Operation { process, invoked, completed, input, completion });
        Ok(id)
    }

    /// The operations, indexed by [`OperationId::index`].
    pub fn operations(&self) -> &[Operation<I, O>] {
        &self.operations
    }

    /// The operation `id`, if it is in this history.
    pub fn get(&self, id: OperationId) -> Option<&Operation<I, O>> {
        self.operations.get(id.0)
    }

    /// How many operations were recorded.
    pub fn len(&self) -> usize {
        self.operations.len()
    }

    /// Whether nothing was recorded.
    pub fn is_empty(&self) -> bool {
        self.operations.is_empty()
    }

    /// The operations with their ids.
    pub fn iter(&self) -> impl Iterator<Item = (OperationId, &Operation<I, O>)> {
        self.operations.iter().enumerate().map(|(index, operation)| (OperationId(index), operation))
    }
}

impl<I, O> std::ops::Index<OperationId> for History<I, O> {
    type Output = Operation<I, O>;

    fn index(&self, id: OperationId) -> &Operation<I, O> {
        &self.operations[id.0]
    }
}
