//! What a cache tells its subscribers.

use std::pin::Pin;
use std::task::{Context, Poll};

use futures::Stream;
use tokio::sync::mpsc;

use crate::node::CachedNode;

/// A change to the cache (Curator's `CuratorCacheListener` types).
///
/// ```no_run
/// # async fn demo(cache: zk_recipes_cache::Cache) {
/// use zk_recipes_cache::CacheEvent;
///
/// let mut events = cache.events();
/// while let Some(event) = events.next().await {
///     match event {
///         CacheEvent::Created { path, .. } => println!("+ {path}"),
///         CacheEvent::Changed { path, new, .. } => println!("~ {path} now version {}", new.stat.version),
///         CacheEvent::Deleted { path, .. } => println!("- {path}"),
///         CacheEvent::Initialized => println!("loaded"),
///         _ => {}
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum CacheEvent {
    /// A node is in the cache that was not (Curator's `NODE_CREATED`).
    Created {
        /// The node's full path.
        path: String,
        /// The node as read.
        node: CachedNode,
    },
    /// A cached node has new data, or was deleted and created again between two reads
    /// (Curator's `NODE_CHANGED`).
    Changed {
        /// The node's full path.
        path: String,
        /// What the cache held before.
        old: CachedNode,
        /// What it holds now.
        new: CachedNode,
    },
    /// A cached node is gone (Curator's `NODE_DELETED`). A deleted subtree is reported deepest
    /// node first.
    Deleted {
        /// The node's full path.
        path: String,
        /// What the cache held.
        old: CachedNode,
    },
    /// The first full load is done: from here the cache holds what the server held when it was
    /// read (Curator's `initialized()`). Sent once.
    Initialized,
}

impl CacheEvent {
    /// The node's path; `None` for [`CacheEvent::Initialized`].
    pub fn path(&self) -> Option<&str> {
        match self {
            Self::Created { path, .. } | Self::Changed { path, .. } | Self::Deleted { path, .. } => {
                Some(path)
            }
            Self::Initialized => None,
        }
    }
}

/// A subscription to a cache's events ([`Cache::events`](crate::Cache::events)): the cache's
/// contents when it subscribed (as `Created` events, then `Initialized` if the first load is
/// done), then every change, in order, none skipped. It ends when the cache is dropped.
///
/// Events queue up without bound until read: a subscriber that stops reading holds memory.
/// Drop the subscription when done.
///
/// ```no_run
/// # async fn demo(cache: zk_recipes_cache::Cache) {
/// use zk_recipes_cache::CacheEvent;
///
/// let mut events = cache.events();
/// while let Some(event) = events.next().await {
///     match event {
///         CacheEvent::Initialized => println!("loaded: {} nodes", cache.len()),
///         other => println!("{:?} changed", other.path()),
///     }
/// }
/// # }
/// ```
#[must_use = "events queue up until read; drop the subscription when done"]
#[derive(Debug)]
pub struct CacheEvents {
    pub(crate) receiver: mpsc::UnboundedReceiver<CacheEvent>,
}

impl CacheEvents {
    /// The next event; `None` once the cache is gone.
    ///
    /// # Cancel safety
    /// Cancel safe: an event is taken only when returned.
    pub async fn next(&mut self) -> Option<CacheEvent> {
        self.receiver.recv().await
    }

    /// An event already waiting, if any.
    pub fn try_next(&mut self) -> Option<CacheEvent> {
        self.receiver.try_recv().ok()
    }
}

impl Stream for CacheEvents {
    type Item = CacheEvent;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<CacheEvent>> {
        self.receiver.poll_recv(cx)
    }
}
