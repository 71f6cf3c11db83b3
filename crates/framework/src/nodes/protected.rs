//! The protected create: Curator's `create().withProtection()`, with one entry point
//! ([`Framework::create_protected`]) and its variants as options ([`ProtectedCreate`]).
//!
//! A protected node's name starts with a marker ([`NodeMarker`]) that its creator finds it by
//! after a connection loss: a create whose reply was lost is not made twice, and a create given
//! up leaves no node behind (the cleanup worker deletes whatever carries the marker). One try is
//! in [`super::protected_try`]; the request in [`super::protected_options`].

use std::future::Future;
use std::sync::Arc;

use futures::future::Either;
use parking_lot::Mutex;
use tracing::debug;

use super::cleanup::{CleanupQueue, CleanupTask};
use super::marker::NodeMarker;
use super::on_session::KnownParents;
use super::owned::OwnedNode;
use super::protected_options::ProtectedCreate;
use super::protected_try::create_or_find;
use super::session_marker::{MarkerLane, MarkerLanes, SequenceFloor, UndecidedCreate};
use crate::path;
use crate::session::calls::Nesting;
use crate::session::waiting::Sessions;
use crate::session::{Deadline, Error, Framework, Result, Session};

impl Framework {
    /// Creates a protected node as `request` says (by default `<parent>/_c_<uuid>-<name>`,
    /// EPHEMERAL_SEQUENTIAL, creating missing parents as containers): Curator's protected create.
    ///
    /// If the connection is lost while the create is in flight, the node is looked for among the
    /// siblings by its marker after reconnecting, and taken only if its ephemeral owner is our
    /// current session. If the session is lost instead, the attempt starts over on the new session
    /// with a new marker, and the old one is handed to the cleanup worker (a create built on a node
    /// with [`ProtectedCreate::while_exists`] fails instead). If the call fails or is dropped while
    /// the outcome is unknown, the cleanup worker finds and deletes the node.
    ///
    /// The returned [`OwnedNode`] deletes the node when dropped.
    ///
    /// # Errors
    /// [`Error::InvalidPath`] for a bad parent or a name with a `/`, [`Error::DataTooLarge`], and
    /// [`Error::InvalidArgument`] for a persistent mode on a create built on a node, before
    /// anything is sent; [`Error::NodeLost`] when the node it is built on (or its session) is gone;
    /// [`Error::Timeout`] at the deadline; otherwise as [`Framework::retry_across_sessions`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled create returns no node and leaves none behind: a node it may have
    /// created (a reply still in flight) is found by its marker and deleted by the framework's
    /// cleanup worker. A session marker's turn in its lane is given up with it.
    ///
    /// ```no_run
    /// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
    /// use std::time::Duration;
    /// use zk_recipes_framework::{Deadline, Error, ProtectedCreate};
    ///
    /// let deadline = Deadline::after(Duration::from_secs(5));
    /// let holder = framework.create_protected(ProtectedCreate::new("/app/lock", "lock-").data(b"10.0.0.7"), deadline).await?;
    /// println!("created {} with sequence {:?}", holder.path(), holder.sequence());
    /// match framework.create_protected(ProtectedCreate::new("/app/leases", "lease-").while_exists(&holder), deadline).await {
    ///     Ok(lease) => println!("{} created while {} held", lease.path(), holder.path()),
    ///     Err(Error::NodeLost { path }) => println!("{path} is gone: nothing was created"),
    ///     Err(err) => return Err(err),
    /// }
    /// holder.delete(deadline).await?;
    /// # Ok(()) }
    /// ```
    pub fn create_protected<'a>(
        &'a self,
        request: ProtectedCreate<'a>,
        deadline: impl Into<Deadline>,
    ) -> impl Future<Output = Result<OwnedNode>> + Send + 'a {
        // Not an `async fn` (see the crate docs on boxed futures). Checked before anything is
        // sent; the future keeps nothing of the check.
        let deadline = deadline.into();
        if let Err(err) = self.check_protected(&request) {
            return Either::Left(std::future::ready(Err(err)));
        }
        Either::Right(async move {
            let attempt = Mutex::new(ProtectedAttempt::new(self, &request, !request.is_ephemeral()));
            let attempt = &attempt;
            let request = &request;
            let try_once = |session: Session| async move {
                // A session marker's create waits for its lane's turn (see `session_marker`).
                let needs_lane = matches!(request.marker, NodeMarker::SessionId { .. })
                    && !attempt.lock().holds_lane_of(&session);
                let lane = match needs_lane {
                    false => None,
                    true => {
                        let prefix = request.marker.render(session.id());
                        let lanes = session.upper::<MarkerLanes>();
                        Some(Box::pin(lanes.turn(request.parent, &prefix)).await)
                    }
                };
                let (prefix, search_first, floor) = attempt.lock().prefix_for(&session, lane);
                let known_parents = self.upper::<KnownParents>();
                let outcome =
                    create_or_find(&session, request, &prefix, search_first, floor, known_parents).await;
                if let Err(err) = &outcome {
                    if !is_connection_error_or_lost(err) {
                        // The server answered: nothing was created by this try.
                        attempt.lock().settle(None);
                    }
                }
                outcome.map(|created| (created, session))
            };
            let created = match request.anchor {
                // A fresh node: after a lost session, start over on the next one (as
                // `retry_across_sessions`, whose wrapper would only add to the state).
                None => self.retry_loop(deadline, Sessions::StartingOver, Nesting::Never, try_once).await,
                // Built on an existing node: on its session, or not at all (boxed: rare).
                Some(anchor) => {
                    let on_its_session = Sessions::Only(anchor.generation);
                    match Box::pin(self.retry_loop(deadline, on_its_session, Nesting::Never, try_once)).await
                    {
                        Err(Error::SessionLost) => Err(Error::NodeLost { path: anchor.path.to_owned() }),
                        other => other,
                    }
                }
            };
            let (created, session) = created?;
            attempt.lock().settle(created.sequence.map(|sequence| (sequence, created.stat.czxid)));
            debug!(path = %created.path, session = %session.id(), "protected node created");
            Ok(OwnedNode::new(self.clone(), created, &session))
        })
    }

    /// What a protected create checks before anything is sent.
    fn check_protected(&self, request: &ProtectedCreate<'_>) -> Result<()> {
        let ProtectedCreate { parent, name, data, mode, anchor, .. } = *request;
        path::validate(parent).map_err(|reason| Error::invalid_path(parent, reason))?;
        if name.contains('/') {
            return Err(Error::InvalidArgument(format!("node name {name:?} contains '/'")));
        }
        if anchor.is_some() && !request.is_ephemeral() {
            return Err(Error::InvalidArgument(format!(
                "a create built on a node is ephemeral, not {mode:?}"
            )));
        }
        // The node's name is the marker (not known before the session is), then `name`: with a
        // valid parent, only a character of `name` can make the path invalid. The path is built
        // (with the marker's stand-in) only to report one.
        if path::has_refused_character(name) {
            let candidate = path::join(parent, &format!("{}{name}", path::PROTECTED_MARKER));
            path::validate_sequential(&candidate)
                .map_err(|reason| Error::invalid_path(&candidate, reason))?;
        }
        self.check_data_size(data.len())
    }
}

fn is_connection_error_or_lost(err: &Error) -> bool {
    err.is_retryable() || err.is_session_lost() || matches!(err, Error::Timeout { .. })
}

/// What a protected create knows across its tries.
struct ProtectedAttempt<'a> {
    /// Borrowed from the create, not cloned: a clone would touch the framework's shared count
    /// twice per create.
    framework: &'a Framework,
    parent: &'a str,
    /// The prefix of the current try and the session generation it belongs to (shared with the
    /// try that uses it: one allocation per prefix).
    current: Option<(Arc<str>, u64)>,
    /// Whether a create with the current prefix may have reached the server.
    maybe_created: bool,
    /// Whether the node outlives its session (persistent, container, TTL): then the prefix is
    /// kept across sessions, and looked for on the next one.
    outlives_session: bool,
    /// How prefixes are made.
    marker: &'a NodeMarker,
    /// The name after the prefix.
    name: &'a str,
    /// With a session marker: the turn in the lane of the current try's session, held until the
    /// outcome is known, and that session's generation.
    lane: Option<(MarkerLane, u64)>,
}

impl<'a> ProtectedAttempt<'a> {
    fn new(framework: &'a Framework, request: &ProtectedCreate<'a>, outlives_session: bool) -> Self {
        Self {
            framework,
            parent: request.parent,
            current: None,
            maybe_created: false,
            outlives_session,
            marker: request.marker,
            name: request.name,
            lane: None,
        }
    }

    /// Whether this attempt holds its lane's turn on `session`.
    fn holds_lane_of(&self, session: &Session) -> bool {
        matches!(&self.lane, Some((_, generation)) if *generation == session.generation())
    }

    /// The prefix to use on `session`, and whether an earlier try with it may have created a node
    /// (so look before creating): the same prefix on the same session, a fresh one on a new
    /// session for an ephemeral node (whatever the old one created is handed to the cleanup
    /// worker); a node that outlives its session keeps its prefix and is looked for.
    ///
    /// `lane` is the turn just taken for `session` (session markers only), and the returned floor
    /// that of the turn held: with a session marker, only a node above it can be this create's.
    fn prefix_for(
        &mut self,
        session: &Session,
        lane: Option<MarkerLane>,
    ) -> (Arc<str>, bool, Option<SequenceFloor>) {
        let (prefix, search_first) = match &self.current {
            Some((prefix, generation)) if *generation == session.generation() || self.outlives_session => {
                let search_first = self.maybe_created;
                self.maybe_created = true;
                (prefix.clone(), search_first)
            }
            _ => {
                self.hand_over_unknown();
                let prefix = self.marker.render_shared(session.id());
                self.current = Some((prefix.clone(), session.generation()));
                // Set before the create is sent: a drop from here on may leave a node.
                self.maybe_created = true;
                (prefix, false)
            }
        };
        if let Some(lane) = lane {
            self.lane = Some((lane, session.generation()));
        }
        let floor = self.lane.as_ref().map(|(lane, _)| **lane);
        (prefix, search_first, floor)
    }

    /// The current prefix is known to have no node (created and handed out, with `created` its
    /// sequence and czxid, or refused): the lane's turn, if any, passes on.
    fn settle(&mut self, created: Option<(i32, i64)>) {
        self.maybe_created = false;
        if let (Some((mut lane, _)), Some((sequence, czxid))) = (self.lane.take(), created) {
            lane.record(sequence, czxid);
        }
    }

    fn hand_over_unknown(&mut self) {
        let lane = self.lane.take();
        if let (true, Some((prefix, _))) = (self.maybe_created, self.current.take()) {
            let task = match lane {
                // The prefix names the session: the lane's floor tells this create's node.
                Some((lane, generation)) => CleanupTask::Undecided(UndecidedCreate {
                    parent: self.parent.to_owned(),
                    prefix: prefix.to_string(),
                    name: self.name.to_owned(),
                    generation,
                    lane,
                }),
                // The prefix names the call: whatever carries it is this create's.
                None => CleanupTask::Protected { parent: self.parent.to_owned(), prefix: prefix.to_string() },
            };
            self.framework.upper::<CleanupQueue>().submit(task);
        }
        self.maybe_created = false;
    }
}

impl Drop for ProtectedAttempt<'_> {
    fn drop(&mut self) {
        self.hand_over_unknown();
    }
}
