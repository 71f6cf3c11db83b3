//! Where each part of the mix works under a check root, and how the run reads what the contenders
//! and the servers hold: the contenders' logs, the nodes under a path, the servers' watches. A
//! leaf of the run's files.

use std::path::Path;

use zk_recipes_framework::{Deadline, Framework};
use zk_recipes_testing::TestingCluster;

use super::STEP;
use crate::events::Event;

/// Where the cached subtree goes under a check root.
pub(super) fn cache_root(check_root: &str) -> String {
    format!("{check_root}/cache")
}

/// Where the barrier rounds go under a check root.
pub(super) fn barrier_root(check_root: &str) -> String {
    format!("{check_root}/barrier")
}

/// Where the partition workers share their items under a check root.
pub(super) fn partition_root(check_root: &str) -> String {
    format!("{check_root}/partition")
}

/// Where the member nodes go under a check root.
pub(super) fn members_root(check_root: &str) -> String {
    format!("{check_root}/members")
}

/// The text of every log in `dir` whose name starts with `prefix`, concatenated.
pub(super) fn read_logs(dir: &Path, prefix: &str) -> String {
    let mut text = String::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return text };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(prefix) {
            text.push_str(&std::fs::read_to_string(entry.path()).unwrap_or_default());
            text.push('\n');
        }
    }
    text
}

/// Every event of every contender's event log in `dir`.
pub(super) fn read_events(dir: &Path) -> Vec<Event> {
    let mut events = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return events };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if !name.to_string_lossy().starts_with("events-") {
            continue;
        }
        if let Ok(text) = std::fs::read_to_string(entry.path()) {
            events.extend(text.lines().filter_map(Event::parse));
        }
    }
    events
}

/// Watches registered on every member (`wchc`), summed.
pub(super) async fn watch_total(cluster: &TestingCluster) -> u64 {
    let mut total = 0;
    for member in cluster.members() {
        total += member.watch_count().await.unwrap_or(0) as u64;
    }
    total
}

/// The children of `path` (none if it cannot be read).
pub(super) async fn children(framework: &Framework, path: &str) -> Vec<String> {
    framework.children(path, Deadline::after(STEP)).await.map(|(children, _)| children).unwrap_or_default()
}

/// Every node under `root`, depth first.
pub(super) async fn descendants(framework: &Framework, root: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut stack = vec![root.to_owned()];
    while let Some(dir) = stack.pop() {
        for child in children(framework, &dir).await {
            let child = format!("{dir}/{child}");
            found.push(child.clone());
            stack.push(child);
        }
    }
    found
}
