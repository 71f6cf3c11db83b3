//! Real ZooKeeper servers for zk-recipes' integration tests, demos and benches — Apache
//! Curator's `curator-test`, without docker.
//!
//! * [`TestingServer`]: a standalone server (the machine's ZooKeeper jars run by its JVM) on a
//!   free loopback port with a temp data dir; stop, kill, restart on the same port, pause.
//!   [`tls`](TestingServerBuilder::tls) adds a TLS client port with a throwaway CA
//!   ([`TestingTls`]).
//! * [`TestingCluster`]: an ensemble of `n` members; kill the leader, restart a member. Built
//!   with [`reconfig(true)`](TestingClusterBuilder::reconfig), a reconfigurable one: start
//!   joining members, `reconfig` them in and out. Built with
//!   [`partitionable(true)`](TestingClusterBuilder::partitionable) (root only), each member gets a
//!   network namespace and an address of its own: [`partition`](TestingCluster::partition) it,
//!   [`isolate_leader`](TestingCluster::isolate_leader), [`bridge`](TestingCluster::bridge),
//!   [`ring`](TestingCluster::ring), [`degrade`](TestingCluster::degrade) a member's links
//!   ([`Degradation`]), [`heal`](TestingCluster::heal).
//! * [`FaultProxy`]: a TCP proxy between one client and a server that cuts connections,
//!   black-holes them (targeted session expiry) or cuts right after a chosen request (a create,
//!   a delete, a multi, ...) reached the server, before its reply reaches the client.
//! * [`CuratorProcess`]: Apache Curator 5.4 in a JVM, driven line by line from interop tests;
//!   the workspace's unpublished `zk-recipes-interop` crate types its service-discovery
//!   commands.
//! * Four-letter words ([`four_letter_word`], `mntr`, `wchc`, `srvr` helpers) to assert on
//!   server-side state such as leftover watches and znodes.
//!
//! Servers need Java and Debian's `zookeeper` package (`scripts/install-deps.sh` installs both;
//! see [`zookeeper_classpath`] for the jars and the `ZOOKEEPER_CLASSPATH` override); a TLS server
//! also needs the `openssl` command line ([`OPENSSL_ENV`] overrides which).
//!
//! Every server or cluster holds the process-wide [`ServerSlot`], so tests that need servers run
//! one after another: **one server or one cluster per test**. Server JVMs are killed on drop and
//! never outlive the test process, even if it is SIGKILLed.
//!
//! # Example
//! ```no_run
//! use std::time::Duration;
//! use zk_recipes_testing::TestingServer;
//!
//! #[tokio::test]
//! async fn creates_a_node() -> Result<(), Box<dyn std::error::Error>> {
//!     let server = TestingServer::start().await?;
//!     let client = tokio::time::timeout(
//!         Duration::from_secs(10),
//!         zookeeper_client::Client::connect(&server.connect_string()),
//!     )
//!     .await??;
//!     // ...
//!     Ok(())
//! }
//! ```

mod classpath;
mod cluster;
mod curator;
mod error;
mod four_letter;
mod kazoo;
mod launch;
mod network;
mod ports;
mod process;
mod proxy;
mod server;
mod slot;
mod sys;
mod tls;
mod venv;
mod wait;

pub use classpath::{
    curator_classpath, java_binary, zookeeper_classpath, Jit, CURATOR_CLASSPATH_ENV, DEBIAN_JAR_DIR,
    JAVA_ENV, ZOOKEEPER_CLASSPATH_ENV,
};
pub use cluster::{ClusterMember, TestingCluster, TestingClusterBuilder};
pub use curator::{curator_driver_classes, CuratorProcess, CURATOR_DRIVER_CLASS, JAVAC_ENV};
pub use error::{Result, TestingError};
pub use four_letter::{
    four_letter_word, parse_mntr, parse_srvr_mode, parse_wchc, ServerMode, DEFAULT_FOUR_LETTER_TIMEOUT,
};
pub use kazoo::kazoo_python;
pub use network::Degradation;
pub use proxy::{
    BlackHoleAtRequest, CutAfterCreate, CutAfterReply, CutCreate, CutReply, FaultProxy, HeldRequest,
    ProxyStats, RequestMatch,
};
pub use server::{TestingServer, TestingServerBuilder};
pub use slot::ServerSlot;
pub use tls::{TestingTls, TlsClientAuth, OPENSSL_ENV, TLS_CLIENT_SUBJECT};
pub use venv::{DEFAULT_VENV, KAZOO_VERSION, VENV_ENV};
pub use wait::{
    capture_warnings, eventually, init_tracing, within, within_for, CapturedLogs, SERVER_START, STEP,
};
