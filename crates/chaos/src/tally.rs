//! What the framework did inside a busy-session contender, counted from its tracing events: the
//! batches it sent (creates and deletes together as one multi), batches it had to send again one
//! by one, nodes its cleanup worker deleted for callers gone (given-up or dropped acquires), and
//! nodes it found again after a connection loss took a create's reply.
//!
//! The busy-session contender logs the counts as `B` events ([`crate::events`]) so the run can
//! show that the chaos run met what it is meant to meet. The events are matched by their message,
//! so renaming one of them in the framework shows up here as a zero (and a batch count of zero
//! fails the run: see `docs/reliability.md`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

use crate::events::Event as LogEvent;

/// The target of the framework's events (its crate).
pub const FRAMEWORK_TARGET: &str = "zk_recipes_framework";

/// The framework's messages counted, as the framework words them.
const BATCH_SENT: &str = "sending a batch of writes as one multi";
const BATCH_FELL_BACK: &str = "a batched write failed: sending the batch one by one";
const CLEANED_UP: &str = "cleaned up";
const FOUND_AGAIN: [&str; 2] = [
    "found our node above the lane's floor after a connection loss",
    "found our protected node after a connection loss",
];

/// The counts of one process, since it started.
#[derive(Debug, Default)]
pub struct Tally {
    batches: AtomicU64,
    batched_writes: AtomicU64,
    fallbacks: AtomicU64,
    cleanups: AtomicU64,
    found_again: AtomicU64,
}

/// This process's counts (the tracing subscriber is process-wide too).
pub static TALLY: Tally = Tally {
    batches: AtomicU64::new(0),
    batched_writes: AtomicU64::new(0),
    fallbacks: AtomicU64::new(0),
    cleanups: AtomicU64::new(0),
    found_again: AtomicU64::new(0),
};

impl Tally {
    /// `<batches> <batched writes> <fallbacks> <cleanups> <found again>`: the `B` event's fields.
    pub fn fields(&self) -> String {
        [&self.batches, &self.batched_writes, &self.fallbacks, &self.cleanups, &self.found_again]
            .iter()
            .map(|count| count.load(Ordering::Relaxed).to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    fn count(&self, fields: &Fields) {
        let counter = match fields.message.as_str() {
            BATCH_SENT => {
                self.batched_writes.fetch_add(fields.operations, Ordering::Relaxed);
                &self.batches
            }
            BATCH_FELL_BACK => &self.fallbacks,
            CLEANED_UP => &self.cleanups,
            message if FOUND_AGAIN.contains(&message) => &self.found_again,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

/// Counts the framework's events into [`TALLY`]; give it a filter that lets the framework's
/// `trace` events through (the batcher's are `trace`).
#[derive(Debug, Clone, Copy, Default)]
pub struct TallyLayer;

impl<S: Subscriber> Layer<S> for TallyLayer {
    fn on_event(&self, event: &Event<'_>, _context: Context<'_, S>) {
        if !event.metadata().target().starts_with(FRAMEWORK_TARGET) {
            return;
        }
        let mut fields = Fields::default();
        event.record(&mut fields);
        TALLY.count(&fields);
    }
}

/// The fields of one event that the tally reads.
#[derive(Debug, Default)]
struct Fields {
    message: String,
    operations: u64,
}

impl Visit for Fields {
    fn record_u64(&mut self, field: &Field, value: u64) {
        if field.name() == "operations" {
            self.operations = value;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            self.message = format!("{value:?}");
        }
    }
}

/// A busy-session process's last counts, parsed from its `B` event's fields.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Batches sent as one multi.
    pub batches: u64,
    /// Creates and deletes those batches carried.
    pub batched_writes: u64,
    /// Batches that failed as a whole and went again one by one.
    pub fallbacks: u64,
    /// Nodes the cleanup worker deleted (made for callers gone, or whose delete failed).
    pub cleanups: u64,
    /// Nodes found again after a connection loss took a create's reply.
    pub found_again: u64,
}

impl Counts {
    /// Parses the `B` event's fields; `None` when malformed.
    pub fn parse(fields: &[String]) -> Option<Counts> {
        let numbers: Vec<u64> = fields.iter().map(|field| field.parse().ok()).collect::<Option<_>>()?;
        let [batches, batched_writes, fallbacks, cleanups, found_again] = numbers[..] else { return None };
        Some(Counts { batches, batched_writes, fallbacks, cleanups, found_again })
    }

    /// The sum of two processes' counts.
    pub fn add(self, other: Counts) -> Counts {
        Counts {
            batches: self.batches + other.batches,
            batched_writes: self.batched_writes + other.batched_writes,
            fallbacks: self.fallbacks + other.fallbacks,
            cleanups: self.cleanups + other.cleanups,
            found_again: self.found_again + other.found_again,
        }
    }
}

/// The framework's counts of every busy-session process (the last `B` event of each), summed.
pub fn busy_counts(events: &[LogEvent]) -> Counts {
    let mut last: HashMap<&str, (i64, Counts)> = HashMap::new();
    for event in events.iter().filter(|event| event.kind == 'B') {
        let Some(counts) = Counts::parse(&event.rest) else { continue };
        let entry = last.entry(event.holder.as_str()).or_insert((event.micros, counts));
        if event.micros >= entry.0 {
            *entry = (event.micros, counts);
        }
    }
    last.into_values().fold(Counts::default(), |sum, (_, counts)| sum.add(counts))
}

#[cfg(test)]
mod tests {
    use tracing_subscriber::layer::SubscriberExt;

    use super::*;

    #[test]
    fn the_framework_events_are_counted_and_others_are_not() {
        let before = TALLY.fields();
        let subscriber = tracing_subscriber::registry().with(TallyLayer);
        tracing::subscriber::with_default(subscriber, || {
            tracing::trace!(target: "zk_recipes_framework::batch", operations = 5usize, "sending a batch of writes as one multi");
            tracing::trace!(target: "zk_recipes_framework::batch", operations = 3usize, "sending a batch of writes as one multi");
            tracing::debug!(target: "zk_recipes_framework::cleanup", task = "x", "cleaned up");
            tracing::debug!(target: "zk_recipes_framework::nodes", "found our protected node after a connection loss");
            tracing::debug!(target: "somebody_else", "cleaned up");
        });
        let after = Counts::parse(&TALLY.fields().split(' ').map(str::to_owned).collect::<Vec<_>>())
            .expect("five numbers");
        let before =
            Counts::parse(&before.split(' ').map(str::to_owned).collect::<Vec<_>>()).expect("five numbers");
        assert_eq!(after.batches - before.batches, 2);
        assert_eq!(after.batched_writes - before.batched_writes, 8);
        assert_eq!(after.cleanups - before.cleanups, 1);
        assert_eq!(after.found_again - before.found_again, 1);
        assert_eq!(after.fallbacks, before.fallbacks);
    }

    #[test]
    fn counts_parse_and_add() {
        let fields: Vec<String> = ["1", "2", "3", "4", "5"].iter().map(|field| field.to_string()).collect();
        let counts = Counts::parse(&fields).expect("parses");
        assert_eq!(counts.add(counts).batched_writes, 4);
        assert_eq!(Counts::parse(&fields[..4]), None);
        assert_eq!(Counts::parse(&vec!["x".to_owned(); 5]), None);
    }

    #[test]
    fn the_last_framework_counts_of_each_busy_process_are_summed() {
        let events: Vec<LogEvent> = [
            "B batch-0 b0x1 10 1 3 0 0 0",
            "B batch-0 b0x1 20 4 9 1 2 0",
            "B batch-0 b1x1 15 2 5 0 1 1",
            "B batch-0 b1x1 12 1 2 0 0 0",
        ]
        .iter()
        .map(|line| LogEvent::parse(line).expect("event"))
        .collect();
        let counts = busy_counts(&events);
        assert_eq!(counts.batches, 6);
        assert_eq!(counts.batched_writes, 14);
        assert_eq!(counts.fallbacks, 1);
        assert_eq!(counts.cleanups, 3);
        assert_eq!(counts.found_again, 1);
    }
}
