//! The task behind a [`Partitioner`](crate::Partitioner): it follows the party, deals the items
//! once the party has settled, acquires its share (one lock wait per item, all at once) and hands
//! each held item to a keeper task, which owns the item's lock and its work.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};
use tokio::task::{JoinError, JoinSet};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{path, Deadline, ParentMode};
use zk_recipes_mutex::{Hold, LockError, LostReason, Mutex, MutexGuard};
use zk_recipes_nodes::{GroupMember, MemberEvent};

use crate::assign::{balanced_share, kazoo_share};
use crate::config::{Config, PartitionLayout, KAZOO_PARTY, LOCKS};
use crate::shared::{OwnedItem, PartitionEvent, Shared};

/// How long to wait before trying again after a lock wait or a setup step failed.
const RETRY_PAUSE: Duration = Duration::from_secs(1);

/// The longest pause between two tries of creating kazoo's paths (each pause doubles up to it).
const RETRY_PAUSE_MAX: Duration = Duration::from_secs(16);

/// How long one try at a setup step (creating kazoo's paths, loading the party) may take.
const SETUP_TIMEOUT: Duration = Duration::from_secs(10);

/// How a keeper's ownership ended.
#[derive(Debug)]
enum Outcome {
    Released,
    Lost(LostReason),
}

/// A keeper's last word.
#[derive(Debug)]
struct Report {
    item: String,
    fencing_token: i64,
    outcome: Outcome,
}

/// An item held by a keeper task.
struct Held {
    owned: OwnedItem,
    /// Tells the keeper to release; `None` once told.
    release: Option<oneshot::Sender<()>>,
}

type Acquired = (String, Result<MutexGuard, LockError>);

pub(crate) struct Driver {
    config: Arc<Config>,
    shared: Arc<Shared>,
    stop: CancellationToken,
    mutexes: BTreeMap<String, Mutex>,
    held: BTreeMap<String, Held>,
    pending: JoinSet<Acquired>,
    pending_items: BTreeSet<String>,
    /// Our share under the last settled party.
    share: BTreeSet<String>,
    settled: bool,
    changed_at: Instant,
    reports: mpsc::UnboundedSender<Report>,
    report_inbox: mpsc::UnboundedReceiver<Report>,
}

impl Driver {
    pub(crate) fn new(config: Arc<Config>, shared: Arc<Shared>, stop: CancellationToken) -> Self {
        let mutexes = config.locks.iter().cloned().collect();
        let (reports, report_inbox) = mpsc::unbounded_channel();
        Self {
            config,
            shared,
            stop,
            mutexes,
            held: BTreeMap::new(),
            pending: JoinSet::new(),
            pending_items: BTreeSet::new(),
            share: BTreeSet::new(),
            settled: false,
            changed_at: Instant::now(),
            reports,
            report_inbox,
        }
    }

    pub(crate) async fn run(mut self) {
        if self.config.layout == PartitionLayout::Kazoo && !self.create_kazoo_paths().await {
            self.shared.finish();
            return;
        }
        let member =
            GroupMember::builder(&self.config.framework, &self.config.party_path, &self.config.member_name)
                .data(self.config.identifier.as_bytes())
                .start();
        let member = match member {
            Ok(member) => member,
            Err(err) => {
                tracing::error!(%err, "could not join the party");
                self.shared.finish();
                return;
            }
        };
        let mut membership = member.events();
        if self.party_loaded(&member).await {
            tracing::debug!(party = %self.config.party_path, "joined the party");
            self.changed_at = Instant::now();
            self.follow(&member, &mut membership).await;
        }
        self.shut_down(member).await;
    }

    /// kazoo's `ensure_path` of the path, its `locks` and its `party`: persistent nodes, as kazoo
    /// needs them (its party join and party listing fail without the party node). `false` if
    /// stopped first.
    async fn create_kazoo_paths(&self) -> bool {
        let framework = &self.config.framework;
        for node in [
            self.config.path.clone(),
            path::join(&self.config.path, LOCKS),
            path::join(&self.config.path, KAZOO_PARTY),
        ] {
            let mut backoff = Backoff::new(RETRY_PAUSE, RETRY_PAUSE_MAX);
            loop {
                let create = framework
                    .create(&node)
                    .mode(CreateMode::Persistent)
                    .creating_parents(ParentMode::Persistent)
                    .timeout(SETUP_TIMEOUT);
                match create.await {
                    Ok(_) => break,
                    Err(err) if err.is_node_exists() => break,
                    Err(zk_recipes_framework::Error::Closed) => return false,
                    Err(err) => tracing::warn!(%err, node, "creating kazoo's path failed; trying again"),
                }
                if !self.pause(backoff.next_pause()).await {
                    return false;
                }
            }
        }
        true
    }

    /// Waits until our member node exists and the party is loaded. `false` if stopped first.
    async fn party_loaded(&self, member: &GroupMember) -> bool {
        loop {
            tokio::select! {
                () = self.stop.cancelled() => return false,
                () = self.config.framework.closing() => return false,
                loaded = member.initialized(Deadline::after(SETUP_TIMEOUT)) => match loaded {
                    Ok(()) => return true,
                    Err(err) => tracing::warn!(
                        %err,
                        member = %path::join(&self.config.party_path, &self.config.member_name),
                        "not in the party yet (is another worker using this identifier?); waiting on"
                    ),
                },
            }
        }
    }

    /// Sleeps `pause`; `false` if stopped first.
    async fn pause(&self, pause: Duration) -> bool {
        tokio::select! {
            () = self.stop.cancelled() => false,
            () = self.config.framework.closing() => false,
            () = tokio::time::sleep(pause) => true,
        }
    }

    /// The main loop, until stopped or the party is gone.
    async fn follow(&mut self, member: &GroupMember, membership: &mut zk_recipes_nodes::MemberEvents) {
        let far = Duration::from_secs(365 * 24 * 3600);
        let framework = self.config.framework.clone();
        loop {
            let settle_at =
                if self.settled { Instant::now() + far } else { self.changed_at + self.config.settle };
            tokio::select! {
                biased;
                () = self.stop.cancelled() => return,
                // Its holds end with it (reported lost by their keepers); nothing more can be held.
                () = framework.closing() => return,
                report = self.report_inbox.recv() => {
                    // We hold a sender ourselves: the inbox never ends.
                    if let Some(report) = report {
                        self.on_reports(report).await;
                    }
                }
                event = membership.next() => match event {
                    None => return,
                    Some(MemberEvent::Changed { .. }) => {}
                    Some(event) => {
                        tracing::debug!(?event, "the party changed");
                        self.unsettle().await;
                    }
                },
                Some(acquired) = self.pending.join_next(), if !self.pending.is_empty() => {
                    self.on_acquired(acquired);
                }
                () = tokio::time::sleep_until(settle_at), if !self.settled => self.rebalance(member),
            }
        }
    }

    /// The party changed (or an item was lost): nothing moves until it settles again. Lock waits
    /// under way are given up (their nodes go to the framework's cleanup worker), so an item
    /// never arrives while the party is changing (kazoo#259: a change during the last lock wait
    /// must not be missed).
    async fn unsettle(&mut self) {
        self.settled = false;
        self.changed_at = Instant::now();
        if !self.pending.is_empty() {
            self.pending.shutdown().await;
        }
        self.pending_items.clear();
    }

    /// Who a party member is: its identifier (kazoo's `ShallowParty`: the text after the first
    /// `-` of the node name).
    fn worker_of(&self, member_name: &str) -> String {
        match self.config.layout {
            PartitionLayout::Kazoo => {
                member_name.find('-').map_or(member_name, |dash| &member_name[dash + 1..]).to_owned()
            }
            _ => member_name.to_owned(),
        }
    }

    /// The party has been unchanged for the settle time: deal the items, release what is no
    /// longer ours, wait for what is.
    fn rebalance(&mut self, member: &GroupMember) {
        self.settled = true;
        let workers: Vec<String> = member.current_members().keys().map(|name| self.worker_of(name)).collect();
        let identifier = &self.config.identifier;
        let share = match self.config.layout {
            PartitionLayout::Kazoo => kazoo_share(&self.config.items, &workers, identifier),
            _ => balanced_share(&self.config.items, &workers, identifier),
        };
        tracing::debug!(?workers, share = share.len(), "the party settled");
        for (item, held) in &mut self.held {
            if !share.contains(item) {
                if let Some(release) = held.release.take() {
                    tracing::debug!(item, "releasing: it moves");
                    held.owned.end();
                    let _ = release.send(());
                }
            }
        }
        for item in &share {
            if !self.held.contains_key(item) && !self.pending_items.contains(item) {
                self.start_acquire(item.clone(), Duration::ZERO);
            }
        }
        self.share = share;
    }

    /// Waits for `item`'s lock (after `delay`), as long as it takes, in a task the next change of
    /// the party cancels.
    fn start_acquire(&mut self, item: String, delay: Duration) {
        let Some(mutex) = self.mutexes.get(&item).cloned() else { return };
        self.pending_items.insert(item.clone());
        self.pending.spawn(
            async move {
                if !delay.is_zero() {
                    tokio::time::sleep(delay).await;
                }
                let acquired = mutex.lock().await;
                (item, acquired)
            }
            .in_current_span(),
        );
    }

    fn on_acquired(&mut self, first: Result<Acquired, JoinError>) {
        let mut acquired = Vec::new();
        let mut next = Some(first);
        while let Some(joined) = next.take() {
            match joined {
                Ok((item, Ok(guard))) => {
                    self.pending_items.remove(&item);
                    acquired.push(self.keep(item, guard));
                }
                Ok((item, Err(err))) => {
                    self.pending_items.remove(&item);
                    tracing::warn!(item, %err, "waiting for the item's lock failed; trying again");
                    if self.settled && self.share.contains(&item) && !self.config.framework.is_closing() {
                        self.start_acquire(item, RETRY_PAUSE);
                    }
                }
                Err(err) => tracing::debug!(%err, "a lock wait ended"),
            }
            next = self.pending.try_join_next();
        }
        if !acquired.is_empty() {
            tracing::debug!(items = ?acquired.iter().map(OwnedItem::item).collect::<Vec<_>>(), "acquired");
            self.shared.emit(PartitionEvent::Acquired(acquired));
        }
    }

    /// Hands a held item to its keeper.
    fn keep(&mut self, item: String, guard: MutexGuard) -> OwnedItem {
        let owned = OwnedItem::new(item.clone(), guard.fencing_token());
        let (release, released) = oneshot::channel();
        self.shared.owned.lock().insert(item.clone(), owned.clone());
        self.held.insert(item, Held { owned: owned.clone(), release: Some(release) });
        tokio::spawn(
            keeper(self.shared.clone(), owned.clone(), guard, released, self.reports.clone())
                .in_current_span(),
        );
        owned
    }

    async fn on_reports(&mut self, first: Report) {
        let (mut released, mut lost) = (Vec::new(), Vec::new());
        let mut next = Some(first);
        while let Some(report) = next.take() {
            let ours = self
                .held
                .get(&report.item)
                .is_some_and(|held| held.owned.fencing_token() == report.fencing_token);
            if ours {
                self.held.remove(&report.item);
                match report.outcome {
                    Outcome::Released => released.push(report.item),
                    Outcome::Lost(reason) => {
                        tracing::warn!(item = report.item, ?reason, "lost the item's lock");
                        lost.push(report.item);
                    }
                }
            }
            next = self.report_inbox.try_recv().ok();
        }
        if !released.is_empty() {
            self.shared.emit(PartitionEvent::Released(released.clone()));
        }
        if !lost.is_empty() {
            self.shared.emit(PartitionEvent::Lost(lost));
            // Our view of the party is not to be trusted either: settle again before anything moves.
            self.unsettle().await;
        } else if self.settled {
            // Released, yet ours again under the party as it settled since: wait for it again.
            for item in released {
                if self.share.contains(&item) && !self.pending_items.contains(&item) {
                    self.start_acquire(item, Duration::ZERO);
                }
            }
        }
    }

    /// Releases everything, leaves the party, ends the events.
    async fn shut_down(mut self, member: GroupMember) {
        if !self.pending.is_empty() {
            self.pending.shutdown().await;
        }
        for held in self.held.values_mut() {
            if let Some(release) = held.release.take() {
                held.owned.end();
                let _ = release.send(());
            }
        }
        let (mut released, mut lost) = (Vec::new(), Vec::new());
        while !self.held.is_empty() {
            let Some(report) = self.report_inbox.recv().await else { break };
            if self.held.remove(&report.item).is_some() {
                match report.outcome {
                    Outcome::Released => released.push(report.item),
                    Outcome::Lost(_) => lost.push(report.item),
                }
            }
        }
        if !lost.is_empty() {
            self.shared.emit(PartitionEvent::Lost(lost));
        }
        if !released.is_empty() {
            self.shared.emit(PartitionEvent::Released(released));
        }
        if let Err(err) = member.close().await {
            tracing::debug!(%err, "leaving the party failed; our member node ends with our session");
        }
        self.shared.finish();
        tracing::debug!("closed");
    }
}

/// Owns one held item: runs its work (once [`Partitioner::run`](crate::Partitioner::run) gave
/// some), and when told to release or when the lock is lost, stops the work, waits for it to
/// finish, then releases (or drops) the lock, and reports.
async fn keeper(
    shared: Arc<Shared>,
    owned: OwnedItem,
    guard: MutexGuard,
    mut release: oneshot::Receiver<()>,
    reports: mpsc::UnboundedSender<Report>,
) {
    let mut work = shared.work.subscribe();
    let mut task = None;
    let outcome = loop {
        if task.is_none() {
            if let Some(work) = work.borrow_and_update().clone() {
                task = Some(tokio::spawn(work(owned.item().to_owned(), owned.fencing_token())));
            }
        }
        tokio::select! {
            biased;
            reason = guard.lost() => break Outcome::Lost(reason),
            _ = &mut release => break Outcome::Released,
            changed = work.changed(), if task.is_none() => {
                if changed.is_err() {
                    // The partitioner is gone: it released us already, or will.
                    std::future::pending::<()>().await;
                }
            }
        }
    };
    {
        let mut owned_now = shared.owned.lock();
        if owned_now.get(owned.item()).is_some_and(|current| current.fencing_token() == owned.fencing_token())
        {
            owned_now.remove(owned.item());
        }
    }
    owned.end();
    if let Some(task) = task {
        task.abort();
        let _ = task.await;
    }
    match &outcome {
        Outcome::Released => {
            if let Err(err) = guard.release().await {
                tracing::debug!(item = owned.item(), %err, "releasing the item's lock failed; the cleanup worker deletes its node");
            }
        }
        // Its node (if its session lives on) goes to the framework's cleanup worker.
        Outcome::Lost(_) => drop(guard),
    }
    let _ =
        reports.send(Report { item: owned.item().to_owned(), fencing_token: owned.fencing_token(), outcome });
}
