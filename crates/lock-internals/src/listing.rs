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

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, LazyLock};

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

/// The enqueue in flight whose create carries a listing of its own, by framework, directory (its
/// hash: no allocation per acquire) and driver: while there is one, another enqueue creates alone
/// and joins a round. Two directories with one hash only make one of them list in a round.
static PIPELINED: LazyLock<Mutex<HashSet<PipelinedKey>>> = LazyLock::new(Default::default);

/// What marks a lock's pipelined enqueue in flight: its framework, its directory's hash and its
/// driver. Made once per lock, so an acquire hashes nothing more than the key itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PipelinedKey {
    framework: usize,
    dir_hash: u64,
    driver: usize,
}

impl PipelinedKey {
    pub(crate) fn new(framework: &Framework, dir: &str, driver: &Arc<dyn LockDriver>) -> Self {
        use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
        PipelinedKey {
            framework: framework.instance(),
            dir_hash: BuildHasherDefault::<DefaultHasher>::default().hash_one(dir),
            driver: driver_identity(driver),
        }
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

/// An enqueue whose create carries its own listing, marked while it is in flight.
pub(crate) struct Pipelined {
    key: PipelinedKey,
}

impl Pipelined {
    /// Marks an enqueue that lists with its create, unless another such enqueue is in flight for
    /// the same framework, directory and driver (`None`: create alone, then join a round).
    pub(crate) fn start(key: PipelinedKey) -> Option<Pipelined> {
        // Made only when inserted: a `Pipelined` dropped here would take another enqueue's mark
        // away (and lock the set while the statement above still holds it).
        let inserted = PIPELINED.lock().insert(key);
        if inserted {
            Some(Pipelined { key })
        } else {
            None
        }
    }
}

impl Drop for Pipelined {
    fn drop(&mut self) {
        PIPELINED.lock().remove(&self.key);
    }
}
