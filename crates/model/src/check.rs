//! Runs a model's exhaustive check and reports what it found: how many states, how long, and a
//! counterexample per property that failed.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::{Duration, Instant};

use stateright::{Checker, Expectation, Model};

/// What an exhaustive check of one model found.
#[derive(Debug)]
pub struct Report<A> {
    /// Distinct states visited.
    pub unique_states: usize,
    /// States generated, with repeats.
    pub states: usize,
    /// The longest path explored.
    pub max_depth: usize,
    /// Wall time of the check.
    pub elapsed: Duration,
    /// Whether every reachable state was visited (not stopped by a bound or a discovery).
    pub complete: bool,
    /// The actions leading to a violation, per `always` property violated.
    pub counterexamples: BTreeMap<&'static str, Vec<A>>,
    /// The actions leading to an example, per `sometimes` property reached (a model that never
    /// reaches what it is about checks nothing).
    pub examples: BTreeMap<&'static str, Vec<A>>,
    /// The `sometimes` properties no state reached.
    pub unreached: Vec<&'static str>,
}

impl<A: Debug> Report<A> {
    /// Whether no property was violated, every `sometimes` property was reached, and every
    /// reachable state was visited.
    pub fn holds(&self) -> bool {
        self.complete && self.counterexamples.is_empty() && self.unreached.is_empty()
    }

    /// One line: the counts, the time and the properties violated.
    pub fn summary(&self) -> String {
        let violated: Vec<&str> = self.counterexamples.keys().copied().collect();
        format!(
            "{} unique states ({} generated, depth {}) in {:.2} s, {}; violated: {:?}{}",
            self.unique_states,
            self.states,
            self.max_depth,
            self.elapsed.as_secs_f64(),
            if self.complete { "exhaustive" } else { "NOT exhaustive" },
            violated,
            if self.unreached.is_empty() {
                String::new()
            } else {
                format!("; never reached: {:?}", self.unreached)
            },
        )
    }

    /// The counterexample of `property`, one action a line.
    pub fn trace(&self, property: &str) -> Option<String> {
        let actions = self.counterexamples.get(property)?;
        Some(
            actions
                .iter()
                .enumerate()
                .map(|(step, action)| format!("{:>3}. {action:?}\n", step + 1))
                .collect(),
        )
    }
}

/// Checks `model` breadth first on one thread, to the end of its state space: every `always`
/// property in every reachable state. Breadth first, so a counterexample is a shortest one. One
/// thread: the test harness runs the checks side by side, one a core, and the checker's threads
/// would only contend for its shared state.
pub fn check<M>(model: M) -> Report<M::Action>
where
    M: Model + Send + Sync + 'static,
    M::State: Debug + Hash + Send + Sync + Clone + PartialEq,
    M::Action: Debug + Send + Sync + Clone + PartialEq,
{
    let sometimes: Vec<&'static str> = model
        .properties()
        .into_iter()
        .filter(|property| matches!(property.expectation, Expectation::Sometimes))
        .map(|property| property.name)
        .collect();
    let started = Instant::now();
    let checker = model.checker().threads(1).spawn_bfs().join();
    let elapsed = started.elapsed();
    let (examples, counterexamples): (BTreeMap<_, _>, BTreeMap<_, _>) = checker
        .discoveries()
        .into_iter()
        .map(|(name, path)| (name, path.into_actions()))
        .partition(|(name, _)| sometimes.contains(name));
    let unreached = sometimes.into_iter().filter(|name| !examples.contains_key(name)).collect();
    Report {
        unique_states: checker.unique_state_count(),
        states: checker.state_count(),
        max_depth: checker.max_depth(),
        elapsed,
        complete: checker.is_done(),
        counterexamples,
        examples,
        unreached,
    }
}
