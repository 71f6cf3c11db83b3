//! [`FaultProxy`]: the handle a test holds, and the faults it starts or arms.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::net::{TcpListener, ToSocketAddrs};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use super::connection::accept_loop;
use super::matching::RequestMatch;
use super::reports::{BlackHoleAtRequest, CutAfterCreate, CutAfterReply, ProxyStats};
use super::state::{ArmedBlackHole, ArmedCut, Shared, State, WatchEventDrop};
use crate::error::{Result, TestingError};

/// A TCP proxy on `127.0.0.1:<free port>` in front of one ZooKeeper server, for faults a real
/// network produces and a test cannot otherwise time: a reset, a silent partition, a connection
/// lost between a create reaching the server and its reply reaching the client.
///
/// Point one client at [`connect_string`](Self::connect_string) and others directly at the
/// server: only the proxied client is hit. Faults:
///
/// * [`cut_now`](Self::cut_now): close every open connection (both sides) at once; new ones are
///   forwarded. The client sees Disconnected, reconnects through the proxy, keeps its session.
/// * [`black_hole`](Self::black_hole): for a while forward nothing either way and accept new
///   connections without forwarding them: the client sees silence, not a reset. **When the period
///   ends every connection that was open during it is closed**, and traffic flows again on new
///   connections. Black-holing one client past its session timeout expires exactly that session:
///   the server expires it while the client cannot reach it, and the client learns it on
///   reconnecting (or from its own timer first).
/// * [`cut_after_next_reply`](Self::cut_after_next_reply): let the next request that matches a
///   [`RequestMatch`] (an op code, optionally a path prefix) reach the server, drop the server's
///   reply and close the connection — the server did it (a multi committed, a node was deleted)
///   but the client got a connection loss.
/// * [`cut_after_next_create`](Self::cut_after_next_create): the same for the next create.
/// * [`black_hole_at_next_request`](Self::black_hole_at_next_request): start a black hole the
///   moment the next request that matches arrives, before it reaches the server — the client's
///   request is in flight, and stays so, while the partition lasts.
/// * [`black_hole_requests`](Self::black_hole_requests): a one-way black hole: drop what the
///   client sends, forward what the server sends — the server stops hearing a client that still
///   hears it.
/// * [`delay_replies`](Self::delay_replies): hold what the server sends for a while before
///   forwarding it, in order — late answers, a slow link back.
/// * [`drop_watch_events`](Self::drop_watch_events): drop the server's watch notifications (all,
///   or each with a probability) and keep the connection: the client's watchers never fire and
///   nothing tells it so — a follower that drifts from the server without a reset.
///
/// Dropping the proxy closes every connection and stops listening.
///
/// # Example
/// ```no_run
/// # async fn demo(server: &zk_recipes_testing::TestingServer) -> Result<(), zk_recipes_testing::TestingError> {
/// use std::time::Duration;
/// use zk_recipes_testing::FaultProxy;
///
/// let proxy = FaultProxy::start(server.address()).await?;
/// // connect the client under test to proxy.connect_string() ...
/// proxy.cut_now(); // client: Disconnected, then SyncConnected again (same session)
/// proxy.black_hole(Duration::from_secs(5)); // longer than its session timeout: Expired
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct FaultProxy {
    shared: Arc<Shared>,
    local_address: SocketAddr,
    accept_task: JoinHandle<()>,
    runtime: tokio::runtime::Handle,
}

impl FaultProxy {
    /// Listens on a free loopback port and forwards every accepted connection to `target`
    /// (resolved once, now).
    ///
    /// # Errors
    /// [`TestingError::Io`] if `target` does not resolve or no port can be bound.
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled start leaves nothing running (a listener it bound is closed with
    /// it).
    pub async fn start(target: impl ToSocketAddrs) -> Result<FaultProxy> {
        let target = tokio::net::lookup_host(target)
            .await
            .map_err(|err| TestingError::io("resolving the proxy target", err))?
            .next()
            .ok_or_else(|| {
                TestingError::InvalidArgument("the proxy target resolves to no address".to_owned())
            })?;
        let listener = TcpListener::bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)))
            .await
            .map_err(|err| TestingError::io("binding the proxy on 127.0.0.1:0", err))?;
        let local_address =
            listener.local_addr().map_err(|err| TestingError::io("reading the proxy's address", err))?;
        let shared = Arc::new(Shared {
            target,
            state: Mutex::new(State::default()),
            black_hole: watch::Sender::new(false),
            accepted: AtomicU64::new(0),
            cut: AtomicU64::new(0),
            bytes_to_server: AtomicU64::new(0),
            writes_to_server: AtomicU64::new(0),
            bytes_to_client: AtomicU64::new(0),
            refused: AtomicU64::new(0),
            watch_events: WatchEventDrop::default(),
            reply_delay_nanos: AtomicU64::new(0),
        });
        let accept_task = tokio::spawn(accept_loop(shared.clone(), listener));
        tracing::debug!(%local_address, %target, "fault proxy listening");
        Ok(FaultProxy { shared, local_address, accept_task, runtime: tokio::runtime::Handle::current() })
    }

    /// `"127.0.0.1:PORT"` of the proxy, for the client under test.
    pub fn connect_string(&self) -> String {
        self.local_address.to_string()
    }

    /// The proxy's listening address.
    pub fn local_address(&self) -> SocketAddr {
        self.local_address
    }

    /// The server address traffic is forwarded to.
    pub fn target(&self) -> SocketAddr {
        self.shared.target
    }

    /// Counters for assertions.
    pub fn stats(&self) -> ProxyStats {
        ProxyStats {
            accepted: self.shared.accepted.load(Ordering::Relaxed),
            open: self.shared.state.lock().connections.len(),
            cut: self.shared.cut.load(Ordering::Relaxed),
            bytes_to_server: self.shared.bytes_to_server.load(Ordering::Relaxed),
            writes_to_server: self.shared.writes_to_server.load(Ordering::Relaxed),
            bytes_to_client: self.shared.bytes_to_client.load(Ordering::Relaxed),
            refused: self.shared.refused.load(Ordering::Relaxed),
            watch_events_dropped: self.shared.watch_events.dropped.load(Ordering::Relaxed),
        }
    }

    /// Closes every open connection, both sides, now; returns how many. New connections are
    /// accepted and forwarded as usual.
    pub fn cut_now(&self) -> usize {
        let mut state = self.shared.state.lock();
        self.shared.cut_all(&mut state)
    }

    /// Starts a black hole of `duration` and returns at once: open connections forward nothing
    /// (in either direction; what they send waits in the kernel's buffers), new connections are
    /// accepted but not forwarded. When it ends, every connection open during it is closed and
    /// traffic flows again. A new call while one is active replaces its end time.
    pub fn black_hole(&self, duration: Duration) {
        let _runtime = self.runtime.enter();
        let mut state = self.shared.state.lock();
        self.shared.start_black_hole(&mut state, duration);
    }

    /// Ends a black hole, and a [`black_hole_requests`](Self::black_hole_requests), early
    /// (closing their connections, as at their normal end). A reply delay stays.
    pub fn heal(&self) {
        self.shared.end_black_hole(None);
        self.shared.end_requests_black_hole(None);
    }

    /// Starts a one-way black hole of `duration` and returns at once: what clients send (on open
    /// connections and on new ones) is read and dropped, so the server hears nothing more from
    /// them, while what the server sends is still forwarded (replies to requests it had, pings'
    /// answers, watch notifications, late under [`delay_replies`](Self::delay_replies)). The
    /// client goes on hearing a server that no longer hears it — the server's last contact from
    /// the client is earlier than the client's last byte from the server. When it ends (or at
    /// [`heal`](Self::heal)), every connection open then is closed (its requests lost bytes) and
    /// traffic flows again on new connections. A new call while one is active replaces its end
    /// time. Black hole and one-way black hole are independent: either silences the requests.
    ///
    /// # Example
    /// ```no_run
    /// # fn demo(proxy: &zk_recipes_testing::FaultProxy) {
    /// use std::time::Duration;
    ///
    /// proxy.delay_replies(Duration::from_millis(500));
    /// // The server stops hearing the client now; the client hears replies for 500 ms more.
    /// proxy.black_hole_requests(Duration::from_secs(10));
    /// # }
    /// ```
    pub fn black_hole_requests(&self, duration: Duration) {
        let _runtime = self.runtime.enter();
        self.shared.start_requests_black_hole(duration);
    }

    /// True during a [`black_hole_requests`](Self::black_hole_requests).
    pub fn is_requests_black_holed(&self) -> bool {
        self.shared.state.lock().requests_black_holed
    }

    /// From now on, holds every byte the server sends (on any connection) for `delay` after the
    /// proxy reads it, then forwards it, in order: a server whose answers come late (a slow
    /// disk, a backlog) or a slow link from server to client. Requests are forwarded at once.
    /// `Duration::ZERO` turns it off (the default); bytes already held still wait their turn, so
    /// nothing is reordered. What is held when its connection closes (a cut, the server closing)
    /// is lost, as on a reset; a [`black_hole`](Self::black_hole) holds it until its end closes
    /// the connection.
    ///
    /// Raising the delay by `d` leaves the client `d` without a byte from the server (plus the
    /// usual gap between two replies): zookeeper-client gives a connection up after `2/5` of the
    /// session timeout without one, so raise a long delay in steps shorter than that.
    ///
    /// # Example
    /// ```no_run
    /// # fn demo(proxy: &zk_recipes_testing::FaultProxy) {
    /// use std::time::Duration;
    ///
    /// proxy.delay_replies(Duration::from_millis(800));
    /// // ... once a delayed reply has reached the client ...
    /// proxy.delay_replies(Duration::from_millis(1600));
    /// proxy.delay_replies(Duration::ZERO); // on time again, after what is held
    /// # }
    /// ```
    pub fn delay_replies(&self, delay: Duration) {
        let nanos = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        self.shared.reply_delay_nanos.store(nanos, Ordering::Relaxed);
        tracing::debug!(local_address = %self.local_address, ?delay, "fault proxy delays replies");
    }

    /// True during a [`black_hole`](Self::black_hole).
    pub fn is_black_holed(&self) -> bool {
        self.shared.state.lock().black_holed
    }

    /// Arms a cut for the next request that `matcher` matches, on any connection: the request
    /// reaches the server, the server's reply to it is dropped and the connection is closed both
    /// ways, so the client sees a connection loss for something the server did. Await the
    /// returned handle to learn which request was hit.
    ///
    /// Each call arms one cut; a request fires the oldest armed cut it matches. One connection
    /// has at most one cut pending at a time (a second matching request on it before the first
    /// one's reply is forwarded normally). If the connection dies before the reply arrives, the
    /// cut re-arms.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
    /// use zk_recipes_testing::RequestMatch;
    ///
    /// let cut = proxy.cut_after_next_reply(RequestMatch::multi().under("/jobs"));
    /// // ... the client commits a multi deleting /jobs/job-1 through the proxy and gets a
    /// // connection loss; the server did commit it ...
    /// let cut = cut.await?;
    /// assert_eq!(cut.op_code, 14);
    /// assert!(cut.ops.iter().any(|(op_code, path)| *op_code == 2 && path == "/jobs/job-1"));
    /// # Ok(()) }
    /// ```
    pub fn cut_after_next_reply(&self, matcher: RequestMatch) -> CutAfterReply {
        let (sender, receiver) = oneshot::channel();
        self.shared.state.lock().armed_cuts.push_back(ArmedCut { matcher, sender, then_black_hole: None });
        CutAfterReply { receiver }
    }

    /// As [`cut_after_next_reply`](Self::cut_after_next_reply), and at the moment of the cut a
    /// [`black_hole`](Self::black_hole) of `duration` starts, before the client can reconnect:
    /// the server has done the request, the client never hears of it, and (with `duration` past
    /// the session timeout) the session expires before the client gets through again.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
    /// use std::time::Duration;
    /// use zk_recipes_testing::RequestMatch;
    ///
    /// let cut = proxy.cut_after_next_reply_then_black_hole(RequestMatch::multi().under("/jobs"), Duration::from_secs(6));
    /// // ... the client commits a multi under /jobs; the server commits it, the reply is dropped,
    /// // and the client's session expires in the silence that follows ...
    /// assert_eq!(cut.await?.op_code, 14);
    /// # Ok(()) }
    /// ```
    pub fn cut_after_next_reply_then_black_hole(
        &self,
        matcher: RequestMatch,
        duration: Duration,
    ) -> CutAfterReply {
        let (sender, receiver) = oneshot::channel();
        let armed = ArmedCut { matcher, sender, then_black_hole: Some(duration) };
        self.shared.state.lock().armed_cuts.push_back(armed);
        CutAfterReply { receiver }
    }

    /// Arms a cut for the next create request (op codes 1 create, 15 create2, 19
    /// createContainer, 21 createTTL; creates inside a `multi` don't count) on any connection:
    /// [`cut_after_next_reply`](Self::cut_after_next_reply) with [`RequestMatch::create`].
    /// Await the returned handle to learn which create was hit.
    ///
    /// Each call arms one cut; several calls cut the next creates in turn. If the connection dies
    /// before the reply arrives, the cut re-arms for the next create.
    pub fn cut_after_next_create(&self) -> CutAfterCreate {
        CutAfterCreate { reply: self.cut_after_next_reply(RequestMatch::create()) }
    }

    /// From now on, a request that `matcher` matches is not forwarded and its connection is closed
    /// (the requests before it on that connection are forwarded): plays a server that does not
    /// know the request, as ZooKeeper before 3.6 closes the connection on a multi-read (op code
    /// 22). [`ProxyStats::refused`] counts them.
    ///
    /// # Example
    /// ```no_run
    /// # fn demo(proxy: &zk_recipes_testing::FaultProxy) {
    /// use zk_recipes_testing::RequestMatch;
    /// proxy.refuse_requests(RequestMatch::op_codes([22])); // a ZooKeeper 3.5 server
    /// # }
    /// ```
    pub fn refuse_requests(&self, matcher: RequestMatch) {
        self.shared.state.lock().refused.push(matcher);
    }

    /// Ends every [`refuse_requests`](Self::refuse_requests): matching requests are forwarded
    /// again.
    ///
    /// # Example
    /// ```no_run
    /// # fn demo(proxy: &zk_recipes_testing::FaultProxy) {
    /// use zk_recipes_testing::RequestMatch;
    /// proxy.refuse_requests(RequestMatch::delete().under("/app"));
    /// // ... deletes under /app fail with a connection loss meanwhile ...
    /// proxy.stop_refusing();
    /// # }
    /// ```
    pub fn stop_refusing(&self) {
        self.shared.state.lock().refused.clear();
    }

    /// Arms a black hole of `duration` that starts when the next request that `matcher` matches
    /// arrives, on any connection: that request is not forwarded (nor anything after it), so the
    /// client has it in flight with no answer, and everything goes silent as with
    /// [`black_hole`](Self::black_hole) — whose end closes every connection, the held request's
    /// too (it never reaches the server). Await the returned handle to learn which request
    /// started it.
    ///
    /// Each call arms one trigger; a request fires the oldest armed trigger it matches.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
    /// use std::time::Duration;
    /// use zk_recipes_testing::RequestMatch;
    ///
    /// // The client's next create under /app/leases never arrives; its session expires meanwhile.
    /// let held = proxy.black_hole_at_next_request(RequestMatch::create().under("/app/leases"), Duration::from_secs(30));
    /// // ... the client sends the create ...
    /// assert!(held.await?.path.starts_with("/app/leases"));
    /// # Ok(()) }
    /// ```
    pub fn black_hole_at_next_request(
        &self,
        matcher: RequestMatch,
        duration: Duration,
    ) -> BlackHoleAtRequest {
        let (sender, receiver) = oneshot::channel();
        self.shared.state.lock().armed_black_holes.push_back(ArmedBlackHole { matcher, duration, sender });
        BlackHoleAtRequest { receiver }
    }

    /// From now on, drops each watch notification the server sends on any connection (a
    /// `WatcherEvent`: a frame whose reply header has xid -1 — the connect response, requests'
    /// replies and pings are always forwarded) with `probability`, and keeps the connection open:
    /// the client is not reset and does not learn that it missed an event. A one-shot watch whose
    /// notification is dropped is gone on the server and silent on the client; a persistent
    /// watch misses that one event. [`ProxyStats::watch_events_dropped`] counts the drops.
    ///
    /// `1.0` drops every notification, `0.0` turns the mode off (the default); in between, the
    /// decisions come from a generator with a fixed seed, in the order notifications pass the
    /// proxy (over all its connections), so a run with the same traffic drops the same ones. Use
    /// [`drop_watch_events_seeded`](Self::drop_watch_events_seeded) to pick the seed. Each call
    /// restarts the generator. Faults that close connections work as usual alongside.
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] if `probability` is not in `0.0..=1.0` (or is NaN); the
    /// mode is then left as it was.
    ///
    /// # Example
    /// ```no_run
    /// # fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
    /// proxy.drop_watch_events(1.0)?; // the proxied client's watchers go quiet
    /// // ... change a watched node; the client's requests still work ...
    /// assert!(proxy.stats().watch_events_dropped > 0);
    /// proxy.drop_watch_events(0.0)?; // forward them again
    /// # Ok(()) }
    /// ```
    pub fn drop_watch_events(&self, probability: f64) -> Result<()> {
        self.drop_watch_events_seeded(probability, 0)
    }

    /// As [`drop_watch_events`](Self::drop_watch_events), with the generator that picks the
    /// dropped notifications started at `seed` (e.g. a chaos run's seed, so that a replay drops
    /// the same ones given the same traffic).
    ///
    /// # Errors
    /// [`TestingError::InvalidArgument`] if `probability` is not in `0.0..=1.0` (or is NaN); the
    /// mode is then left as it was.
    ///
    /// # Example
    /// ```no_run
    /// # fn demo(proxy: &zk_recipes_testing::FaultProxy, run_seed: u64) -> Result<(), zk_recipes_testing::TestingError> {
    /// proxy.drop_watch_events_seeded(0.25, run_seed)?; // about one notification in four
    /// # Ok(()) }
    /// ```
    pub fn drop_watch_events_seeded(&self, probability: f64, seed: u64) -> Result<()> {
        if !(0.0..=1.0).contains(&probability) {
            return Err(TestingError::InvalidArgument(format!(
                "the probability of dropping a watch notification must be in 0.0..=1.0, not {probability}"
            )));
        }
        self.shared.watch_events.set(probability, seed);
        tracing::debug!(local_address = %self.local_address, probability, seed, "fault proxy drops watch notifications");
        Ok(())
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        let mut state = self.shared.state.lock();
        state.closed = true;
        state.armed_cuts.clear();
        state.armed_black_holes.clear();
        state.connections.clear();
    }
}
