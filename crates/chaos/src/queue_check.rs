//! The queue checker: from the consumers' event logs, every item put was acknowledged once and
//! none was lost or left.

use std::collections::{BTreeSet, HashMap};

use crate::check::RecipeReport;
use crate::events::Event;
use crate::holders::{is_curator, tag_of, Pauses};
use crate::recipes::Recipe;

/// Checks one queue: every item put was acknowledged (or its ack was sent and the item is gone
/// and was never delivered again), none is left (`left`), and no item came back after a Rust
/// consumer's ack had succeeded. Items that were not put are violations too.
///
/// Events: `C` delivered, `W` ack sent (Rust), `K` acked (Rust: the ack succeeded; Curator:
/// `consumeMessage` returned, after which Curator deletes the item), `N` ack failed.
pub fn check_queue(
    queue: Recipe,
    events: &[Event],
    expected: &[String],
    killed: &HashMap<String, i64>,
    left: u64,
    paused: &Pauses,
) -> RecipeReport {
    let mut report =
        RecipeReport { items: expected.len() as u64, leaked_nodes: left, ..RecipeReport::default() };
    // Per item: its acks (time, consumer) and the acks sent by consumers killed afterwards.
    let mut acks: HashMap<&str, Vec<(i64, &str)>> = HashMap::new();
    // Per item: acks sent whose outcome nobody confirmed (a W without its K), less those whose
    // consumer was told nothing was committed (LockLost: "will be redelivered").
    let mut unconfirmed: HashMap<&str, i64> = HashMap::new();
    let mut consumers = BTreeSet::new();
    // Per item and consumer: its last delivery.
    let mut delivered: HashMap<(&str, &str), i64> = HashMap::new();
    for event in events.iter().filter(|event| event.recipe == queue) {
        let Some(item) = event.rest.first() else { continue };
        match event.kind {
            'C' => {
                report.deliveries += 1;
                if is_curator(&event.holder) {
                    report.other_acquisitions += 1;
                } else {
                    report.rust_acquisitions += 1;
                }
                consumers.insert(event.holder.as_str());
                delivered.insert((item, event.holder.as_str()), event.micros);
                if is_curator(&event.holder)
                    && killed.get(tag_of(&event.holder)).is_some_and(|kill| *kill >= event.micros)
                {
                    // Curator acks inside consumeMessage's return: a kill after C may have come
                    // after Curator's delete.
                    *unconfirmed.entry(item).or_default() += 1;
                }
            }
            // An ack was sent: it may have committed even if its reply never came (a connection
            // loss, a SIGKILL); only a redelivery or the item left in the queue says it did not.
            'W' => *unconfirmed.entry(item).or_default() += 1,
            // A refused ack says it committed nothing: it does not excuse a missing item.
            'N' if event.rest.iter().any(|word| word.contains("redelivered")) => {
                *unconfirmed.entry(item).or_default() -= 1;
            }
            'K' => acks.entry(item).or_default().push((event.micros, event.holder.as_str())),
            'E' => report.errors += 1,
            _ => {}
        }
    }
    report.holders = consumers.len() as u64;
    let expected_set: BTreeSet<&str> = expected.iter().map(String::as_str).collect();
    for (item, item_acks) in &mut acks {
        if !expected_set.contains(item) {
            *report.shared_violations.entry("unexpected".to_owned()).or_default() += 1;
        }
        item_acks.sort_unstable();
        // After a Rust ack succeeded, nobody may get the item again.
        if let Some(first_rust) = item_acks.iter().position(|(_, consumer)| !is_curator(consumer)) {
            if item_acks.len() > first_rust + 1 {
                let (again_at, again) = item_acks[first_rust + 1];
                // A consumer paused (SIGSTOP) between its delivery and its ack finished an item
                // whose lock it had lost while it slept: an overlap of belief, not a redelivery.
                let slept = delivered.get(&(*item, again)).is_some_and(|delivered_at| {
                    paused.get(tag_of(again)).is_some_and(|pauses| {
                        pauses.iter().any(|(from, _)| *from >= *delivered_at && *from <= again_at)
                    })
                });
                if slept {
                    report.belief_overlaps += 1;
                } else {
                    report.violation(again, "duplicate");
                }
            }
        } else if item_acks.len() > 1 {
            report.curator_redeliveries += 1;
        }
    }
    for item in expected {
        if acks.contains_key(item.as_str()) {
            report.items_acked += 1;
        } else if unconfirmed.get(item.as_str()).is_some_and(|count| *count > 0) {
            report.acks_unlogged += 1;
        } else if left == 0 {
            *report.shared_violations.entry("lost".to_owned()).or_default() += 1;
        }
    }
    if left > 0 {
        *report.shared_violations.entry("left".to_owned()).or_default() += 1;
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(line: &str) -> Event {
        Event::parse(line).expect("event")
    }

    #[test]
    fn queue_items_are_acked_once_and_none_is_lost() {
        let expected: Vec<String> = ["r0", "r1", "j0", "j1"].iter().map(|item| item.to_string()).collect();
        let events: Vec<Event> = [
            "C queue r0x1-q 10 r0",
            "W queue r0x1-q 11 r0",
            "K queue r0x1-q 12 r0",
            "C queue r0x1-q 13 r1",
            "W queue r0x1-q 14 r1",
            "C queue j0x1-q 15 j0",
            "K queue j0x1-q 16 j0",
            "C queue j0x2-q 30 j0",
            "K queue j0x2-q 31 j0",
            "C queue r1x1-q 20 j1",
            "K queue r1x1-q 21 j1",
        ]
        .iter()
        .map(|line| event(line))
        .collect();
        let killed = HashMap::from([("r0x1".to_owned(), 15)]);
        let report = check_queue(Recipe::Queue, &events, &expected, &killed, 0, &HashMap::new());
        assert_eq!(report.total_violations(), 0, "{report:?}");
        assert_eq!(report.acks_unlogged, 1);
        assert_eq!(report.curator_redeliveries, 1);
        // An item delivered but never acked (no W) is lost; one back after a Rust ack is a
        // duplicate.
        let mut again: Vec<Event> = events.iter().filter(|event| event.micros != 14).cloned().collect();
        again.push(event("K queue j0x2-q 40 r0"));
        let report = check_queue(Recipe::Queue, &again, &expected, &HashMap::new(), 0, &HashMap::new());
        assert_eq!(report.shared_violations.get("lost"), Some(&1), "{report:?}");
        assert_eq!(report.other_violations.get("duplicate"), Some(&1), "{report:?}");
        let report = check_queue(Recipe::Queue, &events, &expected, &killed, 2, &HashMap::new());
        assert_eq!(report.shared_violations.get("left"), Some(&1), "{report:?}");
        // r1's ack was sent (W at 14) and then refused with LockLost, which says nothing was
        // committed: unless someone else acks it, it is lost, not excused.
        let mut refused = events.clone();
        refused.push(event(
            "N queue r0x1-q 15 r1 the lock on queue item queue-0000000001 is gone; the item was not acknowledged and will be redelivered",
        ));
        let report = check_queue(Recipe::Queue, &refused, &expected, &killed, 0, &HashMap::new());
        assert_eq!(report.shared_violations.get("lost"), Some(&1), "{report:?}");
        // An ack whose outcome is unknown (its session expired in flight) stays excused.
        let mut unknown = events.clone();
        unknown.push(event(
            "N queue r0x1-q 15 r1 the session holding the lock on queue item queue-0000000001 expired while our request for it was in flight",
        ));
        let report = check_queue(Recipe::Queue, &unknown, &expected, &killed, 0, &HashMap::new());
        assert_eq!(report.total_violations(), 0, "{report:?}");
        assert_eq!(report.acks_unlogged, 1);
    }

    /// A Curator consumer paused (SIGSTOP) after its delivery finishes the item after ours took
    /// and acked it once its lock went: an overlap of belief, counted apart. Without the pause,
    /// the same acks are a duplicate.
    #[test]
    fn a_paused_consumers_late_ack_is_one_of_belief() {
        let expected = vec!["r994".to_owned()];
        let events: Vec<Event> = [
            "C priority j0x1-q 10 r994",
            "C priority r1x1-q 50 r994",
            "W priority r1x1-q 51 r994",
            "K priority r1x1-q 52 r994",
            "K priority j0x1-q 70 r994",
        ]
        .iter()
        .map(|line| event(line))
        .collect();
        let paused = HashMap::from([("j0x1".to_owned(), vec![(20, 60)])]);
        let report = check_queue(Recipe::PriorityQueue, &events, &expected, &HashMap::new(), 0, &paused);
        assert_eq!(report.total_violations(), 0, "{report:?}");
        assert_eq!(report.belief_overlaps, 1);
        let report =
            check_queue(Recipe::PriorityQueue, &events, &expected, &HashMap::new(), 0, &HashMap::new());
        assert_eq!(report.other_violations.get("duplicate"), Some(&1), "{report:?}");
    }
}
