//! What a lock-safe finish concludes from the server's answer: the decision [`super::commit`]
//! acts on, without I/O. A finish is one multi {check our lock, delete the item, delete our lock},
//! sent only on the session that holds the lock, and maybe sent more than once when an answer is
//! lost.

/// What one try of the finish multi answered.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishAnswer {
    /// The multi committed.
    Committed,
    /// The lock check failed: no lock node.
    LockMissing,
    /// The lock check passed but the item was gone.
    ItemMissing,
}

/// What the finish concludes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FinishVerdict {
    /// Our finish committed (this try, or an earlier one whose answer was lost).
    Done,
    /// Our lock is gone and our finish never committed: the item is delivered again.
    LockLost,
    /// The item was gone before any try of ours.
    ItemGone,
    /// Only an earlier try of ours can have deleted our lock on this session: it committed iff the
    /// item is gone. Read the item: gone is [`Done`](Self::Done), there is
    /// [`LockLost`](Self::LockLost).
    DoneIfItemGone,
}

/// The verdict on `answer`, after `earlier_tries` tries of this finish sent on the same session
/// whose answers were lost.
///
/// ```
/// use zk_recipes_queue::decisions::{finish_verdict, FinishAnswer, FinishVerdict};
///
/// assert_eq!(finish_verdict(FinishAnswer::LockMissing, 0), FinishVerdict::LockLost);
/// assert_eq!(finish_verdict(FinishAnswer::LockMissing, 1), FinishVerdict::DoneIfItemGone);
/// // After a lost answer the lock that passed the check may be another consumer's, taken once our
/// // committed try deleted ours: the item is gone because that try committed.
/// assert_eq!(finish_verdict(FinishAnswer::ItemMissing, 1), FinishVerdict::Done);
/// ```
pub fn finish_verdict(answer: FinishAnswer, earlier_tries: u32) -> FinishVerdict {
    match (answer, earlier_tries) {
        (FinishAnswer::Committed, _) => FinishVerdict::Done,
        (FinishAnswer::LockMissing, 0) => FinishVerdict::LockLost,
        (FinishAnswer::LockMissing, _) => FinishVerdict::DoneIfItemGone,
        (FinishAnswer::ItemMissing, 0) => FinishVerdict::ItemGone,
        (FinishAnswer::ItemMissing, _) => FinishVerdict::Done,
    }
}
