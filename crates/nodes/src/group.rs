//! `GroupMember`: membership in a group of processes (Curator's `GroupMember`).

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use zk_recipes_cache::{Cache, CacheEvent, CacheEvents};
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{local_address, path, Deadline, Error as FrameworkError, Framework};

use crate::error::{NodeError, Result};
use crate::persistent::PersistentNode;

/// Configures a [`GroupMember`] ([`GroupMember::builder`]).
///
/// Defaults: the payload is this host's address.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_nodes::Result<()> {
/// use zk_recipes_nodes::GroupMember;
///
/// let member = GroupMember::builder(&framework, "/services/api/members", "worker-3")
///     .data(b"10.0.0.7:8080")
///     .start()?;
/// # drop(member);
/// # Ok(()) }
/// ```
#[must_use = "a builder does nothing until start() is called"]
#[derive(Debug)]
pub struct GroupMemberBuilder {
    framework: Framework,
    membership_path: String,
    id: String,
    data: Option<Vec<u8>>,
}

impl GroupMemberBuilder {
    /// This member's payload. Defaults to the local address, as Curator's.
    pub fn data(mut self, data: impl Into<Vec<u8>>) -> Self {
        self.data = Some(data.into());
        self
    }

    /// Joins the group: this member's ephemeral node is kept at `<membership path>/<id>` (a
    /// [`PersistentNode`]), and a cache follows the group's members. Needs a tokio runtime.
    ///
    /// # Errors
    /// Before anything is sent: [`NodeError::Framework`] with `InvalidPath` or `DataTooLarge`;
    /// [`NodeError::InvalidArgument`] for an id that is not one node name.
    pub fn start(self) -> Result<GroupMember> {
        let membership_path = self.membership_path;
        path::validate(&membership_path).map_err(|reason| {
            NodeError::Framework(FrameworkError::InvalidPath { path: membership_path.clone(), reason })
        })?;
        if self.id.is_empty() || self.id.contains('/') || self.id == "." || self.id == ".." {
            return Err(NodeError::InvalidArgument(format!(
                "the member id {:?} is not one node name",
                self.id
            )));
        }
        let data = self.data.unwrap_or_else(local_address);
        let node = PersistentNode::builder(&self.framework, &path::join(&membership_path, &self.id))
            .mode(CreateMode::Ephemeral)
            .data(data)
            .start()?;
        let root = membership_path.clone();
        let cache = Cache::builder(&self.framework, &membership_path)
            .filter(move |node_path| node_path == root || path::parent(node_path) == Some(root.as_str()))
            .start()?;
        Ok(GroupMember { node, cache, membership_path, id: self.id })
    }
}

/// Membership in a group of processes (Curator's `GroupMember`): this member's ephemeral node
/// at `<membership path>/<id>` holding its payload, kept as a [`PersistentNode`] (created again
/// after a session loss), and a cache of the group's other members.
///
/// Layout and data are Curator's, so Rust and Java members share one group. A crashed member
/// leaves when the server expires its session.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> Result<(), zk_recipes_nodes::NodeError> {
/// use std::time::Duration;
/// use zk_recipes_framework::Deadline;
/// use zk_recipes_nodes::{GroupMember, MemberEvent};
///
/// let member = GroupMember::builder(&framework, "/services/api/members", "worker-3")
///     .data(b"10.0.0.7:8080")
///     .start()?;
/// member.initialized(Deadline::after(Duration::from_secs(10))).await?;
/// for (id, payload) in member.current_members() {
///     println!("{id}: {}", String::from_utf8_lossy(&payload));
/// }
/// let mut changes = member.events();
/// while let Some(event) = changes.next().await {
///     if let MemberEvent::Left { id } = event {
///         println!("{id} left");
///     }
/// }
/// member.close().await?;
/// # Ok(()) }
/// ```
#[must_use = "this member leaves the group when dropped"]
pub struct GroupMember {
    node: PersistentNode,
    cache: Cache,
    membership_path: String,
    id: String,
}

impl GroupMember {
    /// A builder for member `id` of the group at `membership_path`.
    pub fn builder(framework: &Framework, membership_path: &str, id: &str) -> GroupMemberBuilder {
        GroupMemberBuilder {
            framework: framework.clone(),
            membership_path: membership_path.to_owned(),
            id: id.to_owned(),
            data: None,
        }
    }

    /// This member's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The group's path.
    pub fn membership_path(&self) -> &str {
        &self.membership_path
    }

    /// Waits until this member's node exists and the cache has loaded the group once.
    ///
    /// # Errors
    /// A framework timeout at the deadline; [`NodeError::Closed`] if the member's keeper ended
    /// with its framework.
    ///
    /// # Cancel safety
    /// Cancel safe: it only waits. The member's node and the cache go on in their tasks either way.
    pub async fn initialized(&self, deadline: impl Into<Deadline>) -> Result<()> {
        let deadline = deadline.into();
        self.node.wait_for_initial_create(deadline).await?;
        Ok(self.cache.initialized(deadline).await?)
    }

    /// The group as the cache sees it: member id → payload (Curator's `getCurrentMembers`).
    /// This member is always in it, with its own payload until the cache has seen its node.
    pub fn current_members(&self) -> BTreeMap<String, Arc<[u8]>> {
        let mut members: BTreeMap<String, Arc<[u8]>> = self
            .cache
            .children(&self.membership_path)
            .into_iter()
            .filter_map(|id| {
                let node = self.cache.get(&path::join(&self.membership_path, &id))?;
                Some((id, node.data.unwrap_or_else(|| Arc::from(&[][..]))))
            })
            .collect();
        members.entry(self.id.clone()).or_insert_with(|| Arc::from(self.node.data()));
        members
    }

    /// A member's id from its node's path (Curator's `idFromPath`).
    pub fn id_from_path(path: &str) -> &str {
        path::name(path)
    }

    /// Changes this member's payload (Curator's `setThisData`).
    ///
    /// # Errors
    /// As [`PersistentNode::set_data`].
    ///
    /// # Cancel safety
    /// Cancel safe in effect: once the call is first polled, the new data is with this member's
    /// node's task, which keeps it for later re-creations and sets it on the server whether or not
    /// the call still waits. A cancelled call only misses the outcome (a failed set is not
    /// reported).
    pub async fn set_data(&self, data: Vec<u8>) -> Result<()> {
        self.node.set_data(data).await
    }

    /// The group's changes: the members already known (as `Joined`), `Initialized` once the
    /// first load is done, then every join, payload change and departure, in order.
    pub fn events(&self) -> MemberEvents {
        MemberEvents { events: self.cache.events(), membership_path: self.membership_path.clone() }
    }

    /// Leaves the group: the cache stops and this member's node is deleted (Curator's `close`).
    ///
    /// # Errors
    /// As [`PersistentNode::close`].
    ///
    /// # Cancel safety
    /// Cancel safe: the member leaves either way (its node is deleted in the background when the
    /// member is dropped); a cancelled call only misses the outcome.
    pub async fn close(self) -> Result<()> {
        self.cache.close().await;
        self.node.close().await
    }
}

impl fmt::Debug for GroupMember {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("GroupMember")
            .field("membership_path", &self.membership_path)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// A change in a group ([`GroupMember::events`]).
///
/// ```no_run
/// # async fn demo(member: zk_recipes_nodes::GroupMember) {
/// use zk_recipes_nodes::MemberEvent;
///
/// let mut events = member.events();
/// while let Some(event) = events.next().await {
///     match event {
///         MemberEvent::Joined { id, data } => println!("+ {id} ({})", String::from_utf8_lossy(&data)),
///         MemberEvent::Changed { id, .. } => println!("~ {id}"),
///         MemberEvent::Left { id } => println!("- {id}"),
///         MemberEvent::Initialized => println!("every member present at the start is known"),
///         _ => {}
///     }
/// }
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum MemberEvent {
    /// A member joined (or was there when the subscription began).
    Joined {
        /// Its id.
        id: String,
        /// Its payload.
        data: Arc<[u8]>,
    },
    /// A member's payload changed.
    Changed {
        /// Its id.
        id: String,
        /// The new payload.
        data: Arc<[u8]>,
    },
    /// A member left (closed, or its session expired).
    Left {
        /// Its id.
        id: String,
    },
    /// The members present at the start have all been reported.
    Initialized,
}

/// A subscription to a group's changes ([`GroupMember::events`]); it ends when the member is
/// closed or dropped.
///
/// ```no_run
/// # async fn demo(member: zk_recipes_nodes::GroupMember) {
/// let mut events = member.events();
/// // Take what is already known without waiting, then wait for the next change.
/// while let Some(event) = events.try_next() {
///     println!("{event:?}");
/// }
/// if let Some(event) = events.next().await {
///     println!("then {event:?}");
/// }
/// # }
/// ```
#[must_use = "events queue up until read; drop the subscription when done"]
#[derive(Debug)]
pub struct MemberEvents {
    events: CacheEvents,
    membership_path: String,
}

impl MemberEvents {
    /// The next change; `None` once the member is gone.
    ///
    /// # Cancel safety
    /// Cancel safe: an event is taken only when returned.
    pub async fn next(&mut self) -> Option<MemberEvent> {
        loop {
            let event = self.events.next().await?;
            if let Some(member) = self.member_event(event) {
                return Some(member);
            }
        }
    }

    /// A change already waiting, if any.
    pub fn try_next(&mut self) -> Option<MemberEvent> {
        while let Some(event) = self.events.try_next() {
            if let Some(member) = self.member_event(event) {
                return Some(member);
            }
        }
        None
    }

    fn member_event(&self, event: CacheEvent) -> Option<MemberEvent> {
        let id = |node_path: &str| {
            (path::parent(node_path) == Some(self.membership_path.as_str()))
                .then(|| path::name(node_path).to_owned())
        };
        let data =
            |node: &zk_recipes_cache::CachedNode| node.data.clone().unwrap_or_else(|| Arc::from(&[][..]));
        match event {
            CacheEvent::Created { path, node } => {
                Some(MemberEvent::Joined { id: id(&path)?, data: data(&node) })
            }
            CacheEvent::Changed { path, new, .. } => {
                Some(MemberEvent::Changed { id: id(&path)?, data: data(&new) })
            }
            CacheEvent::Deleted { path, .. } => Some(MemberEvent::Left { id: id(&path)? }),
            CacheEvent::Initialized => Some(MemberEvent::Initialized),
            _ => None,
        }
    }
}
