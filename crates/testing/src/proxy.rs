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
/// * [`cut_after_next_create`](Self::cut_after_next_create): let the next create reach the
///   server, drop the server's reply and close the connection — the node exists but the client
///   got a connection loss.
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
}

/// The create request whose reply [`FaultProxy::cut_after_next_create`] dropped.
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
/// Cancel safe; cancelling disarms.
#[derive(Debug)]
#[must_use = "the cut is disarmed when this is dropped"]
pub struct CutAfterCreate {
    receiver: oneshot::Receiver<CutCreate>,
}

impl Future for CutAfterCreate {
    type Output = Result<CutCreate>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.receiver).poll(cx).map(|result| result.map_err(|_| TestingError::ProxyClosed))
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
}

#[derive(Debug, Default)]
struct State {
    next_connection: u64,
    /// Dropping a sender closes its connection.
    connections: HashMap<u64, oneshot::Sender<()>>,
    black_holed: bool,
    black_hole_generation: u64,
    armed_create_cuts: VecDeque<oneshot::Sender<CutCreate>>,
    closed: bool,
}

impl State {
    fn take_armed_cut(&mut self) -> Option<oneshot::Sender<CutCreate>> {
        while let Some(sender) = self.armed_create_cuts.pop_front() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }
}

impl Shared {
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
    /// Cancel safe.
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
        let generation = {
            let mut state = self.shared.state.lock();
            state.black_holed = true;
            state.black_hole_generation += 1;
            self.shared.black_hole.send_replace(true);
            state.black_hole_generation
        };
        let shared = self.shared.clone();
        self.runtime.spawn(async move {
            tokio::time::sleep(duration).await;
            shared.end_black_hole(Some(generation));
        });
    }

    /// Ends a black hole early (closing its connections, as at its normal end).
    pub fn heal(&self) {
        self.shared.end_black_hole(None);
    }

    /// True during a [`black_hole`](Self::black_hole).
    pub fn is_black_holed(&self) -> bool {
        self.shared.state.lock().black_holed
    }

    /// Arms a cut for the next create request (op codes 1 create, 15 create2, 19
    /// createContainer, 21 createTTL; creates inside a `multi` don't count) on any connection:
    /// the request reaches the server, the server's reply to it is dropped and the connection
    /// is closed both ways. Await the returned handle to learn which create was hit.
    ///
    /// Each call arms one cut; several calls cut the next creates in turn. If the connection dies
    /// before the reply arrives, the cut re-arms for the next create.
    pub fn cut_after_next_create(&self) -> CutAfterCreate {
        let (sender, receiver) = oneshot::channel();
        self.shared.state.lock().armed_create_cuts.push_back(sender);
        CutAfterCreate { receiver }
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.accept_task.abort();
        let mut state = self.shared.state.lock();
        state.closed = true;
        state.armed_create_cuts.clear();
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
            return std::future::pending::<Option<(oneshot::Sender<CutCreate>, CutCreate)>>().await;
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
    if let Some((sender, cut_create)) = outcome {
        shared.cut.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(path = %cut_create.path, "fault proxy cut a connection after a create");
        let _ = sender.send(cut_create);
    }
}

/// A create request forwarded to the server whose reply is to be dropped. Re-arms the proxy if
/// the connection ends before the reply.
struct PendingCut<'a> {
    shared: &'a Shared,
    xid: i32,
    op_code: i32,
    path: String,
    sender: Option<oneshot::Sender<CutCreate>>,
}

impl Drop for PendingCut<'_> {
    fn drop(&mut self) {
        if let Some(sender) = self.sender.take() {
            let mut state = self.shared.state.lock();
            if !state.closed && !sender.is_closed() {
                state.armed_create_cuts.push_front(sender);
            }
        }
    }
}

/// Forwards both ways until a side closes or a create cut happens (then returns the cut).
async fn pump(
    shared: &Shared,
    client: TcpStream,
    server: TcpStream,
) -> Option<(oneshot::Sender<CutCreate>, CutCreate)> {
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
                while let Some(piece) = requests.next_piece() {
                    if let Piece::Frame(frame) = &piece {
                        if pending.is_none() {
                            if let Some((xid, op_code, path)) = create_request(frame) {
                                if let Some(sender) = shared.state.lock().take_armed_cut() {
                                    pending = Some(PendingCut { shared, xid, op_code, path, sender: Some(sender) });
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
                            if xid == waiting.xid {
                                cut = waiting.sender.take().map(|sender| {
                                    (sender, CutCreate {
                                        path: std::mem::take(&mut waiting.path),
                                        op_code: waiting.op_code,
                                        xid,
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

/// `(xid, op code, path)` if `frame` (length prefix included) is a create request.
fn create_request(frame: &[u8]) -> Option<(i32, i32, String)> {
    let xid = read_i32(frame, 4)?;
    let op_code = read_i32(frame, 8)?;
    if !CREATE_OP_CODES.contains(&op_code) {
        return None;
    }
    let path_length = usize::try_from(read_i32(frame, 12)?).ok()?;
    let path = frame.get(16..16 + path_length)?;
    Some((xid, op_code, String::from_utf8_lossy(path).into_owned()))
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
            let creates: Vec<_> =
                pieces[1..].iter().filter_map(|piece| create_request(piece.bytes())).collect();
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
            assert!(create_request(&frame(&create_payload(1, op_code, "/x"))).is_some());
        }
        for op_code in [2, 4, 5, 14, -11] {
            assert!(create_request(&frame(&create_payload(1, op_code, "/x"))).is_none());
        }
    }
}
