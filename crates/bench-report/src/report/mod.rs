//! The markdown report, one file per job:
//!
//! - [`cells`]: numbers formatted for a table cell, ratio cells, how a section shows a plot;
//! - [`locks`], [`rwlock`], [`queues`], [`leader`], [`counters`], [`barriers`], [`cache`],
//!   [`discovery`], [`metrics`]: one section per bench;
//! - [`page`]: the whole report, the run's description and the sections in order.
//!
//! Each file imports only the ones before it in this list (and the run it reports on).

mod barriers;
mod cache;
mod cells;
mod counters;
mod discovery;
mod leader;
mod locks;
mod metrics;
mod page;
mod queues;
mod rwlock;

pub use cells::format_rate;
pub use page::markdown_report;
pub use queues::QUEUE_MODES;
