//! When the server may expire our session: the framework's expiry clock, run for every session
//! that is not read-only, under either error policy. Under [`ErrorPolicy::SessionOnly`] the
//! framework declares the session `Lost` a margin before that, whatever the connection does;
//! under [`ErrorPolicy::Standard`] `Lost` keeps Curator's rule (`Suspended` lasting the session
//! timeout), and the clock's bound is published for recipes that must stop in time
//! ([`Framework::earliest_session_expiry`]: the leader selector drops a leadership's future by it).
//!
//! The server expires a session a session timeout `T` after it last heard from the client (that
//! moment rounded up to its tick, never earlier). A request the server answered was heard no
//! earlier than when we sent it, so the send time of the latest answered request bounds the
//! server's last contact from below, however slowly the server replied and whatever came after it
//! (watch events, replies to older requests). zookeeper-client's own pings are invisible to us, so
//! a heartbeat, an `exists` of the root every `T/10`, keeps that send time fresh. The heartbeats
//! do not wait for each other's answers: a slow answer delays what the clock knows by its own
//! round trip only, not by the round trips of the beats that would have queued behind it.
//!
//! Counting from when zookeeper-client *reports* the silence instead, as Curator does, is late: it
//! gives a connection up only 8–9 of its ticks (`T/20` each) after the last byte from the server,
//! and that byte may answer a request sent long before. A whole `T` from `Suspended` came 1.7 s
//! after the server's expiry with a 4 s session: under `SessionOnly`, where a hold is trusted until
//! `Lost`, a second holder.
//!
//! The bound is the server's: a standalone server, or an ensemble member in its quorum. A follower
//! cut off from its leader goes on answering its clients until it notices (`syncLimit × tickTime`),
//! while the leader, which alone expires sessions, no longer hears of them: no client can tell,
//! Curator's and ZooKeeper's own included. The fencing token of a hold (its node's `czxid`) is
//! what protects a resource then. A read-only session (served by a member without a quorum) gets
//! no clock: it is the server's own, never expired by a quorum, and holds nothing.
//!
//! [`ErrorPolicy::SessionOnly`]: crate::ErrorPolicy::SessionOnly
//! [`ErrorPolicy::Standard`]: crate::ErrorPolicy::Standard
//! [`Framework::earliest_session_expiry`]: crate::Framework::earliest_session_expiry

use std::convert::Infallible;
use std::time::Duration;

use futures::stream::{FuturesUnordered, StreamExt};
use parking_lot::Mutex;
use tokio::time::{Instant, MissedTickBehavior};
use zookeeper_client::SessionState;

use super::live_session::Session;

/// How often the heartbeat asks, as a share of the session timeout; also how many of its requests
/// may be unanswered at once (a session timeout's worth).
const BEATS_PER_TIMEOUT: u32 = 10;
/// How long before the server may expire the session the framework declares it lost under
/// `SessionOnly`, as a share of the session timeout: room for our timer to fire late on a loaded
/// machine.
const MARGIN_PER_TIMEOUT: u32 = 10;

/// The send time of the latest request the server answered on one session. Each session has one
/// (it lives in the [`Session`]); it runs once the supervisor begins it.
#[derive(Debug, Default)]
pub(crate) struct ExpiryClock {
    times: Mutex<Times>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Times {
    /// A moment before the session's handshake was sent: the server heard nothing of it earlier.
    /// `None` until begun (and for ever on a read-only session).
    connecting_since: Option<Instant>,
    /// The send time of the latest answered request; `None` until the first answer.
    heard_by: Option<Instant>,
}

impl ExpiryClock {
    /// Begins the clock: until a request is answered, the server may expire the session no
    /// earlier than `T` after `connecting_since`, a moment before its handshake was sent.
    pub(super) fn begin(&self, connecting_since: Instant) {
        self.times.lock().connecting_since.get_or_insert(connecting_since);
    }

    /// Asks the server once, and starts counting from that request's send time once answered; if
    /// it gets no answer, from when the connect began. [`lost_at`](Self::lost_at) waits for this
    /// while the connection lasts: after a connect that took most of `T`, the connect's start
    /// alone would make a healthy session look lost at once. The heartbeat
    /// ([`keep`](Self::keep)) moves it on from there.
    pub(super) async fn start(&self, session: &Session) {
        let sent = Instant::now();
        let answered = session.client().check_stat("/").await.is_ok();
        let mut times = self.times.lock();
        let heard_by = if answered { Some(sent) } else { times.connecting_since };
        times.heard_by = times.heard_by.max(heard_by);
    }

    /// The earliest moment the server may expire a session of `timeout`; `None` before the clock
    /// was begun.
    pub(crate) fn earliest_expiry(&self, timeout: Duration) -> Option<Instant> {
        let times = *self.times.lock();
        earliest_expiry(times.heard_by, times.connecting_since, timeout)
    }

    /// When to declare a session of `timeout` lost (under `SessionOnly`): a margin before the
    /// server may expire it. Before the first answer ([`start`](Self::start)): only if
    /// `suspended`, and counted from the connect's start (nothing proves a later contact); not
    /// otherwise (the answer is on its way on a live connection).
    pub(super) fn lost_at(&self, timeout: Duration, suspended: bool) -> Option<Instant> {
        let times = *self.times.lock();
        lost_at(times.heard_by, times.connecting_since, timeout, suspended)
    }

    /// The server answered a request sent at `sent`.
    fn heard(&self, sent: Instant) {
        let mut times = self.times.lock();
        times.heard_by = times.heard_by.max(Some(sent));
    }

    /// Asks the server something cheap every `T/10` (while connected), forever, and moves the
    /// clock to the send time of each answered request. Poll it beside the session's other work.
    pub(super) async fn keep(&self, session: &Session) -> Infallible {
        let every = session.timeout() / BEATS_PER_TIMEOUT;
        let mut beat = tokio::time::interval(every);
        beat.set_missed_tick_behavior(MissedTickBehavior::Delay);
        let mut unanswered = FuturesUnordered::new();
        loop {
            tokio::select! {
                _ = beat.tick() => {
                    // Not while disconnected: the request would wait for the next connection.
                    let connected = session.client().state() == SessionState::SyncConnected;
                    if connected && unanswered.len() < BEATS_PER_TIMEOUT as usize {
                        let sent = Instant::now();
                        // Any answer will do (the root exists, or the namespace's root under a
                        // chroot).
                        let asked = session.client().check_stat("/");
                        unanswered.push(async move { (sent, asked.await.is_ok()) });
                    }
                }
                Some((sent, answered)) = unanswered.next(), if !unanswered.is_empty() => {
                    if answered {
                        self.heard(sent);
                    }
                }
            }
        }
    }
}

/// The earliest moment the server may expire a session of `timeout`, from the send time of the
/// latest request it answered (`heard_by`), or before any answer from a moment before the
/// handshake was sent (`connecting_since`); `None` before either is known. The rule the
/// framework's expiry clock applies to its own times, over any clock (`Instant` there, ticks in a
/// model).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::decisions::earliest_expiry;
///
/// let timeout = Duration::from_secs(10);
/// let (connect, heard) = (Duration::from_secs(1), Duration::from_secs(3));
/// assert_eq!(earliest_expiry(None, Some(connect), timeout), Some(Duration::from_secs(11)));
/// assert_eq!(earliest_expiry(Some(heard), Some(connect), timeout), Some(Duration::from_secs(13)));
/// ```
pub fn earliest_expiry<I>(heard_by: Option<I>, connecting_since: Option<I>, timeout: Duration) -> Option<I>
where
    I: Copy + std::ops::Add<Duration, Output = I>,
{
    heard_by.or(connecting_since).map(|heard_by| heard_by + timeout)
}

/// When the framework declares a session of `timeout` lost under `SessionOnly`: a tenth of the
/// timeout before [`earliest_expiry`]. Before the first answer only if `suspended` (counted from
/// the connect's start); not otherwise (the answer is on its way on a live connection).
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::decisions::lost_at;
///
/// let timeout = Duration::from_secs(10);
/// let heard = Duration::from_secs(3);
/// assert_eq!(lost_at(Some(heard), None, timeout, false), Some(Duration::from_secs(12)));
/// assert_eq!(lost_at(None, Some(heard), timeout, false), None);
/// ```
pub fn lost_at<I>(
    heard_by: Option<I>,
    connecting_since: Option<I>,
    timeout: Duration,
    suspended: bool,
) -> Option<I>
where
    I: Copy + std::ops::Add<Duration, Output = I> + std::ops::Sub<Duration, Output = I>,
{
    let heard_by = heard_by.or(connecting_since.filter(|_| suspended))?;
    Some(heard_by + timeout - timeout / MARGIN_PER_TIMEOUT)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn before_an_answer_the_expiry_counts_from_the_connect_and_loss_only_once_suspended() {
        let connecting_since = Instant::now();
        let clock = ExpiryClock::default();
        let timeout = Duration::from_secs(10);
        assert_eq!(clock.earliest_expiry(timeout), None, "not begun");
        clock.begin(connecting_since);
        assert_eq!(clock.earliest_expiry(timeout), Some(connecting_since + timeout));
        assert_eq!(clock.lost_at(timeout, false), None, "no loss before the first answer");
        let from_the_connect = connecting_since + Duration::from_secs(9);
        assert_eq!(clock.lost_at(timeout, true), Some(from_the_connect), "unless suspended");
    }

    #[test]
    fn lost_comes_a_tenth_of_the_timeout_before_the_earliest_expiry() {
        let connecting_since = Instant::now();
        let clock = ExpiryClock::default();
        let timeout = Duration::from_secs(10);
        clock.begin(connecting_since);
        let sent = connecting_since + Duration::from_secs(3);
        clock.heard(sent);
        assert_eq!(clock.earliest_expiry(timeout), Some(sent + timeout));
        assert_eq!(clock.lost_at(timeout, false), Some(sent + Duration::from_secs(9)));
        assert_eq!(clock.lost_at(timeout, true), Some(sent + Duration::from_secs(9)));
    }

    #[test]
    fn a_late_answer_to_an_older_request_never_moves_the_clock_back() {
        let connecting_since = Instant::now();
        let clock = ExpiryClock::default();
        clock.begin(connecting_since);
        let newer = connecting_since + Duration::from_secs(2);
        clock.heard(newer);
        clock.heard(connecting_since + Duration::from_secs(1));
        assert_eq!(clock.earliest_expiry(Duration::from_secs(10)), Some(newer + Duration::from_secs(10)));
        // A second begin (never done, but harmless) does not move it either.
        clock.begin(connecting_since);
        assert_eq!(clock.earliest_expiry(Duration::from_secs(10)), Some(newer + Duration::from_secs(10)));
    }
}
