//! Following the connection and the expiry clock: an error state ends leadership at once, and so
//! does the clock running out; a reconnection, a new session or the clock moving on again makes
//! the election loop look again.

use tokio::time::Instant;
use zk_recipes_framework::{ConnectionEvents, ConnectionState, DEFAULT_SESSION_TIMEOUT};

use super::events::{ends_leadership, NotLeaderReason};
use super::state::{OurNode, Shared};
use zk_recipes_lock_internals::hold_deadline;

/// How often, as a share of the session timeout, a latch whose clock ran out looks whether a late
/// answer moved it on: as often as the framework's heartbeat asks.
const CLOCK_CHECKS_PER_TIMEOUT: u32 = 10;

impl Shared {
    /// Follows the connection: ends leadership in error states at once, and asks the election
    /// loop to look again after a reconnection or a lost session. Returns when the framework is
    /// closed.
    pub(super) async fn follow_connection(&self, mut events: ConnectionEvents) {
        let policy = self.framework.error_policy();
        while let Some(update) = events.next().await {
            let state = update.state();
            if ends_leadership(policy, state) {
                self.set_leading(None, NotLeaderReason::Connection(state));
            }
            if state != ConnectionState::Suspended {
                self.kick.notify_one();
            }
        }
    }
}

impl Shared {
    /// Follows the expiry clock: ends leadership when the server may expire our node's session
    /// (less the margin), and once a late answer moved the clock on, asks the election loop to
    /// look again (it claims again with the same node if it is still first). Runs until the
    /// latch's task ends.
    pub(super) async fn follow_clock(&self) {
        let mut status = self.status.subscribe();
        loop {
            let leading = status.borrow_and_update().fencing_token.is_some();
            if let (true, Some(node)) = (leading, self.our_node()) {
                match hold_deadline(&self.framework, node.generation, None) {
                    Some(deadline) if deadline > Instant::now() => {
                        // Read again when it falls due: answers meanwhile may have moved it on.
                        tokio::select! {
                            () = tokio::time::sleep_until(deadline) => {}
                            changed = status.changed() => if changed.is_err() { return },
                        }
                        continue;
                    }
                    Some(_) => {
                        self.set_leading(None, NotLeaderReason::SessionMayExpire);
                        self.await_clock(&node).await;
                        self.kick.notify_one();
                        continue;
                    }
                    // No bound: a session no longer current or read-only, which the connection
                    // follower ends leadership for.
                    None => {}
                }
            }
            tokio::select! {
                changed = status.changed() => if changed.is_err() { return },
                () = self.clock_refused.notified() => {
                    if let Some(node) = self.our_node() {
                        self.await_clock(&node).await;
                        self.kick.notify_one();
                    }
                }
            }
        }
    }

    /// Returns once the expiry clock allows a leadership on `node`'s session again, or gives no
    /// bound for it any more (the session was replaced, the framework closed).
    async fn await_clock(&self, node: &OurNode) {
        let timeout = self.framework.current().session_timeout.unwrap_or(DEFAULT_SESSION_TIMEOUT);
        let mut every = tokio::time::interval(timeout / CLOCK_CHECKS_PER_TIMEOUT);
        loop {
            every.tick().await;
            match hold_deadline(&self.framework, node.generation, None) {
                Some(deadline) if deadline <= Instant::now() => {}
                _ => return,
            }
        }
    }
}
