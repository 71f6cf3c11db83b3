//! Replies lost on the way back (a fault proxy cuts the connection right after the server
//! answered): an acquire, renew or release whose reply was lost is resolved, never left holding
//! an unknown lease, and a kazoo-layout write sent once leaves no half-written record.

use std::time::Duration;

use zk_recipes_framework::Framework;
use zk_recipes_lease::{Lease, LeaseLayout};
use zk_recipes_test_support::*;
use zk_recipes_testing::RequestMatch;

fn lease(framework: &Framework, path: &str, layout: LeaseLayout) -> Lease {
    Lease::builder(framework, path, Duration::from_secs(30))
        .layout(layout)
        .identifier("holder-a")
        .timeout(STEP)
        .build()
        .expect("lease")
}

#[tokio::test]
async fn native_acquire_renew_and_release_survive_their_lost_replies() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    let path = "/lost/native/lease";
    let a = lease(&framework, path, LeaseLayout::Native);

    // The create committed, its reply was lost: the retried create meets our node and takes it.
    let cut = proxy.cut_after_next_reply(RequestMatch::create().under(path));
    let held = within("acquire", a.acquire()).await.expect("acquire resolves its own node");
    within("cut", cut).await.expect("the create's reply was cut");
    let (_, stat) = data_and_stat(&observer, path).await;
    assert_eq!(stat.czxid, held.fencing_token(), "the node the lost reply made is the one held");
    assert_eq!(children(&observer, "/lost/native").await, ["lease"], "one node, not two");

    // The set committed, its reply was lost: the retry's BadVersion is read back as ours.
    let cut = proxy.cut_after_next_reply(RequestMatch::set_data().under(path));
    within("renew", held.renew()).await.expect("renew resolves its own write");
    within("cut", cut).await.expect("the set's reply was cut");
    assert_eq!(data_and_stat(&observer, path).await.1.version, 1, "renewed once");
    assert_eq!(held.fencing_token(), stat.czxid);

    // The delete committed, its reply was lost: the retry finds nothing, which is released.
    let cut = proxy.cut_after_next_reply(RequestMatch::delete().under(path));
    within("release", held.release()).await.expect("release");
    within("cut", cut).await.expect("the delete's reply was cut");
    assert!(within("exists", observer.exists(path, step())).await.expect("exists").is_none());
    close_all([framework, observer]).await;
}

#[tokio::test]
async fn a_kazoo_record_write_whose_reply_was_lost_is_read_back() {
    init_tracing();
    let (_server, proxy, framework, observer) = proxied(Duration::from_secs(10)).await;
    let path = "/lost/kazoo/lease";
    let a = lease(&framework, path, LeaseLayout::Kazoo);
    let record = format!("{path}/lease_holder");

    // The guarded write (one multi, sent once, never retried) committed and its reply was lost:
    // the acquire reads the record back and finds its own, so it holds, and knows it.
    let cut = proxy.cut_after_next_reply(RequestMatch::multi().under(&record));
    let held = within("acquire", a.acquire()).await.expect("the lost write is read back as ours");
    within("cut", cut).await.expect("the multi's reply was cut");
    let (_, stat) = data_and_stat(&observer, &record).await;
    assert_eq!(stat.czxid, held.fencing_token());
    assert_eq!(children(&observer, path).await, ["lease_holder"], "kazoo's lock released");

    // A renew's guarded write likewise: read back, renewed, the token kept.
    tokio::time::sleep(Duration::from_millis(1100)).await; // a later end, so the data differs
    let end = held.end();
    let cut = proxy.cut_after_next_reply(RequestMatch::multi().under(&record));
    within("renew", held.renew()).await.expect("the lost renew is read back as ours");
    within("cut", cut).await.expect("the multi's reply was cut");
    assert!(held.end() > end && held.is_valid());
    let (data, renewed) = data_and_stat(&observer, &record).await;
    assert_eq!((renewed.czxid, renewed.version), (stat.czxid, 1));
    assert!(String::from_utf8(data).unwrap().contains("holder-a"));
    within("release", held.release()).await.expect("release");
    no_children_left(&observer, path).await;
    close_all([framework, observer]).await;
}
