//! Claiming: a batch taken at most once (the reads, then one multi deleting it) or lock-safe (one
//! multi creating the lock nodes, then the reads), and lock creates whose outcome was unknown.

use tracing::{debug, trace, warn};
use zk_recipes_framework::zookeeper_client::{self, CreateMode, MultiWriteError};
use zk_recipes_framework::{Deadline, Error as FrameworkError, Session};

use crate::acks::LockClaim;
use crate::background::{register_lock, unregister_lock};
use crate::error::Result;

use super::claimer::Claimer;
use super::commit::release_job;
use super::delivery::Delivery;

impl<T: Send + 'static> Claimer<T> {
    /// At most once: read and delete each item in one round trip; ours if our delete won.
    pub(super) async fn claim_plain(&mut self, batch: Vec<String>) -> Result<Vec<Delivery<T>>> {
        let inner = self.inner.clone();
        let session = inner.framework.session(Deadline::never()).await?;
        let paths: Vec<String> = batch.iter().map(|name| inner.item_path(name)).collect();
        // Sent now, back to back, and run in order by the server: the reads, then one multi
        // deleting every item (one transaction). If another consumer took one of them, the multi
        // deletes nothing and each item is deleted on its own.
        let reads: Vec<_> = paths.iter().map(|path| session.client().get_data(path)).collect();
        let multi = (paths.len() > 1).then(|| {
            let mut multi = session.client().new_multi_writer();
            for path in &paths {
                multi.add_delete(path, None).expect("valid path");
            }
            multi.commit()
        });
        let mut read_results = Vec::with_capacity(reads.len());
        for read in reads {
            read_results.push(read.await);
        }
        let deleted: Vec<Result<(), zookeeper_client::Error>> = match multi {
            Some(multi) => match multi.await {
                Ok(_) => paths.iter().map(|_| Ok(())).collect(),
                Err(MultiWriteError::OperationFailed { .. }) => {
                    self.contended = true;
                    let deletes: Vec<_> = paths
                        .iter()
                        .zip(&read_results)
                        .map(|(path, read)| read.is_ok().then(|| session.client().delete(path, None)))
                        .collect();
                    let mut deleted = Vec::with_capacity(deletes.len());
                    for delete in deletes {
                        deleted.push(match delete {
                            Some(delete) => delete.await,
                            None => Err(zookeeper_client::Error::NoNode),
                        });
                    }
                    deleted
                }
                Err(MultiWriteError::RequestFailed { source }) => {
                    paths.iter().map(|_| Err(source.clone())).collect()
                }
            },
            None => vec![session.client().delete(&paths[0], None).await],
        };
        let mut taken = Vec::new();
        let mut lost_races = 0;
        for ((name, read), delete) in batch.into_iter().zip(read_results).zip(deleted) {
            match (read, delete) {
                (Ok((bytes, stat)), Ok(())) => {
                    if let Some(delivery) = Self::delivery(&inner, name, bytes, stat.version, None).await {
                        taken.push(delivery);
                    }
                }
                (_, Err(zookeeper_client::Error::NoNode)) => {
                    self.contended = true;
                    lost_races += 1;
                }
                (_, Err(err)) => {
                    // The delete's outcome is unknown: the item is either still there (someone
                    // takes it later) or gone, by our delete or another consumer's. Handing it
                    // out could deliver it twice, so it is not (at most once): if our delete went
                    // through, it is lost.
                    warn!(item = %name, %err, "take interrupted by connection trouble: not delivered; lost if our delete went through");
                    self.must_relist = true;
                }
                (Err(err), Ok(())) => {
                    warn!(item = %name, %err, "item deleted but its data was not read: lost");
                }
            }
        }
        self.note_races(lost_races, taken.len());
        Ok(taken)
    }

    /// Lock-safe: create our lock node and read the item in one round trip.
    pub(super) async fn claim_locked(&mut self, batch: Vec<String>) -> Result<Vec<Delivery<T>>> {
        let inner = self.inner.clone();
        let session = inner.framework.session(Deadline::never()).await?;
        if session.generation() != self.generation {
            self.must_relist = true;
            return Ok(Vec::new());
        }
        let mut claims: Vec<(String, LockClaim, String)> = batch
            .into_iter()
            .filter_map(|name| {
                let lock_node = inner.lock_node(&name)?;
                let claim =
                    LockClaim { lock_node, generation: session.generation(), session_id: session.id().0 };
                // Not if another consumer of this process holds it.
                register_lock(claim.session_id, &claim.lock_node).then(|| {
                    let item_path = inner.item_path(&name);
                    (name, claim, item_path)
                })
            })
            .collect();
        let mut lost_races = 0;
        if claims.len() > 1 {
            let mut gone = Vec::new();
            match self.claim_locked_together(&session, &claims, &mut gone).await {
                Some(taken) => return Ok(taken),
                None => self.contended = true,
            }
            // Items the reads behind the failed multi found gone were finished by others: not
            // tried again (item names are never reused).
            claims.retain(|(name, claim, _)| {
                let finished = gone.contains(name);
                if finished {
                    unregister_lock(claim.session_id, &claim.lock_node);
                    lost_races += 1;
                }
                !finished
            });
        }
        // One by one (one item, or someone else holds one of them). Sent now, back to back; the
        // server runs them in order: our create before our read.
        let requests: Vec<_> = claims
            .iter()
            .map(|(_, claim, item_path)| {
                let options = session.create_options_for(&claim.lock_node, CreateMode::Ephemeral);
                let create = session.client().create(&claim.lock_node, &inner.data, &options);
                let read = session.client().get_data(item_path);
                (create, read)
            })
            .collect();
        let mut taken = Vec::new();
        for ((name, claim, _), (create, read)) in claims.iter().zip(requests) {
            let (created, read) = (create.await, read.await);
            match created {
                Ok(_) => match read {
                    Ok((bytes, stat)) => {
                        if let Some(delivery) =
                            Self::delivery(&inner, name.clone(), bytes, stat.version, Some(claim.clone()))
                                .await
                        {
                            taken.push(delivery);
                        }
                    }
                    Err(err) => {
                        trace!(item = %name, %err, "locked alone but unread");
                        if err == zookeeper_client::Error::NoNode {
                            self.contended = true;
                            lost_races += 1;
                        }
                        self.let_go_unread(name, claim, err);
                    }
                },
                Err(zookeeper_client::Error::NodeExists) => {
                    unregister_lock(claim.session_id, &claim.lock_node);
                    self.contended = true;
                    lost_races += 1;
                    self.locked_by_others.push(name.clone());
                }
                Err(zookeeper_client::Error::NoNode) => {
                    // The lock path is missing: create it again and retry.
                    unregister_lock(claim.session_id, &claim.lock_node);
                    inner.forget_created();
                    self.must_relist = true;
                }
                Err(err) if FrameworkError::from(err.clone()).is_retryable() => {
                    debug!(item = %name, %err, "lock create interrupted; outcome unknown");
                    self.uncertain.push((name.clone(), claim.clone()));
                    self.must_relist = true;
                }
                Err(err) => {
                    unregister_lock(claim.session_id, &claim.lock_node);
                    warn!(item = %name, %err, "could not lock a queue item");
                    self.must_relist = true;
                }
            }
        }
        self.note_races(lost_races, taken.len());
        Ok(taken)
    }

    /// Locks every item of the batch in one multi (one transaction), then reads them. `None` if
    /// the multi created nothing because one lock was taken (or an item vanished): go one by one,
    /// without the items whose read found them gone (their names are added to `gone`).
    pub(super) async fn claim_locked_together(
        &mut self,
        session: &Session,
        claims: &[(String, LockClaim, String)],
        gone: &mut Vec<String>,
    ) -> Option<Vec<Delivery<T>>> {
        let inner = self.inner.clone();
        let mut multi = session.client().new_multi_writer();
        for (_, claim, _) in claims {
            let options = session.create_options_for(&claim.lock_node, CreateMode::Ephemeral);
            multi.add_create(&claim.lock_node, &inner.data, &options).expect("valid path");
        }
        // Sent now, back to back: the locks, then the reads.
        let created = multi.commit();
        let reads: Vec<_> =
            claims.iter().map(|(_, _, item_path)| session.client().get_data(item_path)).collect();
        let created = created.await;
        let mut read_results = Vec::with_capacity(reads.len());
        for read in reads {
            read_results.push(read.await);
        }
        match created {
            Ok(_) => {}
            Err(MultiWriteError::OperationFailed { .. }) => {
                for ((name, _, _), read) in claims.iter().zip(&read_results) {
                    if matches!(read, Err(zookeeper_client::Error::NoNode)) {
                        gone.push(name.clone());
                    }
                }
                return None;
            }
            Err(MultiWriteError::RequestFailed { source }) => {
                debug!(%source, "lock multi interrupted; outcome unknown");
                self.must_relist = true;
                for (name, claim, _) in claims {
                    self.uncertain.push((name.clone(), claim.clone()));
                }
                return Some(Vec::new());
            }
        }
        let mut taken = Vec::new();
        let mut lost_races = 0;
        for ((name, claim, _), read) in claims.iter().zip(read_results) {
            match read {
                Ok((bytes, stat)) => {
                    if let Some(delivery) =
                        Self::delivery(&inner, name.clone(), bytes, stat.version, Some(claim.clone())).await
                    {
                        taken.push(delivery);
                    }
                }
                Err(err) => {
                    trace!(item = %name, %err, "locked together but unread");
                    if err == zookeeper_client::Error::NoNode {
                        // Another consumer took and finished it since our listing: a lost race.
                        self.contended = true;
                        lost_races += 1;
                    }
                    self.let_go_unread(name, claim, err);
                }
            }
        }
        self.note_races(lost_races, taken.len());
        Some(taken)
    }

    /// We hold the lock on an item whose read failed. Gone (acknowledged by another consumer
    /// meanwhile) or unreadable: let the lock go in the background. Unread for connection
    /// trouble: release it before the next take (see [`resolve_uncertain`](Self::resolve_uncertain))
    /// and try the item again.
    pub(super) fn let_go_unread(&mut self, name: &str, claim: &LockClaim, err: zookeeper_client::Error) {
        if err == zookeeper_client::Error::NoNode {
            self.inner.submit(release_job(claim, false));
            return;
        }
        self.must_relist = true;
        if FrameworkError::from(err).is_retryable() {
            self.uncertain.push((name.to_owned(), claim.clone()));
        } else {
            self.inner.submit(release_job(claim, false));
        }
    }

    /// Lock creates whose outcome was unknown, and locks we hold on items we could not read: ours
    /// if the node exists with our session as owner (no other consumer of this process can have
    /// it: see the lock registry). Ours are deleted here, before the item is tried again: a lock
    /// still registered keeps the item out of the next listing, and nothing would wake this
    /// consumer once a background release finished on a quiet queue.
    pub(super) async fn resolve_uncertain(&mut self) -> Result<()> {
        if self.uncertain.is_empty() {
            return Ok(());
        }
        let session = self.inner.framework.session(Deadline::never()).await?;
        while let Some((name, claim)) = self.uncertain.pop() {
            if session.generation() != claim.generation {
                // That session is gone, and its ephemeral node with it.
                unregister_lock(claim.session_id, &claim.lock_node);
                continue;
            }
            let released = match session.client().check_stat(&claim.lock_node).await {
                Ok(Some(stat)) if session.owns(stat.ephemeral_owner) => {
                    debug!(item = %name, "our lock on an item we did not take is there; releasing it");
                    match session.client().delete(&claim.lock_node, None).await {
                        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                        Err(err) => Err(err),
                    }
                }
                Ok(_) => Ok(()),
                Err(err) => Err(err),
            };
            if let Err(err) = released {
                self.uncertain.push((name, claim));
                return Err(FrameworkError::from(err).into());
            }
            unregister_lock(claim.session_id, &claim.lock_node);
            self.pending.push_front(name);
        }
        Ok(())
    }
}
