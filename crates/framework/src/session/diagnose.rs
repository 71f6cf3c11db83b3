//! Why a session could not be opened, and saying so.
//!
//! zookeeper-client reports a failed connect as `ConnectionLoss` or `NoHosts` and keeps the cause
//! (a name that does not resolve, a refused connection) to a DEBUG log. After a failed attempt
//! the framework looks for itself, server by server, so that its WARN and the error a caller gets
//! name the cause.
//!
//! With TLS a failed handshake (a certificate the configured CA did not sign, a certificate for
//! another name, a server that needs a client certificate) also only reaches zookeeper-client's
//! DEBUG log, and the server accepts the TCP connection; so for a framework with TLS a reachable
//! server's message says what to check.

use std::time::Duration;

use tokio::net::TcpStream;
use tokio::time::Instant;
use tracing::warn;

use super::error::{ConnectionFailure, Error};
use super::nodelay::server_entries;

/// How long the look at one server may take.
const PROBE_TIMEOUT: Duration = Duration::from_secs(1);

/// After the first WARN, at most one a this often while attempts keep failing.
const WARN_INTERVAL: Duration = Duration::from_secs(10);

/// Why a server that accepts TCP connections gave no session to a framework that uses TLS.
pub(crate) const TLS_HINT: &str = "the framework uses TLS, and zookeeper-client logs a failed TLS \
    handshake only at DEBUG: check that the CA given to FrameworkBuilder::tls signed the server's \
    certificate, that the certificate names the host as it is written in the connect string, that \
    the port is the server's TLS port (secureClientPort), and whether the server needs a client \
    certificate (ssl.clientAuth)";

/// What went wrong with each server of `connect_string`, after zookeeper-client failed with
/// `error`: its name does not resolve, it refuses the connection, it does not answer in time, or
/// it accepts a connection and the failure is the session's (`error`; with `tls`, followed by
/// [`TLS_HINT`]).
pub(crate) async fn diagnose(connect_string: &str, error: &Error, tls: bool) -> ConnectionFailure {
    let mut causes = Vec::new();
    for server in server_entries(connect_string) {
        causes.push(probe(&server, error, tls).await);
    }
    if causes.is_empty() {
        causes.push(error.to_string());
    }
    ConnectionFailure { connect_string: connect_string.to_owned(), cause: causes.join("; ") }
}

async fn probe(server: &str, error: &Error, tls: bool) -> String {
    let addresses = match tokio::time::timeout(PROBE_TIMEOUT, tokio::net::lookup_host(server)).await {
        Err(_) => return format!("{server}: resolving the name timed out"),
        Ok(Err(err)) => return format!("{server}: cannot resolve the name: {err}"),
        Ok(Ok(addresses)) => addresses.collect::<Vec<_>>(),
    };
    if addresses.is_empty() {
        return format!("{server}: the name resolves to no address");
    }
    let mut failures = Vec::new();
    for address in addresses {
        // The address only where the name is not already it.
        let at = if address.to_string() == server { String::new() } else { format!("{address}: ") };
        match tokio::time::timeout(PROBE_TIMEOUT, TcpStream::connect(address)).await {
            Ok(Ok(_)) if tls => {
                return format!("{server}: reachable, but no session was established: {error}; {TLS_HINT}")
            }
            Ok(Ok(_)) => return format!("{server}: reachable, but no session was established: {error}"),
            Ok(Err(err)) => failures.push(format!("{at}{err}")),
            Err(_) => failures
                .push(format!("{at}no answer within {}", super::duration::ReadableDuration(PROBE_TIMEOUT))),
        }
    }
    format!("{server}: {}", failures.join(", "))
}

/// Logs failed attempts to open a session at WARN: the first at once, then at most one every
/// [`WARN_INTERVAL`], counting the attempts in between.
#[derive(Debug, Default)]
pub(crate) struct FailureWarnings {
    last_warned: Option<Instant>,
    failed_since: u64,
}

impl FailureWarnings {
    pub(crate) fn failed(&mut self, failure: &ConnectionFailure, retry_in: Duration) {
        self.failed_since += 1;
        if self.last_warned.is_some_and(|at| at.elapsed() < WARN_INTERVAL) {
            return;
        }
        warn!(
            failed_attempts = self.failed_since,
            retry_in = %super::duration::ReadableDuration(retry_in),
            "could not open a ZooKeeper session: {failure}"
        );
        self.last_warned = Some(Instant::now());
        self.failed_since = 0;
    }

    pub(crate) fn connected(&mut self) {
        *self = Self::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_reachable_server_gets_the_tls_hint_only_when_the_framework_uses_tls() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let server = listener.local_addr().expect("address").to_string();
        let error = Error::ZooKeeper(zookeeper_client::Error::NoHosts);

        let plain = diagnose(&server, &error, false).await;
        assert_eq!(plain.cause, format!("{server}: reachable, but no session was established: {error}"));
        let tls = diagnose(&server, &error, true).await;
        assert_eq!(
            tls.cause,
            format!("{server}: reachable, but no session was established: {error}; {TLS_HINT}")
        );
        assert!(tls.cause.contains("TLS handshake") && tls.cause.contains("FrameworkBuilder::tls"), "{tls}");
    }
}
