//! [`Wait`]: whether an acquire waits for the holders, and the deadline of the whole call.

use zk_recipes_framework::Deadline;

/// Whether an acquire waits for the holders, and the deadline of the whole call.
///
/// [`Wait::Until`] waits in line until the deadline; [`Wait::TryOnce`] takes the lock only if it
/// is free now, and its deadline bounds that one try: creating the node, listing once, and giving
/// the node back when the lock is taken.
///
/// ```no_run
/// # use zk_recipes_lock_internals::LockInternals;
/// # async fn demo(internals: LockInternals) -> zk_recipes_lock_internals::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_lock_internals::{Hold, Wait};
///
/// // Only if it is free now.
/// match internals.acquire(b"", Wait::TryOnce(Deadline::after(Duration::from_secs(5)))).await? {
///     Some(held) => println!("holding {}", held.node_path()),
///     None => println!("taken: our node was given back"),
/// }
/// // Waiting for it, at most ten seconds (a timeout is an error).
/// let held = internals.acquire(b"", Wait::Until(Deadline::after(Duration::from_secs(10)))).await?;
/// assert!(held.is_some());
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
pub enum Wait {
    /// Wait in line until the deadline (reaching it is a timeout error).
    Until(Deadline),
    /// Do not wait for the holders: take the lock if it is free now, else give the node back,
    /// all within the deadline.
    TryOnce(Deadline),
}

impl Wait {
    /// The deadline of the whole call.
    ///
    /// ```
    /// use std::time::Duration;
    /// use zk_recipes_framework::Deadline;
    /// use zk_recipes_lock_internals::Wait;
    ///
    /// let wait = Wait::TryOnce(Deadline::after(Duration::from_secs(5)));
    /// assert!(wait.deadline().remaining().is_some());
    /// ```
    pub fn deadline(self) -> Deadline {
        match self {
            Wait::Until(deadline) | Wait::TryOnce(deadline) => deadline,
        }
    }
}
