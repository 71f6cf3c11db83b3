//! The node API (Curator's `CuratorFramework` verbs) against a real ZooKeeper.

use std::time::Duration;

use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{
    path, Deadline, Error, ParentMode, ProtectedCreate, TransactionResult, DEFAULT_MAX_NODE_DATA,
};
use zk_recipes_test_support::*;
use zk_recipes_testing::{FaultProxy, TestingServer};

fn server_error(result: &Result<impl std::fmt::Debug, Error>) -> Option<zookeeper_client::Error> {
    match result {
        Err(Error::ZooKeeper(err)) => Some(err.clone()),
        _ => None,
    }
}

#[tokio::test]
async fn create_in_every_mode_with_parents_as_asked() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");

    let plain = within(
        "persistent",
        framework.create("/modes/a/plain").data(b"x").creating_parents(ParentMode::Persistent),
    )
    .await
    .expect("create");
    assert_eq!(plain.path, "/modes/a/plain");
    assert_eq!((plain.stat.data_length, plain.stat.ephemeral_owner), (1, 0));

    let sequential =
        within("sequential", framework.create("/modes/a/seq-").mode(CreateMode::PersistentSequential))
            .await
            .expect("create");
    assert_eq!(sequential.path, "/modes/a/seq-0000000001", "the sequence counts the parent's children");

    let session = within("session", framework.session(step())).await.expect("session");
    for mode in [CreateMode::Ephemeral, CreateMode::EphemeralSequential] {
        let created =
            within("ephemeral", framework.create("/modes/a/eph-").mode(mode)).await.expect("create");
        assert!(session.owns(created.stat.ephemeral_owner), "{mode:?}: {created:?}");
    }
    drop(session);

    // No parents asked for: a missing parent is an error, and nothing is created.
    let orphan = within("no parents", framework.create("/modes/missing/child")).await;
    assert_eq!(server_error(&orphan), Some(zookeeper_client::Error::NoNode), "{orphan:?}");
    assert!(within("exists", framework.exists("/modes/missing", step())).await.expect("exists").is_none());

    // Container parents are reaped once emptied; persistent ones stay.
    within(
        "container parents",
        framework.create("/modes/c1/c2/leaf").creating_parents(ParentMode::Container),
    )
    .await
    .expect("create");
    within(
        "persistent parents",
        framework.create("/modes/p1/p2/leaf").creating_parents(ParentMode::Persistent),
    )
    .await
    .expect("create");
    within("delete", framework.delete("/modes/c1/c2/leaf")).await.expect("delete");
    within("delete", framework.delete("/modes/p1/p2/leaf")).await.expect("delete");
    eventually("the emptied containers reaped", || async {
        framework.exists("/modes/c1", step()).await.expect("exists").is_none()
    })
    .await;
    assert!(within("exists", framework.exists("/modes/p1/p2", step())).await.expect("exists").is_some());

    let container = within("container", framework.create("/modes/box").mode(CreateMode::Container)).await;
    assert!(container.is_ok(), "{container:?}");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_protected_sequential_create_whose_reply_was_cut_is_found_not_repeated() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let proxy = within("proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let framework = builder(&proxy.connect_string(), Duration::from_secs(8)).start().expect("framework");
    within("parent", framework.create("/protected-api")).await.expect("parent");

    let cut = proxy.cut_after_next_create();
    let created = within(
        "protected",
        framework.create("/protected-api/job-").mode(CreateMode::PersistentSequential).data(b"j").protected(),
    )
    .await
    .expect("the create survives the cut");
    within("the cut", cut).await.expect("a create's reply was cut");
    let name = path::name(&created.path);
    assert!(name.starts_with("_c_") && name.ends_with("-job-0000000000"), "{name}");
    let (children, _) =
        within("children", framework.children("/protected-api", step())).await.expect("children");
    assert_eq!(children, vec![name.to_owned()], "exactly one node: the one we were given");
    let node = within("get", framework.get_data(&created.path, step())).await.expect("get");
    assert_eq!(
        (node.data.as_slice(), node.stat.ephemeral_owner),
        (&b"j"[..], 0),
        "persistent, with its data"
    );
    within("close", framework.close()).await;
}

#[tokio::test]
async fn reads_and_versioned_writes() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("create", framework.create("/rw/config").data(b"v0").creating_parents(ParentMode::Persistent))
        .await
        .expect("create");
    within("child", framework.create("/rw/config/a")).await.expect("child");
    within("child", framework.create("/rw/config/a/b")).await.expect("child");

    let node = within("get", framework.get_data("/rw/config", step())).await.expect("get");
    assert_eq!((node.data.as_slice(), node.stat.version), (&b"v0"[..], 0));
    let stat = within("set", framework.set_data("/rw/config", b"v1", Some(0), step())).await.expect("set");
    assert_eq!(stat.version, 1);
    let stale = within("stale set", framework.set_data("/rw/config", b"v2", Some(0), step())).await;
    assert_eq!(server_error(&stale), Some(zookeeper_client::Error::BadVersion), "{stale:?}");
    assert_eq!(within("get", framework.get_data("/rw/config", step())).await.expect("get").data, b"v1");

    let (children, stat) =
        within("children", framework.children("/rw/config", step())).await.expect("children");
    assert_eq!((children, stat.num_children), (vec!["a".to_owned()], 1));
    assert_eq!(within("count", framework.descendant_count("/rw", step())).await.expect("count"), 3);
    within("sync", framework.sync("/rw/config", step())).await.expect("sync");
    assert!(within("exists", framework.exists("/rw/nothing", step())).await.expect("exists").is_none());
    let missing = within("get missing", framework.get_data("/rw/nothing", step())).await;
    assert!(matches!(&missing, Err(err) if err.is_no_node()), "{missing:?}");

    let ephemeral = within("ephemeral", framework.create("/rw/config/mine").mode(CreateMode::Ephemeral))
        .await
        .expect("ephemeral");
    let ephemerals = within("ephemerals", framework.ephemerals("/rw", step())).await.expect("ephemerals");
    assert_eq!(ephemerals, vec![ephemeral.path]);
    let identities = within("whoami", framework.whoami(step())).await.expect("whoami");
    assert!(identities.iter().any(|(scheme, _)| scheme == "ip"), "{identities:?}");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn deletes_by_version_with_children_quietly() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("create", framework.create("/del/tree/a/b").creating_parents(ParentMode::Persistent))
        .await
        .expect("create");
    within("create", framework.create("/del/versioned").data(b"0")).await.expect("create");
    within("set", framework.set_data("/del/versioned", b"1", None, step())).await.expect("set");

    let wrong = within("wrong version", framework.delete("/del/versioned").version(0)).await;
    assert_eq!(server_error(&wrong), Some(zookeeper_client::Error::BadVersion), "{wrong:?}");
    within("right version", framework.delete("/del/versioned").version(1)).await.expect("delete");

    let not_empty = within("not empty", framework.delete("/del/tree")).await;
    assert_eq!(server_error(&not_empty), Some(zookeeper_client::Error::NotEmpty), "{not_empty:?}");
    within("with children", framework.delete("/del/tree").deleting_children_if_needed())
        .await
        .expect("delete");
    assert!(within("exists", framework.exists("/del/tree", step())).await.expect("exists").is_none());

    let missing = within("missing", framework.delete("/del/tree")).await;
    assert!(matches!(&missing, Err(err) if err.is_no_node()), "{missing:?}");
    within("quietly", framework.delete("/del/tree").quietly()).await.expect("a missing node is fine quietly");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_guaranteed_delete_that_failed_is_finished_after_a_restart() {
    init_tracing();
    let mut server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(20)).start().expect("framework");
    within("create", framework.create("/guaranteed/node/child").creating_parents(ParentMode::Persistent))
        .await
        .expect("create");

    within("stop", server.stop()).await.expect("stop");
    let failed = within(
        "delete while the server is down",
        framework
            .delete("/guaranteed/node")
            .deleting_children_if_needed()
            .guaranteed()
            .timeout(Duration::from_secs(1)),
    )
    .await;
    assert!(failed.is_err(), "no server: {failed:?}");
    assert_eq!(framework.pending_cleanups(), 1, "handed to the cleanup worker");
    within("restart", server.restart()).await.expect("restart");
    within("cleanups", framework.wait_for_cleanups(Deadline::after(Duration::from_secs(60))))
        .await
        .expect("done");
    assert!(within("exists", framework.exists("/guaranteed/node", step())).await.expect("exists").is_none());
    assert!(within("exists", framework.exists("/guaranteed", step())).await.expect("exists").is_some());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn ttl_nodes_expire_and_bad_ttls_send_nothing() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let created = within(
        "ttl",
        framework
            .create("/ttl/short")
            .ttl(Duration::from_millis(500))
            .creating_parents(ParentMode::Persistent),
    )
    .await
    .expect("the server allows TTL nodes");
    assert_eq!(created.path, "/ttl/short");
    eventually("the TTL node expired", || async {
        framework.exists("/ttl/short", step()).await.expect("exists").is_none()
    })
    .await;

    for (what, builder) in [
        ("ephemeral", framework.create("/ttl/bad").mode(CreateMode::Ephemeral).ttl(Duration::from_secs(1))),
        ("zero", framework.create("/ttl/bad").ttl(Duration::ZERO)),
        ("too long", framework.create("/ttl/bad").ttl(Duration::from_secs(40 * 365 * 24 * 3600))),
    ] {
        let refused = within(what, builder).await;
        assert!(matches!(refused, Err(Error::InvalidArgument(_))), "{what}: {refused:?}");
    }
    assert!(within("exists", framework.exists("/ttl/bad", step())).await.expect("exists").is_none());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_transaction_commits_as_a_whole_or_not_at_all() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    within("create", framework.create("/tx/config").data(b"v0").creating_parents(ParentMode::Persistent))
        .await
        .expect("create");

    let results = within(
        "commit",
        framework
            .transaction()
            .check("/tx/config", Some(0))
            .set_data("/tx/config", b"v1", Some(0))
            .create("/tx/history-", b"v1", CreateMode::PersistentSequential)
            .create("/tx/doomed", b"", CreateMode::Persistent)
            .delete("/tx/doomed", None),
    )
    .await
    .expect("commit");
    assert_eq!(results.len(), 5);
    assert_eq!(results[0], TransactionResult::Checked);
    assert!(matches!(&results[1], TransactionResult::SetData { stat } if stat.version == 1), "{results:?}");
    assert!(
        matches!(&results[2], TransactionResult::Created { path, .. } if path == "/tx/history-0000000001")
    );
    assert_eq!(results[4], TransactionResult::Deleted);

    let failed = within(
        "a failing commit",
        framework.transaction().create("/tx/never", b"", CreateMode::Persistent).set_data(
            "/tx/config",
            b"v2",
            Some(0),
        ),
    )
    .await;
    assert!(
        matches!(
            &failed,
            Err(Error::TransactionFailed { index: 1, source: zookeeper_client::Error::BadVersion })
        ),
        "{failed:?}"
    );
    assert!(
        within("exists", framework.exists("/tx/never", step())).await.expect("exists").is_none(),
        "nothing committed"
    );
    assert_eq!(within("get", framework.get_data("/tx/config", step())).await.expect("get").data, b"v1");
    within("close", framework.close()).await;
}

#[tokio::test]
async fn a_transaction_built_on_a_node_writes_only_while_the_node_exists() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let holder = within(
        "holder",
        framework.create_protected(ProtectedCreate::new("/tx-anchor/lock", "lock-"), step()),
    )
    .await
    .expect("holder");
    let results = within(
        "while held",
        framework
            .transaction()
            .while_exists(&holder)
            .create("/tx-anchor/data", b"v1", CreateMode::Persistent)
            .set_data("/tx-anchor/data", b"v2", Some(0)),
    )
    .await
    .expect("written while the node exists");
    assert_eq!(results.len(), 2, "the results are the caller's ops, without the check: {results:?}");
    assert!(matches!(&results[0], TransactionResult::Created { path, .. } if path == "/tx-anchor/data"));

    let failed = within(
        "a failing op",
        framework.transaction().while_exists(&holder).set_data("/tx-anchor/data", b"v3", Some(0)),
    )
    .await;
    assert!(
        matches!(
            &failed,
            Err(Error::TransactionFailed { index: 0, source: zookeeper_client::Error::BadVersion })
        ),
        "a failed op's index counts the caller's ops: {failed:?}"
    );

    let holder_path = holder.path().to_owned();
    within("delete the holder", framework.delete(&holder_path)).await.expect("deleted");
    let lost = within(
        "after the node went",
        framework.transaction().while_exists(&holder).set_data("/tx-anchor/data", b"v4", None),
    )
    .await;
    assert!(matches!(&lost, Err(Error::NodeLost { path }) if *path == holder_path), "{lost:?}");
    let data = within("get", framework.get_data("/tx-anchor/data", step())).await.expect("get");
    assert_eq!(data.data, b"v2", "nothing was written once the node was gone");
    drop(holder.forget());
    within("close", framework.close()).await;
}

#[tokio::test]
async fn bad_input_is_refused_before_anything_is_sent() {
    init_tracing();
    let server = within_for(SERVER_START, "server start", TestingServer::start()).await.expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let before = within("znodes", server.znode_count()).await.expect("count");

    let bad_path = within("bad path", framework.create("no-slash")).await;
    assert!(matches!(bad_path, Err(Error::InvalidPath { .. })), "{bad_path:?}");
    let trailing = within("bad path", framework.get_data("/a/", step())).await;
    assert!(matches!(trailing, Err(Error::InvalidPath { .. })), "{trailing:?}");
    let big = vec![0u8; DEFAULT_MAX_NODE_DATA + 1];
    let too_large = within("too large", framework.create("/big").data(big.clone())).await;
    assert!(matches!(too_large, Err(Error::DataTooLarge { .. })), "{too_large:?}");
    let too_large = within("too large", framework.set_data("/big", &big, None, step())).await;
    assert!(matches!(too_large, Err(Error::DataTooLarge { .. })), "{too_large:?}");
    let in_transaction =
        within("too large", framework.transaction().create("/big", big, CreateMode::Persistent)).await;
    assert!(matches!(in_transaction, Err(Error::DataTooLarge { .. })), "{in_transaction:?}");
    let empty_acl = within("empty ACL", framework.create("/no-acl").acl(Vec::new())).await;
    assert!(matches!(empty_acl, Err(Error::InvalidArgument(_))), "{empty_acl:?}");
    let root = within("root", framework.delete("/")).await;
    assert!(matches!(root, Err(Error::InvalidArgument(_))), "{root:?}");
    assert_eq!(within("znodes", server.znode_count()).await.expect("count"), before, "nothing created");

    within("close", framework.close()).await;
    let closed = within("closed", framework.create("/after-close")).await;
    assert!(matches!(closed, Err(Error::Closed)), "{closed:?}");
}

#[tokio::test]
async fn a_server_without_ttl_nodes_refuses_them_with_a_clear_error() {
    init_tracing();
    let server =
        within_for(SERVER_START, "server start", TestingServer::builder().without_extended_types().start())
            .await
            .expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let refused = within("ttl", framework.create("/no-ttl").ttl(Duration::from_secs(5))).await;
    assert!(
        matches!(&refused, Err(Error::InvalidArgument(message)) if message.contains("extendedTypesEnabled")),
        "{refused:?}"
    );
    assert!(within("exists", framework.exists("/no-ttl", step())).await.expect("exists").is_none());
    within("close", framework.close()).await;
}
