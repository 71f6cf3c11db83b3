//! One counter of the mix: its name in logs, its node and how its data is encoded. A leaf: the
//! counter contenders ([`crate::counters`]) and both of their checkers read it.

/// One counter of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    /// `SharedCount` (4-byte int), incremented by a versioned `try_set`.
    SharedCount,
    /// `DistributedAtomicLong` (8-byte long), `increment()` promoted to a mutex.
    AtomicLong,
}

impl Counter {
    /// Both counters.
    pub const ALL: [Counter; 2] = [Counter::SharedCount, Counter::AtomicLong];

    /// The name in logs and tables.
    pub fn name(self) -> &'static str {
        match self {
            Counter::SharedCount => "shared-count",
            Counter::AtomicLong => "atomic-long",
        }
    }

    /// The counter's node under `check_root`.
    pub fn path(self, check_root: &str) -> String {
        format!("{check_root}/{}", self.name())
    }

    /// The initial data (zero), written by the run before the contenders start.
    pub fn zero(self) -> Vec<u8> {
        match self {
            Counter::SharedCount => 0_i32.to_be_bytes().to_vec(),
            Counter::AtomicLong => 0_i64.to_be_bytes().to_vec(),
        }
    }

    /// Decodes the node's data (big-endian, as Curator writes it).
    pub fn decode(self, data: &[u8]) -> Option<i64> {
        match self {
            Counter::SharedCount => Some(i64::from(i32::from_be_bytes(data.try_into().ok()?))),
            Counter::AtomicLong => Some(i64::from_be_bytes(data.try_into().ok()?)),
        }
    }

    /// The counter named `name` in a log line.
    pub fn parse(name: &str) -> Option<Counter> {
        Counter::ALL.into_iter().find(|counter| counter.name() == name)
    }
}
