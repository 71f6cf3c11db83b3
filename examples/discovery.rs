//! Service discovery in Curator's znodes and JSON: two instances of a service register, a client
//! discovers them, picks one per call with a round-robin provider, and sees one leave through the
//! service cache's events, which name the instance (Curator's listeners only say "changed").
//!
//! `cargo run -p zk-recipes-examples --example discovery` (uses `ZK_CONNECT`, or an embedded
//! ZooKeeper). While it runs, `zkr --namespace zk-recipes-example services greeter` lists the
//! instances as a Java service using Curator would see them.

use std::future::Future;
use std::time::Duration;

use zk_recipes::discovery::{
    ProviderStrategy, ServiceCacheEvent, ServiceDiscovery, ServiceInstance, UriSpec,
};
use zk_recipes::framework::{Deadline, Framework};

mod support;

/// How long any one step may take.
const STEP: Duration = Duration::from_secs(10);

/// `future`, or an error once `STEP` has passed.
async fn within<T>(what: &str, future: impl Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(STEP, future).await.map_err(|_| format!("{what}: nothing within {STEP:?}"))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    support::init_logging();
    let (connect, _embedded) = support::zookeeper().await?;
    let framework = Framework::builder(connect.as_str()).namespace("zk-recipes-example").start()?;
    framework.block_until_connected(STEP).await?;
    let deadline = || Deadline::after(STEP);

    // 1. Two instances of `greeter` register: ephemeral nodes under /services/greeter, each
    //    holding the instance as Curator's JsonInstanceSerializer writes it.
    let discovery = ServiceDiscovery::builder(&framework, "/services").build()?;
    let spec = UriSpec::parse("{scheme}://{address}:{port}")?;
    let instances: Vec<ServiceInstance> = [("greeter-1", 8081), ("greeter-2", 8082)]
        .into_iter()
        .map(|(id, port)| {
            ServiceInstance::builder("greeter")
                .id(id)
                .address("127.0.0.1")
                .port(port)
                .uri_spec(spec.clone())
                .build()
        })
        .collect();
    for instance in &instances {
        discovery.register(instance, deadline()).await?;
        println!("registered {} at {}", instance.id, instance.resolve_uri().unwrap_or_default());
    }

    // 2. Discover them, as Curator's queryForNames and queryForInstances do.
    for name in discovery.query_for_names(deadline()).await? {
        let found = discovery.query_for_instances(&name, deadline()).await?;
        let ids: Vec<&str> = found.iter().map(|instance| instance.id.as_str()).collect();
        println!("service {name}: {} instances {ids:?}", found.len());
    }

    // 3. Pick one per call, round robin (in node-name order), from a provider's cache: no round
    //    trip per pick.
    let provider =
        discovery.service_provider("greeter").strategy(ProviderStrategy::RoundRobin).start(STEP).await?;
    for call in 1..=4 {
        let picked = provider.get_instance().ok_or("no greeter to call")?;
        println!("call {call} goes to {} ({})", picked.id, picked.resolve_uri().unwrap_or_default());
    }

    // 4. Watch one leave. A subscription first replays what the cache holds, then `Loaded`.
    let mut events = provider.cache().events();
    loop {
        match within("the cache's first events", events.next()).await? {
            Some(ServiceCacheEvent::Added(instance)) => println!("cache holds {}", instance.id),
            Some(ServiceCacheEvent::Loaded) => break,
            Some(other) => println!("cache: {other:?}"),
            None => return Err("the cache closed".into()),
        }
    }
    let leaving = &instances[1];
    discovery.unregister(leaving, deadline()).await?;
    println!("unregistered {}", leaving.id);
    loop {
        match within("the Removed event", events.next()).await? {
            Some(ServiceCacheEvent::Removed(gone)) => {
                println!("event: Removed({}, {})", gone.id, gone.resolve_uri().unwrap_or_default());
                assert_eq!(gone.id, leaving.id, "the event names the instance that left");
                break;
            }
            Some(other) => println!("event: {other:?}"),
            None => return Err("the cache closed".into()),
        }
    }
    let left: Vec<String> = provider.get_all_instances().into_iter().map(|instance| instance.id).collect();
    println!("the provider now picks from {left:?}");
    assert_eq!(left, [instances[0].id.clone()]);

    // 5. Close: the provider's watch goes, the discovery deletes the instances it registered
    //    (waiting for the deletes), then the session ends.
    drop(events);
    within("closing the provider", provider.close()).await?;
    discovery.close(deadline()).await?;
    within("closing the framework", framework.close()).await?;
    println!("closed");
    Ok(())
}
