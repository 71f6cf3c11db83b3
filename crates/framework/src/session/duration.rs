//! Durations as people read them, for error messages and logs.

use std::fmt;
use std::time::Duration;

/// Shows a [`Duration`] as people read it: `2 s`, `1.5 s`, `500 ms`, `250 µs` — at most two
/// decimals, trailing zeros dropped — never as `Debug`'s `2.000979459s`.
///
/// ```
/// use std::time::Duration;
/// use zk_recipes_framework::ReadableDuration;
///
/// assert_eq!(ReadableDuration(Duration::from_nanos(2_000_979_459)).to_string(), "2 s");
/// assert_eq!(ReadableDuration(Duration::from_millis(1_500)).to_string(), "1.5 s");
/// assert_eq!(ReadableDuration(Duration::from_millis(500)).to_string(), "500 ms");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadableDuration(pub Duration);

impl fmt::Display for ReadableDuration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let nanos = self.0.as_nanos() as f64;
        let (value, unit) = if nanos >= 1e9 {
            (nanos / 1e9, "s")
        } else if nanos >= 1e6 {
            (nanos / 1e6, "ms")
        } else if nanos >= 1e3 {
            (nanos / 1e3, "µs")
        } else {
            (nanos, "ns")
        };
        let rounded = format!("{value:.2}");
        let trimmed = rounded.trim_end_matches('0').trim_end_matches('.');
        write!(f, "{trimmed} {unit}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(duration: Duration) -> String {
        ReadableDuration(duration).to_string()
    }

    #[test]
    fn durations_read_as_people_write_them() {
        assert_eq!(show(Duration::from_nanos(2_000_979_459)), "2 s");
        assert_eq!(show(Duration::from_secs(30)), "30 s");
        assert_eq!(show(Duration::from_millis(1_500)), "1.5 s");
        assert_eq!(show(Duration::from_millis(1_234)), "1.23 s");
        assert_eq!(show(Duration::from_millis(500)), "500 ms");
        assert_eq!(show(Duration::from_micros(2_500)), "2.5 ms");
        assert_eq!(show(Duration::from_micros(250)), "250 µs");
        assert_eq!(show(Duration::from_nanos(7)), "7 ns");
        assert_eq!(show(Duration::ZERO), "0 ns");
        assert_eq!(show(Duration::from_secs(3_600)), "3600 s");
    }
}
