//! The stream of connection transitions a subscriber reads.

use futures::Stream;
use tokio::sync::{broadcast, watch};

use super::snapshot::Snapshot;
use super::state::{ConnectionEvent, ConnectionUpdate};

/// Every connection transition from the moment of subscription, in order
/// ([`crate::Framework::connection_events`]). Ends (`None`) when the framework is closed.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) {
/// let mut events = framework.connection_events();
/// while let Some(update) = events.next().await {
///     println!("connection is now {:?}", update.state());
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct ConnectionEvents {
    events: broadcast::Receiver<ConnectionEvent>,
    snapshot: watch::Receiver<Snapshot>,
}

impl ConnectionEvents {
    pub(crate) fn new(
        events: broadcast::Receiver<ConnectionEvent>,
        snapshot: watch::Receiver<Snapshot>,
    ) -> Self {
        Self { events, snapshot }
    }

    /// The next transition; `None` once the framework is closed and every earlier transition was
    /// delivered.
    ///
    /// # Cancel safety
    /// Cancel safe: a transition is never lost by dropping this future.
    pub async fn next(&mut self) -> Option<ConnectionUpdate> {
        loop {
            match self.events.try_recv() {
                Ok(event) => return Some(ConnectionUpdate::Changed(event)),
                Err(broadcast::error::TryRecvError::Lagged(missed)) => {
                    return Some(ConnectionUpdate::Lagged { missed })
                }
                Err(broadcast::error::TryRecvError::Closed) => return None,
                Err(broadcast::error::TryRecvError::Empty) => {}
            }
            if self.snapshot.borrow().closed {
                return None;
            }
            tokio::select! {
                received = self.events.recv() => return match received {
                    Ok(event) => Some(ConnectionUpdate::Changed(event)),
                    Err(broadcast::error::RecvError::Lagged(missed)) => Some(ConnectionUpdate::Lagged { missed }),
                    Err(broadcast::error::RecvError::Closed) => None,
                },
                changed = self.snapshot.changed() => if changed.is_err() { return None },
            }
        }
    }

    /// The same transitions as a [`Stream`].
    pub fn into_stream(self) -> impl Stream<Item = ConnectionUpdate> + Send + Unpin {
        Box::pin(futures::stream::unfold(self, |mut events| async move {
            let update = events.next().await?;
            Some((update, events))
        }))
    }
}
