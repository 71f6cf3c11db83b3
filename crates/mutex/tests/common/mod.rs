//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

#[path = "../../../framework/tests/common/shared.rs"]
mod shared;

pub use shared::{builder, children, lost_then_reconnected, server_and_framework, step, until_state};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};
