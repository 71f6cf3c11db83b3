//! Shared listings: the acquires of one session that need a listing of the same lock directory
//! at the same time share one request, sorted once, instead of each sending its own.
//!
//! Every acquire lists the directory after its node is created, to find the node to wait behind.
//! With N acquires of one process queueing on one lock at once, that is N listings of up to N
//! names each: O(N²) names for the server to send and for this process to decode and sort, and
//! as much transient memory. Here an acquire joins the next *round*: one listing, sent after
//! every acquire in the round asked for it (so it holds every node they created before asking,
//! as ZooKeeper runs one session's requests in order), and sorted once. A round runs while the
//! previous one is in flight, so a lone acquire waits for nobody. An acquire that finds no round
//! going lists on its own, on its own task (most listings: a waiter listing again after its
//! wake); acquires that ask meanwhile gather for the round after it.

use std::collections::hash_map::Entry;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, LazyLock, Weak};

use futures::future::join_all;
use parking_lot::Mutex;
use tokio::sync::oneshot;
use zk_recipes_framework::{Deadline, Error as FrameworkError, Framework};

use crate::driver::LockDriver;

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
type Waiting = Vec<oneshot::Sender<Listed>>;

/// The keys someone lists for (a lone caller, or a task running rounds), with who waits for the
/// next round: a key is here exactly while its listings run.
static ROUNDS: LazyLock<Mutex<HashMap<Key, Waiting>>> = LazyLock::new(Default::default);

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
    let joined = {
        let mut rounds = ROUNDS.lock();
        match rounds.entry(key) {
            // Nobody lists: list alone, here. Whoever asks meanwhile waits for the next round.
            Entry::Vacant(vacant) => {
                let key = vacant.key().clone();
                vacant.insert(Waiting::new());
                Joined::Alone(key)
            }
            // Someone lists: wait for the next round, which they run.
            Entry::Occupied(mut occupied) => {
                let (sender, receiver) = oneshot::channel();
                occupied.get_mut().push(sender);
                Joined::Round(receiver)
            }
        }
    };
    match joined {
        Joined::Alone(key) => list_alone(key, framework, driver).await,
        Joined::Round(receiver) => receiver.await.unwrap_or(Err(FrameworkError::Closed)),
    }
}

/// How a caller of [`sorted_children`] found its key.
enum Joined {
    /// Nobody was listing: the caller lists alone.
    Alone(Key),
    /// Someone lists: the caller waits for the next round's answer.
    Round(oneshot::Receiver<Listed>),
}

/// One listing for one caller, who found nobody listing for `key` and put it in [`ROUNDS`]: on
/// the caller's task, without a task or channel of its own. Afterwards, or if the caller gives up,
/// whoever asked meanwhile gets the rounds that follow.
async fn list_alone(key: Key, framework: &Framework, driver: &Arc<dyn LockDriver>) -> Listed {
    let hand_over = HandOver { key, framework, driver };
    let key = &hand_over.key;
    let listed = framework.children_on_session(key.generation, &key.dir, Deadline::never()).await;
    drop(hand_over);
    listed.map(|children| children.map(|children| sort(children, driver)))
}

/// Ends a lone listing (see [`list_alone`]): runs rounds for whoever asked meanwhile, or forgets
/// the key if nobody did.
struct HandOver<'a> {
    key: Key,
    framework: &'a Framework,
    driver: &'a Arc<dyn LockDriver>,
}

impl Drop for HandOver<'_> {
    fn drop(&mut self) {
        let mut rounds = ROUNDS.lock();
        if rounds.get(&self.key).is_none_or(Vec::is_empty) {
            rounds.remove(&self.key);
            return;
        }
        drop(rounds);
        match tokio::runtime::Handle::try_current() {
            Ok(runtime) => {
                runtime.spawn(run_rounds(self.key.clone(), self.framework.clone(), self.driver.clone()));
            }
            // Outside a runtime (its shutdown) nobody can run rounds: dropping the key's waiters
            // ends their receivers, and their listings with `Closed`.
            Err(_) => {
                ROUNDS.lock().remove(&self.key);
            }
        }
    }
}

/// The children in the driver's order, shared by everyone in a round.
fn sort(children: Vec<String>, driver: &Arc<dyn LockDriver>) -> SortedChildren {
    Arc::new(driver.sort_children(children))
}

/// Runs rounds for `key` until nobody waits: each takes everyone waiting, lists once, sorts once
/// and answers them all.
async fn run_rounds(key: Key, framework: Framework, driver: Arc<dyn LockDriver>) {
    loop {
        let mut round = {
            let mut rounds = ROUNDS.lock();
            let waiting = rounds.get_mut(&key).expect("the key of a running round stays until it ends");
            waiting.retain(|sender| !sender.is_closed());
            if waiting.is_empty() {
                rounds.remove(&key);
                return;
            }
            std::mem::take(waiting)
        };
        // Sent now: after every acquire of this round asked (and so after its create).
        let listing = framework.children_on_session(key.generation, &key.dir, Deadline::never());
        let everyone_gone = join_all(round.iter_mut().map(|sender| sender.closed()));
        let listed = tokio::select! {
            listed = listing => listed,
            _ = everyone_gone => continue,
        };
        let listed = listed.map(|children| children.map(|children| sort(children, &driver)));
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
    use std::time::Duration;
    use zk_recipes_testing::{eventually, within, within_for, FaultProxy, TestingServer, SERVER_START, STEP};

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

    /// A caller that lists alone and gives up while its listing is in flight leaves whoever asked
    /// meanwhile to a round of their own: they get their listing, and the key is forgotten after.
    #[tokio::test]
    async fn a_lone_listing_given_up_midway_hands_whoever_asked_meanwhile_to_a_round() {
        const DIR: &str = "/listing-hand-over/lock";
        let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
        let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
        let framework = Framework::builder(proxy.connect_string())
            .session_timeout(Duration::from_secs(20))
            .start()
            .expect("framework");
        within("connect", framework.block_until_connected(STEP)).await.expect("connected");
        within("the directory", framework.ensure_path(&format!("{DIR}/x-lock-0000000001"), STEP))
            .await
            .expect("the directory");
        let driver: Arc<dyn LockDriver> = Arc::new(StandardDriver::new("lock-"));
        let generation = framework.current().generation;
        let key = Key {
            framework: framework.instance(),
            generation,
            dir: DIR.to_owned(),
            driver: driver_identity(&driver),
        };
        let waiting = || ROUNDS.lock().get(&key).map(Vec::len);
        let list = || {
            let (framework, driver) = (framework.clone(), driver.clone());
            tokio::spawn(async move { sorted_children(&framework, generation, DIR, &driver).await })
        };

        proxy.black_hole(Duration::from_secs(120));
        let alone = list();
        eventually("the lone listing marks its key", || async { waiting() == Some(0) }).await;
        let asked_meanwhile = list();
        eventually("the second caller waits for a round", || async { waiting() == Some(1) }).await;
        alone.abort();
        let aborted = within("the abort", alone).await;
        assert!(aborted.is_err_and(|err| err.is_cancelled()), "the lone listing was given up");
        proxy.heal();

        let listed = within("the round", asked_meanwhile).await.expect("task").expect("listed");
        assert_eq!(listed.as_deref().map(Vec::as_slice), Some(&["x-lock-0000000001".to_owned()][..]));
        eventually("the key is forgotten", || async { waiting().is_none() }).await;
        within("close", framework.close()).await;
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
