//! The retry helper, path helpers, protected creates and the cleanup worker against a real
//! ZooKeeper.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures::TryFutureExt;
use zk_recipes_framework::retry::RetryNTimes;
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{
    path, ConnectionState, Deadline, Error, Framework, ProtectedCreate, DEFAULT_MAX_NODE_DATA,
};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, RequestMatch, TestingServer};

fn connection_loss() -> Error {
    Error::ZooKeeper(zookeeper_client::Error::ConnectionLoss)
}

#[tokio::test]
async fn nested_retries_share_one_budget() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6))
        .retry_policy(RetryNTimes::new(2, Duration::from_millis(1)))
        .start()
        .expect("framework");
    let outer_calls = AtomicU32::new(0);
    let inner_calls = AtomicU32::new(0);
    let result: Result<(), Error> = within(
        "retry",
        framework.retry(Deadline::after(STEP), |_session| {
            let framework = &framework;
            let (outer_calls, inner_calls) = (&outer_calls, &inner_calls);
            async move {
                outer_calls.fetch_add(1, Ordering::SeqCst);
                framework
                    .retry(Deadline::never(), |_session| async move {
                        inner_calls.fetch_add(1, Ordering::SeqCst);
                        Err::<(), _>(connection_loss())
                    })
                    .await
            }
        }),
    )
    .await;
    assert!(result.as_ref().is_err_and(Error::is_retryable), "{result:?}");
    assert_eq!(outer_calls.load(Ordering::SeqCst), 3, "one try and two retries");
    assert_eq!(inner_calls.load(Ordering::SeqCst), 3, "the nested call never retried on its own");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn only_retryable_errors_are_retried() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6))
        .retry_policy(RetryNTimes::new(5, Duration::from_millis(1)))
        .start()
        .expect("framework");
    let calls = AtomicU32::new(0);
    let result: Result<Vec<u8>, Error> = within(
        "retry",
        framework.retry(Deadline::after(STEP), |session| {
            let calls = &calls;
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(session.client().get_data("/does/not/exist").await?.0)
            }
        }),
    )
    .await;
    assert!(result.as_ref().is_err_and(Error::is_no_node), "{result:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 1, "NoNode is an answer, not a reason to retry");

    let calls = AtomicU32::new(0);
    let result: Result<(), Error> = within(
        "retry",
        framework.retry(Deadline::after(STEP), |_session| {
            let calls = &calls;
            async move {
                if calls.fetch_add(1, Ordering::SeqCst) < 3 {
                    Err(connection_loss())
                } else {
                    Ok(())
                }
            }
        }),
    )
    .await;
    assert!(result.is_ok(), "{result:?}");
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn invalid_paths_are_refused_before_anything_is_sent() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6)).start().expect("framework");
    within("connect", framework.block_until_connected(STEP)).await.expect("connected");
    let before = within("mntr", server.znode_count()).await.expect("znode count");
    for bad in ["", "relative", "/trailing/", "/a//b", "/a/./b", "/nul\u{0}"] {
        let result = framework.ensure_path(bad, Deadline::after(STEP)).await;
        assert!(matches!(result, Err(Error::InvalidPath { .. })), "{bad:?}: {result:?}");
        let result =
            framework.create_protected(ProtectedCreate::new(bad, "lock-"), Deadline::after(STEP)).await;
        assert!(matches!(result, Err(Error::InvalidPath { .. })), "{bad:?}: {result:?}");
    }
    let result =
        framework.create_protected(ProtectedCreate::new("/fine", "bad/name-"), Deadline::after(STEP)).await;
    assert!(matches!(result, Err(Error::InvalidArgument(_))), "{result:?}");
    // A name ZooKeeper would refuse in the node's path.
    for bad_name in ["nul\u{0}-", "private\u{e000}-", "astral😀-"] {
        let result =
            framework.create_protected(ProtectedCreate::new("/fine", bad_name), Deadline::after(STEP)).await;
        assert!(matches!(result, Err(Error::InvalidPath { .. })), "{bad_name:?}: {result:?}");
    }
    // Data over the server's jute.maxbuffer would make it drop the connection: refused here.
    let session_before = framework.current().session_id;
    let huge = vec![7u8; 2 << 20];
    let result = framework
        .create_protected(ProtectedCreate::new("/fine", "lock-").data(&huge), Deadline::after(STEP))
        .await;
    assert!(
        matches!(result, Err(Error::DataTooLarge { size, limit }) if size == huge.len() && limit == DEFAULT_MAX_NODE_DATA),
        "{result:?}"
    );
    let fits = vec![7u8; DEFAULT_MAX_NODE_DATA];
    assert!(framework.check_data_size(fits.len()).is_ok(), "the limit itself is allowed");
    let node = within(
        "create at the limit",
        framework.create_protected(ProtectedCreate::new("/fine", "lock-").data(&fits), Deadline::after(STEP)),
    )
    .await
    .expect("data at the limit fits in one request");
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");
    within("delete /fine", framework.delete_recursive("/fine", Deadline::after(STEP))).await.expect("delete");
    let current = framework.current();
    assert_eq!(current.state, Some(ConnectionState::Connected), "the connection never dropped");
    assert_eq!(current.session_id, session_before, "same session");
    let after = within("mntr", server.znode_count()).await.expect("znode count");
    assert_eq!(before, after, "nothing was created on the server");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn ensure_path_makes_containers_and_delete_recursive_removes_a_tree() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6)).start().expect("framework");
    within("ensure", framework.ensure_path("/ensure/a/b", Deadline::after(STEP))).await.expect("ensure");
    within("ensure again", framework.ensure_path("/ensure/a/b", Deadline::after(STEP)))
        .await
        .expect("idempotent");
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let client = session.client();
    let (data, stat) = within("get", client.get_data("/ensure/a/b")).await.expect("created");
    assert!(data.is_empty());
    assert_eq!(stat.ephemeral_owner, 0);

    // A container is reaped once it has had a child and is empty again.
    let child = "/ensure/a/b/child";
    within("create child", client.create(child, b"", &session.create_options(CreateMode::Persistent)))
        .await
        .expect("child");
    within("delete child", client.delete(child, None)).await.expect("delete child");
    eventually("the emptied container is reaped", || async {
        client.check_stat("/ensure/a/b").await.expect("stat").is_none()
    })
    .await;

    for node in ["/tree", "/tree/x", "/tree/x/y", "/tree/z"] {
        within("create", client.create(node, b"", &session.create_options(CreateMode::Persistent)))
            .await
            .expect("create");
    }
    within("delete tree", framework.delete_recursive("/tree", Deadline::after(STEP))).await.expect("deleted");
    assert!(within("stat", client.check_stat("/tree")).await.expect("stat").is_none());
    within("delete again", framework.delete_recursive("/tree", Deadline::after(STEP)))
        .await
        .expect("a missing tree is not an error");
    drop(session);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn namespace_prefixes_every_path() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6))
        .namespace("tenant")
        .start()
        .expect("framework");
    let node = within(
        "create",
        framework.create_protected(ProtectedCreate::new("/locks", "lock-").data(b"x"), Deadline::after(STEP)),
    )
    .await
    .expect("node");
    assert!(node.path().starts_with("/locks/_c_"), "paths are namespace-relative: {}", node.path());

    let raw = Framework::builder(server.connect_string()).start().expect("raw");
    let session = within("raw session", raw.session(Deadline::after(STEP))).await.expect("session");
    let under_namespace =
        within("list", session.client().list_children("/tenant/locks")).await.expect("list");
    assert_eq!(under_namespace, vec![node.name().to_string()]);
    drop(session);
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");
    within("close", framework.close()).await;
    within("close", raw.close()).await;
}

#[tokio::test]
async fn protected_create_names_and_owns_its_node() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6)).start().expect("framework");
    let node = within(
        "create",
        framework.create_protected(
            ProtectedCreate::new("/protected/parent", "lock-").data(b"data"),
            Deadline::after(STEP),
        ),
    )
    .await
    .expect("node");
    let name = node.name().to_string();
    assert!(path::is_protected(&name), "{name}");
    assert!(uuid_like(path::protected_id(&name).expect("id")), "{name}");
    assert_eq!(path::strip_protected(&name).len(), "lock-".len() + 10);
    assert_eq!(node.sequence(), path::sequence_after(&name, "lock-"));

    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let (data, stat) = within("get", session.client().get_data(node.path())).await.expect("exists");
    assert_eq!(data, b"data");
    assert!(session.owns(stat.ephemeral_owner), "EPHEMERAL_SEQUENTIAL, owned by our session");
    drop(session);
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");
    within("close", framework.close()).await;
}

fn uuid_like(id: &str) -> bool {
    id.len() == 36
        && id.chars().enumerate().all(|(index, character)| {
            if [8, 13, 18, 23].contains(&index) {
                character == '-'
            } else {
                character.is_ascii_hexdigit() && !character.is_ascii_uppercase()
            }
        })
}

#[tokio::test]
async fn a_protected_create_whose_reply_was_cut_finds_its_node() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(8)).start().expect("framework");
    within("ensure parent", framework.ensure_path("/cut/parent", Deadline::after(STEP)))
        .await
        .expect("parent");
    let mut events = framework.connection_events();

    let cut = proxy.cut_after_next_create();
    let node = within(
        "create",
        framework.create_protected(ProtectedCreate::new("/cut/parent", "lock-"), Deadline::after(STEP)),
    )
    .await
    .expect("the create survives the cut");
    let cut = within("the cut", cut).await.expect("the proxy cut a create's reply");
    assert!(cut.path.starts_with("/cut/parent/_c_"), "the cut create was ours: {}", cut.path);
    let suspended = within("suspension", events.next()).await.map(|update| update.state());
    assert_eq!(suspended, Some(zk_recipes_framework::ConnectionState::Suspended), "the client saw the loss");

    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let children = within("list", session.client().list_children("/cut/parent")).await.expect("list");
    assert_eq!(children, vec![node.name().to_string()], "exactly one node, and it is the one we were given");
    let stat = within("stat", session.client().check_stat(node.path())).await.expect("stat").expect("exists");
    assert!(session.owns(stat.ephemeral_owner));
    assert_eq!(node.session_id(), session.id(), "the same session throughout");
    drop(session);
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn cancelled_protected_creates_leave_no_node() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6)).start().expect("framework");
    within("parent", framework.ensure_path("/cancel/parent", Deadline::after(STEP))).await.expect("parent");
    let mut completed = 0;
    for step in 0..40u64 {
        let delay = Duration::from_micros(step * 50);
        let create = framework
            .create_protected(ProtectedCreate::new("/cancel/parent", "lock-"), Deadline::after(STEP));
        // Err: dropped mid-flight.
        if let Ok(node) = tokio::time::timeout(delay, create).await {
            completed += 1;
            drop(node.expect("created"));
        }
    }
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups finish");
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let left = within("list", session.client().list_children("/cancel/parent")).await.expect("list");
    assert!(left.is_empty(), "left behind: {left:?}");
    assert!(completed < 40, "some creates must have been dropped mid-flight");
    drop(session);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn the_cleanup_worker_deletes_across_a_reconnect() {
    init_tracing();
    let mut server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(15)).start().expect("framework");
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    let options = session.create_options(CreateMode::Persistent);
    within("create", session.client().create("/cleanup", b"", &options)).await.expect("create");
    let mut paths = Vec::new();
    for index in 0..5 {
        let path = format!("/cleanup/node-{index}");
        within("create", session.client().create(&path, b"", &options)).await.expect("create");
        paths.push(path);
    }
    let session_id = session.id();
    drop(session);

    within("stop", server.stop()).await.expect("stop");
    for path in &paths {
        framework.delete_in_background(path.clone());
    }
    assert_eq!(framework.pending_cleanups(), paths.len());
    within("restart", server.restart()).await.expect("restart");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(STEP))).await.expect("cleanups finish");

    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    assert_eq!(session.id(), session_id, "same session: the worker retried across the reconnect");
    let left = within("list", session.client().list_children("/cleanup")).await.expect("list");
    assert!(left.is_empty(), "left behind: {left:?}");
    drop(session);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn the_listing_sent_behind_a_create_already_holds_the_node() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6)).start().expect("framework");
    // A persistent parent: a missing one costs the listing (the create fails with NoNode first),
    // and an emptied container may be reaped between rounds.
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    within(
        "parent",
        session.client().create("/pipelined", b"", &session.create_options(CreateMode::Persistent)),
    )
    .await
    .expect("parent");
    drop(session);
    for round in 0..200 {
        let (node, listing) = within(
            "create and list",
            framework
                .create_protected(
                    ProtectedCreate::new("/pipelined", "lock-").list_siblings(true),
                    Deadline::after(STEP),
                )
                .map_ok(|mut node| {
                    let siblings = node.take_siblings();
                    (node, siblings)
                }),
        )
        .await
        .expect("created");
        let listing = listing.unwrap_or_else(|| panic!("round {round}: no listing holding our node"));
        assert!(listing.iter().any(|child| child == node.name()), "round {round}");
        within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");
    }
    within("close", framework.close()).await;
}

#[tokio::test]
async fn digest_auth_and_the_default_acl_apply_to_created_nodes() {
    use zk_recipes_framework::zookeeper_client::{Acl, AuthId, Permission};
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let creator_only = vec![Acl::new(Permission::ALL, AuthId::authed())];
    let alice = builder(&server.connect_string(), Duration::from_secs(6))
        .digest_auth("alice", "secret")
        .default_acl(creator_only)
        .start()
        .expect("framework");
    within("ensure", alice.ensure_path("/secured/area", Deadline::after(STEP))).await.expect("created");

    let stranger = builder(&server.connect_string(), Duration::from_secs(6)).start().expect("framework");
    let session = within("session", stranger.session(Deadline::after(STEP))).await.expect("session");
    let denied = within("get", session.client().get_data("/secured/area")).await;
    assert_eq!(denied.err(), Some(zookeeper_client::Error::NoAuth), "the ACL is the creator's only");
    drop(session);

    let alice_again = builder(&server.connect_string(), Duration::from_secs(6))
        .digest_auth("alice", "secret")
        .start()
        .expect("framework");
    let session = within("session", alice_again.session(Deadline::after(STEP))).await.expect("session");
    let (acl, _) =
        within("acl", session.client().get_acl("/secured/area")).await.expect("alice may read the ACL");
    assert_eq!(acl.len(), 1);
    assert_eq!(acl[0].scheme(), "digest", "the node carries alice's digest identity");
    assert!(acl[0].id().starts_with("alice:"));
    within("get", session.client().get_data("/secured/area")).await.expect("alice may read");
    drop(session);
    for framework in [alice, stranger, alice_again] {
        within("close", framework.close()).await;
    }
}

#[tokio::test]
async fn a_create_while_exists_runs_only_while_its_anchor_exists() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(8)).start().expect("framework");
    let deadline = || Deadline::after(STEP);
    let anchor = within(
        "anchor",
        framework.create_protected(ProtectedCreate::new("/anchored/locks", "lock-"), deadline()),
    )
    .await
    .expect("anchor");

    // Built on the anchor: same session, parents created, sequence and stat as for any create.
    let built = within(
        "create while the anchor exists",
        anchor.framework().create_protected(
            ProtectedCreate::new("/anchored/leases", "lease-")
                .data(b"x")
                .mode(CreateMode::EphemeralSequential)
                .while_exists(&anchor),
            deadline(),
        ),
    )
    .await
    .expect("created");
    assert!(
        built.name().starts_with("_c_") && built.name().ends_with("-lease-0000000000"),
        "{}",
        built.name()
    );
    assert_eq!(built.sequence(), Some(0));
    assert_eq!((built.session_id(), built.generation()), (anchor.session_id(), anchor.generation()));
    assert!(built.stat().czxid > anchor.stat().czxid, "a valid stat: {:?}", built.stat());

    // A persistent node cannot be built on a hold; nothing is sent.
    let persistent = anchor
        .framework()
        .create_protected(
            ProtectedCreate::new("/anchored/leases", "lease-")
                .mode(CreateMode::Persistent)
                .while_exists(&anchor),
            deadline(),
        )
        .await;
    assert!(matches!(persistent, Err(Error::InvalidArgument(_))), "{persistent:?}");

    // Someone deletes the anchor (on a live session): nothing more is created.
    let anchor_path = anchor.path().to_owned();
    let session = within("session", framework.session(deadline())).await.expect("session");
    within("delete the anchor", session.client().delete(&anchor_path, None)).await.expect("delete");
    let refused = within(
        "create without the anchor",
        anchor.framework().create_protected(
            ProtectedCreate::new("/anchored/leases", "lease-")
                .mode(CreateMode::EphemeralSequential)
                .while_exists(&anchor),
            deadline(),
        ),
    )
    .await;
    assert!(matches!(&refused, Err(Error::NodeLost { path }) if *path == anchor_path), "{refused:?}");
    assert_eq!(
        children(&framework, "/anchored/leases").await,
        vec![built.name().to_owned()],
        "nothing created"
    );
    drop(session);
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_create_while_exists_whose_reply_was_cut_finds_its_node_on_the_same_session() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(8)).start().expect("framework");
    let anchor = within(
        "anchor",
        framework
            .create_protected(ProtectedCreate::new("/anchored-cut/locks", "lock-"), Deadline::after(STEP)),
    )
    .await
    .expect("anchor");
    within("ensure parent", framework.ensure_path("/anchored-cut/leases", Deadline::after(STEP)))
        .await
        .expect("parent");

    let cut = proxy.cut_after_next_reply(RequestMatch::multi().under("/anchored-cut/leases"));
    let built = within(
        "create while the anchor exists",
        anchor.framework().create_protected(
            ProtectedCreate::new("/anchored-cut/leases", "lease-")
                .mode(CreateMode::EphemeralSequential)
                .while_exists(&anchor),
            Deadline::after(STEP),
        ),
    )
    .await
    .expect("the create survives the cut");
    let cut = within("the cut", cut).await.expect("the proxy cut the multi's reply");
    assert_eq!(
        cut.ops.iter().map(|(op_code, _)| *op_code).collect::<Vec<_>>(),
        vec![13, 15],
        "check, then create"
    );
    assert_eq!(cut.ops[0].1, anchor.path(), "the check is on the anchor");
    assert_eq!(
        children(&framework, "/anchored-cut/leases").await,
        vec![built.name().to_owned()],
        "exactly one node, found again by its prefix"
    );
    assert_eq!(built.generation(), anchor.generation(), "on the anchor's session");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn deleting_a_node_whose_session_was_lost_reports_node_lost() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    let node = within(
        "create",
        framework
            .create_protected(ProtectedCreate::new("/delete-lost/members", "member-"), Deadline::after(STEP)),
    )
    .await
    .expect("node");
    let anchored_path = node.path().to_owned();
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    lost_then_reconnected(&mut events).await;
    let built = node
        .framework()
        .create_protected(
            ProtectedCreate::new("/delete-lost/leases", "lease-")
                .mode(CreateMode::Ephemeral)
                .while_exists(&node),
            Deadline::after(STEP),
        )
        .await;
    assert!(matches!(&built, Err(Error::NodeLost { path }) if *path == anchored_path), "{built:?}");
    let deleted = within("delete", node.delete(Deadline::after(STEP))).await;
    assert!(matches!(&deleted, Err(Error::NodeLost { path }) if *path == anchored_path), "{deleted:?}");
    assert!(children(&framework, "/delete-lost/leases").await.is_empty(), "nothing on the new session");
    within("close", framework.close()).await;
}

/// A call on a session whose request is lost with the connection, while the server stays out of
/// reach, ends with `SessionLost` once the framework declares that session lost: it does not wait
/// for a new session that cannot come (its retries would take far longer than the test waits).
#[tokio::test]
async fn a_call_on_a_session_ends_when_that_session_is_lost_while_the_server_is_unreachable() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(2)).start().expect("framework");
    within("base", framework.ensure_path("/on-lost-session", step())).await.expect("base");
    let generation = framework.current().generation;
    let mut events = framework.connection_events();

    // The listing is in flight when everything goes silent, for far longer than the test waits.
    let held = proxy.black_hole_at_next_request(
        RequestMatch::op_codes([8, 12]).under("/on-lost-session"),
        Duration::from_secs(600),
    );
    let listing = tokio::spawn({
        let framework = framework.clone();
        async move { framework.children_on_session(generation, "/on-lost-session", Deadline::never()).await }
    });
    within("the listing reached the black hole", held).await.expect("held");
    until_state(&mut events, ConnectionState::Lost).await;
    let result = within("the call's answer, while unreachable", listing).await.expect("task");
    assert!(matches!(result, Err(Error::SessionLost)), "{result:?}");
    assert!(proxy.is_black_holed(), "answered before the server could be reached");
    within("close", framework.close()).await;
}

/// The server's last zxid's counter: one more per transaction, failed creates included.
async fn transactions(server: &TestingServer) -> u64 {
    let srvr = within("srvr", zk_recipes_testing::four_letter_word(server.address(), "srvr", STEP))
        .await
        .expect("srvr");
    let zxid = srvr.lines().find_map(|line| line.strip_prefix("Zxid: 0x")).expect("a Zxid line");
    u64::from_str_radix(zxid.trim(), 16).expect("hex") & 0xffff_ffff
}

#[tokio::test]
async fn a_first_create_under_a_new_parent_sends_the_parent_ahead_in_one_pipeline() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(6)).start().expect("framework");
    within("base", framework.ensure_path("/first-use", Deadline::after(STEP))).await.expect("base");
    let create = |parent: &'static str| {
        let framework = framework.clone();
        async move {
            within(
                "create and list",
                framework
                    .create_protected(
                        ProtectedCreate::new(parent, "lock-").list_siblings(true),
                        Deadline::after(STEP),
                    )
                    .map_ok(|mut node| {
                        let siblings = node.take_siblings();
                        (node, siblings)
                    }),
            )
            .await
            .expect("created")
        }
    };

    // A new parent: its create goes ahead of ours, so the listing behind ours holds our node, and
    // the server ran two transactions (the parent, our node) — no failed create first.
    let before = transactions(&server).await;
    let (node, listing) = create("/first-use/lock-a").await;
    assert_eq!(transactions(&server).await - before, 2, "the parent's create and ours, nothing failed");
    assert_eq!(listing.expect("the listing rode along"), vec![node.name().to_owned()]);
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");

    // A parent we have met: just our create.
    let before = transactions(&server).await;
    let (node, listing) = create("/first-use/lock-a").await;
    assert_eq!(transactions(&server).await - before, 1, "only our create");
    assert_eq!(listing.expect("listing"), vec![node.name().to_owned()]);
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");

    // The parent goes behind our back (a reaped container): the create makes it again, its create
    // sent ahead of ours: the failed create, the parent's, ours.
    within("delete parent", framework.delete_recursive("/first-use/lock-a", Deadline::after(STEP)))
        .await
        .expect("delete parent");
    let before = transactions(&server).await;
    let (node, listing) = create("/first-use/lock-a").await;
    assert_eq!(transactions(&server).await - before, 3, "the failed create, the parent's and ours");
    assert_eq!(listing.expect("listing"), vec![node.name().to_owned()]);
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");

    // A known parent and its own parent both gone (containers reaped in turn): the parent's create
    // fails as well, and the parents are made from the top.
    let (node, _) = create("/first-use/reaped/lock-c").await;
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");
    within("delete parents", framework.delete_recursive("/first-use/reaped", Deadline::after(STEP)))
        .await
        .expect("delete parents");
    let (node, listing) = create("/first-use/reaped/lock-c").await;
    assert_eq!(node.path().rsplit_once('/').expect("a parent").0, "/first-use/reaped/lock-c");
    assert_eq!(listing.expect("listing"), vec![node.name().to_owned()]);
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");

    // A missing grandparent as well: both are made, and the listing still holds our node.
    let (node, listing) = create("/first-use/new/lock-b").await;
    assert_eq!(node.path().rsplit_once('/').expect("a parent").0, "/first-use/new/lock-b");
    assert_eq!(listing.expect("listing"), vec![node.name().to_owned()]);
    within("delete", node.delete(Deadline::after(STEP))).await.expect("delete");
    within("close", framework.close()).await;
}
