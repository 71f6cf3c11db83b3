//! Leadership in discrete time: a leadership (the latch's or the selector's: both end by one rule,
//! the library's `step_down_margin` before the framework's expiry clock) against the server's
//! session expiry.
//!
//! Two participants: the leader (its lock node held, its leadership future running) and the next
//! in line, which takes over the moment the server expires the leader's session (the worst case:
//! as early as the server allows). Time runs in ticks. Each tick the leader's heartbeat asks the
//! server once (the framework's heartbeat runs every tenth of the session timeout: one tick); the
//! request may never arrive, or arrive and be answered at once, later (up to a bound), or never.
//!
//! The decisions are the library's: the expiry clock's `earliest_expiry` (from the send time of
//! the latest answered request) and the selector's `step_down_margin`. The leader's stop timer may
//! fire late, by a bounded number of ticks: the clock-drift and scheduling bound the code assumes
//! (late by less than the margin, a tenth of the session timeout).
//!
//! A latch that stepped down by the clock leads again with the same node once a late answer moves
//! the clock on (`reclaim`): it claims whenever the clock allows, not knowing whether the server
//! expired its session meanwhile. The selector never leads again with the same lock.
//!
//! Invariant: no tick at which both act as leader. Negative controls: no expiry clock (the leader
//! stops only once it learns of the expiry), and a clock that counts from when the answer arrived
//! rather than from when its request was sent (late answers then look like recent contact).

use std::time::Duration;

use stateright::{Model, Property};
use zk_recipes_framework::decisions::earliest_expiry;
use zk_recipes_leader::decisions::step_down_margin;

/// A known-bad variant the checker must catch, or the library as it is.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum LeadershipVariant {
    /// The library: the leadership ends a margin before the earliest expiry.
    Library,
    /// No expiry clock: the leader stops only once it learns that its session expired.
    NoExpiryClock,
    /// The clock counts from the arrival of the latest answer, not the send time of its request.
    CountFromAnswer,
    /// A close ends the session (deleting the leader's node) at once, while the leadership runs
    /// on through its close grace.
    CloseEndsSessionFirst,
}

/// A bounded configuration of the leadership model.
#[derive(Clone, Debug)]
pub struct LeadershipModel {
    /// One tick of time.
    pub tick: Duration,
    /// The session timeout, a whole number of ticks.
    pub session_timeout: Duration,
    /// How many ticks after it reached the server an answer may arrive.
    pub answer_delay_ticks: u8,
    /// How many ticks late the leader's stop timer may fire.
    pub timer_lateness_ticks: u8,
    /// How many ticks the model runs.
    pub horizon_ticks: u8,
    /// Whether a leader that stepped down leads again whenever the clock allows (the latch), or
    /// never (the selector).
    pub reclaim: bool,
    /// Whether the leader may be closed, and the ticks of its close grace: the leadership may run
    /// on that long after the close (the selector's `close_grace`), the clock's rule still
    /// applying; the session ends, and the next in line takes over, once it stopped.
    pub close_grace_ticks: Option<u8>,
    /// The protocol checked.
    pub variant: LeadershipVariant,
}

impl LeadershipModel {
    /// A second-long session in ticks of 50 ms (the default margin, a tenth of the timeout, is
    /// two ticks), answers up to 3 ticks late, a stop timer at most a tick late, two timeouts of
    /// time.
    pub fn new() -> Self {
        Self {
            tick: Duration::from_millis(50),
            session_timeout: Duration::from_secs(1),
            answer_delay_ticks: 3,
            timer_lateness_ticks: 1,
            horizon_ticks: 40,
            reclaim: false,
            close_grace_ticks: None,
            variant: LeadershipVariant::Library,
        }
    }

    fn ticks(&self, duration: Duration) -> u8 {
        u8::try_from(duration.as_nanos() / self.tick.as_nanos()).unwrap_or(u8::MAX)
    }

    fn at(&self, tick: u8) -> Duration {
        self.tick * u32::from(tick)
    }

    /// The first tick at which the leadership must have ended by the library's rule: the
    /// earliest expiry the clock allows, less the selector's margin, rounded up to a tick.
    fn step_down_tick(&self, state: &LeadershipState) -> u8 {
        let expiry =
            earliest_expiry(Some(self.at(state.heard_by)), Some(Duration::ZERO), self.session_timeout)
                .expect("the clock has begun");
        let step_down = expiry.saturating_sub(step_down_margin(self.session_timeout, None));
        let ticks = step_down.as_nanos().div_ceil(self.tick.as_nanos());
        u8::try_from(ticks).unwrap_or(u8::MAX)
    }

    /// Whether the leader's stop is due at `state.now` (it may still fire late): by the clock, or
    /// at the end of a close's grace.
    fn stop_due(&self, state: &LeadershipState) -> bool {
        let grace_over = match (state.closed_at, self.close_grace_ticks) {
            (Some(closed_at), Some(grace)) => state.now >= closed_at.saturating_add(grace),
            _ => false,
        };
        grace_over || self.clock_due(state)
    }

    /// Whether the clock's rule (or the no-clock control's) ends the leadership at `state.now`.
    fn clock_due(&self, state: &LeadershipState) -> bool {
        match self.variant {
            LeadershipVariant::NoExpiryClock => state.expired,
            _ => state.now >= self.step_down_tick(state),
        }
    }
}

impl Default for LeadershipModel {
    fn default() -> Self {
        Self::new()
    }
}

/// The leadership model's state.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct LeadershipState {
    /// The current tick.
    pub now: u8,
    /// The tick at which the server last heard the leader's session.
    pub server_heard: u8,
    /// The expiry clock's time: the send tick of the latest answered request.
    pub heard_by: u8,
    /// Answers on their way: the tick their request was sent, and the tick they arrive.
    pub answers: Vec<(u8, u8)>,
    /// Whether this tick's heartbeat was sent.
    pub beat_sent: bool,
    /// Whether the leader still acts as leader.
    pub leader_acting: bool,
    /// The tick at which the leader's stop fell due, while it has not fired.
    pub stop_due_since: Option<u8>,
    /// Whether the server expired the leader's session.
    pub expired: bool,
    /// Whether the next in line acts as leader.
    pub successor_acting: bool,
    /// Whether the leader stepped down at least once.
    pub stepped_down: bool,
    /// The tick at which the leader was closed.
    pub closed_at: Option<u8>,
}

/// A step of the leadership model.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum LeadershipAction {
    /// The heartbeat's request never reaches the server.
    BeatLost,
    /// The heartbeat's request reaches the server; its answer arrives this many ticks later, or
    /// never.
    BeatHeard(Option<u8>),
    /// The leader's stop timer fires: its leadership ends.
    StepDown,
    /// A latch that stepped down claims again with the same node: the clock allows it.
    Reclaim,
    /// The leader is closed: its leadership ends within the close grace.
    Close,
    /// Time moves on by a tick.
    Tick,
}

impl Model for LeadershipModel {
    type State = LeadershipState;
    type Action = LeadershipAction;

    fn init_states(&self) -> Vec<LeadershipState> {
        vec![LeadershipState {
            now: 0,
            server_heard: 0,
            heard_by: 0,
            answers: Vec::new(),
            beat_sent: false,
            leader_acting: true,
            stop_due_since: None,
            expired: false,
            successor_acting: false,
            stepped_down: false,
            closed_at: None,
        }]
    }

    fn actions(&self, state: &LeadershipState, actions: &mut Vec<LeadershipAction>) {
        if state.now >= self.horizon_ticks {
            return;
        }
        if !state.beat_sent && !state.expired {
            actions.push(LeadershipAction::BeatLost);
            for delay in 0..=self.answer_delay_ticks {
                actions.push(LeadershipAction::BeatHeard(Some(delay)));
            }
            actions.push(LeadershipAction::BeatHeard(None));
            return;
        }
        if state.leader_acting && (state.stop_due_since.is_some() || state.closed_at.is_some()) {
            actions.push(LeadershipAction::StepDown);
        }
        if self.reclaim
            && state.stepped_down
            && state.closed_at.is_none()
            && !state.leader_acting
            && !self.clock_due(state)
        {
            actions.push(LeadershipAction::Reclaim);
        }
        if self.close_grace_ticks.is_some() && state.closed_at.is_none() && state.leader_acting {
            actions.push(LeadershipAction::Close);
        }
        let overdue = state
            .stop_due_since
            .is_some_and(|due| state.now >= due.saturating_add(self.timer_lateness_ticks));
        if !(state.leader_acting && overdue) {
            actions.push(LeadershipAction::Tick);
        }
    }

    fn next_state(&self, state: &LeadershipState, action: LeadershipAction) -> Option<LeadershipState> {
        let mut next = state.clone();
        match action {
            LeadershipAction::BeatLost => next.beat_sent = true,
            LeadershipAction::BeatHeard(answer) => {
                next.beat_sent = true;
                next.server_heard = next.now;
                if let Some(delay) = answer {
                    next.answers.push((next.now, next.now + delay));
                    self.deliver(&mut next);
                }
            }
            LeadershipAction::StepDown => {
                next.leader_acting = false;
                next.stop_due_since = None;
                next.stepped_down = true;
                if next.closed_at.is_some() {
                    // The close goes on: the node is deleted, the session ends.
                    next.successor_acting = true;
                }
            }
            LeadershipAction::Close => {
                next.closed_at = Some(next.now);
                if self.variant == LeadershipVariant::CloseEndsSessionFirst {
                    next.successor_acting = true;
                }
            }
            LeadershipAction::Reclaim => next.leader_acting = true,
            LeadershipAction::Tick => {
                next.now += 1;
                next.beat_sent = false;
                self.deliver(&mut next);
                // The server expires the session a timeout after it last heard of it, at the
                // earliest; the next in line takes over at once.
                if !next.expired && next.now >= next.server_heard + self.ticks(self.session_timeout) {
                    next.expired = true;
                    next.successor_acting = true;
                }
            }
        }
        if next.leader_acting && next.stop_due_since.is_none() && self.stop_due(&next) {
            next.stop_due_since = Some(next.now);
        }
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        let mut properties = vec![
            Property::always("no tick with two leaders", |_, state: &LeadershipState| {
                !(state.leader_acting && state.successor_acting)
            }),
            Property::sometimes("the next in line takes over", |_, state: &LeadershipState| {
                state.successor_acting
            }),
            Property::sometimes(
                "a leader still heard leads past one session timeout",
                |model: &Self, state: &LeadershipState| {
                    state.leader_acting && state.now > model.ticks(model.session_timeout) + 2
                },
            ),
        ];
        if self.reclaim {
            properties.push(Property::sometimes(
                "a latch that stepped down leads again",
                |_, state: &LeadershipState| state.stepped_down && state.leader_acting,
            ));
        }
        properties
    }
}

impl LeadershipModel {
    /// Answers due by now arrive: the clock moves to their requests' send time (or, in the bad
    /// variant, to their arrival).
    fn deliver(&self, state: &mut LeadershipState) {
        let now = state.now;
        let (arrived, waiting): (Vec<_>, Vec<_>) = state.answers.iter().partition(|(_, due)| *due <= now);
        state.answers = waiting;
        for (sent, _) in arrived {
            let heard = match self.variant {
                LeadershipVariant::CountFromAnswer => now,
                _ => sent,
            };
            state.heard_by = state.heard_by.max(heard);
        }
    }
}
