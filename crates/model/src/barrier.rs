//! The double barrier's leave, with our members and Curator's on one barrier.
//!
//! Every member has entered (the round's `ready` node exists); each calls `leave` when the checker
//! chooses. Our members decide with the library's `leave_step` on every change of the barrier's
//! children (a persistent watch); Curator 5.4's members run `internalLeave` as written there: the
//! lowest watches the highest, any other deletes its node and watches the lowest, one member left
//! alone deletes its node, and a member that sees no node or only its own leaves and deletes
//! `ready`.
//!
//! Invariant: no member's `leave` returns while another member has not called `leave`.
//! Negative control: our member deletes its node at once whatever its place.

use std::collections::BTreeSet;

use stateright::{Model, Property};
use zk_recipes_barrier::decisions::leave_step;

/// Whose algorithm a member runs.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum MemberKind {
    /// Ours (`Entered::leave`).
    Ours,
    /// Curator 5.4's `DistributedDoubleBarrier.leave`.
    Curator,
}

/// A known-bad variant the checker must catch, or the library as it is.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum BarrierVariant {
    /// The library's order.
    Library,
    /// Our members delete their node at once, the lowest too.
    DeleteAtOnce,
}

/// A bounded configuration: one member per kind, named in order (member 0 has the lowest name).
#[derive(Clone, Debug)]
pub struct BarrierModel {
    /// The members' kinds.
    pub members: Vec<MemberKind>,
    /// The protocol checked.
    pub variant: BarrierVariant,
}

/// Where one member is.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum MemberPhase {
    /// Inside; has not called `leave`.
    Entered,
    /// Ours, leaving: the children it saw at its last listing (none yet).
    Leaving {
        /// The member nodes and whether `ready` existed, at the last listing.
        seen: Option<(BTreeSet<u8>, bool)>,
    },
    /// Curator's, about to list the children.
    CuratorListing {
        /// Whether its node should still exist (Curator's `ourNodeShouldExist`).
        should_exist: bool,
    },
    /// Curator's, waiting for one node to go.
    CuratorWaiting {
        /// The node it watches.
        watched: u8,
        /// Whether its node should still exist.
        should_exist: bool,
    },
    /// `leave` returned.
    Left,
}

/// The barrier model's state.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct BarrierState {
    /// The member nodes under the barrier.
    pub nodes: BTreeSet<u8>,
    /// Whether the round's `ready` node exists.
    pub ready: bool,
    /// Each member's phase.
    pub phases: Vec<MemberPhase>,
    /// Ghost: a Curator member threw (its node was gone when it should have existed).
    pub curator_failed: bool,
}

/// A step of the barrier model.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum BarrierAction {
    /// A member calls `leave`.
    Leave(u8),
    /// A leaving member lists the children and acts on them.
    Step(u8),
}

impl Model for BarrierModel {
    type State = BarrierState;
    type Action = BarrierAction;

    fn init_states(&self) -> Vec<BarrierState> {
        let count = self.members.len() as u8;
        vec![BarrierState {
            nodes: (0..count).collect(),
            ready: true,
            phases: vec![MemberPhase::Entered; self.members.len()],
            curator_failed: false,
        }]
    }

    fn actions(&self, state: &BarrierState, actions: &mut Vec<BarrierAction>) {
        for (index, phase) in state.phases.iter().enumerate() {
            let member = index as u8;
            let can_step = match phase {
                MemberPhase::Entered => {
                    actions.push(BarrierAction::Leave(member));
                    false
                }
                // A persistent watch: any change since the last listing wakes it.
                MemberPhase::Leaving { seen } => seen.as_ref() != Some(&(state.nodes.clone(), state.ready)),
                MemberPhase::CuratorListing { .. } => true,
                MemberPhase::CuratorWaiting { watched, .. } => !state.nodes.contains(watched),
                MemberPhase::Left => false,
            };
            if can_step {
                actions.push(BarrierAction::Step(member));
            }
        }
    }

    fn next_state(&self, state: &BarrierState, action: BarrierAction) -> Option<BarrierState> {
        let mut next = state.clone();
        match action {
            BarrierAction::Leave(member) => {
                next.phases[usize::from(member)] = match self.members[usize::from(member)] {
                    MemberKind::Ours => MemberPhase::Leaving { seen: None },
                    MemberKind::Curator => MemberPhase::CuratorListing { should_exist: true },
                };
            }
            BarrierAction::Step(member) => match self.members[usize::from(member)] {
                MemberKind::Ours => self.our_step(&mut next, member),
                MemberKind::Curator => curator_step(&mut next, member),
            },
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "no member leaves while another has not called leave",
                |_, state: &BarrierState| {
                    let someone_left = state.phases.contains(&MemberPhase::Left);
                    let someone_inside = state.phases.contains(&MemberPhase::Entered);
                    !(someone_left && someone_inside)
                },
            ),
            Property::always("no Curator member fails", |_, state: &BarrierState| !state.curator_failed),
            Property::always("at quiescence every member has left", |model: &Self, state| {
                let mut actions = Vec::new();
                model.actions(state, &mut actions);
                !actions.is_empty() || state.phases.iter().all(|phase| *phase == MemberPhase::Left)
            }),
            Property::sometimes("everyone leaves", |_, state: &BarrierState| {
                state.phases.iter().all(|phase| *phase == MemberPhase::Left)
            }),
        ]
    }
}

impl BarrierModel {
    /// Our member's step: the library's decision on the members listed.
    fn our_step(&self, state: &mut BarrierState, member: u8) {
        let names: Vec<String> = state.nodes.iter().map(|node| name(*node)).collect();
        let mut step = leave_step(&names, &name(member));
        if self.variant == BarrierVariant::DeleteAtOnce {
            step.delete_own_node = true;
        }
        if step.delete_own_node {
            state.nodes.remove(&member);
        }
        if step.everyone_left {
            state.ready = false;
            state.phases[usize::from(member)] = MemberPhase::Left;
            return;
        }
        // One round: every other member entered before `ready`, so the round is not over while
        // one is listed (the library's `any_entered_before_ready`).
        state.phases[usize::from(member)] =
            MemberPhase::Leaving { seen: Some((state.nodes.clone(), state.ready)) };
    }
}

/// The member's node name: names sort as the members' indices.
fn name(member: u8) -> String {
    format!("member-{member}")
}

/// One pass of Curator 5.4's `internalLeave` loop.
fn curator_step(state: &mut BarrierState, member: u8) {
    let should_exist = match state.phases[usize::from(member)] {
        MemberPhase::CuratorListing { should_exist } | MemberPhase::CuratorWaiting { should_exist, .. } => {
            should_exist
        }
        _ => return,
    };
    let children: Vec<u8> = state.nodes.iter().copied().collect();
    let leave = |state: &mut BarrierState| {
        state.ready = false;
        state.phases[usize::from(member)] = MemberPhase::Left;
    };
    if children.is_empty() {
        return leave(state);
    }
    let our_index = children.iter().position(|child| *child == member);
    if our_index.is_none() && should_exist {
        state.curator_failed = true;
        return leave(state);
    }
    if children.len() == 1 {
        if should_exist && children[0] != member {
            state.curator_failed = true;
        }
        state.nodes.remove(&member);
        return leave(state);
    }
    let (watched, should_exist) = if our_index == Some(0) {
        (children[children.len() - 1], should_exist)
    } else {
        state.nodes.remove(&member);
        (children[0], false)
    };
    state.phases[usize::from(member)] = if state.nodes.contains(&watched) {
        MemberPhase::CuratorWaiting { watched, should_exist }
    } else {
        MemberPhase::CuratorListing { should_exist }
    };
}
