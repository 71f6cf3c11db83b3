//! Shared helpers for this crate's integration tests (real ZooKeeper servers).
#![allow(dead_code, unused_imports)]

#[path = "../../../framework/tests/common/shared.rs"]
mod shared;

use std::time::Duration;

pub use shared::{
    builder, children, close_all, lost_then_reconnected, on_server, proxied, server_and_framework, step,
};
use zk_recipes_framework::{Deadline, Framework};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};
use zk_recipes_testing::{FaultProxy, TestingServer};
