//! One deadline for a whole top-level call.

use std::time::Duration;

use tokio::time::Instant;

use super::error::{Error, Result};

/// When a call must give up: a point in time, or never.
///
/// Every blocking call of the framework and the recipes takes one, and it covers the whole call:
/// waiting for a connection, every retry and every wait on the server.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
///
/// let deadline = Deadline::after(Duration::from_secs(5));
/// assert!(!deadline.is_expired());
/// assert!(Deadline::never().remaining().is_none());
/// // Every method that takes a deadline takes `impl Into<Deadline>`: a `Duration` is one from now.
/// let from_a_duration: Deadline = Duration::from_secs(5).into();
/// assert!(from_a_duration.remaining().is_some());
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    started: Instant,
    at: Option<Instant>,
}

impl Deadline {
    /// No deadline: wait as long as it takes (retry policies still apply).
    pub fn never() -> Self {
        Self { started: Instant::now(), at: None }
    }

    /// A deadline `timeout` from now.
    pub fn after(timeout: Duration) -> Self {
        let started = Instant::now();
        Self { started, at: Some(started + timeout) }
    }

    /// A deadline `timeout` from now, or none.
    pub fn within(timeout: Option<Duration>) -> Self {
        timeout.map_or_else(Self::never, Self::after)
    }

    /// The instant, if there is one.
    pub fn instant(&self) -> Option<Instant> {
        self.at
    }

    /// Time left (zero once passed); `None` without a deadline.
    pub fn remaining(&self) -> Option<Duration> {
        self.at.map(|at| at.saturating_duration_since(Instant::now()))
    }

    /// Whether the deadline has passed.
    pub fn is_expired(&self) -> bool {
        self.at.is_some_and(|at| Instant::now() >= at)
    }

    /// Time since the call started.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// The earlier of this deadline and `other`, keeping this one's start.
    pub fn min(self, other: Option<Instant>) -> Self {
        let at = match (self.at, other) {
            (Some(mine), Some(theirs)) => Some(mine.min(theirs)),
            (mine, theirs) => mine.or(theirs),
        };
        Self { started: self.started, at }
    }

    /// The error to return when this deadline passes.
    pub fn timeout_error(&self) -> Error {
        Error::Timeout { waited: self.elapsed(), last_connection_failure: None }
    }

    /// Runs `future` until this deadline; [`Error::Timeout`] if it passes first.
    ///
    /// The returned future holds `future` once, in place (an `async fn` would keep a second,
    /// moved-from copy of it in its state), so wrapping a large future costs only the timer.
    ///
    /// # Cancel safety
    /// Dropping it drops `future` where it stands: a cancelled call loses what `future`'s own
    /// cancel safety says.
    pub fn run<T, F>(&self, future: F) -> impl std::future::Future<Output = Result<T>>
    where
        F: std::future::Future<Output = Result<T>>,
    {
        use futures::future::{Either, FutureExt};
        let deadline = *self;
        match self.at {
            None => Either::Left(future),
            Some(at) => Either::Right(
                tokio::time::timeout_at(at, future)
                    .map(move |outcome| outcome.unwrap_or_else(|_| Err(deadline.timeout_error()))),
            ),
        }
    }

    /// Resolves with [`Error::Timeout`] when this deadline passes; never without a deadline. Its
    /// timer is on the heap, and only when there is a deadline: a call that waits without one
    /// carries 16 bytes for it. For long waits that select on several things, one of them the
    /// deadline.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")] async fn main() {
    /// use std::time::Duration;
    /// use zk_recipes_framework::{Deadline, Error};
    ///
    /// let deadline = Deadline::after(Duration::from_millis(10));
    /// let outcome = tokio::select! {
    ///     err = deadline.passed() => Err(err),
    ///     () = std::future::pending::<()>() => Ok(()),
    /// };
    /// assert!(matches!(outcome, Err(Error::Timeout { .. })));
    /// # }
    /// ```
    pub fn passed(&self) -> impl std::future::Future<Output = Error> + Send + 'static {
        let deadline = *self;
        let timer = self.at.map(|at| Box::pin(tokio::time::sleep_until(at)));
        async move {
            match timer {
                Some(timer) => timer.await,
                None => std::future::pending().await,
            }
            deadline.timeout_error()
        }
    }

    /// Sleeps for `duration`, or returns [`Error::Timeout`] if the deadline comes first.
    ///
    /// # Cancel safety
    /// Cancel safe: it only sleeps.
    pub async fn sleep(&self, duration: Duration) -> Result<()> {
        let wake = Instant::now() + duration;
        match self.at {
            Some(at) if at <= wake => {
                tokio::time::sleep_until(at).await;
                Err(self.timeout_error())
            }
            _ => {
                tokio::time::sleep_until(wake).await;
                Ok(())
            }
        }
    }
}

impl Default for Deadline {
    fn default() -> Self {
        Self::never()
    }
}

impl From<Duration> for Deadline {
    fn from(timeout: Duration) -> Self {
        Self::after(timeout)
    }
}
