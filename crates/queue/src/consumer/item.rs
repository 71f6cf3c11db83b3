//! What a [`Consumer::run_items`](super::Consumer::run_items) handler receives: one item with the
//! context of its delivery.

use std::fmt;

use zk_recipes_framework::ConnectionState;

use super::delivery::LostSignal;

/// One item handed to a [`Consumer::run_items`](super::Consumer::run_items) handler: the value,
/// the node it came in, how many times that node has been delivered, and a signal that the
/// consumer's lock on it can no longer be trusted.
///
/// ```no_run
/// # async fn demo(queue: zk_recipes_queue::DistributedQueue<String>) -> zk_recipes_queue::Result<()> {
/// queue
///     .consumer()
///     .run_items(|item| async move {
///         tokio::select! {
///             state = item.lost() => Err(format!("{}: lock lost ({state:?}); it will be redelivered", item.id())),
///             () = tokio::time::sleep(std::time::Duration::from_millis(10)) => {
///                 println!("{} (delivery {}): {}", item.id(), item.delivery_count(), item.value());
///                 Ok(())
///             }
///         }
///     })
///     .await
/// # }
/// ```
pub struct Item<T> {
    pub(super) value: T,
    pub(super) id: String,
    pub(super) index: usize,
    pub(super) deliveries: u32,
    pub(super) lost: LostSignal,
}

impl<T> Item<T> {
    /// The item.
    pub fn value(&self) -> &T {
        &self.value
    }

    /// The item, moved out.
    pub fn into_value(self) -> T {
        self.value
    }

    /// The name of the node the item came in (`queue-...`): unique in the queue while the node
    /// exists. A requeued node gets a new name.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The item's place in its node (0 unless the node was put with `put_many`).
    pub fn index(&self) -> usize {
        self.index
    }

    /// How many times the node has been delivered, this one included (see
    /// [`crate::Delivery::delivery_count`]).
    pub fn delivery_count(&self) -> u32 {
        self.deliveries
    }

    /// Resolves when the consumer's lock on the item can no longer be trusted (lock-safe mode;
    /// never at most once): stop working on it, it will be delivered again. As
    /// [`crate::Delivery::lost`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads and waits, and a later call checks the current state first, so a
    /// loss that came meanwhile is not missed.
    pub async fn lost(&self) -> ConnectionState {
        self.lost.wait().await
    }
}

impl<T: fmt::Debug> fmt::Debug for Item<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Item")
            .field("id", &self.id)
            .field("index", &self.index)
            .field("deliveries", &self.deliveries)
            .field("value", &self.value)
            .finish_non_exhaustive()
    }
}
