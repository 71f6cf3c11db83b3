//! Queues: items delivered at most once, none lost, and (FIFO) in order.

mod common;

use std::collections::BTreeSet;

use common::{assert_witness, Checked};
use zk_recipes_history::models::{FifoQueue, ItemSet, QueueInput, QueueOutput, SetInput, SetOutput};
use zk_recipes_history::{check, History};
use QueueInput::{Put, Take};

type QueueHistory = History<QueueInput<char>, QueueOutput<char>>;

fn taken(item: Option<char>) -> QueueOutput<char> {
    QueueOutput::Taken(item)
}

fn queue() -> FifoQueue<char> {
    FifoQueue::new()
}

#[test]
fn items_leave_in_the_order_they_were_put() -> Checked {
    for (first, second, linearizable) in [('a', 'b', true), ('b', 'a', false)] {
        let mut history = QueueHistory::new();
        history.ok(1, 0, 10, Put('a'), QueueOutput::Put)?;
        history.ok(1, 20, 30, Put('b'), QueueOutput::Put)?;
        history.ok(2, 40, 50, Take, taken(Some(first)))?;
        history.ok(2, 60, 70, Take, taken(Some(second)))?;
        assert_eq!(check(&history, queue()).is_linearizable(), linearizable, "{first} then {second}");
    }
    Ok(())
}

/// Concurrent puts may take effect in either order.
#[test]
fn concurrent_puts_leave_in_either_order() -> Checked {
    let mut history = QueueHistory::new();
    history.ok(1, 0, 30, Put('a'), QueueOutput::Put)?;
    history.ok(2, 0, 30, Put('b'), QueueOutput::Put)?;
    history.ok(3, 40, 50, Take, taken(Some('b')))?;
    history.ok(3, 60, 70, Take, taken(Some('a')))?;
    history.ok(3, 80, 90, Take, taken(None))?;
    assert_witness(&history, &queue(), &check(&history, queue()));
    Ok(())
}

#[test]
fn an_item_taken_twice_is_caught() -> Checked {
    let mut history = QueueHistory::new();
    history.ok(1, 0, 10, Put('a'), QueueOutput::Put)?;
    history.ok(2, 20, 30, Take, taken(Some('a')))?;
    let again = history.ok(3, 25, 40, Take, taken(Some('a')))?;
    let outcome = check(&history, queue());
    assert_eq!(outcome.violation().map(|violation| violation.unplaced()), Some(again), "{outcome}");
    Ok(())
}

/// The final take finds the queue empty while `b` was never taken: lost.
#[test]
fn an_item_lost_is_caught_by_the_final_take() -> Checked {
    let mut history = QueueHistory::new();
    history.ok(1, 0, 10, Put('a'), QueueOutput::Put)?;
    history.ok(1, 20, 30, Put('b'), QueueOutput::Put)?;
    history.ok(2, 40, 50, Take, taken(Some('a')))?;
    history.ok(2, 60, 70, Take, taken(None))?;
    assert!(check(&history, queue()).violation().is_some());
    Ok(())
}

/// A consumer that died while taking may have taken `b`: the empty queue at the end says it did.
#[test]
fn an_unknown_take_explains_an_item_missing_at_the_end() -> Checked {
    let mut history = QueueHistory::new();
    history.ok(1, 0, 10, Put('a'), QueueOutput::Put)?;
    history.ok(1, 20, 30, Put('b'), QueueOutput::Put)?;
    history.ok(2, 40, 50, Take, taken(Some('a')))?;
    let died = history.info(3, 45, None, Take)?;
    history.ok(2, 60, 70, Take, taken(None))?;
    let order = assert_witness(&history, &queue(), &check(&history, queue()));
    assert!(order.contains(&died));
    Ok(())
}

#[test]
fn an_item_never_put_is_caught() -> Checked {
    let mut history = QueueHistory::new();
    history.ok(1, 0, 10, Put('a'), QueueOutput::Put)?;
    history.ok(2, 5, 15, Take, taken(Some('z')))?;
    assert!(check(&history, queue()).violation().is_some());
    Ok(())
}

/// A take may return an item whose put has not completed yet (the put took effect first).
#[test]
fn a_take_may_see_a_put_still_in_flight() -> Checked {
    let mut history = QueueHistory::new();
    history.ok(1, 0, 100, Put('a'), QueueOutput::Put)?;
    history.ok(2, 10, 20, Take, taken(Some('a')))?;
    assert_witness(&history, &queue(), &check(&history, queue()));
    Ok(())
}

type SetHistory = History<SetInput<u32>, SetOutput<u32>>;

fn contents(items: &[u32]) -> SetOutput<u32> {
    SetOutput::Contents(items.iter().copied().collect::<BTreeSet<_>>())
}

/// Several consumers: the order is free, each item once, and what is left is what was not taken.
#[test]
fn items_of_a_set_are_taken_at_most_once_and_none_is_lost() -> Checked {
    let build = |second_take: u32, left: &[u32]| -> Result<SetHistory, zk_recipes_history::HistoryError> {
        let mut history = SetHistory::new();
        for item in 1..=3 {
            history.ok(
                1,
                u64::from(item) * 10,
                u64::from(item) * 10 + 5,
                SetInput::Insert(item),
                SetOutput::Inserted(true),
            )?;
        }
        history.ok(2, 50, 60, SetInput::Take(3), SetOutput::Taken(true))?;
        history.ok(3, 50, 60, SetInput::Take(second_take), SetOutput::Taken(true))?;
        history.ok(4, 70, 80, SetInput::Contents, contents(left))?;
        Ok(history)
    };
    let model = ItemSet::new();
    let fine = build(1, &[2])?;
    assert_witness(&fine, &model, &check(&fine, model));
    let twice = build(3, &[1, 2])?;
    assert!(check(&twice, model).violation().is_some(), "3 taken twice");
    let lost = build(1, &[])?;
    assert!(check(&lost, model).violation().is_some(), "2 lost");
    Ok(())
}

/// An unknown take left nothing behind only if the item is gone at the end.
#[test]
fn an_unknown_take_of_a_set_item_is_decided_by_the_final_contents() -> Checked {
    for (left, took_effect) in [(vec![], true), (vec![7], false)] {
        let mut history = SetHistory::new();
        history.ok(1, 0, 10, SetInput::Insert(7), SetOutput::Inserted(true))?;
        let unknown = history.info(2, 20, Some(30), SetInput::Take(7))?;
        history.ok(3, 40, 50, SetInput::Contents, contents(&left))?;
        let model = ItemSet::new();
        let order = assert_witness(&history, &model, &check(&history, model));
        assert_eq!(order.contains(&unknown), took_effect, "left {left:?}");
    }
    Ok(())
}
