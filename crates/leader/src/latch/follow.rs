//! Following the connection: an error state ends leadership at once; a reconnection or a new
//! session makes the election loop look again.

use zk_recipes_framework::{ConnectionEvents, ConnectionState, ErrorPolicy};

use super::events::NotLeaderReason;
use super::state::Shared;

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

/// Whether `state` ends leadership: an error state per the policy, or a read-only connection (the
/// quorum, which we cannot reach, may expire our session meanwhile).
pub(super) fn ends_leadership(policy: ErrorPolicy, state: ConnectionState) -> bool {
    policy.is_error_state(state) || state == ConnectionState::ReadOnly
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_states_and_read_only_connections_end_leadership() {
        use ConnectionState::*;
        for (policy, ending) in [
            (ErrorPolicy::Standard, vec![Suspended, Lost, ReadOnly]),
            (ErrorPolicy::SessionOnly, vec![Lost, ReadOnly]),
        ] {
            for state in [Connected, Suspended, Reconnected, Lost, ReadOnly] {
                assert_eq!(ends_leadership(policy, state), ending.contains(&state), "{policy:?} {state:?}");
            }
        }
    }
}
