//! Which steps each state allows, and what each step does: the server's side as ZooKeeper
//! behaves, the client's side as the library decides (its functions are called, not copied).

use zk_recipes_framework::decisions::undecided_node;
use zk_recipes_lock_internals::{Decision, NextStep};

use super::state::*;
use super::{Action, LockModel, Policy, Variant};

impl LockModel {
    /// The steps `state` allows.
    pub(super) fn enabled(&self, state: &LockState, actions: &mut Vec<Action>) {
        let active = state.clients.iter().any(|client| !matches!(client.phase, Phase::Done { .. }))
            || !state.cleanup.is_empty();
        let faults = state.faults;
        for (index, client) in state.clients.iter().enumerate() {
            let call = index as Call;
            let session = &state.sessions[usize::from(client.slot)];
            let current = current_session(state, client.slot);
            let usable = session.alive && session.connection == Connection::Connected;
            match &client.phase {
                Phase::Idle => {
                    let lane_free = !self.layout.session_marker() || session.lane.turn.is_none();
                    if usable && lane_free {
                        actions.push(Action::StartTry(call));
                    }
                }
                Phase::Creating { .. } => {
                    let on_current = client.attempt.prefix.as_ref().is_some_and(|(_, on)| *on == current);
                    if usable && on_current {
                        actions.push(Action::Create(call));
                        if faults.lost_replies > 0 {
                            actions.push(Action::CreateReplyLost { call, applied: true });
                            actions.push(Action::CreateReplyLost { call, applied: false });
                        }
                    } else if usable {
                        actions.push(Action::Retry(call));
                    }
                }
                Phase::CreateUnknown => {
                    if usable {
                        actions.push(Action::Retry(call));
                    }
                }
                Phase::Queued { node } => {
                    if usable || node.session != current {
                        actions.push(Action::List(call));
                    }
                }
                Phase::Watching { node, watched, .. } => {
                    let own = state.nodes.iter().find(|candidate| candidate.name == node.name);
                    let revoked = own.is_some_and(|own| own.revoke_requested);
                    let watched_gone = !state.nodes.iter().any(|candidate| candidate.name == *watched);
                    if node.session != current || !session.alive || (usable && (revoked || watched_gone)) {
                        actions.push(Action::Wake(call));
                    }
                }
                Phase::Holding { node, .. } => {
                    if node.session != current || !session.alive {
                        actions.push(Action::Release(call));
                    } else if usable {
                        actions.push(Action::Release(call));
                        if faults.lost_replies > 0 {
                            actions.push(Action::ReleaseReplyLost(call));
                        }
                    }
                }
                Phase::Done { .. } => {}
            }
            if faults.cancels > 0 && !matches!(client.phase, Phase::Done { .. }) {
                actions.push(Action::Cancel(call));
            }
            let node_of_client = match &client.phase {
                Phase::Watching { node, .. } | Phase::Holding { node, .. } => Some(node),
                _ => None,
            };
            if let Some(node) = node_of_client {
                let requested = state.nodes.iter().any(|n| n.name == node.name && !n.revoke_requested);
                if faults.revocations > 0 && requested {
                    actions.push(Action::Revoke(call));
                }
            }
        }
        for (index, handed) in state.cleanup.iter().enumerate() {
            let session = &state.sessions[usize::from(handed.slot)];
            if session.alive && session.connection == Connection::Connected {
                actions.push(Action::Clean(index));
            }
        }
        for (slot, session) in state.sessions.iter().enumerate() {
            let slot = slot as u8;
            if !session.alive {
                actions.push(Action::NewSession(slot));
                continue;
            }
            match session.connection {
                Connection::Connected => {
                    if active && faults.suspensions > 0 {
                        actions.push(Action::Suspend(slot));
                    }
                    if active && faults.expiries > 0 && self.policy == Policy::SessionOnly && self.has_clock()
                    {
                        actions.push(Action::DeclareLost(slot));
                    }
                }
                Connection::Suspended => {
                    actions.push(Action::Reconnect(slot));
                    if active && faults.expiries > 0 {
                        if self.has_clock() {
                            actions.push(Action::DeclareLost(slot));
                        }
                        // The server may expire a suspended session: under `Standard` the hold is
                        // unsafe from `Suspended` on; without the clock nothing warns the holder.
                        if self.policy == Policy::Standard || !self.has_clock() {
                            actions.push(Action::Expire(slot));
                        }
                    }
                }
                Connection::LostDeclared => actions.push(Action::Expire(slot)),
            }
        }
        if active
            && faults.reaps > 0
            && state.parent_exists
            && state.parent_had_child
            && state.nodes.is_empty()
        {
            actions.push(Action::Reap);
        }
    }

    /// The parent's czxid as a listing reports it to the lane's floor.
    fn parent_czxid(&self, state: &LockState) -> i64 {
        match self.variant {
            Variant::FloorIgnoresParent => 0,
            _ => i64::from(state.parent_czxid),
        }
    }

    /// Whether `Lost` comes before the server may expire the session (the expiry clock).
    fn has_clock(&self) -> bool {
        self.variant != Variant::NoExpiryClock
    }

    /// Applies `action` to `state`.
    pub(super) fn apply(&self, state: &mut LockState, action: Action) {
        match action {
            Action::StartTry(call) => self.start_try(state, call),
            Action::Create(call) => self.create(state, call, None),
            Action::CreateReplyLost { call, applied } => self.create(state, call, Some(applied)),
            Action::Retry(call) => {
                let client = &state.clients[usize::from(call)];
                let current = current_session(state, client.slot);
                let same_session = client.attempt.prefix.as_ref().is_some_and(|(_, on)| *on == current);
                let search_first = client.attempt.maybe_created;
                let client = &mut state.clients[usize::from(call)];
                client.phase = if same_session { Phase::Creating { search_first } } else { Phase::Idle };
            }
            Action::List(call) => self.list(state, call),
            Action::Wake(call) => self.wake(state, call),
            Action::Release(call) => self.release(state, call, false),
            Action::ReleaseReplyLost(call) => self.release(state, call, true),
            Action::Cancel(call) => self.cancel(state, call),
            Action::Clean(index) => self.clean(state, index),
            Action::Suspend(slot) => {
                state.faults.suspensions -= 1;
                self.suspend(state, slot);
            }
            Action::Reconnect(slot) => state.sessions[usize::from(slot)].connection = Connection::Connected,
            Action::DeclareLost(slot) => {
                state.faults.expiries -= 1;
                state.sessions[usize::from(slot)].connection = Connection::LostDeclared;
                mark_holders_lost(state, slot, |_| true);
            }
            Action::Expire(slot) => {
                let expired = current_session(state, slot);
                let session = &mut state.sessions[usize::from(slot)];
                if session.connection != Connection::LostDeclared {
                    state.faults.expiries -= 1;
                }
                session.alive = false;
                state.nodes.retain(|node| node.owner != expired);
            }
            Action::NewSession(slot) => {
                let session = &mut state.sessions[usize::from(slot)];
                session.incarnation += 1;
                session.alive = true;
                session.connection = Connection::Connected;
                session.lane = Lane::default();
                let current = current_session(state, slot);
                // The framework reports the old session's end: every hold on it learns.
                mark_holders_lost(state, slot, |node| node.session != current);
            }
            Action::Reap => {
                state.faults.reaps -= 1;
                state.parent_exists = false;
                state.parent_had_child = false;
                // A container made again counts its children's sequences from 0.
                state.next_sequence = 0;
            }
            Action::Revoke(call) => {
                state.faults.revocations -= 1;
                let name = match &state.clients[usize::from(call)].phase {
                    Phase::Watching { node, .. } | Phase::Holding { node, .. } => node.name.clone(),
                    _ => return,
                };
                if let Some(node) = state.nodes.iter_mut().find(|node| node.name == name) {
                    node.revoke_requested = true;
                }
            }
        }
    }

    /// A try begins on the slot's current session: its lane's turn (session markers), then the
    /// prefix as the library's `ProtectedAttempt::prefix_for` picks it.
    fn start_try(&self, state: &mut LockState, call: Call) {
        let slot = state.clients[usize::from(call)].slot;
        let current = current_session(state, slot);
        let keeps_prefix = {
            let attempt = &state.clients[usize::from(call)].attempt;
            attempt.prefix.as_ref().is_some_and(|(_, on)| *on == current)
        };
        let search_first = if keeps_prefix {
            let attempt = &mut state.clients[usize::from(call)].attempt;
            std::mem::replace(&mut attempt.maybe_created, true)
        } else {
            self.hand_over_unknown(state, call);
            let attempt = &mut state.clients[usize::from(call)].attempt;
            let prefix = self.layout.prefix(call, attempt.prefixes_drawn, current);
            attempt.prefixes_drawn += 1;
            attempt.prefix = Some((prefix, current));
            attempt.maybe_created = true;
            false
        };
        if self.layout.session_marker() {
            state.sessions[usize::from(slot)].lane.turn = Some(call);
            state.clients[usize::from(call)].attempt.lane = Some(current);
        }
        state.clients[usize::from(call)].phase = Phase::Creating { search_first };
    }

    /// A create whose outcome is unknown goes to the cleanup worker (the library's
    /// `hand_over_unknown`), with the lane's turn if it holds one.
    fn hand_over_unknown(&self, state: &mut LockState, call: Call) {
        let client = &mut state.clients[usize::from(call)];
        let slot = client.slot;
        let lane = client.attempt.lane.take();
        let maybe_created = std::mem::replace(&mut client.attempt.maybe_created, false);
        let prefix = if maybe_created { client.attempt.prefix.take() } else { None };
        match (prefix, lane) {
            (Some((prefix, _)), Some(session)) => {
                state.cleanup.push(Handed { slot, call, task: CleanupTask::Undecided { prefix, session } });
            }
            (Some((prefix, _)), None) => {
                state.cleanup.push(Handed { slot, call, task: CleanupTask::Protected { prefix } });
            }
            (None, Some(session)) => release_turn(state, session, None),
            (None, None) => {}
        }
    }

    /// The create's outcome is known: the lane's turn passes on, its floor raised to the node's
    /// sequence if it made one (the library's `settle`).
    fn settle(&self, state: &mut LockState, call: Call, created: Option<(i32, u32)>) {
        let attempt = &mut state.clients[usize::from(call)].attempt;
        attempt.maybe_created = false;
        if let Some(session) = attempt.lane.take() {
            release_turn(state, session, created);
        }
    }

    /// One try of the protected create; `lost_reply` is `Some(applied)` when its reply is lost.
    fn create(&self, state: &mut LockState, call: Call, lost_reply: Option<bool>) {
        let Phase::Creating { search_first } = state.clients[usize::from(call)].phase else { return };
        let slot = state.clients[usize::from(call)].slot;
        let current = current_session(state, slot);
        let Some((prefix, _)) = state.clients[usize::from(call)].attempt.prefix.clone() else { return };
        if search_first {
            match self.search(state, &prefix, current) {
                Ok(Some(found)) => {
                    let czxid = found.2;
                    if state.nodes.iter().any(|node| node.name == found.0 && node.call != call) {
                        state.foreign_adoption = true;
                    }
                    self.settle(state, call, Some((found.1, czxid)));
                    state.clients[usize::from(call)].phase =
                        Phase::Queued { node: Owned { name: found.0, session: current, czxid } };
                    return;
                }
                Ok(None) => {}
                Err(()) => {
                    // The library's create fails with an error the server answered: settled,
                    // nothing handed over.
                    self.settle(state, call, None);
                    state.clients[usize::from(call)].phase = Phase::Done { gave_up: true };
                    return;
                }
            }
        }
        match lost_reply {
            None => {
                let (name, sequence, czxid) =
                    server_create(state, &self.layout.node_name_fn(&prefix), call, current);
                self.settle(state, call, Some((sequence, czxid)));
                state.clients[usize::from(call)].phase =
                    Phase::Queued { node: Owned { name, session: current, czxid } };
            }
            Some(applied) => {
                state.faults.lost_replies -= 1;
                if applied {
                    server_create(state, &self.layout.node_name_fn(&prefix), call, current);
                }
                self.suspend(state, slot);
                state.clients[usize::from(call)].phase = Phase::CreateUnknown;
            }
        }
    }

    /// A node of an earlier try of `call` on `session`, as the library's `find_protected` finds it:
    /// above the lane's floor for a session marker, by the prefix otherwise; ours only if our
    /// session owns it. `Err` where the library refuses to choose.
    fn search(
        &self,
        state: &LockState,
        prefix: &str,
        session: SessionRef,
    ) -> Result<Option<(String, i32, u32)>, ()> {
        let children = state.nodes.iter().map(|node| node.name.clone());
        let candidate = if self.layout.session_marker() && self.variant != Variant::AdoptByPrefix {
            let floor = state.sessions[usize::from(session.slot)].lane.floor;
            undecided_node(children, &floor, self.parent_czxid(state), prefix, self.layout.lock_name())
                .map_err(|_| ())?
                .map(|(name, _)| name)
        } else {
            state
                .nodes
                .iter()
                .find(|node| node.name.starts_with(prefix) && node.owner == session)
                .map(|node| node.name.clone())
        };
        Ok(candidate.and_then(|name| {
            let node = state.nodes.iter().find(|node| node.name == name && node.owner == session)?;
            Some((node.name.clone(), node.sequence, node.czxid))
        }))
    }

    /// Lists the contenders and decides with the library's driver and acquire-loop rule.
    fn list(&self, state: &mut LockState, call: Call) {
        let Phase::Queued { node } = state.clients[usize::from(call)].phase.clone() else { return };
        let current = current_session(state, node.session.slot);
        if node.session != current {
            return give_up_owned(state, call, node);
        }
        let children = state.nodes.iter().map(|node| node.name.clone()).collect();
        let Ok(decision) = self.layout.decide(children, &node.name, self.max_leases) else {
            return give_up_owned(state, call, node);
        };
        match decision.next_step(true) {
            NextStep::Hold => self.become_holder(state, call, node),
            NextStep::Watch(watched) => {
                if state.nodes.iter().any(|candidate| candidate.name == watched) {
                    state.clients[usize::from(call)].phase = Phase::Watching { node, decision, watched };
                } else if self.after_watch(&decision) == NextStep::Hold {
                    // The watch found the node gone already.
                    self.become_holder(state, call, node);
                }
            }
            NextStep::ListAgain | NextStep::GiveBack => {}
        }
    }

    /// The library's rule after the watched node went, or a known-bad one.
    fn after_watch(&self, decision: &Decision) -> NextStep {
        match self.variant {
            Variant::HoldOnAnyDeletion => NextStep::Hold,
            _ => decision.after_watch(true),
        }
    }

    /// A waiter wakes: its session is gone, its node was asked to go, or the watched node went.
    fn wake(&self, state: &mut LockState, call: Call) {
        let Phase::Watching { node, decision, .. } = state.clients[usize::from(call)].phase.clone() else {
            return;
        };
        let session = &state.sessions[usize::from(node.session.slot)];
        let current = current_session(state, node.session.slot);
        let revoked =
            state.nodes.iter().any(|candidate| candidate.name == node.name && candidate.revoke_requested);
        if node.session != current || !session.alive || revoked {
            return give_up_owned(state, call, node);
        }
        if self.after_watch(&decision) == NextStep::Hold {
            self.become_holder(state, call, node);
        } else {
            state.clients[usize::from(call)].phase = Phase::Queued { node };
        }
    }

    fn become_holder(&self, state: &mut LockState, call: Call, node: Owned) {
        let token = node.czxid;
        // With more than one lease, holds overlap and are granted in the order their holders
        // look, not their nodes' creation: the token orders the nodes, not the grants.
        if self.max_leases == 1 && state.highest_token.is_some_and(|highest| highest >= token) {
            state.token_went_back = true;
        }
        state.highest_token = state.highest_token.max(Some(token));
        let session = &state.sessions[usize::from(node.session.slot)];
        let lost = match self.policy {
            Policy::Standard => session.connection != Connection::Connected,
            Policy::SessionOnly => session.connection == Connection::LostDeclared,
        };
        state.clients[usize::from(call)].phase = Phase::Holding { node, token, lost };
    }

    /// A holder releases: the delete on the node's session; after that session's end, nothing to
    /// delete. A lost reply hands the delete to the cleanup worker.
    fn release(&self, state: &mut LockState, call: Call, reply_lost: bool) {
        let Phase::Holding { node, .. } = state.clients[usize::from(call)].phase.clone() else { return };
        let current = current_session(state, node.session.slot);
        let alive = state.sessions[usize::from(node.session.slot)].alive;
        if node.session == current && alive {
            delete_named(state, &node.name, call);
            if reply_lost {
                state.faults.lost_replies -= 1;
                self.suspend(state, node.session.slot);
                let slot = node.session.slot;
                let czxid = node.czxid;
                state.cleanup.push(Handed { slot, call, task: CleanupTask::Node { name: node.name, czxid } });
            }
        }
        state.clients[usize::from(call)].phase = Phase::Done { gave_up: false };
    }

    /// The acquire's future is dropped (or its deadline passed), or the holder drops its guard.
    fn cancel(&self, state: &mut LockState, call: Call) {
        state.faults.cancels -= 1;
        match state.clients[usize::from(call)].phase.clone() {
            Phase::Idle | Phase::Creating { .. } | Phase::CreateUnknown => {
                self.hand_over_unknown(state, call);
                state.clients[usize::from(call)].phase = Phase::Done { gave_up: true };
            }
            Phase::Queued { node } | Phase::Watching { node, .. } => give_up_owned(state, call, node),
            Phase::Holding { node, .. } => {
                let slot = state.clients[usize::from(call)].slot;
                let czxid = node.czxid;
                state.cleanup.push(Handed { slot, call, task: CleanupTask::Node { name: node.name, czxid } });
                state.clients[usize::from(call)].phase = Phase::Done { gave_up: false };
            }
            Phase::Done { .. } => {}
        }
    }

    /// The cleanup worker runs one task on its slot's current session.
    fn clean(&self, state: &mut LockState, index: usize) {
        let Handed { slot, call, task } = state.cleanup.remove(index);
        let current = current_session(state, slot);
        match task {
            CleanupTask::Node { name, czxid } => {
                let by_name_only = self.variant == Variant::CleanupByName;
                if state.nodes.iter().any(|node| node.name == name && (by_name_only || node.czxid == czxid)) {
                    delete_named(state, &name, call);
                }
            }
            CleanupTask::Protected { prefix } => delete_prefixed(state, &prefix, call),
            CleanupTask::Undecided { prefix, session } => {
                if session != current {
                    return;
                }
                if self.variant == Variant::SessionPrefixCleanup {
                    delete_prefixed(state, &prefix, call);
                    return release_turn(state, session, None);
                }
                let floor = state.sessions[usize::from(slot)].lane.floor;
                let children = state.nodes.iter().map(|node| node.name.clone());
                let parent_czxid = self.parent_czxid(state);
                match undecided_node(children, &floor, parent_czxid, &prefix, self.layout.lock_name()) {
                    Ok(Some((name, sequence))) => {
                        let listed_at = state.parent_pzxid;
                        delete_named(state, &name, call);
                        release_turn(state, session, Some((sequence, listed_at)));
                    }
                    Ok(None) | Err(_) => release_turn(state, session, None),
                }
            }
        }
    }

    /// The slot's connection drops: under `Standard` every hold on it is unsafe from now on.
    fn suspend(&self, state: &mut LockState, slot: u8) {
        let session = &mut state.sessions[usize::from(slot)];
        if session.connection == Connection::Connected {
            session.connection = Connection::Suspended;
        }
        if self.policy == Policy::Standard {
            mark_holders_lost(state, slot, |_| true);
        }
    }
}

impl super::Layout {
    fn node_name_fn(self, prefix: &str) -> impl Fn(i32) -> String + '_ {
        move |sequence| self.node_name(prefix, sequence)
    }
}

/// The slot's current session.
pub(super) fn current_session(state: &LockState, slot: u8) -> SessionRef {
    SessionRef { slot, incarnation: state.sessions[usize::from(slot)].incarnation }
}

/// The server makes the node (and a missing container parent): its name, sequence and czxid.
fn server_create(
    state: &mut LockState,
    name_of: &impl Fn(i32) -> String,
    call: Call,
    owner: SessionRef,
) -> (String, i32, u32) {
    if !state.parent_exists {
        state.parent_exists = true;
        state.parent_czxid = state.zxid;
        state.zxid += 1;
    }
    let sequence = state.next_sequence;
    state.next_sequence = sequence.wrapping_add(1);
    let czxid = state.zxid;
    state.zxid += 1;
    let name = name_of(sequence);
    state.nodes.push(Node { name: name.clone(), sequence, owner, czxid, call, revoke_requested: false });
    state.parent_pzxid = czxid;
    state.parent_had_child = true;
    (name, sequence, czxid)
}

/// The lane's turn passes on (if the lane is still the session's), its floor raised to `created`.
fn release_turn(state: &mut LockState, session: SessionRef, created: Option<(i32, u32)>) {
    let slot = &mut state.sessions[usize::from(session.slot)];
    if slot.incarnation != session.incarnation {
        return;
    }
    if let Some((sequence, zxid)) = created {
        slot.lane.floor.record(sequence, i64::from(zxid));
    }
    slot.lane.turn = None;
}

/// An acquire with a node gives up: the node goes to the cleanup worker (a dropped `OwnedNode`).
fn give_up_owned(state: &mut LockState, call: Call, node: Owned) {
    let slot = state.clients[usize::from(call)].slot;
    let czxid = node.czxid;
    state.cleanup.push(Handed { slot, call, task: CleanupTask::Node { name: node.name, czxid } });
    state.clients[usize::from(call)].phase = Phase::Done { gave_up: true };
}

/// Deletes the node named `name`, if any, on behalf of `call`.
fn delete_named(state: &mut LockState, name: &str, call: Call) {
    if let Some(position) = state.nodes.iter().position(|node| node.name == name) {
        if state.nodes[position].call != call {
            state.foreign_delete = true;
        }
        state.nodes.remove(position);
        state.parent_pzxid = state.zxid;
        state.zxid += 1;
    }
}

/// Deletes every node whose name starts with `prefix`, on behalf of `call`.
fn delete_prefixed(state: &mut LockState, prefix: &str, call: Call) {
    let names: Vec<String> = state
        .nodes
        .iter()
        .filter(|node| node.name.starts_with(prefix))
        .map(|node| node.name.clone())
        .collect();
    for name in names {
        delete_named(state, &name, call);
    }
}

/// Every hold of the slot whose node `matches` learns that it is lost.
fn mark_holders_lost(state: &mut LockState, slot: u8, matches: impl Fn(&Owned) -> bool) {
    for client in &mut state.clients {
        if let Phase::Holding { node, lost, .. } = &mut client.phase {
            if node.session.slot == slot && matches(node) {
                *lost = true;
            }
        }
    }
}
