//! Curator's item framing (`ItemSerializer`) and the serializer trait.
//!
//! A queue node's data, big-endian: `i32 0x00010001` (the version), then per item
//! `u8 0x01, i32 len, len bytes`, then `u8 0x02`. One node may carry several items.

use std::fmt;
use std::marker::PhantomData;

use crate::error::BoxError;

/// The framing version Curator writes first.
pub const FRAME_VERSION: i32 = 0x0001_0001;
const ITEM_OPCODE: u8 = 0x01;
const EOF_OPCODE: u8 = 0x02;

/// Turns queue items into bytes and back (Curator's `QueueSerializer`). The bytes of each item
/// are framed by the queue, so a serializer sees one item at a time.
///
/// ```
/// use zk_recipes_queue::{BoxError, QueueSerializer};
///
/// /// Items are little-endian u64 counters.
/// struct Counter;
/// impl QueueSerializer<u64> for Counter {
///     fn serialize(&self, item: &u64) -> Result<Vec<u8>, BoxError> {
///         Ok(item.to_le_bytes().to_vec())
///     }
///     fn deserialize(&self, bytes: &[u8]) -> Result<u64, BoxError> {
///         Ok(u64::from_le_bytes(bytes.try_into()?))
///     }
/// }
/// assert_eq!(Counter.deserialize(&Counter.serialize(&7).unwrap()).unwrap(), 7);
/// ```
pub trait QueueSerializer<T>: Send + Sync + 'static {
    /// The bytes of one item.
    ///
    /// # Errors
    /// Any; the put fails with [`crate::QueueError::Serialize`] and nothing is written.
    fn serialize(&self, item: &T) -> Result<Vec<u8>, BoxError>;

    /// One item from its bytes.
    ///
    /// # Errors
    /// Any; the node is treated as corrupt (see [`crate::Consumer`]).
    fn deserialize(&self, bytes: &[u8]) -> Result<T, BoxError>;
}

/// Items are raw bytes (`Vec<u8>`), the default.
///
/// ```
/// use zk_recipes_queue::{BytesSerializer, QueueSerializer};
/// assert_eq!(BytesSerializer.serialize(&b"abc".to_vec()).unwrap(), b"abc");
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct BytesSerializer;

impl QueueSerializer<Vec<u8>> for BytesSerializer {
    fn serialize(&self, item: &Vec<u8>) -> Result<Vec<u8>, BoxError> {
        Ok(item.clone())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<Vec<u8>, BoxError> {
        Ok(bytes.to_vec())
    }
}

/// Items are UTF-8 strings (what a Java `QueueSerializer<String>` writes with
/// `getBytes(UTF_8)`).
///
/// ```
/// use zk_recipes_queue::{QueueSerializer, Utf8Serializer};
/// assert_eq!(Utf8Serializer.deserialize(b"job-1").unwrap(), "job-1");
/// assert!(Utf8Serializer.deserialize(&[0xff]).is_err());
/// ```
#[derive(Debug, Clone, Copy, Default)]
pub struct Utf8Serializer;

impl QueueSerializer<String> for Utf8Serializer {
    fn serialize(&self, item: &String) -> Result<Vec<u8>, BoxError> {
        Ok(item.as_bytes().to_vec())
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<String, BoxError> {
        Ok(String::from_utf8(bytes.to_vec())?)
    }
}

/// A serializer from two functions, for quick adapters.
///
/// ```
/// use zk_recipes_queue::{FnSerializer, QueueSerializer};
/// let numbers = FnSerializer::new(
///     |n: &i64| Ok(n.to_string().into_bytes()),
///     |bytes: &[u8]| Ok(std::str::from_utf8(bytes)?.parse::<i64>()?),
/// );
/// assert_eq!(numbers.deserialize(b"-5").unwrap(), -5);
/// ```
pub struct FnSerializer<T, S, D> {
    serialize: S,
    deserialize: D,
    _item: PhantomData<fn() -> T>,
}

impl<T, S, D> FnSerializer<T, S, D>
where
    S: Fn(&T) -> Result<Vec<u8>, BoxError> + Send + Sync + 'static,
    D: Fn(&[u8]) -> Result<T, BoxError> + Send + Sync + 'static,
{
    /// A serializer calling `serialize` and `deserialize`.
    pub fn new(serialize: S, deserialize: D) -> Self {
        Self { serialize, deserialize, _item: PhantomData }
    }
}

impl<T: 'static, S, D> QueueSerializer<T> for FnSerializer<T, S, D>
where
    S: Fn(&T) -> Result<Vec<u8>, BoxError> + Send + Sync + 'static,
    D: Fn(&[u8]) -> Result<T, BoxError> + Send + Sync + 'static,
{
    fn serialize(&self, item: &T) -> Result<Vec<u8>, BoxError> {
        (self.serialize)(item)
    }

    fn deserialize(&self, bytes: &[u8]) -> Result<T, BoxError> {
        (self.deserialize)(bytes)
    }
}

impl<T, S, D> fmt::Debug for FnSerializer<T, S, D> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FnSerializer").finish_non_exhaustive()
    }
}

/// Frames already serialized items into one node's data, as Curator's `ItemSerializer`.
///
/// ```
/// let node = zk_recipes_queue::framing::frame([b"ab".as_slice()]);
/// assert_eq!(node, [0, 1, 0, 1, 1, 0, 0, 0, 2, b'a', b'b', 2]);
/// ```
pub fn frame<'a>(items: impl IntoIterator<Item = &'a [u8]>) -> Vec<u8> {
    let mut out = Vec::with_capacity(64);
    out.extend_from_slice(&FRAME_VERSION.to_be_bytes());
    for item in items {
        out.push(ITEM_OPCODE);
        // Items larger than i32::MAX never get here: the node size limit refuses them first.
        out.extend_from_slice(&(item.len() as i32).to_be_bytes());
        out.extend_from_slice(item);
    }
    out.push(EOF_OPCODE);
    out
}

/// Why a node's data is not a valid frame.
///
/// ```
/// use zk_recipes_queue::framing::{unframe, FrameError};
///
/// assert_eq!(unframe(&[0, 1, 0]), Err(FrameError::Truncated));
/// assert_eq!(unframe(&[0, 0, 0, 1, 2]), Err(FrameError::Version(1)));
/// assert_eq!(unframe(&[0, 1, 0, 1, 9]), Err(FrameError::Opcode(9)));
/// assert_eq!(unframe(&[0, 1, 0, 1, 1, 0xff, 0xff, 0xff, 0xff]), Err(FrameError::Length(-1)));
/// assert_eq!(FrameError::Version(1).to_string(), "unknown frame version 0x00000001");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The data ended in the middle of the frame.
    #[error("truncated frame")]
    Truncated,
    /// The first four bytes are not `0x00010001`.
    #[error("unknown frame version {0:#010x}")]
    Version(i32),
    /// An opcode other than item (1) or end (2).
    #[error("unknown opcode {0}")]
    Opcode(u8),
    /// A negative item length.
    #[error("negative item length {0}")]
    Length(i32),
}

/// Splits one node's data into the items' bytes (Curator's `ItemSerializer.deserialize`). Bytes
/// after the end marker are ignored, as Curator does.
///
/// ```
/// use zk_recipes_queue::framing::{frame, unframe};
/// let node = frame([b"a".as_slice(), b"".as_slice(), b"bc".as_slice()]);
/// assert_eq!(unframe(&node).unwrap(), vec![b"a".to_vec(), vec![], b"bc".to_vec()]);
/// assert!(unframe(b"junk").is_err());
/// ```
pub fn unframe(data: &[u8]) -> Result<Vec<Vec<u8>>, FrameError> {
    let mut rest = data;
    let version = read_i32(&mut rest)?;
    if version != FRAME_VERSION {
        return Err(FrameError::Version(version));
    }
    let mut items = Vec::new();
    loop {
        let (&opcode, tail) = rest.split_first().ok_or(FrameError::Truncated)?;
        rest = tail;
        match opcode {
            EOF_OPCODE => return Ok(items),
            ITEM_OPCODE => {
                let len = read_i32(&mut rest)?;
                let len = usize::try_from(len).map_err(|_| FrameError::Length(len))?;
                if rest.len() < len {
                    return Err(FrameError::Truncated);
                }
                let (item, tail) = rest.split_at(len);
                items.push(item.to_vec());
                rest = tail;
            }
            other => return Err(FrameError::Opcode(other)),
        }
    }
}

/// Marks the delivery count zk-recipes appends after the end marker (see [`delivery_count`]).
const DELIVERY_TRAILER: &[u8; 4] = b"zkrD";

/// How many times the node was handed to a consumer, as counted by zk-recipes consumers of a queue
/// with `max_deliveries` set: a trailer after the frame's end marker, `b"zkrD"` then a big-endian
/// `u32`. Curator reads no further than the end marker, so it sees the same items; a node that
/// Curator wrote (or requeued) has no trailer and counts 0.
///
/// ```
/// use zk_recipes_queue::framing::{delivery_count, frame, unframe, with_delivery_count};
/// let node = frame([b"job".as_slice()]);
/// assert_eq!(delivery_count(&node), 0);
/// let counted = with_delivery_count(&node, 3);
/// assert_eq!(delivery_count(&counted), 3);
/// assert_eq!(unframe(&counted).unwrap(), unframe(&node).unwrap());
/// assert_eq!(delivery_count(&with_delivery_count(&counted, 4)), 4);
/// ```
pub fn delivery_count(data: &[u8]) -> u32 {
    frame_len(data)
        .and_then(|len| data[len..].strip_prefix(DELIVERY_TRAILER.as_slice()))
        .and_then(|count| <[u8; 4]>::try_from(count).ok())
        .map_or(0, u32::from_be_bytes)
}

/// `data` (a valid frame) with its delivery count set to `count` (see [`delivery_count`]). Data that
/// is not a valid frame is returned unchanged.
pub fn with_delivery_count(data: &[u8], count: u32) -> Vec<u8> {
    let Some(len) = frame_len(data) else { return data.to_vec() };
    let mut out = Vec::with_capacity(len + 8);
    out.extend_from_slice(&data[..len]);
    out.extend_from_slice(DELIVERY_TRAILER);
    out.extend_from_slice(&count.to_be_bytes());
    out
}

/// The length of the frame at the start of `data`, up to and including its end marker.
fn frame_len(data: &[u8]) -> Option<usize> {
    let mut rest = data;
    if read_i32(&mut rest).ok()? != FRAME_VERSION {
        return None;
    }
    loop {
        let (&opcode, tail) = rest.split_first()?;
        rest = tail;
        match opcode {
            EOF_OPCODE => return Some(data.len() - rest.len()),
            ITEM_OPCODE => {
                let len = usize::try_from(read_i32(&mut rest).ok()?).ok()?;
                rest = rest.get(len..)?;
            }
            _ => return None,
        }
    }
}

fn read_i32(rest: &mut &[u8]) -> Result<i32, FrameError> {
    if rest.len() < 4 {
        return Err(FrameError::Truncated);
    }
    let (head, tail) = rest.split_at(4);
    *rest = tail;
    Ok(i32::from_be_bytes([head[0], head[1], head[2], head[3]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_as_curator_does() {
        assert_eq!(frame(std::iter::empty()), [0, 1, 0, 1, 2]);
        let node = frame([b"x".as_slice(), b"yz".as_slice()]);
        assert_eq!(node, [0, 1, 0, 1, 1, 0, 0, 0, 1, b'x', 1, 0, 0, 0, 2, b'y', b'z', 2]);
        assert_eq!(unframe(&node).unwrap(), vec![b"x".to_vec(), b"yz".to_vec()]);
    }

    #[test]
    fn refuses_broken_frames() {
        assert_eq!(unframe(&[0, 1, 0, 1]), Err(FrameError::Truncated));
        assert_eq!(unframe(&[0, 1, 0, 2, 2]), Err(FrameError::Version(0x0001_0002)));
        assert_eq!(unframe(&[0, 1, 0, 1, 7]), Err(FrameError::Opcode(7)));
        assert_eq!(unframe(&[0, 1, 0, 1, 1, 0xff, 0xff, 0xff, 0xff]), Err(FrameError::Length(-1)));
        assert_eq!(unframe(&[0, 1, 0, 1, 1, 0, 0, 0, 5, 1, 2]), Err(FrameError::Truncated));
        assert_eq!(unframe(&[0, 1, 0, 1, 2, 9, 9]).unwrap(), Vec::<Vec<u8>>::new(), "trailing bytes ignored");
    }

    #[test]
    fn the_delivery_count_lives_after_the_end_marker() {
        let node = frame([b"x".as_slice()]);
        let counted = with_delivery_count(&node, 7);
        assert_eq!(&counted[..node.len()], node.as_slice(), "the frame itself is unchanged");
        assert_eq!(&counted[node.len()..], [b'z', b'k', b'r', b'D', 0, 0, 0, 7]);
        assert_eq!(delivery_count(&counted), 7);
        // Other trailing bytes, a truncated trailer and broken frames count 0.
        assert_eq!(delivery_count(&[0, 1, 0, 1, 2, 9, 9]), 0);
        assert_eq!(delivery_count(&counted[..counted.len() - 1]), 0);
        assert_eq!(delivery_count(b"junk"), 0);
        assert_eq!(with_delivery_count(b"junk", 3), b"junk");
    }
}
