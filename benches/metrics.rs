//! What recording metrics costs the uncontended lock cycle: a mutex built before any recorder is
//! installed (its handles are no-ops, as for an application without metrics) against one built
//! after `metrics-exporter-prometheus`'s recorder is installed (every acquire and hold recorded),
//! in interleaved rounds on one server and one session each.
//!
//! `cargo bench -p zk-recipes-benches --bench metrics -- --rounds 41 --cycles 300` (defaults shown): many
//! short rounds, so that both mutexes meet the same moments of a noisy machine.
//! Under `cargo test` it makes a smoke run. With `--json FILE` (or `ZKR_BENCH_JSON`) both series are
//! also appended as JSON lines (`bench` = `metrics`, scenario `uncontended`, client `recorded` or
//! `not-recorded`, `per_round` the cycles/s of each round).

use std::time::{Duration, Instant};

use metrics_exporter_prometheus::PrometheusBuilder;
use zk_recipes::framework::Framework;
use zk_recipes::mutex::Mutex;

mod support;

/// What recording metrics costs the uncontended lock cycle (the module docs say what runs).
#[derive(clap::Parser, Debug)]
#[command(name = "metrics", bin_name = "cargo bench -p zk-recipes-benches --bench metrics --")]
struct Args {
    /// Interleaved rounds per mutex [default: 41; a smoke run: 1].
    #[arg(long)]
    rounds: Option<usize>,
    /// Lock + release cycles per round [default: 300; a smoke run: 20].
    #[arg(long)]
    cycles: Option<usize>,
    #[command(flatten)]
    json: support::JsonOutput,
    #[command(flatten)]
    harness: support::Harness,
}

async fn framework(connect: &str) -> Framework {
    let framework = Framework::builder(connect).start().expect("framework");
    framework.block_until_connected(Duration::from_secs(20)).await.expect("connected");
    framework
}

/// `cycles` lock + release cycles per second.
async fn cycles_per_second(mutex: &Mutex, cycles: usize) -> f64 {
    let started = Instant::now();
    for _ in 0..cycles {
        mutex.lock().await.expect("lock").release().await.expect("release");
    }
    cycles as f64 / started.elapsed().as_secs_f64()
}

fn main() {
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let args: Args = support::parse();
        let json = support::JsonLines::new("metrics", &args.json);
        let smoke = args.harness.is_smoke_run();
        let rounds = args.rounds.unwrap_or(if smoke { 1 } else { 41 });
        let cycles = args.cycles.unwrap_or(if smoke { 20 } else { 300 });
        let (connect, _server) = support::server(None).await;

        let without = framework(&connect).await;
        let silent = Mutex::new(&without, "/bench-metrics/without").expect("mutex");
        // The recorder, as an application installs it (no HTTP listener needed to record).
        let recorder = PrometheusBuilder::new().build_recorder();
        let handle = recorder.handle();
        metrics::set_global_recorder(recorder).expect("the only recorder");
        let with = framework(&connect).await;
        let recorded = Mutex::new(&with, "/bench-metrics/with").expect("mutex");

        // Warm-up, then interleaved rounds.
        cycles_per_second(&silent, cycles / 2).await;
        cycles_per_second(&recorded, cycles / 2).await;
        let (mut off, mut on) = (Vec::new(), Vec::new());
        for round in 0..rounds {
            if round % 2 == 0 {
                off.push(cycles_per_second(&silent, cycles).await);
                on.push(cycles_per_second(&recorded, cycles).await);
            } else {
                on.push(cycles_per_second(&recorded, cycles).await);
                off.push(cycles_per_second(&silent, cycles).await);
            }
        }
        let fields = serde_json::json!({ "cycles_per_round": cycles });
        json.emit_series("uncontended", "not-recorded", "cycles/s", &off, fields.clone());
        json.emit_series("uncontended", "recorded", "cycles/s", &on, fields);
        let (off, on) = (support::median(&off), support::median(&on));
        let recorded_samples = handle
            .render()
            .lines()
            .find_map(|line| {
                line.strip_prefix(r#"zk_recipes_lock_acquire_seconds_count{path="/bench-metrics/with",lock="lock-"}"#)
            })
            .map(str::trim)
            .unwrap_or("none")
            .to_owned();
        println!(
            "uncontended lock cycles/s, medians of {rounds} interleaved rounds of {cycles}: no recorder {off:.0}, \
             Prometheus recorder {on:.0} ({recorded_samples} acquires recorded); recorded / not recorded {:.3}",
            on / off
        );
        without.close().await;
        with.close().await;
    });
}
