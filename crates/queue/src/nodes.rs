//! The znode writes under a queue: its PERSISTENT directories, and item nodes created in one
//! create or in multis (and how a put is split into multis). Nothing here knows a queue's type.

use zk_recipes_framework::zookeeper_client::{self, CreateMode, MultiWriteResult};
use zk_recipes_framework::{path, Deadline, Error as FrameworkError, Framework, Session};

/// How many nodes one multi of [`DistributedQueue::put_batch`] creates at most.
///
/// [`DistributedQueue::put_batch`]: crate::DistributedQueue::put_batch
const MAX_NODES_PER_MULTI: usize = 1000;

/// Creates `node` as PERSISTENT with `data` (parents as containers); an existing node is fine.
pub(crate) async fn create_persistent(
    framework: &Framework,
    session: &Session,
    node: &str,
    data: &[u8],
) -> Result<(), FrameworkError> {
    let options = session.create_options_for(node, CreateMode::Persistent);
    match session.client().create(node, data, &options).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => return Ok(()),
        Err(zookeeper_client::Error::NoNode) => {}
        Err(err) => return Err(err.into()),
    }
    if let Some(parent) = path::parent(node) {
        framework.ensure_path(parent, Deadline::never()).await?;
    }
    match session.client().create(node, data, &options).await {
        Ok(_) | Err(zookeeper_client::Error::NodeExists) => Ok(()),
        Err(err) => Err(err.into()),
    }
}

/// Splits nodes into multis of at most `max_bytes` of data and [`MAX_NODES_PER_MULTI`] nodes.
pub(super) fn chunks(nodes: &[(String, Vec<u8>)], max_bytes: usize) -> Vec<&[(String, Vec<u8>)]> {
    let mut chunks = Vec::new();
    let (mut start, mut bytes) = (0, 0);
    for (index, (name, data)) in nodes.iter().enumerate() {
        let size = data.len() + name.len() + 64;
        if index > start && (bytes + size > max_bytes || index - start >= MAX_NODES_PER_MULTI) {
            chunks.push(&nodes[start..index]);
            (start, bytes) = (index, 0);
        }
        bytes += size;
    }
    if start < nodes.len() {
        chunks.push(&nodes[start..]);
    }
    chunks
}

/// Creates the nodes `<dir>/<name><seq>` (PERSISTENT_SEQUENTIAL): one create, or one multi.
pub(super) async fn create_nodes(
    session: &Session,
    dir: &str,
    nodes: &[(String, Vec<u8>)],
) -> Result<Vec<String>, FrameworkError> {
    if let [(name, data)] = nodes {
        let node = path::join(dir, name);
        let options = session.create_options_for(&node, CreateMode::PersistentSequential);
        let (_, sequence) = session.client().create(&node, data, &options).await?;
        return Ok(vec![format!("{name}{sequence}")]);
    }
    let mut multi = session.client().new_multi_writer();
    for (name, data) in nodes {
        let node = path::join(dir, name);
        multi.add_create(
            &node,
            data,
            &session.create_options_for(&node, CreateMode::PersistentSequential),
        )?;
    }
    let results = multi.commit().await.map_err(zookeeper_client::Error::from)?;
    Ok(results
        .into_iter()
        .filter_map(|result| match result {
            MultiWriteResult::Create { path: created, .. } => Some(path::name(&created).to_owned()),
            _ => None,
        })
        .collect())
}
