//! A history that is not linearizable: the violation the checker reports, and its explanation.

use std::fmt::{self, Debug, Write};

use crate::history::OperationId;
use crate::search::Candidate;
use crate::Model;

/// How many operations of the longest prefix an explanation shows (its last ones).
const PREFIX_SHOWN: usize = 8;
/// How many operations that could come next an explanation shows.
const NEXT_SHOWN: usize = 12;

/// Explains why nothing fits after `longest_prefix` (indices into `candidates`), whose state is
/// `state`.
pub(crate) fn explain<M: Model>(
    model: &M,
    candidates: &[Candidate<'_, M::Input, M::Output>],
    longest_prefix: &[usize],
    state: &M::State,
    key: Option<String>,
) -> Violation {
    let mut in_prefix = vec![false; candidates.len()];
    for operation in longest_prefix {
        in_prefix[*operation] = true;
    }
    let left = || (0..candidates.len()).filter(|operation| !in_prefix[*operation]);
    // The operation due first among those left: it had to take effect before anything invoked
    // after its completion. The search ended undecided there, so one is left.
    let unplaced =
        left().filter_map(|operation| candidates[operation].due().map(|due| (due, operation))).min();
    let mut text = String::from("not linearizable");
    if let Some(key) = &key {
        let _ = write!(text, " (key {key})");
    }
    let Some((due, unplaced)) = unplaced else {
        return Violation {
            key,
            longest_prefix: longest_prefix.iter().map(|operation| candidates[*operation].id).collect(),
            unplaced: candidates.first().map_or(OperationId::at(0), |candidate| candidate.id),
            explanation: text,
        };
    };
    let _ = write!(
        text,
        ": {} cannot take effect after the longest order that fits ({} of {} operations",
        describe(&candidates[unplaced]),
        longest_prefix.len(),
        candidates.len()
    );
    let shown = longest_prefix.len().min(PREFIX_SHOWN);
    if shown < longest_prefix.len() {
        let _ = write!(text, ", the last {shown}");
    }
    text.push_str("):");
    for operation in &longest_prefix[longest_prefix.len() - shown..] {
        let _ = write!(text, "\n  {}", describe(&candidates[*operation]));
    }
    let _ = write!(text, "\nstate then: {state:?}\nwhat could take effect next (invoked by {due}):");
    // Each operation that could come next, with what the model says of it there; unknown ones
    // that would change nothing are only counted.
    let mut unchanging = 0;
    let mut verdicts = Vec::new();
    for operation in left().filter(|operation| candidates[*operation].invoked <= due) {
        let candidate = &candidates[operation];
        let (next_state, answer) = model.step(state, candidate.input);
        let verdict = match candidate.output {
            Some(recorded) if *recorded != answer => format!("the model answers {answer:?}"),
            None if next_state == *state => {
                unchanging += 1;
                continue;
            }
            _ => format!("fits (state then {next_state:?}), but nothing fits after it"),
        };
        verdicts.push(format!("\n  {}: {verdict}", describe(candidate)));
    }
    for verdict in verdicts.iter().take(NEXT_SHOWN) {
        text.push_str(verdict);
    }
    if verdicts.len() > NEXT_SHOWN {
        let _ = write!(text, "\n  and {} more", verdicts.len() - NEXT_SHOWN);
    }
    if unchanging > 0 {
        let _ = write!(text, "\n  and {unchanging} of unknown outcome that would change nothing");
    }
    Violation {
        key,
        longest_prefix: longest_prefix.iter().map(|operation| candidates[*operation].id).collect(),
        unplaced: candidates[unplaced].id,
        explanation: text,
    }
}

/// `#2 (process 1) Read -> Value(0), 40..90`, or `... -> unknown, invoked at 40`.
fn describe<I: Debug, O: Debug>(candidate: &Candidate<'_, I, O>) -> String {
    let head = format!("{} (process {}) {:?}", candidate.id, candidate.process, candidate.input);
    match (candidate.output, candidate.completed) {
        (Some(output), Some(completed)) => {
            format!("{head} -> {output:?}, {}..{completed}", candidate.invoked)
        }
        (_, Some(gave_up)) => {
            format!("{head} -> unknown, invoked at {}, gave up at {gave_up}", candidate.invoked)
        }
        (_, None) => format!("{head} -> unknown, invoked at {}", candidate.invoked),
    }
}

/// Why a history is not linearizable, Porcupine-style: the longest order of operations that fits,
/// and the operation that cannot follow it.
///
/// After the longest prefix, the operation that completed first among those left had to take
/// effect before anything invoked after its completion; neither it nor any operation that could
/// go before it fits there (or each that fits leads nowhere).
///
/// ```
/// use zk_recipes_history::models::{Counter, CounterInput, CounterOutput};
/// use zk_recipes_history::{check, History};
///
/// let mut history = History::new();
/// let first = history.ok(1, 0, 10, CounterInput::Add(1), CounterOutput::Value(1))?;
/// let second = history.ok(2, 20, 30, CounterInput::Add(1), CounterOutput::Value(1))?; // lost the first
/// let outcome = check(&history, Counter::new(0));
/// let violation = outcome.violation().expect("a lost increment");
/// assert_eq!(violation.longest_prefix(), [first]);
/// assert_eq!(violation.unplaced(), second);
/// assert!(violation.to_string().contains("the model answers Value(2)"), "{violation}");
/// # Ok::<(), zk_recipes_history::HistoryError>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    pub(crate) key: Option<String>,
    pub(crate) longest_prefix: Vec<OperationId>,
    pub(crate) unplaced: OperationId,
    pub(crate) explanation: String,
}

impl Violation {
    /// The key whose operations are not linearizable ([`Checker::check_per_key`](crate::Checker::check_per_key)), as `{:?}`.
    pub fn key(&self) -> Option<&str> {
        self.key.as_deref()
    }

    /// The longest order of operations that fits the model.
    pub fn longest_prefix(&self) -> &[OperationId] {
        &self.longest_prefix
    }

    /// The operation that had to come next and could not.
    pub fn unplaced(&self) -> OperationId {
        self.unplaced
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        formatter.write_str(&self.explanation)
    }
}
