//! The counter (`DistributedAtomicLong`): lost increments, increments applied twice, and
//! increments of unknown outcome.

mod common;

use common::{assert_witness, Checked};
use zk_recipes_history::models::{Counter, CounterInput, CounterOutput};
use zk_recipes_history::{check, History};
use CounterInput::{Add, CompareAndSet, Get};
use CounterOutput::{Swapped, Value};

type CounterHistory = History<CounterInput, CounterOutput>;

fn counter() -> Counter {
    Counter::new(0)
}

#[test]
fn two_increments_answering_one_value_lose_one() -> Checked {
    let mut history = CounterHistory::new();
    history.ok(1, 0, 10, Add(1), Value(1))?;
    history.ok(2, 5, 15, Add(1), Value(1))?;
    assert!(check(&history, counter()).violation().is_some());
    Ok(())
}

#[test]
fn a_final_value_below_the_increments_loses_one() -> Checked {
    let mut history = CounterHistory::new();
    history.ok(1, 0, 10, Add(1), Value(1))?;
    history.ok(2, 5, 15, Add(1), Value(2))?;
    let read = history.ok(3, 20, 30, Get, Value(1))?;
    let outcome = check(&history, counter());
    assert_eq!(outcome.violation().map(|violation| violation.unplaced()), Some(read), "{outcome}");
    assert!(outcome.to_string().contains("the model answers Value(2)"), "{outcome}");
    Ok(())
}

/// The chaos suite's negative control: an increment retried blindly after a lost reply is
/// applied twice and reported once.
#[test]
fn an_increment_applied_twice_and_reported_once_is_caught() -> Checked {
    let mut history = CounterHistory::new();
    history.ok(1, 0, 10, Add(1), Value(2))?;
    history.ok(2, 20, 30, Get, Value(2))?;
    assert!(check(&history, counter()).violation().is_some());
    // With an unknown increment of another client, the same values are explained.
    history.info(3, 0, None, Add(1))?;
    assert_witness(&history, &counter(), &check(&history, counter()));
    Ok(())
}

#[test]
fn an_unknown_increment_the_final_value_needs_took_effect() -> Checked {
    let mut history = CounterHistory::new();
    history.ok(1, 0, 10, Add(1), Value(1))?;
    let lost_reply = history.info(2, 5, Some(12), Add(1))?;
    history.ok(3, 20, 30, Get, Value(2))?;
    let order = assert_witness(&history, &counter(), &check(&history, counter()));
    assert!(order.contains(&lost_reply));
    Ok(())
}

#[test]
fn an_unknown_increment_the_final_value_excludes_did_not() -> Checked {
    let mut history = CounterHistory::new();
    history.ok(1, 0, 10, Add(1), Value(1))?;
    let never_applied = history.info(2, 5, Some(12), Add(1))?;
    history.ok(3, 20, 30, Get, Value(1))?;
    let order = assert_witness(&history, &counter(), &check(&history, counter()));
    assert!(!order.contains(&never_applied));
    Ok(())
}

#[test]
fn one_unknown_increment_explains_one_extra_not_two() -> Checked {
    let mut history = CounterHistory::new();
    history.ok(1, 0, 10, Add(1), Value(1))?;
    history.info(2, 5, None, Add(1))?;
    history.ok(3, 20, 30, Get, Value(3))?;
    assert!(check(&history, counter()).violation().is_some());
    Ok(())
}

/// The increment that completed first answered the lower value, though it was invoked later.
#[test]
fn overlapping_increments_take_effect_in_the_order_their_values_say() -> Checked {
    let mut history = CounterHistory::new();
    let slow = history.ok(1, 0, 100, Add(1), Value(2))?;
    let fast = history.ok(2, 10, 20, Add(1), Value(1))?;
    let order = assert_witness(&history, &counter(), &check(&history, counter()));
    assert_eq!(order, [fast, slow]);
    Ok(())
}

#[test]
fn a_compare_and_set_from_a_stale_value_is_caught() -> Checked {
    let mut history = CounterHistory::new();
    history.ok(1, 0, 10, Get, Value(0))?;
    history.ok(2, 20, 30, Add(1), Value(1))?;
    history.ok(1, 40, 50, CompareAndSet { expected: 0, new: 5 }, Swapped(true))?;
    assert!(check(&history, counter()).violation().is_some());

    let mut history = CounterHistory::new();
    history.ok(1, 0, 10, Get, Value(0))?;
    history.ok(2, 20, 30, Add(1), Value(1))?;
    history.ok(1, 40, 50, CompareAndSet { expected: 0, new: 5 }, Swapped(false))?;
    history.ok(1, 60, 70, CompareAndSet { expected: 1, new: 5 }, Swapped(true))?;
    history.ok(3, 80, 90, Add(-2), Value(3))?;
    assert_witness(&history, &counter(), &check(&history, counter()));
    Ok(())
}

/// A refused increment (`no` in the chaos log) is dropped: had it been applied, the final value
/// would be one higher.
#[test]
fn a_refused_increment_is_dropped() -> Checked {
    let mut history = CounterHistory::new();
    history.ok(1, 0, 10, Add(1), Value(1))?;
    history.fail(2, 0, 10, Add(1))?;
    history.ok(3, 20, 30, Get, Value(2))?;
    assert!(check(&history, counter()).violation().is_some());
    Ok(())
}
