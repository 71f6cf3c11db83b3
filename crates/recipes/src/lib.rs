//! # zk-recipes
//!
//! Apache Curator's ZooKeeper recipes in Rust, wire-compatible with Curator. This umbrella crate
//! re-exports the separate crates; depend on them one by one if you prefer.
//!
//! | module | crate | what |
//! |---|---|---|
//! | [`framework`] | `zk-recipes-framework` | session owner: connection states, session re-creation, retry policies, paths, protected creates |
//! | `lock_internals` (feature `lock-internals`) | `zk-recipes-lock-internals` | the one lock driver: Curator's contender order, one watched predecessor |
//! | `mutex` (feature `mutex`, default) | `zk-recipes-mutex` | mutex, Curator's `InterProcessMutex`; reentrant through `guard.reenter()` (every `lock()` queues) |
//! | `semaphore` (feature `semaphore`, default) | `zk-recipes-semaphore` | semaphore and semaphore mutex, Curator's `InterProcessSemaphoreV2` / `InterProcessSemaphoreMutex` |
//! | `rwlock` (feature `rwlock`, default) | `zk-recipes-rwlock` | read-write lock, Curator's `InterProcessReadWriteLock`, with a safe downgrade |
//! | `leader` (feature `leader`, default) | `zk-recipes-leader` | leader latch and leader selector, Curator's `LeaderLatch` / `LeaderSelector` |
//! | `cache` (feature `cache`, default) | `zk-recipes-cache` | a node or subtree cache kept by one persistent recursive watch, Curator's `CuratorCache` (and `TreeCache` / `PathChildrenCache` / `NodeCache`) |
//! | `nodes` (feature `nodes`, default) | `zk-recipes-nodes` | a node kept present through deletes and session loss, a TTL node kept alive while its process runs, group membership: Curator's `PersistentNode`, `PersistentTtlNode`, `GroupMember` |
//! | `counter` (feature `counter`, default) | `zk-recipes-counter` | shared values and atomic counters, Curator's `SharedCount` / `SharedValue` and `DistributedAtomicLong` / `DistributedAtomicInteger` / `DistributedAtomicValue` (with `PromotedToLock`) |
//! | `barrier` (feature `barrier`, default) | `zk-recipes-barrier` | a barrier node to wait on and a double barrier of N members, Curator's `DistributedBarrier` / `DistributedDoubleBarrier` |
//! | `discovery` (feature `discovery`, default) | `zk-recipes-discovery` | service discovery in Curator's znodes and JSON, byte for byte: register, update, unregister, query instances that Java services see, and see theirs; Curator's `ServiceDiscovery` / `ServiceInstance` / `UriSpec` / `ServiceCache` / `ServiceProvider` |
//! | `lease` (feature `lease`, default) | `zk-recipes-lease` | a lease held for a duration across processes, with a fencing token: natively on a TTL node (the server's clock), or in kazoo's `NonBlockingLease` / `MultiNonBlockingLease` layout (client clocks) |
//! | `partition` (feature `partition`, default) | `zk-recipes-partition` | a work partitioner: workers share a set of items, each item owned by exactly one worker at a time through a lock (fencing token, `lost` signal, one task per item), moved only once the party has settled; kazoo's `SetPartitioner` layout as an option |
//! | `queue` (feature `queue`, default) | `zk-recipes-queue` | distributed, priority, delay and id queues (at most once, or lock-safe at least once) and the simple queue, Curator's `DistributedQueue` family / `SimpleDistributedQueue` |
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes::framework::Framework;
//!
//! # async fn demo() -> zk_recipes::framework::Result<()> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! framework.block_until_connected(Duration::from_secs(10)).await?;
//! # Ok(()) }
//! ```

#![cfg_attr(docsrs, feature(doc_cfg))]

#[cfg(feature = "barrier")]
#[cfg_attr(docsrs, doc(cfg(feature = "barrier")))]
#[doc(inline)]
pub use zk_recipes_barrier as barrier;
#[cfg(feature = "cache")]
#[cfg_attr(docsrs, doc(cfg(feature = "cache")))]
#[doc(inline)]
pub use zk_recipes_cache as cache;
#[cfg(feature = "counter")]
#[cfg_attr(docsrs, doc(cfg(feature = "counter")))]
#[doc(inline)]
pub use zk_recipes_counter as counter;
#[cfg(feature = "discovery")]
#[cfg_attr(docsrs, doc(cfg(feature = "discovery")))]
#[doc(inline)]
pub use zk_recipes_discovery as discovery;
#[doc(inline)]
pub use zk_recipes_framework as framework;
#[cfg(feature = "leader")]
#[cfg_attr(docsrs, doc(cfg(feature = "leader")))]
#[doc(inline)]
pub use zk_recipes_leader as leader;
#[cfg(feature = "lease")]
#[cfg_attr(docsrs, doc(cfg(feature = "lease")))]
#[doc(inline)]
pub use zk_recipes_lease as lease;
#[cfg(feature = "lock-internals")]
#[cfg_attr(docsrs, doc(cfg(feature = "lock-internals")))]
#[doc(inline)]
pub use zk_recipes_lock_internals as lock_internals;
#[cfg(feature = "mutex")]
#[cfg_attr(docsrs, doc(cfg(feature = "mutex")))]
#[doc(inline)]
pub use zk_recipes_mutex as mutex;
#[cfg(feature = "nodes")]
#[cfg_attr(docsrs, doc(cfg(feature = "nodes")))]
#[doc(inline)]
pub use zk_recipes_nodes as nodes;
#[cfg(feature = "partition")]
#[cfg_attr(docsrs, doc(cfg(feature = "partition")))]
#[doc(inline)]
pub use zk_recipes_partition as partition;
#[cfg(feature = "queue")]
#[cfg_attr(docsrs, doc(cfg(feature = "queue")))]
#[doc(inline)]
pub use zk_recipes_queue as queue;
#[cfg(feature = "rwlock")]
#[cfg_attr(docsrs, doc(cfg(feature = "rwlock")))]
#[doc(inline)]
pub use zk_recipes_rwlock as rwlock;
#[cfg(feature = "semaphore")]
#[cfg_attr(docsrs, doc(cfg(feature = "semaphore")))]
#[doc(inline)]
pub use zk_recipes_semaphore as semaphore;
