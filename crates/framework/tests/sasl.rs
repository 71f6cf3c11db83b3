//! SASL DIGEST-MD5 against a real server configured for it (a JAAS `Server` section written by the
//! testing crate): the right password opens a session whose nodes carry the SASL identity, a wrong
//! one gives `Error::AuthFailed` at once. Runs with `--features sasl` (`scripts/test.sh` does).
#![cfg(feature = "sasl")]

use std::time::{Duration, Instant};

use zk_recipes_framework::zookeeper_client::{Acl, AuthId, Permission, SaslOptions};
use zk_recipes_framework::{Deadline, Error};
use zk_recipes_test_support::*;
use zk_recipes_testing::TestingServer;

#[tokio::test]
async fn sasl_digest_md5_authenticates_and_a_wrong_password_is_a_typed_auth_error() {
    init_tracing();
    let server = within_for(
        SERVER_START,
        "server start",
        TestingServer::builder().sasl_digest_user("alice", "wonderland").start(),
    )
    .await
    .expect("server");

    let alice = builder(&server.connect_string(), Duration::from_secs(6))
        .sasl(SaslOptions::digest_md5("alice", "wonderland"))
        .default_acl(vec![Acl::new(Permission::ALL, AuthId::authed())])
        .start()
        .expect("framework");
    within("ensure", alice.ensure_path("/sasl/area", Deadline::after(STEP))).await.expect("alice creates");
    let session = within("session", alice.session(Deadline::after(STEP))).await.expect("session");
    let (acl, _) = within("acl", session.client().get_acl("/sasl/area")).await.expect("acl");
    assert_eq!(acl.len(), 1, "{acl:?}");
    assert_eq!((acl[0].scheme(), acl[0].id()), ("sasl", "alice"), "the node carries alice's SASL identity");
    drop(session);

    let deadline = Duration::from_secs(20);
    let mallory = builder(&server.connect_string(), Duration::from_secs(6))
        .sasl(SaslOptions::digest_md5("alice", "not-the-password"))
        .start()
        .expect("framework");
    let started = Instant::now();
    let err = within("connect", mallory.block_until_connected(deadline)).await.expect_err("refused");
    assert!(matches!(err, Error::AuthFailed { .. }), "{err:?}");
    assert!(started.elapsed() < deadline / 2, "refused at once: {:?}", started.elapsed());
    for framework in [alice, mallory] {
        within("close", framework.close()).await;
    }
}
