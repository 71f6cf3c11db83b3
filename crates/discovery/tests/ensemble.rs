//! Service discovery on a 3-node ensemble: a `ServiceCache` follows a service through the
//! leader's death and its restart (at least twice) while two other sessions register, update and
//! unregister the service's instances, and converges to what the server holds, which is what the
//! writers last asked for; its events, applied in order, give the same instances.
//!
//! (A registering session's expiry re-registering exactly once with the latest data is in
//! `discovery.rs`, and the cache's view of it in `cache_and_provider.rs`; here the sessions
//! survive the leader's death, and nothing is registered again.)

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::json;
use zk_recipes_discovery::{
    DiscoveryError, ServiceCache, ServiceCacheEvent, ServiceCacheEvents, ServiceDiscovery, ServiceInstance,
    ServiceType,
};
use zk_recipes_framework::{ConnectionState, Deadline, Framework};
use zk_recipes_test_support::*;
use zk_recipes_testing::TestingCluster;

const BASE: &str = "/ensemble-discovery";
const SERVICE: &str = "svc";

/// Writers: sessions that register, update and unregister instances throughout.
const WRITERS: usize = 2;

/// Instance ids per writer (`w<writer>-<n>`): few, so that ids are registered, updated and
/// unregistered again and again.
const IDS_PER_WRITER: usize = 6;

/// The deadline of one writer operation is drawn (uniformly) up to this: many of those sent during an
/// election fail (and the discovery then tries them again in the background), the others ride
/// it out.
const LONGEST_OPERATION: Duration = Duration::from_millis(1500);

/// How many times the leader is killed (and restarted) at least, and at most: past the least, it
/// is killed again until some write was confirmed while the cache's connection was down (the
/// cache then has something to catch up on; most runs have it at the first kill).
const LEADER_KILLS: std::ops::RangeInclusive<usize> = 2..=6;

/// How long after the faults stop (the old leader back, the writers stopped) the server may take
/// to hold what the writers last asked for, and the cache what the server holds. The discovery's
/// background retries back off up to 10 s between rounds, and a short election keeps them far
/// below that.
const CONVERGENCE: Duration = Duration::from_secs(20);

/// Sessions outlive the election by far: nothing expires, nothing is registered again.
const SESSION_TIMEOUT: Duration = Duration::from_secs(10);

fn discovery(framework: &Framework) -> ServiceDiscovery {
    ServiceDiscovery::builder(framework, BASE).build().expect("discovery")
}

fn instance(id: &str, writer: usize, version: u32, service_type: ServiceType) -> ServiceInstance {
    ServiceInstance::builder(SERVICE)
        .id(id)
        .address(format!("10.0.0.{}", writer + 1))
        .port(8000 + (version % 1000) as i32)
        .payload(json!({"writer": writer, "version": version}))
        .service_type(service_type)
        .registration_time_utc(1_700_000_000_000)
        .build()
}

/// The instances by id, as a subscriber builds them from the cache's events. Every id here is a
/// fixed node name (`DYNAMIC` and `STATIC` instances only), so an id names one node, and each event
/// must fit what came before: an `Added` id is new, an `Updated` one's `old` and a `Removed` one
/// are what was held.
#[derive(Default)]
struct Replayed {
    instances: BTreeMap<String, ServiceInstance>,
    events: usize,
}

impl Replayed {
    fn apply(&mut self, event: ServiceCacheEvent) {
        self.events += 1;
        match event {
            ServiceCacheEvent::Added(added) => {
                let id = added.id.clone();
                let before = self.instances.insert(id.clone(), added);
                assert!(before.is_none(), "Added {id}, which was held: {before:?}");
            }
            ServiceCacheEvent::Updated { old, new } => {
                let before = self.instances.insert(new.id.clone(), new);
                assert_eq!(before.as_ref(), Some(&old), "Updated: `old` is what was held");
            }
            ServiceCacheEvent::Removed(removed) => {
                let before = self.instances.remove(&removed.id);
                assert_eq!(before.as_ref(), Some(&removed), "Removed: what was held");
            }
            ServiceCacheEvent::Loaded => {}
            other => panic!("an event this test does not know: {other:?}"),
        }
    }

    /// Applies every event waiting.
    fn drain(&mut self, events: &mut ServiceCacheEvents) {
        while let Some(event) = events.try_next() {
            self.apply(event);
        }
    }

    fn as_list(&self) -> Vec<ServiceInstance> {
        self.instances.values().cloned().collect()
    }
}

/// The cache's instances and the replayed events at one instant: the cache publishes each change
/// under the lock its `instances()` reads under, so when no event is waiting after the read, the
/// events drained so far are exactly those that made it.
fn cache_and_replay_at_one_instant(
    cache: &ServiceCache,
    events: &mut ServiceCacheEvents,
    replayed: &mut Replayed,
) -> (Vec<ServiceInstance>, Vec<ServiceInstance>) {
    loop {
        replayed.drain(events);
        let cached = cache.instances();
        match events.try_next() {
            None => return (cached, replayed.as_list()),
            Some(event) => replayed.apply(event),
        }
    }
}

/// What one writer did: the data it last gave each id it registered or updated (whatever the
/// outcome: the discovery retries what was not confirmed), and its operations' outcomes.
#[derive(Default)]
struct Churn {
    last_given: BTreeMap<String, ServiceInstance>,
    failed: u32,
}

/// Registers, updates and unregisters `w<writer>-*` instances until `stop`; counts confirmed
/// operations in `confirmed`.
async fn churn(
    discovery: ServiceDiscovery,
    writer: usize,
    stop: Arc<AtomicBool>,
    confirmed: Arc<AtomicU32>,
) -> (ServiceDiscovery, Churn) {
    let mut churn = Churn::default();
    let mut version = 0u32;
    while !stop.load(Ordering::Relaxed) {
        version += 1;
        let id = format!("w{writer}-{}", fastrand::usize(0..IDS_PER_WRITER));
        let deadline = Deadline::after(LONGEST_OPERATION.mul_f64(fastrand::f64()));
        let registered = discovery.registered_ids().contains(&id);
        let outcome = match fastrand::u8(0..3) {
            // Register (again: maybe as the other type, which replaces the node).
            0 => {
                let service_type = if fastrand::bool() { ServiceType::Dynamic } else { ServiceType::Static };
                let new = instance(&id, writer, version, service_type);
                let outcome = discovery.register(&new, deadline).await;
                churn.last_given.insert(id, new);
                outcome
            }
            // Update what is registered (the same type: an update cannot change it).
            1 if registered => {
                let mut new = churn.last_given[&id].clone();
                new.port = Some(8000 + (version % 1000) as i32);
                new.payload = Some(json!({"writer": writer, "version": version}));
                let outcome = discovery.update(&new, deadline).await;
                churn.last_given.insert(id, new);
                outcome
            }
            2 if registered => {
                let gone = churn.last_given.remove(&id).expect("registered, so given");
                discovery.unregister(&gone, deadline).await
            }
            _ => continue,
        };
        match outcome {
            Ok(()) => {
                confirmed.fetch_add(1, Ordering::Relaxed);
            }
            Err(err @ (DiscoveryError::NotRegistered { .. } | DiscoveryError::InvalidArgument(_))) => {
                panic!("writer {writer}: refused {err:?}: the test's bookkeeping is wrong")
            }
            // A timeout or a lost connection during the election: the discovery tries again.
            Err(_) => churn.failed += 1,
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    (discovery, churn)
}

/// Waits until the confirmed operations have grown by `more`.
async fn more_confirmed(confirmed: &AtomicU32, more: u32, what: &str) {
    let target = confirmed.load(Ordering::Relaxed) + more;
    eventually(what, || async { confirmed.load(Ordering::Relaxed) >= target }).await;
}

#[tokio::test]
async fn a_cache_follows_a_service_through_the_leaders_death_and_converges_to_the_server() {
    init_tracing();
    let started = Instant::now();
    let mut cluster =
        within_for(SERVER_START, "cluster start", TestingCluster::start(3)).await.expect("cluster");
    let connect = cluster.connect_string();
    let start = |session_timeout| builder(&connect, session_timeout).start().expect("framework");
    let (cache_side, observer) = (start(SESSION_TIMEOUT), start(SESSION_TIMEOUT));
    let writers: Vec<Framework> = (0..WRITERS).map(|_| start(SESSION_TIMEOUT)).collect();
    for framework in writers.iter().chain([&cache_side, &observer]) {
        within("connected", framework.block_until_connected(STEP)).await.expect("connected");
    }

    // The cache starts on an empty service; its subscriber replays everything from there.
    let reader = discovery(&cache_side);
    let cache = within("start the cache", reader.service_cache(SERVICE).start(step())).await.expect("cache");
    let mut events = cache.events();
    let mut replayed = Replayed::default();
    let mut cache_connection = cache_side.connection_events();

    // Each writer has an anchor instance, registered before the faults and left alone.
    let mut discoveries = Vec::new();
    let mut anchors = Vec::new();
    for (writer, framework) in writers.iter().enumerate() {
        let discovery = discovery(framework);
        let anchor = instance(&format!("anchor-{writer}"), writer, 0, ServiceType::Dynamic);
        within("register", discovery.register(&anchor, step())).await.expect("register");
        // Read on the writer's own session: it sees its own writes, whichever member serves it.
        let czxid = data_and_stat(framework, &format!("{BASE}/{SERVICE}/{}", anchor.id)).await.1.czxid;
        anchors.push((anchor, session_of(framework), czxid));
        discoveries.push(discovery);
    }

    let stop = Arc::new(AtomicBool::new(false));
    let confirmed = Arc::new(AtomicU32::new(0));
    // How many writes were confirmed while the cache's connection was down, per outage.
    let missed = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let outages = tokio::spawn({
        let (mut connection, confirmed, missed) =
            (cache_side.connection_events(), Arc::clone(&confirmed), Arc::clone(&missed));
        async move {
            let mut down_at = None;
            while let Some(update) = connection.next().await {
                match update.state() {
                    ConnectionState::Suspended => down_at = Some(confirmed.load(Ordering::Relaxed)),
                    ConnectionState::Reconnected => {
                        if let Some(down_at) = down_at.take() {
                            missed.lock().push(confirmed.load(Ordering::Relaxed) - down_at);
                        }
                    }
                    _ => {}
                }
            }
        }
    });
    let tasks: Vec<_> = discoveries
        .into_iter()
        .enumerate()
        .map(|(writer, discovery)| {
            tokio::spawn(churn(discovery, writer, Arc::clone(&stop), Arc::clone(&confirmed)))
        })
        .collect();
    more_confirmed(&confirmed, 40, "the writers are under way").await;
    replayed.drain(&mut events);
    let events_before_faults = replayed.events;

    // The leader dies: every member stops serving clients until a new one is elected. Then it
    // comes back, as a follower, while the writers go on. Again, as `LEADER_KILLS` says.
    let faults_from = Instant::now();
    let mut kills = 0;
    while kills < *LEADER_KILLS.start()
        || (kills < *LEADER_KILLS.end() && missed.lock().iter().sum::<u32>() == 0)
    {
        kills += 1;
        let killed = within("kill the leader", cluster.kill_leader()).await.expect("kill the leader");
        within_for(
            Duration::from_secs(40),
            "re-election",
            cluster.wait_until_serving(Duration::from_secs(30)),
        )
        .await
        .expect("the other two serve");
        let leader = within("leader", cluster.leader_index()).await.expect("a new leader");
        assert_ne!(leader, killed);
        until_state(&mut cache_connection, ConnectionState::Suspended).await;
        until_state(&mut cache_connection, ConnectionState::Reconnected).await;
        more_confirmed(&confirmed, 40, "writes go on after the election").await;

        within_for(Duration::from_secs(60), "restart the old leader", cluster.restart(killed))
            .await
            .expect("restart");
        within_for(
            Duration::from_secs(40),
            "all three serve",
            cluster.wait_until_serving(Duration::from_secs(30)),
        )
        .await
        .expect("serving");
        more_confirmed(&confirmed, 40, "writes go on with three members again").await;
    }
    outages.abort();
    let missed = missed.lock().clone();
    assert!(
        missed.iter().sum::<u32>() > 0,
        "in {kills} leader kills, no write was confirmed while the cache was disconnected: {missed:?}"
    );
    stop.store(true, Ordering::Relaxed);
    let mut discoveries = Vec::new();
    let mut expected = BTreeMap::new();
    let mut failed = 0;
    for task in tasks {
        let (discovery, churn) = within("a writer stops", task).await.expect("writer");
        // What the writer's discovery holds registered, with the data last given to it.
        for id in discovery.registered_ids() {
            let given = churn
                .last_given
                .get(&id)
                .or_else(|| anchors.iter().map(|(anchor, ..)| anchor).find(|anchor| anchor.id == id));
            expected.insert(id.clone(), given.unwrap_or_else(|| panic!("{id} was never given")).clone());
        }
        failed += churn.failed;
        discoveries.push(discovery);
    }
    let faults_took = faults_from.elapsed();
    let expected: Vec<ServiceInstance> = expected.into_values().collect();

    // Within the bound: the server holds what the writers last asked for, and the cache holds
    // what the server holds (ids and data, in node-name order).
    let converging = Instant::now();
    loop {
        let on_server = within("query", reader.query_for_instances(SERVICE, step())).await.expect("query");
        let cached = cache.instances();
        if on_server == expected && cached == on_server {
            break;
        }
        assert!(
            converging.elapsed() < CONVERGENCE,
            "not converged {CONVERGENCE:?} after the faults:\nwriters asked for {expected:#?}\n\
             the server holds {on_server:#?}\nthe cache holds {cached:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let converged_in = converging.elapsed();
    // The observer's direct query too (its own session, maybe on a member a moment behind).
    let direct = discovery(&observer);
    eventually("the observer reads the same", || async {
        within("query", direct.query_for_instances(SERVICE, step())).await.expect("query") == expected
    })
    .await;

    // The events, applied in order from the start, give what the cache holds.
    let (cached, replay) = cache_and_replay_at_one_instant(&cache, &mut events, &mut replayed);
    assert_eq!(replay, cached, "the replayed events give the cache's instances");
    assert_eq!(cached, expected);
    assert!(
        replayed.events > events_before_faults,
        "the cache reported changes during and after the faults ({events_before_faults} before, {} in all)",
        replayed.events
    );

    // The sessions lived through the leader's death: the anchors were never written again.
    for ((anchor, session, czxid), framework) in anchors.iter().zip(&writers) {
        assert_eq!(session_of(framework), *session, "{}: the same session", anchor.id);
        let stat = data_and_stat(framework, &format!("{BASE}/{SERVICE}/{}", anchor.id)).await.1;
        assert_eq!((stat.czxid, stat.version), (*czxid, 0), "{} left alone", anchor.id);
    }
    eprintln!(
        "{} confirmed writes ({failed} not confirmed; {:?} while the cache was disconnected), {} cache \
         events, {} instances at the end; faults {faults_took:.1?}, converged {converged_in:.1?} after, \
         {:.1?} in all",
        confirmed.load(Ordering::Relaxed),
        missed,
        replayed.events,
        expected.len(),
        started.elapsed()
    );

    for discovery in discoveries {
        within("close", discovery.close(step())).await.expect("close");
    }
    within("close the cache", cache.close()).await;
    for idle in [reader, direct] {
        within("close", idle.close(step())).await.expect("close");
    }
    close_all(writers.into_iter().chain([cache_side, observer])).await;
}
