//! What a protected create asks for: [`ProtectedCreate`], handed by value to
//! [`Framework::create_protected`](crate::Framework::create_protected)(crate::Framework::create_protected).

use zookeeper_client::{Acl, CreateMode};

use super::marker::NodeMarker;
use super::on_session::ParentMode;
use super::owned::OwnedNode;
use crate::session::Session;

/// What a protected create asks for, the same on every try: handed by value to
/// [`Framework::create_protected`](crate::Framework::create_protected).
///
/// Defaults: `<parent>/_c_<uuid>-<name><sequence>`, EPHEMERAL_SEQUENTIAL, empty data, missing
/// parents made as containers, the framework's ACL, no listing, not built on another node.
///
/// ```no_run
/// # async fn demo(framework: zk_recipes_framework::Framework) -> zk_recipes_framework::Result<()> {
/// use std::time::Duration;
/// use zk_recipes_framework::{Deadline, NodeMarker, ProtectedCreate};
///
/// let deadline = Deadline::after(Duration::from_secs(5));
/// // Curator's protected ephemeral-sequential node.
/// let member = framework.create_protected(ProtectedCreate::new("/app/members", "member-").data(b"10.0.0.7"), deadline).await?;
/// // kazoo's lock node, and the lock's contenders listed right behind the create.
/// let marker = NodeMarker::UuidHex;
/// let request = ProtectedCreate::new("/app/lock", "__lock__").marker(&marker).list_siblings(true);
/// let mut contender = framework.create_protected(request, deadline).await?;
/// let siblings = contender.take_siblings();
/// println!("{} among {siblings:?}", contender.name());
/// # drop(member);
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy)]
#[must_use = "a request does nothing until it is passed to Framework::create_protected"]
pub struct ProtectedCreate<'a> {
    pub(crate) parent: &'a str,
    pub(crate) name: &'a str,
    pub(crate) data: &'a [u8],
    pub(crate) mode: CreateMode,
    /// List the parent's children right behind the create.
    pub(crate) list_siblings: bool,
    /// The existing node this create builds on: the create runs only on its session, in one
    /// multi with a check that it still exists.
    pub(crate) anchor: Option<Anchor<'a>>,
    /// How missing parents are created; `None`: a missing parent fails the create.
    pub(crate) parents: Option<ParentMode>,
    /// A TTL (persistent modes only).
    pub(crate) ttl: Option<std::time::Duration>,
    /// The node's ACL, instead of the framework's default.
    pub(crate) acl: Option<&'a [Acl]>,
    /// How the name starts, to find the node again.
    pub(crate) marker: &'a NodeMarker,
}

impl<'a> ProtectedCreate<'a> {
    /// A create of `<parent>/<marker><name>`, with the defaults above. `name` may be empty (the
    /// node is then named by its marker and sequence).
    pub fn new(parent: &'a str, name: &'a str) -> Self {
        Self {
            parent,
            name,
            data: &[],
            mode: CreateMode::EphemeralSequential,
            list_siblings: false,
            anchor: None,
            parents: Some(ParentMode::Container),
            ttl: None,
            acl: None,
            marker: &NodeMarker::Protected,
        }
    }

    /// The node's data. Defaults to none.
    pub fn data(mut self, data: &'a [u8]) -> Self {
        self.data = data;
        self
    }

    /// The node's mode. Defaults to EPHEMERAL_SEQUENTIAL. A node that outlives its session
    /// (persistent, container) keeps its marker across sessions and is looked for on the next one;
    /// an ephemeral node's create starts over on a new session with a new marker.
    pub fn mode(mut self, mode: CreateMode) -> Self {
        self.mode = mode;
        self
    }

    /// How the node's name starts. Defaults to Curator's [`NodeMarker::Protected`].
    ///
    /// With [`NodeMarker::SessionId`] the marker names the session, not the call: such creates of
    /// one session under one parent go one at a time (each waits until the one before it knows its
    /// outcome), and after a lost reply a create takes, or its cleanup deletes, only the session's
    /// node above the highest sequence its earlier creates made: never a node another hold of the
    /// session still owns. The argument is in the framework's `session_marker` module.
    pub fn marker(mut self, marker: &'a NodeMarker) -> Self {
        self.marker = marker;
        self
    }

    /// Whether to list the parent's children right behind the create, in the same round trip:
    /// ZooKeeper runs one session's requests in order, so the listing already holds our node.
    /// Read it with [`OwnedNode::take_siblings`]: it is there only when it succeeded and holds our
    /// node (else list again yourself). Defaults to `false`.
    pub fn list_siblings(mut self, list: bool) -> Self {
        self.list_siblings = list;
        self
    }

    /// Builds the create on `node`: it runs on `node`'s session only, in one transaction with a
    /// check that `node` still exists. Nothing is created unless `node` is there at that moment,
    /// and nothing is ever created on a newer session: the call fails with
    /// [`Error::NodeLost`](crate::Error::NodeLost) (naming `node`) instead. For a node that continues a hold: the read node
    /// of a read-write lock's downgrade, a lease taken under a semaphore's internal lock. The mode
    /// must be ephemeral.
    pub fn while_exists(mut self, node: &'a OwnedNode) -> Self {
        self.anchor = Some(Anchor { path: node.path(), generation: node.generation() });
        self
    }

    /// How missing parents are made; `None`: a missing parent fails the create.
    pub(crate) fn parents(mut self, parents: Option<ParentMode>) -> Self {
        self.parents = parents;
        self
    }

    /// A TTL (persistent modes only).
    pub(crate) fn ttl(mut self, ttl: Option<std::time::Duration>) -> Self {
        self.ttl = ttl;
        self
    }

    /// The node's ACL instead of the framework's.
    pub(crate) fn acl(mut self, acl: Option<&'a [Acl]>) -> Self {
        self.acl = acl;
        self
    }

    pub(crate) fn is_ephemeral(&self) -> bool {
        matches!(self.mode, CreateMode::Ephemeral | CreateMode::EphemeralSequential)
    }

    pub(crate) fn options(
        &self,
        session: &'a Session,
        node_path: &str,
    ) -> zookeeper_client::CreateOptions<'a> {
        let options = match self.acl {
            Some(acl) => self.mode.with_acls(zookeeper_client::Acls::new(acl)),
            None => session.create_options_for(node_path, self.mode),
        };
        match self.ttl {
            Some(ttl) => options.with_ttl(ttl),
            None => options,
        }
    }
}

/// An existing node of ours, on the session of `generation`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Anchor<'a> {
    pub(crate) path: &'a str,
    pub(crate) generation: u64,
}
