//! The search: Wing & Gong's, with Lowe's memoization ("Testing for linearizability", 2017), as
//! Porcupine implements it.
//!
//! The operations' invocations and completions ("calls" and "returns") form one list in time
//! order. The search walks the list from its head: at a call, it tries to let that operation take
//! effect now (the model's answer must match the recorded one); if it fits and the pair (set of
//! operations that took effect, state) is new, the operation's call and return are lifted out of
//! the list, the pair is remembered, and the walk restarts at the head. Reaching a return means
//! that operation had to take effect before anything later: the last choice is undone and the walk
//! goes on after it. The history is linearizable once every `Ok` operation took effect; it is not
//! once a return is reached with no choice left to undo.
//!
//! An `Info` operation's return is at the end of the list, after every other: it may take effect
//! at any point after its invocation, and need not take effect at all. An `Info` operation that
//! leaves the state as it is (a read, a compare-and-set that does not match) is never tried: its
//! answer is unknown, so it constrains nothing.

use std::collections::HashSet;
use std::time::{Duration, Instant};

use crate::history::{OperationId, ProcessId, Stamp};
use crate::Model;

/// One operation that may have taken effect (`Fail` operations are left out), borrowed from its
/// history.
#[derive(Debug)]
pub(crate) struct Candidate<'h, I, O> {
    pub(crate) id: OperationId,
    pub(crate) process: ProcessId,
    pub(crate) invoked: Stamp,
    /// When its process saw it end (shown in explanations).
    pub(crate) completed: Option<Stamp>,
    pub(crate) input: &'h I,
    /// The recorded answer of an `Ok` operation; `None` for an `Info` one.
    pub(crate) output: Option<&'h O>,
}

/// The candidates of one search for `M`.
pub(crate) type Candidates<'h, M> = Vec<Candidate<'h, <M as Model>::Input, <M as Model>::Output>>;

impl<I, O> Candidate<'_, I, O> {
    /// The last point at which it may take effect: `None` (never required) for an `Info` one.
    pub(crate) fn due(&self) -> Option<Stamp> {
        self.output.and(self.completed)
    }
}

/// What stops a search that has not decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// It remembered this many (set of operations, state) pairs in one search.
    States(usize),
    /// It ran this long.
    Time(Duration),
}

/// The bounds of one check.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Budget {
    pub(crate) max_states: usize,
    pub(crate) started: Instant,
    pub(crate) time_limit: Duration,
}

/// How one search ended; operations are indices into the candidates.
#[derive(Debug)]
pub(crate) enum Found<S> {
    /// The order in which the operations took effect.
    Linearizable(Vec<usize>),
    /// The longest order that fits, and the state after it.
    NotLinearizable { longest_prefix: Vec<usize>, state: S },
    /// The budget ran out.
    Undecided(Limit),
}

/// How often (in steps of the walk) the clock is read.
const CLOCK_EVERY: u32 = 1024;

/// Searches for an order in which `candidates` take effect that fits `model`.
pub(crate) fn search<M: Model>(
    model: &M,
    candidates: &[Candidate<'_, M::Input, M::Output>],
    budget: Budget,
) -> Found<M::State> {
    let mut list = Timeline::new(candidates);
    let mut state = model.init();
    let mut took_effect = OperationSet::new(candidates.len());
    let mut seen: HashSet<(OperationSet, M::State)> = HashSet::new();
    // The operations that took effect, in order, each with the state before it.
    let mut order: Vec<(usize, M::State)> = Vec::new();
    let mut longest_prefix: Vec<usize> = Vec::new();
    let mut longest_state = state.clone();
    let mut due_left = candidates.iter().filter(|candidate| candidate.due().is_some()).count();
    // The clock is read at the first step, so that a zero time limit stops every search.
    let mut steps_to_clock = 1;
    let mut entry = list.first();
    loop {
        if due_left == 0 {
            return Found::Linearizable(order.into_iter().map(|(operation, _)| operation).collect());
        }
        steps_to_clock -= 1;
        if steps_to_clock == 0 {
            steps_to_clock = CLOCK_EVERY;
            if budget.started.elapsed() >= budget.time_limit {
                return Found::Undecided(Limit::Time(budget.time_limit));
            }
        }
        // An `Ok` operation's return is still in the list, so the walk meets one before its end.
        let Some(at) = entry else {
            return Found::NotLinearizable { longest_prefix, state: longest_state };
        };
        let operation = list.operation(at);
        if list.is_call(at) {
            let candidate = &candidates[operation];
            let (next_state, answer) = model.step(&state, candidate.input);
            let fits = match candidate.output {
                Some(recorded) => *recorded == answer,
                None => next_state != state,
            };
            if fits {
                took_effect.insert(operation);
                if seen.insert((took_effect.clone(), next_state.clone())) {
                    if seen.len() > budget.max_states {
                        return Found::Undecided(Limit::States(budget.max_states));
                    }
                    order.push((operation, std::mem::replace(&mut state, next_state)));
                    list.lift(operation);
                    if candidate.due().is_some() {
                        due_left -= 1;
                    }
                    if order.len() > longest_prefix.len() {
                        longest_prefix = order.iter().map(|(operation, _)| *operation).collect();
                        longest_state = state.clone();
                    }
                    entry = list.first();
                    continue;
                }
                took_effect.remove(operation);
            }
            entry = list.next(at);
        } else {
            // This operation had to take effect before anything later: undo the last choice.
            let Some((undone, previous_state)) = order.pop() else {
                return Found::NotLinearizable { longest_prefix, state: longest_state };
            };
            state = previous_state;
            took_effect.remove(undone);
            list.unlift(undone);
            if candidates[undone].due().is_some() {
                due_left += 1;
            }
            entry = list.next(list.call_of(undone));
        }
    }
}

/// The set of operations that took effect.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct OperationSet {
    words: Box<[u64]>,
}

impl OperationSet {
    fn new(operations: usize) -> Self {
        OperationSet { words: vec![0; operations.div_ceil(64)].into_boxed_slice() }
    }

    fn insert(&mut self, operation: usize) {
        self.words[operation / 64] |= 1 << (operation % 64);
    }

    fn remove(&mut self, operation: usize) {
        self.words[operation / 64] &= !(1 << (operation % 64));
    }
}

/// No entry: the end of the list.
const NONE: usize = usize::MAX;
/// The list's head, before every entry.
const HEAD: usize = 0;

/// The calls and returns in time order, as a doubly linked list over indices (entry 0 is the
/// head), from which an operation's two entries are lifted out and put back in reverse order.
#[derive(Debug)]
struct Timeline {
    next: Vec<usize>,
    previous: Vec<usize>,
    /// Per entry: the operation, and whether it is the call (else the return).
    operation_of: Vec<(usize, bool)>,
    /// Per operation: its call's and its return's entry.
    entries_of: Vec<(usize, usize)>,
}

impl Timeline {
    fn new<I, O>(candidates: &[Candidate<'_, I, O>]) -> Self {
        // At equal stamps calls come first: operations touching at one stamp are concurrent.
        // Returns that are never due come after everything.
        let mut events: Vec<((bool, Stamp, bool), usize)> = Vec::with_capacity(candidates.len() * 2);
        for (operation, candidate) in candidates.iter().enumerate() {
            events.push(((false, candidate.invoked, false), operation));
            let returned = match candidate.due() {
                Some(due) => (false, due, true),
                None => (true, 0, true),
            };
            events.push((returned, operation));
        }
        events.sort_by_key(|(key, _)| *key);
        let entries = events.len() + 1;
        let mut timeline = Timeline {
            next: (1..=entries).map(|next| if next == entries { NONE } else { next }).collect(),
            previous: (0..entries).map(|entry| entry.wrapping_sub(1)).collect(),
            operation_of: vec![(NONE, false); entries],
            entries_of: vec![(NONE, NONE); candidates.len()],
        };
        timeline.previous[HEAD] = NONE;
        for (index, ((_, _, is_return), operation)) in events.into_iter().enumerate() {
            let entry = index + 1;
            timeline.operation_of[entry] = (operation, !is_return);
            if is_return {
                timeline.entries_of[operation].1 = entry;
            } else {
                timeline.entries_of[operation].0 = entry;
            }
        }
        timeline
    }

    fn first(&self) -> Option<usize> {
        self.next(HEAD)
    }

    fn next(&self, entry: usize) -> Option<usize> {
        Some(self.next[entry]).filter(|next| *next != NONE)
    }

    fn operation(&self, entry: usize) -> usize {
        self.operation_of[entry].0
    }

    fn is_call(&self, entry: usize) -> bool {
        self.operation_of[entry].1
    }

    fn call_of(&self, operation: usize) -> usize {
        self.entries_of[operation].0
    }

    fn lift(&mut self, operation: usize) {
        let (call, ret) = self.entries_of[operation];
        self.unlink(call);
        self.unlink(ret);
    }

    fn unlift(&mut self, operation: usize) {
        let (call, ret) = self.entries_of[operation];
        self.relink(ret);
        self.relink(call);
    }

    fn unlink(&mut self, entry: usize) {
        let (previous, next) = (self.previous[entry], self.next[entry]);
        self.next[previous] = next;
        if next != NONE {
            self.previous[next] = previous;
        }
    }

    /// Puts `entry` back between the neighbours it had when it was unlinked (those are in the
    /// list again: entries come back in the reverse order they left).
    fn relink(&mut self, entry: usize) {
        let (previous, next) = (self.previous[entry], self.next[entry]);
        self.next[previous] = entry;
        if next != NONE {
            self.previous[next] = entry;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn candidate(
        id: usize,
        invoked: Stamp,
        completed: Option<Stamp>,
        output: Option<&()>,
    ) -> Candidate<'_, (), ()> {
        Candidate { id: OperationId::at(id), process: 0, invoked, completed, input: &(), output }
    }

    fn walk(timeline: &Timeline) -> Vec<(usize, bool)> {
        let mut entries = Vec::new();
        let mut at = timeline.first();
        while let Some(entry) = at {
            entries.push((timeline.operation(entry), timeline.is_call(entry)));
            at = timeline.next(entry);
        }
        entries
    }

    #[test]
    fn the_timeline_orders_calls_before_returns_at_equal_stamps_and_unknown_returns_last() {
        let candidates = [
            candidate(0, 10, Some(20), Some(&())),
            candidate(1, 0, Some(50), None),
            candidate(2, 20, Some(20), Some(&())),
        ];
        let mut timeline = Timeline::new(&candidates);
        let expected = vec![(1, true), (0, true), (2, true), (0, false), (2, false), (1, false)];
        assert_eq!(walk(&timeline), expected);
        timeline.lift(0);
        timeline.lift(2);
        assert_eq!(walk(&timeline), vec![(1, true), (1, false)]);
        timeline.unlift(2);
        timeline.unlift(0);
        assert_eq!(walk(&timeline), expected);
    }

    #[test]
    fn operation_sets_compare_by_members() {
        let mut left = OperationSet::new(130);
        let mut right = OperationSet::new(130);
        left.insert(129);
        left.insert(3);
        right.insert(3);
        assert_ne!(left, right);
        right.insert(129);
        assert_eq!(left, right);
        left.remove(129);
        assert_ne!(left, right);
    }
}
