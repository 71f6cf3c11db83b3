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

/// The highest sequence a lane's creates have made; see the module docs.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SequenceFloor {
    highest: Option<i32>,
}

impl SequenceFloor {
    /// Whether a node with `sequence` may be the undecided create's: above the floor. Sequences
    /// compare as ZooKeeper's counter runs, through the wrap from `i32::MAX` to `i32::MIN`.
    pub(crate) fn admits(&self, sequence: i32) -> bool {
        match self.highest {
            None => true,
            Some(highest) => sequence.wrapping_sub(highest) > 0,
        }
    }

    /// A create of the lane made `sequence`.
    pub(crate) fn record(&mut self, sequence: i32) {
        if self.admits(sequence) {
            self.highest = Some(sequence);
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
) -> Result<Option<(String, i32)>> {
    let Some(children) = children_after_sync(session, parent).await? else {
        return Ok(None);
    };
    let marker = format!("{prefix}{name}");
    let mut above: Vec<(String, i32)> = children
        .into_iter()
        .filter(|child| child.starts_with(prefix))
        .filter_map(|child| {
            let sequence = path::sequence_after(&child, &marker)?;
            lane.admits(sequence).then_some((child, sequence))
        })
        .collect();
    if above.len() > 1 {
        // Outside the argument (another client writing this session's marker?): take none of
        // them for ours rather than the wrong one.
        warn!(parent, prefix, ?above, "several nodes of this session above the lane's floor: none taken");
        return Err(Error::InvalidArgument(format!(
            "{} nodes of this session with {prefix:?} under {parent} where one create was undecided",
            above.len()
        )));
    }
    Ok(above.pop())
}

/// `parent`'s children, listed behind a `sync` (`None` if `parent` is gone): a listing after a
/// lost reply must see that create's outcome, which a server the session reconnected to may not
/// have applied yet.
pub(crate) async fn children_after_sync(session: &Session, parent: &str) -> Result<Option<Vec<String>>> {
    match session.client().sync(parent).await {
        Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
        Err(err) => return Err(err.into()),
    }
    match session.client().list_children(parent).await {
        Ok(children) => Ok(Some(children)),
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
        let Some((child, sequence)) =
            find_undecided(session, &self.lane, &self.parent, &self.prefix, &self.name).await?
        else {
            return Ok(());
        };
        match session.client().delete(&path::join(&self.parent, &child), None).await {
            Ok(()) | Err(zookeeper_client::Error::NoNode) => {}
            Err(err) => return Err(err.into()),
        }
        self.lane.record(sequence);
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
        floor.record(7);
        assert!(!floor.admits(7) && !floor.admits(3) && floor.admits(8));
        floor.record(3);
        assert!(floor.admits(8), "a lower sequence never lowers the floor");
        floor.record(i32::MAX);
        assert!(floor.admits(i32::MIN), "the counter's wrap comes after i32::MAX");
        assert!(!floor.admits(i32::MAX - 1));
    }
}
