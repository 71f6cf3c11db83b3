//! One try of a protected create: find a node of ours from an earlier try on this session, else
//! create one (with the parent ahead of it, or the listing behind it, when asked for).

use tracing::debug;
use zookeeper_client::{CheckWriteError, CreateMode, MultiWriteResult};

use super::batch::{self, Batcher};
use super::marker::NodeMarker;
use super::on_session::{ensure_containers, ensure_parents, KnownParents, ParentMode};
use super::owned::NewNode;
use super::protected_options::{Anchor, ProtectedCreate};
use super::session_marker::{children_after_sync, find_undecided, SequenceFloor};
use crate::path;
use crate::session::{Error, Result, Session};

/// One try: find a node of ours from an earlier try on this session, else create one.
pub(super) async fn create_or_find(
    session: &Session,
    request: &ProtectedCreate<'_>,
    prefix: &str,
    search_first: bool,
    floor: Option<SequenceFloor>,
    known_parents: &KnownParents,
) -> Result<NewNode> {
    let ProtectedCreate { parent, name, data, mode, anchor, parents, .. } = *request;
    // The paths off the common one are boxed (see the crate docs), so that only the calls that take them pay for
    // their state.
    if search_first {
        let finding = Box::pin(find_protected(session, parent, prefix, name, request.is_ephemeral(), floor));
        if let Some(found) = finding.await? {
            return Ok(found);
        }
    }
    let (node_path, name_start) = protected_node_path(parent, prefix, name);
    if let Some(anchor) = anchor {
        return Box::pin(create_while_exists(session, anchor, parent, &node_path, name, data, mode)).await;
    }
    // A parent this framework has not seen in place goes on the wire first, in the same pipeline:
    // a new lock path costs one create more, not a failed create, a failed listing, the parent's
    // create and both again.
    // Looked up once: a known parent is not written to the set again (each lookup locks it).
    let mut parent_known = parents.is_some() && known_parents.contains(parent);
    let parent_mode = parents.filter(|_| !parent_known && parent != "/");
    let (mut created, mut listed) = send_create(session, request, &node_path, parent_mode).await;
    if let (Err(zookeeper_client::Error::NoNode), Some(parents)) = (&created, parents) {
        // The parent is missing, so the listing is worthless. Most often its container was
        // reaped: its create goes ahead of ours and the listing again, in one pipeline. If it
        // was sent already, or fails again, an ancestor further up is missing too: the parents
        // are made one by one, then the create and the listing again.
        known_parents.forget(parent);
        parent_known = false;
        let parent_was_sent = parent_mode.is_some();
        let again = Box::pin(async {
            if !parent_was_sent && parent != "/" {
                let answers = send_create(session, request, &node_path, Some(parents)).await;
                if !matches!(answers.0, Err(zookeeper_client::Error::NoNode)) {
                    return Ok(answers);
                }
            }
            ensure_parents(session, parent, parents).await?;
            Ok::<_, Error>(send_create(session, request, &node_path, None).await)
        });
        (created, listed) = again.await?;
    }
    let (stat, sequence) = created?;
    if parents.is_some() && !parent_known {
        known_parents.insert(parent);
    }
    let (path, sequence) = if batch::is_sequential(mode) {
        let mut path = node_path;
        path::push_sequence(&mut path, sequence);
        (path, i32::try_from(sequence).ok())
    } else {
        (node_path, None)
    };
    let siblings = listed
        .and_then(|listed| listed.ok())
        .filter(|children| children.iter().any(|child| *child == path[name_start..]));
    Ok(NewNode { path, stat, sequence, siblings })
}

/// `<parent>/<prefix><name>` (as [`path::join`] makes it), with room for the sequence number the
/// server may append: one allocation for the node's path. Also where the node's name starts in it.
fn protected_node_path(parent: &str, prefix: &str, name: &str) -> (String, usize) {
    /// A sequence number's width (ZooKeeper's `%010d`; 19 digits past `i32::MAX`).
    const SEQUENCE_ROOM: usize = 19;
    let parent = parent.trim_end_matches('/');
    let mut node_path = String::with_capacity(parent.len() + 1 + prefix.len() + name.len() + SEQUENCE_ROOM);
    for part in [parent, "/", prefix, name] {
        node_path.push_str(part);
    }
    (node_path, parent.len() + 1)
}

/// What the server answered to a create (its stat and sequence), and to the listing sent behind it
/// (if asked for).
type CreateAnswers = (batch::CreateAnswer, batch::ListingAnswer);

/// Sends, back to back, the parent's create (when `parent_mode` is set), the create of
/// `node_path` and the listing of the parent (when the request asks for it), and waits for their
/// answers. The server runs them in order: the parent's create fails with NodeExists when the
/// parent is there, and its outcome shows in the node create's.
///
/// On a session with many creates at once, a create without a parent ahead of it and with the
/// framework's ACL waits for the session's next batch instead ([`batch`]).
async fn send_create(
    session: &Session,
    request: &ProtectedCreate<'_>,
    node_path: &str,
    parent_mode: Option<ParentMode>,
) -> CreateAnswers {
    let parent = request.parent;
    // Not the ZooKeeper recipe's marker: its creates go one at a time per session and parent (so
    // that a lost reply's node can be told from the session's others), never many in a batch.
    let batchable = parent_mode.is_none()
        && request.acl.is_none()
        && request.data.len() <= batch::MAX_QUEUED_DATA
        && !matches!(request.marker, NodeMarker::SessionId { .. });
    let _slot = match batchable {
        false => None,
        true => match session.upper::<Batcher>().create_turn(session, || batch::QueuedCreate {
            path: node_path.to_owned(),
            data: request.data.to_vec(),
            mode: request.mode,
            ttl: request.ttl,
            list: request.list_siblings.then(|| parent.to_owned()),
        }) {
            batch::Turn::Now(slot) => slot,
            batch::Turn::Queued(answer) => {
                return answer.await.unwrap_or((Err(zookeeper_client::Error::ConnectionLoss), None))
            }
        },
    };
    // Boxed (crate docs): only the first create under a parent sends it.
    let parent_create = parent_mode.map(|mode| {
        let options = session.create_options_for(parent, mode.create_mode());
        Box::pin(session.client().create(parent, &[], &options))
    });
    // Pinned in place and awaited by reference, so that the state keeps each future once.
    let mut create = std::pin::pin!({
        let options = request.options(session, node_path);
        session.client().create(node_path, request.data, &options)
    });
    let mut listing = std::pin::pin!(request.list_siblings.then(|| session.client().list_children(parent)));
    if let Some(parent_create) = parent_create {
        let _ = parent_create.await;
    }
    let created = create.as_mut().await.map(|(stat, sequence)| (stat, sequence.into_i64()));
    let listed = match listing.as_mut().as_pin_mut() {
        Some(listing) => Some(listing.await),
        None => None,
    };
    (created, listed)
}

/// One multi on `session`: check that the anchor exists, create `node_path`. Creates a missing
/// parent (as containers) and tries once more.
async fn create_while_exists(
    session: &Session,
    anchor: Anchor<'_>,
    parent: &str,
    node_path: &str,
    name: &str,
    data: &[u8],
    mode: CreateMode,
) -> Result<NewNode> {
    let options = session.create_options_for(node_path, mode);
    let mut parent_created = false;
    let (path, stat) = loop {
        let mut writer = session.client().new_check_writer(anchor.path, None)?;
        writer.add_create(node_path, data, &options)?;
        match writer.commit().await {
            Ok(mut results) => match results.pop() {
                Some(MultiWriteResult::Create { path, stat }) => break (path, stat),
                other => {
                    let message = format!("a checked create answered {other:?}");
                    return Err(zookeeper_client::Error::UnexpectedError(message).into());
                }
            },
            Err(CheckWriteError::CheckFailed { .. }) => {
                return Err(Error::NodeLost { path: anchor.path.to_owned() })
            }
            Err(CheckWriteError::OperationFailed { source: zookeeper_client::Error::NoNode, .. })
                if !parent_created =>
            {
                ensure_containers(session, parent).await?;
                parent_created = true;
            }
            Err(
                CheckWriteError::OperationFailed { source, .. } | CheckWriteError::RequestFailed { source },
            ) => return Err(source.into()),
        }
    };
    // Servers before 3.7.2 / 3.8.2 answer a multi's create without a stat (ZOOKEEPER-4026): read
    // it on the same session, which sees our create.
    let stat = if stat.is_invalid() {
        session.client().check_stat(&path).await?.ok_or(zookeeper_client::Error::NoNode)?
    } else {
        stat
    };
    let sequence = path::sequence_after(path::name(&path), name);
    Ok(NewNode { path, stat, sequence, siblings: None })
}

/// Our node from an earlier try of this session, if the server has it. With a session marker
/// (`floor` set) the prefix names every node of the session: only a node above the lane's floor
/// is this create's ([`super::session_marker`]).
async fn find_protected(
    session: &Session,
    parent: &str,
    prefix: &str,
    name: &str,
    ephemeral: bool,
    floor: Option<SequenceFloor>,
) -> Result<Option<NewNode>> {
    if let Some(floor) = floor {
        let Some(found) = find_undecided(session, &floor, parent, prefix, name).await? else {
            return Ok(None);
        };
        let (child, sequence) = (found.name, found.sequence);
        let child_path = path::join(parent, &child);
        return match session.client().check_stat(&child_path).await {
            Ok(Some(stat)) if session.owns(stat.ephemeral_owner) => {
                debug!(path = %child_path, "found our node above the lane's floor after a connection loss");
                Ok(Some(NewNode { path: child_path, stat, sequence: Some(sequence), siblings: None }))
            }
            Ok(_) => Ok(None),
            Err(err) => Err(err.into()),
        };
    }
    let Some((children, _)) = children_after_sync(session, parent).await? else {
        return Ok(None);
    };
    for child in children.iter().filter(|child| child.starts_with(prefix)) {
        let child_path = path::join(parent, child);
        match session.client().check_stat(&child_path).await {
            // An ephemeral node of ours belongs to this session; a persistent one is ours by its
            // prefix alone (a UUID of ours).
            Ok(Some(stat)) if !ephemeral || session.owns(stat.ephemeral_owner) => {
                debug!(path = %child_path, "found our protected node after a connection loss");
                let sequence = path::sequence_after(child, &format!("{prefix}{name}"));
                return Ok(Some(NewNode { path: child_path, stat, sequence, siblings: None }));
            }
            Ok(_) => {}
            Err(err) => return Err(err.into()),
        }
    }
    Ok(None)
}
