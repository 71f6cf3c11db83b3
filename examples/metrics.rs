//! zk-recipes' metrics served for Prometheus: installs `metrics-exporter-prometheus` on a local
//! port, runs a lock cycle, a leader election and a queue round trip, then prints what a scrape
//! of `http://<addr>/metrics` returns and exits.
//!
//! `cargo run -p zk-recipes-examples --example metrics` (uses `ZK_CONNECT`, or starts an embedded
//! ZooKeeper). `METRICS_ADDR` sets the listen address (default: a free port on 127.0.0.1);
//! `METRICS_SERVE_SECONDS=600` keeps serving for that long before exiting.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use metrics_exporter_prometheus::PrometheusBuilder;
use zk_recipes::framework::Framework;
use zk_recipes::leader::LeaderLatch;
use zk_recipes::mutex::Mutex;
use zk_recipes::queue::{DistributedQueue, Utf8Serializer};

mod support;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // 1. The recorder first: recipes register their metrics when they are built.
    let addr: SocketAddr = match std::env::var("METRICS_ADDR") {
        Ok(addr) => addr.parse()?,
        // A port the system has free right now, so that runs side by side never collide.
        Err(_) => TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?,
    };
    PrometheusBuilder::new().with_http_listener(addr).install()?;
    println!("serving metrics at http://{addr}/metrics");

    let (connect_string, _embedded) = support::zookeeper().await?;
    let framework = Framework::builder(connect_string.as_str()).namespace("zk-recipes-metrics").start()?;
    framework.block_until_connected(Duration::from_secs(15)).await?;

    // 2. Some work to measure.
    let mutex = Mutex::new(&framework, "/locks/orders")?;
    for _ in 0..3 {
        mutex.lock_timeout(Duration::from_secs(5)).await?.release().await?;
    }
    let latch = LeaderLatch::new(&framework, "/leader", "example")?;
    latch.start()?;
    latch.await_leadership_timeout(Duration::from_secs(10)).await?;
    let queue = DistributedQueue::builder(&framework, "/jobs").serializer(Utf8Serializer).build()?;
    queue.put(&"job-1".to_owned()).await?;
    let mut consumer = queue.consumer();
    if let Some(delivery) = consumer.next().await {
        delivery?.ack().await?;
    }

    // 3. What Prometheus would read.
    println!("{}", scrape(addr)?);
    let serve_for =
        std::env::var("METRICS_SERVE_SECONDS").ok().and_then(|value| value.parse().ok()).unwrap_or(0);
    tokio::time::sleep(Duration::from_secs(serve_for)).await;
    latch.close(Default::default()).await?;
    framework.close().await;
    Ok(())
}

/// `GET /metrics`, the zk-recipes lines only.
fn scrape(addr: SocketAddr) -> std::io::Result<String> {
    let mut stream = TcpStream::connect(addr)?;
    stream.write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")?;
    let mut response = String::new();
    stream.read_to_string(&mut response)?;
    Ok(response.lines().filter(|line| line.contains("zk_recipes_")).collect::<Vec<_>>().join("\n"))
}
