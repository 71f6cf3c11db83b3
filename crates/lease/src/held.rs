//! [`HeldLease`]: a lease we hold, until its end, a renew, or a release.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use tokio::sync::watch;

use crate::error::{LeaseError, Result};
use crate::layout::LeaseLayout;
use crate::state::{HeldState, LeaseConfig, LostReason};

/// A lease we hold: ours until [`valid_until`](Self::valid_until), which
/// [`renew`](Self::renew) moves on; given back early by [`release`](Self::release).
///
/// A lease is not tied to a session: a holder whose connection is down, or whose session
/// expired, stays the holder until its lease ends, and nobody else can take it before then.
/// Dropping a `HeldLease` sends nothing: the lease stays taken until it ends (kazoo's leases work
/// so: "hold the lease over an hour in order to keep the job on the same machine"). Release it to
/// free it at once.
///
/// ```no_run
/// # async fn demo(lease: zk_recipes_lease::Lease) -> zk_recipes_lease::Result<()> {
/// let held = lease.acquire().await?;
/// let mut renewals = tokio::time::interval(lease.duration() / 3);
/// loop {
///     tokio::select! {
///         reason = held.lost() => { println!("lease lost: {reason:?}"); break }
///         _ = renewals.tick() => held.renew().await?,
///     }
/// }
/// # Ok(()) }
/// ```
#[must_use = "a lease held stays taken until it ends; keep it to watch lost(), renew or release it"]
#[derive(Debug)]
pub struct HeldLease {
    pub(crate) config: Arc<LeaseConfig>,
    pub(crate) layout: LeaseLayout,
    pub(crate) slot: Option<u32>,
    pub(crate) state: watch::Sender<HeldState>,
    /// One renew or release at a time.
    pub(crate) writing: tokio::sync::Mutex<()>,
}

impl HeldLease {
    pub(crate) fn new(config: Arc<LeaseConfig>, layout: LeaseLayout, state: HeldState) -> Self {
        Self { config, layout, slot: None, state: watch::Sender::new(state), writing: Default::default() }
    }

    /// The lease's path (for a [`MultiLease`](crate::MultiLease), the path of the slot we hold).
    pub fn path(&self) -> &str {
        &self.config.path
    }

    /// Our holder identifier.
    pub fn identifier(&self) -> &str {
        &self.config.identifier
    }

    /// Which lease of a [`MultiLease`](crate::MultiLease) we hold (`<path>/<slot>`); `None` for a
    /// single lease.
    pub fn slot(&self) -> Option<u32> {
        self.slot
    }

    /// A token that grows strictly from one holder to the next: the record's `czxid` (the
    /// native node's, kazoo's `lease_holder`'s). A renew keeps it. Pass it to the resource the
    /// lease guards, which refuses a token lower than the highest it has seen.
    pub fn fencing_token(&self) -> i64 {
        self.state.borrow().fencing_token
    }

    /// Until when the lease is ours, by our monotonic clock (see the crate docs for what this
    /// trusts).
    pub fn valid_until(&self) -> Instant {
        self.state.borrow().valid_until
    }

    /// How much of the lease is left (zero once it ended or was found gone).
    pub fn remaining(&self) -> Duration {
        let state = self.state.borrow();
        match state.lost {
            Some(_) => Duration::ZERO,
            None => state.valid_until.saturating_duration_since(Instant::now()),
        }
    }

    /// Whether the lease is still ours, by our clock.
    pub fn is_valid(&self) -> bool {
        !self.remaining().is_zero()
    }

    /// kazoo layout: the end written in `lease_holder` (UTC, whole seconds), what other clients
    /// compare their clocks with. `None` in the native layout.
    pub fn end(&self) -> Option<SystemTime> {
        self.state.borrow().end
    }

    /// Resolves when the lease can no longer be trusted: at [`valid_until`](Self::valid_until)
    /// (moved on by each renew), or when a renew found it gone.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits.
    pub async fn lost(&self) -> LostReason {
        let mut changes = self.state.subscribe();
        loop {
            let (valid_until, lost) = {
                let state = changes.borrow_and_update();
                (state.valid_until, state.lost)
            };
            if let Some(reason) = lost {
                return reason;
            }
            if Instant::now() >= valid_until {
                return LostReason::Expired;
            }
            tokio::select! {
                () = tokio::time::sleep_until(valid_until.into()) => {}
                // The sender is `self`, alive while we are borrowed: `changed` cannot fail.
                _ = changes.changed() => {}
            }
        }
    }

    /// Extends the lease to a full duration from now (kazoo renews so: the same identifier takes
    /// it again).
    ///
    /// Native layout: reads the node and, if it is still ours (our `czxid`, our data), sets its
    /// data at the version read (the server restarts the TTL at each write); the lease is ours
    /// until the instant before the read plus the duration. kazoo layout: under kazoo's lock, if
    /// `lease_holder` is still ours (same `czxid`, our identifier), it gets a new end at the version read (so the
    /// fencing token stays).
    ///
    /// # Errors
    /// [`LeaseError::Expired`] once the lease ended by our clock (nothing is sent: it may be
    /// another holder's by now); [`LeaseError::Lost`] if the record is gone or another holder's
    /// (nothing of theirs is changed, and [`lost`](Self::lost) resolves); framework and lock
    /// errors, after which the lease stays ours until its current end.
    ///
    /// # Cancel safety
    /// Cancelled after the write was sent, the server may have extended the lease while we still
    /// count from the old end: we only ever believe in less than we hold.
    pub async fn renew(&self) -> Result<()> {
        let _writing = self.writing.lock().await;
        let state = self.state.borrow().clone();
        if state.lost.is_some() {
            return Err(LeaseError::Lost { path: self.path().to_owned() });
        }
        if Instant::now() >= state.valid_until {
            return Err(LeaseError::Expired { path: self.path().to_owned() });
        }
        let renewed = self.layout.renew(&self.config, &state).await;
        match renewed {
            Ok(renewed) => {
                self.state.send_replace(renewed);
                Ok(())
            }
            Err(err) => {
                if matches!(err, LeaseError::Lost { .. }) {
                    self.state.send_modify(|state| state.lost = Some(LostReason::Gone));
                }
                Err(err)
            }
        }
    }

    /// Gives the lease back now, so that another holder may take it at once.
    ///
    /// Native layout: reads the node and deletes it at the version read if it is still ours,
    /// only while the lease is valid by our clock (past that the server may have reaped it and
    /// another holder made a node of the same version: we send nothing and the TTL ends it).
    /// kazoo layout: under kazoo's lock, deletes `lease_holder` if it is still ours (same
    /// `czxid`, our identifier).
    ///
    /// # Errors
    /// Framework and lock errors. Finding the lease gone or another holder's is not an error:
    /// it is not ours either way, and nothing of theirs is touched.
    ///
    /// # Cancel safety
    /// Cancelled, the lease may or may not be released; if not, it ends at its end.
    pub async fn release(self) -> Result<()> {
        let _writing = self.writing.lock().await;
        let state = self.state.borrow().clone();
        if state.lost.is_some() {
            return Ok(());
        }
        self.layout.release(&self.config, &state).await
    }
}
