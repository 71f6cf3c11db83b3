//! The SVG plots (plotters' SVG backend; labels stay SVG text, so no font is needed).

use std::path::{Path, PathBuf};

use plotters::prelude::*;

use crate::{ReportError, Run, QUEUE_MODES};

const SIZE: (u32, u32) = (860, 500);
const OURS: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
const CURATOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
const FLOOR: RGBColor = RGBColor(0x55, 0x55, 0x55);

/// The three clients, as plotted: (client, legend, colour).
const CLIENTS: [(&str, &str, RGBColor); 3] =
    [("ours", "zk-recipes", OURS), ("curator", "Curator", CURATOR), ("floor", "raw floor", FLOOR)];

type Points = Vec<(f64, f64)>;

/// Draws every plot that has data; returns the files written.
pub(crate) fn draw_all(run: &Run, img_dir: &Path) -> Result<Vec<PathBuf>, ReportError> {
    let mut written = Vec::new();
    let mut keep = |name: &str, drawn: Result<bool, String>| -> Result<(), ReportError> {
        match drawn {
            Ok(true) => {
                written.push(img_dir.join(name));
                Ok(())
            }
            Ok(false) => Ok(()),
            Err(reason) => Err(ReportError::Plot { name: name.to_owned(), reason }),
        }
    };
    let path = |name: &str| img_dir.join(name);

    let rates = |scenario: &str| -> Vec<(String, RGBColor, Points, bool)> {
        CLIENTS
            .iter()
            .map(|(client, legend, colour)| {
                let points = run
                    .select("locks", scenario)
                    .filter(|record| record.client == *client)
                    .filter_map(|record| Some((record.value?, record.ops()?)))
                    .collect();
                (legend.to_string(), *colour, points, false)
            })
            .collect()
    };
    keep(
        "locks-contended.svg",
        log_x_lines(
            &path("locks-contended.svg"),
            "Contended: acquisitions/s on one lock",
            "sessions",
            "acquisitions/s",
            &rates("contended"),
            true,
        ),
    )?;
    let mut hand_offs = Vec::new();
    for (client, legend, colour) in CLIENTS {
        for (field, label, dashed) in [("p50_us", "p50", false), ("p99_us", "p99", true)] {
            let points = run
                .select("locks", "contended")
                .filter(|record| record.client == client)
                .filter_map(|record| Some((record.value?, record.number(field)?)))
                .collect();
            hand_offs.push((format!("{legend} {label}"), colour, points, dashed));
        }
    }
    keep(
        "locks-handoff.svg",
        log_x_lines(
            &path("locks-handoff.svg"),
            "Hand-off latency: release returned -> next lock returned",
            "sessions",
            "µs",
            &hand_offs,
            false,
        ),
    )?;
    keep(
        "locks-distinct.svg",
        log_x_lines(
            &path("locks-distinct.svg"),
            "Distinct locks in one process: cycles/s",
            "distinct locks",
            "lock + release cycles/s",
            &rates("distinct"),
            true,
        ),
    )?;
    let packets: Points = run
        .select("locks", "waiters")
        .filter_map(|record| Some((record.value?, record.number("packets_per_handoff")?)))
        .collect();
    keep(
        "locks-waiters.svg",
        log_x_lines(
            &path("locks-waiters.svg"),
            "Waiters on one lock: server packets per hand-off (flat = one waiter woken)",
            "waiters",
            "packets per hand-off",
            &[("zk-recipes".to_owned(), OURS, packets, false)],
            true,
        ),
    )?;

    let queue_groups: Vec<(String, Vec<Option<f64>>)> = QUEUE_MODES
        .iter()
        .map(|(scenario, label)| {
            let rate = |client: &str| run.find("queues", scenario, client, None).and_then(crate::Record::ops);
            (label.to_string(), vec![rate("ours"), rate("curator")])
        })
        .filter(|(_, bars)| bars.iter().any(Option::is_some))
        .collect();
    keep(
        "queues.svg",
        grouped_bars(
            &path("queues.svg"),
            "Queues: items/s per mode",
            "items/s",
            &["zk-recipes", "Curator"],
            &queue_groups,
        ),
    )?;

    let leader_groups: Vec<(String, Vec<Option<f64>>)> = [
        ("close, p50", "graceful", "p50_ms"),
        ("close, p90", "graceful", "p90_ms"),
        ("crash: kill -> leader", "crash", "kill_to_leader_ms"),
        ("crash: expiry -> leader", "crash", "expiry_to_leader_ms"),
    ]
    .iter()
    .map(|(label, scenario, field)| {
        let value =
            |client: &str| run.find("leader", scenario, client, None).and_then(|record| record.number(field));
        (label.to_string(), vec![value("ours"), value("curator")])
    })
    .filter(|(_, bars)| bars.iter().any(Option::is_some))
    .collect();
    keep(
        "leader-failover.svg",
        grouped_bars(
            &path("leader-failover.svg"),
            "Leader failover: time until the other latch leads",
            "ms",
            &["zk-recipes", "Curator"],
            &leader_groups,
        ),
    )?;
    Ok(written)
}

fn failed(error: impl std::fmt::Display) -> String {
    error.to_string()
}

/// Lines over a logarithmic x axis; `from_zero` starts the y axis at 0 (else it spans the data,
/// which may be negative). Returns false (and writes nothing) without data.
fn log_x_lines(
    path: &Path,
    caption: &str,
    x_desc: &str,
    y_desc: &str,
    series: &[(String, RGBColor, Points, bool)],
    from_zero: bool,
) -> Result<bool, String> {
    let all: Vec<(f64, f64)> = series.iter().flat_map(|(_, _, points, _)| points.iter().copied()).collect();
    if all.is_empty() {
        return Ok(false);
    }
    let (x_min, x_max) = all.iter().fold((f64::MAX, f64::MIN), |(lo, hi), (x, _)| (lo.min(*x), hi.max(*x)));
    let (y_min, y_max) = all.iter().fold((f64::MAX, f64::MIN), |(lo, hi), (_, y)| (lo.min(*y), hi.max(*y)));
    let y_low = if from_zero { 0.0f64.min(y_min) } else { y_min - (y_max - y_min).abs() * 0.08 - 1.0 };
    let y_high = y_max + (y_max - y_low).abs() * 0.35 + 1e-9;
    let x_range = (x_min.max(1e-9) / 1.5)..(x_max * 1.5);
    // Ticks at the measured parameter values (a log axis would otherwise label only decades).
    let mut ticks: Vec<f64> = all.iter().map(|(x, _)| *x).collect();
    ticks.sort_by(f64::total_cmp);
    ticks.dedup();

    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(failed)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(caption, ("sans-serif", 20))
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(x_range.log_scale().with_key_points(ticks), y_low..y_high)
        .map_err(failed)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc(y_desc)
        .x_label_formatter(&|x| crate::format_rate(*x))
        .y_label_formatter(&|y| crate::format_rate(*y))
        .light_line_style(WHITE.mix(0.0))
        .draw()
        .map_err(failed)?;
    for (legend, colour, points, dashed) in series {
        if points.is_empty() {
            continue;
        }
        let mut points = points.clone();
        points.sort_by(|a, b| a.0.total_cmp(&b.0));
        let colour = *colour;
        let style = colour.stroke_width(2);
        if *dashed {
            chart
                .draw_series(DashedLineSeries::new(points.clone(), 8, 5, style))
                .map_err(failed)?
                .label(legend.as_str())
                .legend(move |(x, y)| {
                    EmptyElement::at((x, y))
                        + PathElement::new(vec![(0, 0), (8, 0)], colour.stroke_width(2))
                        + PathElement::new(vec![(13, 0), (20, 0)], colour.stroke_width(2))
                });
        } else {
            chart
                .draw_series(LineSeries::new(points.clone(), style))
                .map_err(failed)?
                .label(legend.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2)));
        }
        chart
            .draw_series(points.iter().map(|point| Circle::new(*point, 3, colour.filled())))
            .map_err(failed)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(failed)?;
    root.present().map_err(failed)?;
    Ok(true)
}

/// Grouped bars: one group per label, one bar per series (`None`: no bar). A log y axis when
/// the values span more than two decades (failover after a crash is seconds, after a close
/// milliseconds). Returns false without data.
fn grouped_bars(
    path: &Path,
    caption: &str,
    y_desc: &str,
    series: &[&str],
    groups: &[(String, Vec<Option<f64>>)],
) -> Result<bool, String> {
    let values: Vec<f64> = groups.iter().flat_map(|(_, bars)| bars.iter().flatten().copied()).collect();
    if values.is_empty() {
        return Ok(false);
    }
    let (low, high) = values.iter().fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(*v), hi.max(*v)));
    let colours = [OURS, CURATOR, FLOOR];
    // Integer x: each group 10 units wide, bars 1..9 split among the series.
    let width = (groups.len() * 10) as i32;
    let centres: Vec<i32> = (0..groups.len() as i32).map(|group| group * 10 + 5).collect();
    let labels: Vec<String> = groups.iter().map(|(label, _)| label.clone()).collect();
    let bar = 8 / series.len().max(1) as i32;

    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    root.fill(&WHITE).map_err(failed)?;
    let mut builder = ChartBuilder::on(&root);
    builder.caption(caption, ("sans-serif", 20)).margin(16).x_label_area_size(44).y_label_area_size(80);
    let x_axis = (0..width).with_key_points(centres.clone());
    let label_of = |x: &i32| {
        centres.iter().position(|centre| centre == x).map(|group| labels[group].clone()).unwrap_or_default()
    };
    let log = high / low.max(1e-9) > 100.0 && low > 0.0;
    let desc = if log { format!("{y_desc} (log scale)") } else { y_desc.to_owned() };
    macro_rules! draw {
        ($chart:ident, $base:expr) => {{
            $chart
                .configure_mesh()
                .disable_x_mesh()
                .x_label_formatter(&label_of)
                .y_desc(desc.as_str())
                .y_label_formatter(&|y| crate::format_rate(*y))
                .light_line_style(WHITE.mix(0.0))
                .draw()
                .map_err(failed)?;
            for (index, name) in series.iter().enumerate() {
                let colour = colours[index % colours.len()];
                let bars: Vec<_> = groups
                    .iter()
                    .enumerate()
                    .filter_map(|(group, (_, bars))| {
                        let value = (*bars.get(index)?)?;
                        let left = group as i32 * 10 + 1 + index as i32 * bar;
                        Some(Rectangle::new([(left, $base), (left + bar, value)], colour.filled()))
                    })
                    .collect();
                $chart
                    .draw_series(bars)
                    .map_err(failed)?
                    .label(*name)
                    .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], colour.filled()));
            }
            $chart
                .configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK.mix(0.4))
                .draw()
                .map_err(failed)?;
        }};
    }
    if log {
        let base = low / 2.0;
        let mut chart = builder.build_cartesian_2d(x_axis, (base..high * 6.0).log_scale()).map_err(failed)?;
        draw!(chart, base);
    } else {
        let mut chart = builder.build_cartesian_2d(x_axis, 0.0..high * 1.35).map_err(failed)?;
        draw!(chart, 0.0);
    }
    root.present().map_err(failed)?;
    Ok(true)
}
