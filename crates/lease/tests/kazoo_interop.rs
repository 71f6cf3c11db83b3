//! The kazoo layout against real kazoo 2.11 (`NonBlockingLease`, `MultiNonBlockingLease`, run by
//! the Python of the virtualenv `scripts/install-deps.sh` makes) on a real ZooKeeper server:
//! each denies while the other holds, each reads the other's `lease_holder` (kazoo's bytes are
//! ours), and a multi-lease with mixed holders never exceeds its count.

use std::time::{Duration, SystemTime};

use zk_recipes_framework::Framework;
use zk_recipes_lease::{Lease, LeaseError, LeaseLayout};
use zk_recipes_test_support::*;

mod common;
use common::epoch_secs;

fn lease(framework: &Framework, path: &str, duration: Duration, identifier: &str) -> Lease {
    common::lease_in(LeaseLayout::Kazoo, framework, path, duration, identifier)
}
use zk_recipes_testing::kazoo_python;

/// One kazoo client run: `lease <path> <seconds> <identifier>` or `multi:<count> ...` prints
/// `OBTAINED` or `DENIED`; `read <path>` prints whether the record is exactly `json.dumps` of
/// what it holds, then its holder and its end as seconds after the epoch (as kazoo parses it).
const KAZOO_SCRIPT: &str = r#"
import calendar, datetime, json, sys
from kazoo.client import KazooClient
from kazoo.recipe.lease import MultiNonBlockingLease, NonBlockingLease

hosts, command, path = sys.argv[1:4]
zk = KazooClient(hosts=hosts, timeout=10)
zk.start(timeout=20)
try:
    if command == "read":
        raw, _ = zk.get(path + "/lease_holder")
        data = json.loads(raw.decode("utf-8"))
        end = datetime.datetime.strptime(data["end"], "%Y-%m-%dT%H:%M:%S")
        exact = json.dumps(data).encode("utf-8") == raw
        print("EXACT" if exact else "DIFFERENT", data["holder"], calendar.timegm(end.timetuple()))
    else:
        duration = datetime.timedelta(seconds=float(sys.argv[4]))
        identifier = sys.argv[5]
        if command == "lease":
            lease = NonBlockingLease(zk, path, duration, identifier=identifier)
        else:
            count = int(command.split(":")[1])
            lease = MultiNonBlockingLease(zk, count, path, duration, identifier=identifier)
        print("OBTAINED" if lease else "DENIED")
finally:
    zk.stop()
    zk.close()
"#;

/// Runs the kazoo script with `args`; its one line of output. Panics naming the install command
/// if kazoo is missing, or with kazoo's stderr if it failed.
async fn kazoo(connect: &str, args: &[&str]) -> String {
    let python = kazoo_python().unwrap_or_else(|err| panic!("{err}"));
    let mut command = tokio::process::Command::new(python);
    command.arg("-c").arg(KAZOO_SCRIPT).arg(connect).args(args).kill_on_drop(true);
    let output = within("kazoo", command.output()).await.expect("run kazoo");
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    assert!(
        output.status.success(),
        "kazoo {args:?} failed: {}\n{stdout}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[tokio::test]
async fn kazoo_and_rust_deny_each_other_and_read_each_others_records() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let connect = server.connect_string();
    let path = "/interop/lease";
    let rust = lease(&framework, path, Duration::from_secs(30), "rust-1");

    // Rust holds: kazoo is denied, and reads our record as exactly its own json.dumps.
    let held = within("rust takes it", rust.acquire()).await.expect("acquire");
    assert_eq!(kazoo(&connect, &["lease", path, "30", "kazoo-1"]).await, "DENIED");
    let end = epoch_secs(held.end().expect("end"));
    assert_eq!(kazoo(&connect, &["read", path]).await, format!("EXACT rust-1 {end}"));
    // kazoo's renewal rule reads our record too: the same identifier takes it.
    assert_eq!(kazoo(&connect, &["lease", path, "30", "rust-1"]).await, "OBTAINED");
    let renewed = rust.holder().await.expect("holder").expect("held");
    assert_eq!(renewed.identifier, "rust-1");
    assert!(renewed.fencing_token > held.fencing_token(), "kazoo re-created the record");
    // Our lease is no longer the record we wrote: renew says so and touches nothing.
    assert!(matches!(within("renew", held.renew()).await, Err(LeaseError::Lost { .. })));
    within("release", held.release()).await.expect("release finds nothing of ours");
    assert_eq!(rust.holder().await.expect("holder"), Some(renewed), "kazoo's record untouched");
    within("drop", framework.delete(&format!("{path}/lease_holder"))).await.expect("delete");

    // kazoo holds: Rust is denied and reads kazoo's holder and end.
    let before = epoch_secs(SystemTime::now());
    assert_eq!(kazoo(&connect, &["lease", path, "2", "kazoo-1"]).await, "OBTAINED");
    let kazoo_end = match within("rust refused", rust.acquire()).await {
        Err(LeaseError::Held { holder, .. }) => {
            assert_eq!(holder.identifier, "kazoo-1");
            epoch_secs(holder.end.expect("kazoo's end"))
        }
        other => panic!("rust: {other:?}"),
    };
    let after = epoch_secs(SystemTime::now());
    assert!(
        (before + 1..=after + 2).contains(&kazoo_end),
        "kazoo's end {kazoo_end}, from {before} to {after}"
    );
    let (data, _) = data_and_stat(&framework, &format!("{path}/lease_holder")).await;
    let text = String::from_utf8(data).expect("utf-8");
    assert!(text.starts_with(r#"{"version": 1, "holder": "kazoo-1", "end": ""#), "{text}");
    assert_eq!(kazoo(&connect, &["read", path]).await, format!("EXACT kazoo-1 {kazoo_end}"));

    // Once kazoo's end passes (by our clock, as kazoo's rule says), Rust takes it; kazoo is denied.
    let taken = within("rust takes it after kazoo's end", async {
        loop {
            match rust.acquire().await {
                Ok(held) => return held,
                Err(err) if err.is_held() => tokio::time::sleep(Duration::from_millis(100)).await,
                Err(err) => panic!("acquire: {err}"),
            }
        }
    })
    .await;
    assert!(epoch_secs(SystemTime::now()) >= kazoo_end);
    assert_eq!(kazoo(&connect, &["lease", path, "30", "kazoo-2"]).await, "DENIED");
    within("release", taken.release()).await.expect("release");
    assert_eq!(
        kazoo(&connect, &["lease", path, "30", "kazoo-2"]).await,
        "OBTAINED",
        "free after our release"
    );
    assert_eq!(children(&framework, path).await, ["lease_holder"], "no lock node left by either side");
    close_all([framework]).await;
}

#[tokio::test]
async fn a_non_ascii_identifier_is_written_as_kazoo_writes_it() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let connect = server.connect_string();
    let identifier = "wörker \"7\" 😀";
    let held =
        within("acquire", lease(&framework, "/interop/utf", Duration::from_secs(30), identifier).acquire())
            .await
            .expect("acquire");
    let end = epoch_secs(held.end().expect("end"));
    assert_eq!(kazoo(&connect, &["read", "/interop/utf"]).await, format!("EXACT {identifier} {end}"));
    assert_eq!(kazoo(&connect, &["lease", "/interop/utf", "30", "other"]).await, "DENIED");
    within("release", held.release()).await.expect("release");
    close_all([framework]).await;
}

#[tokio::test]
async fn a_multi_lease_with_kazoo_and_rust_holders_never_exceeds_its_count() {
    init_tracing();
    let (server, framework) = server_and_framework().await;
    let connect = server.connect_string();
    let base = "/interop/multi";
    let multi = |identifier: &str| {
        Lease::builder(&framework, base, Duration::from_secs(60))
            .layout(LeaseLayout::Kazoo)
            .identifier(identifier)
            .timeout(STEP)
            .build_multi(3)
            .expect("multi")
    };

    // Three kazoo clients and three Rust holders at once, for three slots.
    let kazoo_runs: Vec<_> = (1..=3)
        .map(|n| {
            let connect = connect.clone();
            tokio::spawn(
                async move { kazoo(&connect, &["multi:3", base, "60", &format!("kazoo-{n}")]).await },
            )
        })
        .collect();
    let rust_runs: Vec<_> = (1..=3)
        .map(|n| {
            let multi = multi(&format!("rust-{n}"));
            tokio::spawn(async move { multi.acquire().await })
        })
        .collect();
    let mut holders = Vec::new();
    for run in kazoo_runs {
        if within("kazoo", run).await.expect("kazoo task") == "OBTAINED" {
            holders.push("kazoo".to_owned());
        }
    }
    let mut held_by_rust = Vec::new();
    for run in rust_runs {
        match within("rust", run).await.expect("rust task") {
            Ok(held) => {
                holders.push(held.identifier().to_owned());
                held_by_rust.push(held);
            }
            Err(err) => assert!(matches!(err, LeaseError::AllHeld { count: 3, .. }), "{err:?}"),
        }
    }
    assert_eq!(holders.len(), 3, "exactly three of six hold three slots: {holders:?}");

    // The records agree: three slots, three distinct holders, each a run that said it holds.
    let mut recorded = Vec::new();
    for slot in 0..3 {
        let line = kazoo(&connect, &["read", &format!("{base}/{slot}")]).await;
        let holder = line.split(' ').nth(1).expect("holder").to_owned();
        assert!(line.starts_with("EXACT "), "{line}");
        recorded.push(holder);
    }
    let mut distinct = recorded.clone();
    distinct.sort();
    distinct.dedup();
    assert_eq!(distinct.len(), 3, "one holder per slot: {recorded:?}");
    for held in &held_by_rust {
        let slot = held.slot().expect("a slot") as usize;
        assert_eq!(recorded[slot], held.identifier(), "our slot's record is ours");
    }
    assert_eq!(recorded.iter().filter(|holder| holder.starts_with("kazoo-")).count() + held_by_rust.len(), 3);

    // A fourth of each kind is denied.
    assert_eq!(kazoo(&connect, &["multi:3", base, "60", "kazoo-9"]).await, "DENIED");
    assert!(matches!(within("rust", multi("rust-9").acquire()).await, Err(LeaseError::AllHeld { .. })));
    for held in held_by_rust {
        within("release", held.release()).await.expect("release");
    }
    close_all([framework]).await;
}
