//! A standalone `TestingServer` against the real ZooKeeper on this machine.

mod common;
mod states;

use std::io::{BufRead, BufReader};
use std::net::TcpStream as StdTcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{connect, create};
use states::wait_for_state;
use zk_recipes_testing::{
    within, within_for, ClusterMember, CutAfterCreate, CutAfterReply, FaultProxy, ServerMode, ServerSlot,
    TestingCluster, TestingError, TestingServer, SERVER_START,
};
use zookeeper_client::SessionState;

#[test]
fn public_types_are_send_and_sync() {
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<TestingServer>();
    assert_send_sync::<TestingCluster>();
    assert_send_sync::<ClusterMember>();
    assert_send_sync::<FaultProxy>();
    assert_send_sync::<CutAfterCreate>();
    assert_send_sync::<CutAfterReply>();
    assert_send_sync::<ServerSlot>();
    assert_send_sync::<TestingError>();
}

#[tokio::test]
async fn starts_and_answers_four_letter_words() {
    let started = Instant::now();
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    eprintln!("TestingServer::start took {:?} (including waiting for the slot)", started.elapsed());

    assert_eq!(server.connect_string(), format!("127.0.0.1:{}", server.port()));
    assert_eq!(server.address().port(), server.port());
    assert!(server.is_running());
    assert_eq!(within("ruok", server.four_letter_word("ruok")).await.expect("ruok"), "imok");
    assert_eq!(within("srvr", server.mode()).await.expect("srvr"), ServerMode::Standalone);
    let stats = within("mntr", server.mntr()).await.expect("mntr");
    assert!(stats["zk_version"].starts_with("3."), "{stats:?}");
    let log = std::fs::read_to_string(server.log_path()).expect("log file");
    assert!(log.contains("binding to port"), "the server log is written: {log}");
    let config = within("conf", server.four_letter_word("conf")).await.expect("conf");
    assert!(config.contains("minSessionTimeout=1000"), "{config}");
    assert!(config.contains("maxSessionTimeout=60000"), "{config}");
}

#[tokio::test]
async fn session_timeouts_are_clamped_to_the_configured_bounds() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let short = connect(&server.connect_string(), Duration::from_millis(300)).await;
    assert_eq!(short.session_timeout(), Duration::from_millis(1_000), "min session timeout is 1 s");
    let long = connect(&server.connect_string(), Duration::from_secs(600)).await;
    assert_eq!(long.session_timeout(), Duration::from_secs(60), "max session timeout is 60 s");
}

#[tokio::test]
async fn stop_refuses_connections_and_restart_keeps_the_data() {
    let mut server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let port = server.port();
    let client = connect(&server.connect_string(), Duration::from_secs(10)).await;
    create(&client, "/kept", b"across restarts").await;
    drop(client);

    within("stopping", server.stop()).await.expect("stop");
    assert!(!server.is_running());
    assert_eq!(server.pid(), None);
    let refused = StdTcpStream::connect(server.address()).expect_err("a stopped server refuses connections");
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);

    within_for(SERVER_START, "restarting", server.restart()).await.expect("restart");
    assert_eq!(server.port(), port, "same port");
    assert!(server.is_running());
    let client = connect(&server.connect_string(), Duration::from_secs(10)).await;
    let (data, _) = within("reading", client.get_data("/kept")).await.expect("the node survived");
    assert_eq!(data, b"across restarts");
}

#[tokio::test]
async fn a_busy_fixed_port_is_reported_as_address_in_use() {
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = squatter.local_addr().expect("address").port();
    let result =
        within_for(SERVER_START, "starting on a busy port", TestingServer::builder().port(port).start())
            .await;
    match result {
        Err(TestingError::AddressInUse { attempts: 1, log_tail }) => {
            assert!(log_tail.contains("Address already in use"), "{log_tail}")
        }
        other => panic!("expected AddressInUse, got {other:?}"),
    }
}

#[tokio::test]
async fn kill_ends_the_jvm_and_the_process_is_gone() {
    let mut server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let pid = server.pid().expect("a running server has a pid");
    assert!(java_is_alive(pid));
    within("killing", server.kill()).await.expect("kill");
    assert!(!server.is_running());
    assert!(!java_is_alive(pid), "the JVM is dead after kill()");
    assert!(StdTcpStream::connect(server.address()).is_err(), "a killed server refuses connections");
    assert!(matches!(server.pause(), Err(TestingError::NotRunning)));
}

#[tokio::test]
async fn pause_disconnects_clients_and_resume_reconnects_them() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let client = connect(&server.connect_string(), Duration::from_secs(6)).await;
    let session = client.session_id();
    let mut states = client.state_watcher();

    server.pause().expect("pause");
    wait_for_state(&mut states, SessionState::Disconnected, Duration::from_secs(10)).await;
    server.resume().expect("resume");
    wait_for_state(&mut states, SessionState::SyncConnected, Duration::from_secs(10)).await;

    assert_eq!(client.session_id(), session, "the session survived a pause shorter than its timeout");
    create(&client, "/after-pause", b"").await;
}

#[tokio::test]
async fn watch_and_znode_counts_follow_the_clients() {
    let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
    let client = connect(&server.connect_string(), Duration::from_secs(10)).await;
    let znodes_before = within("mntr", server.znode_count()).await.expect("znode count");
    assert_eq!(within("wchc", server.watch_count()).await.expect("watch count"), 0);

    create(&client, "/watched", b"").await;
    let (_, _, watcher) = within("watching", client.get_and_watch_data("/watched")).await.expect("watch");
    assert_eq!(within("mntr", server.znode_count()).await.expect("znode count"), znodes_before + 1);
    assert_eq!(within("wchc", server.watch_count()).await.expect("watch count"), 1);
    let watches = within("wchc", server.watches()).await.expect("watches");
    assert_eq!(watches.values().flatten().collect::<Vec<_>>(), vec!["/watched"]);

    within("deleting", client.delete("/watched", None)).await.expect("delete");
    within("watch event", watcher.changed()).await;
    assert_eq!(within("wchc", server.watch_count()).await.expect("watch count"), 0);
}

/// Set by [`jvm_dies_when_the_test_process_is_sigkilled`] for the re-executed test binary.
const WATCHDOG_CHILD_ENV: &str = "ZK_RECIPES_TESTING_WATCHDOG_CHILD";

/// Not a test on its own: the child half of [`jvm_dies_when_the_test_process_is_sigkilled`].
/// Starts a server, prints its JVM's pid and sleeps until it is SIGKILLed.
#[test]
fn watchdog_child() {
    if std::env::var_os(WATCHDOG_CHILD_ENV).is_none() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let server = within_for(SERVER_START, "starting", TestingServer::start()).await.expect("start");
        println!("\nDATA_DIR={}", server.data_dir().display());
        println!("JAVA_PID={}", server.pid().expect("pid"));
        tokio::time::sleep(Duration::from_secs(120)).await;
    });
}

/// Kills the child process on drop, so a failing test leaves nothing behind.
struct KillOnDrop(Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[tokio::test]
async fn jvm_dies_when_the_test_process_is_sigkilled() {
    // The child's server counts against this process's one-set-of-servers budget.
    let _slot = within_for(SERVER_START, "waiting for the server slot", ServerSlot::acquire()).await;
    let mut child = KillOnDrop(
        Command::new(std::env::current_exe().expect("current exe"))
            .args(["watchdog_child", "--exact", "--nocapture", "--test-threads=1"])
            .env(WATCHDOG_CHILD_ENV, "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("re-exec the test binary"),
    );
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (data_dir, java_pid) = within_for(
        SERVER_START,
        "the child reporting its data dir and JVM pid",
        tokio::task::spawn_blocking(move || {
            let mut data_dir = None;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some((_, dir)) = line.split_once("DATA_DIR=") {
                    data_dir = Some(std::path::PathBuf::from(dir.trim()));
                }
                if let Some((_, pid)) = line.split_once("JAVA_PID=") {
                    return Some((data_dir?, pid.trim().parse::<u32>().ok()?));
                }
            }
            None
        }),
    )
    .await
    .expect("reader thread")
    .expect("the child printed DATA_DIR=… and JAVA_PID=…");
    assert!(data_dir.is_dir());
    assert!(java_is_alive(java_pid), "the child's JVM runs");

    child.0.kill().expect("SIGKILL the child"); // std's kill() is SIGKILL: no cleanup runs in the child
    child.0.wait().expect("reap the child");

    let deadline = Instant::now() + Duration::from_secs(10);
    while java_is_alive(java_pid) {
        assert!(Instant::now() < deadline, "JVM {java_pid} outlived its SIGKILLed parent");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The watchdog also deletes the temp dir that the killed process could not.
    while data_dir.exists() {
        assert!(Instant::now() < deadline, "{} outlived its SIGKILLed owner", data_dir.display());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// True until `pid` is completely dead: gone, or a zombie whose threads have all exited (a
/// SIGKILLed JVM's main thread is a zombie while its other threads are still being torn down).
fn java_is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return false };
    match stat.rsplit_once(')').and_then(|(_, rest)| rest.trim_start().chars().next()) {
        None => false,
        Some('Z' | 'X') => {
            std::fs::read_dir(format!("/proc/{pid}/task")).map(|tasks| tasks.count() > 1).unwrap_or(false)
        }
        Some(_) => true,
    }
}
