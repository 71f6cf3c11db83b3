//! Renders the JSON lines the benches write (`benches/*.rs`, `--json PATH`) into
//! `docs/benchmarks.md` and SVG plots under `docs/img/`. `scripts/bench-report.sh` runs the
//! benches and then this; nothing here measures anything.
//!
//! Input: one JSON object per line. Bench results carry `bench`, `scenario`, `client` (`ours`,
//! `curator` or `floor`), optionally `param`/`value` (what the scenario varies), `unit`, `ops`
//! (a median over `rounds`), and scenario fields (`p50_us`, `p99_us`, …). Lines with `bench` =
//! `meta` describe the run (machine, versions, command, date, settings); lines with `bench` =
//! `timing` give each bench's wall time.
//!
//! ```
//! let lines = r#"{"bench":"locks","scenario":"contended","client":"ours","param":"sessions","value":8,"unit":"acquisitions/s","ops":1000.0,"rounds":1}"#;
//! let run = zk_recipes_bench_report::Run::parse(lines)?;
//! assert_eq!(run.results.len(), 1);
//! # Ok::<(), zk_recipes_bench_report::ReportError>(())
//! ```

// Where things live (each file imports only the ones before it):
// - `error`: `ReportError`;
// - `run`: the input, `Run` and its `Record`s, `paired_ratio` and `round_ratios`;
// - `report`: the markdown report (`markdown_report`), a file per section;
// - `plots`: the SVG plots;
// - `output`: both written to their files (`render`, `PLOTS`).

mod error;
mod output;
mod plots;
mod report;
mod run;

pub use error::ReportError;
pub use output::{render, PLOTS};
pub use report::{format_rate, markdown_report, QUEUE_MODES};
pub use run::{paired_ratio, round_ratios, Record, Run};
