//! `SharedValue` and `SharedCount`: a versioned value every client sees (Curator's `SharedValue`,
//! `SharedCount`).

use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tracing::{debug, info_span, Instrument};
use zk_recipes_framework::retry::Backoff;
use zk_recipes_framework::zookeeper_client::{Error as ZkError, Stat};
use zk_recipes_framework::{
    path, ConditionalWrite, Deadline, Error as FrameworkError, Framework, ParentMode, WatchEvent,
    WriteOutcome, DEFAULT_OPERATION_TIMEOUT,
};

use crate::error::{CounterError, Result};

/// A value and the node version it was read or written at (Curator's `VersionedValue`).
///
/// Pass the version to `try_set` to change the value only if nobody changed it since. Before the
/// value was first read its version is `-1`.
///
/// ```
/// use zk_recipes_counter::VersionedValue;
///
/// let value = VersionedValue { version: 3, value: 42 };
/// assert_eq!(value.map(|count| count + 1), VersionedValue { version: 3, value: 43 });
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct VersionedValue<T> {
    /// The node's data version.
    pub version: i32,
    /// The value.
    pub value: T,
}

impl<T> VersionedValue<T> {
    /// The same version with the value mapped.
    pub fn map<U>(self, f: impl FnOnce(T) -> U) -> VersionedValue<U> {
        VersionedValue { version: self.version, value: f(self.value) }
    }
}

/// The last value known, and which incarnation of the node it came from.
#[derive(Debug, Clone)]
struct Known {
    value: VersionedValue<Vec<u8>>,
    /// The node's czxid (0 before the first read): a node deleted and created again starts over
    /// at version 0, and is still newer.
    czxid: i64,
}

/// Replaces `known` with a read or write of `stat`'s node if it is newer; whether it was.
fn update(known: &watch::Sender<Known>, stat: &Stat, data: &[u8]) -> bool {
    known.send_if_modified(|current| {
        let newer = stat.czxid > current.czxid
            || (stat.czxid == current.czxid && stat.version > current.value.version);
        if newer {
            *current = Known {
                value: VersionedValue { version: stat.version, value: data.to_vec() },
                czxid: stat.czxid,
            };
        }
        newer
    })
}

struct Inner {
    framework: Framework,
    path: String,
    known: Arc<watch::Sender<Known>>,
    watcher: JoinHandle<()>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        self.watcher.abort();
    }
}

/// A value kept in one node that every client sees (Curator's `SharedValue`): created with a
/// seed value if missing, then followed through a persistent watch, so [`get`](Self::get) answers
/// from memory and [`changes`](Self::changes) reports every new version seen.
///
/// Cheap to clone; the watch stops when the last clone is dropped (or [`close`](Self::close)d).
/// The node is never deleted by this type.
///
/// # Connection loss and session expiry
/// The cached value stays as last seen while the connection is down; after it comes back (or a
/// new session starts) the node is read again and a change is reported if it moved meanwhile.
/// A node deleted is re-read when it is created again (Curator stops following it).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_counter::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_counter::SharedValue;
///
/// let deadline = Deadline::after(Duration::from_secs(10));
/// let config = SharedValue::start(&framework, "/app/config", b"v1", deadline).await?;
/// let seen = config.get();
/// if config.try_set(seen.version, b"v2", deadline).await? {
///     println!("now v2 at version {}", config.get().version);
/// }
/// # Ok(()) }
/// ```
#[derive(Clone)]
#[must_use = "the node is followed only while a clone of this is kept"]
pub struct SharedValue {
    inner: Arc<Inner>,
}

impl SharedValue {
    /// Starts a shared value at `path` (Curator's `new SharedValue(client, path, seed).start()`):
    /// sets the watch, creates the node with `seed` if it does not exist (missing parents as
    /// containers), reads it, and follows it from then on. Needs a tokio runtime.
    ///
    /// # Errors
    /// [`CounterError::Framework`] with `InvalidPath` or `DataTooLarge` before anything is sent;
    /// otherwise framework errors (a timeout at `deadline`).
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled start returns no handle, and the watch it may have set is dropped
    /// with it. The node may have been created with `seed` meanwhile; a later `start` finds it and
    /// keeps its value.
    pub async fn start(
        framework: &Framework,
        path: &str,
        seed: &[u8],
        deadline: impl Into<Deadline>,
    ) -> Result<Self> {
        let deadline = deadline.into();
        path::validate(path)
            .map_err(|reason| FrameworkError::InvalidPath { path: path.to_owned(), reason })?;
        if path == "/" {
            return Err(CounterError::InvalidArgument("the root cannot hold a shared value".into()));
        }
        framework.check_data_size(seed.len())?;
        // The watch first, so that no change after the read can be missed.
        let watch = framework.watch(path, false, deadline).await?;
        match framework
            .create(path)
            .data(seed)
            .creating_parents(ParentMode::Container)
            .deadline(deadline)
            .await
        {
            Ok(_) => debug!(path, "created with the seed value"),
            Err(err) if err.is_node_exists() => {}
            Err(err) => return Err(err.into()),
        }
        let initial = Known { value: VersionedValue { version: -1, value: seed.to_vec() }, czxid: 0 };
        let known = Arc::new(watch::channel(initial).0);
        let node = framework.get_data(path, deadline).await?;
        update(&known, &node.stat, &node.data);
        let span = info_span!("shared_value", path);
        let watcher = tokio::spawn(
            follow(framework.clone(), path.to_owned(), watch, Arc::clone(&known)).instrument(span),
        );
        Ok(Self {
            inner: Arc::new(Inner { framework: framework.clone(), path: path.to_owned(), known, watcher }),
        })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        &self.inner.path
    }

    /// The last value seen, with its version (Curator's `getVersionedValue`); no server round trip.
    pub fn get(&self) -> VersionedValue<Vec<u8>> {
        self.inner.known.borrow().value.clone()
    }

    /// Reads the node now (after a `sync`, so every write committed before the call is seen),
    /// updates what [`get`](Self::get) returns, and returns it.
    ///
    /// # Errors
    /// `NoNode` if it was deleted; framework errors.
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn read(&self, deadline: impl Into<Deadline>) -> Result<VersionedValue<Vec<u8>>> {
        let deadline = deadline.into();
        let framework = &self.inner.framework;
        framework.sync(&self.inner.path, deadline).await?;
        let node = framework.get_data(&self.inner.path, deadline).await?;
        update(&self.inner.known, &node.stat, &node.data);
        Ok(VersionedValue { version: node.stat.version, value: node.data })
    }

    /// Sets the value whatever it is (Curator's `setValue`); returns the new version. Retried after
    /// a connection loss (setting the same bytes twice leaves the same value).
    ///
    /// # Errors
    /// `DataTooLarge` before anything is sent; `NoNode` if the node was deleted; framework errors.
    ///
    /// # Cancel safety
    /// If dropped after sending, the value may or may not have been set.
    pub async fn set(&self, value: &[u8], deadline: impl Into<Deadline>) -> Result<i32> {
        let deadline = deadline.into();
        let stat = self.inner.framework.set_data(&self.inner.path, value, None, deadline).await?;
        update(&self.inner.known, &stat, value);
        Ok(stat.version)
    }

    /// Sets the value only if the node is still at `expected_version` (Curator's
    /// `trySetValue(previous, newValue)`): `true` if it was set; `false` if someone changed it first
    /// (the node is then read again, so [`get`](Self::get) shows the newer value).
    ///
    /// Sent once: after a connection loss the node is read back, and the set is repeated only if
    /// the node is provably unchanged.
    ///
    /// # Errors
    /// [`CounterError::OutcomeUnknown`] when a lost reply left the node changed and the set may or
    /// may not be ours; `DataTooLarge`, or [`CounterError::InvalidArgument`] for a negative
    /// version (ZooKeeper's "any version"), before anything is sent; framework errors.
    ///
    /// # Cancel safety
    /// If dropped after sending, the value may or may not have been set.
    #[must_use = "false means the value was not set"]
    pub async fn try_set(
        &self,
        expected_version: i32,
        value: &[u8],
        deadline: impl Into<Deadline>,
    ) -> Result<bool> {
        let deadline = deadline.into();
        let framework = &self.inner.framework;
        if expected_version < 0 {
            // ZooKeeper takes -1 as "any version": that would be an unconditional set.
            return Err(CounterError::InvalidArgument(format!(
                "expected version {expected_version}: a version is never negative (read the value first)"
            )));
        }
        framework.check_data_size(value.len())?;
        let czxid = self.inner.known.borrow().czxid;
        let write = ConditionalWrite::SetIfUnchanged { data: value, version: expected_version, czxid };
        match framework.write_once(&self.inner.path, write, deadline).await? {
            WriteOutcome::Applied(stat) => {
                if let Some(stat) = stat {
                    update(&self.inner.known, &stat, value);
                }
                Ok(true)
            }
            WriteOutcome::Refused(reason) => {
                debug!(path = %self.inner.path, expected_version, %reason, "try_set lost to another writer");
                if reason != ZkError::NoNode {
                    self.read(deadline).await?;
                }
                Ok(false)
            }
        }
    }

    /// A stream of the values seen from now on (Curator's `SharedValueListener`). A burst of
    /// changes may be reported as its last value only (as with Curator's one-shot watches).
    pub fn changes(&self) -> SharedValueChanges {
        let mut receiver = self.inner.known.subscribe();
        receiver.mark_unchanged();
        SharedValueChanges { receiver }
    }

    /// Stops following the node (Curator's `close`); the node stays. Other clones stop too.
    pub fn close(self) {
        self.inner.watcher.abort();
    }
}

impl fmt::Debug for SharedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SharedValue").field("path", &self.inner.path).field("known", &self.get()).finish()
    }
}

/// Follows the node: every change and every reset of the watch is a read.
async fn follow(
    framework: Framework,
    path: String,
    mut watch: zk_recipes_framework::PersistentWatch,
    known: Arc<watch::Sender<Known>>,
) {
    let mut backoff = Backoff::default();
    let mut pending = false;
    loop {
        if !pending {
            match watch.next().await {
                None => return,
                Some(WatchEvent::Deleted { .. }) => continue,
                Some(event) => debug!(?event, "re-reading"),
            }
        }
        match framework.get_data(&path, Deadline::after(DEFAULT_OPERATION_TIMEOUT)).await {
            Ok(node) => {
                pending = false;
                backoff.reset();
                if update(&known, &node.stat, &node.data) {
                    debug!(version = node.stat.version, "a new value");
                }
            }
            Err(err) if err.is_no_node() => pending = false,
            Err(FrameworkError::Closed) => return,
            Err(err) => {
                debug!(%err, "reading the value failed; trying again");
                pending = true;
                backoff.pause().await;
            }
        }
    }
}

/// The values a [`SharedValue`] sees ([`SharedValue::changes`]).
///
/// ```no_run
/// # async fn demo(value: zk_recipes_counter::SharedValue) {
/// let mut changes = value.changes();
/// while let Some(seen) = changes.next().await {
///     println!("version {}: {} bytes", seen.version, seen.value.len());
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct SharedValueChanges {
    receiver: watch::Receiver<Known>,
}

impl SharedValueChanges {
    /// The next value seen (the latest, if several came meanwhile); `None` once the shared value
    /// is closed or dropped.
    ///
    /// # Cancel safety
    /// Cancel safe: a value seen meanwhile is not missed; the next call returns the latest one.
    pub async fn next(&mut self) -> Option<VersionedValue<Vec<u8>>> {
        self.receiver.changed().await.ok()?;
        Some(self.receiver.borrow_and_update().value.clone())
    }
}

/// Curator's `SharedCount` encoding: a 4-byte big-endian `i32`.
///
/// ```
/// assert_eq!(zk_recipes_counter::encode_count(258), [0, 0, 1, 2]);
/// ```
pub fn encode_count(count: i32) -> [u8; 4] {
    count.to_be_bytes()
}

/// Decodes Curator's `SharedCount` data: the first 4 bytes, big-endian (Curator reads the first
/// four and ignores the rest; fewer than four is corrupt).
///
/// ```
/// use zk_recipes_counter::decode_count;
///
/// assert_eq!(decode_count("/c", &[0xff, 0xff, 0xff, 0xfe]).unwrap(), -2);
/// assert!(decode_count("/c", &[]).is_err());
/// ```
///
/// # Errors
/// [`CounterError::CorruptData`] for fewer than 4 bytes.
pub fn decode_count(path: &str, data: &[u8]) -> Result<i32> {
    match data.first_chunk::<4>() {
        Some(bytes) => Ok(i32::from_be_bytes(*bytes)),
        None => Err(CounterError::CorruptData {
            path: path.to_owned(),
            data: data.to_vec(),
            expected: "a 4-byte big-endian int",
        }),
    }
}

/// A shared `i32` in one node (Curator's `SharedCount`): a [`SharedValue`] whose data is a 4-byte
/// big-endian int.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_counter::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_counter::SharedCount;
///
/// let deadline = Deadline::after(Duration::from_secs(10));
/// let count = SharedCount::start(&framework, "/app/workers", 0, deadline).await?;
/// loop {
///     let seen = count.read(deadline).await?;
///     if count.try_set(seen.version, seen.value + 1, deadline).await? {
///         break;
///     }
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "the node is followed only while a clone of this is kept"]
pub struct SharedCount {
    value: SharedValue,
}

impl SharedCount {
    /// Starts a shared count at `path` with `seed` if the node is missing (Curator's
    /// `new SharedCount(client, path, seed).start()`). See [`SharedValue::start`].
    ///
    /// # Errors
    /// As [`SharedValue::start`].
    ///
    /// # Cancel safety
    /// Cancel safe: a cancelled start returns no handle, and the watch it may have set is dropped
    /// with it. The node may have been created with `seed` meanwhile; a later `start` finds it and
    /// keeps its value.
    pub async fn start(
        framework: &Framework,
        path: &str,
        seed: i32,
        deadline: impl Into<Deadline>,
    ) -> Result<Self> {
        let deadline = deadline.into();
        Ok(Self { value: SharedValue::start(framework, path, &encode_count(seed), deadline).await? })
    }

    /// The node's path.
    pub fn path(&self) -> &str {
        self.value.path()
    }

    /// The last count seen and its version (Curator's `getVersionedValue`); no round trip.
    ///
    /// # Errors
    /// [`CounterError::CorruptData`] if the node holds fewer than 4 bytes.
    pub fn get(&self) -> Result<VersionedValue<i32>> {
        let seen = self.value.get();
        Ok(VersionedValue { version: seen.version, value: decode_count(self.path(), &seen.value)? })
    }

    /// The last count seen (Curator's `getCount`).
    ///
    /// # Errors
    /// As [`get`](Self::get).
    pub fn count(&self) -> Result<i32> {
        Ok(self.get()?.value)
    }

    /// Reads the count now. See [`SharedValue::read`].
    ///
    /// # Errors
    /// As [`SharedValue::read`], and [`CounterError::CorruptData`].
    ///
    /// # Cancel safety
    /// Cancel safe: it only reads.
    pub async fn read(&self, deadline: impl Into<Deadline>) -> Result<VersionedValue<i32>> {
        let deadline = deadline.into();
        let seen = self.value.read(deadline).await?;
        Ok(VersionedValue { version: seen.version, value: decode_count(self.path(), &seen.value)? })
    }

    /// Sets the count whatever it is (Curator's `setCount`); returns the new version.
    ///
    /// # Errors
    /// As [`SharedValue::set`].
    ///
    /// # Cancel safety
    /// As [`SharedValue::set`].
    pub async fn set(&self, count: i32, deadline: impl Into<Deadline>) -> Result<i32> {
        let deadline = deadline.into();
        self.value.set(&encode_count(count), deadline).await
    }

    /// Sets the count if the node is still at `expected_version` (Curator's
    /// `trySetCount(VersionedValue)`). See [`SharedValue::try_set`].
    ///
    /// # Errors
    /// As [`SharedValue::try_set`].
    ///
    /// # Cancel safety
    /// As [`SharedValue::try_set`].
    #[must_use = "false means the count was not set"]
    pub async fn try_set(
        &self,
        expected_version: i32,
        count: i32,
        deadline: impl Into<Deadline>,
    ) -> Result<bool> {
        let deadline = deadline.into();
        self.value.try_set(expected_version, &encode_count(count), deadline).await
    }

    /// The counts seen from now on (Curator's `SharedCountListener`).
    pub fn changes(&self) -> SharedCountChanges {
        SharedCountChanges { path: self.path().to_owned(), changes: self.value.changes() }
    }

    /// The shared value underneath.
    pub fn as_shared_value(&self) -> &SharedValue {
        &self.value
    }

    /// Stops following the node (Curator's `close`).
    pub fn close(self) {
        self.value.close();
    }
}

/// The counts a [`SharedCount`] sees ([`SharedCount::changes`]).
///
/// ```no_run
/// # async fn demo(count: zk_recipes_counter::SharedCount) {
/// let mut changes = count.changes();
/// while let Some(Ok(seen)) = changes.next().await {
///     println!("count {} at version {}", seen.value, seen.version);
/// }
/// # }
/// ```
#[derive(Debug)]
pub struct SharedCountChanges {
    path: String,
    changes: SharedValueChanges,
}

impl SharedCountChanges {
    /// The next count seen; `None` once the count is closed or dropped; an error for data that
    /// is not a count.
    ///
    /// # Cancel safety
    /// Cancel safe: a value seen meanwhile is not missed; the next call returns the latest one.
    pub async fn next(&mut self) -> Option<Result<VersionedValue<i32>>> {
        let seen = self.changes.next().await?;
        Some(
            decode_count(&self.path, &seen.value)
                .map(|count| VersionedValue { version: seen.version, value: count }),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stat(czxid: i64, version: i32) -> Stat {
        Stat {
            czxid,
            mzxid: czxid,
            pzxid: czxid,
            ctime: 0,
            mtime: 0,
            version,
            cversion: 0,
            aversion: 0,
            ephemeral_owner: 0,
            data_length: 0,
            num_children: 0,
        }
    }

    #[test]
    fn only_a_newer_version_or_a_newer_node_replaces_the_known_value() {
        let known = watch::channel(Known {
            value: VersionedValue { version: -1, value: b"seed".to_vec() },
            czxid: 0,
        })
        .0;
        assert!(update(&known, &stat(10, 0), b"a"), "the first read");
        assert!(update(&known, &stat(10, 2), b"c"));
        assert!(!update(&known, &stat(10, 1), b"b"), "an older version read late is ignored");
        assert!(!update(&known, &stat(10, 2), b"c"), "the same version is no change");
        assert_eq!(known.borrow().value, VersionedValue { version: 2, value: b"c".to_vec() });
        assert!(update(&known, &stat(20, 0), b"again"), "a node created again starts over at 0");
        assert_eq!(known.borrow().value, VersionedValue { version: 0, value: b"again".to_vec() });
        assert!(!update(&known, &stat(10, 5), b"old"), "a late read of the deleted node is ignored");
    }
}
