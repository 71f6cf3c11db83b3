//! Helpers for the workspace's integration tests (not published): a framework on a real
//! ZooKeeper server, frameworks through a fault proxy, listings and node reads that panic on the
//! unexpected, and waiting for connection states — each await within a test step.
//!
//! It sits above the framework and the testing crate (which launches the servers and must not
//! depend on the framework). Every crate's integration tests dev-depend on it like on any other
//! crate, the framework's own included: integration tests link the framework's normal library,
//! the same one this crate is built on. A helper only one recipe's tests need stays with those
//! tests (`tests/common` and its siblings).
//!
//! The testing crate's deadline helpers ([`within`], [`within_for`], [`eventually`], [`STEP`],
//! [`SERVER_START`], [`init_tracing`]) are re-exported, so a test imports its helpers from one
//! place:
//!
//! ```no_run
//! use zk_recipes_test_support::*;
//!
//! # async fn demo() {
//! init_tracing();
//! let (_server, framework) = server_and_framework().await;
//! within("connected", framework.block_until_connected(STEP)).await.expect("connected");
//! assert!(children(&framework, "/locks").await.is_empty());
//! close_all([framework]).await;
//! # }
//! ```

use std::time::Duration;

use tokio::time::Instant;
use zk_recipes_framework::retry::ExponentialBackoffRetry;
use zk_recipes_framework::zookeeper_client::{self, EventType, OneshotWatcher, Stat};
use zk_recipes_framework::{
    ConnectionEvent, ConnectionEvents, ConnectionState, ConnectionUpdate, Deadline, Framework,
    FrameworkBuilder,
};
pub use zk_recipes_testing::{eventually, init_tracing, within, within_for, SERVER_START, STEP};
use zk_recipes_testing::{FaultProxy, TestingServer};

/// A builder with test-friendly settings: the given session timeout, a 5 s connection timeout,
/// fast retries (from 50 ms, at most 500 ms apart, 10 times).
pub fn builder(connect_string: &str, session_timeout: Duration) -> FrameworkBuilder {
    Framework::builder(connect_string)
        .session_timeout(session_timeout)
        .connection_timeout(Duration::from_secs(5))
        .retry_policy(
            ExponentialBackoffRetry::new(Duration::from_millis(50), 10)
                .with_max_sleep(Duration::from_millis(500)),
        )
}

/// How long a wait that must not end (an acquire behind a holder, a barrier that is set) is given
/// before a test says it did not end.
pub const STILL_WAITING: Duration = Duration::from_millis(300);

/// A deadline of one test step ([`STEP`]).
pub fn step() -> Deadline {
    Deadline::after(STEP)
}

/// A server and a framework on it (10 s sessions).
pub async fn server_and_framework() -> (TestingServer, Framework) {
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    (server, framework)
}

/// A server with a fault proxy in front: a framework through the proxy (with `session_timeout`),
/// connected, and an observer connected directly.
pub async fn proxied(session_timeout: Duration) -> (TestingServer, FaultProxy, Framework, Framework) {
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), session_timeout).start().expect("framework");
    within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    let observer = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    (server, proxy, framework, observer)
}

/// Closes every framework, each within [`STEP`].
pub async fn close_all(frameworks: impl IntoIterator<Item = Framework>) {
    for framework in frameworks {
        within("close", framework.close()).await;
    }
}

/// The children of `path` in the server's order (none if it does not exist): one listing on the
/// current session, each step within [`STEP`]; panics on any other error.
pub async fn children(framework: &Framework, path: &str) -> Vec<String> {
    let session = within("session", framework.session(step())).await.expect("session");
    match within("list", session.client().list_children(path)).await {
        Ok(children) => children,
        Err(zookeeper_client::Error::NoNode) => Vec::new(),
        Err(err) => panic!("list {path}: {err}"),
    }
}

/// Waits (polling, within [`STEP`]) until `path` has no children, or does not exist: lock and
/// queue directories at the end of a test.
pub async fn no_children_left(framework: &Framework, path: &str) {
    let what = format!("no children left under {path}");
    eventually(&what, || async { children(framework, path).await.is_empty() }).await;
}

/// The node's data and stat on the server, if it exists; panics on any other error.
async fn read_on_server(framework: &Framework, path: &str) -> Option<(Vec<u8>, Stat)> {
    match within("get data", framework.get_data(path, step())).await {
        Ok(read) => Some((read.data, read.stat)),
        Err(err) if err.is_no_node() => None,
        Err(err) => panic!("get data {path}: {err}"),
    }
}

/// The node's data and version on the server, if it exists.
pub async fn on_server(framework: &Framework, path: &str) -> Option<(Vec<u8>, i32)> {
    read_on_server(framework, path).await.map(|(data, stat)| (data, stat.version))
}

/// The node's data and ephemeral owner (a session id, 0 for a persistent node), if it exists.
pub async fn data_and_owner(framework: &Framework, path: &str) -> Option<(Vec<u8>, i64)> {
    read_on_server(framework, path).await.map(|(data, stat)| (data, stat.ephemeral_owner))
}

/// The framework's current session id (as a node's ephemeral owner); panics without a session.
pub fn session_of(framework: &Framework) -> i64 {
    framework.current().session_id.expect("a session").0
}

/// The node's data and stat; panics if it does not exist.
pub async fn data_and_stat(framework: &Framework, path: &str) -> (Vec<u8>, Stat) {
    read_on_server(framework, path).await.unwrap_or_else(|| panic!("get data {path}: no node"))
}

/// Waits (within [`STEP`]) until `events` shows `state` (`Lost`, `Reconnected`, …).
pub async fn until_state(events: &mut ConnectionEvents, state: ConnectionState) {
    within(&format!("{state:?}"), async {
        while let Some(update) = events.next().await {
            if update.state() == state {
                return;
            }
        }
        panic!("the framework closed");
    })
    .await;
}

/// Waits (within [`STEP`]) until `events` shows the session lost and then a new session: `Lost`,
/// then `Reconnected`.
pub async fn lost_then_reconnected(events: &mut ConnectionEvents) {
    within("Lost, then a new session", async {
        let mut lost = false;
        while let Some(update) = events.next().await {
            lost |= update.state() == ConnectionState::Lost;
            if lost && update.state() == ConnectionState::Reconnected {
                return;
            }
        }
        panic!("the framework closed");
    })
    .await;
}

/// When `events` shows `state`: the moment the framework published it ([`ConnectionEvent::at`]).
/// No deadline of its own (for timing a fault, wrap it in [`within_for`]); a lag or the
/// framework's end fails the test.
pub async fn when_state(events: &mut ConnectionEvents, state: ConnectionState) -> Instant {
    while let Some(update) = events.next().await {
        match update {
            ConnectionUpdate::Changed(event) if event.state == state => return event.at,
            ConnectionUpdate::Changed(_) => {}
            ConnectionUpdate::Lagged { .. } => panic!("the subscriber fell behind"),
        }
    }
    panic!("the framework closed");
}

/// When `watch` (a watch on a node: for an ephemeral node of another session, its expiry) saw
/// the node deleted; any other event fails the test. No deadline of its own, as [`when_state`].
pub async fn when_deleted(watch: OneshotWatcher) -> Instant {
    let event = watch.changed().await;
    assert_eq!(event.event_type, EventType::NodeDeleted, "{event:?}");
    Instant::now()
}

/// The next connection transition, within [`STEP`]; a lag or the end fails the test.
pub async fn next_connection_event(events: &mut ConnectionEvents) -> ConnectionEvent {
    match within("the next connection event", events.next()).await {
        Some(ConnectionUpdate::Changed(event)) => event,
        other => panic!("expected a connection event, got {other:?}"),
    }
}

/// The next connection transition's state, session id and generation, as
/// [`next_connection_event`].
pub async fn next_connection_state(events: &mut ConnectionEvents) -> (ConnectionState, i64, u64) {
    let event = next_connection_event(events).await;
    (event.state, event.session_id.0, event.generation)
}

/// Watch notifications that keep a client's connection up while the server no longer hears it:
/// a persistent watch of `subject` on `path`, whose node `writer` changes every 100 ms. With its
/// requests black-holed, zookeeper-client (which counts only the silence *from* the server) then
/// reports no `Suspended` before the server expires the session. Stops writing when dropped.
pub struct BusyNotifications {
    _watch: zk_recipes_framework::PersistentWatch,
    writer: tokio::task::JoinHandle<()>,
}

impl BusyNotifications {
    /// Creates `path` through `writer`, watches it from `subject`, and starts changing it.
    pub async fn start(subject: &Framework, writer: &Framework, path: &str) -> Self {
        within("busy node", writer.create(path).deadline(step())).await.expect("busy node");
        let watch = within("persistent watch", subject.watch(path, false, step())).await.expect("watch");
        let session = within("writer session", writer.session(step())).await.expect("session");
        let path = path.to_owned();
        let writer = tokio::spawn(async move {
            for round in 0u64.. {
                let _ = session.client().set_data(&path, &round.to_be_bytes(), None).await;
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Self { _watch: watch, writer }
    }
}

impl Drop for BusyNotifications {
    fn drop(&mut self) {
        self.writer.abort();
    }
}

/// What followed a cut after which the server no longer heard a client (`black_hole_requests`):
/// when a hold of the client's ended (a lock's `lost()`, a leadership dropped or stepped down),
/// when the client saw `Suspended`, and when an observer saw the hold's node deleted by the
/// server's expiry of the session.
#[derive(Debug, Clone, Copy)]
pub struct ExpiryRace {
    /// When the server stopped hearing the client.
    pub cut: Instant,
    /// When the hold ended.
    pub ended_at: Instant,
    /// When the client's framework reported `Suspended`.
    pub suspended_at: Instant,
    /// When the observer saw the node deleted.
    pub expired_at: Instant,
}

impl ExpiryRace {
    fn since_cut(&self, at: Instant) -> Duration {
        at.saturating_duration_since(self.cut)
    }

    /// Prints the times since the cut, for the test's output.
    pub fn report(&self, ended: &str) {
        eprintln!(
            "after the cut: {ended} {:?}, Suspended {:?}, expiry seen {:?}",
            self.since_cut(self.ended_at),
            self.since_cut(self.suspended_at),
            self.since_cut(self.expired_at)
        );
    }

    /// Asserts the scenario was the hard one: `Suspended` came no earlier than about the expiry
    /// (`T/20` before it at most), so only the expiry clock could end the hold in time.
    pub fn assert_connection_stayed_up(&self, negotiated: Duration) {
        assert!(
            self.suspended_at + negotiated / 20 > self.expired_at,
            "Suspended came {:?} after the cut, well before the expiry ({:?}): the connection did not \
             stay up",
            self.since_cut(self.suspended_at),
            self.since_cut(self.expired_at)
        );
    }

    /// Asserts the hold ended before the expiry, with `T/40` to spare.
    pub fn assert_ended_before_the_expiry(&self, negotiated: Duration, ended: &str) {
        assert!(
            self.ended_at + negotiated / 40 <= self.expired_at,
            "{ended} {:?} after the cut, the server expired the session {:?} after it: two holders \
             (negotiated {negotiated:?})",
            self.since_cut(self.ended_at),
            self.since_cut(self.expired_at)
        );
    }
}
