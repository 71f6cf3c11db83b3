//! Unit tests of the proxy without a server: framing, request parsing, matching, armed cuts,
//! dropped watch notifications.

use tokio::sync::oneshot;

use super::matching::RequestMatch;
use super::state::{ArmedCut, State, WatchEventDrop};
use super::wire::{is_watch_event, parse_request, reply_header, FrameReader, Piece, CREATE_OP_CODES};

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
    let acl = [1i32.to_be_bytes().to_vec(), 31i32.to_be_bytes().to_vec(), string("world"), string("anyone")]
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

fn reply(xid: i32, zxid: i64, body: &[u8]) -> Vec<u8> {
    frame(&[xid.to_be_bytes().as_slice(), &zxid.to_be_bytes(), &0i32.to_be_bytes(), body].concat())
}

/// A server's stream: a connect response whose first int happens to be -1 (a handshake has no
/// reply header: it must not be read as one), a notification, a getData reply, a ping reply,
/// another notification.
fn server_stream() -> Vec<u8> {
    let notification = [3i32.to_be_bytes(), 3i32.to_be_bytes()].concat(); // NodeDataChanged, SyncConnected
    [
        frame(&[(-1i32).to_be_bytes().as_slice(), &[0; 32]].concat()),
        reply(-1, 0x10, &[notification.clone(), string("/watched")].concat()),
        reply(5, 0x11, b"data and stat"),
        reply(-2, 0x11, b""),
        reply(-1, 0x12, &[notification, string("/watched")].concat()),
    ]
    .concat()
}

fn pieces(stream: &[u8]) -> Vec<Piece> {
    let mut reader = FrameReader::default();
    reader.feed(stream);
    std::iter::from_fn(|| reader.next_piece()).collect()
}

#[test]
fn only_frames_with_xid_minus_one_after_the_handshake_are_watch_events() {
    let found: Vec<bool> = pieces(&server_stream()).iter().map(is_watch_event).collect();
    assert_eq!(found, [false, true, false, false, true]);
    assert!(!is_watch_event(&Piece::Raw((-1i32).to_be_bytes().repeat(4))));
}

#[test]
fn dropping_is_off_by_default_and_at_zero() {
    let drop = WatchEventDrop::default();
    assert!(pieces(&server_stream()).iter().all(|piece| !drop.drops(piece)));
    drop.set(1.0, 7);
    drop.set(0.0, 7);
    assert!(pieces(&server_stream()).iter().all(|piece| !drop.drops(piece)));
    drop.set(-0.0, 7);
    assert!(pieces(&server_stream()).iter().all(|piece| !drop.drops(piece)));
    assert_eq!(drop.dropped.load(std::sync::atomic::Ordering::Relaxed), 0);
}

#[test]
fn probability_one_drops_every_notification_and_nothing_else() {
    let drop = WatchEventDrop::default();
    drop.set(1.0, 0);
    let kept: Vec<Vec<u8>> = pieces(&server_stream())
        .into_iter()
        .filter(|piece| !drop.drops(piece))
        .map(|piece| piece.bytes().to_vec())
        .collect();
    assert_eq!(kept.len(), 3, "the handshake, the getData reply and the ping reply");
    assert_eq!(reply_header(&kept[1]), Some((5, 0)));
    assert_eq!(reply_header(&kept[2]), Some((-2, 0)));
    assert_eq!(drop.dropped.load(std::sync::atomic::Ordering::Relaxed), 2);
}

#[test]
fn a_fraction_drops_about_that_share_the_same_ones_for_the_same_seed() {
    let notification = Piece::Frame(reply(-1, 1, b""));
    let decisions = |probability: f64, seed: u64| {
        let drop = WatchEventDrop::default();
        drop.set(probability, seed);
        (0..4000).map(|_| drop.drops(&notification)).collect::<Vec<bool>>()
    };
    let quarter = decisions(0.25, 42);
    let share = quarter.iter().filter(|dropped| **dropped).count();
    assert!((850..=1150).contains(&share), "{share} of 4000 dropped at 0.25");
    assert_eq!(decisions(0.25, 42), quarter, "the same seed drops the same ones");
    assert_ne!(decisions(0.25, 43), quarter, "another seed drops others");
}
