//! The contenders' event log: one line per event, written with one `write` call each (so a
//! SIGKILLed contender leaves whole lines), read back by the checkers.
//!
//! ```text
//! A <recipe> <holder> <micros> <token>     acquired (token: fencing token, 0 without locking)
//! R <recipe> <holder> <micros>             the critical section ended; release starts
//! L <recipe> <holder> <micros>             lost() fired while holding
//! W <recipe> <holder> <micros>             a guard-counter increment was sent
//! I <recipe> <holder> <micros> ok|unc|no   its outcome: committed, unknown, not committed
//! V <recipe> <holder> <micros> <kind> ...  a violation seen inside the hold (marker, counter, fencing)
//! E <recipe> <holder> <micros> ...         an error (acquire timeout, connection loss, ...)
//! S <queue> <consumer> <micros> <session>  a Curator queue consumer's session id (decimal), on
//!                                          connecting and after every reconnection
//! G <recipe> <holder> <micros> ...         an acquire gave up early on purpose (busy sessions:
//!                                          `deadline <n>us` or `dropped after <n>us`)
//! B <recipe> <tag> <micros> <batches> <batched writes> <fallbacks> <cleanups> <found again>
//!                                          a busy-session process's framework counts so far
//!                                          ([`crate::tally`]); `<recipe>` is its first
//! ```
//!
//! Holders are `<process tag>-<client>-<n>` (busy sessions: `<tag>-<session>-<loop>.<n>`), unique
//! across the run. The Curator contender (`crates/testing/java/CuratorChaos.java`), the ZooKeeper-recipe
//! contender (`crates/chaos/java/ZkRecipeChaos.java`) and the kazoo contender
//! (`crates/chaos/python/kazoo_chaos.py`) write the same format.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::sync::Mutex;
use std::time::{SystemTime, UNIX_EPOCH};

use crate::recipes::Recipe;

/// Microseconds since the epoch: the clock every contender (Rust and Java) logs with.
pub fn epoch_micros() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|since| since.as_micros() as i64).unwrap_or(0)
}

/// Appends events to a contender's log.
#[derive(Debug)]
pub struct EventLog {
    file: Mutex<File>,
}

impl EventLog {
    /// Opens `path` for appending (created if missing).
    pub fn open(path: &Path) -> std::io::Result<EventLog> {
        let file = OpenOptions::new().create(true).append(true).open(path)?;
        Ok(EventLog { file: Mutex::new(file) })
    }

    /// Writes `line` and a newline in one write (for logs in their own format, e.g.
    /// [`crate::counters`]).
    pub fn line(&self, line: &str) {
        let mut file = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let _ = file.write_all(format!("{line}\n").as_bytes());
    }

    /// Writes one event line: `<kind> <recipe> <holder> <now> <rest>`.
    pub fn event(&self, kind: char, recipe: Recipe, holder: &str, rest: &str) {
        let line = if rest.is_empty() {
            format!("{kind} {recipe} {holder} {}\n", epoch_micros())
        } else {
            format!("{kind} {recipe} {holder} {} {rest}\n", epoch_micros())
        };
        let mut file = self.file.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        // One write per line; a failed write only loses evidence, which the checkers count as
        // unknown, never as success.
        let _ = file.write_all(line.as_bytes());
    }
}

/// One parsed event line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Event {
    /// `A`, `R`, `L`, `W`, `I`, `V` or `E`.
    pub kind: char,
    /// The recipe.
    pub recipe: Recipe,
    /// The holder.
    pub holder: String,
    /// When, in epoch microseconds.
    pub micros: i64,
    /// The fields after the time.
    pub rest: Vec<String>,
}

impl Event {
    /// Parses a line; `None` for a malformed (e.g. torn) line.
    pub fn parse(line: &str) -> Option<Event> {
        let mut fields = line.split_whitespace();
        let kind = fields.next()?;
        let kind = kind.chars().next().filter(|_| kind.len() == 1)?;
        let recipe = fields.next()?.parse().ok()?;
        let holder = fields.next()?.to_owned();
        let micros = fields.next()?.parse().ok()?;
        Some(Event { kind, recipe, holder, micros, rest: fields.map(str::to_owned).collect() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_parse() {
        let event = Event::parse("V mutex r1/0/3 1700000000000000 marker owner=1a").expect("parses");
        assert_eq!(event.kind, 'V');
        assert_eq!(event.recipe, Recipe::Mutex);
        assert_eq!(event.holder, "r1/0/3");
        assert_eq!(event.micros, 1_700_000_000_000_000);
        assert_eq!(event.rest, vec!["marker", "owner=1a"]);
        assert_eq!(Event::parse("A mutex r1/0/3"), None);
        assert_eq!(Event::parse("A nope r1/0/3 5 1"), None);
    }

    #[test]
    fn the_log_appends_whole_lines() {
        let dir = tempfile_dir();
        let path = dir.join("events.log");
        let log = EventLog::open(&path).expect("open");
        log.event('A', Recipe::Latch, "j0/1/2", "77");
        log.event('R', Recipe::Latch, "j0/1/2", "");
        let text = std::fs::read_to_string(&path).expect("read");
        let events: Vec<Event> = text.lines().filter_map(Event::parse).collect();
        assert_eq!(events.len(), 2);
        assert_eq!(events[0].rest, vec!["77"]);
        let _ = std::fs::remove_dir_all(dir);
    }

    fn tempfile_dir() -> std::path::PathBuf {
        let dir =
            std::env::temp_dir().join(format!("zkr-chaos-events-{}-{}", std::process::id(), epoch_micros()));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }
}
