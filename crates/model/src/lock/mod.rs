//! The lock driver's protocol: every lock's acquire (`LockInternals`), its protected create and the
//! cleanup worker, for each layout and any `max_leases`, with lost replies, cancellation at every
//! await point, suspended and lost connections, session expiry, container parents reaped and made
//! again, and revocation. See `docs/model.md` for what it covers and assumes.
//!
//! Decisions come from the library: the layout's `LockDriver` sorts the contenders and decides
//! (`sort_children`, `gets_the_lock`), `Decision::next_step` and `Decision::after_watch` say what
//! the acquire loop does next, and `undecided_node` with `SequenceFloor` picks a session-marked
//! create's node after a lost reply.

mod actions;
mod naming;
mod state;

use stateright::{Model, Property};

pub use naming::Layout;
pub use state::*;

/// Which error policy the framework runs under.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Policy {
    /// Curator's: a hold is unsafe from `Suspended` on.
    Standard,
    /// A hold is trusted until `Lost`, which the expiry clock declares before the server may
    /// expire the session.
    SessionOnly,
}

/// A known-bad variant the checker must catch (a negative control), or the library as it is.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Variant {
    /// The library's protocol.
    Library,
    /// The old cleanup of a given-up session-marked create: every node of the session with the
    /// marker, not only the one above the lane's floor.
    SessionPrefixCleanup,
    /// `SessionOnly` without the expiry clock: `Lost` only once the server has expired the
    /// session, so the server may expire it while the holder still trusts its hold.
    NoExpiryClock,
    /// A waiter that takes its watched node's going as a hold whatever the node was.
    HoldOnAnyDeletion,
    /// The lane's floor as it was before it knew the parent's life: counted under a parent that
    /// was reaped, it hid a lost create's node under the parent made again.
    FloorIgnoresParent,
    /// The cleanup of a dropped node by name, as it was before it checked the czxid: a late one
    /// deleted a newer node of the same name.
    CleanupByName,
    /// A session-marked create's retry that takes any node of its session with the marker, as
    /// the search did before the lanes: it took a held node of the same session for its own.
    AdoptByPrefix,
}

/// A bounded configuration of the lock model.
#[derive(Clone, Debug)]
pub struct LockModel {
    /// Whose node layout the lock uses.
    pub layout: Layout,
    /// How many may hold at once (1: a mutex).
    pub max_leases: u32,
    /// The slot of each client: clients on one slot share a framework and its session.
    pub client_slots: Vec<u8>,
    /// The error policy.
    pub policy: Policy,
    /// The faults the checker may inject, in all.
    pub faults: Faults,
    /// The parent's counter at the start (near `i32::MAX` to cross the wrap).
    pub first_sequence: i32,
    /// The protocol checked.
    pub variant: Variant,
}

impl LockModel {
    /// A configuration with `clients` on slots of their own, no faults.
    pub fn new(layout: Layout, max_leases: u32, clients: u8) -> Self {
        Self {
            layout,
            max_leases,
            client_slots: (0..clients).collect(),
            policy: Policy::Standard,
            faults: Faults::default(),
            first_sequence: 0,
            variant: Variant::Library,
        }
    }

    fn slots(&self) -> u8 {
        self.client_slots.iter().copied().max().map_or(0, |last| last + 1)
    }
}

/// A step of the model.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum Action {
    /// A client takes its lane's turn (session markers) and starts a try of its create.
    StartTry(Call),
    /// A client's try: look for an earlier try's node if it must, else send the create.
    Create(Call),
    /// As `Create`, but the reply is lost with the connection; `applied` says whether the server
    /// made the node.
    CreateReplyLost {
        /// The client.
        call: Call,
        /// Whether the server made the node.
        applied: bool,
    },
    /// A client whose create's outcome is unknown tries again once its connection is back.
    Retry(Call),
    /// A client lists the contenders and decides.
    List(Call),
    /// A waiter's watched node went (or its own node went, or was asked to go).
    Wake(Call),
    /// A holder releases its lease.
    Release(Call),
    /// As `Release`, but the delete's reply is lost with the connection.
    ReleaseReplyLost(Call),
    /// A client's acquire is cancelled (or times out), or a holder drops its guard.
    Cancel(Call),
    /// A slot's cleanup worker runs one task.
    Clean(usize),
    /// A slot's connection drops.
    Suspend(u8),
    /// A slot's connection comes back to the same session.
    Reconnect(u8),
    /// A slot's framework declares its session lost.
    DeclareLost(u8),
    /// The server expires a slot's session: its ephemeral nodes go.
    Expire(u8),
    /// A slot's framework makes a new session after the last one was lost.
    NewSession(u8),
    /// The server reaps the empty container parent.
    Reap,
    /// Someone asks the holder of a client's node to give it up.
    Revoke(Call),
}

impl Model for LockModel {
    type State = LockState;
    type Action = Action;

    fn init_states(&self) -> Vec<LockState> {
        let session =
            Session { incarnation: 0, alive: true, connection: Connection::Connected, lane: Lane::default() };
        vec![LockState {
            nodes: Vec::new(),
            parent_exists: false,
            parent_had_child: false,
            parent_czxid: 0,
            parent_pzxid: 0,
            next_sequence: self.first_sequence,
            zxid: 1,
            sessions: vec![session; usize::from(self.slots())],
            clients: self
                .client_slots
                .iter()
                .map(|&slot| Client { slot, phase: Phase::Idle, attempt: Attempt::default() })
                .collect(),
            cleanup: Vec::new(),
            faults: self.faults,
            highest_token: None,
            token_went_back: false,
            foreign_delete: false,
            foreign_adoption: false,
        }]
    }

    fn actions(&self, state: &LockState, actions: &mut Vec<Action>) {
        self.enabled(state, actions);
    }

    fn next_state(&self, state: &LockState, action: Action) -> Option<LockState> {
        let mut next = state.clone();
        self.apply(&mut next, action);
        Some(next)
    }

    fn properties(&self) -> Vec<Property<Self>> {
        vec![
            Property::always("no more believing holders than max_leases", |model: &Self, state| {
                model.believing_holders(state) <= model.max_leases as usize
            }),
            Property::always("no call deletes a node it did not create", |_, state: &LockState| {
                !state.foreign_delete
            }),
            Property::always("no call adopts a node it did not create", |_, state: &LockState| {
                !state.foreign_adoption
            }),
            Property::always("fencing tokens increase from holder to holder", |_, state: &LockState| {
                !state.token_went_back
            }),
            Property::always("at quiescence every acquire ended and left no node", |model: &Self, state| {
                let mut actions = Vec::new();
                model.enabled(state, &mut actions);
                !actions.is_empty() || model.all_ended_cleanly(state)
            }),
        ]
    }
}

impl LockModel {
    /// Holders whose `lost()` has not resolved.
    pub fn believing_holders(&self, state: &LockState) -> usize {
        state
            .clients
            .iter()
            .filter(|client| matches!(client.phase, Phase::Holding { lost: false, .. }))
            .count()
    }

    /// Every acquire is over, nothing is left to clean, and no node of a live session is left.
    pub fn all_ended_cleanly(&self, state: &LockState) -> bool {
        state.clients.iter().all(|client| matches!(client.phase, Phase::Done { .. }))
            && state.cleanup.is_empty()
            && state.nodes.is_empty()
    }
}
