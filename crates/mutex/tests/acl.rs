//! Per-path ACLs from the framework's `AclProvider` on every node a lock creates, parents included,
//! against a real server with digest authentication.

use std::time::Duration;

use zk_recipes_framework::zookeeper_client::{self, Acl, AuthId, Permission};
use zk_recipes_framework::{Deadline, Framework, PathAclProvider};
use zk_recipes_mutex::{Hold, Mutex};
use zk_recipes_test_support::*;
use zk_recipes_testing::TestingServer;

/// Anyone may read; only the creator's identities may change anything (delete children included).
fn locked_down() -> Vec<Acl> {
    vec![Acl::new(Permission::ALL, AuthId::authed()), Acl::new(Permission::READ, AuthId::anyone())]
}

async fn acl_of(framework: &Framework, path: &str) -> Vec<Acl> {
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    within("get acl", session.client().get_acl(path)).await.expect("acl").0
}

/// The server turns `auth` into the creator's digest identity: ALL for `alice`, READ for anyone.
fn assert_alices(acl: &[Acl], path: &str) {
    assert_eq!(acl.len(), 2, "{path}: {acl:?}");
    assert!(
        acl.iter().any(|entry| entry.permission() == Permission::ALL
            && entry.scheme() == "digest"
            && entry.id().starts_with("alice:")),
        "{path}: {acl:?}"
    );
    assert!(
        acl.iter().any(|entry| entry.permission() == Permission::READ && entry.scheme() == "world"),
        "{path}: {acl:?}"
    );
}

#[tokio::test]
async fn a_lock_under_a_restrictive_provider_is_safe_from_other_credentials_and_its_holder_releases() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let alice = builder(&server.connect_string(), Duration::from_secs(6))
        .digest_auth("alice", "secret")
        .acl_provider(PathAclProvider::open().with_path("/acl/orders", locked_down()))
        .start()
        .expect("framework");
    // Methods that take a deadline take a Duration too.
    let guard = within("lock", Mutex::new(&alice, "/acl/orders/lock").expect("mutex").lock_until(STEP))
        .await
        .expect("alice locks");
    let node = guard.node_path().to_owned();

    // Every node the lock created under the rule carries it, parents included; the parent outside
    // the rule keeps the default (open) ACL.
    for path in ["/acl/orders", "/acl/orders/lock", node.as_str()] {
        assert_alices(&acl_of(&alice, path).await, path);
    }
    let open = acl_of(&alice, "/acl").await;
    assert_eq!(open, vec![Acl::new(Permission::ALL, AuthId::anyone())]);

    // Another identity can read the lock but cannot delete our node, nor queue for the lock.
    let mallory = builder(&server.connect_string(), Duration::from_secs(6))
        .digest_auth("mallory", "other")
        .start()
        .expect("framework");
    let session = within("session", mallory.session(Deadline::after(STEP))).await.expect("session");
    let children =
        within("list", session.client().list_children("/acl/orders/lock")).await.expect("readable");
    assert_eq!(children.len(), 1);
    assert_eq!(
        within("delete", session.client().delete(&node, None)).await.err(),
        Some(zookeeper_client::Error::NoAuth),
        "another identity cannot delete the holder's node"
    );
    drop(session);
    let refused =
        within("mallory locks", Mutex::new(&mallory, "/acl/orders/lock").expect("mutex").try_lock())
            .await
            .expect_err("mallory may not create a contender node");
    assert!(refused.to_string().to_lowercase().contains("auth"), "{refused}");

    // The holder still releases, and nothing is left.
    within("release", guard.release()).await.expect("alice releases");
    within("cleanups", alice.wait_for_cleanups(STEP)).await.expect("no cleanup pending");
    let session = within("session", alice.session(Deadline::after(STEP))).await.expect("session");
    let left = within("list", session.client().list_children("/acl/orders/lock")).await.expect("list");
    assert!(left.is_empty(), "{left:?}");
    drop(session);
    for framework in [alice, mallory] {
        within("close", framework.close()).await;
    }
}
