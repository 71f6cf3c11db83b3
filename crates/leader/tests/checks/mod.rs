//! Checks for any leader (latch or selector): the marker protocol, which catches two leaders at
//! once, and that nothing is left behind on the server.

use std::future::Future;

use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{Deadline, Framework};

use crate::common::{children, eventually, STEP};

/// Polls until no node is left under any of `dirs` and the server holds no watch.
pub async fn assert_clean<F, Fut>(admin: &Framework, dirs: &[&str], watch_count: F)
where
    F: Fn() -> Fut,
    Fut: Future<Output = usize>,
{
    for dir in dirs {
        eventually(&format!("no node left under {dir}"), || async { children(admin, dir).await.is_empty() })
            .await;
    }
    eventually("no watch left on the server", || async { watch_count().await == 0 }).await;
}

/// The marker protocol, for any leader: it creates the ephemeral `marker` (data: its `id`) on the
/// session that owns its leader `node`, so the marker dies with that session. Someone else's
/// marker already there means two leaders at once.
///
/// `Ok(true)`: marked (or our marker was already there, as after a create whose reply was lost).
/// `Ok(false)`: a violation, someone else's marker is there (or was there, and went while we
/// looked). `Err`: the check could not be made, which must fail the test: an error that outlived
/// a step of retries, or a leader whose node is missing or belongs to another session.
pub async fn try_mark(framework: &Framework, node: &str, marker: &str, id: &str) -> Result<bool, String> {
    enum Found {
        Marked,
        Others(Option<(Vec<u8>, i64)>),
        NodeMissing,
        NodeNotOurs { owner: i64, session: i64 },
    }
    let found = framework
        .retry(Deadline::after(STEP), |session| async move {
            match session.client().check_stat(node).await? {
                None => return Ok(Found::NodeMissing),
                Some(stat) if !session.owns(stat.ephemeral_owner) => {
                    return Ok(Found::NodeNotOurs { owner: stat.ephemeral_owner, session: session.id().0 })
                }
                Some(_) => {}
            }
            let options = session.create_options(CreateMode::Ephemeral);
            match session.client().create(marker, id.as_bytes(), &options).await {
                Ok(_) => Ok(Found::Marked),
                Err(zookeeper_client::Error::NodeExists) => match session.client().get_data(marker).await {
                    Ok((_, stat)) if session.owns(stat.ephemeral_owner) => Ok(Found::Marked),
                    Ok((data, stat)) => Ok(Found::Others(Some((data, stat.ephemeral_owner)))),
                    // Someone else's marker stood while we led, and went: still two leaders.
                    Err(zookeeper_client::Error::NoNode) => Ok(Found::Others(None)),
                    Err(err) => Err(err.into()),
                },
                Err(err) => Err(err.into()),
            }
        })
        .await
        .map_err(|err| format!("{id} could not mark {marker} (leader node {node}): {err}"))?;
    match found {
        Found::Marked => Ok(true),
        Found::Others(other) => {
            let other = match other {
                Some((data, owner)) => format!("{:?} (session {owner:#x})", String::from_utf8_lossy(&data)),
                None => "a marker gone by the time we read it".to_owned(),
            };
            eprintln!("two leaders at once: {id} leads while {marker} is {other}");
            Ok(false)
        }
        Found::NodeMissing => Err(format!("{id} was told it leads, but its node {node} does not exist")),
        Found::NodeNotOurs { owner, session } => Err(format!(
            "{id} was told it leads, but its node {node} belongs to session {owner:#x}, not ours ({session:#x})"
        )),
    }
}

/// Deletes `marker` if our session owns it; `Err` if that could not be done within a step of
/// retries (a marker left behind would read as a second leader later).
pub async fn try_unmark(framework: &Framework, marker: &str) -> Result<(), String> {
    framework
        .retry(Deadline::after(STEP), |session| async move {
            match session.client().check_stat(marker).await? {
                Some(stat) if session.owns(stat.ephemeral_owner) => {
                    match session.client().delete(marker, Some(stat.version)).await {
                        Ok(()) | Err(zookeeper_client::Error::NoNode) => Ok(()),
                        Err(err) => Err(err.into()),
                    }
                }
                _ => Ok(()),
            }
        })
        .await
        .map_err(|err| format!("could not delete our marker {marker}: {err}"))
}
