//! The lock model's state: the server's nodes and sessions, each client's acquire, the cleanup
//! worker's queue, and the ghost facts the invariants read. A leaf: it imports nothing from its
//! siblings.

use zk_recipes_framework::decisions::SequenceFloor;
use zk_recipes_lock_internals::Decision;

/// One client's one acquire (a call): also the client's index.
pub type Call = u8;

/// A session: its slot (a process's framework) and which of the slot's sessions it is.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct SessionRef {
    /// The process whose framework owns the session.
    pub slot: u8,
    /// 0 for the slot's first session, 1 after one expiry, ...
    pub incarnation: u8,
}

impl SessionRef {
    /// The session id ZooKeeper would give it (any number unique per session will do).
    pub fn id(self) -> i64 {
        i64::from(self.slot) * 100 + i64::from(self.incarnation) + 1
    }
}

/// A znode under the lock's parent.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Node {
    /// Its name in the parent.
    pub name: String,
    /// Its sequence, as the parent's counter gave it.
    pub sequence: i32,
    /// The session that owns it (all lock nodes are ephemeral).
    pub owner: SessionRef,
    /// Its creation's zxid: the fencing token of a hold on it.
    pub czxid: u32,
    /// Ghost: the call whose create made it.
    pub call: Call,
    /// Whether someone asked its holder to give it up (Curator's revocation data).
    pub revoke_requested: bool,
}

/// What the client's connection reports for a session.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub enum Connection {
    /// Requests are answered.
    Connected,
    /// The connection dropped; the session may still live on the server.
    Suspended,
    /// The framework declared the session lost (under `SessionOnly`, by its expiry clock, before
    /// the server may expire it; under `Standard`, a session timeout after `Suspended`).
    LostDeclared,
}

/// The turn of a session's creates with a session marker under the parent, and its floor.
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
pub struct Lane {
    /// Who holds the turn: a client's call, or the cleanup of a call that gave up.
    pub turn: Option<Call>,
    /// The highest sequence the lane's creates made.
    pub floor: SequenceFloor,
}

/// A slot's current session.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Session {
    /// Which of the slot's sessions this is.
    pub incarnation: u8,
    /// Whether the server still has it (not yet expired).
    pub alive: bool,
    /// What the client sees of it.
    pub connection: Connection,
    /// Its lane under the lock's parent (session markers only).
    pub lane: Lane,
}

/// A node an acquire created and knows it owns.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Owned {
    /// The node's name.
    pub name: String,
    /// The session it was created on.
    pub session: SessionRef,
    /// Its czxid, from the create's reply: the fencing token of a hold on it.
    pub czxid: u32,
}

/// Where one acquire is.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum Phase {
    /// Not yet started, or waiting for its lane's turn.
    Idle,
    /// About to try the protected create: look first for a node of an earlier try if
    /// `search_first`, else create.
    Creating {
        /// Whether an earlier try of this prefix on this session may have made a node.
        search_first: bool,
    },
    /// A create was sent and its reply lost with the connection: it may or may not have made a
    /// node.
    CreateUnknown,
    /// Our node exists; list the contenders and decide.
    Queued {
        /// Our node.
        node: Owned,
    },
    /// Waiting for the one node the decision named to go.
    Watching {
        /// Our node.
        node: Owned,
        /// The decision that named the watched node.
        decision: Decision,
        /// The watched node's name.
        watched: String,
    },
    /// Holding a lease: `token` is our node's czxid; `lost` once the hold's `lost()` resolved.
    Holding {
        /// Our node.
        node: Owned,
        /// The hold's fencing token.
        token: u32,
        /// Whether the hold's `lost()` resolved.
        lost: bool,
    },
    /// The acquire is over: released, or given up (cancelled, timed out, failed).
    Done {
        /// Whether it ended without being released (cancelled, timed out, failed).
        gave_up: bool,
    },
}

/// What a protected create knows across its tries (the library's `ProtectedAttempt`).
#[derive(Clone, Debug, Default, Hash, PartialEq, Eq)]
pub struct Attempt {
    /// The marker of the current try and the session it belongs to.
    pub prefix: Option<(String, SessionRef)>,
    /// Whether a create with that prefix may have reached the server.
    pub maybe_created: bool,
    /// The session whose lane turn this attempt holds (session markers only).
    pub lane: Option<SessionRef>,
    /// How many prefixes this attempt has drawn (each try on a new session draws one).
    pub prefixes_drawn: u8,
}

/// One client: one acquire on one slot's framework.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Client {
    /// The slot whose framework it uses.
    pub slot: u8,
    /// Where its acquire is.
    pub phase: Phase,
    /// Its protected create's state.
    pub attempt: Attempt,
}

/// A task handed to a slot's cleanup worker.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub enum CleanupTask {
    /// Delete the node of this name if its czxid is the one given (a dropped `OwnedNode`, a
    /// release retried), on whatever session is current.
    Node {
        /// The node's name.
        name: String,
        /// Its czxid.
        czxid: u32,
    },
    /// Delete every child whose name starts with the prefix (a given-up create with a per-call
    /// marker).
    Protected {
        /// The create's marker.
        prefix: String,
    },
    /// Find the given-up create's node above the lane's floor and delete it, holding the lane.
    Undecided {
        /// The session's marker.
        prefix: String,
        /// The session the create was sent on.
        session: SessionRef,
    },
}

/// A task and who handed it over.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct Handed {
    /// The slot whose worker runs it.
    pub slot: u8,
    /// Ghost: the call it cleans up after.
    pub call: Call,
    /// What to do.
    pub task: CleanupTask,
}

/// How many faults of each kind are still to come.
#[derive(Clone, Copy, Debug, Default, Hash, PartialEq, Eq)]
pub struct Faults {
    /// Replies lost with the connection (create or delete).
    pub lost_replies: u8,
    /// Acquires cancelled (dropped futures, timeouts) or guards dropped.
    pub cancels: u8,
    /// Connections suspended.
    pub suspensions: u8,
    /// Sessions expired by the server.
    pub expiries: u8,
    /// Container parents reaped while empty.
    pub reaps: u8,
    /// Revocations requested.
    pub revocations: u8,
}

/// The whole model's state.
#[derive(Clone, Debug, Hash, PartialEq, Eq)]
pub struct LockState {
    /// The lock parent's children, in creation order.
    pub nodes: Vec<Node>,
    /// Whether the parent (a container) exists.
    pub parent_exists: bool,
    /// Whether it had a child since it was made (the server reaps only such containers).
    pub parent_had_child: bool,
    /// The parent's czxid.
    pub parent_czxid: u32,
    /// The parent's pzxid: the zxid of its last child created or deleted.
    pub parent_pzxid: u32,
    /// The parent's sequence counter.
    pub next_sequence: i32,
    /// The server's transaction counter.
    pub zxid: u32,
    /// Each slot's current session.
    pub sessions: Vec<Session>,
    /// Each client's acquire.
    pub clients: Vec<Client>,
    /// The cleanup workers' queues.
    pub cleanup: Vec<Handed>,
    /// Faults still to come.
    pub faults: Faults,
    /// Ghost: the highest fencing token a holder was given so far.
    pub highest_token: Option<u32>,
    /// Ghost: a holder was given a token not above an earlier holder's.
    pub token_went_back: bool,
    /// Ghost: a delete removed a node another call created.
    pub foreign_delete: bool,
    /// Ghost: a create's search took a node another call created for its own.
    pub foreign_adoption: bool,
}
