//! What a leadership change leaves behind: one INFO line and a metric
//! ([`zk_recipes_framework::metrics::names`]), for latches and selectors alike.

use std::fmt::Debug;

use tracing::info;
use zk_recipes_framework::metrics::names;
use zk_recipes_framework::Framework;

/// We lead now.
pub(crate) fn leadership_gained(framework: &Framework, path: &str, id: &str, fencing_token: i64) {
    info!(path, id, fencing_token, "leadership gained");
    metrics::counter!(names::LEADERSHIP_GAINED, framework.metric_labels(path, &[])).increment(1);
}

/// We no longer lead, for `reason` (a metric label: a few fixed values), `detail` saying more.
pub(crate) fn leadership_lost(framework: &Framework, path: &str, id: &str, reason: &str, detail: &dyn Debug) {
    info!(path, id, reason, ?detail, "leadership lost");
    metrics::counter!(names::LEADERSHIP_LOST, framework.metric_labels(path, &[("reason", reason)]))
        .increment(1);
}
