//! `zkr leader PATH --watch`: one line per change of the election's leader, as it happens, read
//! from the server by the leader crate's [`ElectionObserver`] (the process takes part in nothing
//! and creates no node). Runs until interrupted (Ctrl-C) or the connection is closed.

use serde::Serialize;
use zk_recipes_framework::Framework;
use zk_recipes_leader::{ElectionLayout, ElectionObserver, LeaderChange};

use crate::inspect;
use crate::output::print_out;

/// Which election's nodes to read (`--layout`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum LayoutArg {
    /// A LeaderLatch's `latch-` nodes.
    Latch,
    /// A LeaderSelector's mutex `lock-` nodes.
    Selector,
}

impl From<LayoutArg> for ElectionLayout {
    fn from(layout: LayoutArg) -> Self {
        match layout {
            LayoutArg::Latch => ElectionLayout::Latch,
            LayoutArg::Selector => ElectionLayout::Selector,
        }
    }
}

/// One `--json` line.
#[derive(Debug, Serialize, PartialEq)]
struct ChangeLine<'a> {
    /// The leader's participant id; `null` when nobody leads.
    leader: Option<&'a str>,
    /// The leader's node.
    node: Option<&'a str>,
}

/// The line printed for `change`.
fn line(change: &LeaderChange, json: bool) -> serde_json::Result<String> {
    if json {
        let line = ChangeLine { leader: change.participant_id(), node: change.node_path() };
        return serde_json::to_string(&line).map(|text| format!("{text}\n"));
    }
    Ok(format!("{change}\n"))
}

/// Follows the election at `path` and prints each change; returns the exit code (0 when the
/// connection was closed).
pub async fn watch(
    framework: &Framework,
    path: &str,
    layout: Option<LayoutArg>,
    json: bool,
) -> Result<u8, Box<dyn std::error::Error>> {
    // Ends on Ctrl-C (SIGINT), so that the caller closes the session at once
    // rather than leaving it to time out on the server.
    tokio::select! {
        followed = follow(framework, path, layout, json, |line| print_out(&line)) => followed?,
        _ = tokio::signal::ctrl_c() => {}
    }
    Ok(0)
}

/// Follows the election at `path`, handing each change's line to `out`, until the framework is
/// closed.
async fn follow(
    framework: &Framework,
    path: &str,
    layout: Option<LayoutArg>,
    json: bool,
    mut out: impl FnMut(String),
) -> Result<(), Box<dyn std::error::Error>> {
    let layout = match layout {
        Some(layout) => ElectionLayout::from(layout),
        // What is there now decides; an empty election is read as a latch's.
        None => match inspect::leader(framework, path).await?.layout.as_str() {
            "selector" => ElectionLayout::Selector,
            _ => ElectionLayout::Latch,
        },
    };
    let mut observer = ElectionObserver::new(framework, path, layout)?;
    while let Some(change) = observer.next().await {
        out(line(&change, json)?);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use zk_recipes_leader::{CloseMode, LeaderSelector};
    use zk_recipes_test_support::*;

    use super::*;

    /// The next line `follow` printed, within a step.
    async fn next_line(lines: &mut tokio::sync::mpsc::UnboundedReceiver<String>) -> String {
        within("the next line", lines.recv()).await.expect("following")
    }

    #[tokio::test]
    async fn watching_prints_the_leader_now_then_each_change_until_the_connection_closes() {
        init_tracing();
        let (server, framework) = server_and_framework().await;
        let latch_framework =
            builder(&server.connect_string(), std::time::Duration::from_secs(10)).start().expect("framework");
        let path = "/zkr-watch/leader";
        let latch = zk_recipes_leader::LeaderLatch::new(&latch_framework, path, "a").expect("latch");
        latch.start().expect("start");
        within("leads", latch.await_leadership()).await.expect("leads");
        let node = latch.our_node_path().expect("node");

        let (sender, mut lines) = tokio::sync::mpsc::unbounded_channel();
        let following = tokio::spawn({
            let framework = framework.clone();
            async move { follow(&framework, path, None, false, |line| drop(sender.send(line))).await.is_ok() }
        });
        assert_eq!(next_line(&mut lines).await, format!("leader \"a\" ({node})\n"));
        within("proclaim", latch.proclaim("a, proclaimed", step())).await.expect("proclaim");
        assert_eq!(next_line(&mut lines).await, format!("leader \"a, proclaimed\" ({node})\n"));
        within("close", latch.close(CloseMode::Silent)).await.expect("close");
        assert_eq!(next_line(&mut lines).await, "no leader\n");
        // A selector's election is found by its nodes, and read as one.
        let selector = LeaderSelector::builder(&latch_framework, "/zkr-watch/selector")
            .id("s")
            .build(|leadership| async move {
                leadership.cancelled().await;
            })
            .expect("selector");
        selector.start().expect("start");
        eventually("the selector leads", || async { selector.has_leadership() }).await;
        let (sender, mut selector_lines) = tokio::sync::mpsc::unbounded_channel();
        let following_selector = tokio::spawn({
            let framework = framework.clone();
            async move {
                let out = |line| drop(sender.send(line));
                follow(&framework, "/zkr-watch/selector", None, true, out).await.is_ok()
            }
        });
        let line = next_line(&mut selector_lines).await;
        assert!(line.starts_with("{\"leader\":\"s\",\"node\":\"/zkr-watch/selector/_c_"), "{line}");
        assert!(line.contains("-lock-"), "{line}");
        within("close", selector.close()).await.expect("close");
        assert_eq!(next_line(&mut selector_lines).await, "{\"leader\":null,\"node\":null}\n");

        within("close", framework.close()).await;
        assert!(within("follow ends", following).await.expect("task"), "ends without an error");
        assert!(within("follow ends", following_selector).await.expect("task"));
        within("close", latch_framework.close()).await;
    }

    #[test]
    fn a_change_is_one_line_in_either_form() {
        assert_eq!(line(&LeaderChange::NoLeader, false).expect("line"), "no leader\n");
        assert_eq!(line(&LeaderChange::NoLeader, true).expect("line"), "{\"leader\":null,\"node\":null}\n");
        let leader = LeaderChange::Leader {
            participant_id: "worker 1".into(),
            data: b"worker 1".to_vec(),
            node_path: "/e/_c_a-latch-0000000001".into(),
        };
        assert_eq!(line(&leader, false).expect("line"), "leader \"worker 1\" (/e/_c_a-latch-0000000001)\n");
        assert_eq!(
            line(&leader, true).expect("line"),
            "{\"leader\":\"worker 1\",\"node\":\"/e/_c_a-latch-0000000001\"}\n"
        );
    }
}
