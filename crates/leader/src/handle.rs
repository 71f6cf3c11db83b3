//! The handle plumbing [`LeaderLatch`](crate::LeaderLatch) and
//! [`LeaderSelector`](crate::LeaderSelector) share: the lifecycle `start` and `close` move a
//! participant through, the cheap counted handle (dropping handles does not close a participant;
//! the last one to go while it runs logs a warning), and the disarmable guard that closes it on
//! drop (the model is tokio-util's `CancellationToken::drop_guard`).

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::watch;
use tracing::warn;
use zk_recipes_framework::Error as FrameworkError;

use crate::error::{LeaderError, Result, Subject};

/// Where a participant is: built, started (by `start`), or closed (by `close`, a drop guard, or
/// its framework's close).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Lifecycle {
    Latent,
    Started,
    Closed,
}

impl Lifecycle {
    /// Whether `start` may go on: [`LeaderError::AlreadyStarted`] the second time,
    /// [`LeaderError::Closed`] after close or once the framework is closed.
    pub(crate) fn check_start(self, framework_closed: bool, subject: impl FnOnce() -> Subject) -> Result<()> {
        match self {
            Lifecycle::Latent if framework_closed => Err(LeaderError::Closed(subject())),
            Lifecycle::Latent => Ok(()),
            Lifecycle::Started => Err(LeaderError::AlreadyStarted(subject())),
            Lifecycle::Closed => Err(LeaderError::Closed(subject())),
        }
    }
}

/// What waiters look at: whether the participant runs and, while it leads, its fencing token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Status {
    pub(crate) lifecycle: Lifecycle,
    /// While it leads (a selector: while a leadership runs and was not cancelled): the fencing
    /// token.
    pub(crate) fencing_token: Option<i64>,
}

impl Status {
    /// A participant built and not started.
    pub(crate) const LATENT: Status = Status { lifecycle: Lifecycle::Latent, fencing_token: None };
}

/// [`LeaderError::Framework`] with `message` outside a tokio runtime: a participant's background
/// task needs one.
pub(crate) fn require_runtime(message: &'static str) -> Result<()> {
    if tokio::runtime::Handle::try_current().is_err() {
        return Err(FrameworkError::InvalidArgument(message.into()).into());
    }
    Ok(())
}

/// What a [`Handle`] looks at in the state its clones share.
pub(crate) struct HandleView<'a> {
    /// How many handles there are: 1 when built, for the handle [`Handle::new`] makes.
    pub(crate) handles: &'a AtomicUsize,
    pub(crate) status: &'a watch::Sender<Status>,
    pub(crate) path: &'a str,
    pub(crate) id: &'a str,
    /// Whether the participant's framework was closed (which closes the participant too).
    pub(crate) framework_closed: bool,
}

/// The state behind a [`Handle`].
pub(crate) trait HandleTarget {
    /// The public handle type, for the warning: `LeaderLatch`.
    const HANDLE_NAME: &'static str;
    /// What the participant is called, for the warning: `latch`.
    const KIND: &'static str;

    fn handle_view(&self) -> HandleView<'_>;
}

/// A cheap handle on a participant's shared state. Clones are counted; dropping them does not
/// close the participant (like dropping a tokio `JoinHandle`), but the last one to go while it
/// runs (and its framework is open) logs a warning. Derefs to the state's `Arc`, which background tasks hold without
/// counting as handles.
pub(crate) struct Handle<S: HandleTarget> {
    shared: Arc<S>,
}

impl<S: HandleTarget> Handle<S> {
    /// The first handle on `shared` (whose count starts at 1).
    pub(crate) fn new(shared: S) -> Self {
        Self { shared: Arc::new(shared) }
    }
}

impl<S: HandleTarget> Deref for Handle<S> {
    type Target = Arc<S>;

    fn deref(&self) -> &Arc<S> {
        &self.shared
    }
}

impl<S: HandleTarget> Clone for Handle<S> {
    fn clone(&self) -> Self {
        self.shared.handle_view().handles.fetch_add(1, Ordering::Relaxed);
        Self { shared: self.shared.clone() }
    }
}

impl<S: HandleTarget> Drop for Handle<S> {
    fn drop(&mut self) {
        let view = self.shared.handle_view();
        if view.handles.fetch_sub(1, Ordering::AcqRel) == 1
            && view.status.borrow().lifecycle == Lifecycle::Started
            && !view.framework_closed
        {
            warn!(
                path = %view.path,
                id = %view.id,
                "every {} handle was dropped without close: the {} runs on until its framework is closed",
                S::HANDLE_NAME,
                S::KIND,
            );
        }
    }
}

/// A participant that can close at once, without a runtime, for its [`DropGuard`].
pub(crate) trait CloseOnDrop {
    /// What closing takes (the latch's `CloseMode`; nothing for the selector).
    type Mode: Copy + fmt::Debug;

    /// Closes: marks the participant closed, aborts its task and hands its node to the
    /// framework's cleanup worker (a channel send). Does nothing if it is closed already.
    fn close_on_drop(&self, mode: Self::Mode);
}

/// Closes its participant with `mode` when dropped, unless [disarmed](Self::disarm).
#[derive(Debug)]
pub(crate) struct DropGuard<P: CloseOnDrop> {
    participant: Option<P>,
    mode: P::Mode,
}

impl<P: CloseOnDrop> DropGuard<P> {
    pub(crate) fn new(participant: P, mode: P::Mode) -> Self {
        Self { participant: Some(participant), mode }
    }

    /// The guarded participant.
    pub(crate) fn participant(&self) -> &P {
        self.participant.as_ref().expect("a guard holds its participant until dropped or disarmed")
    }

    /// Gives the participant back without closing it.
    pub(crate) fn disarm(mut self) -> P {
        self.participant.take().expect("a guard holds its participant until dropped or disarmed")
    }
}

impl<P: CloseOnDrop> Drop for DropGuard<P> {
    fn drop(&mut self) {
        if let Some(participant) = self.participant.take() {
            participant.close_on_drop(self.mode);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU32;

    use super::*;

    struct Target {
        handles: AtomicUsize,
        status: watch::Sender<Status>,
    }

    impl HandleTarget for Target {
        const HANDLE_NAME: &'static str = "Target";
        const KIND: &'static str = "target";

        fn handle_view(&self) -> HandleView<'_> {
            HandleView {
                handles: &self.handles,
                status: &self.status,
                path: "/target",
                id: "target-1",
                framework_closed: false,
            }
        }
    }

    #[test]
    fn handles_are_counted_and_the_background_arc_is_not() {
        let handle =
            Handle::new(Target { handles: AtomicUsize::new(1), status: watch::Sender::new(Status::LATENT) });
        let clone = handle.clone();
        let background = Arc::clone(&handle);
        assert_eq!(handle.handles.load(Ordering::Relaxed), 2);
        drop(clone);
        drop(background);
        assert_eq!(handle.handles.load(Ordering::Relaxed), 1);
    }

    /// Adds its mode to a shared sum when closed.
    struct Closer(Arc<AtomicU32>);

    impl CloseOnDrop for Closer {
        type Mode = u32;

        fn close_on_drop(&self, mode: u32) {
            self.0.fetch_add(mode, Ordering::SeqCst);
        }
    }

    #[test]
    fn a_drop_guard_closes_with_its_mode_on_drop_and_not_once_disarmed() {
        let closed = Arc::new(AtomicU32::new(0));
        drop(DropGuard::new(Closer(closed.clone()), 7));
        assert_eq!(closed.load(Ordering::SeqCst), 7);
        let guard = DropGuard::new(Closer(closed.clone()), 7);
        assert!(Arc::ptr_eq(&guard.participant().0, &closed));
        drop(guard.disarm());
        assert_eq!(closed.load(Ordering::SeqCst), 7);
    }

    #[test]
    fn only_a_latent_participant_may_start() {
        let subject = || Subject::new("leader latch", "/l");
        assert!(Lifecycle::Latent.check_start(false, subject).is_ok());
        assert!(matches!(Lifecycle::Latent.check_start(true, subject), Err(LeaderError::Closed(_))));
        assert!(matches!(
            Lifecycle::Started.check_start(false, subject),
            Err(LeaderError::AlreadyStarted(_))
        ));
        let closed = Lifecycle::Closed.check_start(false, subject).expect_err("closed");
        assert_eq!(closed.to_string(), "the leader latch on /l is closed");
    }
}
