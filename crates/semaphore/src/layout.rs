//! The nodes under a semaphore's path, as Curator's `InterProcessSemaphoreV2` names them.

/// The internal mutex's directory under the semaphore's path.
pub const LOCKS_DIR: &str = "locks";
/// The leases' directory under the semaphore's path.
pub const LEASES_DIR: &str = "leases";
/// The internal mutex's node name.
pub const LOCK_NAME: &str = "lock-";
/// The lease nodes' name.
pub const LEASE_NAME: &str = "lease-";
