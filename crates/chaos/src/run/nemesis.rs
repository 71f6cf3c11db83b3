//! The nemesis: the fault schedule of the chaos phase (seeded), the negative control's crashes,
//! and the heal after either.

use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use zk_recipes_testing::{Degradation, TestingCluster};

use super::kind::Kind;
use super::progress;
use super::reading::read_events;
use super::slots::Slot;
use super::workload::consumers_holding_an_item;
use super::{Phase, STEP};
use crate::events::epoch_micros;
use crate::rng::Rng;

/// The kinds of fault, in the report's order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Fault {
    KillServer,
    KillLeader,
    PauseShort,
    PauseLong,
    Partition,
    KillRust,
    KillCurator,
    KillInterop,
    /// SIGSTOP a Rust lock contender (per-recipe or busy sessions) for 1 to 3 session timeouts.
    PauseRust,
    /// SIGSTOP a Curator lock contender's JVM likewise.
    PauseCurator,
    /// SIGSTOP a kazoo contender likewise.
    PauseKazoo,
    /// Servers cut into a majority and a minority of one (clients still reach every server).
    PartitionMinority,
    /// The leader cut off from the other servers; its clients stay connected to it.
    IsolateLeader,
    /// A bridge: two servers that cannot talk to each other, both talking to the third.
    Bridge,
    /// A ring: every server talks only to its neighbours.
    Ring,
    /// One server's links slowed (delay, jitter, loss).
    Degrade,
    EnsembleRestart,
}

impl Fault {
    pub(super) fn name(self) -> &'static str {
        match self {
            Fault::KillServer => "kill-server",
            Fault::KillLeader => "kill-leader",
            Fault::PauseShort => "pause-short",
            Fault::PauseLong => "pause-long",
            Fault::Partition => "partition",
            Fault::KillRust => "kill-rust-contender",
            Fault::KillCurator => "kill-curator-contender",
            Fault::KillInterop => "kill-interop-contender",
            Fault::PauseRust => "pause-rust-contender",
            Fault::PauseCurator => "pause-curator-contender",
            Fault::PauseKazoo => "pause-kazoo-contender",
            Fault::PartitionMinority => "partition-servers",
            Fault::IsolateLeader => "isolate-leader",
            Fault::Bridge => "bridge",
            Fault::Ring => "ring",
            Fault::Degrade => "degrade",
            Fault::EnsembleRestart => "ensemble-restart",
        }
    }

    /// Whether it cuts or slows the network between servers (a partitionable ensemble only).
    fn between_servers(self) -> bool {
        matches!(
            self,
            Fault::PartitionMinority | Fault::IsolateLeader | Fault::Bridge | Fault::Ring | Fault::Degrade
        )
    }

    /// Picks a fault by weight (none between servers unless the ensemble is partitionable).
    fn pick(rng: &mut Rng, partitionable: bool) -> Fault {
        const WEIGHTED: [(Fault, u64); 17] = [
            (Fault::KillServer, 3),
            (Fault::KillLeader, 2),
            (Fault::PauseShort, 2),
            (Fault::PauseLong, 2),
            (Fault::Partition, 4),
            (Fault::KillRust, 2),
            (Fault::KillCurator, 2),
            (Fault::KillInterop, 2),
            (Fault::PauseRust, 1),
            (Fault::PauseCurator, 1),
            (Fault::PauseKazoo, 1),
            (Fault::PartitionMinority, 1),
            (Fault::IsolateLeader, 1),
            (Fault::Bridge, 1),
            (Fault::Ring, 1),
            (Fault::Degrade, 1),
            (Fault::EnsembleRestart, 0),
        ];
        let weighted = WEIGHTED.map(|(fault, weight)| {
            (fault, if fault.between_servers() && !partitionable { 0 } else { weight })
        });
        let total: u64 = weighted.iter().map(|(_, weight)| weight).sum();
        let mut roll = rng.u64(..total);
        for (fault, weight) in weighted {
            if roll < weight {
                return fault;
            }
            roll -= weight;
        }
        Fault::Partition
    }
}

impl Phase<'_> {
    /// Runs the phase's contenders for its duration: with `rng`, faults one after another (and a
    /// progress row when the run asks for them); without, the negative control's crashes. Then
    /// heals everything. Returns how many faults of each kind were injected.
    pub(super) async fn schedule(
        &self,
        mut rng: Option<&mut Rng>,
        cluster: &mut TestingCluster,
        slots: &mut [Slot],
        log_dir: &Path,
        killed: &mut HashMap<String, i64>,
    ) -> Result<BTreeMap<String, u64>, String> {
        let config = self.config;
        let mut faults: BTreeMap<String, u64> = BTreeMap::new();
        let duration = if rng.is_some() { config.duration } else { config.control_duration };
        let end = Instant::now() + duration;
        let mut ensemble_restarted = false;
        let phase_started = Instant::now();
        let report_every = config.report_every.filter(|_| rng.is_some());
        let mut next_report = report_every.map(|every| phase_started + every);
        // Each progress row's Rust processes' resident sets and descriptors, for the trend at the end.
        let mut usage: Vec<progress::UsageSample> = Vec::new();
        if report_every.is_some() {
            progress::print_header();
        }
        while Instant::now() < end {
            if let (Some(at), Some(every)) = (next_report, report_every) {
                if Instant::now() >= at {
                    let elapsed = phase_started.elapsed();
                    for (tag, rss_kb, fds) in
                        self.print_progress(cluster, slots, log_dir, &faults, elapsed).await
                    {
                        usage.push(progress::UsageSample { elapsed, tag, rss_kb, fds });
                    }
                    next_report = Some(at + every);
                }
            }
            let Some(rng) = rng.as_deref_mut() else {
                if !config.queues.is_empty() {
                    // Consumers without a lock path (at most once) crashing lose what they hold.
                    // They crash once every queue has a consumer at work on an item (delivered,
                    // not yet processed: on a loaded machine the processes may take longer than
                    // half the phase to start, and a crash between two items loses nothing),
                    // bounded by the phase's length. An item counts only if it was delivered in
                    // the last half of its processing time (an older one may be acked before its
                    // process is killed: the kills take turns), and its process is killed first.
                    tokio::time::sleep(duration / 2).await;
                    let fresh = config.process.as_micros() as i64 / 2;
                    let mut holding = Vec::new();
                    while Instant::now() < end + duration {
                        let since = epoch_micros() - fresh;
                        let events = read_events(log_dir);
                        let held: Vec<Vec<&str>> = config
                            .queues
                            .iter()
                            .map(|queue| consumers_holding_an_item(&events, *queue, since))
                            .collect();
                        if held.iter().all(|holders| !holders.is_empty()) {
                            holding = held.concat().into_iter().map(str::to_owned).collect();
                            break;
                        }
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                    let hosts = |slot: &Slot| {
                        holding.iter().any(|holder| holder.starts_with(&format!("{}-", slot.tag)))
                    };
                    let mut order: Vec<usize> =
                        (0..slots.len()).filter(|index| !slots[*index].kind.is_mix()).collect();
                    order.sort_by_key(|index| !hosts(&slots[*index]));
                    for index in order {
                        self.kill(&mut slots[index], killed).await;
                        self.spawn(&mut slots[index], log_dir)?;
                    }
                }
                tokio::time::sleep(end.saturating_duration_since(Instant::now())).await;
                break;
            };
            let (shortest_gap, longest_gap) = config.fault_gap;
            let gap = rng.u64(shortest_gap.as_millis() as u64..=longest_gap.as_millis() as u64);
            tokio::time::sleep(Duration::from_millis(gap)).await;
            if Instant::now() >= end {
                break;
            }
            // Each client pause and each network fault between servers first (so that even a
            // quick run has every one), one whole-ensemble restart per run, in its middle; the
            // rest by weight.
            let first = [
                Fault::PauseRust,
                Fault::PauseCurator,
                Fault::PauseKazoo,
                Fault::PartitionMinority,
                Fault::IsolateLeader,
                Fault::Bridge,
                Fault::Ring,
                Fault::Degrade,
            ]
            .into_iter()
            .find(|fault| {
                !faults.contains_key(fault.name())
                    && if fault.between_servers() {
                        cluster.is_partitionable()
                    } else {
                        self.pause_targets(*fault, slots).next().is_some()
                    }
            });
            let fault = if let Some(pause) = first {
                pause
            } else if !ensemble_restarted && Instant::now() + duration / 2 >= end {
                ensemble_restarted = true;
                Fault::EnsembleRestart
            } else {
                Fault::pick(rng, cluster.is_partitionable())
            };
            let injected_at = crate::events::epoch_micros();
            let detail = self.inject(fault, rng, cluster, slots, log_dir, killed).await?;
            println!(
                "[{:>6.1}s] fault {}: {detail}",
                (duration - end.saturating_duration_since(Instant::now())).as_secs_f64(),
                fault.name()
            );
            record_fault(log_dir, injected_at, fault.name(), &detail);
            *faults.entry(fault.name().to_owned()).or_default() += 1;
        }
        if report_every.is_some() {
            progress::print_usage_trend(&usage, duration / 2);
        }
        // Everything back up, then an orderly stop.
        for slot in slots.iter() {
            for proxy in &slot.proxies {
                proxy.heal();
            }
        }
        if cluster.is_partitionable() {
            cluster.heal().await.map_err(|err| format!("healing the network: {err}"))?;
        }
        for index in 0..cluster.size() {
            if !cluster.members()[index].is_running() {
                cluster.restart(index).await.map_err(|err| format!("restarting server {index}: {err}"))?;
            }
        }
        cluster.wait_until_serving(STEP).await.map_err(|err| format!("ensemble after the faults: {err}"))?;
        Ok(faults)
    }

    async fn inject(
        &self,
        fault: Fault,
        rng: &mut Rng,
        cluster: &mut TestingCluster,
        slots: &mut [Slot],
        log_dir: &Path,
        killed: &mut HashMap<String, i64>,
    ) -> Result<String, String> {
        let session_ms = self.config.session_timeout.as_millis() as u64;
        let restart = |err: zk_recipes_testing::TestingError| format!("{}: {err}", fault.name());
        Ok(match fault {
            Fault::KillServer | Fault::KillLeader => {
                let index = if fault == Fault::KillLeader {
                    cluster.leader_index().await.map_err(restart)?
                } else {
                    rng.usize(..cluster.size())
                };
                cluster.kill(index).await.map_err(restart)?;
                let down = rng.u64(200..=3000);
                tokio::time::sleep(Duration::from_millis(down)).await;
                cluster.restart(index).await.map_err(restart)?;
                format!("server {} down {down} ms", index + 1)
            }
            Fault::PauseShort | Fault::PauseLong => {
                let index = rng.usize(..cluster.size());
                let paused = if fault == Fault::PauseShort {
                    rng.u64(300..=session_ms / 2)
                } else {
                    rng.u64(session_ms + 1000..=session_ms + 3000)
                };
                cluster.pause(index).map_err(restart)?;
                tokio::time::sleep(Duration::from_millis(paused)).await;
                cluster.resume(index).map_err(restart)?;
                cluster.wait_until_serving(STEP).await.map_err(restart)?;
                format!("server {} stopped {paused} ms (session timeout {session_ms} ms)", index + 1)
            }
            Fault::Partition => {
                let slot = &slots[rng.usize(..slots.len())];
                let cut = rng.u64(session_ms + 1000..=session_ms + 3000);
                for proxy in &slot.proxies {
                    proxy.black_hole(Duration::from_millis(cut));
                }
                tokio::time::sleep(Duration::from_millis(cut)).await;
                for proxy in &slot.proxies {
                    proxy.heal();
                }
                format!("contender {} black-holed {cut} ms", slot.tag)
            }
            Fault::KillRust | Fault::KillCurator | Fault::KillInterop => {
                let targets = |kind: Kind| match fault {
                    Fault::KillRust => kind.is_rust(),
                    Fault::KillCurator => kind.is_curator(),
                    _ => matches!(kind, Kind::ZooKeeperRecipe | Kind::Kazoo),
                };
                let candidates: Vec<usize> =
                    (0..slots.len()).filter(|index| targets(slots[*index].kind)).collect();
                if candidates.is_empty() {
                    return Ok("no such contender".to_owned());
                }
                let slot = &mut slots[candidates[rng.usize(..candidates.len())]];
                let old = slot.tag.clone();
                self.kill(slot, killed).await;
                let down = rng.u64(100..=2000);
                tokio::time::sleep(Duration::from_millis(down)).await;
                self.spawn(slot, log_dir)?;
                format!("contender {old} SIGKILLed, {} started {down} ms later", slot.tag)
            }
            Fault::PauseRust | Fault::PauseCurator | Fault::PauseKazoo => {
                let candidates: Vec<usize> = self.pause_targets(fault, slots).collect();
                if candidates.is_empty() {
                    return Ok("no such contender".to_owned());
                }
                let slot = &slots[candidates[rng.usize(..candidates.len())]];
                let Some(pid) = slot.pid() else {
                    return Ok(format!("contender {} is not running", slot.tag));
                };
                let paused = rng.u64(session_ms + 1000..=3 * session_ms);
                let from = epoch_micros();
                if let Err(err) = signal(pid, "-STOP") {
                    return Ok(format!("contender {} not paused: {err}", slot.tag));
                }
                tokio::time::sleep(Duration::from_millis(paused)).await;
                if let Err(err) = signal(pid, "-CONT") {
                    println!("warning: contender {} may still be stopped: {err}", slot.tag);
                }
                let to = epoch_micros();
                if let Ok(mut pauses) = self.paused.lock() {
                    pauses.entry(slot.tag.clone()).or_default().push((from, to));
                }
                format!(
                    "contender {} (pid {pid}) SIGSTOPped {paused} ms (session timeout {session_ms} ms)",
                    slot.tag
                )
            }
            Fault::PartitionMinority
            | Fault::IsolateLeader
            | Fault::Bridge
            | Fault::Ring
            | Fault::Degrade => {
                // Short in the quick run.
                let (shortest, longest) =
                    if self.config.mode == "quick" { (2000, 4000) } else { (3000, 12000) };
                let held = rng.u64(shortest..=longest);
                let what = match fault {
                    Fault::PartitionMinority => {
                        let index = rng.usize(..cluster.size());
                        cluster.isolate(index).await.map_err(restart)?;
                        format!("server {} cut off from the others", index + 1)
                    }
                    Fault::IsolateLeader => {
                        let index = cluster.isolate_leader().await.map_err(restart)?;
                        format!(
                            "leader (server {}) cut off from the others, its clients still connected",
                            index + 1
                        )
                    }
                    Fault::Bridge => {
                        let middle = cluster.bridge().await.map_err(restart)?;
                        format!("bridge through server {}", middle + 1)
                    }
                    Fault::Ring => {
                        cluster.ring().await.map_err(restart)?;
                        "ring".to_owned()
                    }
                    _ => {
                        let index = rng.usize(..cluster.size());
                        let delay = rng.u64(20..=200);
                        let degradation = Degradation::delay(Duration::from_millis(delay))
                            .jitter(Duration::from_millis(delay / 2))
                            .loss(0.05)
                            .map_err(restart)?;
                        cluster.degrade(index, degradation).await.map_err(restart)?;
                        format!("server {} links delayed {delay} ms ± {} ms, 5% loss", index + 1, delay / 2)
                    }
                };
                tokio::time::sleep(Duration::from_millis(held)).await;
                cluster.heal().await.map_err(restart)?;
                format!("{what} for {held} ms")
            }
            Fault::EnsembleRestart => {
                cluster.restart_all().await.map_err(restart)?;
                "every server SIGKILLed and restarted".to_owned()
            }
        })
    }
}

/// Appends a fault to `faults.log` beside the contenders' logs, on their clock (`<epoch µs when
/// its injection began> <kind> <detail>`), so that an event in a log can be traced to a fault after
/// the run. Best effort: a fault that cannot be written is still printed.
fn record_fault(log_dir: &std::path::Path, injected_at: i64, kind: &str, detail: &str) {
    use std::io::Write as _;
    let written = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log_dir.join("faults.log"))
        .and_then(|mut file| writeln!(file, "{injected_at} {kind} {detail}"));
    if let Err(err) = written {
        eprintln!("faults.log: {err}");
    }
}

impl Phase<'_> {
    /// The slots a client pause picks from: the lock contenders of its side that run.
    fn pause_targets<'a>(&self, fault: Fault, slots: &'a [Slot]) -> impl Iterator<Item = usize> + 'a {
        let side = move |kind: Kind| match fault {
            Fault::PauseRust => matches!(kind, Kind::Rust | Kind::Busy),
            Fault::PauseCurator => kind == Kind::Curator,
            Fault::PauseKazoo => kind == Kind::Kazoo,
            _ => false,
        };
        (0..slots.len()).filter(move |index| side(slots[*index].kind) && slots[*index].running.is_some())
    }
}

/// Sends `kill <signal> <pid>` (`-STOP`, `-CONT`).
fn signal(pid: u32, signal: &str) -> Result<(), String> {
    let status = std::process::Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .map_err(|err| format!("kill {signal} {pid}: {err}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("kill {signal} {pid}: {status}"))
    }
}
