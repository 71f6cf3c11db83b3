//! The numeric counters on a [`DistributedAtomicValue`]: Curator's `DistributedAtomicLong` (an
//! 8-byte big-endian `long`) and `DistributedAtomicInteger` (a 4-byte big-endian `int`), one
//! generic type with the encoding as its parameter.

use std::fmt;
use std::marker::PhantomData;

use zk_recipes_framework::retry::RetryPolicy;
use zk_recipes_framework::{Deadline, Framework};

use crate::atomic::{AtomicValue, Bytes, DistributedAtomicValue, PromotedToLock};
use crate::error::{CounterError, Result};

/// A number a [`DistributedAtomicNumber`] keeps: `i64` (Curator's `DistributedAtomicLong`) or `i32`
/// (`DistributedAtomicInteger`). Sealed: the encodings are Curator's.
///
/// ```
/// use zk_recipes_counter::AtomicNumber;
///
/// assert_eq!(<i64 as AtomicNumber>::WIDTH, 8);
/// assert_eq!(AtomicNumber::encode(258_i32), [0, 0, 1, 2]);
/// assert_eq!(<i32 as AtomicNumber>::decode(&[0, 0, 1, 2, 99]), Some(258), "extra bytes are ignored");
/// assert_eq!(<i64 as AtomicNumber>::decode(&[1, 2]), None);
/// assert_eq!(AtomicNumber::wrapping_add(i32::MAX, 1), i32::MIN, "wraps as Java's int");
/// ```
pub trait AtomicNumber: private::Sealed + Copy + Default + fmt::Debug + Send + Sync + 'static {
    /// The encoding's width in bytes.
    const WIDTH: usize;
    /// What Curator calls the type, for messages.
    const JAVA_NAME: &'static str;
    /// Big-endian bytes.
    fn encode(self) -> Vec<u8>;
    /// From the first [`WIDTH`](Self::WIDTH) big-endian bytes (`None` if there are fewer).
    fn decode(data: &[u8]) -> Option<Self>;
    /// `self + delta`, wrapping as Java does.
    fn wrapping_add(self, delta: Self) -> Self;
    /// `-self`, wrapping as Java does.
    fn wrapping_neg(self) -> Self;
    /// One.
    const ONE: Self;
}

mod private {
    pub trait Sealed {}
    impl Sealed for i64 {}
    impl Sealed for i32 {}
}

impl AtomicNumber for i64 {
    const WIDTH: usize = 8;
    const JAVA_NAME: &'static str = "an 8-byte big-endian long";
    const ONE: Self = 1;

    fn encode(self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }

    fn decode(data: &[u8]) -> Option<Self> {
        data.first_chunk::<8>().map(|bytes| i64::from_be_bytes(*bytes))
    }

    fn wrapping_add(self, delta: Self) -> Self {
        i64::wrapping_add(self, delta)
    }

    fn wrapping_neg(self) -> Self {
        i64::wrapping_neg(self)
    }
}

impl AtomicNumber for i32 {
    const WIDTH: usize = 4;
    const JAVA_NAME: &'static str = "a 4-byte big-endian int";
    const ONE: Self = 1;

    fn encode(self) -> Vec<u8> {
        self.to_be_bytes().to_vec()
    }

    fn decode(data: &[u8]) -> Option<Self> {
        data.first_chunk::<4>().map(|bytes| i32::from_be_bytes(*bytes))
    }

    fn wrapping_add(self, delta: Self) -> Self {
        i32::wrapping_add(self, delta)
    }

    fn wrapping_neg(self) -> Self {
        i32::wrapping_neg(self)
    }
}

/// Decodes a counter node as Curator does: a missing node or empty data is 0; otherwise the first
/// `N::WIDTH` bytes, big-endian (more are ignored, fewer are corrupt).
fn decode<N: AtomicNumber>(path: &str, data: Option<&[u8]>) -> Result<N> {
    match data {
        None | Some([]) => Ok(N::default()),
        Some(data) => N::decode(data).ok_or_else(|| CounterError::CorruptData {
            path: path.to_owned(),
            data: data.to_vec(),
            expected: N::JAVA_NAME,
        }),
    }
}

/// Curator's `DistributedAtomicLong` encoding: an 8-byte big-endian `i64`.
///
/// ```
/// assert_eq!(zk_recipes_counter::encode_long(-1), [0xff; 8]);
/// ```
pub fn encode_long(value: i64) -> [u8; 8] {
    value.to_be_bytes()
}

/// Decodes a `DistributedAtomicLong` node as Curator does: a missing node or empty data is 0;
/// otherwise the first 8 bytes, big-endian (more are ignored, fewer are corrupt).
///
/// ```
/// use zk_recipes_counter::decode_long;
///
/// assert_eq!(decode_long("/n", None).unwrap(), 0);
/// assert_eq!(decode_long("/n", Some(&[])).unwrap(), 0);
/// assert_eq!(decode_long("/n", Some(&[0, 0, 0, 0, 0, 0, 1, 0])).unwrap(), 256);
/// assert!(decode_long("/n", Some(&[1, 2, 3])).is_err());
/// ```
///
/// # Errors
/// [`CounterError::CorruptData`] for 1 to 7 bytes.
pub fn decode_long(path: &str, data: Option<&[u8]>) -> Result<i64> {
    decode(path, data)
}

/// Curator's `DistributedAtomicInteger` encoding: a 4-byte big-endian `i32`.
///
/// ```
/// assert_eq!(zk_recipes_counter::encode_int(258), [0, 0, 1, 2]);
/// ```
pub fn encode_int(value: i32) -> [u8; 4] {
    value.to_be_bytes()
}

/// Decodes a `DistributedAtomicInteger` node as Curator does: a missing node or empty data is 0;
/// otherwise the first 4 bytes, big-endian (more are ignored, fewer are corrupt).
///
/// ```
/// use zk_recipes_counter::decode_int;
///
/// assert_eq!(decode_int("/n", None).unwrap(), 0);
/// assert_eq!(decode_int("/n", Some(&[0, 0, 1, 0])).unwrap(), 256);
/// assert_eq!(decode_int("/n", Some(&[0xff, 0xff, 0xff, 0xff, 9])).unwrap(), -1);
/// assert!(decode_int("/n", Some(&[1, 2, 3])).is_err());
/// ```
///
/// # Errors
/// [`CounterError::CorruptData`] for 1 to 3 bytes.
pub fn decode_int(path: &str, data: Option<&[u8]>) -> Result<i32> {
    decode(path, data)
}

/// A number in one node, changed atomically: a [`DistributedAtomicValue`] whose data is the
/// number's big-endian bytes, a missing node or empty data counting as 0. Use it through its two
/// names: [`DistributedAtomicLong`] (`i64`, Curator's `DistributedAtomicLong`) and
/// [`DistributedAtomicInteger`] (`i32`, Curator's `DistributedAtomicInteger`); a Java client of
/// the same class on the same path shares the number.
///
/// Cheap to clone.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_counter::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::{retry::ExponentialBackoffRetry, Deadline};
/// use zk_recipes_counter::{DistributedAtomicLong, PromotedToLock};
///
/// let counter = DistributedAtomicLong::new(&framework, "/app/orders/next-id", ExponentialBackoffRetry::new(Duration::from_millis(10), 5))?
///     .promoted_to_lock(PromotedToLock::new("/app/orders/next-id-lock").max_lock_time(Duration::from_secs(5)))?;
/// let next = counter.increment(Deadline::after(Duration::from_secs(10))).await?;
/// if next.succeeded() {
///     println!("order id {}", next.post_value());
/// }
/// # Ok(()) }
/// ```
pub struct DistributedAtomicNumber<N: AtomicNumber> {
    value: DistributedAtomicValue,
    number: PhantomData<fn() -> N>,
}

/// An `i64` counter in one node: Curator's `DistributedAtomicLong` (an 8-byte big-endian long).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_counter::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::{retry::RetryNTimes, Deadline};
/// use zk_recipes_counter::DistributedAtomicLong;
///
/// let hits = DistributedAtomicLong::new(&framework, "/app/hits", RetryNTimes::new(10, Duration::from_millis(10)))?;
/// println!("{}", hits.add(5, Deadline::after(Duration::from_secs(5))).await?.post_value());
/// # Ok(()) }
/// ```
pub type DistributedAtomicLong = DistributedAtomicNumber<i64>;

/// An `i32` counter in one node: Curator's `DistributedAtomicInteger` (a 4-byte big-endian int;
/// `add` wraps at `i32::MAX` as Java's `int` does).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_counter::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::{retry::RetryNTimes, Deadline};
/// use zk_recipes_counter::DistributedAtomicInteger;
///
/// let slots = DistributedAtomicInteger::new(&framework, "/app/slots", RetryNTimes::new(10, Duration::from_millis(10)))?;
/// let taken = slots.increment(Deadline::after(Duration::from_secs(5))).await?;
/// println!("slot {} taken: {}", taken.post_value(), taken.succeeded());
/// # Ok(()) }
/// ```
pub type DistributedAtomicInteger = DistributedAtomicNumber<i32>;

impl<N: AtomicNumber> Clone for DistributedAtomicNumber<N> {
    fn clone(&self) -> Self {
        Self { value: self.value.clone(), number: PhantomData }
    }
}

impl<N: AtomicNumber> fmt::Debug for DistributedAtomicNumber<N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DistributedAtomicNumber")
            .field("encoding", &N::JAVA_NAME)
            .field("value", &self.value)
            .finish()
    }
}

impl<N: AtomicNumber> DistributedAtomicNumber<N> {
    /// An optimistic-only counter at `path` (Curator's `new DistributedAtomicLong(client, path,
    /// retryPolicy)`, or `DistributedAtomicInteger`'s).
    ///
    /// # Errors
    /// As [`DistributedAtomicValue::new`].
    pub fn new(framework: &Framework, path: &str, retry_policy: impl RetryPolicy) -> Result<Self> {
        Ok(Self { value: DistributedAtomicValue::new(framework, path, retry_policy)?, number: PhantomData })
    }

    /// Adds promotion to a mutex. See [`DistributedAtomicValue::promoted_to_lock`].
    ///
    /// # Errors
    /// An invalid lock path, before anything is sent.
    pub fn promoted_to_lock(self, promoted: PromotedToLock) -> Result<Self> {
        Ok(Self { value: self.value.promoted_to_lock(promoted)?, number: PhantomData })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.value.path()
    }

    /// The bytes-level value underneath.
    pub fn as_atomic_value(&self) -> &DistributedAtomicValue {
        &self.value
    }

    fn decode(&self, result: AtomicValue<Bytes>) -> Result<AtomicValue<N>> {
        result.try_map(|data| decode(self.path(), data.as_deref()))
    }

    /// The current value (Curator's `get`): 0 if the node is missing or empty.
    ///
    /// # Errors
    /// [`CounterError::CorruptData`]; framework errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn get(&self, deadline: impl Into<Deadline>) -> Result<AtomicValue<N>> {
        let deadline = deadline.into();
        self.decode(self.value.get(deadline).await?)
    }

    /// Sets the value with no atomicity (Curator's `forceSet`).
    ///
    /// # Errors
    /// As [`DistributedAtomicValue::force_set`].
    ///
    /// # Cancel safety
    /// As [`DistributedAtomicValue::force_set`].
    pub async fn force_set(&self, value: N, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        self.value.force_set(&value.encode(), deadline).await
    }

    /// Sets `new_value` if the value is `expected` (Curator's `compareAndSet`). Compared as
    /// bytes, so a missing node does not match 0 (as Curator).
    ///
    /// # Errors
    /// As [`DistributedAtomicValue::compare_and_set`], and [`CounterError::CorruptData`].
    ///
    /// # Cancel safety
    /// As [`DistributedAtomicValue::compare_and_set`].
    pub async fn compare_and_set(
        &self,
        expected: N,
        new_value: N,
        deadline: impl Into<Deadline>,
    ) -> Result<AtomicValue<N>> {
        let deadline = deadline.into();
        let result = self.value.compare_and_set(&expected.encode(), &new_value.encode(), deadline).await?;
        self.decode(result)
    }

    /// Sets `new_value` atomically (Curator's `trySet`).
    ///
    /// # Errors
    /// As [`DistributedAtomicValue::try_set`], and [`CounterError::CorruptData`].
    ///
    /// # Cancel safety
    /// As [`DistributedAtomicValue::try_set`].
    pub async fn try_set(&self, new_value: N, deadline: impl Into<Deadline>) -> Result<AtomicValue<N>> {
        let deadline = deadline.into();
        self.decode(self.value.try_set(&new_value.encode(), deadline).await?)
    }

    /// Creates the node with `value` if it is missing (Curator's `initialize`): whether this call
    /// created it.
    ///
    /// # Errors
    /// As [`DistributedAtomicValue::initialize`].
    ///
    /// # Cancel safety
    /// As [`DistributedAtomicValue::initialize`].
    pub async fn initialize(&self, value: N, deadline: impl Into<Deadline>) -> Result<bool> {
        let deadline = deadline.into();
        self.value.initialize(&value.encode(), deadline).await
    }

    /// Adds 1 (Curator's `increment`).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Cancel safety
    /// As [`add`](Self::add).
    pub async fn increment(&self, deadline: impl Into<Deadline>) -> Result<AtomicValue<N>> {
        let deadline = deadline.into();
        self.add(N::ONE, deadline).await
    }

    /// Subtracts 1 (Curator's `decrement`).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Cancel safety
    /// As [`add`](Self::add).
    pub async fn decrement(&self, deadline: impl Into<Deadline>) -> Result<AtomicValue<N>> {
        let deadline = deadline.into();
        self.add(N::ONE.wrapping_neg(), deadline).await
    }

    /// Adds `delta` (Curator's `add`; wraps on overflow, as Java's `long` and `int` do).
    ///
    /// # Errors
    /// [`CounterError::OutcomeUnknown`] if a lost reply cannot be resolved (the delta was added
    /// once or not at all, never twice); [`CounterError::CorruptData`]; a timeout at `deadline`;
    /// framework and promoted-lock errors.
    ///
    /// # Cancel safety
    /// If cancelled after a write was sent, the delta may or may not have been added (once at most,
    /// never twice). A promoted lock it held or waited for is given up: the framework's cleanup
    /// worker deletes its node.
    pub async fn add(&self, delta: N, deadline: impl Into<Deadline>) -> Result<AtomicValue<N>> {
        let deadline = deadline.into();
        let path = self.path().to_owned();
        let make = move |current: Option<&[u8]>| -> Result<Vec<u8>> {
            Ok(decode::<N>(&path, current)?.wrapping_add(delta).encode())
        };
        self.decode(self.value.apply(&make, deadline).await?)
    }

    /// Subtracts `delta` (Curator's `subtract`).
    ///
    /// # Errors
    /// As [`add`](Self::add).
    ///
    /// # Cancel safety
    /// As [`add`](Self::add).
    pub async fn subtract(&self, delta: N, deadline: impl Into<Deadline>) -> Result<AtomicValue<N>> {
        let deadline = deadline.into();
        self.add(delta.wrapping_neg(), deadline).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_encodings_are_javas_big_endian_and_wrap_as_java_does() {
        assert_eq!(i32::MAX.wrapping_add(1), i32::MIN);
        assert_eq!(AtomicNumber::wrapping_add(i32::MAX, 1), i32::MIN);
        assert_eq!(AtomicNumber::wrapping_add(i64::MAX, 1), i64::MIN);
        assert_eq!(0x0102_0304_i32.encode(), vec![1, 2, 3, 4]);
        assert_eq!(decode::<i32>("/n", Some(&[1, 2, 3, 4, 5])).unwrap(), 0x0102_0304);
        assert_eq!(decode::<i64>("/n", Some(&[0, 0, 0, 0, 1, 2, 3, 4])).unwrap(), 0x0102_0304);
        assert!(matches!(
            decode::<i64>("/n", Some(&[1, 2, 3, 4])),
            Err(CounterError::CorruptData { expected: "an 8-byte big-endian long", .. })
        ));
    }
}
