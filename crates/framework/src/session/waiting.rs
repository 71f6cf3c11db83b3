//! Waiting for a session: the one a call may run on, or the end of one.

use std::future::Future;
use std::time::Duration;

use super::deadline::Deadline;
use super::error::{Error, Result};
use super::handle::Framework;
use super::live_session::Session;
use super::snapshot::Snapshot;
use super::state::ConnectionState;

/// Which sessions a call's tries may run on.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Sessions {
    /// The current session at each try; a lost session ends the call ([`Framework::retry`]).
    Current,
    /// The current session; after a lost session the call starts over on the next one
    /// ([`Framework::retry_across_sessions`]).
    StartingOver,
    /// Only the session of this generation: once it is lost the call ends with
    /// [`Error::SessionLost`], also while it waits for a connection
    /// ([`Framework::retry_on_session`]).
    Only(u64),
}

impl Sessions {
    /// What the call's first try waits for.
    pub(super) fn first_wanted(self) -> Wanted {
        match self {
            Sessions::Current | Sessions::StartingOver => Wanted::Any,
            Sessions::Only(generation) => Wanted::Only(generation),
        }
    }
}

/// The session one try waits for.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Wanted {
    /// Whichever is connected.
    Any,
    /// A session later than this generation (starting over after it was lost).
    After(u64),
    /// This generation's session, connected; none other.
    Only(u64),
}

impl Wanted {
    /// Whether `snapshot`'s session is connected and may run the try.
    pub(super) fn is_usable(self, snapshot: &Snapshot) -> bool {
        let generation_fits = match self {
            Wanted::Any => true,
            Wanted::After(generation) => snapshot.generation > generation,
            Wanted::Only(generation) => snapshot.generation == generation,
        };
        generation_fits && snapshot.state.is_some_and(ConnectionState::is_connected)
    }

    /// Whether the one session wanted is lost for good (declared lost, or replaced).
    fn is_gone(self, snapshot: &Snapshot) -> bool {
        match self {
            Wanted::Any | Wanted::After(_) => false,
            Wanted::Only(generation) => {
                snapshot.generation > generation
                    || (snapshot.generation == generation && snapshot.state == Some(ConnectionState::Lost))
            }
        }
    }
}

impl Framework {
    /// Waits until a session is connected, at most `timeout`.
    ///
    /// # Errors
    /// [`Error::Timeout`] if none is by then, naming why the last attempt to open one failed (its
    /// source is that [`ConnectionFailure`](crate::ConnectionFailure)); [`Error::Closed`] if the framework is closed.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits for a session. A cancelled call sends nothing and holds nothing.
    pub async fn block_until_connected(&self, timeout: Duration) -> Result<()> {
        self.session(Deadline::after(timeout)).await.map(drop)
    }

    /// A connected session, waiting for one until `deadline`.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits for a session. A cancelled call sends nothing and holds nothing.
    pub async fn session(&self, deadline: impl Into<Deadline>) -> Result<Session> {
        let deadline = deadline.into();
        self.wait_for_session(Wanted::Any, deadline).await
    }

    /// The session of `generation` (one a node of ours was created on, see
    /// [`OwnedNode::generation`](crate::OwnedNode::generation)), connected, waiting for it to
    /// reconnect until `deadline`: for a call that builds on something that session owns. Never
    /// a later session.
    ///
    /// # Errors
    /// [`Error::SessionLost`] once that session is lost (at once if it already is, and the moment
    /// the framework declares it lost while the server is out of reach); [`Error::Timeout`] at
    /// the deadline; [`Error::Closed`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits for that session. A cancelled call sends nothing and holds
    /// nothing.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework, node: zk_recipes_framework::OwnedNode) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::{Deadline, Error};
    ///
    /// match framework.session_of(node.generation(), Deadline::after(std::time::Duration::from_secs(5))).await {
    ///     Ok(session) => println!("{} is still ours, on session {}", node.path(), session.id()),
    ///     Err(Error::SessionLost) => println!("{} went with its session", node.path()),
    ///     Err(err) => return Err(err),
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn session_of(&self, generation: u64, deadline: impl Into<Deadline>) -> Result<Session> {
        self.wait_for_session(Wanted::Only(generation), deadline.into()).await
    }

    /// Resolves once the session of `generation` is over: `Ok` when it was lost or a later session
    /// replaced it, [`Error::Closed`] when the framework was closed. At once if it already is. The
    /// returned future borrows nothing, and is small: made for many waiting calls at once.
    ///
    /// # Cancel safety
    /// Cancel safe: it only watches the connection state. A cancelled wait sends nothing and holds
    /// nothing.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use zk_recipes_framework::Deadline;
    /// let session = framework.session(Deadline::never()).await?;
    /// framework.session_lost(session.generation()).await?;
    /// println!("session {} is gone: its ephemeral nodes are not ours any more", session.id());
    /// # Ok(()) }
    /// ```
    pub fn session_lost(&self, generation: u64) -> impl Future<Output = Result<()>> + Send + 'static {
        let mut snapshot = self.core().snapshot.subscribe();
        // A loop over `changed` rather than `wait_for`, whose future is twice the size.
        async move {
            loop {
                {
                    let now = snapshot.borrow_and_update();
                    if now.closed {
                        return Err(Error::Closed);
                    }
                    let lost = now.generation > generation
                        || (now.generation == generation && now.state == Some(ConnectionState::Lost));
                    if lost {
                        return Ok(());
                    }
                }
                if snapshot.changed().await.is_err() {
                    return Err(Error::Closed);
                }
            }
        }
    }

    /// A connected session as `wanted` says, waiting for one until `deadline`.
    ///
    /// # Errors
    /// [`Error::SessionLost`] once the one session wanted ([`Wanted::Only`]) is lost.
    pub(super) async fn wait_for_session(&self, wanted: Wanted, deadline: Deadline) -> Result<Session> {
        let mut snapshot = self.core().snapshot.subscribe();
        let wait = snapshot.wait_for(|snapshot| {
            snapshot.closed
                || snapshot.auth_failed
                || (wanted.is_usable(snapshot) && snapshot.session.is_some())
                || wanted.is_gone(snapshot)
        });
        let ready = match deadline.instant() {
            None => wait.await,
            Some(at) => match tokio::time::timeout_at(at, wait).await {
                Ok(ready) => ready,
                Err(_) => {
                    let last_connection_failure = self.core().last_connection_failure.lock().clone();
                    return Err(Error::Timeout { waited: deadline.elapsed(), last_connection_failure });
                }
            },
        };
        let ready = ready.map_err(|_| Error::Closed)?;
        if ready.closed {
            return Err(Error::Closed);
        }
        if wanted.is_gone(&ready) {
            return Err(Error::SessionLost);
        }
        let connected = wanted.is_usable(&ready) && ready.session.is_some();
        if ready.auth_failed && !connected {
            return Err(Error::AuthFailed { connect_string: self.core().config.connect_string.clone() });
        }
        ready.session.clone().ok_or(Error::Closed)
    }
}
