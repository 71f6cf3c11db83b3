//! # zk-recipes-barrier
//!
//! Barriers on ZooKeeper, as Apache Curator builds them, on the same nodes (a Rust and a Java
//! process share one barrier):
//!
//! | Curator | zk-recipes |
//! |---|---|
//! | `new DistributedBarrier(client, path)` | [`DistributedBarrier::new(&framework, path)?`](DistributedBarrier::new) |
//! | `setBarrier()` | [`set(deadline).await`](DistributedBarrier::set) |
//! | `removeBarrier()` | [`remove(deadline).await`](DistributedBarrier::remove) |
//! | `waitOnBarrier()`, `waitOnBarrier(max, unit)` → `boolean` | [`wait(deadline).await`](DistributedBarrier::wait) → `Result<()>` (a timeout is an error) |
//! | `new DistributedDoubleBarrier(client, path, memberQty)` | [`DistributedDoubleBarrier::new(&framework, path, member_count)?`](DistributedDoubleBarrier::new) |
//! | `enter()`, `enter(max, unit)` → `boolean` | [`enter(deadline).await`](DistributedDoubleBarrier::enter) → `Result<Entered>` |
//! | `leave()`, `leave(max, unit)` → `boolean` | [`entered.leave(deadline).await`](Entered::leave) → `Result<()>` |
//!
//! - A [`DistributedBarrier`] is one PERSISTENT node: while it exists, [`wait`](DistributedBarrier::wait)
//!   blocks.
//! - A [`DistributedDoubleBarrier`] lets `member_count` members start together (`enter`) and
//!   finish together (`leave`): EPHEMERAL member nodes `<path>/<uuid>` and a PERSISTENT
//!   `<path>/ready`. It is immune to Curator's GH-1290 (a member let in by a stray wakeup or a
//!   reconnection before everyone arrived): only the members counted on the server let one in.
//!
//! Every wait takes a [`Deadline`](zk_recipes_framework::Deadline); a dropped or timed-out
//! `enter` deletes its member node. See [docs/barriers.md](https://github.com/zk-recipes/zk-recipes/blob/main/docs/barriers.md).
//!
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_barrier::DistributedDoubleBarrier;
//! use zk_recipes_framework::{Deadline, Framework};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let framework = Framework::builder("127.0.0.1:2181").start()?;
//! let barrier = DistributedDoubleBarrier::new(&framework, "/jobs/nightly/workers", 3)?;
//! let entered = barrier.enter(Deadline::after(Duration::from_secs(60))).await?;
//! // ... compute, knowing all three workers started ...
//! entered.leave(Deadline::after(Duration::from_secs(60))).await?;
//! # Ok(()) }
//! ```

mod barrier;
mod double;
mod error;
mod leave;

pub use barrier::DistributedBarrier;
pub use double::{DistributedDoubleBarrier, Entered, READY_NODE};
pub use error::{BarrierError, Result};

/// The double barrier's leave order as a pure function, without I/O: the code the barrier runs and
/// the models in the repository's `crates/model` check. Not part of the stable API.
#[doc(hidden)]
pub mod decisions {
    pub use crate::leave::{leave_step, LeaveStep};
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn public_types_are_send_and_sync() {
        assert_send_sync::<DistributedBarrier>();
        assert_send_sync::<DistributedDoubleBarrier>();
        assert_send_sync::<Entered>();
        assert_send_sync::<BarrierError>();
    }
}
