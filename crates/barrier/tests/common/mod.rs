//! The double barrier tests' own helpers (members, enters and leaves in tasks), beside the shared
//! ones of `zk_recipes_test_support` (re-exported here).

use std::time::Duration;

use tokio::task::JoinHandle;
use zk_recipes_barrier::{BarrierError, DistributedDoubleBarrier, Entered, READY_NODE};
use zk_recipes_framework::{Deadline, Framework};

pub use zk_recipes_test_support::*;

/// A framework of its own (its own session) on `connect`.
pub fn framework(connect: &str, session_timeout: Duration) -> Framework {
    builder(connect, session_timeout).start().expect("framework")
}

/// The member nodes under `barrier_path` (its children but `ready`), sorted.
pub async fn members(framework: &Framework, barrier_path: &str) -> Vec<String> {
    let mut members: Vec<String> =
        children(framework, barrier_path).await.into_iter().filter(|child| child != READY_NODE).collect();
    members.sort();
    members
}

/// An `enter` with a [`STEP`] deadline, in a task.
pub fn spawn_enter(barrier: &DistributedDoubleBarrier) -> JoinHandle<Result<Entered, BarrierError>> {
    let barrier = barrier.clone();
    tokio::spawn(async move { barrier.enter(Deadline::after(STEP)).await })
}

/// A `leave` with a [`STEP`] deadline, in a task.
pub fn spawn_leave(entered: Entered) -> JoinHandle<Result<(), BarrierError>> {
    tokio::spawn(async move { entered.leave(Deadline::after(STEP)).await })
}

/// Asserts the task is still running after [`STILL_WAITING`].
pub async fn assert_still_waiting<T>(what: &str, task: &mut JoinHandle<T>) {
    assert!(tokio::time::timeout(STILL_WAITING, task).await.is_err(), "{what}: ended early");
}

/// The task's successful result, within [`STEP`].
pub async fn finished<T>(what: &str, task: JoinHandle<Result<T, BarrierError>>) -> T {
    within(what, task).await.expect("task").unwrap_or_else(|err| panic!("{what}: {err}"))
}
