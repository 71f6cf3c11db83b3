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
/// (it lives in the [`Session`]); it runs once the supervisor starts it.
#[derive(Debug, Default)]
pub(crate) struct ExpiryClock {
    /// `None` until started (and for ever on a read-only session).
    heard_by: Mutex<Option<Instant>>,
}

impl ExpiryClock {
    /// Starts the clock from the send time of one request asked now, once answered; if it gets no
    /// answer, from `connecting_since`, a moment before the session's handshake was sent (the
    /// server heard nothing of this session earlier). Not from `connecting_since` first: after a
    /// connect that took most of `T`, that alone would make a healthy session look lost at once.
    /// The heartbeat ([`keep`](Self::keep)) moves it on from there.
    pub(super) async fn start(&self, session: &Session, connecting_since: Instant) {
        let sent = Instant::now();
        match session.client().check_stat("/").await {
            Ok(_) => self.heard(sent),
            Err(_) => self.start_from(connecting_since),
        }
    }

    fn start_from(&self, connecting_since: Instant) {
        self.heard_by.lock().get_or_insert(connecting_since);
    }

    /// The earliest moment the server may expire a session of `timeout`; `None` before the clock
    /// was started.
    pub(crate) fn earliest_expiry(&self, timeout: Duration) -> Option<Instant> {
        self.heard_by.lock().map(|heard_by| heard_by + timeout)
    }

    /// When to declare a session of `timeout` lost (under `SessionOnly`): a margin before the
    /// server may expire it; `None` before the clock was started.
    pub(super) fn lost_at(&self, timeout: Duration) -> Option<Instant> {
        self.earliest_expiry(timeout).map(|expiry| expiry - timeout / MARGIN_PER_TIMEOUT)
    }

    /// The server answered a request sent at `sent`.
    fn heard(&self, sent: Instant) {
        let mut heard_by = self.heard_by.lock();
        *heard_by = Some(heard_by.map_or(sent, |heard_by| heard_by.max(sent)));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_comes_a_tenth_of_the_timeout_before_the_earliest_expiry() {
        let connecting_since = Instant::now();
        let clock = ExpiryClock::default();
        let timeout = Duration::from_secs(10);
        assert_eq!(clock.lost_at(timeout), None, "not started");
        clock.start_from(connecting_since);
        assert_eq!(clock.earliest_expiry(timeout), Some(connecting_since + timeout));
        assert_eq!(clock.lost_at(timeout), Some(connecting_since + Duration::from_secs(9)));
    }

    #[test]
    fn a_late_answer_to_an_older_request_never_moves_the_clock_back() {
        let connecting_since = Instant::now();
        let clock = ExpiryClock::default();
        clock.start_from(connecting_since);
        let newer = connecting_since + Duration::from_secs(2);
        clock.heard(newer);
        clock.heard(connecting_since + Duration::from_secs(1));
        assert_eq!(clock.earliest_expiry(Duration::from_secs(10)), Some(newer + Duration::from_secs(10)));
        // A second start (never done, but harmless) does not move it either.
        clock.start_from(connecting_since);
        assert_eq!(clock.earliest_expiry(Duration::from_secs(10)), Some(newer + Duration::from_secs(10)));
    }
}
