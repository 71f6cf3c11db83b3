//! The connection as it is now, shared through a `watch` by the supervisor with every waiter.

use tokio::time::Instant;

use super::live_session::Session;
use super::state::ConnectionState;

/// The state shared through a `watch`: what is current, for waiters and snapshots.
#[derive(Debug, Clone, Default)]
pub(crate) struct Snapshot {
    pub(crate) state: Option<ConnectionState>,
    pub(crate) since: Option<Instant>,
    pub(crate) session: Option<Session>,
    pub(crate) generation: u64,
    pub(crate) closed: bool,
    /// [`Framework::close`] has begun: holds and leaderships end, the session still lives.
    pub(crate) closing: bool,
    /// The last attempt to open a session was refused for its credentials (cleared by the next
    /// session): calls that wait for a session fail at once with [`Error::AuthFailed`].
    pub(crate) auth_failed: bool,
}
