//! Histories of a few hundred concurrent operations from a seeded simulation of a real
//! (linearizable) register, with failed operations and operations of unknown outcome; the same
//! with one stale read injected; and the checker's bounds.

mod common;

use std::time::{Duration, Instant};

use common::assert_witness;
use zk_recipes_history::models::{Register, RegisterInput, RegisterOutput};
use zk_recipes_history::{check, Checker, History, Limit, Outcome};

const PROCESSES: u64 = 6;
const OPERATIONS_PER_PROCESS: usize = 50;
const SEEDS: std::ops::Range<u64> = 1..9;

/// How a simulated operation ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fate {
    Ok,
    /// Refused: it did not take effect.
    Fail,
    /// Unknown to its process; it did or did not take effect.
    Info {
        applied: bool,
    },
}

#[derive(Debug, Clone)]
struct Simulated {
    process: u64,
    invoked: u64,
    /// When it took effect on the register (if it did).
    effect: u64,
    completed: u64,
    fate: Fate,
    input: RegisterInput<u64>,
    output: RegisterOutput<u64>,
}

/// Each process runs its operations one after another with random gaps; each operation takes
/// effect at a random point within its interval, on one register, in the order of those points.
/// Written values are unique. A compare-and-set expects the register's value half of the time.
fn simulate(seed: u64) -> Vec<Simulated> {
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut operations = Vec::new();
    for process in 0..PROCESSES {
        let mut clock = rng.u64(0..20);
        for _ in 0..OPERATIONS_PER_PROCESS {
            let invoked = clock;
            let effect = invoked + rng.u64(0..=30);
            let completed = effect + rng.u64(0..=30);
            clock = completed + rng.u64(0..10);
            let fate = match rng.u8(0..100) {
                0..=2 => Fate::Fail,
                3..=5 => Fate::Info { applied: rng.bool() },
                _ => Fate::Ok,
            };
            operations.push(Simulated {
                process,
                invoked,
                effect,
                completed,
                fate,
                input: RegisterInput::Read,
                output: RegisterOutput::Written,
            });
        }
    }
    let mut by_effect: Vec<usize> = (0..operations.len()).collect();
    by_effect.sort_by_key(|index| operations[*index].effect);
    let mut value = 0;
    let mut fresh = 0;
    for index in by_effect {
        let operation = &mut operations[index];
        fresh += 1;
        operation.input = match rng.u8(0..10) {
            0..=3 => RegisterInput::Read,
            4..=7 => RegisterInput::Write(fresh),
            _ => {
                let expected = if rng.bool() { value } else { rng.u64(0..fresh) };
                RegisterInput::CompareAndSet { expected, new: fresh }
            }
        };
        if matches!(operation.fate, Fate::Fail | Fate::Info { applied: false }) {
            continue;
        }
        let (next, output) = zk_recipes_history::Model::step(&Register::new(0), &value, &operation.input);
        value = next;
        operation.output = output;
    }
    operations
}

fn record(operations: &[Simulated]) -> History<RegisterInput<u64>, RegisterOutput<u64>> {
    let mut history = History::new();
    for operation in operations {
        let (process, invoked, completed) = (operation.process, operation.invoked, operation.completed);
        let input = operation.input.clone();
        let added = match operation.fate {
            Fate::Ok => history.ok(process, invoked, completed, input, operation.output.clone()),
            Fate::Fail => history.fail(process, invoked, completed, input),
            Fate::Info { .. } => history.info(process, invoked, Some(completed), input),
        };
        added.expect("simulated times are ordered");
    }
    history
}

/// What a successful write or compare-and-set wrote, if it is an `Ok` one.
fn written(operation: &Simulated) -> Option<u64> {
    match (&operation.fate, &operation.input, &operation.output) {
        (Fate::Ok, RegisterInput::Write(value), _) => Some(*value),
        (Fate::Ok, RegisterInput::CompareAndSet { new, .. }, RegisterOutput::Swapped(true)) => Some(*new),
        _ => None,
    }
}

/// Makes one `Ok` read return the value of a write that another write overwrote before the read
/// was invoked: `older` completed before `newer` was invoked, `newer` before the read was. Values
/// are unique, so no order lets the read see it. Returns the read's index.
fn inject_stale_read(operations: &mut [Simulated], rng: &mut fastrand::Rng) -> usize {
    let mut stale_reads = Vec::new();
    for (read, candidate) in operations.iter().enumerate() {
        if candidate.fate != Fate::Ok || candidate.input != RegisterInput::Read {
            continue;
        }
        for newer in operations.iter().filter(|newer| newer.completed < candidate.invoked) {
            if written(newer).is_none() {
                continue;
            }
            for older in operations.iter().filter(|older| older.completed < newer.invoked) {
                if let Some(value) = written(older) {
                    stale_reads.push((read, value));
                }
            }
        }
    }
    assert!(!stale_reads.is_empty(), "the simulation has no read to make stale");
    let (read, value) = stale_reads[rng.usize(..stale_reads.len())];
    operations[read].output = RegisterOutput::Value(value);
    read
}

#[test]
fn simulated_histories_of_a_real_register_are_linearizable() {
    let model = Register::new(0);
    for seed in SEEDS {
        let operations = simulate(seed);
        let unknown =
            operations.iter().filter(|operation| matches!(operation.fate, Fate::Info { .. })).count();
        assert!(unknown > 0, "seed {seed}: the simulation has unknown outcomes");
        let history = record(&operations);
        let started = Instant::now();
        let outcome = check(&history, model.clone());
        eprintln!(
            "seed {seed}: {} operations, {unknown} unknown: {outcome} in {:?}",
            history.len(),
            started.elapsed()
        );
        let order = assert_witness(&history, &model, &outcome);
        // An unknown write the witness left out is not read by anyone after it.
        for (index, operation) in operations.iter().enumerate() {
            if let (Fate::Info { .. }, RegisterInput::Write(value)) = (operation.fate, &operation.input) {
                let in_order = order.iter().any(|id| id.index() == index);
                let read = operations
                    .iter()
                    .any(|other| other.fate == Fate::Ok && other.output == RegisterOutput::Value(*value));
                assert!(in_order || !read, "seed {seed}: a write that was read left out");
            }
        }
    }
}

#[test]
fn one_injected_stale_read_is_caught() {
    for seed in SEEDS {
        let mut operations = simulate(seed);
        let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
        let stale = inject_stale_read(&mut operations, &mut rng);
        let history = record(&operations);
        let started = Instant::now();
        let outcome = check(&history, Register::new(0));
        eprintln!("seed {seed}: stale read #{stale}: caught in {:?}: {outcome}", started.elapsed());
        let violation = outcome.violation().unwrap_or_else(|| panic!("seed {seed}: {outcome}"));
        let stale_id = history.iter().nth(stale).map(|(id, _)| id).expect("in the history");
        assert!(!violation.longest_prefix().contains(&stale_id), "seed {seed}");
        // Nothing after the stale read's completion can take effect before it.
        let unplaced = &history[violation.unplaced()];
        assert!(unplaced.completed() <= history[stale_id].completed(), "seed {seed}: {violation}");
    }
}

/// Three registers, each simulated apart and recorded as keys of one map.
#[test]
fn keys_of_simulated_registers_are_checked_apart() {
    let checker = Checker::new(Register::new(0));
    let keyed = |stale_in: Option<u64>| {
        let mut history = History::new();
        for key in 0..3_u64 {
            let mut operations = simulate(100 + key);
            if stale_in == Some(key) {
                inject_stale_read(&mut operations, &mut fastrand::Rng::with_seed(key));
            }
            for operation in operations {
                let input = (key, operation.input);
                let (process, invoked, completed) =
                    (operation.process, operation.invoked, operation.completed);
                let added = match operation.fate {
                    Fate::Ok => history.ok(process, invoked, completed, input, operation.output),
                    Fate::Fail => history.fail(process, invoked, completed, input),
                    Fate::Info { .. } => history.info(process, invoked, Some(completed), input),
                };
                added.expect("simulated times are ordered");
            }
        }
        history
    };
    let history = keyed(None);
    let outcome = checker.check_per_key(&history);
    let ok_operations = history
        .iter()
        .filter(|(_, operation)| matches!(operation.completion(), zk_recipes_history::Completion::Ok(_)))
        .count();
    let linearization = outcome.linearization().unwrap_or_else(|| panic!("{outcome}"));
    assert!(linearization.order().len() >= ok_operations);

    let outcome = checker.check_per_key(&keyed(Some(1)));
    assert_eq!(outcome.violation().and_then(|violation| violation.key()), Some("1"), "{outcome}");
}

#[test]
fn a_search_beyond_its_bounds_is_unknown() {
    let history = record(&simulate(1));
    // Every operation that takes effect is one more state: a few hundred are needed.
    let outcome = Checker::new(Register::new(0)).max_states(100).check(&history);
    match &outcome {
        Outcome::Unknown(undecided) => assert_eq!(undecided.limit(), Limit::States(100)),
        other => panic!("{other}"),
    }
    assert!(outcome.to_string().contains("remembered 100 states"), "{outcome}");
    let outcome = Checker::new(Register::new(0)).time_limit(Duration::ZERO).check(&history);
    assert!(
        matches!(&outcome, Outcome::Unknown(undecided) if undecided.limit() == Limit::Time(Duration::ZERO))
    );
    assert!(Checker::new(Register::new(0)).check(&history).is_linearizable());
}

/// Thirty writes of unknown outcome, all concurrent, and a read of a value none wrote: every
/// subset of the writes, in every order, is a state to try. The bound ends the search.
#[test]
fn a_pathological_history_ends_within_its_bound() {
    let mut history = History::new();
    for process in 0..30 {
        history.info(process, 0, None, RegisterInput::Write(process + 1)).expect("ordered");
    }
    history.ok(99, 10, 20, RegisterInput::Read, RegisterOutput::Value(1000)).expect("ordered");
    let outcome = Checker::new(Register::new(0)).max_states(20_000).check(&history);
    assert!(
        matches!(&outcome, Outcome::Unknown(undecided) if undecided.limit() == Limit::States(20_000)),
        "{outcome}"
    );
}
