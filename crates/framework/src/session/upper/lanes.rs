//! The lanes of a session's session-marked creates, and what a lane knows: state only. What it
//! means and how a create takes its turn are the nodes floor's (`nodes/session_marker.rs`).

use std::collections::HashMap;
use std::sync::Arc;

/// The lanes of one session, by parent and prefix. Kept for the session's life: a lane's floor
/// must outlive the nodes below it (one entry per parent and prefix the session has created in).
#[derive(Debug, Default)]
pub(crate) struct MarkerLanes {
    pub(crate) lanes: parking_lot::Mutex<HashMap<(String, String), Lane>>,
}

/// One lane: its floor, behind the turn.
pub(crate) type Lane = Arc<tokio::sync::Mutex<SequenceFloor>>;

/// The turn of one create in its lane: held until the create's outcome is known.
pub(crate) type MarkerLane = tokio::sync::OwnedMutexGuard<SequenceFloor>;

/// The highest sequence a lane's creates have made, and under which of the parent's lives; see
/// the argument in the nodes floor's `session_marker` module.
///
/// A container parent that was reaped and made again counts its children's sequences from 0:
/// a sequence counted under the old parent says nothing of the new one's nodes. The floor keeps a
/// zxid of the parent's life it was counted in (the czxid of the node that set it), and a listing
/// of a parent made after that zxid sees no floor ([`under_parent`](Self::under_parent)).
///
/// ```
/// use zk_recipes_framework::decisions::SequenceFloor;
///
/// let mut floor = SequenceFloor::default();
/// assert!(floor.admits(0));
/// floor.record(7, 100); // a create of the lane made sequence 7, czxid 100
/// assert!(!floor.admits(7) && floor.admits(8));
/// floor.record(i32::MAX, 101);
/// assert!(floor.admits(i32::MIN), "the counter wraps from i32::MAX to i32::MIN");
/// // The parent was reaped and made again at zxid 150: its sequences start again from 0.
/// assert!(floor.under_parent(150).admits(0));
/// assert!(!floor.under_parent(90).admits(7), "the parent the floor was counted under");
/// ```
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SequenceFloor {
    pub(crate) highest: Option<i32>,
    /// A zxid of the parent's life the sequence was counted in: no earlier than the parent's
    /// czxid, earlier than any later parent's.
    pub(crate) counted_at: i64,
}

/// A create with a session marker whose caller gave up before its outcome was known: the cleanup
/// worker finds its node (if any) and deletes it, holding the lane meanwhile.
#[derive(Debug)]
pub(crate) struct UndecidedCreate {
    pub(crate) parent: String,
    pub(crate) prefix: String,
    pub(crate) name: String,
    /// The session it was sent on: on any other, the node went with that session.
    pub(crate) generation: u64,
    pub(crate) lane: MarkerLane,
}
