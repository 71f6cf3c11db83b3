//! The framework on a 3-node ensemble.

use std::time::Duration;

use zk_recipes_framework::zookeeper_client::CreateMode;
use zk_recipes_framework::{ConnectionState, Deadline};
use zk_recipes_test_support::*;
use zk_recipes_testing::TestingCluster;

#[tokio::test]
async fn the_ensemble_keeps_serving_when_its_leader_is_killed() {
    init_tracing();
    let mut cluster =
        within_for(SERVER_START, "cluster start", TestingCluster::start(3)).await.expect("cluster");
    let framework = builder(&cluster.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let mut events = framework.connection_events();
    assert_eq!(next_connection_state(&mut events).await.0, ConnectionState::Connected);

    let create = |name: String| {
        let framework = framework.clone();
        async move {
            framework
                .retry(Deadline::after(STEP), |session| {
                    let name = name.clone();
                    async move {
                        let options = session.create_options(CreateMode::Persistent);
                        match session.client().create(&name, b"", &options).await {
                            Ok(_) | Err(zk_recipes_framework::zookeeper_client::Error::NodeExists) => Ok(()),
                            Err(err) => Err(err.into()),
                        }
                    }
                })
                .await
        }
    };
    within("create before", create("/before".into())).await.expect("created before the kill");

    let killed = within("kill leader", cluster.kill_leader()).await.expect("kill leader");
    within_for(Duration::from_secs(60), "re-election", cluster.wait_until_serving(Duration::from_secs(50)))
        .await
        .expect("the remaining two serve");
    let new_leader = within("leader", cluster.leader_index()).await.expect("a new leader");
    assert_ne!(new_leader, killed);

    within("create after", create("/after".into())).await.expect("created after the kill");
    let session = within("session", framework.session(Deadline::after(STEP))).await.expect("session");
    for node in ["/before", "/after"] {
        assert!(within("stat", session.client().check_stat(node)).await.expect("stat").is_some(), "{node}");
    }
    assert_eq!(session.generation(), 1, "the session survived the leader's death");
    drop(session);
    within("close", framework.close()).await;
}
