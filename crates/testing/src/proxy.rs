//! A loopback TCP proxy that injects network faults between ZooKeeper clients and one server.

use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::net::{Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use parking_lot::Mutex;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, ToSocketAddrs};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinHandle;

use crate::error::{Result, TestingError};

/// Frames longer than this are not ZooKeeper traffic; the connection is then passed through raw.
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// ZooKeeper op codes of the plain create requests [`FaultProxy::cut_after_next_create`] watches.
const CREATE_OP_CODES: [i32; 4] = [1, 15, 19, 21];
/// `delete` and `deleteContainer`.
const DELETE_OP_CODES: [i32; 2] = [2, 20];
const SET_DATA_OP_CODE: i32 = 5;
const MULTI_OP_CODE: i32 = 14;
const MULTI_READ_OP_CODE: i32 = 22;
/// Requests whose body starts with the path they act on.
const PATH_FIRST_OP_CODES: [i32; 20] =
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 17, 18, 19, 20, 21, 103, 104, 106];

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

/// What the proxy has done so far, for assertions.
///
/// # Example
/// ```no_run
/// # fn demo(proxy: &zk_recipes_testing::FaultProxy) {
/// let before = proxy.stats();
/// let cut = proxy.cut_now();
/// let after = proxy.stats();
/// assert_eq!(after.cut, before.cut + cut as u64);
/// println!("{} connections so far, {} bytes to the server", after.accepted, after.bytes_to_server);
/// # }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Client connections accepted.
    pub accepted: u64,
    /// Client connections open now.
    pub open: usize,
    /// Connections the proxy closed on purpose (cut, end of a black hole, cut after create).
    pub cut: u64,
    /// Bytes forwarded from clients to the server.
    pub bytes_to_server: u64,
    /// Bytes forwarded from the server to clients.
    pub bytes_to_client: u64,
    /// Requests refused ([`FaultProxy::refuse_requests`]), each closing its connection.
    pub refused: u64,
}

/// The create request whose reply [`FaultProxy::cut_after_next_create`] dropped.
///
/// # Example
/// ```no_run
/// # async fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
/// let cut = proxy.cut_after_next_create();
/// // ... the client creates /app/lock/lock- (sequential) through the proxy ...
/// let create = cut.await?;
/// assert_eq!(create.server_error, 0, "the server created the node; the client never heard");
/// println!("{} (op code {}, xid {})", create.path, create.op_code, create.xid);
/// # Ok(()) }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutCreate {
    /// The path as the client sent it (with a sequential create, without the server's suffix).
    pub path: String,
    /// The request's op code: 1 create, 15 create2, 19 createContainer, 21 createTTL.
    pub op_code: i32,
    /// The request's xid.
    pub xid: i32,
    /// The error code of the dropped reply (0: the node was created).
    pub server_error: i32,
}

/// Which request [`FaultProxy::cut_after_next_reply`] cuts after: one of some op codes, and
/// optionally only if it touches a path under a prefix.
///
/// The op codes are ZooKeeper's (`ZooDefs.OpCode`): 1 create, 2 delete, 3 exists, 4 getData,
/// 5 setData, 8 getChildren, 12 getChildren2, 13 check, 14 multi, 15 create2, 19 createContainer,
/// 20 deleteContainer, 21 createTTL, 22 multiRead, … Creates and deletes inside a multi do not
/// count as creates or deletes: match the multi.
///
/// # Example
/// ```
/// use zk_recipes_testing::RequestMatch;
///
/// // The next multi that creates, deletes or checks anything under /app/queue-locks.
/// let ack = RequestMatch::multi().under("/app/queue-locks");
/// // The next delete, setData or getData of any path.
/// let any = RequestMatch::op_codes([2, 5, 4]);
/// # let _ = (ack, any);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestMatch {
    op_codes: Vec<i32>,
    under: Option<String>,
}

impl RequestMatch {
    /// Requests with any of these op codes.
    pub fn op_codes(op_codes: impl IntoIterator<Item = i32>) -> Self {
        Self { op_codes: op_codes.into_iter().collect(), under: None }
    }

    /// Plain creates: 1 create, 15 create2, 19 createContainer, 21 createTTL.
    pub fn create() -> Self {
        Self::op_codes(CREATE_OP_CODES)
    }

    /// Plain deletes: 2 delete, 20 deleteContainer.
    pub fn delete() -> Self {
        Self::op_codes(DELETE_OP_CODES)
    }

    /// 5 setData.
    pub fn set_data() -> Self {
        Self::op_codes([SET_DATA_OP_CODE])
    }

    /// 14 multi (a transaction of creates, deletes, setDatas and checks).
    pub fn multi() -> Self {
        Self::op_codes([MULTI_OP_CODE])
    }

    /// Only requests on `prefix` or a path below it (a plain string prefix: `/a/b` also matches
    /// `/a/bc`). A multi matches if any of its operations does.
    pub fn under(mut self, prefix: impl Into<String>) -> Self {
        self.under = Some(prefix.into());
        self
    }

    fn matches(&self, request: &Request) -> bool {
        if !self.op_codes.contains(&request.op_code) {
            return false;
        }
        let Some(prefix) = &self.under else { return true };
        request.path.starts_with(prefix.as_str())
            || request.ops.iter().any(|(_, path)| path.starts_with(prefix.as_str()))
    }
}

/// The request whose reply [`FaultProxy::cut_after_next_reply`] dropped.
///
/// # Example
/// ```no_run
/// # async fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
/// use zk_recipes_testing::RequestMatch;
///
/// let cut = proxy.cut_after_next_reply(RequestMatch::delete().under("/app/jobs"));
/// // ... the client deletes /app/jobs/job-1 through the proxy and gets a connection loss ...
/// let reply = cut.await?;
/// assert_eq!((reply.op_code, reply.path.as_str()), (2, "/app/jobs/job-1"));
/// assert!(reply.ops.is_empty(), "not a multi");
/// # Ok(()) }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutReply {
    /// The request's op code (see [`RequestMatch`]).
    pub op_code: i32,
    /// The request's xid.
    pub xid: i32,
    /// The path the request acts on, as the client sent it (a sequential create's without the
    /// server's suffix); for a multi, its first operation's; empty if the request has none.
    pub path: String,
    /// A multi's operations in order, as (op code, path): e.g. `[(13, lock), (2, item), (2,
    /// lock)]` for check, delete, delete. Empty for other requests (or ops the proxy cannot
    /// parse: then the list stops there).
    pub ops: Vec<(i32, String)>,
    /// The error code in the dropped reply's header (0: done; ZooKeeper reports a failed multi's
    /// error per operation, in the body, so it may still be 0).
    pub server_error: i32,
}

/// Resolves once [`FaultProxy::cut_after_next_reply`] has cut a connection, with the request it
/// hit. Dropping it disarms the cut if it has not happened yet.
///
/// # Errors
/// [`TestingError::ProxyClosed`] if the proxy is dropped first.
///
/// # Example
/// ```no_run
/// # async fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
/// use std::time::Duration;
/// use zk_recipes_testing::RequestMatch;
///
/// let cut = proxy.cut_after_next_reply(RequestMatch::set_data());
/// // ... the client under test sets some data through the proxy ...
/// match tokio::time::timeout(Duration::from_secs(5), cut).await {
///     Ok(hit) => println!("cut after {:?}", hit?.path),
///     Err(_) => println!("no setData in 5 s: dropping the handle disarmed the cut"),
/// }
/// # Ok(()) }
/// ```
///
/// # Cancel safety
/// Cancel safe: dropping this before the cut happened disarms it (no connection is cut for it);
/// dropping it afterwards only loses the report.
#[derive(Debug)]
#[must_use = "the cut is disarmed when this is dropped"]
pub struct CutAfterReply {
    receiver: oneshot::Receiver<CutReply>,
}

impl Future for CutAfterReply {
    type Output = Result<CutReply>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.receiver).poll(cx).map(|result| result.map_err(|_| TestingError::ProxyClosed))
    }
}

/// The request that started a [`FaultProxy::black_hole_at_next_request`] black hole; it never
/// reached the server.
///
/// # Example
/// ```no_run
/// # async fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
/// use std::time::Duration;
/// use zk_recipes_testing::RequestMatch;
///
/// let held = proxy.black_hole_at_next_request(RequestMatch::multi(), Duration::from_secs(10));
/// // ... the client commits a multi through the proxy ...
/// let request = held.await?;
/// assert_eq!(request.op_code, 14);
/// println!("held back: {:?}", request.ops);
/// # Ok(()) }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldRequest {
    /// The request's op code (see [`RequestMatch`]).
    pub op_code: i32,
    /// The request's xid.
    pub xid: i32,
    /// The path the request acts on, as the client sent it; for a multi, its first operation's.
    pub path: String,
    /// A multi's operations in order, as (op code, path); empty for other requests.
    pub ops: Vec<(i32, String)>,
}

/// Resolves once [`FaultProxy::black_hole_at_next_request`] has started its black hole, with the
/// request that started it. Dropping it disarms the trigger if it has not fired yet.
///
/// # Errors
/// [`TestingError::ProxyClosed`] if the proxy is dropped first.
///
/// # Example
/// ```no_run
/// # async fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
/// use std::time::Duration;
/// use zk_recipes_testing::RequestMatch;
///
/// let trigger = proxy.black_hole_at_next_request(RequestMatch::create(), Duration::from_secs(30));
/// // ... the client under test creates a node through the proxy ...
/// let request = trigger.await?;
/// assert!(proxy.is_black_holed());
/// println!("the create of {} never reached the server", request.path);
/// # Ok(()) }
/// ```
///
/// # Cancel safety
/// Cancel safe: dropping this before a request fired the trigger disarms it (no black hole starts
/// for it); dropping it afterwards only loses the report.
#[derive(Debug)]
#[must_use = "the trigger is disarmed when this is dropped"]
pub struct BlackHoleAtRequest {
    receiver: oneshot::Receiver<HeldRequest>,
}

impl Future for BlackHoleAtRequest {
    type Output = Result<HeldRequest>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.receiver).poll(cx).map(|result| result.map_err(|_| TestingError::ProxyClosed))
    }
}

/// Resolves once [`FaultProxy::cut_after_next_create`] has cut a connection, with the create it
/// hit. Dropping it disarms the cut if it has not happened yet.
///
/// # Errors
/// [`TestingError::ProxyClosed`] if the proxy is dropped first.
///
/// # Example
/// ```no_run
/// # async fn demo(proxy: &zk_recipes_testing::FaultProxy) -> Result<(), zk_recipes_testing::TestingError> {
/// let cut = proxy.cut_after_next_create();
/// // ... the client creates /a through the proxy and gets a connection loss ...
/// assert_eq!(cut.await?.path, "/a");
/// # Ok(()) }
/// ```
///
/// # Cancel safety
/// Cancel safe: dropping this before the cut happened disarms it (no connection is cut for it);
/// dropping it afterwards only loses the report.
#[derive(Debug)]
#[must_use = "the cut is disarmed when this is dropped"]
pub struct CutAfterCreate {
    reply: CutAfterReply,
}

impl Future for CutAfterCreate {
    type Output = Result<CutCreate>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.reply).poll(cx).map(|result| {
            result.map(|cut| CutCreate {
                path: cut.path,
                op_code: cut.op_code,
                xid: cut.xid,
                server_error: cut.server_error,
            })
        })
    }
}

#[derive(Debug)]
struct Shared {
    target: SocketAddr,
    state: Mutex<State>,
    black_hole: watch::Sender<bool>,
    accepted: AtomicU64,
    cut: AtomicU64,
    bytes_to_server: AtomicU64,
    bytes_to_client: AtomicU64,
    refused: AtomicU64,
}

#[derive(Debug, Default)]
struct State {
    next_connection: u64,
    /// Dropping a sender closes its connection.
    connections: HashMap<u64, oneshot::Sender<()>>,
    black_holed: bool,
    black_hole_generation: u64,
    /// In the order armed; each waits for the next request it matches.
    armed_cuts: VecDeque<ArmedCut>,
    /// In the order armed; each starts a black hole at the next request it matches.
    armed_black_holes: VecDeque<ArmedBlackHole>,
    /// Requests that close their connection ([`FaultProxy::refuse_requests`]).
    refused: Vec<RequestMatch>,
    closed: bool,
}

#[derive(Debug)]
struct ArmedBlackHole {
    matcher: RequestMatch,
    duration: Duration,
    sender: oneshot::Sender<HeldRequest>,
}

#[derive(Debug)]
struct ArmedCut {
    matcher: RequestMatch,
    sender: oneshot::Sender<CutReply>,
    /// A black hole to start at the cut, before the client can reconnect.
    then_black_hole: Option<Duration>,
}

impl State {
    /// The oldest live cut armed for `request`, disarmed (dropped handles are forgotten).
    fn take_armed_cut(&mut self, request: &Request) -> Option<ArmedCut> {
        self.armed_cuts.retain(|armed| !armed.sender.is_closed());
        let index = self.armed_cuts.iter().position(|armed| armed.matcher.matches(request))?;
        self.armed_cuts.remove(index)
    }
}

impl Shared {
    /// Starts a black hole that ends (closing every connection open during it) after `duration`,
    /// unless a later one replaced it. The caller holds the state lock.
    fn start_black_hole(self: &Arc<Self>, state: &mut State, duration: Duration) {
        state.black_holed = true;
        state.black_hole_generation += 1;
        let generation = state.black_hole_generation;
        self.black_hole.send_replace(true);
        let shared = self.clone();
        tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            shared.end_black_hole(Some(generation));
        });
    }

    /// Starts the black hole armed for `request`, if one is: returns whether it did.
    fn black_hole_if_armed(self: &Arc<Self>, request: &Request) -> bool {
        let mut state = self.state.lock();
        state.armed_black_holes.retain(|armed| !armed.sender.is_closed());
        let Some(index) = state.armed_black_holes.iter().position(|armed| armed.matcher.matches(request))
        else {
            return false;
        };
        let armed = state.armed_black_holes.remove(index).expect("the index was just found");
        self.start_black_hole(&mut state, armed.duration);
        drop(state);
        tracing::debug!(op_code = request.op_code, path = %request.path, "fault proxy black hole at a request");
        let _ = armed.sender.send(HeldRequest {
            op_code: request.op_code,
            xid: request.xid,
            path: request.path.clone(),
            ops: request.ops.clone(),
        });
        true
    }

    fn cut_all(&self, state: &mut State) -> usize {
        let count = state.connections.len();
        state.connections.clear();
        self.cut.fetch_add(count as u64, Ordering::Relaxed);
        count
    }

    fn end_black_hole(&self, generation: Option<u64>) {
        let mut state = self.state.lock();
        if !state.black_holed
            || generation.is_some_and(|generation| generation != state.black_hole_generation)
        {
            return;
        }
        state.black_holed = false;
        // Every connection open now was open during the black hole: close them all.
        self.cut_all(&mut state);
        self.black_hole.send_replace(false);
    }
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
            bytes_to_client: AtomicU64::new(0),
            refused: AtomicU64::new(0),
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
            bytes_to_client: self.shared.bytes_to_client.load(Ordering::Relaxed),
            refused: self.shared.refused.load(Ordering::Relaxed),
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

    /// Ends a black hole early (closing its connections, as at its normal end).
    pub fn heal(&self) {
        self.shared.end_black_hole(None);
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

async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
    loop {
        let client = match listener.accept().await {
            Ok((client, _)) => client,
            Err(err) => {
                tracing::debug!(%err, "fault proxy accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = client.set_nodelay(true);
        shared.accepted.fetch_add(1, Ordering::Relaxed);
        let (cut_sender, cut_receiver) = oneshot::channel();
        let (id, black_holed) = {
            let mut state = shared.state.lock();
            if state.closed {
                return;
            }
            let id = state.next_connection;
            state.next_connection += 1;
            state.connections.insert(id, cut_sender);
            (id, state.black_holed)
        };
        tokio::spawn(run_connection(shared.clone(), id, client, cut_receiver, black_holed));
    }
}

async fn run_connection(
    shared: Arc<Shared>,
    id: u64,
    client: TcpStream,
    cut: oneshot::Receiver<()>,
    black_holed_at_accept: bool,
) {
    let work = async {
        if black_holed_at_accept {
            // Silence until the black hole ends and closes this connection.
            return std::future::pending::<Option<(oneshot::Sender<CutReply>, CutReply)>>().await;
        }
        let server = match TcpStream::connect(shared.target).await {
            Ok(server) => server,
            Err(err) => {
                tracing::debug!(%err, "fault proxy could not reach its target");
                return None;
            }
        };
        let _ = server.set_nodelay(true);
        pump(&shared, client, server).await
    };
    let outcome = tokio::select! {
        _ = cut => None,
        outcome = work => outcome,
    };
    shared.state.lock().connections.remove(&id);
    // Both sockets are closed by now (they lived in `work`); only then report the cut.
    if let Some((sender, cut_reply)) = outcome {
        shared.cut.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(op_code = cut_reply.op_code, path = %cut_reply.path, "fault proxy cut a connection after a reply");
        let _ = sender.send(cut_reply);
    }
}

/// A request forwarded to the server whose reply is to be dropped. Re-arms the proxy if the
/// connection ends before the reply.
struct PendingCut<'a> {
    shared: &'a Shared,
    request: Request,
    armed: Option<ArmedCut>,
}

impl Drop for PendingCut<'_> {
    fn drop(&mut self) {
        if let Some(armed) = self.armed.take() {
            let mut state = self.shared.state.lock();
            if !state.closed && !armed.sender.is_closed() {
                state.armed_cuts.push_front(armed);
            }
        }
    }
}

/// Forwards both ways until a side closes or a cut happens (then returns the cut).
async fn pump(
    shared: &Arc<Shared>,
    client: TcpStream,
    server: TcpStream,
) -> Option<(oneshot::Sender<CutReply>, CutReply)> {
    let (mut client_read, mut client_write) = client.into_split();
    let (mut server_read, mut server_write) = server.into_split();
    let mut black_hole = shared.black_hole.subscribe();
    let mut requests = FrameReader::default();
    let mut replies = FrameReader::default();
    let mut pending: Option<PendingCut<'_>> = None;
    let mut up = vec![0u8; 64 * 1024];
    let mut down = vec![0u8; 64 * 1024];
    loop {
        if *black_hole.borrow_and_update() {
            // Forward nothing; the end of the black hole closes this connection.
            std::future::pending::<()>().await;
        }
        tokio::select! {
            changed = black_hole.changed() => {
                if changed.is_err() {
                    return None;
                }
            }
            read = client_read.read(&mut up) => {
                let count = match read {
                    Ok(0) | Err(_) => return None,
                    Ok(count) => count,
                };
                requests.feed(&up[..count]);
                let mut out = Vec::with_capacity(count);
                let mut held = false;
                while let Some(piece) = requests.next_piece() {
                    if let Piece::Frame(frame) = &piece {
                        let request = parse_request(frame);
                        if let Some(request) = &request {
                            if shared.state.lock().refused.iter().any(|refused| refused.matches(request)) {
                                tracing::debug!(op_code = request.op_code, "fault proxy refused a request");
                                shared.refused.fetch_add(1, Ordering::Relaxed);
                                if !out.is_empty() && server_write.write_all(&out).await.is_ok() {
                                    shared.bytes_to_server.fetch_add(out.len() as u64, Ordering::Relaxed);
                                }
                                return None;
                            }
                            if shared.black_hole_if_armed(request) {
                                // This request and everything after it stay with the proxy.
                                held = true;
                                break;
                            }
                        }
                        if pending.is_none() {
                            if let Some(request) = request {
                                if let Some(armed) = shared.state.lock().take_armed_cut(&request) {
                                    pending = Some(PendingCut { shared, request, armed: Some(armed) });
                                }
                            }
                        }
                    }
                    out.extend_from_slice(piece.bytes());
                }
                if !out.is_empty() {
                    if server_write.write_all(&out).await.is_err() {
                        return None;
                    }
                    shared.bytes_to_server.fetch_add(out.len() as u64, Ordering::Relaxed);
                }
                if held {
                    // Forward nothing more; the end of the black hole closes this connection.
                    std::future::pending::<()>().await;
                }
            }
            read = server_read.read(&mut down) => {
                let count = match read {
                    Ok(0) | Err(_) => return None,
                    Ok(count) => count,
                };
                replies.feed(&down[..count]);
                let mut out = Vec::with_capacity(count);
                let mut cut = None;
                while let Some(piece) = replies.next_piece() {
                    if let (Piece::Frame(frame), Some(waiting)) = (&piece, pending.as_mut()) {
                        if let Some((xid, error)) = reply_header(frame) {
                            if xid == waiting.request.xid {
                                cut = waiting.armed.take().map(|armed| {
                                    if let Some(duration) = armed.then_black_hole {
                                        // Before this connection closes, so that the client's
                                        // reconnect meets the silence.
                                        shared.start_black_hole(&mut shared.state.lock(), duration);
                                    }
                                    let request = &mut waiting.request;
                                    (armed.sender, CutReply {
                                        op_code: request.op_code,
                                        xid,
                                        path: std::mem::take(&mut request.path),
                                        ops: std::mem::take(&mut request.ops),
                                        server_error: error,
                                    })
                                });
                                break;
                            }
                        }
                    }
                    out.extend_from_slice(piece.bytes());
                }
                if !out.is_empty() {
                    if client_write.write_all(&out).await.is_err() {
                        return None;
                    }
                    shared.bytes_to_client.fetch_add(out.len() as u64, Ordering::Relaxed);
                }
                if cut.is_some() {
                    return cut;
                }
            }
        }
    }
}

/// A piece of one direction of a ZooKeeper connection.
#[derive(Debug, PartialEq, Eq)]
enum Piece {
    /// The first frame (ConnectRequest / ConnectResponse: no header), length prefix included.
    Handshake(Vec<u8>),
    /// A later frame (request or reply header + body), length prefix included.
    Frame(Vec<u8>),
    /// Bytes of a stream that is not ZooKeeper framing (passed through unparsed).
    Raw(Vec<u8>),
}

impl Piece {
    fn bytes(&self) -> &[u8] {
        match self {
            Piece::Handshake(bytes) | Piece::Frame(bytes) | Piece::Raw(bytes) => bytes,
        }
    }
}

/// Splits a byte stream into length-prefixed frames, across arbitrary read boundaries.
#[derive(Debug, Default)]
struct FrameReader {
    buffer: Vec<u8>,
    seen_handshake: bool,
    raw: bool,
}

impl FrameReader {
    fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    fn next_piece(&mut self) -> Option<Piece> {
        if self.raw {
            return (!self.buffer.is_empty()).then(|| Piece::Raw(std::mem::take(&mut self.buffer)));
        }
        let length = read_i32(&self.buffer, 0)?;
        let length = match usize::try_from(length) {
            Ok(length) if length <= MAX_FRAME => length,
            _ => {
                self.raw = true;
                return self.next_piece();
            }
        };
        if self.buffer.len() < 4 + length {
            return None;
        }
        let frame: Vec<u8> = self.buffer.drain(..4 + length).collect();
        if self.seen_handshake {
            Some(Piece::Frame(frame))
        } else {
            self.seen_handshake = true;
            Some(Piece::Handshake(frame))
        }
    }
}

fn read_i32(bytes: &[u8], at: usize) -> Option<i32> {
    let chunk: [u8; 4] = bytes.get(at..at + 4)?.try_into().ok()?;
    Some(i32::from_be_bytes(chunk))
}

/// What the proxy knows of a request: its header, its path, a multi's operations.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Request {
    xid: i32,
    op_code: i32,
    /// The path it acts on (a multi's first operation's); empty if none.
    path: String,
    /// A multi's operations, (op code, path), as far as they parse.
    ops: Vec<(i32, String)>,
}

/// Parses a request frame (length prefix included): RequestHeader { xid: i32, type: i32 }, then
/// the body. `None` if it is too short for a header.
fn parse_request(frame: &[u8]) -> Option<Request> {
    let mut body = Jute { bytes: frame, at: 4 };
    let xid = body.int()?;
    let op_code = body.int()?;
    let mut request = Request { xid, op_code, path: String::new(), ops: Vec::new() };
    if PATH_FIRST_OP_CODES.contains(&op_code) {
        request.path = body.string().unwrap_or_default();
    } else if op_code == MULTI_OP_CODE || op_code == MULTI_READ_OP_CODE {
        request.ops = multi_ops(&mut body);
        request.path = request.ops.first().map(|(_, path)| path.clone()).unwrap_or_default();
    }
    Some(request)
}

/// A multi's operations: MultiHeader { type: i32, done: bool, err: i32 } before each one's body,
/// until `done`. Stops at the first operation whose body it does not know.
fn multi_ops(body: &mut Jute<'_>) -> Vec<(i32, String)> {
    let mut ops = Vec::new();
    loop {
        let (Some(op_code), Some(done), Some(_err)) = (body.int(), body.boolean(), body.int()) else {
            return ops;
        };
        if done || op_code == -1 {
            return ops;
        }
        let Some(path) = body.string() else { return ops };
        let rest = match op_code {
            // CreateRequest { path, data, acl, flags } (+ ttl for createTTL).
            1 | 15 | 19 | 21 => body
                .buffer()
                .and_then(|_| body.acls())
                .and_then(|()| body.skip(4))
                .and_then(|()| if op_code == 21 { body.skip(8) } else { Some(()) }),
            // DeleteRequest / CheckVersionRequest { path, version }.
            2 | 13 | 20 => body.skip(4),
            // SetDataRequest { path, data, version }.
            5 => body.buffer().and_then(|()| body.skip(4)),
            // GetDataRequest / GetChildrenRequest { path, watch } (multiRead).
            4 | 8 => body.skip(1),
            _ => None,
        };
        ops.push((op_code, path));
        if rest.is_none() {
            return ops;
        }
    }
}

/// A reader of ZooKeeper's jute encoding (big-endian, length-prefixed strings and buffers).
struct Jute<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Jute<'_> {
    fn int(&mut self) -> Option<i32> {
        let value = read_i32(self.bytes, self.at)?;
        self.at += 4;
        Some(value)
    }

    fn boolean(&mut self) -> Option<bool> {
        let value = *self.bytes.get(self.at)?;
        self.at += 1;
        Some(value != 0)
    }

    fn skip(&mut self, count: usize) -> Option<()> {
        (self.at + count <= self.bytes.len()).then(|| self.at += count)
    }

    /// A length-prefixed byte run; -1 (null) is empty.
    fn raw(&mut self) -> Option<&[u8]> {
        let length = self.int()?;
        let length = if length < 0 { 0 } else { usize::try_from(length).ok()? };
        let bytes = self.bytes.get(self.at..self.at + length)?;
        self.at += length;
        Some(bytes)
    }

    fn string(&mut self) -> Option<String> {
        self.raw().map(|bytes| String::from_utf8_lossy(bytes).into_owned())
    }

    fn buffer(&mut self) -> Option<()> {
        self.raw().map(drop)
    }

    /// vector<ACL { perms: i32, id: Id { scheme: string, id: string } }>.
    fn acls(&mut self) -> Option<()> {
        let count = self.int()?;
        for _ in 0..count.max(0) {
            self.skip(4)?;
            self.buffer()?;
            self.buffer()?;
        }
        Some(())
    }
}

/// `(xid, err)` of a reply frame (length prefix included): ReplyHeader { xid: i32, zxid: i64, err: i32 }.
fn reply_header(frame: &[u8]) -> Option<(i32, i32)> {
    Some((read_i32(frame, 4)?, read_i32(frame, 16)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(payload: &[u8]) -> Vec<u8> {
        let mut frame = (payload.len() as i32).to_be_bytes().to_vec();
        frame.extend_from_slice(payload);
        frame
    }

    fn create_payload(xid: i32, op_code: i32, path: &str) -> Vec<u8> {
        let mut payload = xid.to_be_bytes().to_vec();
        payload.extend_from_slice(&op_code.to_be_bytes());
        payload.extend_from_slice(&(path.len() as i32).to_be_bytes());
        payload.extend_from_slice(path.as_bytes());
        payload.extend_from_slice(&[0, 0, 0, 0]); // empty data
        payload
    }

    #[test]
    fn frames_survive_any_split() {
        let mut stream = frame(b"connect-request");
        stream.extend(frame(&create_payload(7, 15, "/a/b")));
        stream.extend(frame(&create_payload(8, 4, "/get")));
        for split in 0..stream.len() {
            let mut reader = FrameReader::default();
            let mut pieces = Vec::new();
            for chunk in [&stream[..split], &stream[split..]] {
                reader.feed(chunk);
                while let Some(piece) = reader.next_piece() {
                    pieces.push(piece);
                }
            }
            assert_eq!(pieces.len(), 3, "split at {split}");
            assert!(matches!(pieces[0], Piece::Handshake(_)));
            let creates: Vec<_> = pieces[1..]
                .iter()
                .filter_map(|piece| parse_request(piece.bytes()))
                .filter(|request| RequestMatch::create().matches(request))
                .map(|request| (request.xid, request.op_code, request.path))
                .collect();
            assert_eq!(creates, vec![(7, 15, "/a/b".to_owned())]);
            let rejoined: Vec<u8> = pieces.iter().flat_map(|piece| piece.bytes().to_vec()).collect();
            assert_eq!(rejoined, stream);
        }
    }

    #[test]
    fn byte_at_a_time_and_reply_headers() {
        let mut reply = 42i32.to_be_bytes().to_vec();
        reply.extend_from_slice(&0x1234i64.to_be_bytes());
        reply.extend_from_slice(&(-110i32).to_be_bytes());
        let stream = [frame(b"connect-response"), frame(&reply)].concat();
        let mut reader = FrameReader::default();
        let mut pieces = Vec::new();
        for byte in &stream {
            reader.feed(std::slice::from_ref(byte));
            while let Some(piece) = reader.next_piece() {
                pieces.push(piece);
            }
        }
        assert_eq!(pieces.len(), 2);
        assert_eq!(reply_header(pieces[1].bytes()), Some((42, -110)));
    }

    #[test]
    fn non_zookeeper_bytes_pass_through_raw() {
        let mut reader = FrameReader::default();
        reader.feed(b"\xff\xff\xff\xffhello");
        assert_eq!(reader.next_piece(), Some(Piece::Raw(b"\xff\xff\xff\xffhello".to_vec())));
        reader.feed(b"more");
        assert_eq!(reader.next_piece(), Some(Piece::Raw(b"more".to_vec())));
        assert_eq!(reader.next_piece(), None);
    }

    #[test]
    fn only_create_op_codes_count() {
        for op_code in CREATE_OP_CODES {
            let request = parse_request(&frame(&create_payload(1, op_code, "/x"))).expect("parses");
            assert!(RequestMatch::create().matches(&request), "{op_code}");
        }
        for op_code in [2, 4, 5, 14, -11] {
            let request = parse_request(&frame(&create_payload(1, op_code, "/x"))).expect("parses");
            assert!(!RequestMatch::create().matches(&request), "{op_code}");
        }
    }

    fn string(value: &str) -> Vec<u8> {
        [(value.len() as i32).to_be_bytes().to_vec(), value.as_bytes().to_vec()].concat()
    }

    fn multi_header(op_code: i32, done: bool) -> Vec<u8> {
        [op_code.to_be_bytes().to_vec(), vec![u8::from(done)], (-1i32).to_be_bytes().to_vec()].concat()
    }

    /// A multi as the Java client and zookeeper-client send it: a protected create with one ACL,
    /// a check, a setData, a createTTL, two deletes, the closing header.
    fn ack_like_multi(xid: i32) -> Vec<u8> {
        let acl =
            [1i32.to_be_bytes().to_vec(), 31i32.to_be_bytes().to_vec(), string("world"), string("anyone")]
                .concat();
        let ops = [
            multi_header(1, false),
            string("/q/queue-"),
            string("item bytes"),
            acl.clone(),
            2i32.to_be_bytes().to_vec(),
            multi_header(13, false),
            string("/locks/queue-0000000001"),
            (-1i32).to_be_bytes().to_vec(),
            multi_header(5, false),
            string("/q"),
            (-1i32).to_be_bytes().to_vec(), // null data
            3i32.to_be_bytes().to_vec(),
            multi_header(21, false),
            string("/ttl"),
            string(""),
            acl,
            5i32.to_be_bytes().to_vec(),
            60_000i64.to_be_bytes().to_vec(),
            multi_header(2, false),
            string("/q/queue-0000000001"),
            (-1i32).to_be_bytes().to_vec(),
            multi_header(2, false),
            string("/locks/queue-0000000001"),
            (-1i32).to_be_bytes().to_vec(),
            multi_header(-1, true),
        ]
        .concat();
        frame(&[xid.to_be_bytes().to_vec(), 14i32.to_be_bytes().to_vec(), ops].concat())
    }

    #[test]
    fn multi_operations_are_parsed_in_order() {
        let request = parse_request(&ack_like_multi(9)).expect("parses");
        assert_eq!(request.xid, 9);
        assert_eq!(request.op_code, 14);
        assert_eq!(request.path, "/q/queue-");
        assert_eq!(
            request.ops,
            vec![
                (1, "/q/queue-".to_owned()),
                (13, "/locks/queue-0000000001".to_owned()),
                (5, "/q".to_owned()),
                (21, "/ttl".to_owned()),
                (2, "/q/queue-0000000001".to_owned()),
                (2, "/locks/queue-0000000001".to_owned()),
            ]
        );
    }

    #[test]
    fn a_truncated_multi_yields_the_operations_before_the_cut() {
        let whole = ack_like_multi(9);
        let mut truncated = whole[..whole.len() - 40].to_vec();
        let length = (truncated.len() - 4) as i32;
        truncated[..4].copy_from_slice(&length.to_be_bytes());
        let request = parse_request(&truncated).expect("parses");
        assert_eq!(request.ops.len(), 5, "{:?}", request.ops);
        assert_eq!(request.ops[4], (2, "/q/queue-0000000001".to_owned()));
    }

    #[test]
    fn matching_by_op_code_and_path_prefix() {
        let multi = parse_request(&ack_like_multi(3)).expect("parses");
        assert!(RequestMatch::multi().matches(&multi));
        assert!(RequestMatch::multi().under("/locks").matches(&multi), "any operation's path counts");
        assert!(!RequestMatch::multi().under("/elsewhere").matches(&multi));
        assert!(!RequestMatch::create().matches(&multi), "creates inside a multi are not creates");
        assert!(!RequestMatch::delete().matches(&multi));

        let delete = parse_request(&frame(&create_payload(4, 2, "/q/queue-0000000007"))).expect("parses");
        assert_eq!(delete.path, "/q/queue-0000000007");
        assert!(RequestMatch::delete().under("/q/").matches(&delete));
        assert!(!RequestMatch::delete().under("/locks").matches(&delete));
        assert!(RequestMatch::op_codes([5, 2]).matches(&delete));
        assert!(!RequestMatch::set_data().matches(&delete));

        let ping = frame(&[(-2i32).to_be_bytes(), 11i32.to_be_bytes()].concat());
        let ping = parse_request(&ping).expect("parses");
        assert_eq!((ping.path.as_str(), ping.ops.len()), ("", 0));
        assert!(!RequestMatch::op_codes([2, 14]).under("").matches(&ping));
    }

    #[test]
    fn the_oldest_matching_armed_cut_fires_first() {
        let mut state = State::default();
        let mut receivers = Vec::new();
        for matcher in [RequestMatch::multi(), RequestMatch::delete(), RequestMatch::delete().under("/b")] {
            let (sender, receiver) = oneshot::channel();
            state.armed_cuts.push_back(ArmedCut { matcher, sender, then_black_hole: None });
            receivers.push(receiver);
        }
        let delete_b = parse_request(&frame(&create_payload(1, 2, "/b/x"))).expect("parses");
        let fired = state.take_armed_cut(&delete_b).expect("a delete cut");
        assert_eq!(fired.matcher, RequestMatch::delete(), "the older of the two delete cuts");
        let create = parse_request(&frame(&create_payload(2, 1, "/b/x"))).expect("parses");
        assert!(state.take_armed_cut(&create).is_none(), "no cut armed for creates");
        drop(receivers.remove(2)); // disarmed by dropping its handle
        assert!(state.take_armed_cut(&delete_b).is_none());
        assert_eq!(state.armed_cuts.len(), 1, "only the multi cut is left");
    }
}
