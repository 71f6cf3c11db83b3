//! The metrics as Prometheus scrapes them: `metrics-exporter-prometheus` serves on a local port
//! (as `examples/metrics.rs` does), a lock cycle, a timed-out acquire and a leadership run on a
//! real server, and the scrape shows each, with and without path labels.

#[allow(dead_code)]
use zk_recipes_tests as common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use common::{within, Env};
use metrics_exporter_prometheus::PrometheusBuilder;
use zk_recipes::framework::Framework;
use zk_recipes::leader::LeaderLatch;
use zk_recipes::mutex::Mutex;

fn scrape(addr: SocketAddr) -> String {
    let mut stream = TcpStream::connect(addr).expect("connect to the exporter");
    stream
        .write_all(b"GET /metrics HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
        .expect("request");
    let mut response = String::new();
    stream.read_to_string(&mut response).expect("response");
    response
}

/// The value of the sample `line_start ...` in `scrape`, if present.
fn sample(scrape: &str, series: &str) -> Option<f64> {
    scrape.lines().find_map(|line| line.strip_prefix(series)?.trim().parse().ok())
}

#[tokio::test]
async fn a_scrape_shows_acquires_holds_timeouts_sessions_and_leadership() {
    let port = TcpListener::bind("127.0.0.1:0").expect("a free port").local_addr().expect("addr").port();
    let addr = SocketAddr::from(([127, 0, 0, 1], port));
    PrometheusBuilder::new().with_http_listener(addr).install().expect("exporter");

    let env = Env::start().await;
    let labelled = env.framework().await;
    let unlabelled = Framework::builder(env.connect()).metric_path_labels(false).start().expect("framework");
    within("connect", unlabelled.block_until_connected(Duration::from_secs(20))).await.expect("connected");

    let mutex = Mutex::new(&labelled, "/metrics-test/lock").expect("mutex");
    let guard = within("lock", mutex.lock()).await.expect("lock");
    let blocked = Mutex::new(&unlabelled, "/metrics-test/lock").expect("mutex");
    let timed_out = within("lock_timeout", blocked.lock_timeout(Duration::from_millis(200))).await;
    assert!(timed_out.is_err_and(|err| err.is_timeout()));
    within("release", guard.release()).await.expect("release");
    let guard = within("lock", blocked.lock()).await.expect("lock");
    within("release", guard.release()).await.expect("release");

    let latch = LeaderLatch::new(&labelled, "/metrics-test/leader", "a").expect("latch");
    latch.start().expect("start");
    within("lead", latch.await_leadership()).await.expect("leads");
    within("close", latch.close(Default::default())).await.expect("close");

    let text =
        within("scrape", async { tokio::task::spawn_blocking(move || scrape(addr)).await.expect("scrape") })
            .await;
    let labelled_series = r#"{path="/metrics-test/lock",lock="lock-"}"#;
    assert_eq!(
        sample(&text, &format!("zk_recipes_lock_acquire_seconds_count{labelled_series}")),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, &format!("zk_recipes_lock_hold_seconds_count{labelled_series}")), Some(1.0));
    let unlabelled_series = r#"{lock="lock-"}"#;
    assert_eq!(
        sample(&text, &format!("zk_recipes_lock_acquire_timeouts_total{unlabelled_series}")),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, &format!("zk_recipes_lock_acquire_seconds_count{unlabelled_series}")),
        Some(1.0)
    );
    assert!(sample(&text, "zk_recipes_sessions_created_total").is_some_and(|count| count >= 2.0), "{text}");
    assert_eq!(
        sample(&text, r#"zk_recipes_leadership_gained_total{path="/metrics-test/leader"}"#),
        Some(1.0)
    );
    assert_eq!(
        sample(&text, r#"zk_recipes_leadership_lost_total{path="/metrics-test/leader",reason="closed"}"#),
        Some(1.0)
    );
    within("close", labelled.close()).await;
    within("close", unlabelled.close()).await;
}
