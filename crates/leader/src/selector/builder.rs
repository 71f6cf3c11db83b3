//! Building a selector: [`LeaderSelectorBuilder`] and its defaults.

use std::future::Future;
use std::sync::atomic::AtomicUsize;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::watch;
use zk_recipes_framework::Framework;
use zk_recipes_mutex::Mutex as ZkMutex;

use super::state::{Shared, State, TakeLeadership};
use super::{LeaderSelector, Leadership};
use crate::error::Result;
use crate::handle::{Handle, Status};

/// Builds a [`LeaderSelector`]; start from [`LeaderSelector::builder`].
///
/// Defaults: id empty (nodes hold this host's address, as Curator's), no auto-requeue, expiry
/// margin a tenth of the session timeout, close grace 5 s.
///
/// ```no_run
/// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_leader::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_leader::LeaderSelector;
///
/// let selector = LeaderSelector::builder(&framework, "/app/scheduler")
///     .id("worker-1")
///     .auto_requeue(true)
///     .close_grace(Duration::from_secs(2))
///     .build(|leadership| async move {
///         leadership.cancelled().await;
///     })?;
/// selector.start()?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until `build` is called"]
pub struct LeaderSelectorBuilder {
    pub(super) framework: Framework,
    pub(super) path: String,
    pub(super) id: String,
    pub(super) auto_requeue: bool,
    pub(super) expiry_margin: Option<Duration>,
    pub(super) close_grace: Duration,
}

impl LeaderSelectorBuilder {
    /// The participant id, stored as our node's data (UTF-8). Defaults to empty, and then the
    /// node holds this host's address, as Curator's selector without an id.
    pub fn id(mut self, id: impl Into<String>) -> Self {
        self.id = id.into();
        self
    }

    /// Whether to queue again each time a leadership ends (Curator's `autoRequeue`). Defaults to
    /// `false`: one leadership per [`LeaderSelector::start`] / [`LeaderSelector::requeue`].
    pub fn auto_requeue(mut self, auto_requeue: bool) -> Self {
        self.auto_requeue = auto_requeue;
        self
    }

    /// Subtracted from the earliest moment the server may expire our session, to fix when a
    /// leadership's future is dropped: after a `Suspended` by the early bound, and by the
    /// framework's expiry clock whatever the connection says (see [`LeaderSelector`]). Defaults
    /// to a tenth of the negotiated session timeout.
    pub fn expiry_margin(mut self, margin: Duration) -> Self {
        self.expiry_margin = Some(margin);
        self
    }

    /// How long [`LeaderSelector::close`] lets a cancelled `take_leadership` run before dropping
    /// it. Defaults to 5 s.
    pub fn close_grace(mut self, grace: Duration) -> Self {
        self.close_grace = grace;
        self
    }

    /// The selector, running `take_leadership` each time it leads. Leadership ends when the
    /// returned future completes (or is dropped: see [`LeaderSelector`]).
    ///
    /// # Errors
    /// [`LeaderError::Framework`](crate::LeaderError::Framework) with an invalid path, before anything is sent.
    pub fn build<F, Fut>(self, take_leadership: F) -> Result<LeaderSelector>
    where
        F: Fn(Leadership) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        let mut mutex = ZkMutex::new(&self.framework, &self.path)?;
        if !self.id.is_empty() {
            mutex = mutex.node_data(self.id.as_bytes());
        }
        let take_leadership: Box<TakeLeadership> =
            Box::new(move |leadership| Box::pin(take_leadership(leadership)));
        let shared = Shared {
            framework: self.framework,
            path: self.path,
            id: self.id,
            mutex,
            auto_requeue: self.auto_requeue,
            expiry_margin: self.expiry_margin,
            close_grace: self.close_grace,
            take_leadership,
            state: Mutex::new(State::default()),
            status: watch::Sender::new(Status::LATENT),
            handles: AtomicUsize::new(1),
        };
        Ok(LeaderSelector { shared: Handle::new(shared) })
    }
}
