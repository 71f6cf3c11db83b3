//! [`PartitionerBuilder`]: the settings, checked before anything is sent.

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use zk_recipes_framework::{local_address, path, Framework};
use zk_recipes_mutex::{LockLayout, Mutex};

use crate::config::{Config, PartitionLayout, KAZOO_PARTY, LOCKS, MEMBERS};
use crate::error::{PartitionError, Result};
use crate::partitioner::Partitioner;

/// The default settle time ([`PartitionerBuilder::settle`]): 5 s.
pub const DEFAULT_SETTLE: Duration = Duration::from_secs(5);

/// Builds and starts a [`Partitioner`]: see [`Partitioner::builder`].
///
/// Defaults: [`PartitionLayout::Native`]; the identifier `<this host's address>-<process id>-<n>`
/// (`n` counts the partitioners this process started, so each is its own worker); a settle time
/// of [`DEFAULT_SETTLE`] (5 s).
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_partition::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_partition::{PartitionLayout, Partitioner};
///
/// let shards: Vec<String> = (0..16).map(|shard| format!("shard-{shard}")).collect();
/// let partitioner = Partitioner::builder(&framework, "/app/partitions", shards)
///     .identifier("worker-7")
///     .settle(Duration::from_secs(2))
///     .layout(PartitionLayout::Kazoo)
///     .start()?;
/// # partitioner.close(Duration::from_secs(5)).await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone)]
#[must_use = "a builder does nothing until it is started"]
pub struct PartitionerBuilder {
    framework: Framework,
    path: String,
    items: Vec<String>,
    identifier: Option<String>,
    settle: Duration,
    layout: PartitionLayout,
    unlocked: bool,
}

impl PartitionerBuilder {
    pub(crate) fn new(framework: &Framework, path: &str, items: Vec<String>) -> Self {
        Self {
            framework: framework.clone(),
            path: path.to_owned(),
            items,
            identifier: None,
            settle: DEFAULT_SETTLE,
            layout: PartitionLayout::default(),
            unlocked: false,
        }
    }

    /// A test hook, no part of the API: the chaos suite's negative control (`zkr-chaos partition
    /// --no-lock`). Each item's lock is made this worker's own (at
    /// `<path>/unlocked/<identifier>/<item>`, which nobody else waits on), so the worker still
    /// follows the party and deals the items, but starts an item's work as soon as the deal
    /// gives it the item, without waiting for the previous owner to stop: while items move, two
    /// workers own one at once, which the suite's "owned twice" checker must report. Never use it
    /// for anything else.
    #[doc(hidden)]
    pub fn without_item_locks_for_chaos_control(mut self) -> Self {
        self.unlocked = true;
        self
    }

    /// This worker's identifier: its member node's name (ours) or its part of it (kazoo's), and
    /// its place in the deal. Give every worker its own. In our layout a second worker with an
    /// identifier already in the party cannot create its member node: it waits, owning nothing,
    /// until the first one leaves (a standby). In kazoo's layout both join and get the same
    /// share, and take turns at its locks (never both at once), as kazoo's workers do. Defaults
    /// to `<address>-<pid>-<n>` (kazoo's default is `<fqdn>-<pid>`).
    pub fn identifier(mut self, identifier: impl Into<String>) -> Self {
        self.identifier = Some(identifier.into());
        self
    }

    /// How long the party must stay unchanged before items move. Defaults to [`DEFAULT_SETTLE`]
    /// (5 s; kazoo's `time_boundary` defaults to 30 s).
    pub fn settle(mut self, settle: Duration) -> Self {
        self.settle = settle;
        self
    }

    /// The layout. Defaults to [`PartitionLayout::Native`].
    pub fn layout(mut self, layout: PartitionLayout) -> Self {
        self.layout = layout;
        self
    }

    /// Checks the settings and starts the worker: it joins the party and, once the party has
    /// been unchanged for the settle time, takes its share. Returns at once; watch
    /// [`Partitioner::events`]. Needs a tokio runtime.
    ///
    /// # Errors
    /// [`PartitionError::InvalidPath`] (the root too), [`PartitionError::NoItems`],
    /// [`PartitionError::InvalidItem`], [`PartitionError::DuplicateItem`],
    /// [`PartitionError::InvalidIdentifier`], [`PartitionError::ZeroSettle`]. Nothing is sent.
    pub fn start(self) -> Result<Partitioner> {
        Ok(Partitioner::spawn(Arc::new(self.config()?)))
    }

    fn config(self) -> Result<Config> {
        let invalid_path = |reason: String| PartitionError::InvalidPath { path: self.path.clone(), reason };
        path::validate(&self.path).map_err(|reason| invalid_path(reason.to_string()))?;
        if self.path == "/" {
            return Err(invalid_path("the root cannot hold a partitioner".into()));
        }
        if self.items.is_empty() {
            return Err(PartitionError::NoItems);
        }
        let mut seen = BTreeSet::new();
        for item in &self.items {
            if let Err(reason) = validate_name(item) {
                return Err(PartitionError::InvalidItem { item: item.clone(), reason });
            }
            if !seen.insert(item.as_str()) {
                return Err(PartitionError::DuplicateItem { item: item.clone() });
            }
        }
        if self.settle.is_zero() {
            return Err(PartitionError::ZeroSettle);
        }
        let identifier = self.identifier.unwrap_or_else(default_identifier);
        let invalid_identifier =
            |reason: String| PartitionError::InvalidIdentifier { identifier: identifier.clone(), reason };
        let (party, member_name, lock_layout) = match self.layout {
            PartitionLayout::Kazoo => {
                (KAZOO_PARTY, format!("{}-{identifier}", uuid::Uuid::new_v4().simple()), LockLayout::Kazoo)
            }
            _ => (MEMBERS, identifier.clone(), LockLayout::Curator),
        };
        if identifier.is_empty() {
            return Err(invalid_identifier("empty".into()));
        }
        validate_name(&member_name).map_err(invalid_identifier)?;
        let locks_path = if self.unlocked {
            path::join(&path::join(&self.path, "unlocked"), &identifier)
        } else {
            path::join(&self.path, LOCKS)
        };
        let locks = self
            .items
            .iter()
            .map(|item| {
                let mutex = Mutex::with_layout(&self.framework, &path::join(&locks_path, item), lock_layout)?
                    .node_data(identifier.as_bytes());
                Ok((item.clone(), mutex))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Config {
            party_path: path::join(&self.path, party),
            framework: self.framework,
            path: self.path,
            items: self.items,
            identifier,
            settle: self.settle,
            layout: self.layout,
            member_name,
            locks,
        })
    }
}

/// Whether `name` is one znode name ZooKeeper takes.
fn validate_name(name: &str) -> std::result::Result<(), String> {
    if name.is_empty() {
        return Err("empty".into());
    }
    if name.contains('/') {
        return Err("holds a '/': not one node name".into());
    }
    if name == "." || name == ".." {
        return Err("'.' and '..' are not node names".into());
    }
    path::validate(&format!("/{name}")).map_err(|reason| reason.to_string())
}

/// `<this host's address>-<process id>-<n>`.
fn default_identifier() -> String {
    static STARTED: AtomicU64 = AtomicU64::new(0);
    let address = String::from_utf8_lossy(&local_address()).into_owned();
    let address = if address.is_empty() { "localhost".to_owned() } else { address };
    format!("{address}-{}-{}", std::process::id(), STARTED.fetch_add(1, Ordering::Relaxed) + 1)
}

/// Where a partitioner starts: its builder.
impl Partitioner {
    /// Starts building a partitioner of `items` at `path`.
    ///
    /// ```no_run
    /// # fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_partition::Result<()> {
    /// let partitioner = zk_recipes_partition::Partitioner::builder(&framework, "/app/queues", ["q1", "q2", "q3"])
    ///     .start()?;
    /// # drop(partitioner); Ok(()) }
    /// ```
    pub fn builder<I, S>(framework: &Framework, path: &str, items: I) -> PartitionerBuilder
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        PartitionerBuilder::new(framework, path, items.into_iter().map(Into::into).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_single_znode_names() {
        assert!(validate_name("shard-1").is_ok());
        assert!(validate_name("a b:c").is_ok());
        for bad in ["", ".", "..", "a/b", "/", "nul\u{0}", "private\u{e000}"] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn the_default_identifier_differs_per_partitioner() {
        let (first, second) = (default_identifier(), default_identifier());
        assert_ne!(first, second);
        assert!(validate_name(&first).is_ok(), "{first}");
    }
}
