//! Reading recipes from their nodes. Nothing here creates or changes a node (but `revoke`).

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use futures::stream::{self, StreamExt};
use serde::Serialize;
use zk_recipes_framework::zookeeper_client::Stat;
use zk_recipes_framework::{path, Deadline, Framework, Result as FrameworkResult};
use zk_recipes_leader::LATCH_NAME;
use zk_recipes_lock_internals::{LockDriver, StandardDriver};
use zk_recipes_queue::names::{self, ITEM_PREFIX, SIMPLE_PREFIX};
use zk_recipes_rwlock::{ReadDriver, WriteDriver, READ_LOCK_NAME, WRITE_LOCK_NAME};
use zk_recipes_semaphore::{
    Result as SemaphoreResult, Semaphore, LEASES_DIR, LEASE_NAME, LOCKS_DIR, LOCK_NAME,
};

/// Reads in flight at once.
pub(crate) const READS_IN_FLIGHT: usize = 64;
/// How long one read may take, retries included.
const READ_TIMEOUT: Duration = Duration::from_secs(15);
/// How many of a delay queue's next due times are shown.
const NEXT_DUE_SHOWN: usize = 5;
/// How deep `tree` looks, and how many nodes it visits at most.
const TREE_DEPTH: usize = 12;
const TREE_NODES: usize = 20_000;

pub(crate) fn deadline() -> Deadline {
    Deadline::after(READ_TIMEOUT)
}

/// One child as read: name, stat, data.
#[derive(Clone)]
pub(crate) struct Child {
    pub(crate) name: String,
    pub(crate) stat: Stat,
    pub(crate) data: Vec<u8>,
}

/// `dir`'s children (empty if `dir` does not exist), each read; children gone between the
/// listing and the read are left out.
pub(crate) async fn read_children(framework: &Framework, dir: &str) -> FrameworkResult<Vec<Child>> {
    let names = list(framework, dir).await?;
    let reads = stream::iter(names.into_iter().map(|name| async move {
        let node_path = path::join(dir, &name);
        match framework.get_data(&node_path, deadline()).await {
            Ok(read) => Ok(Some(Child { name, stat: read.stat, data: read.data })),
            Err(err) if err.is_no_node() => Ok(None),
            Err(err) => Err(err),
        }
    }))
    .buffered(READS_IN_FLIGHT)
    .collect::<Vec<_>>()
    .await;
    Ok(reads.into_iter().collect::<FrameworkResult<Vec<_>>>()?.into_iter().flatten().collect())
}

/// `dir`'s child names; empty if it does not exist.
pub(crate) async fn list(framework: &Framework, dir: &str) -> FrameworkResult<Vec<String>> {
    match framework.children(dir, deadline()).await {
        Ok((names, _)) => Ok(names),
        Err(err) if err.is_no_node() => Ok(Vec::new()),
        Err(err) => Err(err),
    }
}

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |since| since.as_millis() as i64)
}

/// Data as text when it is printable UTF-8, else hex.
fn decode(data: &[u8]) -> String {
    match std::str::from_utf8(data) {
        Ok(text) if !text.chars().any(char::is_control) => text.to_owned(),
        _ => {
            let hex: String = data.iter().take(32).map(|byte| format!("{byte:02x}")).collect();
            let more = if data.len() > 32 { "…" } else { "" };
            format!("0x{hex}{more}")
        }
    }
}

fn session_text(owner: i64) -> String {
    if owner == 0 {
        "-".to_owned()
    } else {
        format!("0x{owner:x}")
    }
}

/// A lock contender, a participant, a lease: one node, described.
#[derive(Debug, Clone, Serialize)]
pub struct NodeRow {
    /// The node's name.
    pub node: String,
    /// lock, read, write, latch, lease.
    pub kind: String,
    /// held, waiting, leader, following.
    pub state: String,
    /// The node a waiter watches (or a follower follows): it goes first.
    pub watching: Option<String>,
    /// The owning session, `0x…`.
    pub session: String,
    /// Milliseconds since the node was created (server's clock against ours).
    pub age_ms: i64,
    /// The node's `czxid`: the holder's fencing token.
    pub fencing_token: i64,
    /// The node's data: text, or `0x…` hex.
    pub data: String,
}

impl NodeRow {
    fn new(child: &Child, kind: &str, (state, watching): (String, Option<String>)) -> Self {
        Self {
            node: child.name.clone(),
            kind: kind.to_owned(),
            state,
            watching,
            session: session_text(child.stat.ephemeral_owner),
            age_ms: now_ms() - child.stat.ctime,
            fencing_token: child.stat.czxid,
            data: decode(&child.data),
        }
    }
}

/// `zkr locks`.
#[derive(Debug, Serialize)]
pub struct LockView {
    /// The lock's path.
    pub path: String,
    /// mutex, read-write lock, or none (no contender).
    pub kind: String,
    /// Holders first, then waiters, in order.
    pub nodes: Vec<NodeRow>,
}

/// The contenders at `dir` under Curator's rules: the mutex's (and the selector's) standard rule,
/// or the read-write lock's two.
pub async fn lock(framework: &Framework, dir: &str) -> FrameworkResult<LockView> {
    let children = read_children(framework, dir).await?;
    let (kind, nodes) = contenders(&children);
    Ok(LockView { path: dir.to_owned(), kind: kind.to_owned(), nodes })
}

fn contenders(children: &[Child]) -> (&'static str, Vec<NodeRow>) {
    let read_write = children
        .iter()
        .any(|child| child.name.contains(READ_LOCK_NAME) || child.name.contains(WRITE_LOCK_NAME));
    if read_write {
        let write = WriteDriver::default();
        let contenders =
            sorted(children, &write, |name| name.contains(READ_LOCK_NAME) || name.contains(WRITE_LOCK_NAME));
        let names: Vec<String> = contenders.iter().map(|child| child.name.clone()).collect();
        let rows = contenders
            .iter()
            .map(|child| {
                let (kind, decision) = if child.name.contains(WRITE_LOCK_NAME) {
                    ("write", write.gets_the_lock(&names, &child.name, 1))
                } else {
                    ("read", ReadDriver.gets_the_lock(&names, &child.name, 1))
                };
                NodeRow::new(child, kind, state_of(decision.ok()))
            })
            .collect();
        return ("read-write lock", rows);
    }
    let driver = StandardDriver::new(LOCK_NAME);
    let contenders = sorted(children, &driver, |name| name.contains(LOCK_NAME));
    if contenders.is_empty() {
        return ("none", Vec::new());
    }
    let names: Vec<String> = contenders.iter().map(|child| child.name.clone()).collect();
    let rows = contenders
        .iter()
        .map(|child| NodeRow::new(child, "lock", state_of(driver.gets_the_lock(&names, &child.name, 1).ok())))
        .collect();
    ("mutex", rows)
}

/// The children `keep` accepts, sorted as `driver` sorts them.
fn sorted<'a>(children: &'a [Child], driver: &dyn LockDriver, keep: impl Fn(&str) -> bool) -> Vec<&'a Child> {
    let names: Vec<String> =
        children.iter().filter(|child| keep(&child.name)).map(|child| child.name.clone()).collect();
    let order = driver.sort_children(names);
    order.iter().filter_map(|name| children.iter().find(|child| &child.name == name)).collect()
}

fn state_of(decision: Option<zk_recipes_lock_internals::Decision>) -> (String, Option<String>) {
    match decision {
        Some(decision) if decision.holds => ("held".to_owned(), None),
        Some(decision) => ("waiting".to_owned(), decision.path_to_watch),
        None => ("unknown".to_owned(), None),
    }
}

/// `zkr leader`.
#[derive(Debug, Serialize)]
pub struct LeaderView {
    /// The election's path.
    pub path: String,
    /// latch (LeaderLatch), selector (LeaderSelector), or none.
    pub layout: String,
    /// The leader's id, if any.
    pub leader: Option<String>,
    /// Participants in election order (the first leads); `data` is the participant id.
    pub participants: Vec<NodeRow>,
}

/// The election at `dir`: a LeaderLatch's `latch-` nodes, or a LeaderSelector's mutex nodes.
pub async fn leader(framework: &Framework, dir: &str) -> FrameworkResult<LeaderView> {
    let children = read_children(framework, dir).await?;
    let latch = children.iter().any(|child| child.name.contains(LATCH_NAME));
    let (layout, name) = if latch { ("latch", LATCH_NAME) } else { ("selector", LOCK_NAME) };
    let participants = sorted(&children, &StandardDriver::new(name), |node| node.contains(name));
    if participants.is_empty() {
        return Ok(LeaderView {
            path: dir.to_owned(),
            layout: "none".to_owned(),
            leader: None,
            participants: Vec::new(),
        });
    }
    let rows: Vec<NodeRow> = participants
        .iter()
        .enumerate()
        .map(|(index, child)| {
            let state = match index {
                0 => ("leader".to_owned(), None),
                _ => ("following".to_owned(), Some(participants[index - 1].name.clone())),
            };
            NodeRow::new(child, "participant", state)
        })
        .collect();
    Ok(LeaderView {
        path: dir.to_owned(),
        layout: layout.to_owned(),
        leader: rows.first().map(|row| row.data.clone()),
        participants: rows,
    })
}

/// `zkr semaphore`.
#[derive(Debug, Serialize)]
pub struct SemaphoreView {
    /// The semaphore's path.
    pub path: String,
    /// The maximum leases, if given.
    pub max_leases: Option<u32>,
    /// Leases held (known with the maximum).
    pub held: Option<usize>,
    /// Leases waiting (known with the maximum).
    pub waiting: Option<usize>,
    /// The lease nodes holding a lease, in line order (known with the maximum).
    pub holders: Option<Vec<NodeRow>>,
    /// The lease nodes waiting for one, in line order (known with the maximum).
    pub waiters: Option<Vec<NodeRow>>,
    /// Every lease node in line order.
    pub leases: Vec<NodeRow>,
    /// The internal lock's holder: an acquirer between taking the lock and holding its lease.
    pub internal_lock_holder: Option<NodeRow>,
}

/// The semaphore at `dir` (Curator's V2 layout: `locks/` and `leases/`). With `max`, holders and
/// waiters are told apart as the recipe does ([`Semaphore::participants`]: the first `max` lease
/// nodes in line order hold, the rest wait).
pub async fn semaphore(framework: &Framework, dir: &str, max: Option<u32>) -> SemaphoreResult<SemaphoreView> {
    // Split first, then read the nodes: a lease node created in between shows as "new".
    let participants = match max {
        Some(max) => Some(Semaphore::new(framework, dir, max)?.participants().await?),
        None => None,
    };
    let (leases, holder) = semaphore_nodes(framework, dir).await?;
    let mut holders = Vec::new();
    let mut waiters = Vec::new();
    let rows: Vec<NodeRow> = leases
        .iter()
        .map(|child| {
            let node_path = path::join(&path::join(dir, LEASES_DIR), &child.name);
            let holds_internal_lock = holder
                .as_ref()
                .is_some_and(|holder| holder.session == session_text(child.stat.ephemeral_owner));
            let state = match &participants {
                Some(split) if split.holders.contains(&node_path) => "held",
                Some(split) if split.waiting.contains(&node_path) && holds_internal_lock => {
                    "waiting (holds the internal lock)"
                }
                Some(split) if split.waiting.contains(&node_path) => "waiting",
                Some(_) => "new",
                None => "held or waiting (give --max)",
            };
            let row = NodeRow::new(child, "lease", (state.to_owned(), None));
            if state == "held" {
                holders.push(row.clone());
            } else if state.starts_with("waiting") {
                waiters.push(row.clone());
            }
            row
        })
        .collect();
    Ok(SemaphoreView {
        path: dir.to_owned(),
        max_leases: max,
        held: participants.as_ref().map(|split| split.holders.len()),
        waiting: participants.as_ref().map(|split| split.waiting.len()),
        holders: participants.as_ref().map(|_| holders),
        waiters: participants.as_ref().map(|_| waiters),
        leases: rows,
        internal_lock_holder: holder,
    })
}

/// The lease nodes of the semaphore at `dir` in line order, and its internal lock's holder.
async fn semaphore_nodes(framework: &Framework, dir: &str) -> FrameworkResult<(Vec<Child>, Option<NodeRow>)> {
    let leases = read_children(framework, &path::join(dir, LEASES_DIR)).await?;
    let locks = read_children(framework, &path::join(dir, LOCKS_DIR)).await?;
    let lease_driver = StandardDriver::new(LEASE_NAME);
    let leases: Vec<Child> =
        sorted(&leases, &lease_driver, |name| name.contains(LEASE_NAME)).into_iter().cloned().collect();
    let lock_driver = StandardDriver::new(LOCK_NAME);
    let holder = sorted(&locks, &lock_driver, |name| name.contains(LOCK_NAME))
        .first()
        .map(|child| NodeRow::new(child, "lock", ("held".to_owned(), None)));
    Ok((leases, holder))
}

/// One item being processed by a lock-safe consumer.
#[derive(Debug, Serialize)]
pub struct InFlight {
    /// The item's name.
    pub item: String,
    /// The consumer's session.
    pub session: String,
}

/// `zkr queue`.
#[derive(Debug, Serialize)]
pub struct QueueView {
    /// The queue's path.
    pub path: String,
    /// distributed, priority, delay, id, simple, or empty.
    pub layout: String,
    /// Items in the queue.
    pub depth: usize,
    /// Age of the oldest item, in milliseconds.
    pub oldest_age_ms: Option<i64>,
    /// Items a lock-safe consumer is processing (with `--lock-path`).
    pub in_flight: Vec<InFlight>,
    /// A priority queue's item count per priority.
    pub priorities: BTreeMap<i32, usize>,
    /// A delay queue's next due times, epoch milliseconds.
    pub next_due_ms: Vec<i64>,
}

/// The queue at `dir`: any of Curator's queues, or the simple queue.
pub async fn queue(framework: &Framework, dir: &str, lock_path: Option<&str>) -> FrameworkResult<QueueView> {
    let items: Vec<String> = list(framework, dir)
        .await?
        .into_iter()
        .filter(|name| name.starts_with(ITEM_PREFIX) || name.starts_with(SIMPLE_PREFIX))
        .collect();
    let layout = layout_of(&items);
    let stats = stream::iter(
        items.iter().map(|name| async move { framework.exists(&path::join(dir, name), deadline()).await }),
    )
    .buffered(READS_IN_FLIGHT)
    .collect::<Vec<_>>()
    .await;
    let mut oldest: Option<i64> = None;
    for stat in stats {
        if let Some(stat) = stat? {
            oldest = Some(oldest.map_or(stat.ctime, |oldest| oldest.min(stat.ctime)));
        }
    }
    let mut in_flight = Vec::new();
    if let Some(lock_path) = lock_path {
        for lock in read_children(framework, lock_path).await? {
            if items.contains(&lock.name) {
                in_flight
                    .push(InFlight { item: lock.name, session: session_text(lock.stat.ephemeral_owner) });
            }
        }
    }
    let mut priorities = BTreeMap::new();
    let mut next_due_ms = Vec::new();
    match layout {
        "priority" => {
            for priority in items.iter().filter_map(|name| names::parse_priority(name)) {
                *priorities.entry(priority).or_insert(0) += 1;
            }
        }
        "delay" => {
            let mut due: Vec<i64> = items.iter().map(|name| names::parse_due(name)).collect();
            due.sort_unstable();
            next_due_ms = due.into_iter().take(NEXT_DUE_SHOWN).collect();
        }
        _ => {}
    }
    Ok(QueueView {
        path: dir.to_owned(),
        layout: layout.to_owned(),
        depth: items.len(),
        oldest_age_ms: oldest.map(|ctime| now_ms() - ctime),
        in_flight,
        priorities,
        next_due_ms,
    })
}

/// Which queue these item names belong to.
fn layout_of(items: &[String]) -> &'static str {
    let Some(first) = items.first() else { return "empty" };
    if first.starts_with(SIMPLE_PREFIX) {
        return "simple";
    }
    let rest = &first[ITEM_PREFIX.len()..];
    if let Some(tagged) = rest.strip_prefix(names::SEPARATOR) {
        let tag = tagged.split(names::SEPARATOR).next().unwrap_or_default();
        let hex = !tag.is_empty() && tag.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_lowercase());
        return if hex { "delay" } else { "id" };
    }
    if rest.len() == 19 && names::parse_priority(first).is_some() {
        "priority"
    } else {
        "distributed"
    }
}

/// One recipe `tree` found.
#[derive(Debug, Serialize)]
pub struct TreeRow {
    /// Its path.
    pub path: String,
    /// mutex, read-write lock, leader latch, semaphore, queue, …
    pub recipe: String,
    /// One line: holders or leader, waiters, depth.
    pub summary: String,
}

/// `zkr tree`.
#[derive(Debug, Serialize)]
pub struct TreeView {
    /// Where it looked.
    pub path: String,
    /// Recipes found, in path order.
    pub recipes: Vec<TreeRow>,
}

/// Every recipe under `root`, told by its nodes' names.
pub async fn tree(framework: &Framework, root: &str) -> FrameworkResult<TreeView> {
    let mut recipes = Vec::new();
    let mut to_visit = vec![(root.to_owned(), 0)];
    let mut visited = 0;
    while let Some((dir, depth)) = to_visit.pop() {
        visited += 1;
        if visited > TREE_NODES {
            break;
        }
        let names = list(framework, &dir).await?;
        if let Some(row) = recipe_at(framework, &dir, &names).await? {
            recipes.push(row);
            continue;
        }
        if depth < TREE_DEPTH {
            to_visit.extend(names.iter().rev().map(|name| (path::join(&dir, name), depth + 1)));
        }
    }
    recipes.sort_by(|left, right| left.path.cmp(&right.path));
    Ok(TreeView { path: root.to_owned(), recipes })
}

/// What recipe `dir` is, from its children's names, with a summary; `None` if none.
async fn recipe_at(framework: &Framework, dir: &str, names: &[String]) -> FrameworkResult<Option<TreeRow>> {
    let has = |needle: &str| names.iter().any(|name| name.contains(needle));
    let row = |recipe: &str, summary: String| {
        Some(TreeRow { path: dir.to_owned(), recipe: recipe.to_owned(), summary })
    };
    // A semaphore by its `leases` dir alone: its `locks` dir is a container, reaped by the server
    // soon after the last acquire took its lease.
    if names.iter().any(|name| name == LEASES_DIR) {
        let (leases, _) = semaphore_nodes(framework, dir).await?;
        return Ok(row("semaphore", format!("{} leases", leases.len())));
    }
    if has(READ_LOCK_NAME)
        || has(WRITE_LOCK_NAME)
        || (has(LOCK_NAME) && names.iter().any(|name| name.starts_with("_c_")))
    {
        let view = lock(framework, dir).await?;
        let held: Vec<&NodeRow> = view.nodes.iter().filter(|node| node.state == "held").collect();
        let holders: Vec<String> =
            held.iter().map(|node| format!("{} ({})", node.data, node.session)).collect();
        let summary = format!(
            "held by {}; {} waiting",
            if holders.is_empty() { "nobody".to_owned() } else { holders.join(", ") },
            view.nodes.len() - held.len()
        );
        return Ok(row(&view.kind, summary));
    }
    if has(LATCH_NAME) {
        let view = leader(framework, dir).await?;
        let summary = format!(
            "leader {}; {} participants",
            view.leader.as_deref().unwrap_or("none"),
            view.participants.len()
        );
        return Ok(row("leader latch", summary));
    }
    if names.iter().any(|name| name.starts_with(ITEM_PREFIX) || name.starts_with(SIMPLE_PREFIX)) {
        let view = queue(framework, dir, None).await?;
        return Ok(row(&format!("{} queue", view.layout), format!("depth {}", view.depth)));
    }
    Ok(None)
}

/// Asks the holder of `node` (its full path) to release (Curator's `Revoker.attemptRevoke`);
/// `false` if there is no such node (released already, or a name `zkr locks` does not list).
pub async fn revoke(framework: &Framework, node: &str) -> Result<bool, zk_recipes_lock_internals::LockError> {
    if framework.exists(node, deadline()).await?.is_none() {
        return Ok(false);
    }
    zk_recipes_lock_internals::revoke(framework, node, deadline()).await?;
    Ok(true)
}
