//! Who holds a lease, and how each layout writes it: kazoo's JSON (as Python's `json.dumps` prints
//! it, byte for byte) and the native layout's.

use std::io;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::ser::Formatter;
use time::{Date, Month, OffsetDateTime, PrimitiveDateTime, Time};

/// Who holds a lease, as read from the server ([`Lease::holder`](crate::Lease::holder), or in a
/// [`LeaseError::Held`](crate::LeaseError::Held)).
///
/// ```no_run
/// # async fn demo(lease: zk_recipes_lease::Lease) -> zk_recipes_lease::Result<()> {
/// if let Some(holder) = lease.holder().await? {
///     println!("{} holds it (token {}), until {:?}", holder.identifier, holder.fencing_token, holder.end);
/// }
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LeaseHolder {
    /// The holder's identifier.
    pub identifier: String,
    /// kazoo layout: the end the holder wrote, by its clock (UTC, whole seconds). It may have
    /// passed: kazoo's record stays until someone takes the lease. `None` in the native layout,
    /// where the server deletes the node when the lease ends.
    pub end: Option<SystemTime>,
    /// Native layout: the duration the holder took the lease for (each renew restarts it). `None`
    /// in the kazoo layout.
    pub duration: Option<Duration>,
    /// The record's `czxid`: it grows from one holder to the next.
    pub fencing_token: i64,
}

/// kazoo's format version (`NonBlockingLease._version`).
pub(crate) const KAZOO_VERSION: i64 = 1;

/// kazoo's `_date_format`, `%Y-%m-%dT%H:%M:%S`, UTC: `secs` seconds after the epoch (clamped to
/// the years 0000 to 9999, which the format can show).
pub(crate) fn format_utc(secs: i64) -> String {
    let time = OffsetDateTime::from_unix_timestamp(secs).unwrap_or(if secs < 0 {
        PrimitiveDateTime::MIN.assume_utc()
    } else {
        PrimitiveDateTime::MAX.assume_utc()
    });
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        time.year(),
        u8::from(time.month()),
        time.day(),
        time.hour(),
        time.minute(),
        time.second()
    )
}

/// Reads kazoo's `%Y-%m-%dT%H:%M:%S` (as `strptime` does, fields of one or two digits after a
/// four-digit year) as seconds after the epoch, UTC.
pub(crate) fn parse_utc(text: &str) -> Option<i64> {
    let (date, time) = text.split_once('T')?;
    let mut date_fields = date.split('-');
    let mut time_fields = time.split(':');
    let field = |text: Option<&str>, max_len: usize| -> Option<u16> {
        let text = text?;
        (!text.is_empty() && text.len() <= max_len && text.bytes().all(|byte| byte.is_ascii_digit()))
            .then(|| text.parse().ok())
            .flatten()
    };
    let year = field(date_fields.next(), 4)?;
    let month = field(date_fields.next(), 2)?;
    let day = field(date_fields.next(), 2)?;
    let hour = field(time_fields.next(), 2)?;
    let minute = field(time_fields.next(), 2)?;
    let second = field(time_fields.next(), 2)?;
    if date_fields.next().is_some() || time_fields.next().is_some() {
        return None;
    }
    let small = |value: u16| u8::try_from(value).ok();
    let date =
        Date::from_calendar_date(i32::from(year), Month::try_from(small(month)?).ok()?, small(day)?).ok()?;
    let time = Time::from_hms(small(hour)?, small(minute)?, small(second)?).ok()?;
    Some(PrimitiveDateTime::new(date, time).assume_utc().unix_timestamp())
}

/// Microseconds after the epoch of `time` (negative before it), as Python's `datetime` counts.
pub(crate) fn epoch_micros(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_micros()).unwrap_or(i64::MAX),
        Err(before) => -i64::try_from(before.duration().as_micros()).unwrap_or(i64::MAX),
    }
}

/// The instant `secs` seconds after the epoch.
pub(crate) fn from_epoch_secs(secs: i64) -> SystemTime {
    match u64::try_from(secs) {
        Ok(secs) => UNIX_EPOCH + Duration::from_secs(secs),
        Err(_) => UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs()),
    }
}

/// serde_json's output as Python's `json.dumps` writes it (`ensure_ascii=True`, the default
/// separators): `", "` between members, `": "` after a key, and every character outside
/// `' '..='~'` that serde_json leaves as it is escaped as `\uxxxx` (lowercase hex, UTF-16: a
/// surrogate pair beyond the BMP). serde_json already escapes `"`, `\`, `\b \f \n \r \t` by
/// name and other control characters as `\u00xx`, as Python does.
struct PythonFormatter;

impl Formatter for PythonFormatter {
    fn begin_object_key<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        if first {
            Ok(())
        } else {
            writer.write_all(b", ")
        }
    }

    fn begin_object_value<W: ?Sized + io::Write>(&mut self, writer: &mut W) -> io::Result<()> {
        writer.write_all(b": ")
    }

    fn begin_array_value<W: ?Sized + io::Write>(&mut self, writer: &mut W, first: bool) -> io::Result<()> {
        self.begin_object_key(writer, first)
    }

    fn write_string_fragment<W: ?Sized + io::Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        for character in fragment.chars() {
            if (' '..='~').contains(&character) {
                writer.write_all(&[character as u8])?;
            } else {
                let mut units = [0u16; 2];
                for unit in character.encode_utf16(&mut units) {
                    write!(writer, "\\u{unit:04x}")?;
                }
            }
        }
        Ok(())
    }
}

/// kazoo's record as `NonBlockingLease` writes it, its keys in kazoo's order.
#[derive(Serialize)]
struct KazooWrite<'a> {
    version: i64,
    holder: &'a str,
    end: String,
}

/// kazoo's `lease_holder` data: `json.dumps({"version": 1, "holder": ident, "end": end})`, UTF-8.
pub(crate) fn kazoo_encode(identifier: &str, end_secs: i64) -> Vec<u8> {
    let record = KazooWrite { version: KAZOO_VERSION, holder: identifier, end: format_utc(end_secs) };
    let mut data = Vec::new();
    record
        .serialize(&mut serde_json::Serializer::with_formatter(&mut data, PythonFormatter))
        .expect("a record of strings and a number always serializes");
    data
}

/// What kazoo's `lease_holder` says, read as kazoo reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum KazooRecord {
    /// Format version 1: the holder and its end (seconds after the epoch, UTC).
    Current { holder: String, end_secs: i64 },
    /// Another version (as JSON): kazoo leaves such a lease alone.
    OtherVersion(String),
}

/// Reads kazoo's `lease_holder` data; `Err` says what kazoo would fail on.
pub(crate) fn kazoo_decode(data: &[u8]) -> Result<KazooRecord, String> {
    let text = std::str::from_utf8(data).map_err(|err| format!("not UTF-8: {err}"))?;
    let value: serde_json::Value = serde_json::from_str(text).map_err(|err| format!("not JSON: {err}"))?;
    let version = value.get("version").ok_or("no \"version\"")?;
    // Python's `!=` takes 1.0 (and True) as 1.
    let is_current = version.as_f64() == Some(KAZOO_VERSION as f64) || version.as_bool() == Some(true);
    if !is_current {
        return Ok(KazooRecord::OtherVersion(version.to_string()));
    }
    let end = value.get("end").and_then(serde_json::Value::as_str).ok_or("no \"end\" string")?;
    let end_secs = parse_utc(end).ok_or_else(|| format!("\"end\" {end:?} is not %Y-%m-%dT%H:%M:%S"))?;
    let holder = match value.get("holder") {
        Some(serde_json::Value::String(holder)) => holder.clone(),
        Some(other) => other.to_string(),
        None => return Err("no \"holder\"".into()),
    };
    Ok(KazooRecord::Current { holder, end_secs })
}

/// The native layout's node data: who holds it, for how long, and which acquire created it (so an
/// acquire whose create reply was lost knows its own node).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct NativeRecord {
    pub(crate) holder: String,
    pub(crate) duration_ms: u64,
    pub(crate) attempt: String,
}

impl NativeRecord {
    pub(crate) fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("a record of strings and a number always serializes")
    }

    pub(crate) fn decode(data: &[u8]) -> Result<Self, String> {
        serde_json::from_slice(data).map_err(|err| format!("not a native lease record: {err}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_round_trip_and_match_python() {
        // Python: datetime.datetime(2026, 11, 27, 21, 5, 9).strftime(...) / calendar.timegm.
        assert_eq!(format_utc(1_795_813_509), "2026-11-27T21:05:09");
        assert_eq!(parse_utc("2026-11-27T21:05:09"), Some(1_795_813_509));
        assert_eq!(format_utc(0), "1970-01-01T00:00:00");
        assert_eq!(format_utc(951_825_600), "2000-02-29T12:00:00");
        assert_eq!(parse_utc("2000-02-29T12:00:00"), Some(951_825_600));
        assert_eq!(parse_utc("2001-02-29T12:00:00"), None);
        assert_eq!(parse_utc("2026-1-2T3:4:5"), Some(parse_utc("2026-01-02T03:04:05").unwrap()));
        assert_eq!(parse_utc("2026-11-27 21:05:09"), None);
        assert_eq!(parse_utc("2026-11-27T21:05:09.5"), None);
        for secs in [-86_401, 1, 68_169_600, 4_102_444_800, 253_402_300_799] {
            assert_eq!(parse_utc(&format_utc(secs)), Some(secs), "{secs}");
        }
    }

    #[test]
    fn json_is_python_json_dumps() {
        // Python 3: json.dumps({"version": 1, "holder": "h\"é😀\x7f\n", "end": "2026-11-27T21:05:09"})
        assert_eq!(
            String::from_utf8(kazoo_encode("h\"é😀\u{7f}\n", 1_795_813_509)).unwrap(),
            r#"{"version": 1, "holder": "h\"\u00e9\ud83d\ude00\u007f\n", "end": "2026-11-27T21:05:09"}"#
        );
        assert_eq!(
            String::from_utf8(kazoo_encode("a\\b\u{1}\t", 0)).unwrap(),
            r#"{"version": 1, "holder": "a\\b\u0001\t", "end": "1970-01-01T00:00:00"}"#
        );
    }

    #[test]
    fn kazoo_records_read_as_kazoo_reads_them() {
        let data = kazoo_encode("worker é", 1_795_813_509);
        assert_eq!(
            kazoo_decode(&data),
            Ok(KazooRecord::Current { holder: "worker é".into(), end_secs: 1_795_813_509 })
        );
        assert_eq!(
            kazoo_decode(br#"{"version": 2, "holder": "x", "end": "?"}"#),
            Ok(KazooRecord::OtherVersion("2".into()))
        );
        assert!(matches!(
            kazoo_decode(br#"{"version": 1.0, "holder": "x", "end": "2026-11-27T21:05:09"}"#),
            Ok(KazooRecord::Current { .. })
        ));
        assert!(kazoo_decode(b"{}").is_err());
        assert!(kazoo_decode(b"not json").is_err());
        assert!(kazoo_decode(br#"{"version": 1, "holder": "x", "end": "tomorrow"}"#).is_err());
    }

    #[test]
    fn native_records_round_trip() {
        let record = NativeRecord { holder: "h".into(), duration_ms: 1500, attempt: "a".into() };
        assert_eq!(NativeRecord::decode(&record.encode()), Ok(record));
        assert!(NativeRecord::decode(b"x").is_err());
    }
}
