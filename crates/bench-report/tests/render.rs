//! The renderer on the JSON lines of a quick run (`scripts/bench-report.sh --quick` on a busy
//! 2-core machine, kept as a fixture: its figures mean nothing, its shape is the real one): every
//! plot is drawn, and the report has every section, with ratios computed from the run.

use std::path::Path;

use zk_recipes_bench_report::{paired_ratio, render, Run, PLOTS};

const FIXTURE: &str = include_str!("fixtures/quick-run.jsonl");

/// The fixture's run, and the report rendered from it.
fn rendered_fixture() -> (Run, String) {
    let run = Run::parse(FIXTURE).expect("the fixture parses");
    let dir = tempfile::tempdir().expect("a temp dir");
    let markdown = dir.path().join("benchmarks.md");
    render(&run, &markdown, &dir.path().join("img")).expect("render");
    let report = std::fs::read_to_string(&markdown).expect("the report");
    (run, report)
}

#[test]
fn a_quick_run_renders_every_plot_and_table() {
    let run = Run::parse(FIXTURE).expect("the fixture parses");
    let dir = tempfile::tempdir().expect("a temp dir");
    let markdown = dir.path().join("benchmarks.md");
    let img_dir = dir.path().join("img");
    let written = render(&run, &markdown, &img_dir).expect("render");

    for plot in PLOTS {
        let path = img_dir.join(plot);
        assert!(written.contains(&path), "{plot} was written: {written:?}");
        let svg = std::fs::read_to_string(&path).expect("the plot");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"), "{plot} is a whole SVG");
        assert!(svg.contains("zk-recipes"), "{plot} has a legend");
    }
    let report = std::fs::read_to_string(&markdown).expect("the report");
    for section in [
        "### Uncontended",
        "### Contended",
        "### Many distinct locks",
        "### Scale: waiters",
        "### Scale: held locks",
        "## Read-write lock",
        "## Queues",
        "## Leader failover",
        "**Noise.**",
    ] {
        assert!(report.contains(section), "the report has {section}");
    }
    for plot in PLOTS {
        assert!(report.contains(&format!("](img/{plot})")), "the report links img/{plot}");
    }
    assert!(!report.contains("| unknown |") || run.meta.is_empty(), "the run's meta fields are all filled");
    for table in report.split("\n\n").filter(|block| block.starts_with('|')) {
        let columns: Vec<usize> =
            table.lines().map(|line| line.matches('|').count() - line.matches("\\|").count()).collect();
        assert!(
            columns.windows(2).all(|pair| pair[0] == pair[1]),
            "every row has the header's columns:\n{table}"
        );
    }
}

#[test]
fn ratios_come_from_the_same_run() {
    let (run, report) = rendered_fixture();
    let record =
        |client: &str| run.find("locks", "contended", client, Some(run.values("locks", "contended")[0]));
    let rate = |client: &str| record(client).and_then(|record| record.ops()).expect("a contended rate");
    let paired = paired_ratio(record("ours"), record("floor")).expect("rounds that pair up");
    let expected = format!("| {:.2} ({paired:.2}) |", rate("ours") / rate("floor"));
    let row = report
        .lines()
        .find(|line| line.starts_with(&format!("| {} |", run.values("locks", "contended")[0])))
        .expect("the first contended row");
    assert!(row.contains(&expected), "ours / floor {expected} in {row}");
}

#[test]
fn the_readme_shows_a_plot_the_report_draws() {
    let readme = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"))
        .expect("the README");
    assert!(readme.contains(&format!("(docs/img/{})", PLOTS[0])), "the README shows docs/img/{}", PLOTS[0]);
    assert!(readme.contains("docs/benchmarks.md"), "the README links the report");
}

/// Asserts that the report's row starting with `row_start` ends with the interleaved cells of
/// `scenario` at `value`: ours / floor (ratio of medians, then per round), then `cpu`, then
/// `after` (cells the row has past them).
fn assert_interleaved_cells(
    run: &Run,
    report: &str,
    scenario: &str,
    value: f64,
    row_start: &str,
    cpu: &str,
    after: &str,
) {
    let record = |client: &str| run.find("locks", scenario, client, Some(value));
    let rate = |client: &str| record(client).and_then(|record| record.ops()).expect("an interleaved rate");
    let paired = paired_ratio(record("ours"), record("floor")).expect("rounds that pair up");
    let expected = format!("| {:.2} ({paired:.2}) | {cpu} |{after}", rate("ours") / rate("floor"));
    let row = report.lines().find(|line| line.starts_with(row_start)).expect("the row");
    assert!(row.ends_with(&expected), "interleaved ours / floor and CPU {expected} at the end of {row}");
}

#[test]
fn the_distinct_locks_table_shows_the_interleaved_passes_of_the_same_run() {
    let (run, report) = rendered_fixture();
    // The last cell: our cycles that made a reaped lock directory again, back to back / interleaved.
    assert_interleaved_cells(
        &run,
        &report,
        "distinct-interleaved",
        1000.0,
        "| 1,000 |",
        "50.0 / 40.0",
        " 1.2% / 3.1% |",
    );
    let unmeasured = report.lines().find(|line| line.starts_with("| 100 |")).expect("the 100 locks row");
    assert!(
        unmeasured.ends_with("| – / – |"),
        "no reaped directories measured at 100 in the fixture: {unmeasured}"
    );
}

#[test]
fn the_contended_table_shows_the_interleaved_windows_of_the_same_run() {
    let (run, report) = rendered_fixture();
    assert_interleaved_cells(&run, &report, "contended-interleaved", 8.0, "| 8 |", "400.0 / 380.0", "");
    let without = report.lines().find(|line| line.starts_with("| 32 |")).expect("the 32 sessions row");
    assert!(
        without.ends_with("| – | – |"),
        "no interleaved windows measured at 32 in the fixture: {without}"
    );
}
