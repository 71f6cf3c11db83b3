//! ZooKeeper paths: validation by the server's own rules, joining and splitting, sequence numbers
//! and Curator's protected node names.
//!
//! Everything here is pure: no server is involved.
//!
//! ```
//! use zk_recipes_framework::path;
//!
//! assert!(path::validate("/app/locks").is_ok());
//! assert!(path::validate("/app//locks").is_err());
//! assert_eq!(path::join("/app", "locks"), "/app/locks");
//! assert_eq!(path::split("/app/locks"), ("/app", "locks"));
//! assert_eq!(path::sequence_after("lock-0000000042", "lock-"), Some(42));
//! ```

use std::fmt::Write as _;

/// Why a path is not a valid ZooKeeper path (the rules of ZooKeeper's `PathUtils.validatePath`).
///
/// ```
/// use zk_recipes_framework::path::{validate, PathError};
///
/// assert_eq!(validate(""), Err(PathError::Empty));
/// assert_eq!(validate("/app//locks"), Err(PathError::EmptyName { index: 5 }));
/// assert_eq!(validate("/app/./locks"), Err(PathError::RelativeName { index: 5 }));
/// let err = validate("/app/\u{0}").unwrap_err();
/// assert_eq!(err.to_string(), "invalid character '\\0' at byte 5");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathError {
    /// The path is the empty string.
    #[error("path must not be empty")]
    Empty,
    /// The path does not start with `/`.
    #[error("path must start with '/'")]
    NotAbsolute,
    /// The path ends with `/` (only the root may).
    #[error("path must not end with '/'")]
    TrailingSlash,
    /// Two slashes in a row.
    #[error("empty node name at byte {index}")]
    EmptyName {
        /// Byte offset of the second slash.
        index: usize,
    },
    /// A `.` or `..` name.
    #[error("relative name ('.' or '..') at byte {index}")]
    RelativeName {
        /// Byte offset of the name.
        index: usize,
    },
    /// A character ZooKeeper refuses (NUL, control characters, private use, outside the BMP, ...).
    #[error("invalid character {character:?} at byte {index}")]
    InvalidCharacter {
        /// The character.
        character: char,
        /// Its byte offset.
        index: usize,
    },
}

/// Checks `path` by ZooKeeper's rules for a full node path.
///
/// ```
/// use zk_recipes_framework::path::{validate, PathError};
/// assert_eq!(validate("/"), Ok(()));
/// assert_eq!(validate("a"), Err(PathError::NotAbsolute));
/// assert_eq!(validate("/a/"), Err(PathError::TrailingSlash));
/// ```
pub fn validate(path: &str) -> Result<(), PathError> {
    validate_with(path, false)
}

/// Checks the path given to a sequential create: as [`validate`], but a trailing `/` is allowed
/// because the server appends the sequence number.
pub fn validate_sequential(path: &str) -> Result<(), PathError> {
    validate_with(path, true)
}

/// The checks of a path as a whole, before its names: `Ok(false)` for the root, which has none.
fn check_outline(path: &str, sequential: bool) -> Result<bool, PathError> {
    if path.is_empty() {
        return Err(PathError::Empty);
    }
    if !path.starts_with('/') {
        return Err(PathError::NotAbsolute);
    }
    if path.len() == 1 {
        return Ok(false);
    }
    if path.ends_with('/') && !sequential {
        return Err(PathError::TrailingSlash);
    }
    Ok(true)
}

fn validate_with(path: &str, sequential: bool) -> Result<(), PathError> {
    if !check_outline(path, sequential)? {
        return Ok(());
    }
    // Every call of the framework validates its paths. In the usual path, printable ASCII, only
    // a name can be at fault: one scan for the characters, then the names in order.
    let bytes = path.as_bytes();
    if bytes.iter().all(|&byte| (b' '..=b'~').contains(&byte)) {
        let mut names = path[1..].split('/');
        if sequential {
            // The server appends digits to the last name, so "/a/" and "/a/." are fine there.
            names.next_back();
        }
        let mut name_start = 1;
        for name in names {
            check_name(name, name_start)?;
            name_start += name.len() + 1;
        }
        return Ok(());
    }
    // Otherwise one pass over the bytes: each name is checked when the `/` after it, or the end,
    // is reached; the first fault by position is reported, as ZooKeeper's own `PathUtils` does.
    // An ASCII byte is its own character; only a character that starts with a non-ASCII byte is
    // decoded (its other bytes are never `/`).
    let mut name_start = 1;
    for (index, &byte) in bytes.iter().enumerate().skip(1) {
        if byte == b'/' {
            check_name(&path[name_start..index], name_start)?;
            name_start = index + 1;
        } else if byte.is_ascii() {
            if is_refused_ascii(byte) {
                return Err(PathError::InvalidCharacter { character: char::from(byte), index });
            }
        } else if path.is_char_boundary(index) {
            let character = path[index..].chars().next().expect("a character starts here");
            if is_refused_character(character) {
                return Err(PathError::InvalidCharacter { character, index });
            }
        }
    }
    // A sequential create appends digits to the last name, so "/a/" and "/a/." are fine there.
    if sequential {
        Ok(())
    } else {
        check_name(&path[name_start..], name_start)
    }
}

/// Checks one name of a path, found at byte `index`.
fn check_name(name: &str, index: usize) -> Result<(), PathError> {
    match name {
        "" => Err(PathError::EmptyName { index }),
        "." | ".." => Err(PathError::RelativeName { index }),
        _ => Ok(()),
    }
}

/// Whether `text` holds a character ZooKeeper refuses in a path (see [`validate`]).
pub(crate) fn has_refused_character(text: &str) -> bool {
    text.chars().any(is_refused_character)
}

/// The ASCII characters ZooKeeper refuses in a path: the control characters.
fn is_refused_ascii(byte: u8) -> bool {
    byte < 0x20 || byte == 0x7f
}

/// The characters ZooKeeper refuses in a path. Java sees text as UTF-16, and refuses every
/// surrogate, so every character outside the Basic Multilingual Plane is refused too.
fn is_refused_character(character: char) -> bool {
    matches!(character,
        '\u{0}'..='\u{1f}'
        | '\u{7f}'..='\u{9f}'
        | '\u{e000}'..='\u{f8ff}'
        | '\u{fff0}'..='\u{ffff}')
        || u32::from(character) > 0xffff
}

/// Joins a parent path and a child name (or relative path), as Curator's `ZKPaths.makePath`:
/// slashes between them are normalised; an empty child gives the parent.
///
/// ```
/// use zk_recipes_framework::path::join;
/// assert_eq!(join("/", "a"), "/a");
/// assert_eq!(join("/a/", "/b"), "/a/b");
/// assert_eq!(join("/a", ""), "/a");
/// ```
pub fn join(parent: &str, child: &str) -> String {
    let parent = parent.trim_matches('/');
    let child = child.trim_start_matches('/');
    let mut joined = String::with_capacity(parent.len() + child.len() + 2);
    for part in [parent, child] {
        if !part.is_empty() {
            joined.push('/');
            joined.push_str(part);
        }
    }
    if joined.is_empty() {
        joined.push('/');
    }
    joined
}

/// Splits a path into its parent and its last name: `"/a/b"` gives `("/a", "b")`, `"/a"` gives
/// `("/", "a")` and the root gives `("/", "")`.
pub fn split(path: &str) -> (&str, &str) {
    match path.rfind('/') {
        Some(0) => ("/", &path[1..]),
        Some(index) => (&path[..index], &path[index + 1..]),
        None => ("/", path),
    }
}

/// The parent of a path, `None` for the root.
pub fn parent(path: &str) -> Option<&str> {
    if path == "/" || path.is_empty() {
        None
    } else {
        Some(split(path).0)
    }
}

/// The last name of a path (empty for the root).
pub fn name(path: &str) -> &str {
    split(path).1
}

/// The proper ancestors of a path, from the top: `"/a/b/c"` gives `["/a", "/a/b"]`.
pub fn ancestors(path: &str) -> Vec<&str> {
    path.match_indices('/')
        .map(|(index, _)| index)
        .filter(|&index| index > 0)
        .map(|index| &path[..index])
        .collect()
}

/// Parses a sequence number: `-?\d+` as a signed 32-bit number.
///
/// ZooKeeper appends the parent's child version printed `%010d`: ten characters for most numbers,
/// negative after 2^31 creates under one parent (`-000000001`, `-2147483648`). Where the suffix
/// starts depends on the name the creator asked for, so pass only the text after it (see
/// [`sequence_after`]).
///
/// ```
/// use zk_recipes_framework::path::parse_sequence;
/// assert_eq!(parse_sequence("0000000007"), Some(7));
/// assert_eq!(parse_sequence("-000000003"), Some(-3));
/// assert_eq!(parse_sequence("12a"), None);
/// ```
pub fn parse_sequence(text: &str) -> Option<i32> {
    let digits = text.strip_prefix('-').unwrap_or(text);
    if digits.is_empty() || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// Appends `sequence` as ZooKeeper prints it after a sequential node's name: `%010d` within the
/// 32-bit range (`0000000042`, `-000000003`), 19 digits past it (ZOOKEEPER-4706). The usual case,
/// a number from 0 to `i32::MAX`, is written without the formatting machinery: every lock
/// acquire names its node this way.
pub(crate) fn push_sequence(path: &mut String, sequence: i64) {
    let within_32_bits = sequence <= i64::from(i32::MAX);
    if !within_32_bits || sequence < 0 {
        let width = if within_32_bits { 10 } else { 19 };
        write!(path, "{sequence:0width$}").expect("writing to a String does not fail");
        return;
    }
    let mut digits = [b'0'; 10];
    let mut rest = sequence;
    for digit in digits.iter_mut().rev() {
        *digit = b"0123456789"[(rest % 10) as usize];
        rest /= 10;
    }
    path.push_str(std::str::from_utf8(&digits).expect("ASCII digits"));
}

/// The sequence number in `name` after the last occurrence of `marker` (the name the creator asked
/// for, such as `lock-`), as Curator sorts lock nodes.
///
/// ```
/// use zk_recipes_framework::path::sequence_after;
/// assert_eq!(sequence_after("_c_x-lock-0000000042", "lock-"), Some(42));
/// assert_eq!(sequence_after("_c_x-lock--2147483648", "lock-"), Some(i32::MIN));
/// assert_eq!(sequence_after("other-0000000001", "lock-"), None);
/// ```
pub fn sequence_after(name: &str, marker: &str) -> Option<i32> {
    let index = name.rfind(marker)?;
    parse_sequence(&name[index + marker.len()..])
}

/// Curator's protected-name prefix, `_c_`.
pub const PROTECTED_MARKER: &str = "_c_";
/// Length of `_c_<uuid>-`: the marker, a hyphenated UUID (36 characters) and a separator.
pub const PROTECTED_PREFIX_LEN: usize = 3 + 36 + 1;

/// The name prefix `_c_<protected_id>-` that marks a node as created by the holder of
/// `protected_id` (Curator's `ProtectedUtils`).
pub fn protected_prefix(protected_id: &str) -> String {
    format!("{PROTECTED_MARKER}{protected_id}-")
}

/// The protected id (the UUID) inside a protected node name, if the name is protected.
///
/// ```
/// use zk_recipes_framework::path::protected_id;
/// let name = "_c_0f8c2e8e-6f43-4a4f-9a7a-1f1f6b0f6f0c-lock-0000000001";
/// assert_eq!(protected_id(name), Some("0f8c2e8e-6f43-4a4f-9a7a-1f1f6b0f6f0c"));
/// assert_eq!(protected_id("lock-0000000001"), None);
/// ```
pub fn protected_id(name: &str) -> Option<&str> {
    if is_protected(name) {
        name.get(PROTECTED_MARKER.len()..PROTECTED_PREFIX_LEN - 1)
    } else {
        None
    }
}

/// Whether a node name carries Curator's protected prefix.
pub fn is_protected(name: &str) -> bool {
    name.len() > PROTECTED_PREFIX_LEN
        && name.starts_with(PROTECTED_MARKER)
        && name.as_bytes()[PROTECTED_PREFIX_LEN - 1] == b'-'
}

/// The name without its protected prefix (unchanged if it has none).
pub fn strip_protected(name: &str) -> &str {
    if is_protected(name) {
        &name[PROTECTED_PREFIX_LEN..]
    } else {
        name
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sequences_are_printed_as_zookeeper_prints_them() {
        let cases: &[(i64, &str)] = &[
            (0, "0000000000"),
            (7, "0000000007"),
            (42, "0000000042"),
            (999_999_999, "0999999999"),
            (1_000_000_000, "1000000000"),
            (i64::from(i32::MAX), "2147483647"),
            (-3, "-000000003"),
            (i64::from(i32::MIN), "-2147483648"),
            (i64::from(i32::MAX) + 1, "0000000002147483648"),
        ];
        for &(sequence, printed) in cases {
            let mut path = String::from("/a/lock-");
            push_sequence(&mut path, sequence);
            assert_eq!(path, format!("/a/lock-{printed}"), "sequence {sequence}");
            assert_eq!(parse_sequence(printed).map(i64::from), i32::try_from(sequence).ok().map(i64::from));
        }
    }

    #[test]
    fn byte_validation_agrees_with_validating_character_by_character() {
        // The rules applied to each character in turn: the form the scans must agree with.
        fn by_characters(path: &str, sequential: bool) -> Result<(), PathError> {
            if !check_outline(path, sequential)? {
                return Ok(());
            }
            let mut name_start = 1;
            for (index, character) in path.char_indices().skip(1) {
                if character == '/' {
                    check_name(&path[name_start..index], name_start)?;
                    name_start = index + 1;
                } else if is_refused_character(character) {
                    return Err(PathError::InvalidCharacter { character, index });
                }
            }
            if sequential {
                Ok(())
            } else {
                check_name(&path[name_start..], name_start)
            }
        }
        let characters = [
            'a',
            '/',
            '.',
            '-',
            '\u{0}',
            '\u{1f}',
            '\u{20}',
            '\u{7e}',
            '\u{7f}',
            '\u{80}',
            '\u{9f}',
            '\u{a0}',
            'ü',
            '\u{7ff}',
            '\u{800}',
            '\u{d7ff}',
            '\u{e000}',
            '\u{f8ff}',
            '\u{f900}',
            '\u{ffef}',
            '\u{fff0}',
            '\u{ffff}',
            '\u{10000}',
            '😀',
        ];
        for first in characters {
            for second in characters {
                for third in characters {
                    let path: String = ['/', first, second, third].into_iter().collect();
                    for sequential in [false, true] {
                        assert_eq!(
                            validate_with(&path, sequential),
                            by_characters(&path, sequential),
                            "path {path:?}, sequential {sequential}"
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn validation_follows_zookeepers_rules() {
        let cases: &[(&str, Result<(), PathError>)] = &[
            ("/", Ok(())),
            ("/a", Ok(())),
            ("/a/b-c_d.e", Ok(())),
            ("/a/.b", Ok(())),
            ("/a/b..", Ok(())),
            ("/zk-recipes/ünïcode", Ok(())),
            ("", Err(PathError::Empty)),
            ("a/b", Err(PathError::NotAbsolute)),
            ("/a/", Err(PathError::TrailingSlash)),
            ("//a", Err(PathError::EmptyName { index: 1 })),
            ("/a//b", Err(PathError::EmptyName { index: 3 })),
            ("/a/./b", Err(PathError::RelativeName { index: 3 })),
            ("/a/..", Err(PathError::RelativeName { index: 3 })),
            ("/.", Err(PathError::RelativeName { index: 1 })),
            ("/a\u{0}b", Err(PathError::InvalidCharacter { character: '\u{0}', index: 2 })),
            ("/a\u{1f}", Err(PathError::InvalidCharacter { character: '\u{1f}', index: 2 })),
            ("/\u{7f}", Err(PathError::InvalidCharacter { character: '\u{7f}', index: 1 })),
            ("/\u{e000}", Err(PathError::InvalidCharacter { character: '\u{e000}', index: 1 })),
            ("/\u{fff0}", Err(PathError::InvalidCharacter { character: '\u{fff0}', index: 1 })),
            ("/😀", Err(PathError::InvalidCharacter { character: '😀', index: 1 })),
            // The first fault by position, as ZooKeeper's `PathUtils` reports it.
            ("/a//\u{0}", Err(PathError::EmptyName { index: 3 })),
            ("/\u{0}//a", Err(PathError::InvalidCharacter { character: '\u{0}', index: 1 })),
            ("/../\u{0}", Err(PathError::RelativeName { index: 1 })),
            // Non-ASCII characters at their byte offsets: C1 controls are refused, others not.
            ("/ü\u{85}", Err(PathError::InvalidCharacter { character: '\u{85}', index: 3 })),
            ("/ü/é/\u{9f}x", Err(PathError::InvalidCharacter { character: '\u{9f}', index: 7 })),
            ("/\u{a0}/\u{f900}/\u{ffef}", Ok(())),
        ];
        for (path, expected) in cases {
            assert_eq!(&validate(path), expected, "path {path:?}");
        }
    }

    #[test]
    fn sequential_paths_may_end_in_a_slash() {
        assert_eq!(validate_sequential("/a/"), Ok(()));
        assert_eq!(validate_sequential("/a/."), Ok(()));
        assert_eq!(validate_sequential("/a//b"), Err(PathError::EmptyName { index: 3 }));
        assert_eq!(validate_sequential("a"), Err(PathError::NotAbsolute));
    }

    #[test]
    fn join_and_split_are_inverse() {
        for (parent, child, joined) in [
            ("/", "a", "/a"),
            ("/a", "b", "/a/b"),
            ("/a/", "b", "/a/b"),
            ("/a", "/b", "/a/b"),
            ("/a", "b/c", "/a/b/c"),
            ("/a", "", "/a"),
            ("", "a", "/a"),
            ("", "", "/"),
        ] {
            assert_eq!(join(parent, child), joined, "join({parent:?}, {child:?})");
        }
        assert_eq!(split("/a/b"), ("/a", "b"));
        assert_eq!(split("/a"), ("/", "a"));
        assert_eq!(split("/"), ("/", ""));
        assert_eq!(parent("/a/b"), Some("/a"));
        assert_eq!(parent("/"), None);
        assert_eq!(name("/a/b"), "b");
        assert_eq!(ancestors("/a/b/c"), vec!["/a", "/a/b"]);
        assert!(ancestors("/a").is_empty());
    }

    #[test]
    fn sequence_numbers_are_signed_32_bit() {
        assert_eq!(parse_sequence("0000000000"), Some(0));
        assert_eq!(parse_sequence("2147483647"), Some(i32::MAX));
        assert_eq!(parse_sequence("-2147483648"), Some(i32::MIN));
        assert_eq!(parse_sequence("-000000001"), Some(-1));
        assert_eq!(parse_sequence("2147483648"), None, "out of range");
        assert_eq!(parse_sequence("00000a0001"), None);
        assert_eq!(parse_sequence("+000000001"), None);
        assert_eq!(parse_sequence("-"), None);
        assert_eq!(parse_sequence(""), None);
        assert_eq!(sequence_after("lock-2147483647", "lock-"), Some(i32::MAX));
        assert_eq!(sequence_after("lock--1000000000", "lock-"), Some(-1_000_000_000));
        assert_eq!(sequence_after("lock-1000000000", "lock-"), Some(1_000_000_000));
        assert_eq!(sequence_after("_c_a-lock-b-lock-0000000003", "lock-"), Some(3), "after the last marker");
        assert_eq!(sequence_after("qn-0000000010", "qn-"), Some(10));
        assert_eq!(sequence_after("qn-0000000010", "lock-"), None);
    }

    /// After a parent's counter wraps, `%010d` writes ten or eleven characters (`-000000001`,
    /// `-2147483648`): each is found whole after the name asked for, even when that ends in `-`.
    #[test]
    fn sequences_across_the_wrap_are_read_whole_after_the_marker() {
        for sequence in
            [2_147_483_646, 2_147_483_647, -2_147_483_648, -2_147_483_647, -1_000_000_000, -999_999_999, -1]
        {
            let mut path = String::from("/a/_c_x-lock-");
            push_sequence(&mut path, i64::from(sequence));
            assert_eq!(sequence_after(name(&path), "lock-"), Some(sequence), "{path}");
        }
        assert_eq!(sequence_after("x-72057--2147483648", "x-72057-"), Some(i32::MIN));
        assert_eq!(sequence_after("abc__lock__-2147483647", "__lock__"), Some(-2_147_483_647));
    }

    #[test]
    fn protected_names_round_trip() {
        let id = "3f2b8c1e-0a4d-4c55-9e1b-6d0f8f6a2b7c";
        let prefix = protected_prefix(id);
        assert_eq!(prefix.len(), PROTECTED_PREFIX_LEN);
        let name = format!("{prefix}lock-0000000003");
        assert!(is_protected(&name));
        assert_eq!(protected_id(&name), Some(id));
        assert_eq!(strip_protected(&name), "lock-0000000003");
        assert!(!is_protected(&prefix), "a bare prefix has no name after it");
        assert!(!is_protected("_c_short-lock-0000000001"));
        assert_eq!(strip_protected("lock-0000000001"), "lock-0000000001");
    }
}
