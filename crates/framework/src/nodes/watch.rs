//! Persistent watches (ZooKeeper 3.6+ `addWatch`; Curator's `PersistentWatcher`) that survive
//! connection loss and session expiry.

use futures::Stream;
use tracing::debug;
use zookeeper_client::{AddWatchMode, EventType, PersistentWatcher, SessionState};

use crate::path;
use crate::session::events::ConnectionEvents;
use crate::session::retry::Backoff;
use crate::session::state::{ConnectionState, ConnectionUpdate};
use crate::session::{Deadline, Error, Framework, Result};

/// What a [`PersistentWatch`] reports.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::{Deadline, WatchEvent};
///
/// let mut watch = framework.watch("/app/members", false, Deadline::never()).await?;
/// while let Some(event) = watch.next().await {
///     match event {
///         WatchEvent::ChildrenChanged { .. } | WatchEvent::Reset => {
///             let (members, _) = framework.children("/app/members", Deadline::never()).await?;
///             println!("members: {members:?}");
///         }
///         WatchEvent::Deleted { path } => println!("{path} was deleted"),
///         _ => {}
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum WatchEvent {
    /// A node was created (the watched node, or with a recursive watch any node below it).
    Created {
        /// The node's path.
        path: String,
    },
    /// A node was deleted.
    Deleted {
        /// The node's path.
        path: String,
    },
    /// A node's data changed.
    DataChanged {
        /// The node's path.
        path: String,
    },
    /// The watched node's children changed (non-recursive watches only: a recursive watch
    /// reports the children's own creations and deletions instead).
    ChildrenChanged {
        /// The node's path.
        path: String,
    },
    /// Changes may have been missed: the watch was set again on a new session after the old one
    /// was lost, or the connection was lost and came back (ZooKeeper does not replay what happened
    /// meanwhile to persistent watches, ZOOKEEPER-4698). Read what you depend on again.
    Reset,
}

/// A persistent (optionally recursive) watch on a path: every change from when it was set,
/// until it is dropped ([`Framework::watch`], Curator's `PersistentWatcher`).
///
/// The watch is set again by itself on each new session, and a [`WatchEvent::Reset`] says when
/// changes may have been missed. Dropping it removes the watch from the server (best effort: a
/// server before 3.9 cannot remove one persistent watch of a path on its own, ZOOKEEPER-4472;
/// zookeeper-client removes all of this session's watches on the path when it was the last).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use zk_recipes_framework::{Deadline, WatchEvent};
///
/// let mut watch = framework.watch("/app/config", true, Deadline::never()).await?;
/// while let Some(event) = watch.next().await {
///     match event {
///         WatchEvent::DataChanged { path } => println!("{path} changed"),
///         WatchEvent::Reset => println!("read everything again"),
///         other => println!("{other:?}"),
///     }
/// }
/// # Ok(()) }
/// ```
#[must_use = "the watch is removed when dropped"]
pub struct PersistentWatch {
    framework: Framework,
    path: String,
    mode: AddWatchMode,
    /// The watch on the server, and the generation of the session that holds it.
    current: Option<(PersistentWatcher, u64)>,
    /// The connection went away since the last node event on this session.
    disconnected: bool,
    /// The connection came back on the same session: the watch must be added again.
    /// zookeeper-client 0.11 does not send persistent watches again on a reconnection (its
    /// `SetWatches` carries only one-shot watches), so the server no longer has it.
    rearm: bool,
    events: ConnectionEvents,
}

impl Framework {
    /// Sets a persistent watch on `path` (recursive: on every node below it too) and returns it;
    /// the watch reports every change from now on. `path` need not exist.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] before anything is sent; [`Error::MissingFeature`] when the server has
    /// no persistent watches ([`Framework::require`]); otherwise as [`Framework::retry`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled call returns no watch, and a watch the server set for it is removed
    /// (best effort, as when a `PersistentWatch` is dropped) when zookeeper-client drops the
    /// watcher nobody took.
    pub async fn watch(
        &self,
        path: &str,
        recursive: bool,
        deadline: impl Into<Deadline>,
    ) -> Result<PersistentWatch> {
        let deadline = deadline.into();
        path::validate(path).map_err(|reason| Error::invalid_path(path, reason))?;
        self.require(crate::Feature::PersistentWatches, deadline).await?;
        let mode = if recursive { AddWatchMode::PersistentRecursive } else { AddWatchMode::Persistent };
        let events = self.connection_events();
        let current = register(self, path, mode, deadline).await?;
        Ok(PersistentWatch {
            framework: self.clone(),
            path: path.to_owned(),
            mode,
            current: Some(current),
            disconnected: false,
            rearm: false,
            events,
        })
    }
}

async fn register(
    framework: &Framework,
    path: &str,
    mode: AddWatchMode,
    deadline: Deadline,
) -> Result<(PersistentWatcher, u64)> {
    framework
        .retry_across_sessions(deadline, |session| async move {
            let watcher = session.client().watch(path, mode).await?;
            Ok((watcher, session.generation()))
        })
        .await
}

impl PersistentWatch {
    /// The watched path.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// Whether the watch covers every node below the path too.
    pub fn is_recursive(&self) -> bool {
        self.mode == AddWatchMode::PersistentRecursive
    }

    /// The next event; `None` once the framework is closed.
    ///
    /// # Cancel safety
    /// Cancel safe while waiting for an event; a call dropped while it sets the watch again on a
    /// new session may leave that session with a watch nobody reads (until the session ends).
    pub async fn next(&mut self) -> Option<WatchEvent> {
        let mut backoff = Backoff::default();
        loop {
            if self.current.is_none() || self.rearm {
                match register(&self.framework, &self.path, self.mode, Deadline::never()).await {
                    Ok(current) => {
                        debug!(path = %self.path, generation = current.1, "persistent watch set again");
                        // The old watcher (if any) goes only now: dropped after the new one is
                        // in, it sends no removal that could take the new watch with it.
                        self.current = Some(current);
                        self.rearm = false;
                        self.disconnected = false;
                        return Some(WatchEvent::Reset);
                    }
                    Err(Error::Closed) => return None,
                    Err(err) => {
                        debug!(path = %self.path, %err, "setting the persistent watch again failed; retrying");
                        backoff.pause().await;
                        continue;
                    }
                }
            }
            let Some((watcher, generation)) = self.current.as_mut() else { continue };
            let generation = *generation;
            tokio::select! {
                event = watcher.changed() => {
                    let path = event.path;
                    match (event.event_type, event.session_state) {
                        (EventType::Session, SessionState::Disconnected) => self.disconnected = true,
                        // A terminal state: this watcher must not be read again.
                        (EventType::Session, SessionState::Expired | SessionState::Closed | SessionState::AuthFailed) => {
                            self.current = None;
                        }
                        (EventType::Session, _) => {
                            if std::mem::take(&mut self.disconnected) {
                                self.rearm = true;
                            }
                        }
                        (EventType::NodeCreated, _) => return Some(WatchEvent::Created { path }),
                        (EventType::NodeDeleted, _) => return Some(WatchEvent::Deleted { path }),
                        (EventType::NodeDataChanged, _) => return Some(WatchEvent::DataChanged { path }),
                        (EventType::NodeChildrenChanged, _) => return Some(WatchEvent::ChildrenChanged { path }),
                    }
                }
                update = self.events.next() => match update {
                    None => return None,
                    Some(ConnectionUpdate::Changed(event))
                        if event.state == ConnectionState::Lost && event.generation >= generation =>
                    {
                        // The framework gave the session up: set the watch on the next one.
                        self.current = None;
                    }
                    Some(ConnectionUpdate::Lagged { .. }) if self.framework.current().generation != generation => {
                        self.current = None;
                    }
                    // The same session lost its connection and got it back: events may have been
                    // missed meanwhile, and the server dropped the watch with the connection.
                    Some(ConnectionUpdate::Changed(event)) if event.generation == generation => {
                        if event.state == ConnectionState::Suspended {
                            self.disconnected = true;
                        } else if event.state.is_connected() && std::mem::take(&mut self.disconnected) {
                            self.rearm = true;
                        }
                    }
                    Some(_) => {}
                },
            }
        }
    }

    /// The same events as a [`Stream`].
    pub fn into_stream(self) -> impl Stream<Item = WatchEvent> + Send + Unpin {
        Box::pin(futures::stream::unfold(self, |mut watch| async move {
            let event = watch.next().await?;
            Some((event, watch))
        }))
    }
}

impl std::fmt::Debug for PersistentWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PersistentWatch")
            .field("path", &self.path)
            .field("recursive", &self.is_recursive())
            .field("generation", &self.current.as_ref().map(|(_, generation)| *generation))
            .finish_non_exhaustive()
    }
}
