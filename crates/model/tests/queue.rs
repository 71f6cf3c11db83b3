//! The lock-safe queue take and its acks.

use zk_recipes_model::check::check;
use zk_recipes_model::queue::{QueueModel, QueueVariant};

const UNDER_LOCK: &str = "an item is deleted only by an ack under its lock";

/// Two items, two consumers taking two each, one lost answer, one session expiry.
fn model(variant: QueueVariant) -> QueueModel {
    let extra = u8::from(zk_recipes_model::bounds::deep());
    QueueModel {
        items: 2 + extra,
        consumers: 2,
        takes: 2 + extra,
        lost_replies: 1 + extra,
        expiries: 1,
        variant,
    }
}

#[test]
fn lock_safe_takes_and_acks_hold() {
    let report = check(model(QueueVariant::Library));
    println!("queue: {}", report.summary());
    for property in report.counterexamples.keys() {
        println!("{property}:\n{}", report.trace(property).unwrap_or_default());
    }
    assert!(report.holds(), "{}", report.summary());
}

#[test]
fn negative_control_an_ack_without_the_lock_check_deletes_under_another_lock() {
    let report = check(model(QueueVariant::AckWithoutLockCheck));
    println!("ack without the lock check: {}", report.summary());
    println!("{}", report.trace(UNDER_LOCK).unwrap_or_default());
    assert!(report.trace(UNDER_LOCK).is_some(), "{}", report.summary());
}
