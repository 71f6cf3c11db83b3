//! TLS against a real server with a TLS client port (the testing crate makes a throwaway CA, a
//! server certificate for 127.0.0.1 and client certificates with `openssl`): a framework that
//! trusts the CA does real work over TLS, including the protected ephemeral-sequential create the
//! locks use, and again after the server restarts; with client certificates the server
//! authenticates the session as the certificate's subject (`x509:CN=...`). A framework that does
//! not trust the CA, or that has no (or a foreign) client certificate where the server needs one,
//! never gets a session and gets a typed `Error::Timeout` naming the failed attempts (and what to
//! check about TLS) at its deadline, not a hang: zookeeper-client counts a failed handshake as a
//! failed connection attempt and keeps its cause at DEBUG, so there is no TLS error to give.
//! Runs with `--features tls` (`scripts/test.sh` does).
#![cfg(feature = "tls")]

use std::time::{Duration, Instant};

use zk_recipes_framework::zookeeper_client::{Acl, AuthId, Permission, TlsOptions};
use zk_recipes_framework::{ConnectionUpdate, Deadline, Error, ParentMode, ProtectedCreate};
use zk_recipes_test_support::*;
use zk_recipes_testing::{TestingServer, TlsClientAuth};

/// How long a framework that cannot get a session is given before it must report.
const REFUSAL_DEADLINE: Duration = Duration::from_secs(3);

/// TLS options that trust `ca_pem` and, when given, present the client identity `(cert, key)`.
fn tls_options(ca_pem: &str, identity: Option<(&str, &str)>) -> TlsOptions {
    let options = TlsOptions::new().with_pem_ca(ca_pem).expect("the CA parses");
    match identity {
        Some((cert_pem, key_pem)) => {
            options.with_pem_identity(cert_pem, key_pem).expect("the identity parses")
        }
        None => options,
    }
}

async fn tls_server(client_auth: TlsClientAuth) -> TestingServer {
    within_for(SERVER_START, "TLS server start", TestingServer::builder().tls(client_auth).start())
        .await
        .expect("a TLS server")
}

/// Starts a framework on the server's TLS port with `options` that must not get a session: its
/// `block_until_connected` gives `Error::Timeout` carrying the last failed attempt, at its
/// deadline, and it never announces a connection.
async fn refused(server: &TestingServer, options: TlsOptions) {
    let secure = server.secure_connect_string().expect("a TLS port");
    let framework = builder(&secure, Duration::from_secs(6)).tls(options).start().expect("framework");
    let mut events = framework.connection_events();
    let started = Instant::now();
    let err = within("block_until_connected", framework.block_until_connected(REFUSAL_DEADLINE))
        .await
        .expect_err("no session without a trusted handshake");
    let elapsed = started.elapsed();
    let Error::Timeout { last_connection_failure: Some(failure), .. } = &err else {
        panic!("a timeout naming the last failed attempt: {err:?}");
    };
    assert!(err.is_timeout() && !err.is_retryable(), "{err:?}");
    assert!(elapsed < REFUSAL_DEADLINE + Duration::from_secs(2), "reported at its deadline: {elapsed:?}");
    assert!(failure.cause.contains(&secure), "names the server: {failure}");
    let message = err.to_string();
    assert!(
        message.starts_with("timed out after 3")
            && message.contains(&format!(
                "; the last connection attempt failed: no session with {secure}: {secure}: reachable, but no session was established: "
            ))
            && message.contains("the framework uses TLS, and zookeeper-client logs a failed TLS handshake only at DEBUG"),
        "says the TLS session failed and what to check: {message}"
    );
    within("close", framework.close()).await;
    while let Some(update) = within("the next connection event", events.next()).await {
        assert!(
            !matches!(&update, ConnectionUpdate::Changed(event) if event.state.is_connected()),
            "never connected: {update:?}"
        );
    }
}

#[tokio::test]
async fn a_framework_that_trusts_the_ca_works_over_tls_and_one_that_does_not_gets_no_session() {
    init_tracing();
    let mut server = tls_server(TlsClientAuth::None).await;
    let tls = server.tls().expect("TLS material").clone();
    let secure = server.secure_connect_string().expect("a TLS port");
    assert_ne!(secure, server.connect_string(), "the TLS port is its own");

    let framework = builder(&secure, Duration::from_secs(6))
        .tls(tls_options(tls.ca_pem(), None))
        .start()
        .expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("a session over TLS");

    // Plain create, read and delete.
    let create = framework
        .create("/tls-works/config")
        .data(b"over TLS".to_vec())
        .creating_parents(ParentMode::Persistent);
    let created = within("create", create).await.expect("create");
    assert_eq!(created.path, "/tls-works/config");
    let read =
        within("get", framework.get_data("/tls-works/config", Deadline::after(STEP))).await.expect("get");
    assert_eq!(read.data, b"over TLS");
    within("delete", framework.delete("/tls-works/config")).await.expect("delete");
    assert!(within("exists", framework.exists("/tls-works/config", Deadline::after(STEP)))
        .await
        .expect("exists")
        .is_none());

    // The protected ephemeral-sequential create every lock makes.
    within("ensure", framework.ensure_path("/tls-works/locks", Deadline::after(STEP))).await.expect("ensure");
    let node = within(
        "create_protected",
        framework.create_protected(
            ProtectedCreate::new("/tls-works/locks", "lock-").data(b"holder"),
            Deadline::after(STEP),
        ),
    )
    .await
    .expect("a protected ephemeral-sequential node");
    assert!(node.name().starts_with("_c_") && node.name().contains("-lock-"), "{}", node.name());
    assert!(node.sequence().is_some(), "sequential: {}", node.name());
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    assert_eq!(node.stat().ephemeral_owner, session.id().0, "ephemeral, owned by our TLS session");
    drop(session);
    let (children, _) = within("children", framework.children("/tls-works/locks", Deadline::after(STEP)))
        .await
        .expect("children");
    assert_eq!(children, vec![node.name().to_owned()]);
    let path = node.path().to_owned();
    within("delete node", node.delete(Deadline::after(STEP))).await.expect("delete the lock node");
    assert!(within("exists", framework.exists(&path, Deadline::after(STEP)))
        .await
        .expect("exists")
        .is_none());

    // A restart serves the TLS port again (same port, same certificate), and the framework
    // connects to it again.
    within_for(SERVER_START, "restart", server.restart()).await.expect("restart");
    within(
        "ensure after the restart",
        framework.ensure_path("/tls-works/after-restart", Deadline::after(STEP)),
    )
    .await
    .expect("works over TLS after the restart");
    within("close", framework.close()).await;

    // A framework that trusts another CA refuses the server's certificate.
    refused(&server, tls_options(tls.untrusted_ca_pem(), None)).await;

    // A plaintext client on the TLS port gets no session either: the port speaks only TLS.
    let plain = builder(&secure, Duration::from_secs(6)).start().expect("framework");
    let err = within("plain on the TLS port", plain.block_until_connected(REFUSAL_DEADLINE))
        .await
        .expect_err("no plaintext session on the TLS port");
    assert!(err.is_timeout(), "{err:?}");
    within("close", plain.close()).await;
}

#[tokio::test]
async fn a_server_that_needs_client_certificates_authenticates_ours_and_refuses_the_rest() {
    init_tracing();
    let server = tls_server(TlsClientAuth::Need).await;
    let tls = server.tls().expect("TLS material").clone();
    let secure = server.secure_connect_string().expect("a TLS port");

    let framework = builder(&secure, Duration::from_secs(6))
        .tls(tls_options(tls.ca_pem(), Some((tls.client_cert_pem(), tls.client_key_pem()))))
        .default_acl(vec![Acl::new(Permission::ALL, AuthId::authed())])
        .start()
        .expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("a session with our certificate");
    let identities = within("whoami", framework.whoami(Deadline::after(STEP))).await.expect("whoami");
    assert!(
        identities.contains(&("x509".to_owned(), tls.client_subject().to_owned())),
        "the server authenticated the certificate's subject: {identities:?}"
    );
    within("ensure", framework.ensure_path("/tls-client-auth", Deadline::after(STEP))).await.expect("ensure");
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let (acl, _) = within("acl", session.client().get_acl("/tls-client-auth")).await.expect("acl");
    assert_eq!(
        acl.iter().map(|entry| (entry.scheme(), entry.id())).collect::<Vec<_>>(),
        vec![("x509", tls.client_subject())],
        "the node carries the certificate's identity"
    );
    drop(session);
    let node = within(
        "create_protected",
        framework.create_protected(ProtectedCreate::new("/tls-client-auth", "lock-"), Deadline::after(STEP)),
    )
    .await
    .expect("a protected node");
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    assert_eq!(node.stat().ephemeral_owner, session.id().0, "ephemeral, owned by our TLS session");
    drop(session);
    within("delete node", node.delete(Deadline::after(STEP))).await.expect("delete");
    within("close", framework.close()).await;

    // Trusts the server, but shows no certificate.
    refused(&server, tls_options(tls.ca_pem(), None)).await;
    // Shows a certificate the server's CA did not sign.
    refused(
        &server,
        tls_options(tls.ca_pem(), Some((tls.untrusted_client_cert_pem(), tls.untrusted_client_key_pem()))),
    )
    .await;
}
