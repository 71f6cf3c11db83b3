//! Persistent nodes and group membership under chaos: each session of a `zkr-chaos members`
//! process keeps three nodes through the run's faults, and changes their data every few hundred
//! milliseconds:
//!
//! ```text
//! <root>/eph/<holder>                       PersistentNode, Ephemeral
//! <root>/seq/_c_<uuid>-<holder>-<seq>       PersistentNode, EphemeralSequential, protected
//! <root>/group/<holder>                     GroupMember (id <holder>)
//! ```
//!
//! Curator's side (`crates/chaos/java/CuratorMixChaos.java contend-members`, holders `M...`) keeps
//! the same three nodes with Curator's `PersistentNode` and `GroupMember` and writes the same log
//! lines (see [`is_holders`] for the names Curator gives a re-created sequential node).
//!
//! data `<holder> <n>`. Its log (`members-<tag>.log`): `D members <holder> <micros> <n>` before
//! data `n` is handed to the recipes, `F members <holder> <micros> <n>` once frozen (`freeze` on
//! stdin: no more changes; `n` is the data the nodes must end with).
//!
//! The checker ([`check_members`]), once the faults have stopped, the proxies healed, every member
//! node was deleted by the run (as a lost session's would be) and the members froze: within
//! [`CONVERGE`](crate::members::converge_bound), each live holder's three nodes are there exactly
//! once, with its frozen data, and nothing is left of a killed process's holders. The negative
//! control (`--no-recreate`) makes the same nodes with plain creates, never made again.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{Deadline, Framework, ParentMode};
use zk_recipes_nodes::{GroupMember, PersistentNode};

use crate::events::{epoch_micros, EventLog};
use crate::setup::ProcessSetup;

/// The deadline of one step (a set, a create).
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// Between two data changes of one member.
const CHANGE_EVERY: Duration = Duration::from_millis(300);

/// The dirs of the three kinds of member node under the run's root.
pub const DIRS: [&str; 3] = ["eph", "seq", "group"];

/// How long the members' nodes may take to converge after the run deleted them and the members
/// froze: a session that expired meanwhile must be noticed (the session timeout), a new one made,
/// and three nodes created on it.
pub fn converge_bound(session_timeout: Duration) -> Duration {
    session_timeout * 3 + Duration::from_secs(10)
}

/// What a members contender process runs.
#[derive(Debug, Clone, clap::Args)]
pub struct MembersConfig {
    /// Where it connects, its name, its event log, its sessions' timeout.
    #[command(flatten)]
    pub setup: ProcessSetup,
    #[arg(long, default_value_t = 2)]
    pub clients: usize,
    #[arg(long)]
    pub root: String,
    /// The negative control: plain creates, never made again.
    #[arg(long)]
    pub no_recreate: bool,
}

/// The data of `holder`'s nodes at change `n`.
pub fn member_data(holder: &str, n: u64) -> Vec<u8> {
    format!("{holder} {n}").into_bytes()
}

/// Whether the node `name` in dir `dir` is `holder`'s.
///
/// A protected sequential node is `_c_<uuid, 36 characters>-<holder>-<10-digit sequence>`. Curator
/// 5.4's `PersistentNode` makes its lost protected sequential node again as a protected *ephemeral*
/// one named after the old one's sequence (`_c_<new uuid>-<holder>-<old sequence>`): the same shape.
pub fn is_holders(dir: &str, name: &str, holder: &str) -> bool {
    match dir {
        "seq" => name
            .strip_prefix("_c_")
            .and_then(|rest| rest.get(36..))
            .and_then(|rest| rest.strip_prefix('-'))
            .and_then(|rest| rest.rsplit_once('-'))
            .is_some_and(|(owner, seq)| {
                owner == holder && seq.len() == 10 && seq.bytes().all(|digit| digit.is_ascii_digit())
            }),
        _ => name == holder,
    }
}

/// Runs a members contender until `stop` (exit 0) or EOF on stdin (exit 3).
pub async fn run(config: MembersConfig) -> std::io::Result<i32> {
    let log = config.setup.open_log()?;
    let crate::commands::Commands { freeze, stop, .. } = crate::commands::listen();
    let mut loops = Vec::new();
    for client in 0..config.clients {
        let framework = config.setup.framework()?;
        let holder = config.setup.holder(client);
        loops.push(tokio::spawn(member(
            framework,
            holder,
            config.clone(),
            log.clone(),
            freeze.clone(),
            stop.clone(),
        )));
    }
    println!("READY");
    for handle in loops {
        let _ = handle.await;
    }
    println!("DONE");
    Ok(0)
}

/// One member's three nodes, plain (the control) or kept by the recipes.
enum Nodes {
    Kept { ephemeral: PersistentNode, sequential: PersistentNode, member: GroupMember },
    Plain { paths: Vec<String> },
}

impl Nodes {
    async fn start(framework: &Framework, holder: &str, config: &MembersConfig) -> Nodes {
        let data = member_data(holder, 0);
        let [eph, seq, group] = DIRS.map(|dir| format!("{}/{dir}", config.root));
        if config.no_recreate {
            let mut paths = Vec::new();
            for (path, mode) in [
                (format!("{eph}/{holder}"), CreateMode::Ephemeral),
                (
                    format!("{seq}/_c_00000000-0000-0000-0000-000000000000-{holder}-"),
                    CreateMode::EphemeralSequential,
                ),
                (format!("{group}/{holder}"), CreateMode::Ephemeral),
            ] {
                let created = framework
                    .create(&path)
                    .data(data.clone())
                    .mode(mode)
                    .creating_parents(ParentMode::Container)
                    .deadline(Deadline::after(STEP_TIMEOUT))
                    .await;
                if let Ok(created) = created {
                    paths.push(created.path);
                }
            }
            return Nodes::Plain { paths };
        }
        let ephemeral =
            PersistentNode::builder(framework, &format!("{eph}/{holder}")).data(data.clone()).start();
        let sequential = PersistentNode::builder(framework, &format!("{seq}/{holder}-"))
            .mode(CreateMode::EphemeralSequential)
            .protected()
            .data(data.clone())
            .start();
        let member = GroupMember::builder(framework, &group, holder).data(data).start();
        match (ephemeral, sequential, member) {
            (Ok(ephemeral), Ok(sequential), Ok(member)) => Nodes::Kept { ephemeral, sequential, member },
            _ => Nodes::Plain { paths: Vec::new() },
        }
    }

    async fn set_data(&self, framework: &Framework, data: Vec<u8>) -> Vec<String> {
        let mut errors = Vec::new();
        match self {
            Nodes::Kept { ephemeral, sequential, member } => {
                for result in [
                    tokio::time::timeout(STEP_TIMEOUT, ephemeral.set_data(data.clone())).await,
                    tokio::time::timeout(STEP_TIMEOUT, sequential.set_data(data.clone())).await,
                    tokio::time::timeout(STEP_TIMEOUT, member.set_data(data)).await,
                ] {
                    match result {
                        Ok(Ok(())) => {}
                        Ok(Err(err)) => errors.push(err.to_string()),
                        Err(_) => errors.push("timed out".to_owned()),
                    }
                }
            }
            Nodes::Plain { paths } => {
                for path in paths {
                    if let Err(err) =
                        framework.set_data(path, &data, None, Deadline::after(STEP_TIMEOUT)).await
                    {
                        errors.push(err.to_string());
                    }
                }
            }
        }
        errors
    }

    async fn close(self) {
        if let Nodes::Kept { ephemeral, sequential, member } = self {
            let _ = tokio::time::timeout(STEP_TIMEOUT, ephemeral.close()).await;
            let _ = tokio::time::timeout(STEP_TIMEOUT, sequential.close()).await;
            let _ = tokio::time::timeout(STEP_TIMEOUT, member.close()).await;
        }
    }
}

async fn member(
    framework: Framework,
    holder: String,
    config: MembersConfig,
    log: Arc<EventLog>,
    mut freeze: watch::Receiver<bool>,
    mut stop: watch::Receiver<bool>,
) {
    let nodes = Nodes::start(&framework, &holder, &config).await;
    let mut n = 0_u64;
    loop {
        tokio::select! {
            () = tokio::time::sleep(CHANGE_EVERY) => {}
            () = until(&mut freeze) => break,
            () = until(&mut stop) => break,
        }
        n += 1;
        log.line(&format!("D members {holder} {} {n}", epoch_micros()));
        for error in nodes.set_data(&framework, member_data(&holder, n)).await {
            log.line(&format!("E members {holder} {} set {n}: {error}", epoch_micros()));
        }
    }
    log.line(&format!("F members {holder} {} {n}", epoch_micros()));
    until(&mut stop).await;
    nodes.close().await;
    framework.close().await;
}

/// The frozen data of each holder in `lines` (`F` lines).
pub fn frozen(lines: &str) -> BTreeMap<String, u64> {
    lines
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            match fields.as_slice() {
                ["F", "members", holder, _, n] => Some(((*holder).to_owned(), n.parse().ok()?)),
                _ => None,
            }
        })
        .collect()
}

/// One member node as read from the server.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeenNode {
    /// `eph`, `seq` or `group`.
    pub dir: String,
    pub name: String,
    pub data: Vec<u8>,
}

/// What is wrong with the member nodes `seen`, given the live holders' frozen data: every live
/// holder's node in each dir exactly once with its frozen data, no node of anyone else.
pub fn check_members(live: &BTreeMap<String, u64>, seen: &[SeenNode]) -> Vec<String> {
    let mut violations = Vec::new();
    for (holder, n) in live {
        for dir in DIRS {
            let mine: Vec<&SeenNode> =
                seen.iter().filter(|node| node.dir == dir && is_holders(dir, &node.name, holder)).collect();
            match mine.as_slice() {
                [] => violations.push(format!("missing: {holder}'s {dir} node")),
                [node] if node.data != member_data(holder, *n) => violations.push(format!(
                    "stale data: {dir}/{} holds {:?}, not \"{holder} {n}\"",
                    node.name,
                    String::from_utf8_lossy(&node.data)
                )),
                [_] => {}
                more => violations.push(format!("duplicate: {holder} has {} {dir} nodes", more.len())),
            }
        }
    }
    for node in seen {
        if !live.keys().any(|holder| is_holders(&node.dir, &node.name, holder)) {
            violations.push(format!("left behind: {}/{} (no live member owns it)", node.dir, node.name));
        }
    }
    violations
}

/// Resolves once `flag` is true (or its sender is gone).
async fn until(flag: &mut watch::Receiver<bool>) {
    let _ = flag.wait_for(|set| *set).await;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(dir: &str, name: &str, data: &str) -> SeenNode {
        SeenNode { dir: dir.to_owned(), name: name.to_owned(), data: data.as_bytes().to_vec() }
    }

    fn converged(holder: &str, n: u64) -> Vec<SeenNode> {
        let data = format!("{holder} {n}");
        vec![
            node("eph", holder, &data),
            node("seq", &format!("_c_0f3e0b4c-9a51-4d0e-8f0e-1234567890ab-{holder}-0000000042"), &data),
            node("group", holder, &data),
        ]
    }

    #[test]
    fn converged_nodes_are_clean() {
        let live = BTreeMap::from([("m0x1-0".to_owned(), 7), ("m0x1-1".to_owned(), 3)]);
        let mut seen = converged("m0x1-0", 7);
        seen.extend(converged("m0x1-1", 3));
        assert_eq!(check_members(&live, &seen), Vec::<String>::new());
    }

    #[test]
    fn missing_stale_duplicate_and_left_nodes_are_caught() {
        let live = BTreeMap::from([("m0x1-0".to_owned(), 7)]);
        let mut seen = converged("m0x1-0", 6);
        seen.remove(0);
        seen.push(converged("m0x1-0", 6)[1].clone());
        seen.extend(converged("m0x1-10", 2));
        let violations = check_members(&live, &seen);
        assert!(violations.iter().any(|text| text.starts_with("missing: m0x1-0's eph")), "{violations:?}");
        assert!(
            violations.iter().any(|text| text.starts_with("duplicate: m0x1-0 has 2 seq")),
            "{violations:?}"
        );
        assert!(violations.iter().any(|text| text.starts_with("stale data: group/m0x1-0")), "{violations:?}");
        assert_eq!(
            violations.iter().filter(|text| text.starts_with("left behind")).count(),
            3,
            "{violations:?}"
        );
    }

    #[test]
    fn curator_sequential_names_are_their_holders() {
        let uuid = "0f3e0b4c-9a51-4d0e-8f0e-1234567890ab";
        // Made sequential, or made again as an ephemeral named after the old sequence.
        assert!(is_holders("seq", &format!("_c_{uuid}-M0x1-0-0000000042"), "M0x1-0"));
        // Without a 10-digit sequence, or someone else's: not the holder's.
        assert!(!is_holders("seq", &format!("_c_{uuid}-M0x1-0-"), "M0x1-0"));
        assert!(!is_holders("seq", &format!("_c_{uuid}-M0x1-0-0000000042"), "M0x1-1"));
        assert!(!is_holders("seq", &format!("_c_{uuid}-m0x1-0-00000000x2"), "m0x1-0"));
        let live = BTreeMap::from([("M0x1-0".to_owned(), 4)]);
        let mut seen = vec![
            node("eph", "M0x1-0", "M0x1-0 4"),
            node("seq", &format!("_c_{uuid}-M0x1-0-0000000042"), "M0x1-0 4"),
            node("group", "M0x1-0", "M0x1-0 4"),
        ];
        assert_eq!(check_members(&live, &seen), Vec::<String>::new());
        seen.push(node("seq", &format!("_c_{uuid}-M0x1-0-0000000007"), "M0x1-0 4"));
        assert_eq!(check_members(&live, &seen), vec!["duplicate: M0x1-0 has 2 seq nodes".to_owned()]);
    }

    #[test]
    fn frozen_data_is_read_from_the_log() {
        let log = "D members m0x1-0 1 1\nF members m0x1-0 2 1\nF members m0x1-1 3 0\nE members m0x1-1 4 x";
        assert_eq!(frozen(log), BTreeMap::from([("m0x1-0".to_owned(), 1), ("m0x1-1".to_owned(), 0)]));
    }
}
