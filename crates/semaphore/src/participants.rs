//! [`Participants`]: a semaphore's lease nodes, split into holders and waiters.

/// A semaphore's lease nodes, split by [`Semaphore::participants`].
///
/// ```no_run
/// # async fn demo(semaphore: zk_recipes_semaphore::Semaphore) -> zk_recipes_semaphore::Result<()> {
/// let participants = semaphore.participants().await?;
/// for (place, node) in participants.waiting.iter().enumerate() {
///     println!("{node} waits, {} ahead of it", participants.holders.len() + place);
/// }
/// # Ok(()) }
/// ```
///
/// [`Semaphore::participants`]: crate::Semaphore::participants
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Participants {
    /// The nodes holding a lease (full paths), in line order.
    pub holders: Vec<String>,
    /// The nodes waiting for one (full paths), in line order.
    pub waiting: Vec<String>,
}

impl Participants {
    /// The first `max_leases` of `nodes` (in line order) hold; the rest wait.
    ///
    /// ```
    /// use zk_recipes_semaphore::Participants;
    /// let nodes: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
    /// let split = Participants::split(nodes, 2);
    /// assert_eq!((split.holders.len(), split.waiting), (2, vec!["c".to_string()]));
    /// ```
    pub fn split(mut nodes: Vec<String>, max_leases: u32) -> Self {
        let waiting = nodes.split_off(nodes.len().min(max_leases as usize));
        Self { holders: nodes, waiting }
    }
}
