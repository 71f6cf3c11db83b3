//! Watching an election without joining it: [`ElectionObserver`] (etcd's `Observe`; Curator only
//! offers polling `getLeader()`).
//!
//! One recursive persistent watch on the election path (the framework's [`PersistentWatch`]) says
//! when something under it changed; the observer then reads the leader from the server the way
//! [`LeaderLatch::participants`](crate::LeaderLatch::participants) and Curator's `getLeader()` do
//! (the contenders in election order, the first whose node still exists leads) and reports it if
//! it differs from what it reported last.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use futures::Stream;
use tracing::debug;
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::{path, Deadline, Error as FrameworkError, Framework, PersistentWatch, WatchEvent};
use zk_recipes_lock_internals::{LockDriver, LockInternals, StandardDriver};

use crate::error::{LeaderError, Result};
use crate::latch::LATCH_NAME;
use crate::participant;
use crate::selector::SELECTOR_LOCK_NAME;

/// How long one read of the election may take before it is tried again.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

/// Which recipe's nodes an [`ElectionObserver`] reads: the layout decides how contenders sort.
///
/// ```
/// use zk_recipes_leader::{ElectionLayout, LATCH_NAME, SELECTOR_LOCK_NAME};
///
/// assert_eq!(ElectionLayout::Latch.node_name(), LATCH_NAME);
/// assert_eq!(ElectionLayout::Selector.node_name(), SELECTOR_LOCK_NAME);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ElectionLayout {
    /// A [`LeaderLatch`](crate::LeaderLatch) election (ours or Curator's): `_c_<uuid>-latch-<seq>`.
    Latch,
    /// A [`LeaderSelector`](crate::LeaderSelector) election (ours or Curator's), that is a
    /// Curator mutex on the path: `_c_<uuid>-lock-<seq>`.
    Selector,
}

impl ElectionLayout {
    /// The name the layout's nodes carry after the protected prefix: [`LATCH_NAME`] or
    /// [`SELECTOR_LOCK_NAME`].
    pub fn node_name(self) -> &'static str {
        match self {
            ElectionLayout::Latch => LATCH_NAME,
            ElectionLayout::Selector => SELECTOR_LOCK_NAME,
        }
    }
}

/// Who leads an election, as an [`ElectionObserver`] saw it on the server.
///
/// ```
/// use zk_recipes_leader::LeaderChange;
///
/// let change = LeaderChange::NoLeader;
/// assert_eq!(change.participant_id(), None);
/// assert!(!change.is_leader());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum LeaderChange {
    /// The contender whose node sorts first leads (or is about to: a latch claims leadership a
    /// moment after its node is first).
    Leader {
        /// Its participant id: the node's data as UTF-8 (invalid bytes replaced), as
        /// [`Participant::id`](crate::Participant::id) and Curator's `getLeader().getId()`.
        participant_id: String,
        /// The node's data as it is (what the leader proclaimed, or its id).
        data: Vec<u8>,
        /// The full path of the leader's node.
        node_path: String,
    },
    /// Nobody takes part (or the election path does not exist).
    NoLeader,
}

impl LeaderChange {
    /// Whether someone leads.
    pub fn is_leader(&self) -> bool {
        matches!(self, LeaderChange::Leader { .. })
    }

    /// The leader's participant id, if someone leads.
    pub fn participant_id(&self) -> Option<&str> {
        match self {
            LeaderChange::Leader { participant_id, .. } => Some(participant_id),
            LeaderChange::NoLeader => None,
        }
    }

    /// The leader's node path, if someone leads.
    pub fn node_path(&self) -> Option<&str> {
        match self {
            LeaderChange::Leader { node_path, .. } => Some(node_path),
            LeaderChange::NoLeader => None,
        }
    }

    /// The first of `nodes` (election order, with their data), or no leader.
    fn from_first(nodes: Vec<(String, Vec<u8>)>) -> Self {
        match nodes.into_iter().next() {
            Some((node_path, data)) => {
                LeaderChange::Leader { participant_id: participant::id_of(&data), data, node_path }
            }
            None => LeaderChange::NoLeader,
        }
    }
}

impl fmt::Display for LeaderChange {
    /// `leader <id> (<node path>)` or `no leader`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeaderChange::Leader { participant_id, node_path, .. } => {
                write!(f, "leader {participant_id:?} ({node_path})")
            }
            LeaderChange::NoLeader => f.write_str("no leader"),
        }
    }
}

/// Watches an election without taking part in it: every change of its leader, read from the
/// server (etcd's `Observe`). Creates no node; a Rust or Curator [`LeaderLatch`](crate::LeaderLatch)
/// or [`LeaderSelector`](crate::LeaderSelector) election alike.
///
/// [`next`](Self::next) first reports who leads now ([`LeaderChange::Leader`] or
/// [`LeaderChange::NoLeader`]), then each change: a different node first, or new data on the
/// leader's node ([`LeaderLatch::proclaim`](crate::LeaderLatch::proclaim),
/// [`Leadership::proclaim`](crate::Leadership::proclaim)). Never the same leader with the same data
/// twice in a row. Changes that follow each other quickly may be seen as one: the observer reports
/// the leader it reads, not every step in between.
///
/// # How it reads
/// One recursive persistent watch on the election path says when something under it changed
/// (a contender came or went, a node's data changed); the observer then lists the contenders and
/// reads them as [`LeaderLatch::participants`](crate::LeaderLatch::participants) does (Curator's
/// `getLeader()`: the first node in election order that still exists leads). A change to a
/// contender that sorts after the current leader cannot change the leader, and is not read.
///
/// # Connection loss and session expiry
/// The watch is in place before every read (set before the first one, and set again before the
/// read that follows a reconnection), so a change the server makes after a read always wakes the
/// observer. When the connection comes back on the same session, or a new session replaces
/// a lost one, the watch is set again and the election read again, so a change made meanwhile is
/// reported once the connection is back: what [`next`](Self::next) reports always ends at what
/// the server holds when things settle. While no session can be had, `next` waits. Reads that fail
/// are tried again (backing off from 50 ms to 1 s).
///
/// # Closing
/// Dropping the observer removes its watch from the server (see [`PersistentWatch`]). `next`
/// returns `None` once the framework is closed.
///
/// ```no_run
/// use zk_recipes_framework::Framework;
/// use zk_recipes_leader::{ElectionObserver, LeaderChange};
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let framework = Framework::builder("127.0.0.1:2181").start()?;
/// let mut observer = ElectionObserver::latch(&framework, "/services/billing/leader")?;
/// while let Some(change) = observer.next().await {
///     match change {
///         LeaderChange::Leader { participant_id, .. } => println!("{participant_id} leads"),
///         LeaderChange::NoLeader => println!("nobody leads"),
///         other => println!("{other}"),
///     }
/// }
/// # Ok(()) }
/// ```
pub struct ElectionObserver {
    path: String,
    layout: ElectionLayout,
    /// Reads the contenders, as the recipes' `participants()` do.
    contenders: LockInternals,
    /// The watch on the server; `None` until set (and again after a failed attempt).
    watch: Option<PersistentWatch>,
    /// Something may have changed since the last read: read again before waiting.
    stale: bool,
    /// What `next` reported last.
    last: Option<LeaderChange>,
    backoff: Backoff,
}

impl ElectionObserver {
    /// An observer of the election at `path` whose contenders have `layout`. Nothing is sent until
    /// [`next`](Self::next).
    ///
    /// # Errors
    /// [`LeaderError::Framework`] with an invalid path, before anything is sent.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_leader::Result<()> {
    /// use zk_recipes_leader::{ElectionLayout, ElectionObserver};
    ///
    /// let observer = ElectionObserver::new(&framework, "/app/scheduler", ElectionLayout::Selector)?;
    /// # Ok(()) }
    /// ```
    pub fn new(framework: &Framework, path: &str, layout: ElectionLayout) -> Result<Self> {
        let driver: Arc<dyn LockDriver> = Arc::new(StandardDriver::new(layout.node_name()));
        let contenders = LockInternals::new(framework, path, driver, 1)?;
        Ok(Self {
            path: path.to_owned(),
            layout,
            contenders,
            watch: None,
            stale: true,
            last: None,
            backoff: Backoff::default(),
        })
    }

    /// An observer of a [`LeaderLatch`](crate::LeaderLatch) election (ours or Curator's) at `path`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_leader::Result<()> {
    /// let observer = zk_recipes_leader::ElectionObserver::latch(&framework, "/app/leader")?;
    /// # Ok(()) }
    /// ```
    pub fn latch(framework: &Framework, path: &str) -> Result<Self> {
        Self::new(framework, path, ElectionLayout::Latch)
    }

    /// An observer of a [`LeaderSelector`](crate::LeaderSelector) election (ours or Curator's) at
    /// `path`.
    ///
    /// # Errors
    /// As [`new`](Self::new).
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_leader::Result<()> {
    /// let observer = zk_recipes_leader::ElectionObserver::selector(&framework, "/app/scheduler")?;
    /// # Ok(()) }
    /// ```
    pub fn selector(framework: &Framework, path: &str) -> Result<Self> {
        Self::new(framework, path, ElectionLayout::Selector)
    }

    /// The election's path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The layout the observer reads.
    pub fn layout(&self) -> ElectionLayout {
        self.layout
    }

    /// What [`next`](Self::next) reported last (`None` before the first report).
    pub fn last(&self) -> Option<&LeaderChange> {
        self.last.as_ref()
    }

    /// The next change of the election's leader; the first call reports the current one. `None`
    /// once the framework is closed.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled call loses no change. The next call reads the election again if
    /// the cancelled one was reading, and compares with what was last *reported*, so a change the
    /// cancelled call read but did not return is reported then.
    pub async fn next(&mut self) -> Option<LeaderChange> {
        loop {
            let Some(watch) = self.watch.as_mut() else {
                match self.contenders.framework().watch(&self.path, true, Deadline::never()).await {
                    Ok(watch) => {
                        self.watch = Some(watch);
                        self.stale = true;
                    }
                    Err(FrameworkError::Closed) => return None,
                    Err(err) => {
                        debug!(path = %self.path, %err, "setting the election watch failed; trying again");
                        self.backoff.pause().await;
                    }
                }
                continue;
            };
            if self.stale {
                match self.contenders.participants(Deadline::after(READ_TIMEOUT)).await {
                    Ok(nodes) => {
                        self.stale = false;
                        self.backoff.reset();
                        let current = LeaderChange::from_first(nodes);
                        if self.last.as_ref() != Some(&current) {
                            debug!(path = %self.path, %current, "the election's leader changed");
                            self.last = Some(current.clone());
                            return Some(current);
                        }
                    }
                    Err(err) => {
                        let err = LeaderError::from(err);
                        if err.is_closed() {
                            return None;
                        }
                        debug!(path = %self.path, %err, "reading the election failed; trying again");
                        self.backoff.pause().await;
                    }
                }
                continue;
            }
            match watch.next().await {
                None => return None,
                Some(event) => {
                    if self.may_change_leader(&event) {
                        self.stale = true;
                    }
                }
            }
        }
    }

    /// The same changes as a [`Stream`]; it ends once the framework is closed.
    ///
    /// ```no_run
    /// # async fn demo(observer: zk_recipes_leader::ElectionObserver) {
    /// use futures::StreamExt;
    ///
    /// let mut changes = observer.into_stream();
    /// while let Some(change) = changes.next().await {
    ///     println!("{change}");
    /// }
    /// # }
    /// ```
    pub fn into_stream(self) -> impl Stream<Item = LeaderChange> + Send + Unpin {
        Box::pin(futures::stream::unfold(self, |mut observer| async move {
            let change = observer.next().await?;
            Some((change, observer))
        }))
    }

    /// Whether `event` may change who leads or the leader's data, given what was read last.
    fn may_change_leader(&self, event: &WatchEvent) -> bool {
        let changed = match event {
            WatchEvent::Created { path } | WatchEvent::Deleted { path } => path,
            // The election node's own data is nobody's; a contender's is read below.
            WatchEvent::DataChanged { path } if *path == self.path => return false,
            WatchEvent::DataChanged { path } | WatchEvent::ChildrenChanged { path } => path,
            // A reset (changes may have been missed), or an event this code does not know.
            _ => return true,
        };
        if *changed == self.path {
            return true;
        }
        let (parent, name) = path::split(changed);
        if parent != self.path {
            // Deeper than a contender's node: no recipe keeps anything there.
            return false;
        }
        match &self.last {
            Some(LeaderChange::Leader { node_path, .. }) => {
                let driver = self.contenders.driver();
                let leader_key = driver.sort_key(path::name(node_path));
                // A node that sorts after the leader's changes neither who leads nor what the
                // leader's node holds.
                driver.sort_key(name) <= leader_key
            }
            _ => true,
        }
    }
}

impl fmt::Debug for ElectionObserver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ElectionObserver")
            .field("path", &self.path)
            .field("layout", &self.layout)
            .field("last", &self.last)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observer_with_leader(leader: Option<&str>) -> ElectionObserver {
        let framework = Framework::builder("127.0.0.1:1").start().expect("framework");
        let mut observer = ElectionObserver::latch(&framework, "/e").expect("observer");
        observer.last = Some(match leader {
            Some(name) => LeaderChange::Leader {
                participant_id: "a".into(),
                data: b"a".to_vec(),
                node_path: format!("/e/{name}"),
            },
            None => LeaderChange::NoLeader,
        });
        observer
    }

    #[tokio::test]
    async fn only_changes_that_may_move_the_leader_are_read() {
        let leader = "_c_a-latch-0000000005";
        let observer = observer_with_leader(Some(leader));
        let event = |kind: fn(String) -> WatchEvent, name: &str| kind(format!("/e/{name}"));
        let created = |path| WatchEvent::Created { path };
        let deleted = |path| WatchEvent::Deleted { path };
        let data = |path| WatchEvent::DataChanged { path };
        // The leader's node: gone, or new data.
        assert!(observer.may_change_leader(&event(deleted, leader)));
        assert!(observer.may_change_leader(&event(data, leader)));
        // A node before the leader's (a re-created election restarts its sequence).
        assert!(observer.may_change_leader(&event(created, "_c_b-latch-0000000001")));
        // Nodes after the leader's: followers come and go, and their data is not the leader's.
        assert!(!observer.may_change_leader(&event(created, "_c_c-latch-0000000009")));
        assert!(!observer.may_change_leader(&event(deleted, "_c_c-latch-0000000009")));
        assert!(!observer.may_change_leader(&event(data, "_c_c-latch-0000000009")));
        // The election node itself, a reset, and nodes below a contender.
        assert!(observer.may_change_leader(&WatchEvent::Deleted { path: "/e".into() }));
        assert!(!observer.may_change_leader(&WatchEvent::DataChanged { path: "/e".into() }));
        assert!(observer.may_change_leader(&WatchEvent::Reset));
        assert!(!observer.may_change_leader(&WatchEvent::Created { path: format!("/e/{leader}/x") }));
        // Without a leader, any contender may become one.
        let empty = observer_with_leader(None);
        assert!(empty.may_change_leader(&event(created, "_c_c-latch-0000000009")));
    }

    #[test]
    fn the_first_node_leads_and_its_data_is_the_id() {
        let change = LeaderChange::from_first(vec![
            ("/e/_c_a-latch-0000000001".into(), vec![b'x', 0xff]),
            ("/e/_c_b-latch-0000000002".into(), b"b".to_vec()),
        ]);
        assert_eq!(change.participant_id(), Some("x\u{fffd}"));
        assert_eq!(change.node_path(), Some("/e/_c_a-latch-0000000001"));
        assert_eq!(change.to_string(), "leader \"x\u{fffd}\" (/e/_c_a-latch-0000000001)");
        assert_eq!(LeaderChange::from_first(Vec::new()), LeaderChange::NoLeader);
        assert_eq!(LeaderChange::NoLeader.to_string(), "no leader");
    }
}
