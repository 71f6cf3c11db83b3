//! When the server may expire our session, under [`ErrorPolicy::SessionOnly`]: the framework
//! declares the session `Lost` a margin before that, whatever the connection does.
//!
//! The server expires a session a session timeout `T` after it last heard from the client (that
//! moment rounded up to its tick, never earlier). A request the server answered was heard no
//! earlier than when we sent it, so the send time of the latest answered request bounds the
//! server's last contact from below, however slowly the server replied and whatever came after it
//! (watch events, replies to older requests). zookeeper-client's own pings are invisible to us, so
//! a heartbeat, an `exists` of the root every `T/10`, keeps that send time fresh.
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

use std::convert::Infallible;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;
use zookeeper_client::SessionState;

use super::live_session::Session;

/// How often the heartbeat asks, as a share of the session timeout.
const BEATS_PER_TIMEOUT: u32 = 10;
/// How long before the server may expire the session it is declared lost, as a share of the
/// session timeout: room for our timer to fire late on a loaded machine.
const MARGIN_PER_TIMEOUT: u32 = 10;

/// The send time of the latest request the server answered on one session.
#[derive(Debug)]
pub(super) struct ExpiryClock {
    heard_by: Instant,
    timeout: Duration,
}

impl ExpiryClock {
    /// A clock for `session`: asks the server once and starts from that request's send time (or
    /// from `connecting_since`, before the session's handshake was sent, if it gets no answer).
    pub(super) async fn start(session: &Session, connecting_since: Instant) -> Self {
        let sent = Instant::now();
        let heard_by = match session.client().check_stat("/").await {
            Ok(_) => sent,
            Err(_) => connecting_since,
        };
        ExpiryClock { heard_by, timeout: session.timeout() }
    }

    /// When to declare the session lost: a margin before the server may expire it.
    pub(super) fn lost_at(&self) -> Instant {
        self.heard_by + self.timeout - self.timeout / MARGIN_PER_TIMEOUT
    }

    /// Asks the server something cheap every `T/10`, forever, and moves the clock to the send
    /// time of each answered request. Poll it beside the session's other work.
    pub(super) async fn keep(clock: &Mutex<Self>, session: &Session) -> Infallible {
        let every = session.timeout() / BEATS_PER_TIMEOUT;
        // Not while disconnected: the request would wait for the next connection.
        let connected = || session.client().state() == SessionState::SyncConnected;
        loop {
            let sent = Instant::now();
            // Any answer will do (the root exists, or the namespace's root under a chroot).
            if connected() && session.client().check_stat("/").await.is_ok() {
                let mut clock = clock.lock();
                clock.heard_by = clock.heard_by.max(sent);
            }
            tokio::time::sleep(every).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lost_comes_a_tenth_of_the_timeout_before_the_earliest_expiry() {
        let heard_by = Instant::now();
        let clock = ExpiryClock { heard_by, timeout: Duration::from_secs(10) };
        assert_eq!(clock.lost_at(), heard_by + Duration::from_secs(9));
    }
}
