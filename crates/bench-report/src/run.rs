//! The input: [`Run`], the JSON lines of one bench run parsed, and its [`Record`]s; and
//! [`paired_ratio`] and [`round_ratios`], the per-round comparisons of two records.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::{Map, Value};

use crate::error::ReportError;

/// One bench result line.
#[derive(Debug, Clone)]
pub struct Record {
    /// `locks`, `rwlock`, `leader`, `queues` or `discovery`.
    pub bench: String,
    /// The scenario within the bench (`contended`, `distinct`, `take`, …).
    pub scenario: String,
    /// `ours`, `curator` or `floor`.
    pub client: String,
    /// The varied parameter's value (sessions, locks, …), if any.
    pub value: Option<f64>,
    /// Every field of the line.
    pub fields: Map<String, Value>,
}

impl Record {
    /// A numeric field.
    pub fn number(&self, name: &str) -> Option<f64> {
        self.fields.get(name).and_then(Value::as_f64)
    }

    /// `ops`, the median rate.
    pub fn ops(&self) -> Option<f64> {
        self.number("ops")
    }

    /// `per_round`: the rate of each round, in round order (empty when the line has none).
    pub fn per_round(&self) -> Vec<f64> {
        self.fields
            .get("per_round")
            .and_then(Value::as_array)
            .map(|rates| rates.iter().filter_map(Value::as_f64).collect())
            .unwrap_or_default()
    }
}

/// The median over rounds of `a`'s rate divided by `b`'s rate of the same round, or `None` unless
/// both have a rate for each of the same number of rounds. Two clients measured back to back in
/// one round share that round's conditions, so a drift of the machine between rounds moves this
/// less than the ratio of the two medians.
///
/// ```
/// use zk_recipes_bench_report::{paired_ratio, Run};
/// let run = Run::parse(concat!(
///     r#"{"bench":"locks","scenario":"u","client":"ours","ops":90.0,"per_round":[90.0,45.0,99.0]}"#, "\n",
///     r#"{"bench":"locks","scenario":"u","client":"floor","ops":100.0,"per_round":[100.0,50.0,100.0]}"#,
/// ))?;
/// let (ours, floor) = (run.find("locks", "u", "ours", None), run.find("locks", "u", "floor", None));
/// assert_eq!(paired_ratio(ours, floor), Some(0.9)); // per round: 0.90, 0.90, 0.99
/// # Ok::<(), zk_recipes_bench_report::ReportError>(())
/// ```
pub fn paired_ratio(a: Option<&Record>, b: Option<&Record>) -> Option<f64> {
    let mut ratios = round_ratios(a, b)?;
    ratios.sort_by(f64::total_cmp);
    Some(ratios[ratios.len() / 2]) // the upper median of an even count, as the benches' medians
}

/// `a`'s rate divided by `b`'s rate of the same round, for each round in round order, or `None`
/// unless both have a rate for each of the same number of rounds: how far the machine moved one
/// comparison between rounds.
///
/// ```
/// use zk_recipes_bench_report::{round_ratios, Run};
/// let run = Run::parse(concat!(
///     r#"{"bench":"locks","scenario":"u","client":"ours","ops":90.0,"per_round":[90.0,45.0,99.0]}"#, "\n",
///     r#"{"bench":"locks","scenario":"u","client":"floor","ops":100.0,"per_round":[100.0,50.0,100.0]}"#,
/// ))?;
/// let (ours, floor) = (run.find("locks", "u", "ours", None), run.find("locks", "u", "floor", None));
/// assert_eq!(round_ratios(ours, floor), Some(vec![0.9, 0.9, 0.99]));
/// # Ok::<(), zk_recipes_bench_report::ReportError>(())
/// ```
pub fn round_ratios(a: Option<&Record>, b: Option<&Record>) -> Option<Vec<f64>> {
    let (a, b) = (a?.per_round(), b?.per_round());
    if a.is_empty() || a.len() != b.len() || b.contains(&0.0) {
        return None;
    }
    Some(a.iter().zip(&b).map(|(a, b)| a / b).collect())
}

/// A whole run: its results and what describes it.
#[derive(Debug, Default)]
pub struct Run {
    /// Bench results, in input order.
    pub results: Vec<Record>,
    /// `meta` fields (later lines override earlier ones).
    pub meta: Map<String, Value>,
    /// Wall time per bench, in seconds.
    pub timings: BTreeMap<String, f64>,
}

impl Run {
    /// Parses JSON lines (blank lines are skipped).
    ///
    /// # Errors
    /// [`ReportError::BadLine`] for a line that is not a JSON object with `bench`.
    pub fn parse(text: &str) -> Result<Run, ReportError> {
        let mut run = Run::default();
        for (index, line) in text.lines().enumerate() {
            if line.trim().is_empty() {
                continue;
            }
            let bad = |reason: String| ReportError::BadLine { line: index + 1, reason };
            let value: Value = serde_json::from_str(line).map_err(|err| bad(err.to_string()))?;
            let Value::Object(fields) = value else { return Err(bad("not an object".into())) };
            let text = |name: &str| fields.get(name).and_then(Value::as_str).map(str::to_owned);
            let bench = text("bench").ok_or_else(|| bad("no \"bench\"".into()))?;
            match bench.as_str() {
                "meta" => run.meta.extend(fields.into_iter().filter(|(key, _)| key != "bench")),
                "timing" => {
                    let name = text("name").ok_or_else(|| bad("timing without \"name\"".into()))?;
                    let secs = fields
                        .get("secs")
                        .and_then(Value::as_f64)
                        .ok_or_else(|| bad("no \"secs\"".into()))?;
                    run.timings.insert(name, secs);
                }
                _ => run.results.push(Record {
                    bench,
                    scenario: text("scenario").ok_or_else(|| bad("no \"scenario\"".into()))?,
                    client: text("client").ok_or_else(|| bad("no \"client\"".into()))?,
                    value: fields.get("value").and_then(Value::as_f64),
                    fields,
                }),
            }
        }
        Ok(run)
    }

    /// Reads and parses a JSON-lines file.
    ///
    /// # Errors
    /// [`ReportError::Io`] if it cannot be read; as [`Run::parse`].
    pub fn read(path: &Path) -> Result<Run, ReportError> {
        let text =
            std::fs::read_to_string(path).map_err(|source| ReportError::Io { path: path.into(), source })?;
        Run::parse(&text)
    }

    /// The results of one bench and scenario.
    pub fn select<'a>(&'a self, bench: &'a str, scenario: &'a str) -> impl Iterator<Item = &'a Record> + 'a {
        self.results.iter().filter(move |record| record.bench == bench && record.scenario == scenario)
    }

    /// The one result of a bench, scenario, client and value.
    pub fn find(&self, bench: &str, scenario: &str, client: &str, value: Option<f64>) -> Option<&Record> {
        self.results.iter().find(|record| {
            record.bench == bench
                && record.scenario == scenario
                && record.client == client
                && record.value == value
        })
    }

    /// The parameter values a scenario was measured at, ascending.
    pub fn values(&self, bench: &str, scenario: &str) -> Vec<f64> {
        let mut values: Vec<f64> = self.select(bench, scenario).filter_map(|record| record.value).collect();
        values.sort_by(f64::total_cmp);
        values.dedup();
        values
    }

    pub(crate) fn meta_text(&self, name: &str) -> String {
        match self.meta.get(name) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => "unknown".to_owned(),
            Some(other) => other.to_string(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_without_bench_is_refused() {
        let error = Run::parse("{\"scenario\":\"x\"}").expect_err("no bench");
        assert!(matches!(error, ReportError::BadLine { line: 1, .. }), "{error}");
    }

    #[test]
    fn meta_and_timing_lines_are_kept_apart() {
        let run = Run::parse(
            "{\"bench\":\"meta\",\"nproc\":2}\n\n{\"bench\":\"timing\",\"name\":\"locks\",\"secs\":12.5}\n",
        )
        .expect("parse");
        assert!(run.results.is_empty());
        assert_eq!(run.meta["nproc"], 2);
        assert_eq!(run.timings["locks"], 12.5);
    }
}
