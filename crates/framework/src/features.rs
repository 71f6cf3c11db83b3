//! What the server can do, learned once per framework: today, whether it answers a multi-read
//! (ZooKeeper 3.6 and later do; 3.5 closes the connection on one).
//!
//! A batch of creates reads its nodes' stats and the listings its callers asked for in one
//! multi-read ([`crate::batch`]). Sent on our session to a server without multi-read, it would drop
//! the session's connection: `Suspended`, every held lock's `lost()`, every leadership ended, for
//! a speed trick. So the first batch that wants a multi-read asks a probe instead: one multi-read
//! on a session of its own (same servers, same credentials), closed at once. Until the probe says
//! yes, batches read the stats they miss with requests of their own and their callers list for
//! themselves; a refusal is
//! logged once at INFO and kept for the framework's life. A probe that cannot connect decides
//! nothing, and the next batch probes again.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, info};

use crate::builder::FrameworkBuilder;

const UNKNOWN: u8 = 0;
const SUPPORTED: u8 = 1;
const REFUSED: u8 = 2;

/// How long a probe may take before it decides nothing.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);

/// What the framework's servers can do; see the module docs.
#[derive(Debug)]
pub(crate) struct ServerFeatures {
    multi_read: AtomicU8,
    probing: AtomicBool,
    /// The framework's settings, for the probe's session.
    config: FrameworkBuilder,
}

impl ServerFeatures {
    pub(crate) fn new(config: FrameworkBuilder) -> Self {
        Self { multi_read: AtomicU8::new(UNKNOWN), probing: AtomicBool::new(false), config }
    }

    /// Whether a batch may send a multi-read now. While that is not known, the first ask starts a
    /// probe (on `runtime`) and every ask answers `false`.
    pub(crate) fn multi_read(self: &Arc<Self>, runtime: Option<&tokio::runtime::Handle>) -> bool {
        match self.multi_read.load(Ordering::Acquire) {
            SUPPORTED => true,
            REFUSED => false,
            _ => {
                if let Some(runtime) = runtime {
                    if !self.probing.swap(true, Ordering::AcqRel) {
                        runtime.spawn(self.clone().probe());
                    }
                }
                false
            }
        }
    }

    async fn probe(self: Arc<Self>) {
        let outcome = tokio::time::timeout(PROBE_TIMEOUT, probe_multi_read(&self.config)).await;
        match outcome {
            Ok(Some(true)) => {
                debug!("the server answers multi-reads: batches read stats and listings in one");
                self.multi_read.store(SUPPORTED, Ordering::Release);
            }
            Ok(Some(false)) => {
                info!(
                    "the server refuses multi-reads (ZooKeeper before 3.6): batched creates read their \
                     stats and listings with requests of their own"
                );
                self.multi_read.store(REFUSED, Ordering::Release);
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
    let client = crate::framework::open_client(config).await.ok()?;
    let mut reader = client.new_multi_reader();
    reader.add_get_children("/").ok()?;
    // Per-operation errors (no READ on "/") still make an answer: the request is known.
    Some(reader.commit().await.is_ok())
}
