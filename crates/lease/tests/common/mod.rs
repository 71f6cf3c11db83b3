//! Helpers the lease tests share: a lease of either layout with the tests' step as its timeout,
//! taking a lease once it is free, and whole seconds since the epoch (kazoo's `end`).
#![allow(dead_code)] // Each test file uses its own part.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use zk_recipes_framework::Framework;
use zk_recipes_lease::{HeldLease, Lease, LeaseError, LeaseLayout};
use zk_recipes_test_support::{within, STEP};

/// A lease of `layout` at `path` held by `identifier`, each call bounded by the tests' step.
pub fn lease_in(
    layout: LeaseLayout,
    framework: &Framework,
    path: &str,
    duration: Duration,
    identifier: &str,
) -> Lease {
    Lease::builder(framework, path, duration)
        .layout(layout)
        .identifier(identifier)
        .timeout(STEP)
        .build()
        .expect("lease")
}

/// Tries `lease` until it is taken (each refusal a `Held`); the held lease.
pub async fn take_when_free(lease: &Lease) -> HeldLease {
    within("taken once free", async {
        loop {
            match lease.acquire().await {
                Ok(held) => return held,
                Err(LeaseError::Held { .. }) => tokio::time::sleep(Duration::from_millis(20)).await,
                Err(err) => panic!("acquire: {err}"),
            }
        }
    })
    .await
}

/// Whole seconds since the epoch, as kazoo's `end` counts them.
pub fn epoch_secs(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH).expect("after the epoch").as_secs()
}
