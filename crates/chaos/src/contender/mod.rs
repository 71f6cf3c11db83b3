//! `zkr-chaos contend`: one Rust contender process. Each recipe gets `clients` sessions (one
//! framework each), and each session loops: acquire, run the critical-section protocol, release.
//! Everything it sees goes to its event log ([`crate::events`]).
//!
//! A busy-session contender (`--loops N`) instead opens `clients` sessions and runs `N` such hold
//! loops of every recipe at once on each: many acquires, holds and releases of one session in
//! flight together, so that the framework sends its creates and deletes in batches. A share of its
//! acquires (`--give-up-percent`) gives up early: half with a deadline of 0.2–5 ms, half dropped
//! 0.2–10 ms after they started, so that creates whose caller is gone (cleaned up by the
//! framework) and creates whose outcome is unknown happen throughout the run. It logs the
//! framework's batches and cleanups as `B` events ([`crate::tally`]).
//!
//! Stdin: `stop` finishes the current holds, releases, closes the sessions and exits 0; EOF (the
//! run died) exits at once.

use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use zk_recipes_framework::zookeeper_client;
use zk_recipes_framework::{Deadline, Framework};

mod locks;
mod queue;

use locks::{Abort, Attempt, Hold, Lock, NotAcquired, Op, Outcome};
use queue::consume;

use crate::events::{epoch_micros, EventLog};
use crate::recipes::{self, CounterValue, Recipe, RecipeList};
use crate::rng::Rng;
use crate::setup::ProcessSetup;
use crate::store::StoreClient;
use crate::tally::TALLY;

/// How long one acquire may wait before the contender logs it and tries again.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(20);
/// The deadline of one step of the protocol (a write, a read).
const STEP_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a contender tries to remove its marker before giving up on it.
const MARKER_CLEANUP_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopping contender waits for its loops.
const STOP_TIMEOUT: Duration = Duration::from_secs(60);
/// Pause after a failed acquire or a lost hold, so a partitioned client does not spin.
const BACKOFF: Duration = Duration::from_millis(100);
/// Versioned-increment attempts of a shared (non-exclusive) hold.
const INCREMENT_ATTEMPTS: usize = 20;
/// The deadline of an acquire that gives up early, in microseconds (random in this range).
const GIVE_UP_DEADLINE_MICROS: (u64, u64) = (200, 5_000);
/// How long an acquire that is dropped mid-flight runs, in microseconds (random in this range).
const GIVE_UP_DROP_MICROS: (u64, u64) = (200, 10_000);
/// How often a busy-session contender logs the framework's counts ([`crate::tally`]).
const TALLY_EVERY: Duration = Duration::from_secs(2);

/// What a contender process runs.
#[derive(Debug, Clone, clap::Args)]
pub struct ContenderConfig {
    /// Where it connects, its name, its event log, its sessions' timeout.
    #[command(flatten)]
    pub setup: ProcessSetup,
    /// The recipes, each with `clients` sessions (comma-separated).
    #[arg(long, value_parser = recipes::parse_list)]
    pub recipes: RecipeList,
    /// Sessions per recipe.
    #[arg(long, default_value_t = 2)]
    pub clients: usize,
    /// Whether to take the lock at all (`off`: the negative control).
    #[arg(long, default_value = "on", value_parser = parse_on_off, action = clap::ArgAction::Set)]
    pub locking: bool,
    /// Root of the recipes' lock paths.
    #[arg(long)]
    pub lock_root: String,
    /// Root of the checkers' nodes.
    #[arg(long)]
    pub check_root: String,
    /// How long each hold lasts (besides its round trips), in milliseconds.
    #[arg(long = "hold-ms", default_value = "2", value_parser = parse_millis)]
    pub hold: Duration,
    /// The queues to consume, one consumer (one session) each (comma-separated, `-` for none).
    #[arg(long, default_value = "", value_parser = recipes::parse_queue_list)]
    pub queues: RecipeList,
    /// Root of the queues' paths.
    #[arg(long, default_value = "/chaos-queues")]
    pub queue_root: String,
    /// How long processing one item takes, in milliseconds.
    #[arg(long = "process-ms", default_value = "100", value_parser = parse_millis)]
    pub process: Duration,
    /// 0: one session per recipe and client, one acquire at a time. More: a busy-session
    /// contender, `clients` sessions each running this many hold loops of every recipe at once.
    #[arg(long, default_value_t = 0)]
    pub loops: usize,
    /// The percentage of a busy session's acquires that give up early.
    #[arg(long, default_value_t = 0)]
    pub give_up_percent: u64,
    /// The fenced store (`host:port`, [`crate::store`]) every exclusive hold writes its effect
    /// to, with its fencing token.
    #[arg(long)]
    pub store: Option<String>,
}

/// `on` or `off`.
fn parse_on_off(text: &str) -> Result<bool, String> {
    match text {
        "on" => Ok(true),
        "off" => Ok(false),
        other => Err(format!("{other:?}: on or off")),
    }
}

/// A whole number of milliseconds.
fn parse_millis(text: &str) -> Result<Duration, String> {
    text.parse().map(Duration::from_millis).map_err(|err| format!("{text:?}: {err}"))
}

/// Runs a contender process until `stop` (exit 0) or EOF on stdin (exit 3).
pub async fn run(config: ContenderConfig) -> std::io::Result<i32> {
    let log = config.setup.open_log()?;
    let stop = crate::commands::listen().stop;
    let mut loops = Vec::new();
    if config.loops == 0 {
        for recipe in config.recipes.iter().copied() {
            for client in 0..config.clients {
                let framework = config.setup.framework()?;
                let contender =
                    Contender::new(&framework, recipe, config.setup.holder(client), &config, &log);
                let stop = stop.clone();
                loops.push(tokio::spawn(async move {
                    contender.run(stop).await;
                    framework.close().await;
                }));
            }
        }
    } else {
        for client in 0..config.clients {
            let framework = config.setup.framework()?;
            let mut session_loops = Vec::new();
            for (index, recipe) in config
                .recipes
                .iter()
                .flat_map(|recipe| std::iter::repeat_n(*recipe, config.loops))
                .enumerate()
            {
                // Holders `<tag>-<session>-<loop>.<n>`: the checkers count sessions, not loops.
                let mut contender = Contender::new(
                    &framework,
                    recipe,
                    config.setup.holder(format_args!("{client}-{index}")),
                    &config,
                    &log,
                );
                contender.separator = '.';
                contender.give_up_percent = config.give_up_percent;
                session_loops.push(tokio::spawn(contender.run(stop.clone())));
            }
            loops.push(tokio::spawn(async move {
                futures_join(session_loops).await;
                framework.close().await;
            }));
        }
        if let Some(recipe) = config.recipes.first().copied() {
            let (log, tag, mut stop) = (log.clone(), config.setup.tag.clone(), stop.clone());
            tokio::spawn(async move {
                loop {
                    log.event('B', recipe, &tag, &TALLY.fields());
                    tokio::select! {
                        () = tokio::time::sleep(TALLY_EVERY) => {}
                        _ = stop.wait_for(|stopped| *stopped) => break,
                    }
                }
            });
        }
    }
    for queue in config.queues.iter().copied() {
        let framework = config.setup.framework()?;
        loops.push(tokio::spawn(consume(framework, queue, config.clone(), log.clone(), stop.clone())));
    }
    println!("READY");
    let all = futures_join(loops);
    tokio::pin!(all);
    // The loops run until `stop`; only then is their end bounded. (Bounding the whole run made
    // every contender that outlived ten stop timeouts exit by itself with code 4, mid-hold.)
    let mut stopped = stop.clone();
    let finished = tokio::select! {
        () = &mut all => true,
        _ = stopped.wait_for(|stopped| *stopped) => false,
    };
    let ended = match finished {
        true => Ok(()),
        false => tokio::time::timeout(STOP_TIMEOUT * 10, &mut all).await.map_err(drop),
    };
    match ended {
        Ok(()) => {
            if config.loops > 0 {
                if let Some(recipe) = config.recipes.first().copied() {
                    log.event('B', recipe, &config.setup.tag, &TALLY.fields());
                }
            }
            println!("DONE");
            Ok(0)
        }
        Err(_) => Ok(4),
    }
}

async fn futures_join(loops: Vec<tokio::task::JoinHandle<()>>) {
    for handle in loops {
        let _ = handle.await;
    }
}

struct Contender {
    framework: Framework,
    recipe: Recipe,
    /// Holders are `<prefix><separator><n>`.
    prefix: String,
    separator: char,
    config: ContenderConfig,
    log: Arc<EventLog>,
    /// The percentage of acquires that give up early (busy sessions only).
    give_up_percent: u64,
    /// The fenced store, when the run serves one.
    store: Option<Arc<StoreClient>>,
}

impl Contender {
    fn new(
        framework: &Framework,
        recipe: Recipe,
        prefix: String,
        config: &ContenderConfig,
        log: &Arc<EventLog>,
    ) -> Contender {
        Contender {
            framework: framework.clone(),
            recipe,
            prefix,
            separator: '-',
            config: config.clone(),
            log: log.clone(),
            give_up_percent: 0,
            store: config.store.clone().map(|address| Arc::new(StoreClient::new(address))),
        }
    }

    /// How the next acquire goes: patient, or (for `give_up_percent` of them) giving up early.
    fn attempt(&self, rng: &mut Rng) -> Attempt {
        if rng.u64(..100) >= self.give_up_percent {
            return Attempt::Patient;
        }
        if rng.bool() {
            Attempt::Deadline(Duration::from_micros(
                rng.u64(GIVE_UP_DEADLINE_MICROS.0..=GIVE_UP_DEADLINE_MICROS.1),
            ))
        } else {
            Attempt::DroppedAfter(Duration::from_micros(
                rng.u64(GIVE_UP_DROP_MICROS.0..=GIVE_UP_DROP_MICROS.1),
            ))
        }
    }

    async fn run(self, mut stop: watch::Receiver<bool>) {
        let lock = match self.make_lock() {
            Ok(lock) => lock,
            Err(err) => {
                self.log.event('E', self.recipe, &self.prefix, &format!("making the lock: {err}"));
                return;
            }
        };
        let mut seed = std::collections::hash_map::DefaultHasher::new();
        (&self.prefix, epoch_micros()).hash(&mut seed);
        let mut rng = Rng::with_seed(seed.finish());
        let mut sequence = 0u64;
        while !*stop.borrow() {
            sequence += 1;
            let holder = format!("{}{}{sequence}", self.prefix, self.separator);
            let attempt = self.attempt(&mut rng);
            let acquired = tokio::select! {
                acquired = self.acquire(&lock, &holder, attempt) => acquired,
                _ = stop.wait_for(|stopped| *stopped) => break,
            };
            let (hold, token) = match acquired {
                Ok(held) => held,
                Err(NotAcquired::GaveUp(how)) => {
                    self.log.event('G', self.recipe, &holder, &how);
                    continue;
                }
                Err(NotAcquired::Failed(err)) => {
                    self.log.event('E', self.recipe, &holder, &format!("acquire: {err}"));
                    tokio::time::sleep(BACKOFF).await;
                    continue;
                }
            };
            // Without locking there is no lock node and no token: the control's holders write
            // their effects with the time they began instead, so the store sees their order.
            let token = if self.config.locking { token } else { epoch_micros() };
            self.log.event('A', self.recipe, &holder, &token.to_string());
            let marker = format!("{}/{holder}", self.recipe.guard_dir(&self.config.check_root));
            let outcome = tokio::select! {
                outcome = self.critical_section(&hold, &holder, &marker, token) => outcome,
                () = hold.lost() => Err(Abort::Lost),
            };
            let ended_early = outcome.is_err();
            match outcome {
                Ok(()) => self.log.event('R', self.recipe, &holder, ""),
                Err(Abort::Lost) => {
                    self.log.event('L', self.recipe, &holder, "");
                    self.remove_marker(&hold, &marker).await;
                }
                Err(Abort::Unknown(what)) => {
                    // The hold goes on until it is released: a connection loss that ended the
                    // critical section may still turn into a lost hold while the marker goes.
                    self.log.event('E', self.recipe, &holder, &what);
                    let lost = tokio::select! {
                        () = self.remove_marker(&hold, &marker) => false,
                        () = hold.lost() => true,
                    };
                    if lost {
                        self.log.event('L', self.recipe, &holder, "");
                        self.remove_marker(&hold, &marker).await;
                    } else {
                        self.log.event('R', self.recipe, &holder, "");
                    }
                }
            }
            hold.release().await;
            if !self.config.locking {
                // The control's holder writes once more after its hold ended, as a holder that
                // was paused and still believes it holds would: the store must see it.
                self.store_write(&holder, token).await;
            }
            if ended_early {
                tokio::time::sleep(BACKOFF).await;
            }
        }
        if let Lock::Selector { selector, .. } = &lock {
            let _ = selector.close().await;
        }
    }

    /// The protocol inside a hold: marker, look for other holders' markers, versioned counter
    /// increment carrying our fencing token, marker removed.
    async fn critical_section(
        &self,
        hold: &Hold,
        holder: &str,
        marker: &str,
        token: i64,
    ) -> Result<(), Abort> {
        let recipe = self.recipe;
        match hold.write(&self.framework, Op::CreateEphemeral(marker.to_owned())).await {
            Outcome::Ok => {}
            Outcome::Lost => return Err(Abort::Lost),
            Outcome::Failed(err) => return Err(Abort::Unknown(format!("marker create: {err}"))),
            Outcome::Unknown(what) => return Err(Abort::Unknown(format!("marker create: {what}"))),
        }
        self.store_write(holder, token).await;
        let guard_dir = recipe.guard_dir(&self.config.check_root);
        let (markers, _) = self
            .framework
            .children(&guard_dir, Deadline::after(STEP_TIMEOUT))
            .await
            .map_err(|err| Abort::Unknown(format!("listing markers: {err}")))?;
        let others: Vec<&String> = markers.iter().filter(|name| name.as_str() != holder).collect();
        if recipe.too_many(holder, others.iter().map(|name| name.as_str())) {
            self.log.event('V', recipe, holder, &format!("marker others={}", join(&others)));
        }
        if !recipe.increments(holder) {
            if !self.config.hold.is_zero() {
                tokio::time::sleep(self.config.hold).await;
            }
            return self.delete_marker(hold, marker).await;
        }
        let counter = recipe.counter_path(&self.config.check_root);
        let mut attempts = 0;
        loop {
            attempts += 1;
            let read = self
                .framework
                .get_data(&counter, Deadline::after(STEP_TIMEOUT))
                .await
                .map_err(|err| Abort::Unknown(format!("reading the counter: {err}")))?;
            let Some(value) = CounterValue::parse(&read.data) else {
                return Err(Abort::Unknown("the counter holds garbage".to_owned()));
            };
            if recipe.is_exclusive(holder) && self.config.locking && value.token >= token {
                self.log.event(
                    'V',
                    recipe,
                    holder,
                    &format!("fencing last={} ours={token} by={}", value.token, value.holder),
                );
                break;
            }
            if !self.config.hold.is_zero() {
                tokio::time::sleep(self.config.hold).await;
            }
            let next = CounterValue { count: value.count + 1, token, holder: holder.to_owned() };
            self.log.event('W', recipe, holder, "");
            match hold
                .write(&self.framework, Op::SetData(counter.clone(), next.encode(), read.stat.version))
                .await
            {
                Outcome::Ok => {
                    self.log.event('I', recipe, holder, "ok");
                    break;
                }
                Outcome::Lost => {
                    self.log.event('I', recipe, holder, "no");
                    return Err(Abort::Lost);
                }
                Outcome::Failed(zookeeper_client::Error::BadVersion) => {
                    self.log.event('I', recipe, holder, "no");
                    if recipe.is_exclusive(holder) {
                        self.log.event(
                            'V',
                            recipe,
                            holder,
                            "counter written by another holder during our hold",
                        );
                        break;
                    }
                    if attempts >= INCREMENT_ATTEMPTS {
                        return Err(Abort::Unknown("the counter kept changing".to_owned()));
                    }
                }
                Outcome::Failed(err) => {
                    self.log.event('I', recipe, holder, "no");
                    return Err(Abort::Unknown(format!("counter write: {err}")));
                }
                Outcome::Unknown(what) => {
                    self.log.event('I', recipe, holder, "unc");
                    return Err(Abort::Unknown(format!("counter write: {what}")));
                }
            }
        }
        self.delete_marker(hold, marker).await
    }

    /// An exclusive holder's effect on the fenced store, with its fencing token, logged as `F`
    /// (`ok`, `stale`: refused, or `err`).
    async fn store_write(&self, holder: &str, token: i64) {
        let Some(store) = &self.store else { return };
        if !self.recipe.is_exclusive(holder) {
            return;
        }
        let outcome = match store.write(self.recipe.name(), holder, token).await {
            Ok(true) => "ok".to_owned(),
            Ok(false) => "stale".to_owned(),
            Err(err) => format!("err {err}"),
        };
        self.log.event('F', self.recipe, holder, &format!("{outcome} {token}"));
    }

    async fn delete_marker(&self, hold: &Hold, marker: &str) -> Result<(), Abort> {
        match hold.write(&self.framework, Op::Delete(marker.to_owned())).await {
            Outcome::Ok => Ok(()),
            Outcome::Lost => Err(Abort::Lost),
            Outcome::Failed(err) => Err(Abort::Unknown(format!("marker delete: {err}"))),
            Outcome::Unknown(what) => Err(Abort::Unknown(format!("marker delete: {what}"))),
        }
    }

    /// Makes sure our marker is gone before we release (else the next holder would see it): it
    /// is deleted on our hold's session, or gone with that session.
    async fn remove_marker(&self, hold: &Hold, marker: &str) {
        let deadline = tokio::time::Instant::now() + MARKER_CLEANUP_TIMEOUT;
        while tokio::time::Instant::now() < deadline {
            match hold.write(&self.framework, Op::Delete(marker.to_owned())).await {
                Outcome::Ok | Outcome::Failed(zookeeper_client::Error::NoNode) => return,
                // Our lock node is gone: with our session (the marker too), or deleted by the
                // recipe itself (a cancelled leadership) while the session lives on.
                Outcome::Lost => {
                    if self.delete_own_marker(marker).await {
                        return;
                    }
                }
                Outcome::Failed(_) | Outcome::Unknown(_) => {}
            }
            tokio::time::sleep(BACKOFF).await;
        }
        self.log.event('E', self.recipe, marker, "could not remove the marker");
    }

    /// Deletes `marker` if the current session owns it; true once it is not ours (or gone).
    async fn delete_own_marker(&self, marker: &str) -> bool {
        let deadline = Deadline::after(STEP_TIMEOUT);
        let Ok(session) = self.framework.session(deadline).await else { return false };
        match self.framework.exists(marker, deadline).await {
            Ok(None) => true,
            Ok(Some(stat)) if !session.owns(stat.ephemeral_owner) => true,
            Ok(Some(stat)) => {
                let deleted = self.framework.delete(marker).version(stat.version).deadline(deadline).await;
                deleted.is_ok() || deleted.is_err_and(|err| err.is_no_node())
            }
            Err(_) => false,
        }
    }
}

fn join(names: &[&String]) -> String {
    names.iter().map(|name| name.as_str()).collect::<Vec<_>>().join(",")
}
