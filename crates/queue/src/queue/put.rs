//! Producing into a [`DistributedQueue`]: the puts, the framing and size check, the wait for room
//! in a bounded queue, and the creates (one node, or many per multi).

use tracing::{debug, info_span, Instrument};
use zk_recipes_framework::{Deadline, Error as FrameworkError};

use super::distributed::DistributedQueue;
use crate::error::{QueueError, Result};
use crate::framing::frame;
use crate::names::ITEM_PREFIX;
use crate::nodes::{chunks, create_nodes};
use crate::simple::wait_for_change;

impl<T: Send + 'static> DistributedQueue<T> {
    /// Adds `item` as one node, `queue-<seq>`, and returns the node's name.
    ///
    /// # Errors
    /// [`QueueError::Serialize`], [`QueueError::ItemTooLarge`] and a closed framework before
    /// anything is sent; [`QueueError::Framework`] with a timeout (the put timeout) or what the
    /// server said.
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the item may or may not have been
    /// stored, and nothing tells which. Cancelled before (while waiting for room in a bounded
    /// queue, say), nothing was stored.
    pub async fn put(&self, item: &T) -> Result<String> {
        let bytes = self.encode(std::slice::from_ref(item))?;
        self.put_node(ITEM_PREFIX, bytes).await
    }

    /// Adds `items` together as one node (Curator's `putMulti`): a consumer gets them in one
    /// [`crate::Delivery`], in order. Returns the node's name.
    ///
    /// # Errors
    /// As [`put`](Self::put); [`QueueError::InvalidArgument`] for no items.
    ///
    /// # Cancel safety
    /// Not cancel safe: if cancelled after the create was sent, the items (all of them or none) may
    /// or may not have been stored, and nothing tells which. Cancelled before (while waiting for
    /// room in a bounded queue, say), nothing was stored.
    pub async fn put_many(&self, items: &[T]) -> Result<String> {
        let bytes = self.encode(items)?;
        self.put_node(ITEM_PREFIX, bytes).await
    }

    /// Adds each of `items` as its own node, creating many nodes per multi (one round trip and one
    /// transaction per up to 1,000 nodes or ~1 MiB). Returns the nodes' names in order. The fast
    /// way to produce: consumers see ordinary single-item nodes.
    ///
    /// Each multi is atomic; if a later one fails, the earlier ones stay.
    ///
    /// # Errors
    /// As [`put`](Self::put), checked for every item before anything is sent.
    ///
    /// # Cancel safety
    /// Not cancel safe: a cancelled call may have stored some of the items. Each multi sent before
    /// it was cancelled may or may not have been committed (as a whole); items of multis not yet
    /// sent were not stored. Nothing tells which: read the queue to find out.
    pub async fn put_batch(&self, items: &[T]) -> Result<Vec<String>> {
        let nodes = items
            .iter()
            .map(|item| Ok((ITEM_PREFIX.to_owned(), self.encode(std::slice::from_ref(item))?)))
            .collect::<Result<Vec<_>>>()?;
        self.put_nodes(nodes).await
    }

    pub(crate) fn encode(&self, items: &[T]) -> Result<Vec<u8>> {
        if items.is_empty() {
            return Err(QueueError::InvalidArgument("a queue node needs at least one item".into()));
        }
        let serialized = items
            .iter()
            .map(|item| {
                self.inner.serializer.serialize(item).map_err(|err| QueueError::Serialize(err.to_string()))
            })
            .collect::<Result<Vec<_>>>()?;
        let bytes = frame(serialized.iter().map(Vec::as_slice));
        if bytes.len() > self.inner.max_node_bytes {
            return Err(QueueError::ItemTooLarge { size: bytes.len(), limit: self.inner.max_node_bytes });
        }
        Ok(bytes)
    }

    pub(crate) async fn put_node(&self, name: &str, bytes: Vec<u8>) -> Result<String> {
        let mut names = self.put_nodes(vec![(name.to_owned(), bytes)]).await?;
        Ok(names.remove(0))
    }

    /// Creates `(name, bytes)` nodes, in multis when there are several.
    async fn put_nodes(&self, nodes: Vec<(String, Vec<u8>)>) -> Result<Vec<String>> {
        if self.inner.framework.is_closed() {
            return Err(FrameworkError::Closed.into());
        }
        let deadline = Deadline::within(self.put_timeout);
        let span = info_span!("queue_put", path = %self.inner.path, nodes = nodes.len());
        async {
            let mut names = Vec::with_capacity(nodes.len());
            for chunk in chunks(&nodes, self.inner.max_node_bytes) {
                self.wait_for_room(deadline).await?;
                names.extend(self.create_chunk(chunk, deadline).await?);
            }
            debug!(first = ?names.first(), count = names.len(), "put");
            self.inner.metrics.puts.increment(names.len() as u64);
            Ok(names)
        }
        .instrument(span)
        .await
    }

    async fn create_chunk(&self, chunk: &[(String, Vec<u8>)], deadline: Deadline) -> Result<Vec<String>> {
        let inner = &*self.inner;
        let names = inner
            .framework
            .retry(deadline, |session| async move {
                inner.ensure_created(&session).await?;
                match create_nodes(&session, &inner.path, chunk).await {
                    Err(err) if err.is_no_node() => {
                        inner.forget_created();
                        inner.ensure_created(&session).await?;
                        create_nodes(&session, &inner.path, chunk).await
                    }
                    other => other,
                }
            })
            .await?;
        Ok(names)
    }

    /// Waits while a bounded queue is full (Curator's `blockIfMaxed`), on a children watch.
    async fn wait_for_room(&self, deadline: Deadline) -> Result<()> {
        let Some(max_items) = self.inner.max_items else { return Ok(()) };
        let inner = &*self.inner;
        let mut events = inner.framework.connection_events();
        loop {
            let (count, watcher) = inner
                .framework
                .retry(deadline, |session| async move {
                    inner.ensure_created(&session).await?;
                    // Cheap look first; watch only when full.
                    let stat = session.client().check_stat(&inner.path).await?;
                    if stat.is_some_and(|stat| (stat.num_children as usize) < max_items) {
                        return Ok((0, None));
                    }
                    let (children, watcher) = session.client().list_and_watch_children(&inner.path).await?;
                    Ok((children.len(), Some(watcher)))
                })
                .await?;
            match watcher {
                Some(watcher) if count >= max_items => {
                    debug!(count, max_items, "bounded queue full: waiting");
                    wait_for_change(watcher, &mut events, deadline).await?;
                }
                _ => return Ok(()),
            }
        }
    }
}
