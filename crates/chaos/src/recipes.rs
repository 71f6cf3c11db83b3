//! The recipes under test and where their nodes live.

use std::fmt;
use std::str::FromStr;

/// Where every recipe's lock nodes go (containers the recipes make; gone when the run ends).
pub const LOCK_ROOT: &str = "/chaos";
/// Where the queues go (persistent dirs the queue recipes make; deleted by the run).
pub const QUEUE_ROOT: &str = "/chaos-queues";
/// Where the checkers' own nodes go (guard markers, counters); made and deleted by the run.
pub const CHECK_ROOT: &str = "/chaos-check";

/// One recipe the contenders exercise.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Recipe {
    /// `InterProcessMutex` / `zk_recipes_mutex::Mutex`.
    Mutex,
    /// `InterProcessSemaphoreMutex` / `zk_recipes_semaphore::SemaphoreMutex`.
    SemaphoreMutex,
    /// `InterProcessSemaphoreV2` with [`SEMAPHORE_LEASES`] leases / `zk_recipes_semaphore::Semaphore`.
    Semaphore,
    /// `LeaderLatch` / `zk_recipes_leader::LeaderLatch`.
    Latch,
    /// `LeaderSelector` (auto-requeue) / `zk_recipes_leader::LeaderSelector`.
    Selector,
    /// `InterProcessReadWriteLock` / `zk_recipes_rwlock::RwLock`: every fourth acquisition of a
    /// session is a write ([`is_writer`]), the others reads.
    RwLock,
    /// One of four mutexes, `batch-0` to `batch-3` (`zk_recipes_mutex::Mutex`, Curator's layout), that the
    /// busy-session contenders take many at once on one session, so that its creates and deletes
    /// travel in batches; Rust only.
    Batch(u8),
    /// `Mutex::with_layout(.., LockLayout::ZooKeeperRecipe)` (busy sessions) beside a Java client
    /// of ZooKeeper's own lock recipe (`crates/chaos/java/ZkRecipeChaos.java`).
    ZooKeeperLock,
    /// `Mutex::with_layout(.., LockLayout::Kazoo)` (busy sessions) beside kazoo 2.11's `Lock`
    /// (`crates/chaos/python/kazoo_chaos.py`).
    KazooLock,
    /// `DistributedQueue` with a lock path (lock-safe) / `zk_recipes_queue::DistributedQueue`.
    Queue,
    /// `DistributedPriorityQueue` with a lock path / `zk_recipes_queue::DistributedPriorityQueue`.
    PriorityQueue,
}

/// Whether a read-write-lock holder `<tag>-<client>-<n>` writes: `n` divisible by 4 (the Curator
/// contender uses the same rule).
pub fn is_writer(holder: &str) -> bool {
    holder.rsplit('-').next().and_then(|n| n.parse::<u64>().ok()).is_some_and(|n| n % 4 == 0)
}

/// The semaphore's lease count.
pub const SEMAPHORE_LEASES: usize = 2;

/// Which contenders take a recipe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Contenders {
    /// The per-recipe contenders: Rust (one acquire per session at a time) and Curator.
    PerRecipe,
    /// Only the Rust busy-session contenders (many acquires at once on one session).
    Busy,
    /// The busy-session contenders and a Java client of ZooKeeper's lock recipe.
    BusyAndZooKeeperRecipe,
    /// The busy-session contenders and kazoo.
    BusyAndKazoo,
}

impl Recipe {
    /// Every lock recipe (the default run's rows): the per-recipe contenders' (Rust and Curator),
    /// then the busy sessions' ([`Recipe::contenders`]).
    pub const ALL: [Recipe; 12] = [
        Recipe::Mutex,
        Recipe::SemaphoreMutex,
        Recipe::Semaphore,
        Recipe::RwLock,
        Recipe::Latch,
        Recipe::Selector,
        Recipe::Batch(0),
        Recipe::Batch(1),
        Recipe::Batch(2),
        Recipe::Batch(3),
        Recipe::ZooKeeperLock,
        Recipe::KazooLock,
    ];

    /// The queues.
    pub const QUEUES: [Recipe; 2] = [Recipe::Queue, Recipe::PriorityQueue];

    /// Whether this is a queue (consumers, not holders).
    pub fn is_queue(self) -> bool {
        Self::QUEUES.contains(&self)
    }

    /// Which contenders take this recipe.
    pub fn contenders(self) -> Contenders {
        match self {
            Recipe::Batch(_) => Contenders::Busy,
            Recipe::ZooKeeperLock => Contenders::BusyAndZooKeeperRecipe,
            Recipe::KazooLock => Contenders::BusyAndKazoo,
            _ => Contenders::PerRecipe,
        }
    }

    /// The queue's lock path (lock-safe consumption) next to its path under `root`.
    pub fn queue_lock_path(self, root: &str) -> String {
        format!("{}-locks", self.lock_path(root))
    }

    /// The name used on the command line, in paths and in the contenders' logs.
    pub fn name(self) -> &'static str {
        match self {
            Recipe::Mutex => "mutex",
            Recipe::SemaphoreMutex => "semaphore-mutex",
            Recipe::Semaphore => "semaphore",
            Recipe::Latch => "latch",
            Recipe::Selector => "selector",
            Recipe::RwLock => "rwlock",
            Recipe::Batch(0) => "batch-0",
            Recipe::Batch(1) => "batch-1",
            Recipe::Batch(2) => "batch-2",
            Recipe::Batch(_) => "batch-3",
            Recipe::ZooKeeperLock => "zk-recipe",
            Recipe::KazooLock => "kazoo-lock",
            Recipe::Queue => "queue",
            Recipe::PriorityQueue => "priority",
        }
    }

    /// How many may hold at once.
    pub fn allowed_holders(self) -> usize {
        match self {
            Recipe::Semaphore => SEMAPHORE_LEASES,
            _ => 1,
        }
    }

    /// Whether `holder`'s holds are exclusive, so fencing tokens must grow from one write to the
    /// next and nobody else may write the counter meanwhile.
    pub fn is_exclusive(self, holder: &str) -> bool {
        match self {
            Recipe::RwLock => is_writer(holder),
            _ => self.allowed_holders() == 1,
        }
    }

    /// Whether `holder` holding at once with `others` breaks the recipe's rule.
    pub fn too_many<'a>(self, holder: &str, mut others: impl Iterator<Item = &'a str>) -> bool {
        match self {
            Recipe::RwLock => others.any(|other| is_writer(holder) || is_writer(other)),
            _ => others.count() + 1 > self.allowed_holders(),
        }
    }

    /// Whether `holder` increments the counter (readers of the read-write lock only read it).
    pub fn increments(self, holder: &str) -> bool {
        self != Recipe::RwLock || is_writer(holder)
    }

    /// The recipe's path (its lock dir) under `root`.
    pub fn lock_path(self, root: &str) -> String {
        format!("{root}/{}", self.name())
    }

    /// Whether `node` is this recipe's lock dir under `root` or below it.
    pub fn owns_node(self, root: &str, node: &str) -> bool {
        let path = self.lock_path(root);
        node.strip_prefix(&path).is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// Whether the other side may make the lock dir a persistent node (ZooKeeper's recipe and
    /// kazoo create missing parents as persistent nodes; our recipes and Curator as containers):
    /// the run deletes it once it is empty.
    pub fn lock_dir_may_be_persistent(self) -> bool {
        matches!(self, Recipe::ZooKeeperLock | Recipe::KazooLock)
    }

    /// The dir of the holders' guard markers under `check_root`.
    pub fn guard_dir(self, check_root: &str) -> String {
        format!("{check_root}/{}-guard", self.name())
    }

    /// The guard counter under `check_root`: `<count> <last fencing token> <last holder>`.
    pub fn counter_path(self, check_root: &str) -> String {
        format!("{check_root}/{}-counter", self.name())
    }
}

impl fmt::Display for Recipe {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Recipe {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        Recipe::ALL
            .into_iter()
            .chain(Recipe::QUEUES)
            .find(|recipe| recipe.name() == text)
            .ok_or_else(|| format!("unknown recipe {text:?}"))
    }
}

/// Recipes as one command-line value (`a,b,c`): a list parsed at once, not one per occurrence.
pub type RecipeList = Vec<Recipe>;

/// Parses `a,b,c` into recipes.
pub fn parse_list(text: &str) -> Result<RecipeList, String> {
    text.split(',').filter(|name| !name.is_empty()).map(str::parse).collect()
}

/// Parses a list of queues: as [`parse_list`], with `-` for none.
pub fn parse_queue_list(text: &str) -> Result<RecipeList, String> {
    parse_list(text.trim_start_matches('-'))
}

/// The guard counter's data: `<count> <token> <holder>`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CounterValue {
    /// Successful increments so far.
    pub count: u64,
    /// The fencing token of the last write (0 without locking).
    pub token: i64,
    /// Who wrote last.
    pub holder: String,
}

impl CounterValue {
    /// Parses the counter's data; empty data is the initial value.
    pub fn parse(data: &[u8]) -> Option<CounterValue> {
        let text = std::str::from_utf8(data).ok()?;
        let mut fields = text.split_whitespace();
        let Some(count) = fields.next() else {
            return Some(CounterValue { count: 0, token: 0, holder: String::new() });
        };
        Some(CounterValue {
            count: count.parse().ok()?,
            token: fields.next().unwrap_or("0").parse().ok()?,
            holder: fields.next().unwrap_or_default().to_owned(),
        })
    }

    /// The data written for this value.
    pub fn encode(&self) -> Vec<u8> {
        format!("{} {} {}", self.count, self.token, self.holder).into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for recipe in Recipe::ALL.into_iter().chain(Recipe::QUEUES) {
            assert_eq!(recipe.name().parse::<Recipe>(), Ok(recipe));
        }
        assert_eq!(parse_list("mutex,latch"), Ok(vec![Recipe::Mutex, Recipe::Latch]));
        assert_eq!(parse_list("batch-3,kazoo-lock"), Ok(vec![Recipe::Batch(3), Recipe::KazooLock]));
        assert!(parse_list("mutex,nope").is_err());
        assert!(parse_list("batch-4").is_err());
    }

    #[test]
    fn a_lock_dir_owns_its_nodes_not_its_namesakes() {
        assert!(Recipe::Semaphore.owns_node("/chaos", "/chaos/semaphore/leases/x"));
        assert!(Recipe::Semaphore.owns_node("/chaos", "/chaos/semaphore"));
        assert!(!Recipe::Semaphore.owns_node("/chaos", "/chaos/semaphore-mutex/x"));
        assert!(!Recipe::Batch(1).owns_node("/chaos", "/chaos/batch-0/x"));
    }

    #[test]
    fn read_write_rules() {
        assert!(is_writer("r0x1-1-8"));
        assert!(!is_writer("r0x1-1-9"));
        assert!(Recipe::RwLock.too_many("r0x1-1-8", ["j0x1-0-1"].into_iter()));
        assert!(Recipe::RwLock.too_many("r0x1-1-9", ["j0x1-0-4"].into_iter()));
        assert!(!Recipe::RwLock.too_many("r0x1-1-9", ["j0x1-0-5", "r1x1-0-7"].into_iter()));
        assert!(Recipe::Semaphore.too_many("a-0-1", ["b-0-1", "c-0-1"].into_iter()));
        assert!(!Recipe::Semaphore.too_many("a-0-1", ["b-0-1"].into_iter()));
    }

    #[test]
    fn counter_values_round_trip() {
        assert_eq!(
            CounterValue::parse(b""),
            Some(CounterValue { count: 0, token: 0, holder: String::new() })
        );
        let value = CounterValue { count: 7, token: 4_294_967_301, holder: "r1-2-9".to_owned() };
        assert_eq!(CounterValue::parse(&value.encode()), Some(value));
        assert_eq!(CounterValue::parse(b"x"), None);
    }
}
