//! How a queued node's name starts: the marker a protected create finds its node by.

use std::sync::Arc;

use crate::path;

/// How a queued node's name starts, so that its creator finds it again among its siblings after a
/// connection loss (the create may have succeeded without our hearing of it). Each lock layout
/// has its own.
///
/// ```
/// use zk_recipes_framework::zookeeper_client::SessionId;
/// use zk_recipes_framework::{path, NodeMarker};
///
/// let marker = NodeMarker::SessionId { prefix: "x-".into() };
/// assert_eq!(marker.render(SessionId(72_057_600_000_000_001)), "x-72057600000000001-");
/// let protected = NodeMarker::Protected.render(SessionId(1));
/// assert!(protected.starts_with("_c_") && protected.ends_with('-'));
/// let name = format!("{protected}lock-0000000001");
/// let id = uuid::Uuid::parse_str(path::protected_id(&name).unwrap()).unwrap();
/// assert_eq!(id.get_version_num(), 4);
/// assert_eq!(NodeMarker::UuidHex.render(SessionId(1)).len(), 32);
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum NodeMarker {
    /// Curator's `_c_<uuid>-` (`ProtectedUtils`): a lowercase hyphenated v4 UUID, fresh for each
    /// session the create runs on.
    Protected,
    /// kazoo's `<uuid hex>`: a v4 UUID as 32 lowercase hex digits, fresh for each session.
    UuidHex,
    /// ZooKeeper's lock recipe: `<prefix><session id>-`, the session id as a signed decimal (Java's
    /// `long`). A session's creates with it under one parent go one at a time (see
    /// [`ProtectedCreate::marker`](crate::ProtectedCreate::marker)).
    SessionId {
        /// The text before the session id (`x-` in the recipe).
        prefix: String,
    },
}

impl NodeMarker {
    /// The marker for a create on the session `session_id`.
    pub fn render(&self, session_id: zookeeper_client::SessionId) -> String {
        match self {
            NodeMarker::Protected => fresh_protected_prefix(&mut [0; path::PROTECTED_PREFIX_LEN]).to_owned(),
            NodeMarker::UuidHex => {
                let mut buffer = uuid::Uuid::encode_buffer();
                uuid::Uuid::new_v4().simple().encode_lower(&mut buffer).to_owned()
            }
            NodeMarker::SessionId { prefix } => format!("{prefix}{}-", session_id.0),
        }
    }

    /// As [`render`](Self::render), shared by a protected create's tries: Curator's marker is
    /// written on the stack and copied once, into the shared string (one allocation per create).
    pub(crate) fn render_shared(&self, session_id: zookeeper_client::SessionId) -> Arc<str> {
        match self {
            NodeMarker::Protected => Arc::from(fresh_protected_prefix(&mut [0; path::PROTECTED_PREFIX_LEN])),
            other => Arc::from(other.render(session_id)),
        }
    }
}

/// Writes a fresh `_c_<uuid>-` into `buffer`, and returns it.
fn fresh_protected_prefix(buffer: &mut [u8; path::PROTECTED_PREFIX_LEN]) -> &str {
    let (marker, rest) = buffer.split_at_mut(path::PROTECTED_MARKER.len());
    let (id, separator) = rest.split_at_mut(uuid::fmt::Hyphenated::LENGTH);
    marker.copy_from_slice(path::PROTECTED_MARKER.as_bytes());
    uuid::Uuid::new_v4().hyphenated().encode_lower(id);
    separator.copy_from_slice(b"-");
    std::str::from_utf8(buffer).expect("the marker, a UUID and a hyphen are ASCII")
}
