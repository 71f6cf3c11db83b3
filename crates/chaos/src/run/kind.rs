//! The kinds of contender process the run starts. A leaf of the run's files.

/// What runs in a contender slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    /// `zkr-chaos contend`: one session per recipe and client.
    Rust,
    /// The Curator driver's `chaos-contend`.
    Curator,
    /// `zkr-chaos contend --loops N`: busy sessions.
    Busy,
    /// `crates/chaos/java/ZkRecipeChaos.java`.
    ZooKeeperRecipe,
    /// `crates/chaos/python/kazoo_chaos.py`.
    Kazoo,
    /// `zkr-chaos count`: the counters ([`crate::counters`]).
    Counter,
    /// `crates/chaos/java/CuratorMixChaos.java contend-counters`.
    CuratorCounter,
    /// `zkr-chaos barrier`: double-barrier members ([`crate::barriers`]).
    Barrier,
    /// `crates/chaos/java/CuratorMixChaos.java contend-barrier`.
    CuratorBarrier,
    /// `zkr-chaos cache`: a writer and followers of one subtree ([`crate::caches`]).
    Cache,
    /// `zkr-chaos members`: persistent nodes and group membership ([`crate::members`]).
    Members,
    /// `zkr-chaos partition`: work partitioner workers ([`crate::partitions`]).
    Partition,
    /// `crates/chaos/java/CuratorMixChaos.java contend-cache`.
    CuratorCache,
    /// `crates/chaos/java/CuratorMixChaos.java contend-members`.
    CuratorMembers,
}

impl Kind {
    /// The first letter of its tags (and so of its holders' names).
    pub(super) fn letter(self) -> char {
        match self {
            Kind::Rust => 'r',
            Kind::Curator => 'j',
            Kind::Busy => 'b',
            Kind::ZooKeeperRecipe => 'z',
            Kind::Kazoo => 'k',
            Kind::Counter => 'c',
            // The Curator mix processes' letters are upper-case (the mix checkers tell the sides
            // apart by it; `j` is the lock contenders').
            Kind::CuratorCounter => 'J',
            Kind::Barrier => 'g',
            Kind::CuratorBarrier => 'G',
            Kind::Cache => 'a',
            Kind::Members => 'm',
            Kind::Partition => 'p',
            Kind::CuratorCache => 'A',
            Kind::CuratorMembers => 'M',
        }
    }

    /// Whether it runs our recipes (`zkr-chaos contend`).
    pub(super) fn is_rust(self) -> bool {
        matches!(
            self,
            Kind::Rust
                | Kind::Busy
                | Kind::Counter
                | Kind::Members
                | Kind::Barrier
                | Kind::Cache
                | Kind::Partition
        )
    }

    /// Whether it runs one of the recipes besides the locks and queues (counters, members,
    /// barriers, cache).
    pub(super) fn is_mix(self) -> bool {
        matches!(
            self,
            Kind::Counter
                | Kind::CuratorCounter
                | Kind::Members
                | Kind::Barrier
                | Kind::CuratorBarrier
                | Kind::Cache
                | Kind::CuratorCache
                | Kind::CuratorMembers
                | Kind::Partition
        )
    }

    /// Whether it runs Curator.
    pub(super) fn is_curator(self) -> bool {
        matches!(
            self,
            Kind::Curator
                | Kind::CuratorCounter
                | Kind::CuratorBarrier
                | Kind::CuratorCache
                | Kind::CuratorMembers
        )
    }
}
