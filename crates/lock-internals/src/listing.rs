//! Shared listings: the acquires of one session that need a listing of the same lock directory
//! at the same time share one request, sorted once, instead of each sending its own.
//!
//! Every acquire lists the directory after its node is created, to find the node to wait behind.
//! With N acquires of one process queueing on one lock at once, that is N listings of up to N
//! names each: O(N²) names for the server to send and for this process to decode and sort, and
//! as much transient memory. Here an acquire joins the next *round*: one listing, sent after
//! every acquire in the round asked for it (so it holds every node they created before asking,
//! as ZooKeeper runs one session's requests in order), and sorted once. A round runs while the
//! previous one is in flight, so a lone acquire waits for nobody.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use futures::future::join_all;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use zk_recipes_framework::{Deadline, Error as FrameworkError, Framework};

use crate::driver::{sort_children_by, LockDriver};

/// Children of a lock directory, sorted by the driver's sort key.
pub(crate) type SortedChildren = Arc<Vec<String>>;

/// A round's outcome: the sorted children, `None` if the directory is gone.
type Listed = Result<Option<SortedChildren>, FrameworkError>;

/// Whose listings may be shared: one framework's session, one directory, one driver (drivers
/// sort differently; drivers are shared between locks of one kind, see `Mutex::new`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Key {
    framework: usize,
    generation: u64,
    dir: String,
    driver: usize,
}

/// The acquires waiting for the next round of one key.
#[derive(Default)]
struct Rounds {
    waiting: Vec<oneshot::Sender<Listed>>,
    /// A task is running rounds for this key.
    running: bool,
}

static ROUNDS: LazyLock<Mutex<HashMap<Key, Rounds>>> = LazyLock::new(Default::default);

/// Each lock's "a pipelined enqueue is in flight" flag, by framework, directory (its hash: no
/// allocation per lock) and driver, so that every `LockInternals` of one lock (clones, or
/// instances made for the same path) shares one. Two directories with one hash share a flag,
/// which only makes one of them list in a round. Entries of dropped locks are pruned as the
/// map grows.
static PIPELINED: LazyLock<Mutex<FlagRegistry>> = LazyLock::new(Default::default);

#[derive(Default)]
struct FlagRegistry {
    flags: HashMap<PipelinedKey, Weak<AtomicBool>>,
    /// Dead entries are pruned when the map reaches this size.
    prune_at: usize,
}

/// What identifies a lock for its pipelined flag: its framework, its directory's hash and its
/// driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct PipelinedKey {
    framework: usize,
    dir_hash: u64,
    driver: usize,
}

/// A lock's flag, set while one of its enqueues creates with a listing of its own: found once,
/// when the lock is made, so that an acquire only flips an atomic.
#[derive(Debug, Clone)]
pub(crate) struct PipelinedFlag(Arc<AtomicBool>);

impl PipelinedFlag {
    /// The flag of the lock at `dir`, shared with every other lock of `framework` and `driver` there.
    pub(crate) fn of(framework: &Framework, dir: &str, driver: &Arc<dyn LockDriver>) -> Self {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        const MIN_PRUNE_AT: usize = 1024;
        let key = PipelinedKey {
            framework: framework.instance(),
            dir_hash: BuildHasherDefault::<DefaultHasher>::default().hash_one(dir),
            driver: driver_identity(driver),
        };
        let mut registry = PIPELINED.lock();
        if let Some(flag) = registry.flags.get(&key).and_then(Weak::upgrade) {
            return PipelinedFlag(flag);
        }
        if registry.flags.len() >= registry.prune_at {
            registry.flags.retain(|_, flag| flag.strong_count() > 0);
            registry.prune_at = (registry.flags.len() * 2).max(MIN_PRUNE_AT);
        }
        let flag = Arc::new(AtomicBool::new(false));
        registry.flags.insert(key, Arc::downgrade(&flag));
        PipelinedFlag(flag)
    }

    /// Marks an enqueue that lists with its create, unless another such enqueue of this lock is in
    /// flight (`None`: create alone, then join a round).
    pub(crate) fn start(&self) -> Option<Pipelined<'_>> {
        let claimed = self.0.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok();
        // Made only when claimed (`then`, not `then_some`): a `Pipelined` made and dropped here
        // would take another enqueue's mark away.
        claimed.then(|| Pipelined(&self.0))
    }
}

fn driver_identity(driver: &Arc<dyn LockDriver>) -> usize {
    Arc::as_ptr(driver) as *const () as usize
}

/// The sorted children of `dir`, listed on the session of `generation` by a request sent after
/// this call began, shared with the other callers for the same framework, session, directory
/// and driver. `Ok(None)` if `dir` does not exist.
///
/// # Errors
/// [`FrameworkError::SessionLost`] once that session is gone, [`FrameworkError::Closed`]; as
/// [`Framework::children_on_session`] otherwise.
pub(crate) async fn sorted_children(
    framework: &Framework,
    generation: u64,
    dir: &str,
    driver: &Arc<dyn LockDriver>,
) -> Listed {
    let key = Key {
        framework: framework.instance(),
        generation,
        dir: dir.to_owned(),
        driver: driver_identity(driver),
    };
    let (sender, receiver) = oneshot::channel();
    let start = {
        let mut rounds = ROUNDS.lock();
        let entry = rounds.entry(key.clone()).or_default();
        entry.waiting.push(sender);
        !std::mem::replace(&mut entry.running, true)
    };
    if start {
        tokio::spawn(run_rounds(key, framework.clone(), driver.clone()));
    }
    receiver.await.unwrap_or(Err(FrameworkError::Closed))
}

/// Runs rounds for `key` until nobody waits: each takes everyone waiting, lists once, sorts once
/// and answers them all.
async fn run_rounds(key: Key, framework: Framework, driver: Arc<dyn LockDriver>) {
    loop {
        let mut round = {
            let mut rounds = ROUNDS.lock();
            let entry = rounds.get_mut(&key).expect("the key of a running round stays until it ends");
            entry.waiting.retain(|sender| !sender.is_closed());
            if entry.waiting.is_empty() {
                rounds.remove(&key);
                return;
            }
            std::mem::take(&mut entry.waiting)
        };
        // Sent now: after every acquire of this round asked (and so after its create).
        let listing = framework.children_on_session(key.generation, &key.dir, Deadline::never());
        let everyone_gone = join_all(round.iter_mut().map(|sender| sender.closed()));
        let listed = tokio::select! {
            listed = listing => listed,
            _ = everyone_gone => continue,
        };
        let listed = listed.map(|children| {
            children.map(|children| Arc::new(sort_children_by(children, |child| driver.sort_key(child))))
        });
        for sender in round {
            let _ = sender.send(listed.clone());
        }
    }
}

/// An enqueue whose create carries its own listing, marked while it is in flight: the mark is
/// taken away when this is dropped.
pub(crate) struct Pipelined<'a>(&'a AtomicBool);

impl Drop for Pipelined<'_> {
    fn drop(&mut self) {
        self.0.store(false, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::driver::StandardDriver;
    use zk_recipes_testing::within;

    #[tokio::test]
    async fn the_locks_of_one_framework_directory_and_driver_share_one_pipelined_flag() {
        // Never connects: the flag needs only the framework's identity.
        let framework = Framework::builder("127.0.0.1:1").start().expect("framework");
        let other_framework = Framework::builder("127.0.0.1:1").start().expect("framework");
        let driver: Arc<dyn LockDriver> = Arc::new(StandardDriver::new("lock-"));
        let other_driver: Arc<dyn LockDriver> = Arc::new(StandardDriver::new("lock-"));

        let flag = PipelinedFlag::of(&framework, "/app/lock", &driver);
        let same_lock = PipelinedFlag::of(&framework, "/app/lock", &driver);
        let first = flag.start().expect("nothing is in flight yet");
        assert!(same_lock.start().is_none(), "a second lock at the same path shares the flag");
        assert!(flag.clone().start().is_none(), "so does a clone");
        for independent in [
            PipelinedFlag::of(&framework, "/app/other", &driver),
            PipelinedFlag::of(&other_framework, "/app/lock", &driver),
            PipelinedFlag::of(&framework, "/app/lock", &other_driver),
        ] {
            assert!(independent.start().is_some(), "another directory, framework or driver has its own flag");
        }
        drop(first);
        assert!(same_lock.start().is_some(), "the mark goes with the enqueue that took it");

        within("close", framework.close()).await;
        within("close", other_framework.close()).await;
    }

    #[tokio::test]
    async fn the_flags_of_dropped_locks_are_pruned_as_the_registry_grows() {
        let framework = Framework::builder("127.0.0.1:1").start().expect("framework");
        let driver: Arc<dyn LockDriver> = Arc::new(StandardDriver::new("lock-"));
        let live = PipelinedFlag::of(&framework, "/prune/live", &driver);
        for index in 0..5_000 {
            drop(PipelinedFlag::of(&framework, &format!("/prune/dropped-{index}"), &driver));
        }
        let size = PIPELINED.lock().flags.len();
        // Other tests may hold flags of their own in this process; a few, never thousands.
        assert!(size < 2_500, "dead entries are pruned: {size} left");
        let _held = live.start().expect("the live flag survives the pruning");
        assert!(PipelinedFlag::of(&framework, "/prune/live", &driver).start().is_none());
        within("close", framework.close()).await;
    }
}
