//! `zkr-bench-report`: renders the benches' JSON lines into a markdown report and SVG plots.
//!
//! ```sh
//! zkr-bench-report --input target/bench-report/results.jsonl --markdown docs/benchmarks.md --img-dir docs/img
//! ```
//! `scripts/bench-report.sh` runs the benches and then this.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;

/// Renders bench JSON lines into docs/benchmarks.md and SVG plots.
#[derive(Parser)]
#[command(name = "zkr-bench-report")]
struct Cli {
    /// The JSON lines the benches wrote (`--json PATH`), with the script's `meta` and `timing` lines.
    #[arg(long)]
    input: PathBuf,
    /// The markdown report to write.
    #[arg(long, default_value = "docs/benchmarks.md")]
    markdown: PathBuf,
    /// Where the SVG plots go (linked from the report relative to its directory).
    #[arg(long, default_value = "docs/img")]
    img_dir: PathBuf,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let rendered = zk_recipes_bench_report::Run::read(&cli.input)
        .and_then(|run| zk_recipes_bench_report::render(&run, &cli.markdown, &cli.img_dir));
    match rendered {
        Ok(plots) => {
            println!("wrote {}", cli.markdown.display());
            for plot in plots {
                println!("wrote {}", plot.display());
            }
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("zkr-bench-report: {error}");
            ExitCode::FAILURE
        }
    }
}
