//! What the proxy tells a test: [`ProxyStats`], and the handles a test awaits for a fault
//! ([`CutAfterReply`], [`CutAfterCreate`], [`BlackHoleAtRequest`]) with the request it hit
//! ([`CutReply`], [`CutCreate`], [`HeldRequest`]).

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

use crate::error::{Result, TestingError};

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
    /// Requests forwarded to the server that may change its data (creates, deletes, `setData`,
    /// `setACL`, multis, `reconfig`): what a test of "bad input changes nothing" counts, where
    /// bytes would count the framework's heartbeat and zookeeper-client's pings too.
    pub writes_to_server: u64,
    /// Bytes forwarded from the server to clients.
    pub bytes_to_client: u64,
    /// Requests refused ([`FaultProxy::refuse_requests`]), each closing its connection.
    ///
    /// [`FaultProxy::refuse_requests`]: crate::FaultProxy::refuse_requests
    pub refused: u64,
    /// Watch notifications (server frames with xid -1) not forwarded
    /// ([`FaultProxy::drop_watch_events`]).
    ///
    /// [`FaultProxy::drop_watch_events`]: crate::FaultProxy::drop_watch_events
    pub watch_events_dropped: u64,
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
///
/// [`FaultProxy::cut_after_next_create`]: crate::FaultProxy::cut_after_next_create
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
///
/// [`FaultProxy::cut_after_next_reply`]: crate::FaultProxy::cut_after_next_reply
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CutReply {
    /// The request's op code (see [`RequestMatch`]).
    ///
    /// [`RequestMatch`]: crate::RequestMatch
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
///
/// [`FaultProxy::cut_after_next_reply`]: crate::FaultProxy::cut_after_next_reply
#[derive(Debug)]
#[must_use = "the cut is disarmed when this is dropped"]
pub struct CutAfterReply {
    pub(super) receiver: oneshot::Receiver<CutReply>,
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
///
/// [`FaultProxy::black_hole_at_next_request`]: crate::FaultProxy::black_hole_at_next_request
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeldRequest {
    /// The request's op code (see [`RequestMatch`]).
    ///
    /// [`RequestMatch`]: crate::RequestMatch
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
///
/// [`FaultProxy::black_hole_at_next_request`]: crate::FaultProxy::black_hole_at_next_request
#[derive(Debug)]
#[must_use = "the trigger is disarmed when this is dropped"]
pub struct BlackHoleAtRequest {
    pub(super) receiver: oneshot::Receiver<HeldRequest>,
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
///
/// [`FaultProxy::cut_after_next_create`]: crate::FaultProxy::cut_after_next_create
#[derive(Debug)]
#[must_use = "the cut is disarmed when this is dropped"]
pub struct CutAfterCreate {
    pub(super) reply: CutAfterReply,
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
