//! Connection states in Curator's vocabulary, and the stream that carries every transition.

use std::time::Duration;

use tokio::time::Instant;
use zookeeper_client::SessionId;

/// The state of the framework's connection, with Curator's meaning.
///
/// ```
/// use zk_recipes_framework::{ConnectionState, ErrorPolicy};
///
/// assert!(ConnectionState::Reconnected.is_connected());
/// assert!(ErrorPolicy::Standard.is_error_state(ConnectionState::Suspended));
/// assert!(!ErrorPolicy::SessionOnly.is_error_state(ConnectionState::Suspended));
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConnectionState {
    /// The very first session was established (sent once in the framework's life).
    Connected,
    /// The connection broke; the session may still be alive on the server.
    Suspended,
    /// Connected again after [`Suspended`](Self::Suspended) or [`Lost`](Self::Lost). After `Lost`
    /// this is a new session: new session id, bumped generation.
    Reconnected,
    /// The session is gone: the server expired it, or may have. Under [`ErrorPolicy::Standard`]
    /// that is a connection suspended for the negotiated session timeout (Curator's rule); under
    /// [`ErrorPolicy::SessionOnly`], where holds are trusted until `Lost`, a tenth of the session
    /// timeout before the server may expire it (counted from the send time of the latest request
    /// it answered, asked every tenth of the timeout), suspended or not. Its ephemeral nodes are
    /// gone (or will be), and that session never comes back; the framework opens a new one.
    Lost,
    /// Connected to a read-only server (only when read-only mode is allowed).
    ReadOnly,
}

impl ConnectionState {
    /// The state's name as a metric label: `connected`, `suspended`, `reconnected`, `lost`,
    /// `read_only`.
    pub fn metric_name(self) -> &'static str {
        match self {
            Self::Connected => "connected",
            Self::Suspended => "suspended",
            Self::Reconnected => "reconnected",
            Self::Lost => "lost",
            Self::ReadOnly => "read_only",
        }
    }

    /// Whether requests can be served in this state.
    pub fn is_connected(self) -> bool {
        matches!(self, Self::Connected | Self::Reconnected | Self::ReadOnly)
    }
}

/// Which connection states recipes treat as an error: a held lock, a leadership, a taken queue item
/// can no longer be trusted in an error state (Curator's `ConnectionStateErrorPolicy`).
///
/// ```
/// use zk_recipes_framework::{ConnectionState, ErrorPolicy, Framework};
///
/// assert_eq!(ErrorPolicy::default(), ErrorPolicy::Standard);
/// assert!(ErrorPolicy::Standard.is_error_state(ConnectionState::Suspended));
/// assert!(!ErrorPolicy::SessionOnly.is_error_state(ConnectionState::Suspended));
/// assert!(ErrorPolicy::SessionOnly.is_error_state(ConnectionState::Lost));
///
/// // Locks held through a short suspension, as Curator's `SessionConnectionStateErrorPolicy`.
/// let builder = Framework::builder("127.0.0.1:2181").error_policy(ErrorPolicy::SessionOnly);
/// # let _ = builder;
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorPolicy {
    /// `Suspended` and `Lost` are errors (Curator's `StandardConnectionStateErrorPolicy`). The safe
    /// default: while suspended, the session may expire at any moment.
    #[default]
    Standard,
    /// Only `Lost` is an error (Curator's `SessionConnectionStateErrorPolicy`). The framework then
    /// declares the session `Lost` a tenth of the timeout before the server may expire it, by its
    /// expiry clock (which runs under either policy: an `exists` of the root every tenth of the
    /// session timeout; see [`earliest_session_expiry`]): counted from the send time of the
    /// latest answered request, so never after the server can expire it, however slowly it
    /// answers (a member cut off from its quorum answers for a while after the quorum may have
    /// expired it; no client can see that: see `docs/framework.md`). Curator counts a whole
    /// timeout from `Suspended`, which its client reports two thirds of a timeout into the
    /// silence.
    ///
    /// [`earliest_session_expiry`]: crate::Framework::earliest_session_expiry
    SessionOnly,
}

impl ErrorPolicy {
    /// Whether recipes must treat `state` as an error.
    pub fn is_error_state(self, state: ConnectionState) -> bool {
        match self {
            Self::Standard => matches!(state, ConnectionState::Suspended | ConnectionState::Lost),
            Self::SessionOnly => state == ConnectionState::Lost,
        }
    }
}

/// One transition of the connection.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) {
/// use zk_recipes_framework::{ConnectionState, ConnectionUpdate};
///
/// let mut events = framework.connection_events();
/// while let Some(update) = events.next().await {
///     if let ConnectionUpdate::Changed(event) = update {
///         if event.state == ConnectionState::Lost {
///             println!("session {:#x} (generation {}) is gone", event.session_id.0, event.generation);
///         }
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionEvent {
    /// The new state.
    pub state: ConnectionState,
    /// The session this event is about (for `Lost`, the session that was lost).
    pub session_id: SessionId,
    /// Counts sessions: 1 for the first, bumped for each new session after a `Lost`.
    pub generation: u64,
    /// When the framework saw the transition. A subscriber that reads the event later still
    /// measures from here: for example how long the connection has been suspended.
    pub at: Instant,
}

/// What a subscriber receives: a transition, or word that it fell behind and missed some.
///
/// ```
/// use zk_recipes_framework::{ConnectionState, ConnectionUpdate};
///
/// // A subscriber that fell behind acts as if the session was lost.
/// let update = ConnectionUpdate::Lagged { missed: 3 };
/// assert_eq!(update.state(), ConnectionState::Lost);
/// assert_eq!(update.at(), None);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectionUpdate {
    /// The next transition, in order.
    Changed(ConnectionEvent),
    /// The subscriber fell behind and `missed` transitions were dropped. Treat it as
    /// [`ConnectionState::Lost`]: anything may have happened meanwhile.
    Lagged {
        /// How many transitions were dropped.
        missed: u64,
    },
}

impl ConnectionUpdate {
    /// The state to act on: the transition's, or `Lost` for a lag.
    pub fn state(&self) -> ConnectionState {
        match self {
            Self::Changed(event) => event.state,
            Self::Lagged { .. } => ConnectionState::Lost,
        }
    }

    /// When the framework saw the transition; `None` for a lag (the missed transitions' times are
    /// unknown).
    pub fn at(&self) -> Option<Instant> {
        match self {
            Self::Changed(event) => Some(event.at),
            Self::Lagged { .. } => None,
        }
    }
}

/// The connection as it is now ([`crate::Framework::current`]).
///
/// ```no_run
/// # fn demo(framework: zk_recipes_framework::Framework) {
/// let now = framework.current();
/// if now.state.is_some_and(|state| state.is_connected()) {
///     println!("generation {} with a {:?} session timeout", now.generation, now.session_timeout);
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionSnapshot {
    /// The latest state; `None` before the first session was established.
    pub state: Option<ConnectionState>,
    /// When the framework saw the latest transition (the one into `state`).
    pub since: Option<Instant>,
    /// The current session's id, if there is a session.
    pub session_id: Option<SessionId>,
    /// The current session's generation (0 before the first session).
    pub generation: u64,
    /// The negotiated session timeout of the current session.
    pub session_timeout: Option<Duration>,
    /// Whether the framework was closed.
    pub closed: bool,
}
