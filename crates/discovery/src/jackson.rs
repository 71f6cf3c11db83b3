//! JSON written as Jackson 2.14 writes it (the `ObjectMapper` of Curator's
//! `JsonInstanceSerializer`): the same escapes and the same number forms, so a Rust instance's
//! bytes equal a Java instance's.
//!
//! Where serde_json's compact output differs from Jackson's:
//! - control characters without a short escape: Jackson writes `\u001F` (upper-case hex), serde_json
//!   `\u001f`;
//! - characters outside the Basic Multilingual Plane: Jackson's UTF-8 writer escapes them as a
//!   surrogate pair (`\uD834\uDD1E`), serde_json writes the UTF-8 bytes;
//! - floating-point numbers: Jackson writes Java's `Double.toString` (`1.0E10`, `100.0`, `1.0E-4`),
//!   serde_json `10000000000.0`, `100.0`, `0.0001`.
//!
//! Everything else (`\"`, `\\`, `\b`, `\f`, `\n`, `\r`, `\t`, `/` and DEL left alone, other
//! characters as UTF-8, integers) is the same in both.

use std::io::{self, Write};

use serde_json::ser::{CharEscape, Formatter};

/// serde_json's compact formatter with Jackson's escapes and number forms.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct JacksonFormatter;

impl Formatter for JacksonFormatter {
    fn write_f32<W: ?Sized + Write>(&mut self, writer: &mut W, value: f32) -> io::Result<()> {
        writer.write_all(java_float_text(&format!("{value:e}")).as_bytes())
    }

    fn write_f64<W: ?Sized + Write>(&mut self, writer: &mut W, value: f64) -> io::Result<()> {
        writer.write_all(java_float_text(&format!("{value:e}")).as_bytes())
    }

    fn write_string_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> io::Result<()> {
        let mut plain_from = 0;
        for (index, character) in fragment.char_indices() {
            if (character as u32) < 0x10000 {
                continue;
            }
            writer.write_all(&fragment.as_bytes()[plain_from..index])?;
            let mut units = [0u16; 2];
            for unit in character.encode_utf16(&mut units) {
                write!(writer, "\\u{unit:04X}")?;
            }
            plain_from = index + character.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[plain_from..])
    }

    fn write_char_escape<W: ?Sized + Write>(&mut self, writer: &mut W, escape: CharEscape) -> io::Result<()> {
        let text: &[u8] = match escape {
            CharEscape::Quote => b"\\\"",
            CharEscape::ReverseSolidus => b"\\\\",
            CharEscape::Solidus => b"\\/",
            CharEscape::Backspace => b"\\b",
            CharEscape::FormFeed => b"\\f",
            CharEscape::LineFeed => b"\\n",
            CharEscape::CarriageReturn => b"\\r",
            CharEscape::Tab => b"\\t",
            CharEscape::AsciiControl(byte) => return write!(writer, "\\u{byte:04X}"),
        };
        writer.write_all(text)
    }
}

/// Java's `Double.toString` (and `Float.toString`) of a finite number, from Rust's shortest
/// round-trip digits in scientific form (`format!("{:e}")`: `1.5e0`, `-1e10`, `1.2345e-5`).
///
/// Java writes plain decimals for magnitudes in [10⁻³, 10⁷) with at least one digit after the
/// point (`100.0`, `0.001`), and otherwise one digit, a point, at least one more digit and `E`
/// with the exponent (`1.0E10`, `1.2345E-5`). The digits are the shortest that read back as the
/// same number, as Java 19 and later choose them; Java 17's gives a longer string for a few
/// numbers (JDK-4511638: `Float.toString(3.0e10f)` is `3.0000001E10` there), and every Java
/// writes the smallest subnormal as `4.9E-324` where the shortest digits are `5.0E-324`: such
/// numbers then differ.
fn java_float_text(scientific: &str) -> String {
    let (sign, unsigned) = match scientific.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", scientific),
    };
    let (mantissa, exponent) = unsigned.split_once('e').unwrap_or((unsigned, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if digits.bytes().all(|digit| digit == b'0') {
        return format!("{sign}0.0");
    }
    let text = if (-3..7).contains(&exponent) {
        if exponent >= 0 {
            let integer_len = exponent as usize + 1;
            let padded = format!("{digits:0<integer_len$}");
            let (integer, fraction) = padded.split_at(integer_len);
            let fraction = if fraction.is_empty() { "0" } else { fraction };
            format!("{integer}.{fraction}")
        } else {
            let zeros = "0".repeat((-exponent - 1) as usize);
            format!("0.{zeros}{digits}")
        }
    } else {
        let (first, rest) = digits.split_at(1);
        let rest = if rest.is_empty() { "0" } else { rest };
        format!("{first}.{rest}E{exponent}")
    };
    format!("{sign}{text}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn java(value: f64) -> String {
        java_float_text(&format!("{value:e}"))
    }

    #[test]
    fn doubles_are_written_as_java_writes_them() {
        // Each pair: what Java 17's Double.toString printed for the number.
        let cases = [
            (1.5, "1.5"),
            (1e10, "1.0E10"),
            (100.0, "100.0"),
            (0.0, "0.0"),
            (-0.0, "-0.0"),
            (0.001, "0.001"),
            (0.0001, "1.0E-4"),
            (1234567.5, "1234567.5"),
            (9999999.0, "9999999.0"),
            (10000000.0, "1.0E7"),
            (-2.5e-7, "-2.5E-7"),
            (123.456, "123.456"),
            (1.7976931348623157e308, "1.7976931348623157E308"),
            (2.2250738585072014e-308, "2.2250738585072014E-308"),
            (0.1, "0.1"),
            (12345.0, "12345.0"),
        ];
        for (value, expected) in cases {
            assert_eq!(java(value), expected, "{value:e}");
        }
        assert_eq!(java_float_text(&format!("{:e}", 1.1f32)), "1.1");
        assert_eq!(java_float_text(&format!("{:e}", 1.0e10f32)), "1.0E10");
        assert_eq!(java_float_text(&format!("{:e}", 2.5e-5f32)), "2.5E-5");
    }

    fn write(value: &serde_json::Value) -> String {
        let mut out = Vec::new();
        let mut serializer = serde_json::Serializer::with_formatter(&mut out, JacksonFormatter);
        serde::Serialize::serialize(value, &mut serializer).expect("serialize");
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn strings_are_escaped_as_jackson_escapes_them() {
        let value = serde_json::json!("a\"b\\c\t\n\r\u{8}\u{c}\u{1}\u{1f}\u{7f} é € 𝄞 </x> \u{2028}");
        assert_eq!(
            write(&value),
            "\"a\\\"b\\\\c\\t\\n\\r\\b\\f\\u0001\\u001F\u{7f} é € \\uD834\\uDD1E </x> \u{2028}\""
        );
        assert_eq!(write(&serde_json::json!({"𝄞": 1.0e10})), "{\"\\uD834\\uDD1E\":1.0E10}");
    }
}
