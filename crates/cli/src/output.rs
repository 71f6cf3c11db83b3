//! Printing a view: an aligned table for people, one JSON document with `--json`.

use serde::Serialize;
use zk_recipes_framework::path;

use crate::inspect::{LeaderView, LockView, NodeRow, QueueView, SemaphoreView, TreeView};
use crate::EXIT_NO;

/// A read command's answer.
pub trait View: Serialize {
    /// The human form.
    fn table(&self) -> String;
    /// Whether the answer is "no" (not held, no leader, empty): exit code 3.
    fn is_no(&self) -> bool;
}

/// Writes `text` to standard output. A reader that went away (`zkr ... | head`) is not an error:
/// the rest is dropped quietly, as a filter's output is. Any other write error is reported.
pub fn print_out(text: &str) {
    use std::io::Write;
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_bytes()).and_then(|()| stdout.flush()) {
        Ok(()) => {}
        Err(err) if err.kind() == std::io::ErrorKind::BrokenPipe => {}
        Err(err) => eprintln!("zkr: cannot write to standard output: {err}"),
    }
}

/// Prints `view` and returns the exit code.
pub fn show(view: &impl View, json: bool) -> u8 {
    if json {
        match serde_json::to_string_pretty(view) {
            Ok(text) => print_out(&format!("{text}\n")),
            Err(err) => {
                eprintln!("zkr: cannot write JSON: {err}");
                return 1;
            }
        }
    } else {
        print_out(&view.table());
    }
    if view.is_no() {
        EXIT_NO
    } else {
        0
    }
}

/// Rows of cells as columns padded to their widest cell.
fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|cell| cell.chars().count()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let padded: Vec<String> =
            cells.iter().zip(&widths).map(|(cell, width)| format!("{cell:<width$}")).collect();
        format!("{}\n", padded.join("  ").trim_end())
    };
    let mut text = line(header.to_vec());
    for row in rows {
        text.push_str(&line(row.iter().map(String::as_str).collect()));
    }
    text
}

/// `3.2s`, `5m12s`, `2h3m`.
fn age(ms: i64) -> String {
    let ms = ms.max(0);
    match ms {
        0..=59_999 => format!("{:.1}s", ms as f64 / 1000.0),
        60_000..=3_599_999 => format!("{}m{}s", ms / 60_000, ms % 60_000 / 1000),
        _ => format!("{}h{}m", ms / 3_600_000, ms % 3_600_000 / 60_000),
    }
}

fn node_rows(nodes: &[NodeRow]) -> Vec<Vec<String>> {
    nodes
        .iter()
        .map(|node| {
            vec![
                node.node.clone(),
                node.kind.clone(),
                match &node.watching {
                    Some(watched) => format!("{} ({})", node.state, path::strip_protected(watched)),
                    None => node.state.clone(),
                },
                node.session.clone(),
                age(node.age_ms),
                node.fencing_token.to_string(),
                node.data.clone(),
            ]
        })
        .collect()
}

const NODE_HEADER: [&str; 7] = ["NODE", "KIND", "STATE", "SESSION", "AGE", "TOKEN", "DATA"];

impl View for LockView {
    fn table(&self) -> String {
        if self.nodes.is_empty() {
            return format!("{}: no lock node (not held)\n", self.path);
        }
        format!("{} ({})\n{}", self.path, self.kind, table(&NODE_HEADER, &node_rows(&self.nodes)))
    }

    fn is_no(&self) -> bool {
        !self.nodes.iter().any(|node| node.state == "held")
    }
}

impl View for LeaderView {
    fn table(&self) -> String {
        match &self.leader {
            None => format!("{}: no participant (no leader)\n", self.path),
            Some(leader) => format!(
                "{} ({}): leader {leader}\n{}",
                self.path,
                self.layout,
                table(&NODE_HEADER, &node_rows(&self.participants))
            ),
        }
    }

    fn is_no(&self) -> bool {
        self.leader.is_none()
    }
}

impl View for SemaphoreView {
    fn table(&self) -> String {
        let counts = match (self.max_leases, self.held, self.waiting) {
            (Some(max), Some(held), Some(waiting)) => {
                format!("{held} of {max} leases held, {waiting} waiting")
            }
            _ => format!("{} lease nodes (maximum unknown: give --max)", self.leases.len()),
        };
        let mut text = format!("{}: {counts}\n", self.path);
        match (&self.holders, &self.waiters) {
            (Some(holders), Some(waiters)) => {
                for (title, rows) in [("holders", holders), ("waiting", waiters)] {
                    if !rows.is_empty() {
                        text.push_str(&format!("{title}:\n"));
                        text.push_str(&table(&NODE_HEADER, &node_rows(rows)));
                    }
                }
            }
            _ if !self.leases.is_empty() => text.push_str(&table(&NODE_HEADER, &node_rows(&self.leases))),
            _ => {}
        }
        if let Some(holder) = &self.internal_lock_holder {
            text.push_str(&format!(
                "internal lock held by {} ({}, {})\n",
                holder.node, holder.session, holder.data
            ));
        }
        text
    }

    fn is_no(&self) -> bool {
        self.leases.is_empty()
    }
}

impl View for QueueView {
    fn table(&self) -> String {
        let mut text = format!("{} ({}): depth {}", self.path, self.layout, self.depth);
        if let Some(oldest) = self.oldest_age_ms {
            text.push_str(&format!(", oldest {}", age(oldest)));
        }
        text.push('\n');
        if !self.in_flight.is_empty() {
            let rows: Vec<Vec<String>> =
                self.in_flight.iter().map(|item| vec![item.item.clone(), item.session.clone()]).collect();
            text.push_str(&format!("{} in flight:\n", self.in_flight.len()));
            text.push_str(&table(&["ITEM", "CONSUMER SESSION"], &rows));
        }
        if !self.priorities.is_empty() {
            let rows: Vec<Vec<String>> = self
                .priorities
                .iter()
                .map(|(priority, count)| vec![priority.to_string(), count.to_string()])
                .collect();
            text.push_str(&table(&["PRIORITY", "ITEMS"], &rows));
        }
        if !self.next_due_ms.is_empty() {
            let now = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |since| since.as_millis() as i64);
            let due: Vec<String> = self
                .next_due_ms
                .iter()
                .map(|due| if *due <= now { "due now".to_owned() } else { format!("in {}", age(due - now)) })
                .collect();
            text.push_str(&format!("next due: {}\n", due.join(", ")));
        }
        text
    }

    fn is_no(&self) -> bool {
        self.depth == 0
    }
}

impl View for TreeView {
    fn table(&self) -> String {
        if self.recipes.is_empty() {
            return format!("{}: no recipe found\n", self.path);
        }
        let rows: Vec<Vec<String>> = self
            .recipes
            .iter()
            .map(|row| vec![row.path.clone(), row.recipe.clone(), row.summary.clone()])
            .collect();
        table(&["PATH", "RECIPE", "SUMMARY"], &rows)
    }

    fn is_no(&self) -> bool {
        self.recipes.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_line_up() {
        let text =
            table(&["A", "LONGER"], &[vec!["wide cell".into(), "x".into()], vec!["b".into(), "y".into()]]);
        assert_eq!(text, "A          LONGER\nwide cell  x\nb          y\n");
    }

    #[test]
    fn ages_read_as_people_write_them() {
        assert_eq!(age(3_200), "3.2s");
        assert_eq!(age(312_000), "5m12s");
        assert_eq!(age(7_380_000), "2h3m");
        assert_eq!(age(-5), "0.0s");
    }
}
