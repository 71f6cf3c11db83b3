//! ZooKeeper's wire format, as far as the proxy reads it: length-prefixed frames split out of a
//! byte stream, request headers and paths (a multi's operations too), reply headers, op codes,
//! watch notifications.

/// Frames longer than this are not ZooKeeper traffic; the connection is then passed through raw.
const MAX_FRAME: usize = 64 * 1024 * 1024;

/// ZooKeeper op codes of the plain create requests [`FaultProxy::cut_after_next_create`] watches.
///
/// [`FaultProxy::cut_after_next_create`]: crate::FaultProxy::cut_after_next_create
pub(super) const CREATE_OP_CODES: [i32; 4] = [1, 15, 19, 21];
/// `delete` and `deleteContainer`.
pub(super) const DELETE_OP_CODES: [i32; 2] = [2, 20];
pub(super) const SET_DATA_OP_CODE: i32 = 5;
pub(super) const MULTI_OP_CODE: i32 = 14;
/// Requests that may change the server's data: creates, deletes, `setData`, `setACL`, multi,
/// `reconfig`.
const WRITE_OP_CODES: [i32; 10] = [1, 15, 19, 21, 2, 20, SET_DATA_OP_CODE, 7, MULTI_OP_CODE, 16];
const MULTI_READ_OP_CODE: i32 = 22;
/// The reply-header xid of a watch notification (`WatcherEvent`), `ClientCnxn.NOTIFICATION_XID`.
const NOTIFICATION_XID: i32 = -1;
/// Requests whose body starts with the path they act on.
const PATH_FIRST_OP_CODES: [i32; 20] =
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 12, 13, 15, 17, 18, 19, 20, 21, 103, 104, 106];

/// A piece of one direction of a ZooKeeper connection.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Piece {
    /// The first frame (ConnectRequest / ConnectResponse: no header), length prefix included.
    Handshake(Vec<u8>),
    /// A later frame (request or reply header + body), length prefix included.
    Frame(Vec<u8>),
    /// Bytes of a stream that is not ZooKeeper framing (passed through unparsed).
    Raw(Vec<u8>),
}

impl Piece {
    pub(super) fn bytes(&self) -> &[u8] {
        match self {
            Piece::Handshake(bytes) | Piece::Frame(bytes) | Piece::Raw(bytes) => bytes,
        }
    }
}

/// Splits a byte stream into length-prefixed frames, across arbitrary read boundaries.
#[derive(Debug, Default)]
pub(super) struct FrameReader {
    buffer: Vec<u8>,
    seen_handshake: bool,
    raw: bool,
}

impl FrameReader {
    pub(super) fn feed(&mut self, bytes: &[u8]) {
        self.buffer.extend_from_slice(bytes);
    }

    pub(super) fn next_piece(&mut self) -> Option<Piece> {
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
pub(super) struct Request {
    pub(super) xid: i32,
    pub(super) op_code: i32,
    /// The path it acts on (a multi's first operation's); empty if none.
    pub(super) path: String,
    /// A multi's operations, (op code, path), as far as they parse.
    pub(super) ops: Vec<(i32, String)>,
}

impl Request {
    /// Whether it may change the server's data (reads, pings, `sync`, watches and the like do not).
    pub(super) fn is_write(&self) -> bool {
        WRITE_OP_CODES.contains(&self.op_code)
    }
}

/// Parses a request frame (length prefix included): RequestHeader { xid: i32, type: i32 }, then
/// the body. `None` if it is too short for a header.
pub(super) fn parse_request(frame: &[u8]) -> Option<Request> {
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
pub(super) fn reply_header(frame: &[u8]) -> Option<(i32, i32)> {
    Some((read_i32(frame, 4)?, read_i32(frame, 16)?))
}

/// Whether a server-to-client piece is a watch notification: a frame after the handshake (the
/// ConnectResponse has no reply header, so it never is one) whose reply header's xid is -1.
pub(super) fn is_watch_event(piece: &Piece) -> bool {
    matches!(piece, Piece::Frame(frame) if read_i32(frame, 4) == Some(NOTIFICATION_XID))
}
