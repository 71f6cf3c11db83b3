//! Who a holder is, from its name: `<tag>-<client>[-<n>]`, the tag's first letter naming the kind
//! of process (see `crate::run`). A leaf: the checkers and the run read it.

use std::collections::HashMap;

/// Client pauses per process tag: when each SIGSTOP and SIGCONT was sent (epoch µs).
pub type Pauses = HashMap<String, Vec<(i64, i64)>>;

/// Curator contenders' tags start with `j`.
pub fn is_curator(holder: &str) -> bool {
    holder.starts_with('j')
}

/// Rust contenders' tags start with `r` (per recipe) or `b` (busy sessions).
pub fn is_rust(holder: &str) -> bool {
    holder.starts_with('r') || holder.starts_with('b')
}

/// The process tag of a holder `<tag>-<client>-<n>`.
pub fn tag_of(holder: &str) -> &str {
    holder.split('-').next().unwrap_or(holder)
}

/// Whether `holder` is a Curator member of the mix's: the run tags the Curator mix processes with
/// an upper-case letter (`j` is the lock contenders').
pub fn is_curator_member(holder: &str) -> bool {
    holder.starts_with(|first: char| first.is_ascii_uppercase())
}
