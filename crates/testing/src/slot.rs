//! The process-wide "one set of servers at a time" lock.

use tokio::sync::{Mutex, MutexGuard};

/// The one slot; a tokio mutex works across the per-test runtimes of a test binary.
static SLOT: Mutex<()> = Mutex::const_new(());

/// Permission to run ZooKeeper servers in this process.
///
/// Test binaries run their tests on parallel threads, on machines that may have two cores, so every
/// [`TestingServer`](crate::TestingServer) and [`TestingCluster`](crate::TestingCluster) holds the
/// one process-wide slot from start-up until it is dropped: tests that need servers run one after
/// another, tests that don't keep running in parallel.
///
/// **A test creates one server or one cluster.** Starting a second one while the first is still
/// alive waits for a slot that is never freed (the cluster takes the slot once for all its
/// members). If a test truly needs two independent servers, it acquires the slot itself and
/// starts them with [`TestingServerBuilder::without_slot`](crate::TestingServerBuilder::without_slot).
///
/// Waiting for the slot has no deadline of its own: start servers outside a test's short
/// per-step timeouts, or give the start a generous one (other tests may hold the slot for a while).
///
/// The slot is per process: separate test binaries (which `cargo test` runs one after another)
/// each have their own.
///
/// # Example
/// ```no_run
/// # async fn demo() -> Result<(), zk_recipes_testing::TestingError> {
/// use zk_recipes_testing::{ServerSlot, TestingServer};
///
/// let slot = ServerSlot::acquire().await;
/// let first = TestingServer::builder().without_slot().start().await?;
/// let second = TestingServer::builder().without_slot().start().await?;
/// // ... use both ...
/// drop((first, second));
/// drop(slot);
/// # Ok(()) }
/// ```
#[must_use = "if unused the slot is immediately released"]
#[derive(Debug)]
pub struct ServerSlot {
    _guard: MutexGuard<'static, ()>,
}

impl ServerSlot {
    /// Waits (without a deadline, in FIFO order) until no other server or cluster runs in this
    /// process, and takes the slot.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled wait loses its place in the FIFO queue and holds nothing.
    pub async fn acquire() -> ServerSlot {
        ServerSlot { _guard: SLOT.lock().await }
    }

    /// Takes the slot if it is free right now.
    ///
    /// # Example
    /// ```
    /// let slot = zk_recipes_testing::ServerSlot::try_acquire();
    /// assert!(slot.is_some());
    /// assert!(zk_recipes_testing::ServerSlot::try_acquire().is_none());
    /// ```
    pub fn try_acquire() -> Option<ServerSlot> {
        SLOT.try_lock().ok().map(|guard| ServerSlot { _guard: guard })
    }
}
