//! A queue's metrics ([`zk_recipes_framework::metrics::names`]), registered once per queue.

use metrics::{Counter, Gauge};
use zk_recipes_framework::metrics::names;
use zk_recipes_framework::Framework;

/// The handles of one queue.
#[derive(Clone)]
pub(crate) struct QueueMetrics {
    pub(crate) puts: Counter,
    pub(crate) takes: Counter,
    pub(crate) acks: Counter,
    pub(crate) redeliveries: Counter,
    pub(crate) handler_failures: Counter,
    pub(crate) dead_letters: Counter,
    pub(crate) depth: Gauge,
}

impl QueueMetrics {
    pub(crate) fn new(framework: &Framework, path: &str) -> Self {
        let labels = framework.metric_labels(path, &[]);
        Self {
            puts: metrics::counter!(names::QUEUE_PUTS, labels.iter()),
            takes: metrics::counter!(names::QUEUE_TAKES, labels.iter()),
            acks: metrics::counter!(names::QUEUE_ACKS, labels.iter()),
            redeliveries: metrics::counter!(names::QUEUE_REDELIVERIES, labels.iter()),
            handler_failures: metrics::counter!(names::QUEUE_HANDLER_FAILURES, labels.iter()),
            dead_letters: metrics::counter!(names::QUEUE_DEAD_LETTERS, labels.iter()),
            depth: metrics::gauge!(names::QUEUE_DEPTH, labels.iter()),
        }
    }
}
