//! The end of a phase for the mix's parts that are checked against the servers: members,
//! caches and partition workers freeze, and what the servers hold must converge.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use zk_recipes_framework::{Deadline, Framework};

use super::kind::Kind;
use super::reading::{cache_root, members_root, partition_root};
use super::reading::{children, descendants, read_logs};
use super::slots::Slot;
use super::{Phase, STEP};
use crate::caches::{self, Snapshot};
use crate::members::{self, SeenNode};
use crate::partitions;

impl Phase<'_> {
    /// The members' last act: one member process of each side (ours, Curator's) is SIGKILLed
    /// (and started again), and their nodes must be gone within the session timeout (+2 s for the server's expiry tick); then
    /// every member node is deleted (as a lost session's would be), the members freeze their
    /// data, and within [`members::converge_bound`] each live member's nodes must be back exactly
    /// once with its frozen data, with nothing left of a dead member.
    pub(super) async fn settle_members(
        &self,
        observer: &Framework,
        slots: &mut [Slot],
        log_dir: &Path,
        killed: &mut HashMap<String, i64>,
    ) -> Result<Vec<String>, String> {
        let config = self.config;
        let root = members_root(self.check_root);
        let mut violations = Vec::new();
        let holders_of = |tag: &str| {
            (0..config.member_clients).map(|client| format!("{tag}-{client}")).collect::<Vec<_>>()
        };
        // One process of each side (ours, Curator's), killed together.
        let mut dead = Vec::new();
        let killed_at = Instant::now();
        for kind in [Kind::Members, Kind::CuratorMembers] {
            if let Some(slot) = slots.iter_mut().find(|slot| slot.kind == kind) {
                dead.extend(holders_of(&slot.tag));
                self.kill(slot, killed).await;
                self.spawn(slot, log_dir)?;
            }
        }
        if !dead.is_empty() {
            let bound = config.session_timeout + Duration::from_secs(2);
            loop {
                let left: Vec<SeenNode> = member_nodes(observer, &root)
                    .await
                    .into_iter()
                    .filter(|node| {
                        dead.iter().any(|holder| members::is_holders(&node.dir, &node.name, holder))
                    })
                    .collect();
                if left.is_empty() {
                    println!(
                        "members: the killed members' nodes ({}) went {} ms after their kill",
                        dead.join(", "),
                        killed_at.elapsed().as_millis()
                    );
                    break;
                }
                if killed_at.elapsed() >= bound {
                    violations.extend(left.iter().map(|node| {
                        format!(
                            "outlived its session: {}/{} of a killed member, {bound:?} after the kill",
                            node.dir, node.name
                        )
                    }));
                    break;
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        // Every member node deleted, as a lost session's would be.
        for node in member_nodes(observer, &root).await {
            let _ = observer
                .delete(&format!("{root}/{}/{}", node.dir, node.name))
                .quietly()
                .deadline(Deadline::after(STEP))
                .await;
        }
        let mut live_tags = Vec::new();
        let member_slot = |slot: &&mut Slot| matches!(slot.kind, Kind::Members | Kind::CuratorMembers);
        for slot in slots.iter_mut().filter(member_slot) {
            if slot.tell("freeze").await {
                live_tags.push(slot.tag.clone());
            }
        }
        let converge = members::converge_bound(config.session_timeout);
        let started = Instant::now();
        let wanted: Vec<String> = live_tags.iter().flat_map(|tag| holders_of(tag)).collect();
        let live = loop {
            let frozen = members::frozen(&read_logs(log_dir, "members-"));
            let live: BTreeMap<String, u64> =
                frozen.into_iter().filter(|(holder, _)| wanted.contains(holder)).collect();
            if live.len() == wanted.len() {
                break live;
            }
            if started.elapsed() >= STEP {
                violations.push(format!("members did not freeze: {} of {}", live.len(), wanted.len()));
                break live;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        loop {
            let found = members::check_members(&live, &member_nodes(observer, &root).await);
            if found.is_empty() {
                println!(
                    "members: {} live members' nodes converged {} ms after the freeze (bound {} ms)",
                    live.len(),
                    started.elapsed().as_millis(),
                    converge.as_millis()
                );
                break;
            }
            if started.elapsed() >= converge {
                violations.extend(found);
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        Ok(violations)
    }

    /// The caches' check: the writers freeze, the server's tree is read and written to a file,
    /// and every live follower (its `Cache` and its replaying subscriber) must hold exactly that
    /// within [`caches::CONVERGE`].
    pub(super) async fn settle_caches(
        &self,
        observer: &Framework,
        slots: &mut [Slot],
        log_dir: &Path,
    ) -> Result<BTreeMap<String, (bool, String)>, String> {
        let config = self.config;
        let mut live = Vec::new();
        let mut curator_live = Vec::new();
        for slot in slots.iter_mut().filter(|slot| matches!(slot.kind, Kind::Cache | Kind::CuratorCache)) {
            if slot.tell("freeze").await {
                live.push(slot.tag.clone());
                if slot.kind == Kind::CuratorCache {
                    curator_live.push(slot.tag.clone());
                }
            }
        }
        let mut verdicts = BTreeMap::new();
        let started = Instant::now();
        loop {
            let text = read_logs(log_dir, "cache-");
            let frozen = live.iter().filter(|tag| text.contains(&format!("F cache {tag}-w "))).count();
            if frozen == live.len() {
                break;
            }
            if started.elapsed() >= STEP {
                verdicts.insert("writers".to_owned(), (false, format!("{frozen} of {} froze", live.len())));
                return Ok(verdicts);
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        // A write whose reply came back is applied; give one sent by a killed writer a moment.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let root = cache_root(self.check_root);
        let mut server = Snapshot::new();
        for path in descendants(observer, &root).await {
            if let Ok(node) = observer.get_data(&path, Deadline::after(STEP)).await {
                server.insert(path, (node.stat.czxid, node.stat.mzxid, node.data));
            }
        }
        let file = log_dir.join("cache-expected.txt");
        std::fs::write(&file, caches::encode(&server))
            .map_err(|err| format!("writing {}: {err}", file.display()))?;
        for slot in slots.iter_mut().filter(|slot| live.contains(&slot.tag)) {
            slot.tell(&format!("check {}", file.display())).await;
        }
        let views: &[&str] = &["cache", "replay"];
        // Curator's followers (`A` processes) have one view each: their `CuratorCache`.
        let wanted: Vec<String> = live
            .iter()
            .flat_map(|tag| {
                let (clients, views): (usize, &[&str]) = if curator_live.contains(tag) {
                    (config.curator_cache_clients, &["curator"])
                } else {
                    (config.cache_clients, views)
                };
                (0..clients)
                    .flat_map(move |client| views.iter().map(move |view| format!("{tag}-{client}/{view}")))
            })
            .collect();
        let started = Instant::now();
        loop {
            let found = caches::verdicts(&read_logs(log_dir, "cache-"));
            if wanted.iter().all(|view| found.contains_key(view))
                || started.elapsed() >= caches::CONVERGE + STEP
            {
                for view in &wanted {
                    let verdict = found.get(view).cloned().unwrap_or((false, "no verdict".to_owned()));
                    verdicts.insert(view.clone(), verdict);
                }
                println!("cache: {} nodes on the server after the writers froze", server.len());
                return Ok(verdicts);
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The partition workers' end state: they freeze (each stays in the party from now on), and
    /// within [`partitions::converge_bound`] the party must be exactly the frozen workers and
    /// every item locked by exactly one of them, the one working on it, the items split evenly
    /// ([`partitions::check_settled`]). Returns how long that took (ms), or the violations left at
    /// the bound.
    pub(super) async fn settle_partitions(
        &self,
        observer: &Framework,
        slots: &mut [Slot],
        log_dir: &Path,
    ) -> Result<(Option<u64>, Vec<String>), String> {
        let config = self.config;
        let root = partition_root(self.check_root);
        let mut live = 0;
        for slot in slots.iter_mut().filter(|slot| slot.kind == Kind::Partition) {
            if slot.tell("freeze").await {
                live += 1;
            }
        }
        let wanted = live * config.partition_workers;
        let items = partitions::items();
        let bound = partitions::converge_bound(config.session_timeout);
        let started = Instant::now();
        loop {
            let text = read_logs(log_dir, "partition-");
            let frozen = partitions::frozen(&text);
            let violations = if frozen.len() < wanted {
                vec![format!("{} of {wanted} partition workers froze", frozen.len())]
            } else {
                let party = children(observer, &format!("{root}/{}", zk_recipes_partition::MEMBERS)).await;
                let mut lock_holders = BTreeMap::new();
                for item in &items {
                    let dir = format!("{root}/{}/{item}", zk_recipes_partition::LOCKS);
                    let mut holders = Vec::new();
                    for node in children(observer, &dir).await {
                        if let Ok(node) =
                            observer.get_data(&format!("{dir}/{node}"), Deadline::after(STEP)).await
                        {
                            holders.push(String::from_utf8_lossy(&node.data).into_owned());
                        }
                    }
                    lock_holders.insert(item.clone(), holders);
                }
                let party = party.into_iter().collect();
                partitions::check_settled(&items, &frozen, &party, &lock_holders, &partitions::running(&text))
            };
            if violations.is_empty() {
                let settled_ms = started.elapsed().as_millis() as u64;
                println!(
                    "partition: {} items settled on {wanted} frozen workers {settled_ms} ms after the freeze (bound {} ms)",
                    items.len(),
                    bound.as_millis()
                );
                return Ok((Some(settled_ms), Vec::new()));
            }
            if started.elapsed() >= bound {
                return Ok((
                    None,
                    violations.into_iter().map(|violation| format!("not settled: {violation}")).collect(),
                ));
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
}

/// Every member node under `root` with its data.
async fn member_nodes(observer: &Framework, root: &str) -> Vec<SeenNode> {
    let mut nodes = Vec::new();
    for dir in members::DIRS {
        for name in children(observer, &format!("{root}/{dir}")).await {
            let path = format!("{root}/{dir}/{name}");
            if let Ok(node) = observer.get_data(&path, Deadline::after(STEP)).await {
                nodes.push(SeenNode { dir: dir.to_owned(), name, data: node.data.to_vec() });
            }
        }
    }
    nodes
}
