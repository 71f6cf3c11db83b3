//! Creates whose node name names the session, not the call (ZooKeeper's lock recipe:
//! `x-<session id>-<seq>`), and how such a create tells its own node from the session's others.
//!
//! Curator's and kazoo's markers carry a UUID drawn for the call: whatever carries it is the
//! call's. The recipe's marker is the same for every node a session makes under a parent, so after
//! a lost reply (a connection loss, or a caller that gave up with the create on the wire) the
//! prefix alone cannot say which of the session's nodes the create made. Deleting or adopting by
//! the prefix took a held lock's node for a lost create's (two holders).
//!
//! # The argument
//! 1. A session's requests are executed in the order it sent them (ZooKeeper's FIFO client order),
//!    and a parent's sequence counter only grows (modulo the `i32` wrap, which
//!    [`SequenceFloor`] compares across): of two creates one session sends under one parent, the
//!    one sent later gets the higher sequence.
//! 2. Every create with a session marker goes through its [`MarkerLane`]: one per session, parent
//!    and prefix, held from before the create is sent until its outcome is known, so at most one
//!    such create of the session is undecided at a time.
//! 3. While the lane is held, its floor is the highest sequence any earlier create of the lane made
//!    (none: no earlier create). By 1 and 2, every other node of the session with the prefix was
//!    made by an earlier create, so its sequence is at most the floor; the undecided create's node,
//!    if there is one, is the single node of the session with the prefix above the floor.
//! 4. A listing must see the undecided create's outcome: sent on the same session after the create
//!    (FIFO), behind a `sync` (after a reconnection to another server, that server may not have
//!    applied the create yet). If the session is gone, so is the node: nothing to find or delete.
//!
//! So a retry after a connection loss adopts only a node above the floor, and the cleanup of a
//! create whose caller gave up deletes only that node, holding the lane until it has decided (the
//! next create of the lane waits for it: a round trip or two). Nodes of the session that are still
//! held, or whose release is waiting for the background delete, are at or below the floor and
//! never touched.

use std::collections::HashMap;
use std::sync::Arc;

use tracing::warn;

use crate::path;
use crate::session::{Error, Result, Session};

/// The lanes of one session, by parent and prefix. Kept for the session's life: a lane's floor
/// must outlive the nodes below it (one entry per parent and prefix the session has created in).
#[derive(Debug, Default)]
pub(crate) struct MarkerLanes {
    lanes: parking_lot::Mutex<HashMap<(String, String), Lane>>,
}

/// One lane: its floor, behind the turn.
type Lane = Arc<tokio::sync::Mutex<SequenceFloor>>;

/// The turn of one create in its lane: held until the create's outcome is known.
pub(crate) type MarkerLane = tokio::sync::OwnedMutexGuard<SequenceFloor>;

impl MarkerLanes {
    /// Waits for the turn of a create under `parent` with `prefix`.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled wait holds no turn.
    pub(crate) async fn turn(&self, parent: &str, prefix: &str) -> MarkerLane {
        let lane = self.lanes.lock().entry((parent.to_owned(), prefix.to_owned())).or_default().clone();
        lane.lock_owned().await
    }
}

/// The highest sequence a lane's creates have made, and under which of the parent's lives; see
/// the module docs.
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
    highest: Option<i32>,
    /// A zxid of the parent's life the sequence was counted in: no earlier than the parent's
    /// czxid, earlier than any later parent's.
    counted_at: i64,
}

impl SequenceFloor {
    /// Whether a node with `sequence` may be the undecided create's: above the floor. Sequences
    /// compare as ZooKeeper's counter runs, through the wrap from `i32::MAX` to `i32::MIN`.
    pub fn admits(&self, sequence: i32) -> bool {
        match self.highest {
            None => true,
            Some(highest) => sequence.wrapping_sub(highest) > 0,
        }
    }

    /// A create of the lane made `sequence`, known at `zxid` (its czxid, or a later zxid of the
    /// same parent's life, such as the parent's pzxid when listed): the floor moves to it. The
    /// lane's creates go one at a time, so the latest known is the highest of its parent's life.
    pub fn record(&mut self, sequence: i32, zxid: i64) {
        if zxid >= self.counted_at {
            self.highest = Some(sequence);
            self.counted_at = zxid;
        }
    }

    /// The floor for a listing of the parent made at `parent_czxid`: this one if it was counted
    /// under that parent, none if the parent was made again since.
    pub fn under_parent(&self, parent_czxid: i64) -> SequenceFloor {
        if parent_czxid > self.counted_at {
            SequenceFloor::default()
        } else {
            *self
        }
    }
}

/// The node the undecided create of `lane` made under `parent`, if any: the session's node with
/// `prefix` (and `name` after it) above the lane's floor, found by a listing behind a `sync`.
/// Returns its name and sequence.
pub(crate) async fn find_undecided(
    session: &Session,
    lane: &SequenceFloor,
    parent: &str,
    prefix: &str,
    name: &str,
) -> Result<Option<UndecidedNode>> {
    let Some((children, parent_stat)) = children_after_sync(session, parent).await? else {
        return Ok(None);
    };
    let found = undecided_node(children, lane, parent_stat.czxid, prefix, name).map_err(|several| {
        // Outside the argument (another client writing this session's marker?): take none of
        // them for ours rather than the wrong one.
        warn!(parent, prefix, above = ?several.above, "several nodes of this session above the lane's floor: none taken");
        Error::InvalidArgument(format!(
            "{} nodes of this session with {prefix:?} under {parent} where one create was undecided",
            several.above.len()
        ))
    })?;
    Ok(found.map(|(name, sequence)| UndecidedNode { name, sequence, listed_at: parent_stat.pzxid }))
}

/// The node an undecided create made, as [`find_undecided`] found it.
pub(crate) struct UndecidedNode {
    pub(crate) name: String,
    pub(crate) sequence: i32,
    /// The parent's pzxid at the listing: a zxid of the parent's life the node was made in.
    pub(crate) listed_at: i64,
}

/// The undecided create's node among a parent's `children` (listed after the create was sent,
/// the parent made at `parent_czxid`): the one child named `<prefix><name><sequence>` whose
/// sequence `floor` admits under that parent ([`SequenceFloor::under_parent`]). Returns its name
/// and sequence; `None` if there is none.
///
/// The decision a retry's search and the cleanup of a given-up create act on, without I/O.
///
/// # Errors
/// [`SeveralAboveFloor`] if more than one child qualifies: outside the argument of the module
/// docs (someone else writes this session's marker), so none is taken.
///
/// ```
/// use zk_recipes_framework::decisions::{undecided_node, SequenceFloor};
///
/// let mut floor = SequenceFloor::default();
/// floor.record(4, 20); // an earlier create of the lane made x-7-0000000004, which is still held
/// let children = ["x-7-0000000004", "x-7-0000000006", "x-9-0000000005"].map(String::from);
/// let found = undecided_node(children, &floor, 10, "x-7-", "").unwrap();
/// assert_eq!(found, Some(("x-7-0000000006".to_string(), 6)));
/// ```
pub fn undecided_node(
    children: impl IntoIterator<Item = String>,
    floor: &SequenceFloor,
    parent_czxid: i64,
    prefix: &str,
    name: &str,
) -> std::result::Result<Option<(String, i32)>, SeveralAboveFloor> {
    let floor = floor.under_parent(parent_czxid);
    let marker = format!("{prefix}{name}");
    let mut above: Vec<(String, i32)> = children
        .into_iter()
        .filter(|child| child.starts_with(prefix))
        .filter_map(|child| {
            let sequence = path::sequence_after(&child, &marker)?;
            floor.admits(sequence).then_some((child, sequence))
        })
        .collect();
    if above.len() > 1 {
        return Err(SeveralAboveFloor { above });
    }
    Ok(above.pop())
}

/// More than one node of the session above a lane's floor ([`undecided_node`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeveralAboveFloor {
    /// The nodes found, with their sequences.
    pub above: Vec<(String, i32)>,
}

/// `parent`'s children and stat, listed behind a `sync` (`None` if `parent` is gone): a listing
/// after a lost reply must see that create's outcome, which a server the session reconnected to
/// may not have applied yet.
pub(crate) async fn children_after_sync(
    session: &Session,
    parent: &str,
) -> Result<Option<(Vec<String>, zookeeper_client::Stat)>> {
    match session.client().sync(parent).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
        Err(err) => return Err(err.into()),
    }
    match session.client().get_children(parent).await {
        Ok(listed) => Ok(Some(listed)),
        Err(zookeeper_client::Error::NoNode) => Ok(None),
        Err(err) => Err(err.into()),
    }
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

impl UndecidedCreate {
    /// Deletes the create's node on its session, if it made one.
    pub(crate) async fn clean(&mut self, session: &Session) -> Result<()> {
        if session.generation() != self.generation {
            return Ok(());
        }
        let Some(found) = find_undecided(session, &self.lane, &self.parent, &self.prefix, &self.name).await?
        else {
            return Ok(());
        };
        match session.client().delete(&path::join(&self.parent, &found.name), None).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(err) => return Err(err.into()),
        }
        self.lane.record(found.sequence, found.listed_at);
        Ok(())
    }
}

impl PartialEq for UndecidedCreate {
    fn eq(&self, other: &Self) -> bool {
        (&self.parent, &self.prefix, &self.name, self.generation)
            == (&other.parent, &other.prefix, &other.name, other.generation)
    }
}

impl Eq for UndecidedCreate {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_floor_admits_only_later_sequences_also_across_the_wrap() {
        let mut floor = SequenceFloor::default();
        assert!(floor.admits(0) && floor.admits(-5));
        floor.record(7, 10);
        assert!(!floor.admits(7) && !floor.admits(3) && floor.admits(8));
        floor.record(3, 9);
        assert!(floor.admits(8), "an older count never moves the floor");
        floor.record(i32::MAX, 11);
        assert!(floor.admits(i32::MIN), "the counter's wrap comes after i32::MAX");
        assert!(!floor.admits(i32::MAX - 1));
    }

    /// A container parent reaped and made again counts from 0: the floor of its old life must not
    /// hide a lost create's node under the new one (which a retry would then create again, and
    /// wait behind for ever).
    #[test]
    fn a_parent_made_again_has_no_floor() {
        let mut floor = SequenceFloor::default();
        floor.record(0, 10);
        let children = vec!["x-5-0000000000".to_string()];
        assert_eq!(undecided_node(children.clone(), &floor, 4, "x-5-", "").unwrap(), None);
        let again = undecided_node(children, &floor, 12, "x-5-", "").unwrap();
        assert_eq!(again, Some(("x-5-0000000000".to_string(), 0)));
    }
}
