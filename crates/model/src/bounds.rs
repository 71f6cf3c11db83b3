//! The bounds the checks run within: the CI's, or deeper ones for people
//! (`ZK_RECIPES_MODEL_DEPTH=deep cargo test -p zk-recipes-model`): the lock model's faults below;
//! five barrier members; two batch faults and two other sessions' creates; three items and takes
//! and two lost answers in the queue; answers up to five ticks late over fifty ticks of
//! leadership.

use crate::lock::Faults;

/// Whether the deeper bounds were asked for.
pub fn deep() -> bool {
    std::env::var("ZK_RECIPES_MODEL_DEPTH").is_ok_and(|depth| depth == "deep")
}

/// The lock model's faults: one of each kind in CI; two lost replies, cancellations and
/// suspensions in the deep mode.
pub fn lock_faults() -> Faults {
    let extra = u8::from(deep());
    Faults {
        lost_replies: 1 + extra,
        cancels: 1 + extra,
        suspensions: 1 + extra,
        expiries: 1,
        reaps: 1,
        revocations: 0,
    }
}
