//! The supervisor: the task that owns the ZooKeeper session. It connects, publishes every
//! transition, declares a session lost and opens the next.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::sync::{broadcast, watch};
use tokio::time::Instant;
use tracing::{info, info_span, warn, Instrument};
use zookeeper_client::{Client, SessionState};

use crate::path;

use super::builder::FrameworkBuilder;
use super::diagnose::{diagnose, FailureWarnings};
use super::duration::ReadableDuration;
use super::error::{Error, Result};
use super::handle::{Core, Framework};
use super::live_session::Session;
use super::retry::Backoff;
use super::snapshot::Snapshot;
use super::state::{ConnectionState, ErrorPolicy};
use super::upper::Upper;

impl Framework {
    /// Starts the framework's session supervisor, with the floor above's state `upper`.
    pub(crate) fn start(config: FrameworkBuilder, upper: Upper) -> Framework {
        let config_for_probe = config.clone();
        let (snapshot, _) = watch::channel(Snapshot::default());
        let (events, _) = broadcast::channel(config.event_capacity);
        let acl = config.acl.clone();
        let core = Arc::new(Core {
            config,
            acl,
            snapshot,
            events,
            supervisor: Mutex::new(None),
            last_connection_failure: Mutex::new(None),
            close_delays: Arc::default(),
            features: Arc::new(super::features::FeatureProbe::new(config_for_probe)),
            upper,
            ensemble: super::ensemble::TrackedEnsemble::new(),
        });
        let span = info_span!("zk_framework", connect = %core.config.connect_string);
        let supervisor = tokio::spawn(supervise(core.clone()).instrument(span));
        *core.supervisor.lock() = Some(supervisor);
        Framework::from_core(core)
    }
}

/// How watching one session ended.
enum SessionEnd {
    Lost,
    Closed,
}

/// Owns the session: connects, publishes transitions, declares the session lost and opens the next.
async fn supervise(core: Arc<Core>) {
    let mut closed = core.subscribe();
    let mut generation = 0u64;
    let mut backoff = Backoff::default();
    let mut warnings = FailureWarnings::default();
    loop {
        let connecting_since = Instant::now();
        let connected = tokio::select! {
            _ = closed.wait_for(|snapshot| snapshot.closed) => return,
            connected = connect(&core) => connected,
        };
        let client = match connected {
            Ok(client) => client,
            Err(err) => {
                let connect_string = core.ensemble.connect_string(&core.config.connect_string);
                let failure = tokio::select! {
                    _ = closed.wait_for(|snapshot| snapshot.closed) => return,
                    failure = diagnose(&connect_string, &err, core.config.uses_tls()) => failure,
                };
                let pause = backoff.next_pause();
                warnings.failed(&failure, pause);
                let auth_failed = matches!(err, Error::ZooKeeper(zookeeper_client::Error::AuthFailed));
                if auth_failed != core.snapshot.borrow().auth_failed {
                    core.snapshot.send_modify(|snapshot| snapshot.auth_failed = auth_failed);
                }
                ::metrics::counter!(super::metrics::names::CONNECTION_ATTEMPTS_FAILED).increment(1);
                *core.last_connection_failure.lock() = Some(failure);
                tokio::select! {
                    _ = closed.wait_for(|snapshot| snapshot.closed) => return,
                    _ = tokio::time::sleep(pause) => {}
                }
                continue;
            }
        };
        backoff.reset();
        warnings.connected();
        core.last_connection_failure.lock().take();
        if core.snapshot.borrow().auth_failed {
            core.snapshot.send_modify(|snapshot| snapshot.auth_failed = false);
        }
        generation += 1;
        ::metrics::counter!(super::metrics::names::SESSIONS_CREATED).increment(1);
        let session = Session::new(
            client,
            generation,
            core.acl.clone(),
            core.features.clone(),
            (core.upper.session_opened)(),
        );
        let first_state = match session.client().state() {
            SessionState::ConnectedReadOnly => ConnectionState::ReadOnly,
            _ if generation == 1 => ConnectionState::Connected,
            _ => ConnectionState::Reconnected,
        };
        let session_id = session.id();
        if first_state != ConnectionState::ReadOnly {
            // Before anyone can see the session: its expiry is bounded from the start.
            session.expiry_clock().begin(connecting_since);
        }
        core.publish(first_state, session_id, generation, Some(session.clone()));
        let end = tokio::select! {
            end = watch_session(&core, &session, &mut closed) => end,
            never = super::ensemble::follow(&core, &session) => match never {},
        };
        let mut state_watcher = session.client().state_watcher();
        drop(session);
        match end {
            SessionEnd::Lost => {
                // Abandon the session for good: the last clone is dropped, so zookeeper-client closes
                // it if it can still reach the server. A new session is opened next.
                core.publish(ConnectionState::Lost, session_id, generation, None);
            }
            SessionEnd::Closed => {
                core.snapshot.send_modify(|snapshot| snapshot.session = None);
                // Give zookeeper-client a moment to send CloseSession so the server deletes our
                // ephemeral nodes now rather than at the session timeout.
                let closing = async {
                    loop {
                        if state_watcher.changed().await.is_terminated() {
                            break;
                        }
                    }
                };
                let _ = tokio::time::timeout(Duration::from_secs(2), closing).await;
                return;
            }
        }
    }
}

/// Opens a new session (never resuming an old one), inside the namespace if there is one.
async fn connect(core: &Core) -> Result<Client> {
    let connect_string = core.ensemble.connect_string(&core.config.connect_string);
    let client = core.config.open_client_at(&connect_string).await?;
    if core.config.tcp_nodelay {
        // Before the session is announced, so the first requests already go out without Nagle;
        // but never held up for long (the names are resolved again): after 1 s it finishes alone.
        let tuning = super::nodelay::disable_nagle_in_background(connect_string);
        let _ = tokio::time::timeout(Duration::from_secs(1), tuning).await;
    }
    let Some(namespace) = core.config.namespace_path() else {
        return Ok(client);
    };
    let options = zookeeper_client::CreateMode::Persistent
        .with_acls(zookeeper_client::Acls::new(core.acl.acl_for_path(&namespace)));
    client.mkdir(&namespace, &options).await?;
    let root = path::join(client.path(), &namespace);
    client.chroot(root).map_err(|_| Error::InvalidArgument(format!("bad namespace {namespace:?}")))
}

/// Follows one session's states until it is lost or the framework is closed.
///
/// Every session but a read-only one runs its expiry clock ([`super::expiry_clock`], a heartbeat
/// every `T/10`), under either policy, so that recipes can read when the server may expire it
/// ([`Framework::earliest_session_expiry`]). When a session is declared lost: under
/// [`ErrorPolicy::Standard`] after a whole session timeout suspended (Curator's rule; recipes
/// already treat `Suspended` as the end of every hold); under [`ErrorPolicy::SessionOnly`], where
/// a hold is trusted until `Lost`, a margin before the server may expire it, by the clock,
/// suspended or not.
async fn watch_session(core: &Core, session: &Session, closed: &mut watch::Receiver<Snapshot>) -> SessionEnd {
    let mut states = session.client().state_watcher();
    let session_id = session.id();
    let generation = session.generation();
    let timeout = session.timeout();
    let mut suspended_since: Option<Instant> = None;
    if states.peek_state() == SessionState::Disconnected {
        // Disconnected before this watcher was made (it starts from the state it found): no change
        // would report it until the next one.
        suspended_since = Some(Instant::now());
        core.publish(ConnectionState::Suspended, session_id, generation, Some(session.clone()));
    }
    // Whether the session was ever served read-only: zookeeper-client leaves such a session for a
    // new one (under the same handle) once it reaches a read-write server.
    let mut served_read_only = session.client().session().is_readonly();
    let clock = session.expiry_clock();
    let clock_runs = !served_read_only;
    let lost_by_clock = core.config.error_policy == ErrorPolicy::SessionOnly;
    let heartbeat = async {
        match clock_runs {
            true => {
                clock.start(session).await;
                clock.keep(session).await
            }
            false => std::future::pending().await,
        }
    };
    let mut heartbeat = std::pin::pin!(heartbeat);
    let lost_at = |suspended_since: Option<Instant>| match lost_by_clock && clock_runs {
        true => clock.lost_at(timeout, suspended_since.is_some()),
        false => suspended_since.map(|since| since + timeout),
    };
    loop {
        // Before the clock's first answer there is no time to be lost at (unless suspended): look
        // again every `T/20` until the answer gives one.
        let look_at = lost_at(suspended_since)
            .or_else(|| (lost_by_clock && clock_runs).then(|| Instant::now() + timeout / 20));
        tokio::select! {
            _ = closed.wait_for(|snapshot| snapshot.closed) => return SessionEnd::Closed,
            never = &mut heartbeat => match never {},
            _ = sleep_until_some(look_at) => {
                if lost_at(suspended_since).is_none_or(|at| at > Instant::now()) {
                    continue; // heard from the server meanwhile, or not yet at all
                }
                warn!(
                    session = %session_id,
                    timeout = %ReadableDuration(timeout),
                    policy = ?core.config.error_policy,
                    "the server may expire the session now: session lost"
                );
                return SessionEnd::Lost;
            }
            state = states.changed() => match state {
                SessionState::Disconnected => {
                    if suspended_since.is_none() {
                        suspended_since = Some(Instant::now());
                        core.publish(ConnectionState::Suspended, session_id, generation, Some(session.clone()));
                    }
                }
                SessionState::SyncConnected if served_read_only => {
                    // A read-only session found a read-write server: zookeeper-client opened a new
                    // session there, under the old handle's stale id. Start over on a session of our
                    // own, announced as `Reconnected` with a new generation.
                    info!(session = %session_id, "a read-write server is back: leaving the read-only session");
                    return SessionEnd::Lost;
                }
                SessionState::SyncConnected | SessionState::ConnectedReadOnly => {
                    if suspended_since.is_none() {
                        // A disconnection came and went between two looks: report it all the same.
                        core.publish(ConnectionState::Suspended, session_id, generation, Some(session.clone()));
                    }
                    suspended_since = None;
                    if core.config.tcp_nodelay {
                        // zookeeper-client reconnected on a new socket.
                        tokio::spawn(super::nodelay::disable_nagle_in_background(
                            core.ensemble.connect_string(&core.config.connect_string),
                        ));
                    }
                    let state = if state == SessionState::ConnectedReadOnly {
                        served_read_only = true;
                        ConnectionState::ReadOnly
                    } else {
                        ConnectionState::Reconnected
                    };
                    core.publish(state, session_id, generation, Some(session.clone()));
                }
                SessionState::Expired | SessionState::AuthFailed | SessionState::Closed => {
                    info!(session = %session_id, ?state, "session ended");
                    return SessionEnd::Lost;
                }
            },
        }
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
