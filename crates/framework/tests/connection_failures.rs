//! A framework that cannot open a session says why: in its WARN logs and in the timeout error.

use std::error::Error as _;
use std::time::Duration;

use zk_recipes_framework::{Error, Framework};
use zk_recipes_test_support::*;
use zk_recipes_testing::capture_warnings;

/// The error `block_until_connected` gives against `connect_string`, with its whole source chain.
async fn connect_error(connect_string: &str) -> (Error, String) {
    let framework = Framework::builder(connect_string).start().expect("framework");
    let result =
        within("block_until_connected", framework.block_until_connected(Duration::from_secs(2))).await;
    within("close", framework.close()).await;
    let err = result.expect_err("no server there");
    let mut chain = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        chain.push_str(" <- ");
        chain.push_str(&cause.to_string());
        source = cause.source();
    }
    (err, chain)
}

/// A port nobody listens on (bound, then closed).
fn closed_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    listener.local_addr().expect("address").port()
}

#[tokio::test]
async fn a_closed_port_gives_a_timeout_that_names_the_refused_connection() {
    let connect_string = format!("127.0.0.1:{}", closed_port());
    let (err, chain) = connect_error(&connect_string).await;
    let Error::Timeout { waited, last_connection_failure: Some(failure) } = &err else {
        panic!("a timeout carrying the last connection failure: {err:?}");
    };
    assert!(failure.cause.contains("refused"), "{chain}");
    assert!(err.to_string().contains(&connect_string) && err.to_string().contains("refused"), "{err}");
    assert!(err.source().is_some_and(|source| source.to_string().contains("refused")), "{chain}");
    assert!(
        !err.to_string().contains(&format!("{waited:?}")),
        "the duration reads as people write it: {err}"
    );
    assert!(err.to_string().starts_with("timed out after 2"), "{err}");
}

#[tokio::test]
async fn an_unresolvable_name_gives_a_timeout_that_says_so() {
    let (err, chain) = connect_error("no-such-host.invalid:2181").await;
    assert!(matches!(err, Error::Timeout { last_connection_failure: Some(_), .. }), "{err:?}");
    assert!(chain.contains("no-such-host.invalid:2181: cannot resolve the name"), "{chain}");
}

#[tokio::test]
async fn failed_attempts_are_warned_about_once_in_a_while() {
    let logs = capture_warnings();
    let connect_string = format!("127.0.0.1:{}", closed_port());
    let framework = Framework::builder(connect_string.as_str()).start().expect("framework");
    let result =
        within("block_until_connected", framework.block_until_connected(Duration::from_secs(3))).await;
    assert!(result.is_err());
    within("close", framework.close()).await;
    let warnings = logs.count("could not open a ZooKeeper session");
    assert_eq!(
        warnings, 1,
        "several attempts failed within 3 s, and the first one alone is warned about: {logs:?}"
    );
    assert!(
        logs.text()
            .lines()
            .any(|line| line.contains("WARN") && line.contains(&connect_string) && line.contains("refused")),
        "the warning names the server and the cause: {logs:?}"
    );
}

#[tokio::test]
async fn the_message_reads_well() {
    let connect_string = format!("127.0.0.1:{}", closed_port());
    let (err, _) = connect_error(&connect_string).await;
    let message = err.to_string();
    let (waited, failure) = message.split_once("; ").expect("a duration, then the failure");
    // "2 s", or "2.01 s" on a busy machine: at most two decimals, then the unit.
    let seconds = waited.strip_prefix("timed out after ").and_then(|rest| rest.strip_suffix(" s"));
    assert!(seconds.is_some_and(|seconds| seconds.starts_with('2') && seconds.len() <= 4), "{message}");
    assert_eq!(
        failure,
        format!(
            "the last connection attempt failed: no session with {connect_string}: {connect_string}: Connection refused (os error 111)"
        )
    );
}

/// Credentials the server refuses give `Error::AuthFailed` at once, not a timeout at the deadline,
/// and the same error reaches calls that wait for a session.
#[tokio::test]
async fn refused_credentials_give_a_typed_auth_error_at_once() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", zk_recipes_testing::TestingServer::start())
        .await
        .expect("server");
    // The server has no provider for this scheme: it answers AuthFailed.
    let framework = builder(&server.connect_string(), Duration::from_secs(6))
        .auth("no-such-scheme", b"anything".to_vec())
        .start()
        .expect("framework");
    let deadline = Duration::from_secs(20);
    let started = std::time::Instant::now();
    let err = within("connect", framework.block_until_connected(deadline)).await.expect_err("refused");
    assert!(
        matches!(&err, Error::AuthFailed { connect_string } if *connect_string == server.connect_string()),
        "{err:?}"
    );
    assert!(started.elapsed() < deadline / 2, "failed at once, not at the deadline: {:?}", started.elapsed());
    assert!(err.to_string().contains("authentication failed"), "{err}");
    assert!(!err.is_retryable());
    let err = within(
        "create",
        framework.create("/never").deadline(zk_recipes_framework::Deadline::after(deadline)),
    )
    .await
    .expect_err("refused");
    assert!(matches!(err, Error::AuthFailed { .. }), "{err:?}");
    within("close", framework.close()).await;

    // Good credentials on the same server still connect.
    let fine = builder(&server.connect_string(), Duration::from_secs(6))
        .digest_auth("alice", "secret")
        .start()
        .expect("framework");
    within("connect", fine.block_until_connected(STEP)).await.expect("connected");
    within("close", fine.close()).await;
}
