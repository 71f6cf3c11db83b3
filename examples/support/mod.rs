//! What every example shares: a ZooKeeper to talk to, and logs. Each example includes it with
//! `mod support;`.
#![allow(dead_code)] // Each example uses its own part.

use zk_recipes_testing::{TestingError, TestingServer};

/// The ZooKeeper at `ZK_CONNECT`, or an embedded one started from the machine's Debian
/// `zookeeper` package (`scripts/install-deps.sh`) when `ZK_CONNECT` is unset. Keep the server
/// (the second value) alive as long as the example runs.
pub async fn zookeeper() -> Result<(String, Option<TestingServer>), TestingError> {
    match std::env::var("ZK_CONNECT") {
        Ok(connect_string) if !connect_string.trim().is_empty() => {
            println!("using ZooKeeper at {connect_string}");
            Ok((connect_string, None))
        }
        _ => {
            println!("ZK_CONNECT is unset: starting an embedded ZooKeeper ...");
            let server = TestingServer::start().await?;
            println!("embedded ZooKeeper is up at {}", server.connect_string());
            Ok((server.connect_string(), Some(server)))
        }
    }
}

/// Logs to stderr at `RUST_LOG` (default `warn`).
pub fn init_logging() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
}
