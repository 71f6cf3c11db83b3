//! The lock-safe queue take and its acks, single and grouped.
//!
//! Consumers take items by creating the item's lock node (`<lock path>/<item>`, ephemeral), work on
//! them, and finish each with one multi {check the lock, delete the item, delete the lock}, sent
//! only on the session that holds the lock; a group ack sends several in one multi and, if that
//! fails, each on its own. Answers may be lost (the multi applied or not); a consumer's session may
//! be suspended (its deliveries' `lost()` resolves under `Standard`), expire (its locks go) and be
//! replaced. The verdict on each answer is the library's `finish_verdict`.
//!
//! Invariants: no item worked on by two consumers that both trust their lock; an item is deleted
//! only by an ack of the consumer that holds its lock; at quiescence no lock is left and every
//! item is queued or was acked. Negative control: an ack without the lock check, sent on whatever
//! session is current.

use stateright::{Model, Property};
use zk_recipes_queue::decisions::{finish_verdict, FinishAnswer, FinishVerdict};

/// A known-bad variant the checker must catch, or the library as it is.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum QueueVariant {
    /// The library's finish.
    Library,
    /// An ack without the lock check, on whatever session is current.
    AckWithoutLockCheck,
}

/// A bounded configuration of the queue model.
#[derive(Clone, Debug)]
pub struct QueueModel {
    /// How many items are queued.
    pub items: u8,
    /// How many consumers take them.
    pub consumers: u8,
    /// How many takes each consumer makes at most.
    pub takes: u8,
    /// How many answers may be lost.
    pub lost_replies: u8,
    /// How many sessions may expire.
    pub expiries: u8,
    /// The protocol checked.
    pub variant: QueueVariant,
}

/// A consumer's session: which of its sessions, and a lock's owner.
pub type Owner = (u8, u8);

/// One item a consumer took.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Taken {
    /// The item.
    pub item: u8,
    /// The session whose lock it holds.
    pub session: u8,
    /// Whether its `lost()` resolved.
    pub lost: bool,
    /// How many finish tries were sent with their answer lost.
    pub tries: u32,
}

/// One consumer.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct QueueConsumer {
    /// Which of its sessions is current.
    pub session: u8,
    /// Whether the server still has it.
    pub alive: bool,
    /// Whether it is connected.
    pub connected: bool,
    /// What it took and has not finished.
    pub taken: Vec<Taken>,
    /// Takes left.
    pub takes_left: u8,
}

/// The queue model's state.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct QueueState {
    /// The items still queued.
    pub items: Vec<u8>,
    /// The items' lock nodes and their owners.
    pub locks: Vec<(u8, Owner)>,
    /// The consumers.
    pub consumers: Vec<QueueConsumer>,
    /// Items deleted by an ack, and the consumer whose ack it was.
    pub acked: Vec<(u8, u8)>,
    /// Answers still to be lost.
    pub lost_replies: u8,
    /// Sessions still to expire.
    pub expiries: u8,
    /// Ghost: an ack deleted an item whose lock its consumer did not hold.
    pub acked_without_lock: bool,
    /// Ghost: a finish concluded done for an item its tries did not delete, or not done for one
    /// they did.
    pub wrong_verdict: bool,
}

/// A step of the queue model.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum QueueAction {
    /// A consumer takes an item: its lock node is created.
    Take(u8, u8),
    /// A consumer acks one item it took; `reply_lost` is `Some(applied)` when the answer is lost.
    Ack {
        /// The consumer.
        consumer: u8,
        /// The item.
        item: u8,
        /// Whether the answer is lost, and if so whether the multi ran.
        reply_lost: Option<bool>,
    },
    /// A consumer acks everything it took in one multi.
    AckGroup(u8),
    /// A consumer's connection drops.
    Suspend(u8),
    /// It comes back to the same session.
    Reconnect(u8),
    /// The server expires its session: its locks go.
    Expire(u8),
    /// It gets a new session.
    NewSession(u8),
}

impl Model for QueueModel {
    type State = QueueState;
    type Action = QueueAction;

    fn init_states(&self) -> Vec<QueueState> {
        let consumer = QueueConsumer {
            session: 0,
            alive: true,
            connected: true,
            taken: Vec::new(),
            takes_left: self.takes,
        };
        vec![QueueState {
            items: (0..self.items).collect(),
            locks: Vec::new(),
            consumers: vec![consumer; usize::from(self.consumers)],
            acked: Vec::new(),
            lost_replies: self.lost_replies,
            expiries: self.expiries,
            acked_without_lock: false,
            wrong_verdict: false,
        }]
    }

    fn actions(&self, state: &QueueState, actions: &mut Vec<QueueAction>) {
        for (index, consumer) in state.consumers.iter().enumerate() {
            let id = index as u8;
            if !consumer.alive {
                actions.push(QueueAction::NewSession(id));
                continue;
            }
            if !consumer.connected {
                actions.push(QueueAction::Reconnect(id));
                if state.expiries > 0 {
                    actions.push(QueueAction::Expire(id));
                }
                continue;
            }
            if consumer.takes_left > 0 {
                for &item in &state.items {
                    if !state.locks.iter().any(|(locked, _)| *locked == item) {
                        actions.push(QueueAction::Take(id, item));
                    }
                }
            }
            for taken in &consumer.taken {
                actions.push(QueueAction::Ack { consumer: id, item: taken.item, reply_lost: None });
                if state.lost_replies > 0 {
                    actions.push(QueueAction::Ack { consumer: id, item: taken.item, reply_lost: Some(true) });
                    actions.push(QueueAction::Ack {
                        consumer: id,
                        item: taken.item,
                        reply_lost: Some(false),
                    });
                }
            }
            if consumer.taken.len() >= 2 {
                actions.push(QueueAction::AckGroup(id));
            }
            let busy = state.consumers.iter().any(|consumer| !consumer.taken.is_empty());
            if busy && state.expiries > 0 {
                actions.push(QueueAction::Suspend(id));
            }
        }
    }

    fn next_state(&self, state: &QueueState, action: QueueAction) -> Option<QueueState> {
        let mut next = state.clone();
        match action {
            QueueAction::Take(consumer, item) => {
                let session = next.consumers[usize::from(consumer)].session;
                next.locks.push((item, (consumer, session)));
                let taker = &mut next.consumers[usize::from(consumer)];
                taker.takes_left -= 1;
                taker.taken.push(Taken { item, session, lost: false, tries: 0 });
            }
            QueueAction::Ack { consumer, item, reply_lost } => {
                self.ack(&mut next, consumer, item, reply_lost)
            }
            QueueAction::AckGroup(consumer) => self.ack_group(&mut next, consumer),
            QueueAction::Suspend(consumer) => suspend(&mut next, consumer),
            QueueAction::Reconnect(consumer) => next.consumers[usize::from(consumer)].connected = true,
            QueueAction::Expire(consumer) => {
                next.expiries -= 1;
                let session = next.consumers[usize::from(consumer)].session;
                next.consumers[usize::from(consumer)].alive = false;
                next.locks.retain(|(_, owner)| *owner != (consumer, session));
            }
            QueueAction::NewSession(consumer) => {
                let renewed = &mut next.consumers[usize::from(consumer)];
                renewed.session += 1;
                renewed.alive = true;
                renewed.connected = true;
                for taken in &mut renewed.taken {
                    taken.lost = true;
                }
            }
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always(
                "no item worked on by two consumers that trust their lock",
                |_, state: &QueueState| {
                    let trusted: Vec<u8> = state
                        .consumers
                        .iter()
                        .flat_map(|consumer| {
                            consumer.taken.iter().filter(|taken| !taken.lost).map(|taken| taken.item)
                        })
                        .collect();
                    (1..trusted.len()).all(|index| !trusted[..index].contains(&trusted[index]))
                },
            ),
            Property::always("an item is deleted only by an ack under its lock", |_, state: &QueueState| {
                !state.acked_without_lock
            }),
            Property::always(
                "a finish is done exactly when its tries deleted the item",
                |_, state: &QueueState| !state.wrong_verdict,
            ),
            Property::always("at quiescence no lock is left and no item lost", |model: &Self, state| {
                let mut actions = Vec::new();
                model.actions(state, &mut actions);
                !actions.is_empty()
                    || (state.locks.is_empty()
                        && (0..model.items).all(|item| {
                            state.items.contains(&item) || state.acked.iter().any(|(acked, _)| *acked == item)
                        }))
            }),
            Property::sometimes("an item is taken again after its lock expired", |_, state: &QueueState| {
                state.consumers.iter().any(|consumer| consumer.session > 0 && !consumer.taken.is_empty())
                    || state.consumers.iter().filter(|consumer| consumer.takes_left == 0).count() > 1
            }),
        ]
    }
}

impl QueueModel {
    /// One finish try for `item`; `reply_lost` as in [`QueueAction::Ack`].
    fn ack(&self, state: &mut QueueState, consumer: u8, item: u8, reply_lost: Option<bool>) {
        let current = state.consumers[usize::from(consumer)].session;
        let Some(position) =
            state.consumers[usize::from(consumer)].taken.iter().position(|taken| taken.item == item)
        else {
            return;
        };
        let taken = state.consumers[usize::from(consumer)].taken[position].clone();
        let unchecked = self.variant == QueueVariant::AckWithoutLockCheck;
        if taken.session != current && !unchecked {
            // Never sent on a newer session: the try, if any, is over (lock lost, or unknown).
            state.consumers[usize::from(consumer)].taken.remove(position);
            return;
        }
        if let Some(applied) = reply_lost {
            state.lost_replies -= 1;
            if applied {
                self.run_finish(state, consumer, taken.session, item, unchecked);
            }
            state.consumers[usize::from(consumer)].taken[position].tries += 1;
            return suspend(state, consumer);
        }
        let answer = self.run_finish(state, consumer, taken.session, item, unchecked);
        let done = match finish_verdict(answer, taken.tries) {
            FinishVerdict::Done => true,
            FinishVerdict::LockLost | FinishVerdict::ItemGone => false,
            // The read of the item decides.
            FinishVerdict::DoneIfItemGone => !state.items.contains(&item),
        };
        if done != state.acked.contains(&(item, consumer)) {
            state.wrong_verdict = true;
        }
        state.consumers[usize::from(consumer)].taken.remove(position);
    }

    /// The finish multi on the server: all of it or nothing.
    fn run_finish(
        &self,
        state: &mut QueueState,
        consumer: u8,
        session: u8,
        item: u8,
        unchecked: bool,
    ) -> FinishAnswer {
        let lock = state.locks.iter().position(|(locked, _)| *locked == item);
        if lock.is_none() && !unchecked {
            return FinishAnswer::LockMissing;
        }
        if !state.items.contains(&item) {
            return FinishAnswer::ItemMissing;
        }
        if lock.is_none_or(|lock| state.locks[lock].1 != (consumer, session)) {
            state.acked_without_lock = true;
        }
        state.items.retain(|queued| *queued != item);
        state.acked.push((item, consumer));
        state.locks.retain(|(locked, _)| *locked != item);
        FinishAnswer::Committed
    }

    /// A group ack: one multi for everything the consumer took; if it fails, each alone (no try
    /// of it was applied).
    fn ack_group(&self, state: &mut QueueState, consumer: u8) {
        let current = state.consumers[usize::from(consumer)].session;
        let taken = state.consumers[usize::from(consumer)].taken.clone();
        let all_ours = taken.iter().all(|taken| taken.session == current);
        let all_there = taken.iter().all(|taken| {
            state.items.contains(&taken.item) && state.locks.iter().any(|(locked, _)| *locked == taken.item)
        });
        if all_ours && all_there {
            for taken in &taken {
                self.run_finish(state, consumer, taken.session, taken.item, false);
            }
            state.consumers[usize::from(consumer)].taken.clear();
            return;
        }
        for taken in taken {
            self.ack(state, consumer, taken.item, None);
        }
    }
}

/// The consumer's connection drops: under `Standard` its deliveries' `lost()` resolves.
fn suspend(state: &mut QueueState, consumer: u8) {
    let suspended = &mut state.consumers[usize::from(consumer)];
    suspended.connected = false;
    for taken in &mut suspended.taken {
        taken.lost = true;
    }
}
