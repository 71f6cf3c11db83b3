//! What the server can do, learned once per framework: today, whether it answers a multi-read
//! (ZooKeeper 3.6 and later do; 3.5 closes the connection on one).
//!
//! A batch of creates reads its nodes' stats and the listings its callers asked for in one
//! multi-read ([`crate::batch`]). Sent on our session to a server without multi-read, it would drop
//! the session's connection: `Suspended`, every held lock's `lost()`, every leadership ended, for
//! a speed trick. So the first batch that wants a multi-read asks a probe instead: one multi-read
//! on a session of its own (same servers, same credentials), closed at once, and waits for it a
//! moment (at most a second). Until the probe says yes, batches read the stats they miss with
//! requests of their own and their callers list for themselves; a refusal is logged once at INFO
//! and kept for the framework's life. A probe that cannot connect decides nothing, and the next
//! batch probes again.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tracing::{debug, info};

use super::builder::FrameworkBuilder;

/// What is known of the server's multi-read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MultiRead {
    Unknown,
    Supported,
    Refused,
}

/// How long a probe may take before it decides nothing.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a batch waits for a running probe before it reads without a multi-read.
const PROBE_WAIT: Duration = Duration::from_secs(1);

/// What the framework's servers can do; see the module docs.
#[derive(Debug)]
pub(crate) struct ServerFeatures {
    multi_read: watch::Sender<MultiRead>,
    probing: AtomicBool,
    /// The framework's settings, for the probe's session.
    config: FrameworkBuilder,
}

impl ServerFeatures {
    pub(crate) fn new(config: FrameworkBuilder) -> Self {
        Self { multi_read: watch::Sender::new(MultiRead::Unknown), probing: AtomicBool::new(false), config }
    }

    /// Whether a batch may send a multi-read. While that is not known, the first ask starts a
    /// probe (on `runtime`), and every ask waits for it a moment ([`PROBE_WAIT`]); a probe slower
    /// than that leaves the batch to read without one.
    ///
    /// # Cancel safety
    /// Cancel safe: the probe runs on by itself.
    pub(crate) async fn multi_read(self: &Arc<Self>, runtime: Option<&tokio::runtime::Handle>) -> bool {
        let mut known = self.multi_read.subscribe();
        if *known.borrow() == MultiRead::Unknown {
            if let Some(runtime) = runtime {
                if !self.probing.swap(true, Ordering::AcqRel) {
                    runtime.spawn(self.clone().probe());
                }
            }
        }
        let decided = tokio::time::timeout(PROBE_WAIT, async {
            known.wait_for(|known| *known != MultiRead::Unknown).await.map(|known| *known)
        })
        .await;
        matches!(decided, Ok(Ok(MultiRead::Supported)))
    }

    async fn probe(self: Arc<Self>) {
        let outcome = tokio::time::timeout(PROBE_TIMEOUT, probe_multi_read(&self.config)).await;
        match outcome {
            Ok(Some(true)) => {
                debug!("the server answers multi-reads: batches read stats and listings in one");
                self.multi_read.send_replace(MultiRead::Supported);
            }
            Ok(Some(false)) => {
                info!(
                    "the server refuses multi-reads (ZooKeeper before 3.6): batched creates read their \
                     stats with requests of their own"
                );
                self.multi_read.send_replace(MultiRead::Refused);
            }
            Ok(None) | Err(_) => {
                debug!("the multi-read probe could not reach a server; the next batch asks again")
            }
        }
        self.probing.store(false, Ordering::Release);
    }
}

/// One multi-read on a session of its own: `Some(true)` if answered, `Some(false)` if the server
/// refused it (an error, or the connection dropped on it), `None` if no session could be opened.
async fn probe_multi_read(config: &FrameworkBuilder) -> Option<bool> {
    let client = config.open_client().await.ok()?;
    let mut reader = client.new_multi_reader();
    reader.add_get_children("/").ok()?;
    // Per-operation errors (no READ on "/") still make an answer: the request is known.
    Some(reader.commit().await.is_ok())
}
