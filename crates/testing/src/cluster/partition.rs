//! Network faults of a partitionable [`TestingCluster`]: partitions, an isolated leader, a bridge,
//! a ring, slow links, and healing them. The namespaces and routes are in [`crate::network`].

use std::collections::BTreeSet;

use super::handle::TestingCluster;
use crate::error::{Result, TestingError};
use crate::network::namespaces::ClusterNetwork;
use crate::network::topology::{bridge_cuts, groups_cuts, linked, ring_cuts, Pair};
use crate::network::Degradation;

impl TestingCluster {
    /// Whether this cluster was built with
    /// [`partitionable(true)`](crate::TestingClusterBuilder::partitionable).
    pub fn is_partitionable(&self) -> bool {
        self.network.is_some()
    }

    /// Cuts the network into `groups` of member indices (0-based, as everywhere on
    /// [`TestingCluster`]): members of different groups cannot talk to each other, members of one
    /// group still can. **Members named in no group form one more group together**, so
    /// `partition(&[&[0]])` isolates member 0 from all the others.
    ///
    /// A partition replaces the one before it (pairs no longer cut are healed). Only traffic
    /// between members is cut: clients in the test process still reach every member, so a client
    /// connected to a minority member stays connected to it (until that member stops serving).
    /// A cut is a blackhole route to the other member's address in each member's namespace: a
    /// connection attempt across it fails at once, packets on connections already open vanish.
    /// Returns at once; ZooKeeper notices within the sync limit
    /// ([`TestingClusterBuilder::sync_limit`](crate::TestingClusterBuilder::sync_limit)).
    ///
    /// # Errors
    /// [`TestingError::NotPartitionable`]; [`TestingError::NoSuchMember`];
    /// [`TestingError::InvalidArgument`] for a member named twice;
    /// [`TestingError::NetworkCommand`] if `ip` fails.
    ///
    /// # Cancel safety
    /// If cancelled, some of the pairs may be cut and the others not; [`heal`](Self::heal) clears
    /// every cut either way.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(cluster: &mut zk_recipes_testing::TestingCluster) -> Result<(), zk_recipes_testing::TestingError> {
    /// // Five members: {0, 1} | {2, 3, 4} (the members not named form the last group).
    /// cluster.partition(&[&[0, 1]]).await?;
    /// assert!(!cluster.can_talk(0, 2)?);
    /// assert!(cluster.can_talk(3, 4)?);
    /// cluster.heal().await?;
    /// # Ok(()) }
    /// ```
    pub async fn partition(&mut self, groups: &[&[usize]]) -> Result<()> {
        let cuts = groups_cuts(self.members.len(), groups)?;
        self.cut(cuts).await
    }

    /// Cuts member `index` off from every other member ([`partition(&[&[index]])`](Self::partition)).
    ///
    /// # Errors
    /// As [`partition`](Self::partition).
    ///
    /// # Cancel safety
    /// As [`partition`](Self::partition).
    pub async fn isolate(&mut self, index: usize) -> Result<()> {
        self.partition(&[&[index]]).await
    }

    /// Cuts the current leader off from every other member and returns its index. Its clients
    /// stay connected to it; it keeps saying leader until the sync limit passes without a quorum,
    /// and commits nothing meanwhile, while the others elect a new leader.
    ///
    /// # Errors
    /// [`TestingError::NoLeader`] if no member leads right now; else as
    /// [`partition`](Self::partition).
    ///
    /// # Cancel safety
    /// As [`partition`](Self::partition).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(cluster: &mut zk_recipes_testing::TestingCluster) -> Result<(), zk_recipes_testing::TestingError> {
    /// let old_leader = cluster.isolate_leader().await?;
    /// zk_recipes_testing::eventually("a new leader", || async {
    ///     matches!(cluster.leader_index().await, Ok(leader) if leader != old_leader)
    /// })
    /// .await;
    /// # Ok(()) }
    /// ```
    pub async fn isolate_leader(&mut self) -> Result<usize> {
        self.network()?;
        let leader = self.leader_index().await?;
        self.isolate(leader).await?;
        tracing::info!(leader, "isolated the leader");
        Ok(leader)
    }

    /// A bridge: the members below the middle one (`size / 2`) and those above it cannot talk to
    /// each other, and every member still talks to the middle one, which is returned. With five
    /// members: {0, 1} and {3, 4} each see 2 and not each other, so both sides, with 2, could make
    /// a majority — Jepsen's "bridge".
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] for fewer than three members; else as
    /// [`partition`](Self::partition).
    ///
    /// # Cancel safety
    /// As [`partition`](Self::partition).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(cluster: &mut zk_recipes_testing::TestingCluster) -> Result<(), zk_recipes_testing::TestingError> {
    /// let middle = cluster.bridge().await?; // 2 of 5
    /// assert!(cluster.can_talk(0, middle)? && cluster.can_talk(4, middle)? && !cluster.can_talk(0, 4)?);
    /// # Ok(()) }
    /// ```
    pub async fn bridge(&mut self) -> Result<usize> {
        let size = self.members.len();
        if size < 3 {
            return Err(TestingError::InvalidArgument(format!("a bridge needs three members, not {size}")));
        }
        let middle = size / 2;
        self.cut(bridge_cuts(size, middle)).await?;
        Ok(middle)
    }

    /// A ring: member `i` talks only to its neighbours `i - 1` and `i + 1` (modulo the size). With
    /// five members every member sees two others, a majority with itself, but no two members see
    /// the same majority.
    ///
    /// # Errors
    /// As [`partition`](Self::partition).
    ///
    /// # Cancel safety
    /// As [`partition`](Self::partition).
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(cluster: &mut zk_recipes_testing::TestingCluster) -> Result<(), zk_recipes_testing::TestingError> {
    /// cluster.ring().await?;
    /// assert!(cluster.can_talk(0, 1)? && cluster.can_talk(0, 4)? && !cluster.can_talk(0, 2)?);
    /// # Ok(()) }
    /// ```
    pub async fn ring(&mut self) -> Result<()> {
        self.cut(ring_cuts(self.members.len())).await
    }

    /// Slows every link of member `index`: each packet it sends or receives (to and from members
    /// and clients) is delayed by the degradation's delay ± jitter and dropped with its loss rate,
    /// so a round trip with the member grows by twice the delay. Replaces an earlier degradation
    /// (of any member); [`heal`](Self::heal) removes it. A degradation and a partition do not
    /// combine: each refuses to start while the other is in place.
    ///
    /// It uses `tc netem` on both ends of the member's veth pair where the kernel has `netem`;
    /// elsewhere a user-space relay (`python3` with tun devices) between the member and each peer,
    /// which delays packets the same way, except that with jitter they never overtake each other.
    ///
    /// # Errors
    /// [`TestingError::NetemUnavailable`] when neither `netem` nor the relay is available (no
    /// `python3`); [`TestingError::InvalidArgument`] while members are cut;
    /// [`TestingError::NotPartitionable`]; [`TestingError::NoSuchMember`];
    /// [`TestingError::NetworkCommand`].
    ///
    /// # Cancel safety
    /// If cancelled, the member may be partly degraded; [`heal`](Self::heal) clears it.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(cluster: &mut zk_recipes_testing::TestingCluster) -> Result<(), zk_recipes_testing::TestingError> {
    /// use std::time::Duration;
    /// use zk_recipes_testing::Degradation;
    ///
    /// // Member 1's round trips take 200 ms longer, and 5 % of its packets are lost.
    /// cluster.degrade(1, Degradation::delay(Duration::from_millis(100)).loss(0.05)?).await?;
    /// cluster.heal().await?;
    /// # Ok(()) }
    /// ```
    pub async fn degrade(&mut self, index: usize, degradation: Degradation) -> Result<()> {
        self.member(index)?;
        self.network_mut()?.degrade(index, &degradation).await
    }

    /// Heals the network: removes every cut and every degradation. Returns at once; wait for the
    /// ensemble with [`wait_until_serving`](Self::wait_until_serving).
    ///
    /// # Errors
    /// [`TestingError::NotPartitionable`]; [`TestingError::NetworkCommand`].
    ///
    /// # Cancel safety
    /// If cancelled, some cuts may remain; call it again.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(cluster: &mut zk_recipes_testing::TestingCluster) -> Result<(), zk_recipes_testing::TestingError> {
    /// cluster.ring().await?;
    /// cluster.heal().await?;
    /// cluster.wait_until_serving(std::time::Duration::from_secs(30)).await?;
    /// assert!(cluster.cut_links()?.is_empty());
    /// # Ok(()) }
    /// ```
    pub async fn heal(&mut self) -> Result<()> {
        self.network_mut()?.heal().await?;
        tracing::info!("healed the cluster network");
        Ok(())
    }

    /// Whether members `a` and `b` can talk to each other now (a member always talks to itself).
    ///
    /// # Errors
    /// [`TestingError::NotPartitionable`]; [`TestingError::NoSuchMember`].
    pub fn can_talk(&self, a: usize, b: usize) -> Result<bool> {
        self.member(a)?;
        self.member(b)?;
        Ok(linked(self.network()?.cuts(), a, b))
    }

    /// The member pairs cut now, each smaller index first, in order.
    ///
    /// # Errors
    /// [`TestingError::NotPartitionable`].
    pub fn cut_links(&self) -> Result<Vec<(usize, usize)>> {
        Ok(self.network()?.cuts().iter().copied().collect())
    }

    async fn cut(&mut self, cuts: BTreeSet<Pair>) -> Result<()> {
        self.network_mut()?.set_cuts(cuts).await
    }

    fn network(&self) -> Result<&ClusterNetwork> {
        self.network.as_ref().ok_or(TestingError::NotPartitionable)
    }

    fn network_mut(&mut self) -> Result<&mut ClusterNetwork> {
        self.network.as_mut().ok_or(TestingError::NotPartitionable)
    }
}
