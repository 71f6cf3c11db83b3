//! The contender processes: one slot per process (its fault proxies outlive its incarnations),
//! and the one way a process is started, told something on its stdin, stopped and killed.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::io::AsyncWriteExt;
use tokio::process::{Child, ChildStdin, Command};
use zk_recipes_testing::{CuratorProcess, FaultProxy, TestingCluster};

use super::kind::Kind;
use super::reading::{barrier_root, cache_root, members_root, partition_root};
use super::{Phase, EXIT_TIMEOUT, STEP};
use crate::caches;
use crate::events::epoch_micros;
use crate::interop::InteropArgs;
use crate::recipes::Recipe;

/// Every kind of contender process, in the order the run starts them.
const START_ORDER: [Kind; 14] = [
    Kind::Rust,
    Kind::Curator,
    Kind::Busy,
    Kind::ZooKeeperRecipe,
    Kind::Kazoo,
    Kind::Counter,
    Kind::CuratorCounter,
    Kind::Members,
    Kind::Barrier,
    Kind::CuratorBarrier,
    Kind::Cache,
    Kind::CuratorCache,
    Kind::CuratorMembers,
    Kind::Partition,
];

/// A contender process: ours, kazoo's and the ZooKeeper recipe's are driven alike (`stop` on
/// stdin); Curator's through its driver.
pub(super) enum Running {
    Child { child: Box<Child>, stdin: Option<ChildStdin> },
    Curator(Box<CuratorProcess>),
}

/// One contender slot: its proxies (one per member) outlive its incarnations.
pub(super) struct Slot {
    pub(super) kind: Kind,
    pub(super) index: usize,
    pub(super) proxies: Vec<FaultProxy>,
    pub(super) running: Option<Running>,
    pub(super) incarnation: u32,
    /// The current incarnation's tag (holder ids start with it).
    pub(super) tag: String,
}

impl Slot {
    /// Writes `line` to the process's stdin (`freeze`, `check <file>`, `stop`). Returns whether the
    /// slot has a live process of ours that reads its stdin (Curator's driver is told through it).
    pub(super) async fn tell(&mut self, line: &str) -> bool {
        match self.running.as_mut() {
            Some(Running::Child { stdin: Some(stdin), .. }) => {
                let _ = tell(stdin, line).await;
                true
            }
            _ => false,
        }
    }
}

impl Slot {
    /// The pid of its process while it runs (ours, kazoo's, the ZooKeeper recipe's, Curator's JVM).
    pub(super) fn pid(&self) -> Option<u32> {
        match &self.running {
            Some(Running::Child { child, .. }) => child.id(),
            Some(Running::Curator(process)) => Some(process.pid()),
            None => None,
        }
    }
}

/// One line to a child's stdin, flushed.
async fn tell(stdin: &mut ChildStdin, line: &str) -> std::io::Result<()> {
    stdin.write_all(format!("{line}\n").as_bytes()).await?;
    stdin.flush().await
}

/// What every process of a slot's incarnation is started with.
struct Launch {
    /// The slot's proxies, one per member.
    connect: String,
    tag: String,
    /// The event log of the lock and queue contenders (the mix's logs are named by part).
    log: PathBuf,
    log_dir: PathBuf,
    timeout_ms: String,
}

impl Launch {
    /// `zkr-chaos <subcommand>` with the setup every one of our processes takes
    /// ([`crate::setup::ProcessSetup`]), its log `<log_name>-<tag>.log`, and stdin for its
    /// commands.
    fn ours(&self, subcommand: &str, log_name: &str) -> Result<Command, String> {
        let exe = std::env::current_exe().map_err(|err| err.to_string())?;
        let log = if log_name == "events" { self.log.clone() } else { self.mix_log(log_name) };
        let mut command = Command::new(exe);
        command
            .args([subcommand, "--connect", &self.connect, "--tag", &self.tag])
            .arg("--log")
            .arg(log)
            .args(["--session-timeout-ms", &self.timeout_ms])
            .stdin(Stdio::piped())
            .kill_on_drop(true);
        Ok(command)
    }

    /// A mix part's process of ours: `zkr-chaos <subcommand>` with `clients` sessions under
    /// `root`, and `control_flag` in the negative control.
    fn mix_part(
        &self,
        subcommand: &str,
        clients: usize,
        root: &str,
        control_flag: Option<&str>,
    ) -> Result<Command, String> {
        let mut command = self.ours(subcommand, subcommand)?;
        command.args(["--clients", &clients.to_string(), "--root", root]).args(control_flag);
        Ok(command)
    }

    /// The log of a mix part's process.
    fn mix_log(&self, log_name: &str) -> PathBuf {
        self.log_dir.join(format!("{log_name}-{}.log", self.tag))
    }

    /// The arguments `CuratorMixChaos <mode>` takes: connect string, sessions, tag, log, root,
    /// then `extra`, then the session timeout.
    fn curator_mix(
        &self,
        mode: &str,
        clients: usize,
        log_name: &str,
        root: String,
        extra: &[String],
    ) -> Vec<String> {
        let mut args = vec![
            mode.to_owned(),
            self.connect.clone(),
            clients.to_string(),
            self.tag.clone(),
            self.mix_log(log_name).display().to_string(),
            root,
        ];
        args.extend_from_slice(extra);
        args.push(self.timeout_ms.clone());
        args
    }
}

impl Phase<'_> {
    /// One slot per process the run starts (each with its three proxies), every process started.
    pub(super) async fn start_slots(
        &self,
        cluster: &TestingCluster,
        log_dir: &Path,
    ) -> Result<Vec<Slot>, String> {
        let config = self.config;
        let mut slots = Vec::new();
        for kind in START_ORDER {
            for index in 0..config.processes(kind) {
                let mut proxies = Vec::new();
                for member in cluster.members() {
                    proxies.push(FaultProxy::start(member.address()).await.map_err(|err| err.to_string())?);
                }
                if kind == Kind::Cache && !self.locking {
                    // The cache control: followers whose notifications go missing without a reset.
                    let seed = config.seed ^ index as u64;
                    for proxy in &proxies {
                        proxy
                            .drop_watch_events_seeded(caches::CONTROL_DROPPED_WATCH_EVENTS, seed)
                            .map_err(|err| err.to_string())?;
                    }
                }
                slots.push(Slot { kind, index, proxies, running: None, incarnation: 0, tag: String::new() });
            }
        }
        for slot in &mut slots {
            self.spawn(slot, log_dir)?;
        }
        Ok(slots)
    }

    /// Starts a slot's next incarnation (a new tag).
    pub(super) fn spawn(&self, slot: &mut Slot, log_dir: &Path) -> Result<(), String> {
        let config = self.config;
        slot.incarnation += 1;
        slot.tag = format!("{}{}x{}", slot.kind.letter(), slot.index, slot.incarnation);
        let launch = Launch {
            connect: slot.proxies.iter().map(FaultProxy::connect_string).collect::<Vec<_>>().join(","),
            tag: slot.tag.clone(),
            log: log_dir.join(format!("events-{}.log", slot.tag)),
            log_dir: log_dir.to_owned(),
            timeout_ms: config.session_timeout.as_millis().to_string(),
        };
        let recipes = config.recipes_of(slot.kind);
        let recipe_names = recipes.iter().map(|recipe| recipe.name()).collect::<Vec<_>>().join(",");
        let locking = if self.locking { "on" } else { "off" };
        let hold_ms = config.hold.as_millis().to_string();
        let process_ms = config.process.as_millis().to_string();
        // Busy sessions consume no queue: the per-recipe contenders do.
        let queues = if slot.kind == Kind::Busy { "-".to_owned() } else { queues_arg(&config.queues) };
        let control = !self.locking;
        let mut command = match slot.kind {
            Kind::Cache => launch.mix_part(
                "cache",
                config.cache_clients,
                &cache_root(self.check_root),
                control.then_some("--drop-events"),
            )?,
            Kind::CuratorCache => self.launchers.curator_counters(&launch.curator_mix(
                "contend-cache",
                config.curator_cache_clients,
                "cache",
                cache_root(self.check_root),
                &[],
            ))?,
            Kind::CuratorMembers => self.launchers.curator_counters(&launch.curator_mix(
                "contend-members",
                config.member_clients,
                "members",
                members_root(self.check_root),
                &[],
            ))?,
            Kind::Barrier => {
                let mut command = launch.mix_part(
                    "barrier",
                    config.barrier_clients,
                    &barrier_root(self.check_root),
                    control.then_some("--no-wait"),
                )?;
                command.args(["--member-count", &config.barrier_members().to_string()]);
                command
            }
            Kind::CuratorBarrier => self.launchers.curator_counters(&launch.curator_mix(
                "contend-barrier",
                config.barrier_clients,
                "barrier",
                barrier_root(self.check_root),
                &[config.barrier_members().to_string()],
            ))?,
            Kind::Partition => {
                let mut command = launch.ours("partition", "partition")?;
                command
                    .args(["--workers", &config.partition_workers.to_string()])
                    .args(["--root", &partition_root(self.check_root)])
                    .args(control.then_some("--no-lock"));
                command
            }
            Kind::Members => launch.mix_part(
                "members",
                config.member_clients,
                &members_root(self.check_root),
                control.then_some("--no-recreate"),
            )?,
            Kind::Counter => {
                let mut command = launch.ours("count", "counters")?;
                command
                    .args(["--clients", &config.counter_clients.to_string(), "--check-root", self.check_root])
                    .args(control.then_some("--blind"));
                command
            }
            Kind::CuratorCounter => self.launchers.curator_counters(&launch.curator_mix(
                "contend-counters",
                config.counter_clients,
                "counters",
                self.check_root.to_owned(),
                &[],
            ))?,
            Kind::Curator => {
                let clients = config.curator_clients.to_string();
                let process = CuratorProcess::spawn([
                    "--session-timeout-ms",
                    &launch.timeout_ms,
                    "chaos-contend",
                    &launch.connect,
                    &recipe_names,
                    &clients,
                    &slot.tag,
                    &launch.log.display().to_string(),
                    locking,
                    self.lock_root,
                    self.check_root,
                    &hold_ms,
                    &queues,
                    self.queue_root,
                    &process_ms,
                ])
                .map_err(|err| format!("spawning a Curator contender: {err}"))?;
                slot.running = Some(Running::Curator(Box::new(process)));
                return Ok(());
            }
            Kind::Rust | Kind::Busy => {
                let (clients, loops, give_up) = if slot.kind == Kind::Busy {
                    (config.busy_clients, config.busy_loops, config.give_up_percent)
                } else {
                    (config.rust_clients, 0, 0)
                };
                let mut command = launch.ours("contend", "events")?;
                command
                    .args(["--recipes", &recipe_names, "--clients", &clients.to_string()])
                    .args(["--locking", locking, "--lock-root", self.lock_root])
                    .args(["--check-root", self.check_root, "--hold-ms", &hold_ms])
                    .args(["--queues", &queues, "--queue-root", self.queue_root])
                    .args(["--process-ms", &process_ms])
                    .args(["--loops", &loops.to_string(), "--give-up-percent", &give_up.to_string()])
                    .args(["--store", &self.store.address().to_string()]);
                command
            }
            Kind::ZooKeeperRecipe | Kind::Kazoo => {
                let Some(recipe) = recipes.first() else { return Err(format!("{} has no recipe", slot.tag)) };
                let args = InteropArgs {
                    connect: &launch.connect,
                    recipe: recipe.name(),
                    clients: config.interop_clients,
                    tag: &slot.tag,
                    log: &launch.log,
                    locking: self.locking,
                    lock_root: self.lock_root,
                    check_root: self.check_root,
                    hold_ms: config.hold.as_millis(),
                    session_timeout_ms: config.session_timeout.as_millis(),
                };
                if slot.kind == Kind::Kazoo {
                    self.launchers.kazoo(&args)?
                } else {
                    self.launchers.zookeeper_recipe(&args)?
                }
            }
        };
        let stderr = std::fs::File::create(log_dir.join(format!("stderr-{}.log", slot.tag)))
            .map_err(|err| err.to_string())?;
        let mut child = command
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|err| format!("spawning contender {}: {err}", slot.tag))?;
        let stdin = child.stdin.take();
        slot.running = Some(Running::Child { child: Box::new(child), stdin });
        Ok(())
    }

    /// SIGKILLs a slot's process (a crash) and notes when. A process that had already exited by
    /// itself is reported with its exit status, and noted as ended at its last logged event: its
    /// holds ended when it died, not when we came to kill it.
    pub(super) async fn kill(&self, slot: &mut Slot, killed: &mut HashMap<String, i64>) {
        match slot.running.take() {
            Some(Running::Child { mut child, .. }) => {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = self.config.out_dir.join(self.name).join(format!("events-{}.log", slot.tag));
                    let died_at = last_event_micros(&log).unwrap_or_else(epoch_micros);
                    println!(
                        "warning: contender {} had exited by itself ({status}); its holds end at its last \
                         event",
                        slot.tag
                    );
                    killed.insert(slot.tag.clone(), died_at);
                    return;
                }
                if slot.kind.is_rust() {
                    self.dump_if_silent(slot, child.id()).await;
                }
                let _ = child.start_kill();
                let _ = tokio::time::timeout(STEP, child.wait()).await;
            }
            Some(Running::Curator(mut process)) => {
                let _ = process.kill();
            }
            None => {}
        }
        killed.insert(slot.tag.clone(), epoch_micros());
    }

    /// Asks a slot's process to stop (release, close its sessions) and waits for it; SIGKILLs it
    /// after [`EXIT_TIMEOUT`].
    pub(super) async fn stop(&self, slot: &mut Slot, killed: &mut HashMap<String, i64>) {
        let exited = match slot.running.as_mut() {
            Some(Running::Child { child, stdin }) => {
                if let Some(stdin) = stdin.as_mut() {
                    let _ = tell(stdin, "stop").await;
                }
                matches!(tokio::time::timeout(EXIT_TIMEOUT, child.wait()).await, Ok(Ok(status)) if status.success())
            }
            Some(Running::Curator(process)) => {
                let _ = process.send_line("stop").await;
                matches!(process.wait(EXIT_TIMEOUT).await, Ok(status) if status.success())
            }
            None => true,
        };
        if !exited {
            println!("warning: contender {} did not stop within {EXIT_TIMEOUT:?}; killed", slot.tag);
            self.kill(slot, killed).await;
        }
        slot.running = None;
    }
}

/// The queues as the contenders take them: comma-separated, `-` for none.
pub(super) fn queues_arg(queues: &[Recipe]) -> String {
    if queues.is_empty() {
        "-".to_owned()
    } else {
        queues.iter().map(|queue| queue.name()).collect::<Vec<_>>().join(",")
    }
}

/// The time of the last event in a contender's log (microseconds since the epoch), if any.
fn last_event_micros(log: &Path) -> Option<i64> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines().rev().find_map(|line| line.split_whitespace().nth(3)?.parse().ok())
}
