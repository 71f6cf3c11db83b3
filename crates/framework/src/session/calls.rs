//! Running a call on a session, with retries: [`Framework::retry`] and its variants.

use std::future::Future;

use tokio::time::Instant;
use tracing::debug;

use super::deadline::Deadline;
use super::error::{Error, Result};
use super::handle::Framework;
use super::live_session::Session;
use super::waiting::{Sessions, Wanted};

/// Whether a call's operation may itself make retrying calls of the framework, which then run one
/// try each, within the outer call's budget and deadline (see [`Framework::retry`]).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Nesting {
    /// It may (an operation the caller wrote): its tries run in the call's retry scope.
    Possible,
    /// It never does (the framework's own operations, which only send requests): no scope is
    /// set, which saves a task-local swap on every poll of the call.
    Never,
}

tokio::task_local! {
    /// Set while a top-level [`Framework::retry`] runs: nested calls share its budget and deadline.
    static RETRY_SCOPE: Option<Instant>;
}

impl Framework {
    /// Runs `operation` on a live session and retries it, per the retry policy, while it fails with
    /// a retryable error (the connection was lost, so the outcome is unknown). A lost session is not
    /// retried: it is returned as [`Error::SessionLost`].
    ///
    /// The whole call has one budget of retries and one deadline, which also bound waiting for a
    /// connection: retry calls nested inside `operation` run their operation once and leave the
    /// retrying to this one (they never multiply retries). Without a caller's deadline, each try
    /// waits at most the connection timeout for a connection before it counts as a connection loss.
    ///
    /// # Cancel safety
    /// Dropping the future abandons the operation where it stands, as dropping `operation`'s
    /// future would; what it already sent is executed by the server.
    pub fn retry<'a, T, F, Fut>(
        &'a self,
        deadline: impl Into<Deadline>,
        operation: F,
    ) -> impl Future<Output = Result<T>> + 'a
    where
        F: FnMut(Session) -> Fut + 'a,
        Fut: Future<Output = Result<T>> + 'a,
        T: 'a,
    {
        // Not an `async fn`: see the crate docs on boxed futures.
        self.retry_loop(deadline.into(), Sessions::Current, Nesting::Possible, operation)
    }

    /// As [`retry`](Self::retry), but when the session is lost the operation starts over on the next
    /// session (counted against the same budget). Only for operations that are safe to repeat from
    /// scratch on a new session.
    ///
    /// # Cancel safety
    /// As [`retry`](Self::retry).
    pub fn retry_across_sessions<'a, T, F, Fut>(
        &'a self,
        deadline: impl Into<Deadline>,
        operation: F,
    ) -> impl Future<Output = Result<T>> + 'a
    where
        F: FnMut(Session) -> Fut + 'a,
        Fut: Future<Output = Result<T>> + 'a,
        T: 'a,
    {
        self.retry_loop(deadline.into(), Sessions::StartingOver, Nesting::Possible, operation)
    }

    /// As [`retry`](Self::retry), but only on the session of `generation` (the session that owns
    /// some ephemeral node of ours): once that session is gone the call fails with
    /// [`Error::SessionLost`] instead of running on the next session, where the node no longer
    /// exists. A call waiting for its session to reconnect (after a connection loss) ends so the
    /// moment the framework declares that session lost, even while the server is out of reach.
    ///
    /// # Cancel safety
    /// As [`retry`](Self::retry).
    pub fn retry_on_session<'a, T, F, Fut>(
        &'a self,
        generation: u64,
        deadline: impl Into<Deadline>,
        operation: F,
    ) -> impl Future<Output = Result<T>> + 'a
    where
        F: FnMut(Session) -> Fut + 'a,
        Fut: Future<Output = Result<T>> + 'a,
        T: 'a,
    {
        self.retry_loop(deadline.into(), Sessions::Only(generation), Nesting::Possible, operation)
    }

    pub(crate) async fn retry_loop<T, F, Fut>(
        &self,
        deadline: Deadline,
        sessions: Sessions,
        nesting: Nesting,
        mut operation: F,
    ) -> Result<T>
    where
        F: FnMut(Session) -> Fut,
        Fut: Future<Output = Result<T>>,
    {
        if let Ok(outer) = RETRY_SCOPE.try_with(|outer| *outer) {
            // Nested: one try, within the tighter deadline; the top-level call does the retrying.
            let deadline = deadline.min(outer);
            let wanted = sessions.first_wanted();
            let session = match self.ready_session(wanted) {
                Some(session) => session,
                None => Box::pin(self.session_for_try(wanted, deadline)).await?,
            };
            let running = deadline.run(Box::pin(operation(session)));
            return self.finish_error(running.await);
        }
        // Borrowed, not cloned: a clone would touch the policy's shared count on every call.
        let policy = self.retry_policy();
        let tries = async move {
            let mut retry_count = 0u32;
            let mut wanted = sessions.first_wanted();
            loop {
                // Each step in a scope of its own, so the loop's state keeps only what it
                // still needs across each await: every call of the framework carries it.
                let (err, generation) = 'attempt: {
                    let session = match self.ready_session(wanted) {
                        Some(session) => session,
                        // Boxed (crate docs): rare and large.
                        None => match Box::pin(self.session_for_try(wanted, deadline)).await {
                            Ok(session) => session,
                            Err(err) => break 'attempt (err, 0),
                        },
                    };
                    // The session is moved into the operation in a block of its own, so the
                    // loop's state does not keep a copy of it across the await.
                    let (generation, running) = {
                        let session = session;
                        let generation = session.generation();
                        // Boxed (crate docs): the operation's future is not moved again
                        // by every wrapper around this loop.
                        (generation, deadline.run(Box::pin(operation(session))))
                    };
                    match running.await {
                        Ok(value) => return Ok(value),
                        Err(err) => (err, generation),
                    }
                };
                let retry_on_new_session =
                    matches!(sessions, Sessions::StartingOver) && err.is_session_lost() && !self.is_closed();
                if !(err.is_retryable() || retry_on_new_session) {
                    return self.finish_error(Err(err));
                }
                let Some(sleep) = policy.allow_retry(retry_count, deadline.elapsed()) else {
                    debug!(retry_count, error = %err, "retry budget spent");
                    return self.finish_error(Err(err));
                };
                debug!(retry_count, sleep = %super::duration::ReadableDuration(sleep), error = %err, "retrying");
                retry_count += 1;
                if retry_on_new_session {
                    wanted = Wanted::After(generation);
                }
                // Boxed (crate docs): rare, and a timer is large.
                Box::pin(deadline.sleep(sleep)).await?;
            }
        };
        match nesting {
            Nesting::Possible => RETRY_SCOPE.scope(deadline.instant(), tries).await,
            Nesting::Never => tries.await,
        }
    }

    /// The current session if a try may run on it right now (as [`session_for_try`] would return
    /// at once), without waiting.
    ///
    /// [`session_for_try`]: Self::session_for_try
    fn ready_session(&self, wanted: Wanted) -> Option<Session> {
        let snapshot = self.core().snapshot.borrow();
        let ready = !snapshot.closed && wanted.is_usable(&snapshot);
        ready.then(|| snapshot.session.clone()).flatten()
    }

    /// A session for one try: waits at most the connection timeout (counted as a retryable
    /// connection loss) or the caller's deadline (a timeout).
    async fn session_for_try(&self, wanted: Wanted, deadline: Deadline) -> Result<Session> {
        let connection_timeout = self.core().config.connection_timeout;
        let for_try = deadline.min(Some(Instant::now() + connection_timeout));
        match self.wait_for_session(wanted, for_try).await {
            Err(Error::Timeout { .. }) if !deadline.is_expired() => {
                Err(Error::ZooKeeper(zookeeper_client::Error::ConnectionLoss))
            }
            other => other,
        }
    }

    /// Maps what a dead session's client says into the framework's words.
    fn finish_error<T>(&self, result: Result<T>) -> Result<T> {
        match result {
            Err(err) if err.is_session_lost() => {
                Err(if self.is_closed() { Error::Closed } else { Error::SessionLost })
            }
            Err(err) if err.is_read_only() => Err(Error::ReadOnly),
            other => other,
        }
    }
}
