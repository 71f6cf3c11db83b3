//! Printing a view: an aligned table for people, one JSON document with `--json`.

use serde::Serialize;
use time::{OffsetDateTime, PrimitiveDateTime};
use zk_recipes_framework::path;

use crate::inspect::{LeaderView, LockView, NodeRow, QueueView, SemaphoreView, TreeView};
use crate::services::{ServiceInstancesView, ServicesView};

/// The exit code of a read command whose answer is "no": not held, no leader, empty.
pub const EXIT_NO: u8 = 3;

/// A read command's answer.
pub trait View {
    /// The human form.
    fn table(&self) -> String;
    /// The `--json` form, ending with a newline: one JSON document (but `zkr services NAME`: one
    /// line per instance).
    fn json(&self) -> serde_json::Result<String>;
    /// Whether the answer is "no" (not held, no leader, empty): exit code 3.
    fn is_no(&self) -> bool;
    /// What was read but left out, and why: for standard error.
    fn warnings(&self) -> &[String] {
        &[]
    }
}

/// `view` as one pretty-printed JSON document.
fn document(view: &impl Serialize) -> serde_json::Result<String> {
    serde_json::to_string_pretty(view).map(|text| format!("{text}\n"))
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
    for warning in view.warnings() {
        eprintln!("zkr: {warning}: left out");
    }
    if json {
        match view.json() {
            Ok(text) => print_out(&text),
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
    fn json(&self) -> serde_json::Result<String> {
        document(self)
    }

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
    fn json(&self) -> serde_json::Result<String> {
        document(self)
    }

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
    fn json(&self) -> serde_json::Result<String> {
        document(self)
    }

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
    fn json(&self) -> serde_json::Result<String> {
        document(self)
    }

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
    fn json(&self) -> serde_json::Result<String> {
        document(self)
    }

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

impl View for ServicesView {
    fn table(&self) -> String {
        if self.services.is_empty() {
            return format!("{}: no service\n", self.base_path);
        }
        let rows: Vec<Vec<String>> = self
            .services
            .iter()
            .map(|service| vec![service.name.clone(), service.instances.to_string()])
            .collect();
        let count = match self.services.len() {
            1 => "1 service".to_owned(),
            many => format!("{many} services"),
        };
        format!("{}: {count}\n{}", self.base_path, table(&["NAME", "INSTANCES"], &rows))
    }

    fn json(&self) -> serde_json::Result<String> {
        document(self)
    }

    fn is_no(&self) -> bool {
        self.services.is_empty()
    }
}

const INSTANCE_HEADER: [&str; 8] =
    ["ID", "ADDRESS", "PORT", "SSL PORT", "TYPE", "ENABLED", "REGISTERED (UTC)", "URI"];

impl View for ServiceInstancesView {
    fn table(&self) -> String {
        if self.instances.is_empty() {
            return format!("{}: no instance\n", self.path);
        }
        let or_dash = |value: Option<String>| value.unwrap_or_else(|| "-".to_owned());
        let rows: Vec<Vec<String>> = self
            .instances
            .iter()
            .map(|row| {
                let instance = &row.instance;
                vec![
                    instance.id.clone(),
                    or_dash(instance.address.clone()),
                    or_dash(instance.port.map(|port| port.to_string())),
                    or_dash(instance.ssl_port.map(|port| port.to_string())),
                    instance.service_type.wire_name().to_owned(),
                    if instance.enabled { "yes" } else { "no" }.to_owned(),
                    or_dash(
                        (instance.registration_time_utc != 0).then(|| utc(instance.registration_time_utc)),
                    ),
                    or_dash(instance.resolve_uri()),
                ]
            })
            .collect();
        let count = match self.instances.len() {
            1 => "1 instance".to_owned(),
            many => format!("{many} instances"),
        };
        format!("{}: {count}\n{}", self.path, table(&INSTANCE_HEADER, &rows))
    }

    /// One line per instance: its node's data, Curator's JSON as stored (JSON Lines).
    fn json(&self) -> serde_json::Result<String> {
        Ok(self.instances.iter().map(|row| format!("{}\n", row.json)).collect())
    }

    fn is_no(&self) -> bool {
        self.instances.is_empty()
    }

    fn warnings(&self) -> &[String] {
        &self.unreadable
    }
}

/// Milliseconds since the Unix epoch as an ISO 8601 UTC time: `2023-11-14T22:13:20.123Z` (clamped
/// to the years 0000 to 9999).
fn utc(epoch_ms: i64) -> String {
    let time = OffsetDateTime::from_unix_timestamp_nanos(i128::from(epoch_ms) * 1_000_000).unwrap_or(
        if epoch_ms < 0 { PrimitiveDateTime::MIN.assume_utc() } else { PrimitiveDateTime::MAX.assume_utc() },
    );
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
        time.year(),
        u8::from(time.month()),
        time.day(),
        time.hour(),
        time.minute(),
        time.second(),
        time.millisecond()
    )
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
    fn registration_times_read_as_utc() {
        assert_eq!(utc(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(utc(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(utc(951_782_400_000), "2000-02-29T00:00:00.000Z", "a leap day");
        assert_eq!(utc(4_107_542_399_999), "2100-02-28T23:59:59.999Z", "2100 is no leap year");
        assert_eq!(utc(4_107_542_400_000), "2100-03-01T00:00:00.000Z");
        assert_eq!(utc(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn ages_read_as_people_write_them() {
        assert_eq!(age(3_200), "3.2s");
        assert_eq!(age(312_000), "5m12s");
        assert_eq!(age(7_380_000), "2h3m");
        assert_eq!(age(-5), "0.0s");
    }
}
