//! Sequential specifications of the objects the recipes offer.
//!
//! | object | model | recipe |
//! |---|---|---|
//! | register, compare-and-set by value | [`Register`] | `SharedValue`, `DistributedAtomicValue` |
//! | register, compare-and-set by version | [`VersionedRegister`] | `SharedCount.trySetCount` |
//! | counter | [`Counter`] | `DistributedAtomicLong` |
//! | FIFO queue | [`FifoQueue`] | `DistributedQueue` |
//! | items taken at most once | [`ItemSet`] | a queue with several consumers |
//!
//! A map of independent keys, each one of these, is checked key by key with
//! [`crate::Checker::check_per_key`].

mod counter;
pub mod queue;
mod register;

pub use counter::{Counter, CounterInput, CounterOutput};
pub use queue::{FifoQueue, ItemSet, QueueInput, QueueOutput, SetInput, SetOutput};
pub use register::{
    Register, RegisterInput, RegisterOutput, Versioned, VersionedInput, VersionedOutput, VersionedRegister,
};
