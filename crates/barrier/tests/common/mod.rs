//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

#[path = "../../../framework/tests/common/shared.rs"]
mod shared;

use std::time::Duration;

use tokio::task::JoinHandle;
use zk_recipes_barrier::{BarrierError, DistributedDoubleBarrier, Entered, READY_NODE};
use zk_recipes_framework::{Deadline, Framework};

pub use shared::{builder, children, lost_then_reconnected};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};

/// How long an enter, leave or wait that must not end is given before a test says it did not.
pub const STILL_WAITING: Duration = Duration::from_millis(300);

/// A deadline of one [`STEP`].
pub fn step() -> Deadline {
    Deadline::after(STEP)
}

/// A framework of its own (its own session) on `connect`.
pub fn framework(connect: &str, session_timeout: Duration) -> Framework {
    builder(connect, session_timeout).start().expect("framework")
}

/// The current session's id, as nodes' `ephemeral_owner`.
pub fn session_of(framework: &Framework) -> i64 {
    framework.current().session_id.expect("a session").0
}

/// The node's data and ephemeral owner, if it exists.
pub async fn on_server(framework: &Framework, path: &str) -> Option<(Vec<u8>, i64)> {
    match within("get data", framework.get_data(path, step())).await {
        Ok(read) => Some((read.data, read.stat.ephemeral_owner)),
        Err(err) if err.is_no_node() => None,
        Err(err) => panic!("get data {path}: {err}"),
    }
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
