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

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use serde_json::{Map, Value};

mod plots;

/// What can go wrong while rendering.
#[non_exhaustive]
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// A line is not a JSON object.
    #[error("line {line}: {reason}")]
    BadLine {
        /// 1-based line number.
        line: usize,
        /// What is wrong with it.
        reason: String,
    },
    /// Reading the input or writing an output failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A plot could not be drawn.
    #[error("plot {name}: {reason}")]
    Plot {
        /// The plot's file name.
        name: String,
        /// The drawing error.
        reason: String,
    },
}

/// One bench result line.
#[derive(Debug, Clone)]
pub struct Record {
    /// `locks`, `rwlock`, `leader` or `queues`.
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
    let (a, b) = (a?.per_round(), b?.per_round());
    if a.is_empty() || a.len() != b.len() || b.contains(&0.0) {
        return None;
    }
    let mut ratios: Vec<f64> = a.iter().zip(&b).map(|(a, b)| a / b).collect();
    ratios.sort_by(f64::total_cmp);
    Some(ratios[ratios.len() / 2]) // the upper median of an even count, as the benches' medians
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

    fn meta_text(&self, name: &str) -> String {
        match self.meta.get(name) {
            Some(Value::String(text)) => text.clone(),
            Some(Value::Null) | None => "unknown".to_owned(),
            Some(other) => other.to_string(),
        }
    }
}

/// The plots written into `img_dir` (file names; the README shows the first).
pub const PLOTS: [&str; 6] = [
    "locks-contended.svg",
    "locks-handoff.svg",
    "locks-distinct.svg",
    "locks-waiters.svg",
    "queues.svg",
    "leader-failover.svg",
];

/// Writes the plots into `img_dir` and the report to `markdown`, whose links to the plots are
/// relative to it. Returns the plots written (a plot without data is skipped).
///
/// # Errors
/// [`ReportError::Io`] when a file cannot be written, [`ReportError::Plot`] when a plot fails.
pub fn render(run: &Run, markdown: &Path, img_dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    std::fs::create_dir_all(img_dir).map_err(|source| ReportError::Io { path: img_dir.into(), source })?;
    let written = plots::draw_all(run, img_dir)?;
    let link_base = relative_dir(markdown, img_dir);
    let text = markdown_report(run, &written, &link_base);
    if let Some(parent) = markdown.parent() {
        std::fs::create_dir_all(parent).map_err(|source| ReportError::Io { path: parent.into(), source })?;
    }
    std::fs::write(markdown, text).map_err(|source| ReportError::Io { path: markdown.into(), source })?;
    Ok(written)
}

/// `img_dir` as seen from the markdown file's directory (`img` for `docs/benchmarks.md` and
/// `docs/img`), else `img_dir` as given.
fn relative_dir(markdown: &Path, img_dir: &Path) -> String {
    let base = markdown.parent().unwrap_or(Path::new(""));
    match img_dir.strip_prefix(base) {
        Ok(relative) => relative.display().to_string(),
        Err(_) => img_dir.display().to_string(),
    }
}

/// `12,345` for rates; two significant decimals below 10.
pub fn format_rate(value: f64) -> String {
    if value.abs() < 10.0 && value.fract() != 0.0 {
        return format!("{value:.2}");
    }
    let digits = format!("{:.0}", value.abs());
    let mut grouped = String::new();
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index) % 3 == 0 {
            grouped.push(',');
        }
        grouped.push(digit);
    }
    if value < 0.0 {
        format!("-{grouped}")
    } else {
        grouped
    }
}

fn cell(value: Option<f64>, format: impl Fn(f64) -> String) -> String {
    value.map_or_else(|| "–".to_owned(), format)
}

fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    }
}

/// A ratio cell: the ratio of the medians, then in brackets the median of the per-round ratios
/// ([`paired_ratio`]) when the rounds pair up.
fn ratio_cell(a: Option<&Record>, b: Option<&Record>) -> String {
    let of_medians = cell(ratio(a.and_then(Record::ops), b.and_then(Record::ops)), times);
    match paired_ratio(a, b) {
        Some(paired) => format!("{of_medians} ({})", times(paired)),
        None => of_medians,
    }
}

const RATIO_CELLS: &str = "In a ratio column, the first figure is the ratio of the two medians; the one in \
    brackets is the median of each round's own ratio (the two clients measured back to back in that round), \
    which a drift of the machine between rounds moves less.";

fn us(value: f64) -> String {
    format!("{value:.0}")
}

/// An uncontended row's measured cells: cycles/s, p50 µs, p99 µs, CPU µs per cycle.
fn cycle_cells(found: &Record) -> String {
    [
        cell(found.ops(), format_rate),
        cell(found.number("p50_us"), us),
        cell(found.number("p99_us"), us),
        cell(found.number("cpu_us_per_op"), cpu_us),
    ]
    .join(" | ")
}

fn cpu_us(value: f64) -> String {
    format!("{value:.1}")
}

/// A cell of CPU µs per operation, ours / the floor's, from their records.
fn cpu_pair(ours: Option<&Record>, floor: Option<&Record>) -> String {
    let cpu_of = |found: Option<&Record>| found.and_then(|found| found.number("cpu_us_per_op"));
    match (cpu_of(ours), cpu_of(floor)) {
        (Some(ours), Some(floor)) => format!("{} / {}", cpu_us(ours), cpu_us(floor)),
        _ => "–".to_owned(),
    }
}

/// The share of our cycles that made a reaped lock directory again, back to back and interleaved.
fn remade_pair(back_to_back: Option<&Record>, interleaved: Option<&Record>) -> String {
    let share = |found: Option<&Record>| {
        cell(found.and_then(|found| found.number("remade_dirs_per_cycle")), |share| {
            format!("{:.1}%", share * 100.0)
        })
    };
    format!("{} / {}", share(back_to_back), share(interleaved))
}

fn times(value: f64) -> String {
    format!("{value:.2}")
}

/// The whole markdown report.
pub fn markdown_report(run: &Run, plots: &[PathBuf], link_base: &str) -> String {
    let mut out = String::new();
    let plot = |out: &mut String, name: &str, alt: &str| {
        if plots.iter().any(|path| path.file_name().is_some_and(|file| file == name)) {
            let _ = writeln!(out, "![{alt}]({link_base}/{name})\n");
        }
    };
    let _ = writeln!(out, "<!-- Generated by scripts/bench-report.sh (crates/bench-report) from one run: edit the generator, not this file. -->");
    let _ = writeln!(out, "# Benchmarks\n");
    let _ = writeln!(
        out,
        "zk-recipes against Curator {} and against the raw protocol floor (bare zookeeper-client calls, the same \
         protocol) on one ZooKeeper {} server, **in one run**: every ratio below compares figures of the same run, \
         never figures of different runs or machines.\n",
        run.meta_text("curator"),
        run.meta_text("zookeeper")
    );
    let _ = writeln!(out, "## The run\n");
    let _ = writeln!(out, "| | |\n|---|---|");
    for (label, key) in [
        ("date (UTC)", "date"),
        ("command", "command"),
        ("mode", "mode"),
        ("commit", "commit"),
        ("machine", "cpu"),
        ("cores (`nproc`)", "nproc"),
        ("memory", "memory"),
        ("kernel", "kernel"),
        ("ZooKeeper (server)", "zookeeper"),
        ("Curator (Java driver)", "curator"),
        ("Java", "java"),
        ("Rust", "rustc"),
    ] {
        let _ = writeln!(out, "| {label} | {} |", run.meta_text(key).replace('|', "\\|"));
    }
    for (name, secs) in &run.timings {
        let _ = writeln!(out, "| `{name}` bench wall time | {secs:.0} s |");
    }
    if let Some(Value::Object(settings)) = run.meta.get("settings") {
        for (bench, value) in settings {
            let _ = writeln!(out, "| `{bench}` settings | `{}` |", value.as_str().unwrap_or_default());
        }
    }
    let _ = writeln!(
        out,
        "\n**Noise.** Both JVMs (server and Curator) and our side run on the same machine, sharing its cores; each \
         figure is the median of interleaved rounds (ours and Curator's alternate which goes first), and the \
         per-round values are in the JSON lines the script keeps beside the report. A shared or busy machine moves \
         absolute figures by tens of percent between runs; ratios within one run move less. Read absolute numbers \
         as this machine's, and ratios as the result. {}\n",
        run.meta.get("noise").and_then(Value::as_str).unwrap_or("")
    );

    locks_section(run, &mut out, &plot);
    rwlock_section(run, &mut out);
    queues_section(run, &mut out, &plot);
    leader_section(run, &mut out, &plot);
    out
}

type PlotLink<'a> = dyn Fn(&mut String, &str, &str) + 'a;

fn locks_section(run: &Run, out: &mut String, plot: &PlotLink<'_>) {
    let _ = writeln!(out, "## Locks (`benches/locks.rs`)\n\n{RATIO_CELLS}\n");
    let ops = |scenario: &str, client: &str, value: Option<f64>| {
        run.find("locks", scenario, client, value).and_then(Record::ops)
    };
    let record =
        |scenario: &str, client: &str, value: Option<f64>| run.find("locks", scenario, client, value);
    if record("uncontended", "ours", None).is_some() {
        let _ = writeln!(out, "### Uncontended: lock + release on one path, one session\n");
        let _ = writeln!(
            out,
            "| client | cycles/s | p50 µs | p99 µs | CPU µs per cycle | / floor | ours / this |\n|---|---:|---:|---:|---:|---:|---:|"
        );
        let floor = record("uncontended", "floor", None);
        let ours = record("uncontended", "ours", None);
        for (label, scenario, client) in [
            ("zk-recipes", "uncontended", "ours"),
            ("Curator", "uncontended", "curator"),
            ("raw floor (create + list pipelined)", "uncontended", "floor"),
            ("raw one-by-one (Curator's protocol on bare calls)", "uncontended-one-by-one", "floor"),
        ] {
            let Some(found) = record(scenario, client, None) else { continue };
            let _ = writeln!(
                out,
                "| {label} | {} | {} | {} |",
                cycle_cells(found),
                ratio_cell(Some(found), floor),
                ratio_cell(ours, Some(found)),
            );
        }
        let _ = writeln!(
            out,
            "\nCPU: our process's user + system time over the timed cycles, per cycle (Curator's driver and the \
             server are processes of their own).\n"
        );
        let ours = record("uncontended-interleaved", "ours", None);
        let floor = record("uncontended-interleaved", "floor", None);
        if let (Some(ours), Some(floor)) = (ours, floor) {
            let block = ours.number("block").map_or_else(|| "?".to_owned(), |block| format!("{block:.0}"));
            let _ = writeln!(
                out,
                "Ours and the floor interleaved: each on a session and path of its own, cycling in alternating \
                 blocks of {block} cycles (which goes first alternates too), so both are timed over the same \
                 stretch of the machine's time.\n\n| client | cycles/s | p50 µs | p99 µs | CPU µs per cycle | / floor |\n|---|---:|---:|---:|---:|---:|"
            );
            for (label, found) in [("zk-recipes", ours), ("raw floor (create + list pipelined)", floor)] {
                let _ = writeln!(
                    out,
                    "| {label} | {} | {} |",
                    cycle_cells(found),
                    ratio_cell(Some(found), Some(floor)),
                );
            }
            let _ = writeln!(out);
        }
    }

    let sessions = run.values("locks", "contended");
    if !sessions.is_empty() {
        let _ = writeln!(out, "### Contended: N sessions looping lock + release on one lock\n");
        plot(out, "locks-contended.svg", "acquisitions/s vs sessions");
        plot(out, "locks-handoff.svg", "hand-off latency vs sessions");
        let _ = writeln!(
            out,
            "| sessions | ours acq/s | Curator acq/s | floor acq/s | ours / floor | ours / Curator | Curator / floor | \
             hand-off p50/p99 µs, ours | hand-off, Curator | hand-off, floor | ours / floor, interleaved windows | \
             CPU µs per acquisition, interleaved, ours / floor |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for value in sessions {
            let [ours, curator, floor] =
                ["ours", "curator", "floor"].map(|client| record("contended", client, Some(value)));
            let interleaved = |client: &str| record("contended-interleaved", client, Some(value));
            let rate = |found: Option<&Record>| found.and_then(Record::ops);
            let hand_off = |found: Option<&Record>| match found
                .map(|found| (found.number("p50_us"), found.number("p99_us")))
            {
                Some((Some(p50), Some(p99))) => format!("{p50:.0} / {p99:.0}"),
                _ => "–".to_owned(),
            };
            let _ = writeln!(
                out,
                "| {value:.0} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                cell(rate(ours), format_rate),
                cell(rate(curator), format_rate),
                cell(rate(floor), format_rate),
                ratio_cell(ours, floor),
                ratio_cell(ours, curator),
                ratio_cell(curator, floor),
                hand_off(ours),
                hand_off(curator),
                hand_off(floor),
                ratio_cell(interleaved("ours"), interleaved("floor")),
                cpu_pair(interleaved("ours"), interleaved("floor")),
            );
        }
        let _ = writeln!(
            out,
            "\nHand-off: from one holder's release returning to the next holder's lock returning (one clock per \
             side: ours and the floor in this process, Curator's contenders in one JVM with `System.nanoTime`). It \
             can be negative: the next holder's watch event may be read before the releaser's delete reply. The \
             raw floor is our lock's protocol on bare calls: protected ephemeral-sequential create and list \
             pipelined, watch the predecessor, no re-list when the predecessor was first. Interleaved windows: \
             ours and the floor, each with N sessions on a lock of its own, cycle in alternating windows (which \
             goes first alternates), each opening only once the other's queue has drained, so that a drift of \
             the machine falls on both alike; CPU is our process's user + system time while a side's window was \
             open, per acquisition.\n"
        );
    }

    let locks = run.values("locks", "distinct");
    if !locks.is_empty() {
        let _ =
            writeln!(out, "### Many distinct locks in one process: N locks cycled at once on one session\n");
        plot(out, "locks-distinct.svg", "cycles/s vs distinct locks");
        let _ = writeln!(
            out,
            "| locks | untimed cycles per lock first | cycles per lock | ours cycles/s | Curator cycles/s | floor cycles/s | \
             ours / floor | ours / Curator | Curator / floor | Curator threads | CPU µs per cycle, ours / floor | \
             ours / floor, interleaved passes | CPU µs per cycle, interleaved, ours / floor | \
             ours' cycles that made a reaped directory again, back to back / interleaved |\n\
             |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
        );
        for value in locks {
            let rate = |client: &str| ops("distinct", client, Some(value));
            let found = |client: &str| record("distinct", client, Some(value));
            let interleaved = |client: &str| record("distinct-interleaved", client, Some(value));
            let threads =
                record("distinct", "curator", Some(value)).and_then(|found| found.number("threads"));
            let per_lock = |field: &str| {
                run.select("locks", "distinct")
                    .find(|found| found.value == Some(value))
                    .and_then(|found| found.number(field))
            };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |",
                format_rate(value),
                cell(per_lock("warm_up_each"), format_rate),
                cell(per_lock("cycles_each"), format_rate),
                cell(rate("ours"), format_rate),
                cell(rate("curator"), format_rate),
                cell(rate("floor"), format_rate),
                ratio_cell(found("ours"), found("floor")),
                ratio_cell(found("ours"), found("curator")),
                ratio_cell(found("curator"), found("floor")),
                cell(threads, format_rate),
                cpu_pair(found("ours"), found("floor")),
                ratio_cell(interleaved("ours"), interleaved("floor")),
                cpu_pair(interleaved("ours"), interleaved("floor")),
                remade_pair(found("ours"), interleaved("ours")),
            );
        }
        let _ = writeln!(
            out,
            "\nOurs: a task per lock on one session, which sends its many creates and releases together as \
             multis (`FrameworkBuilder::batch_writes`, on by default; docs/framework.md). Curator: a thread per lock on one client (JVM `-Xss256k`), as \
             many as the driver was allowed (the Curator threads column). The floor: the same create + list + delete on bare \
             calls at the same concurrency, each a request of its own (the protocol as Curator and a single lock of ours send it). CPU: our process's user + system time over the timed part, per \
             cycle (the server and Curator's driver are processes of their own). Each client first cycles the same locks untimed: their directories exist, \
             Curator's threads run and its JVM has compiled its hot paths before the clock starts (a run without that \
             column timed Curator's start-up too). Interleaved passes: ours and the floor on locks of their own, \
             warmed up alike, then timed in alternating passes (every lock cycled once per pass, which client goes \
             first alternating), so that a drift of the machine falls on both alike. Our lock directories are \
             containers, as Curator's are: the server reaps one found empty (`znode.container.checkIntervalMs`, \
             60 s by default, up to 10,000 a minute), and the lock's next create fails and makes it again — a failed \
             create and listing and one round trip more. The floor's directories are persistent and never reaped; \
             the last column is the share of our timed cycles that paid this (from the parent's children version).\n"
        );
    }

    let waiters = run.values("locks", "waiters");
    if !waiters.is_empty() {
        let _ = writeln!(out, "### Scale: waiters on one lock, one session (ours)\n");
        plot(out, "locks-waiters.svg", "server packets per hand-off vs waiters");
        let _ = writeln!(
            out,
            "| waiters | RSS per waiter (bytes) | server packets per hand-off | hand-offs/s while draining | queued in (s) \
             |\n|---:|---:|---:|---:|---:|"
        );
        for value in waiters {
            let Some(found) = record("waiters", "ours", Some(value)) else { continue };
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} |",
                format_rate(value),
                cell(found.number("rss_per_waiter_bytes"), |bytes| format!("{bytes:.0}")),
                cell(found.number("packets_per_handoff"), times),
                cell(found.number("handoffs_per_sec"), format_rate),
                cell(found.number("queue_secs"), |secs| format!("{secs:.1}")),
            );
        }
        let _ = writeln!(
            out,
            "\nRSS: the process's `VmRSS` after the waiters queued minus before (after `malloc_trim`), divided by the \
             waiters. Packets: the server's `mntr` `zk_packets_sent` + `zk_packets_received` over the drain, divided \
             by the releases; flat from the smallest to the largest line means every release wakes exactly one \
             waiter.\n"
        );
    }
    for found in run.select("locks", "held") {
        let _ = writeln!(out, "### Scale: held locks on one session, then the session expires (ours)\n");
        let ms = |name: &str| cell(found.number(name), |ms| format!("{ms:.0} ms"));
        let _ = writeln!(out, "| | |\n|---|---:|");
        let _ = writeln!(out, "| locks held | {} |", cell(found.value, format_rate));
        let _ = writeln!(
            out,
            "| set up in | {} |",
            cell(found.number("set_up_secs"), |secs| format!("{secs:.1} s"))
        );
        let _ = writeln!(
            out,
            "| RSS per held lock | {} |",
            cell(found.number("rss_per_hold_bytes"), |bytes| format!("{bytes:.0} bytes"))
        );
        let _ = writeln!(out, "| server back → `Lost` | {} |", ms("lost_event_ms"));
        let _ = writeln!(out, "| server back → first `lost()` | {} |", ms("first_lost_ms"));
        let _ = writeln!(out, "| server back → every `lost()` | {} |", ms("all_lost_ms"));
        let _ = writeln!(out, "| server back → `Reconnected` (new session) | {} |", ms("reconnected_ms"));
        let _ = writeln!(
            out,
            "\nExpiry: a fault proxy cuts our client off, a second connection resumes the session (its id and \
             password) and closes it, so the server ends it at once; then the proxy lets our client through again \
             and it finds its session expired. Times run from that moment (\"server back\"). The framework runs \
             with `ErrorPolicy::SessionOnly`, so a hold is lost with its session, not on the disconnection.\n"
        );
    }
}

fn rwlock_section(run: &Run, out: &mut String) {
    let mixes = run.values("rwlock", "mix");
    if mixes.is_empty() {
        return;
    }
    let _ = writeln!(out, "## Read-write lock (`benches/rwlock.rs`): 8 sessions on one lock\n");
    let _ = writeln!(out, "| writes | ours acq/s | Curator acq/s | ours / Curator |\n|---:|---:|---:|---:|");
    for value in mixes {
        let rate = |client: &str| run.find("rwlock", "mix", client, Some(value)).and_then(Record::ops);
        let _ = writeln!(
            out,
            "| {value:.0} % | {} | {} | {} |",
            cell(rate("ours"), format_rate),
            cell(rate("curator"), format_rate),
            cell(ratio(rate("ours"), rate("curator")), times)
        );
    }
    let _ = writeln!(out);
}

/// Queue scenarios in report order: (scenario, label).
pub const QUEUE_MODES: [(&str, &str); 6] = [
    ("put", "put, one per item"),
    ("put-batch", "put, batched"),
    ("take", "take, at most once"),
    ("take-lock-safe", "take, lock-safe"),
    ("end-to-end", "end to end, at most once"),
    ("end-to-end-lock-safe", "end to end, lock-safe"),
];

fn queues_section(run: &Run, out: &mut String, plot: &PlotLink<'_>) {
    if run.results.iter().all(|record| record.bench != "queues") {
        return;
    }
    let _ = writeln!(out, "## Queues (`benches/queues.rs`): 4 producers / 4 consumers, one session each\n");
    plot(out, "queues.svg", "queue items/s per mode");
    let _ = writeln!(out, "| mode | ours items/s | Curator items/s | ours / Curator | Curator's way |\n|---|---:|---:|---:|---|");
    for (scenario, label) in QUEUE_MODES {
        let ours = run.find("queues", scenario, "ours", None);
        let curator = run.find("queues", scenario, "curator", None);
        if ours.is_none() && curator.is_none() {
            continue;
        }
        let how = curator.and_then(|found| found.fields.get("how")).and_then(Value::as_str).unwrap_or("–");
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} | {how} |",
            cell(ours.and_then(Record::ops), format_rate),
            cell(curator.and_then(Record::ops), format_rate),
            cell(ratio(ours.and_then(Record::ops), curator.and_then(Record::ops)), times)
        );
    }
    let _ = writeln!(out);
}

fn leader_section(run: &Run, out: &mut String, plot: &PlotLink<'_>) {
    if run.results.iter().all(|record| record.bench != "leader") {
        return;
    }
    let _ =
        writeln!(out, "## Leader failover (`benches/leader.rs`): two latches, time until the other leads\n");
    plot(out, "leader-failover.svg", "leader failover time after close and after crash");
    let _ = writeln!(out, "| after | ours | Curator | ours / Curator |\n|---|---:|---:|---:|");
    let ms = |value: f64| format!("{value:.2} ms");
    for (label, scenario, field) in [
        ("close, p50", "graceful", "p50_ms"),
        ("close, p90", "graceful", "p90_ms"),
        ("crash (SIGKILL), kill → leader", "crash", "kill_to_leader_ms"),
        ("crash, expiry seen → leader", "crash", "expiry_to_leader_ms"),
    ] {
        let value =
            |client: &str| run.find("leader", scenario, client, None).and_then(|found| found.number(field));
        let _ = writeln!(
            out,
            "| {label} | {} | {} | {} |",
            cell(value("ours"), ms),
            cell(value("curator"), ms),
            cell(ratio(value("ours"), value("curator")), times)
        );
    }
    if let Some(timeout) = run.select("leader", "crash").find_map(|found| found.number("session_timeout_ms"))
    {
        let _ = writeln!(
            out,
            "\nCrash: a Curator leader's JVM is SIGKILLed; the server expires its session one session timeout ({timeout:.0} \
             ms) after it last heard from it, so kill → leader is bounded below by about that; the follower (ours or \
             a Curator latch) adds its reaction (expiry seen → leader)."
        );
    }
    let _ = writeln!(out);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_are_grouped() {
        assert_eq!(format_rate(1234567.4), "1,234,567");
        assert_eq!(format_rate(999.0), "999");
        assert_eq!(format_rate(4.567), "4.57");
        assert_eq!(format_rate(0.0), "0");
        assert_eq!(format_rate(-12345.0), "-12,345");
    }

    #[test]
    fn a_line_without_bench_is_refused() {
        let error = Run::parse("{\"scenario\":\"x\"}").expect_err("no bench");
        assert!(matches!(error, ReportError::BadLine { line: 1, .. }), "{error}");
    }

    #[test]
    fn rounds_pair_up_only_when_both_sides_have_each_round() {
        let line = |client: &str, rounds: &str| {
            format!(
                r#"{{"bench":"locks","scenario":"u","client":"{client}","ops":1.0,"per_round":{rounds}}}"#
            )
        };
        let run =
            Run::parse(&[line("a", "[1.0,2.0]"), line("b", "[1.0]"), line("c", "[0.0,1.0]")].join("\n"))
                .expect("parse");
        let found = |client: &str| run.find("locks", "u", client, None);
        assert_eq!(paired_ratio(found("a"), found("b")), None, "different round counts");
        assert_eq!(paired_ratio(found("a"), found("c")), None, "a round of zero");
        assert_eq!(paired_ratio(found("a"), None), None);
        assert_eq!(ratio_cell(found("a"), found("b")), "1.00");
        assert_eq!(ratio_cell(found("c"), found("a")), "1.00 (0.50)");
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

    #[test]
    fn the_images_are_linked_relative_to_the_report() {
        assert_eq!(relative_dir(Path::new("docs/benchmarks.md"), Path::new("docs/img")), "img");
        assert_eq!(relative_dir(Path::new("/tmp/x/report.md"), Path::new("/other/img")), "/other/img");
    }
}
