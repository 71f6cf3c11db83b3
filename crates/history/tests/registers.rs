//! Registers: known linearizable and non-linearizable histories, by value and by version.

mod common;

use common::{assert_witness, Checked};
use zk_recipes_history::models::{
    Register, RegisterInput, RegisterOutput, VersionedInput, VersionedOutput, VersionedRegister,
};
use zk_recipes_history::{check, Checker, History, Outcome};
use RegisterInput::{CompareAndSet, Read, Write};
use RegisterOutput::{Swapped, Value, Written};

type RegisterHistory = History<RegisterInput<u64>, RegisterOutput<u64>>;

fn register() -> Register<u64> {
    Register::new(0)
}

/// The MIT 6.824 quiz example Porcupine's tests start with: the read that saw nothing completed
/// before the read that saw the write, both overlapping the write.
#[test]
fn overlapping_reads_need_the_write_between_them() -> Checked {
    let mut history = RegisterHistory::new();
    let write = history.ok(0, 0, 100, Write(100), Written)?;
    let saw_it = history.ok(1, 25, 75, Read, Value(100))?;
    let saw_nothing = history.ok(2, 30, 60, Read, Value(0))?;
    let order = assert_witness(&history, &register(), &check(&history, register()));
    assert_eq!(order, [saw_nothing, write, saw_it]);
    Ok(())
}

/// Its counterpart: a read saw the write and completed; a later read saw the old value.
#[test]
fn a_read_after_a_read_of_the_new_value_cannot_see_the_old_one() -> Checked {
    let mut history = RegisterHistory::new();
    let write = history.ok(0, 0, 100, Write(200), Written)?;
    let saw_it = history.ok(1, 10, 30, Read, Value(200))?;
    let stale = history.ok(2, 40, 90, Read, Value(0))?;
    let outcome = check(&history, register());
    let violation = outcome.violation().unwrap_or_else(|| panic!("{outcome}"));
    assert_eq!(violation.longest_prefix(), [write, saw_it]);
    assert_eq!(violation.unplaced(), stale);
    let explanation = violation.to_string();
    assert!(explanation.contains("#2 (process 2) Read -> Value(0), 40..90: the model answers Value(200)"));
    assert!(explanation.contains("state then: 200"), "{explanation}");
    Ok(())
}

/// Porcupine's zero-duration operations: invoked and completed at one stamp.
#[test]
fn operations_of_no_duration() -> Checked {
    let mut history = RegisterHistory::new();
    history.ok(0, 0, 100, Write(100), Written)?;
    history.ok(1, 25, 75, Read, Value(100))?;
    history.ok(2, 30, 30, Read, Value(0))?;
    history.ok(3, 30, 30, Read, Value(0))?;
    assert_witness(&history, &register(), &check(&history, register()));

    let mut history = RegisterHistory::new();
    history.ok(0, 0, 100, Write(200), Written)?;
    history.ok(1, 10, 10, Read, Value(200))?;
    history.ok(2, 10, 10, Read, Value(200))?;
    history.ok(3, 40, 90, Read, Value(0))?;
    assert!(check(&history, register()).violation().is_some());
    Ok(())
}

/// Stamps that touch are concurrent; one tick apart, they are ordered.
#[test]
fn equal_stamps_are_concurrent() -> Checked {
    for (read_completed, linearizable) in [(10, true), (9, false)] {
        let mut history = RegisterHistory::new();
        history.ok(1, 10, 20, Write(1), Written)?;
        history.ok(2, 0, read_completed, Read, Value(1))?;
        assert_eq!(
            check(&history, register()).is_linearizable(),
            linearizable,
            "read completed at {read_completed}"
        );
    }
    Ok(())
}

#[test]
fn a_stale_read_after_a_completed_write_is_caught() -> Checked {
    let mut history = RegisterHistory::new();
    history.ok(1, 0, 10, Write(1), Written)?;
    let stale = history.ok(2, 20, 30, Read, Value(0))?;
    let outcome = check(&history, register());
    assert_eq!(outcome.violation().map(|violation| violation.unplaced()), Some(stale), "{outcome}");
    Ok(())
}

#[test]
fn a_read_of_a_value_never_written_is_caught() -> Checked {
    let mut history = RegisterHistory::new();
    history.ok(1, 0, 10, Write(1), Written)?;
    history.ok(2, 5, 15, Read, Value(7))?;
    history.info(3, 0, None, Write(2))?;
    assert!(check(&history, register()).violation().is_some());
    Ok(())
}

/// Knossos' example: a write that crashed, concurrent with a read of its value.
#[test]
fn an_unknown_write_that_a_read_saw_took_effect() -> Checked {
    let mut history = RegisterHistory::new();
    let crashed = history.info(1, 0, Some(5), Write(3))?;
    history.ok(0, 1, 20, Read, Value(3))?;
    let order = assert_witness(&history, &register(), &check(&history, register()));
    assert!(order.contains(&crashed));
    Ok(())
}

/// An unknown write may take effect long after its process gave up, once only.
#[test]
fn an_unknown_write_may_take_effect_late_but_not_twice() -> Checked {
    let mut history = RegisterHistory::new();
    let late = history.info(1, 0, Some(5), Write(3))?;
    let before = history.ok(0, 10, 20, Read, Value(0))?;
    let after = history.ok(0, 30, 40, Read, Value(3))?;
    let order = assert_witness(&history, &register(), &check(&history, register()));
    assert_eq!(order, [before, late, after]);

    history.ok(0, 50, 60, Read, Value(0))?;
    assert!(check(&history, register()).violation().is_some());
    Ok(())
}

/// Reads that never saw the unknown write: it is left out of the witness.
#[test]
fn an_unknown_write_nobody_saw_is_dropped() -> Checked {
    let mut history = RegisterHistory::new();
    let unseen = history.info(1, 0, None, Write(5))?;
    history.ok(2, 10, 20, Read, Value(0))?;
    history.ok(3, 15, 40, Read, Value(0))?;
    let order = assert_witness(&history, &register(), &check(&history, register()));
    assert!(!order.contains(&unseen));
    Ok(())
}

#[test]
fn a_failed_write_is_dropped() -> Checked {
    for (read, linearizable) in [(0, true), (9, false)] {
        let mut history = RegisterHistory::new();
        history.fail(1, 0, 10, Write(9))?;
        history.ok(2, 20, 30, Read, Value(read))?;
        assert_eq!(check(&history, register()).is_linearizable(), linearizable, "read {read}");
    }
    Ok(())
}

/// Three concurrent writes and reads that fix their order: 3, then 1, then 2.
#[test]
fn concurrent_writes_are_ordered_by_what_was_read() -> Checked {
    let mut history = RegisterHistory::new();
    let one = history.ok(1, 0, 50, Write(1), Written)?;
    let two = history.ok(2, 0, 50, Write(2), Written)?;
    let three = history.ok(3, 0, 50, Write(3), Written)?;
    history.ok(4, 5, 15, Read, Value(3))?;
    history.ok(4, 20, 30, Read, Value(1))?;
    history.ok(4, 60, 70, Read, Value(2))?;
    let order = assert_witness(&history, &register(), &check(&history, register()));
    let position = |id| order.iter().position(|at| *at == id);
    assert!(position(three) < position(one) && position(one) < position(two), "{order:?}");
    Ok(())
}

#[test]
fn a_compare_and_set_from_a_stale_value_is_caught() -> Checked {
    let mut history = RegisterHistory::new();
    history.ok(1, 0, 10, Write(1), Written)?;
    history.ok(2, 20, 30, CompareAndSet { expected: 1, new: 2 }, Swapped(true))?;
    history.ok(3, 40, 50, CompareAndSet { expected: 1, new: 3 }, Swapped(true))?;
    assert!(check(&history, register()).violation().is_some());
    // Concurrent, the second may have read the first's write: still only one can swap from 1.
    let mut history = RegisterHistory::new();
    history.ok(1, 0, 10, Write(1), Written)?;
    history.ok(2, 20, 50, CompareAndSet { expected: 1, new: 2 }, Swapped(true))?;
    history.ok(3, 20, 50, CompareAndSet { expected: 1, new: 3 }, Swapped(false))?;
    history.ok(3, 60, 70, Read, Value(2))?;
    assert_witness(&history, &register(), &check(&history, register()));
    Ok(())
}

type VersionedHistory = History<VersionedInput<i32>, VersionedOutput<i32>>;

/// `SharedCount`: a `try_set` at the version read succeeds only if nobody wrote since, even when
/// somebody wrote the same value back (which a compare-and-set by value would let through).
#[test]
fn a_set_at_a_stale_version_is_caught_even_when_the_value_came_back() -> Checked {
    let mut history = VersionedHistory::new();
    history.ok(1, 0, 10, VersionedInput::Read, VersionedOutput::Read { value: 0, version: 0 })?;
    history.ok(2, 20, 30, VersionedInput::Write(0), VersionedOutput::Written)?;
    history.ok(
        1,
        40,
        50,
        VersionedInput::SetIfVersion { version: 0, value: 1 },
        VersionedOutput::Set(true),
    )?;
    let outcome = check(&history, VersionedRegister::new(0));
    assert!(outcome.to_string().contains("the model answers Set(false)"), "{outcome}");

    let mut by_value = RegisterHistory::new();
    by_value.ok(1, 0, 10, Read, Value(0))?;
    by_value.ok(2, 20, 30, Write(0), Written)?;
    by_value.ok(1, 40, 50, CompareAndSet { expected: 0, new: 1 }, Swapped(true))?;
    assert_witness(&by_value, &register(), &check(&by_value, register()));
    Ok(())
}

#[test]
fn versions_count_every_write() -> Checked {
    let mut history = VersionedHistory::new();
    history.ok(1, 0, 10, VersionedInput::Write(5), VersionedOutput::Written)?;
    history.info(2, 0, Some(10), VersionedInput::SetIfVersion { version: 1, value: 6 })?;
    history.ok(
        1,
        20,
        30,
        VersionedInput::SetIfVersion { version: 1, value: 7 },
        VersionedOutput::Set(false),
    )?;
    history.ok(1, 40, 50, VersionedInput::Read, VersionedOutput::Read { value: 6, version: 2 })?;
    let model = VersionedRegister::new(0);
    assert_witness(&history, &model, &check(&history, model.clone()));
    Ok(())
}

/// Independent keys, checked one search per key; the violation names its key.
#[test]
fn keys_are_checked_apart() -> Checked {
    let mut history = History::new();
    history.ok(1, 0, 10, ("/a", Write(1)), Written)?;
    history.ok(2, 0, 10, ("/b", Write(2)), Written)?;
    history.ok(3, 5, 15, ("/a", Read), Value(1))?;
    history.ok(3, 20, 30, ("/b", Read), Value(2))?;
    let checker = Checker::new(register());
    let order = match checker.check_per_key(&history) {
        Outcome::Linearizable(linearization) => linearization.order().to_vec(),
        other => panic!("{other}"),
    };
    assert_eq!(order.len(), 4);

    history.ok(4, 40, 50, ("/b", Read), Value(1))?;
    let outcome = checker.check_per_key(&history);
    let violation = outcome.violation().unwrap_or_else(|| panic!("{outcome}"));
    assert_eq!(violation.key(), Some("\"/b\""));
    assert!(violation.to_string().starts_with("not linearizable (key \"/b\")"), "{violation}");
    Ok(())
}
