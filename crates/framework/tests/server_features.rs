//! What the server can do ([`Framework::server_features`], [`Framework::require`]) on real
//! ZooKeeper 3.8 servers: every feature on a default server, TTL nodes missing on a server started
//! without `zookeeper.extendedTypesEnabled`, the answer cached per session generation, and probes
//! that leave nothing on the server.

use std::time::Duration;

use zk_recipes_framework::{Error, Feature, Framework};
use zk_recipes_test_support::*;
use zk_recipes_testing::TestingServer;

/// The root's children: only `zookeeper` on a fresh server, so a probe left nothing there.
async fn root_children(framework: &Framework) -> Vec<String> {
    children(framework, "/").await
}

#[tokio::test]
async fn a_default_server_has_every_feature_and_the_answer_is_cached_per_session() {
    init_tracing();
    let (_server, framework) = server_and_framework().await;
    within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    let features = within("features", framework.server_features(step())).await.expect("features");
    let version = features.version().expect("srvr names the version");
    assert!(version.starts_with("3."), "{version}");
    for feature in Feature::ALL {
        assert!(features.supports(feature), "{feature} on ZooKeeper {version}");
        assert!(features.require(feature).is_ok());
        within("require", framework.require(feature, step())).await.expect("supported");
    }
    let generation = framework.current().generation;
    assert_eq!(features.generation(), generation);
    // Asked again on the same session: the cached answer.
    let again = within("features again", framework.server_features(step())).await.expect("features");
    assert_eq!(again, features);
    assert_eq!(root_children(&framework).await, vec!["zookeeper".to_owned()]);
    close_all([framework]).await;
}

#[tokio::test]
async fn a_server_without_extended_types_lacks_ttl_nodes_only() {
    init_tracing();
    let server =
        within_for(SERVER_START, "server start", TestingServer::builder().without_extended_types().start())
            .await
            .expect("server");
    let framework = builder(&server.connect_string(), Duration::from_secs(10)).start().expect("framework");
    let features = within("features", framework.server_features(step())).await.expect("features");
    assert!(!features.supports(Feature::TtlNodes));
    for feature in [Feature::MultiRead, Feature::PersistentWatches, Feature::WhoAmI, Feature::GetEphemerals] {
        assert!(features.supports(feature), "{feature}");
    }
    let missing = within("require", framework.require(Feature::TtlNodes, step())).await.expect_err("no TTL");
    match &missing {
        Error::MissingFeature { feature: Feature::TtlNodes, server_version } => {
            assert_eq!(Some(server_version.as_str()), features.version());
        }
        other => panic!("expected MissingFeature, got {other:?}"),
    }
    let message = missing.to_string();
    assert!(message.contains("TTL nodes") && message.contains("extendedTypesEnabled"), "{message}");
    assert!(!missing.is_retryable());
    assert_eq!(root_children(&framework).await, vec!["zookeeper".to_owned()]);
    close_all([framework]).await;
}

#[tokio::test]
async fn a_new_session_is_probed_again() {
    init_tracing();
    let (_server, proxy, framework, other) = proxied(Duration::from_secs(2)).await;
    let first = within("features", framework.server_features(step())).await.expect("features");
    assert_eq!(first.generation(), 1);
    let mut events = framework.connection_events();
    let negotiated = framework.current().session_timeout.expect("session");
    proxy.black_hole(negotiated * 3);
    lost_then_reconnected(&mut events).await;
    let second = within("features", framework.server_features(step())).await.expect("features");
    assert_eq!(second.generation(), framework.current().generation);
    assert!(second.generation() > first.generation(), "{} then {}", first.generation(), second.generation());
    assert_eq!(second.version(), first.version());
    close_all([framework, other]).await;
}
