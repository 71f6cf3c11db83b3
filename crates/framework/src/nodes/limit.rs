//! How long a node API call may take.

use std::time::Duration;

use crate::session::Deadline;

/// How long a node API call may take, retries included, unless its builder sets a deadline:
/// defaults to 30 s.
pub const DEFAULT_OPERATION_TIMEOUT: Duration = Duration::from_secs(30);

/// How long a builder's call may take: a timeout counted from when it is awaited, or a deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Limit {
    Timeout(Duration),
    Deadline(Deadline),
}

impl Limit {
    pub(crate) fn deadline(self) -> Deadline {
        match self {
            Limit::Timeout(timeout) => Deadline::after(timeout),
            Limit::Deadline(deadline) => deadline,
        }
    }
}
