//! `FaultProxy` between a zookeeper-client session and a real `TestingServer`.

mod common;
mod states;

use std::time::Duration;

use common::{connect, create};
use states::wait_for_state;
use zk_recipes_testing::{within, within_for, FaultProxy, RequestMatch, TestingServer, SERVER_START, STEP};
use zookeeper_client::{Acls, CreateMode, SessionState};

#[tokio::test]
async fn cut_now_disconnects_and_the_client_reconnects_with_the_same_session() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    let session = client.session_id();
    create(&client, "/before-cut", b"").await;
    let mut states = client.state_watcher();

    assert_eq!(proxy.cut_now(), 1, "one connection was open");
    wait_for_state(&mut states, SessionState::Disconnected, STEP).await;
    wait_for_state(&mut states, SessionState::SyncConnected, STEP).await;

    assert_eq!(client.session_id(), session);
    create(&client, "/after-cut", b"").await;
    let stats = proxy.stats();
    assert_eq!(stats.accepted, 2, "the client came back through the proxy: {stats:?}");
    assert_eq!(stats.open, 1, "{stats:?}");
    assert_eq!(stats.cut, 1, "{stats:?}");
    assert!(stats.bytes_to_server > 0 && stats.bytes_to_client > 0, "{stats:?}");
}

#[tokio::test]
async fn writes_to_the_server_count_writes_only() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    let before = proxy.stats().writes_to_server;
    within("read", client.check_stat("/")).await.expect("exists");
    within("read", client.list_children("/")).await.expect("list");
    assert_eq!(proxy.stats().writes_to_server, before, "reads are not writes");
    create(&client, "/written", b"").await;
    within("set", client.set_data("/written", b"x", None)).await.expect("set");
    let mut multi = client.new_multi_writer();
    multi.add_delete("/written", None).expect("valid path");
    within("multi", multi.commit()).await.expect("multi");
    assert_eq!(proxy.stats().writes_to_server, before + 3, "a create, a set and a multi");
}

#[tokio::test]
async fn black_hole_past_the_session_timeout_expires_only_that_session() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let victim = connect(&proxy.connect_string(), Duration::from_secs(2)).await;
    assert_eq!(victim.session_timeout(), Duration::from_secs(2));
    let bystander = connect(&server.connect_string(), Duration::from_secs(2)).await;
    let ephemeral = CreateMode::Ephemeral.with_acls(Acls::anyone_all());
    within("creating", victim.create("/victim", b"", &ephemeral)).await.expect("create");
    let mut states = victim.state_watcher();

    proxy.black_hole(Duration::from_secs(5));
    assert!(proxy.is_black_holed());
    wait_for_state(&mut states, SessionState::Expired, STEP).await;

    within("the server deleting the expired session's ephemeral node", async {
        while bystander.check_stat("/victim").await.expect("check").is_some() {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(bystander.state(), SessionState::SyncConnected, "the direct session is untouched");
}

#[tokio::test]
async fn short_black_hole_is_silence_then_a_reconnect() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(6)).await;
    let session = client.session_id();
    let mut states = client.state_watcher();

    proxy.black_hole(Duration::from_millis(3_000));
    // Silence: the client only notices after its read timeout (2/5 of 6 s), not at once.
    wait_for_state(&mut states, SessionState::Disconnected, STEP).await;
    wait_for_state(&mut states, SessionState::SyncConnected, STEP).await;
    assert!(!proxy.is_black_holed());
    assert_eq!(
        client.session_id(),
        session,
        "a black hole shorter than the session timeout keeps the session"
    );
    create(&client, "/after-hole", b"").await;
}

#[tokio::test]
async fn cut_after_next_create_loses_the_reply_of_a_create_that_happened() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    let direct = connect(&server.connect_string(), Duration::from_secs(10)).await;
    create(&client, "/parent", b"").await;
    let mut states = client.state_watcher();

    let cut = proxy.cut_after_next_create();
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let result = within("the cut create", client.create("/parent/child", b"data", &persistent)).await;
    match result {
        Err(zookeeper_client::Error::ConnectionLoss | zookeeper_client::Error::Custom(_)) => {}
        other => panic!("expected a connection-loss error, got {other:?}"),
    }
    let cut = within("the cut", cut).await.expect("cut happened");
    assert_eq!(cut.path, "/parent/child");
    assert_eq!(cut.server_error, 0, "the server created the node");

    let stat = within("checking directly", direct.check_stat("/parent/child")).await.expect("check");
    assert!(stat.is_some(), "the node exists although the client saw a connection loss");

    wait_for_state(&mut states, SessionState::SyncConnected, STEP).await;
    let again = within("retrying the create", client.create("/parent/child", b"data", &persistent)).await;
    assert_eq!(again.err(), Some(zookeeper_client::Error::NodeExists), "a blind retry finds its own node");
    assert_eq!(proxy.stats().cut, 1);
}

#[tokio::test]
async fn cut_after_next_reply_loses_the_reply_of_a_committed_multi_and_of_a_delete() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(10)).await;
    let direct = connect(&server.connect_string(), Duration::from_secs(10)).await;
    for path in ["/multi", "/multi/item", "/multi/lock", "/other", "/deletes", "/deletes/a"] {
        create(&client, path, b"").await;
    }
    let mut states = client.state_watcher();

    // Only a multi touching /multi: a plain delete elsewhere passes untouched first.
    let cut = proxy.cut_after_next_reply(RequestMatch::multi().under("/multi"));
    within("an unmatched delete", client.delete("/other", None)).await.expect("not cut");
    let mut multi = client.new_multi_writer();
    multi.add_check_version("/multi/lock", -1).expect("check");
    multi.add_delete("/multi/item", None).expect("delete");
    multi.add_delete("/multi/lock", None).expect("delete");
    let result = within("the cut multi", multi.commit()).await;
    assert!(
        matches!(result, Err(zookeeper_client::MultiWriteError::RequestFailed { .. })),
        "expected a connection loss, got {result:?}"
    );
    let cut = within("the cut", cut).await.expect("cut happened");
    assert_eq!(cut.op_code, 14);
    assert_eq!(cut.path, "/multi/lock");
    assert_eq!(
        cut.ops,
        vec![(13, "/multi/lock".to_owned()), (2, "/multi/item".to_owned()), (2, "/multi/lock".to_owned())]
    );
    let left = within("listing directly", direct.list_children("/multi")).await.expect("list");
    assert!(left.is_empty(), "the server committed the multi: {left:?}");
    wait_for_state(&mut states, SessionState::SyncConnected, STEP).await;

    let cut = proxy.cut_after_next_reply(RequestMatch::delete().under("/deletes/"));
    let result = within("the cut delete", client.delete("/deletes/a", None)).await;
    assert!(result.is_err(), "expected a connection loss, got {result:?}");
    let cut = within("the cut", cut).await.expect("cut happened");
    assert_eq!((cut.op_code, cut.path.as_str(), cut.server_error), (2, "/deletes/a", 0));
    assert!(cut.ops.is_empty());
    let stat = within("checking directly", direct.check_stat("/deletes/a")).await.expect("check");
    assert!(stat.is_none(), "the server deleted the node");
    wait_for_state(&mut states, SessionState::SyncConnected, STEP).await;
    let again = within("a blind retry", client.delete("/deletes/a", None)).await;
    assert_eq!(again.err(), Some(zookeeper_client::Error::NoNode), "a blind retry finds its own delete done");
    assert_eq!(proxy.stats().cut, 2);
}

#[tokio::test]
async fn black_hole_at_next_request_holds_that_request_back_from_the_server() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let proxy = within("starting the proxy", FaultProxy::start(server.address())).await.expect("proxy");
    let client = connect(&proxy.connect_string(), Duration::from_secs(6)).await;
    let bystander = connect(&server.connect_string(), Duration::from_secs(6)).await;
    create(&client, "/held", b"").await;
    let held = proxy
        .black_hole_at_next_request(RequestMatch::create().under("/held/"), Duration::from_millis(1_500));
    // A create elsewhere goes through; the matching one starts the black hole and never arrives.
    create(&client, "/elsewhere", b"").await;
    let persistent = CreateMode::Persistent.with_acls(Acls::anyone_all());
    let create = client.create("/held/child", b"", &persistent);
    let request = within("the black hole starting", held).await.expect("held");
    assert_eq!((request.op_code, request.path.as_str()), (15, "/held/child"));
    assert!(proxy.is_black_holed());
    let outcome = within("the held create failing", create).await;
    assert!(outcome.is_err(), "the create never reached the server: {outcome:?}");
    assert!(!proxy.is_black_holed(), "the black hole has ended");
    let found = within("looking", bystander.check_stat("/held/child")).await.expect("check");
    assert!(found.is_none(), "the held create must not have reached the server");
}
