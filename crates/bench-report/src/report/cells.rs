//! What the report's tables are made of: numbers formatted for a cell ([`format_rate`] and the
//! private rest), ratio cells, and the note that explains them; and [`PlotLink`], how a section
//! shows a plot.

use crate::run::{paired_ratio, round_ratios, Record};

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

pub(super) fn cell(value: Option<f64>, format: impl Fn(f64) -> String) -> String {
    value.map_or_else(|| "–".to_owned(), format)
}

pub(super) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b != 0.0 => Some(a / b),
        _ => None,
    }
}

/// A ratio cell: the ratio of the medians, then in brackets the median of the per-round ratios
/// ([`paired_ratio`]) when the rounds pair up.
pub(super) fn ratio_cell(a: Option<&Record>, b: Option<&Record>) -> String {
    let of_medians = cell(ratio(a.and_then(Record::ops), b.and_then(Record::ops)), times);
    match paired_ratio(a, b) {
        Some(paired) => format!("{of_medians} ({})", times(paired)),
        None => of_medians,
    }
}

/// Each round's ratio of `a` to `b`, in round order (`0.93 · 1.02 · 0.88`), or `–`.
pub(super) fn round_ratios_cell(a: Option<&Record>, b: Option<&Record>) -> String {
    round_ratios(a, b).map_or_else(
        || "–".to_owned(),
        |ratios| ratios.into_iter().map(times).collect::<Vec<_>>().join(" · "),
    )
}

pub(super) const RATIO_CELLS: &str =
    "In a ratio column, the first figure is the ratio of the two medians; the one in \
    brackets is the median of each round's own ratio (the two clients measured back to back in that round), \
    which a drift of the machine between rounds moves less.";

pub(super) fn us(value: f64) -> String {
    format!("{value:.0}")
}

/// An uncontended row's measured cells: cycles/s, p50 µs, p99 µs, CPU µs per cycle.
pub(super) fn cycle_cells(found: &Record) -> String {
    [
        cell(found.ops(), format_rate),
        cell(found.number("p50_us"), us),
        cell(found.number("p99_us"), us),
        cell(found.number("cpu_us_per_op"), cpu_us),
    ]
    .join(" | ")
}

pub(super) fn cpu_us(value: f64) -> String {
    format!("{value:.1}")
}

/// A cell of CPU µs per operation, ours / the floor's, from their records.
pub(super) fn cpu_pair(ours: Option<&Record>, floor: Option<&Record>) -> String {
    field_pair(ours, floor, "cpu_us_per_op", cpu_us)
}

/// A cell of one numeric `field` of two records, `a / b` (`12.5 / 10.1`), or `–` unless both
/// have it.
pub(super) fn field_pair(
    a: Option<&Record>,
    b: Option<&Record>,
    field: &str,
    format: impl Fn(f64) -> String,
) -> String {
    let of = |found: Option<&Record>| found.and_then(|found| found.number(field));
    match (of(a), of(b)) {
        (Some(a), Some(b)) => format!("{} / {}", format(a), format(b)),
        _ => "–".to_owned(),
    }
}

/// The share of our cycles that made a reaped lock directory again, back to back and interleaved.
pub(super) fn remade_pair(back_to_back: Option<&Record>, interleaved: Option<&Record>) -> String {
    let share = |found: Option<&Record>| {
        cell(found.and_then(|found| found.number("remade_dirs_per_cycle")), |share| {
            format!("{:.1}%", share * 100.0)
        })
    };
    format!("{} / {}", share(back_to_back), share(interleaved))
}

pub(super) fn times(value: f64) -> String {
    format!("{value:.2}")
}

pub(super) type PlotLink<'a> = dyn Fn(&mut String, &str, &str) + 'a;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Run;

    #[test]
    fn rates_are_grouped() {
        assert_eq!(format_rate(1234567.4), "1,234,567");
        assert_eq!(format_rate(999.0), "999");
        assert_eq!(format_rate(4.567), "4.57");
        assert_eq!(format_rate(0.0), "0");
        assert_eq!(format_rate(-12345.0), "-12,345");
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
}
