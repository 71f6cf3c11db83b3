//! A ZooKeeper ensemble of `QuorumPeerMain` members on loopback.
//!
//! - [`member`]: [`ClusterMember`], one member's ports, files, process and four-letter words;
//! - [`handle`]: [`TestingCluster`], the members, the leader, the wait until the ensemble serves;
//! - [`control`]: stopping, killing, restarting, pausing and resuming members;
//! - [`reconfig`]: a reconfigurable ensemble: joining members, `reconfig` add and remove;
//! - [`partition`]: network faults of a partitionable ensemble: partitions, bridge, ring, slow
//!   links, heal;
//! - [`builder`]: [`TestingClusterBuilder`], the settings, the members' files and the start.
//!
//! Each file imports only the ones before it in this list.

mod builder;
mod control;
mod handle;
mod member;
mod partition;
mod reconfig;

pub use builder::TestingClusterBuilder;
pub use handle::TestingCluster;
pub use member::ClusterMember;

#[cfg(test)]
mod tests {
    #[test]
    fn public_types_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<super::TestingCluster>();
    }
}
