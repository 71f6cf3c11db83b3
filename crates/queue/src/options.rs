//! What a queue of the family is built with that the other files share: [`ErrorMode`] and
//! [`DEFAULT_MAX_NODE_BYTES`].

/// The largest node (framed item bytes) a put writes by default: ZooKeeper's default
/// `jute.maxbuffer` (1 MiB) less 4 KiB for the rest of the request. Larger puts fail with
/// [`QueueError::ItemTooLarge`] before anything is sent.
///
/// [`QueueError::ItemTooLarge`]: crate::QueueError::ItemTooLarge
pub const DEFAULT_MAX_NODE_BYTES: usize = zk_recipes_framework::DEFAULT_MAX_NODE_DATA;

/// What a lock-safe consumer's handler failure does to the item (Curator's `ErrorMode`).
///
/// ```
/// assert_eq!(zk_recipes_queue::ErrorMode::default(), zk_recipes_queue::ErrorMode::Requeue);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ErrorMode {
    /// Put the node back as a new item at the tail with the same bytes (the default). With a lock
    /// path it is one multi with the delete, so the item is never lost nor doubled.
    #[default]
    Requeue,
    /// Delete the item.
    Delete,
}
