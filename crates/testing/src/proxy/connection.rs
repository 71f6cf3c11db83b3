//! The proxy's connections: the accept loop, and per connection the pump that forwards both ways,
//! parses what passes, and applies the faults armed for it (and drops watch notifications).

use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;
use tokio::time::Instant;

use super::reports::CutReply;
use super::state::{ArmedCut, Shared};
use super::wire::{parse_request, reply_header, FrameReader, Piece, Request};

pub(super) async fn accept_loop(shared: Arc<Shared>, listener: TcpListener) {
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
    // The server's bytes held by `delay_replies`, each with when it is due, in the order read.
    let mut delayed: VecDeque<(Instant, Vec<u8>)> = VecDeque::new();
    loop {
        if *black_hole.borrow_and_update() {
            // Forward nothing; the end of the black hole closes this connection.
            std::future::pending::<()>().await;
        }
        let next_due = delayed.front().map(|(due, _)| *due);
        tokio::select! {
            changed = black_hole.changed() => {
                if changed.is_err() {
                    return None;
                }
            }
            () = sleep_until_some(next_due), if next_due.is_some() => {
                let (_, bytes) = delayed.pop_front().expect("a held chunk is due");
                if client_write.write_all(&bytes).await.is_err() {
                    return None;
                }
                shared.bytes_to_client.fetch_add(bytes.len() as u64, Ordering::Relaxed);
            }
            read = client_read.read(&mut up) => {
                let count = match read {
                    Ok(0) | Err(_) => return None,
                    Ok(count) => count,
                };
                if shared.state.lock().requests_black_holed {
                    // A one-way black hole: the server never hears it (the connection is closed
                    // when the black hole ends, so the dropped bytes never split a frame it reads).
                    continue;
                }
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
                        if request.as_ref().is_some_and(Request::is_write) {
                            shared.writes_to_server.fetch_add(1, Ordering::Relaxed);
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
                    if shared.watch_events.drops(&piece) {
                        // Not forwarded, the connection kept: the client never learns.
                        tracing::trace!("fault proxy dropped a watch notification");
                        continue;
                    }
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
                let delay = shared.reply_delay();
                if !out.is_empty() && (!delay.is_zero() || !delayed.is_empty()) {
                    // Held, behind what is held already (lost if the connection closes first).
                    delayed.push_back((Instant::now() + delay, out));
                } else if !out.is_empty() {
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

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
