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
use tokio::sync::{mpsc, oneshot};
use zk_recipes_framework::zookeeper_client::{self, CreateMode};
use zk_recipes_framework::{Deadline, Error as FrameworkError, Framework};
use zk_recipes_leader::{
    CloseMode, LeaderLatch, LeaderSelector, Leadership, LeadershipEvent, LeadershipEvents,
};
use zk_recipes_lock_internals::{LockError, TransactionOp};
use zk_recipes_mutex::{Hold as _, LockLayout, Mutex, MutexGuard};
use zk_recipes_queue::{DistributedQueue, Utf8Serializer};
use zk_recipes_rwlock::{RwLock, RwLockReadGuard, RwLockWriteGuard};
use zk_recipes_semaphore::{Lease, Semaphore, SemaphoreMutex};

use crate::events::{epoch_micros, EventLog};
use crate::recipes::{is_writer, CounterValue, Recipe};
use crate::rng::Rng;
use crate::setup::ProcessSetup;
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
#[derive(Debug, Clone)]
pub struct ContenderConfig {
    /// Where it connects, its name, its event log, its sessions' timeout.
    pub setup: ProcessSetup,
    /// The recipes, each with `clients` sessions.
    pub recipes: Vec<Recipe>,
    /// Sessions per recipe.
    pub clients: usize,
    /// Whether to take the lock at all (off: the negative control).
    pub locking: bool,
    /// Root of the recipes' lock paths.
    pub lock_root: String,
    /// Root of the checkers' nodes.
    pub check_root: String,
    /// How long each hold lasts (besides its round trips).
    pub hold: Duration,
    /// The queues to consume, one consumer (one session) each.
    pub queues: Vec<Recipe>,
    /// Root of the queues' paths.
    pub queue_root: String,
    /// How long processing one item takes.
    pub process: Duration,
    /// 0: one session per recipe and client, one acquire at a time. More: a busy-session
    /// contender, `clients` sessions each running this many hold loops of every recipe at once.
    pub loops: usize,
    /// The percentage of a busy session's acquires that give up early.
    pub give_up_percent: u64,
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

/// One queue consumer: logs `C` for each item delivered, processes it, acks it and logs `K` once
/// the ack succeeded (`N` when it failed: the item is delivered again).
async fn consume(
    framework: Framework,
    queue: Recipe,
    config: ContenderConfig,
    log: Arc<EventLog>,
    mut stop: watch::Receiver<bool>,
) {
    let consumer_name = config.setup.holder("q");
    let path = queue.lock_path(&config.queue_root);
    let mut builder = DistributedQueue::builder(&framework, &path).serializer(Utf8Serializer);
    if config.locking {
        builder = builder.lock_path(queue.queue_lock_path(&config.queue_root));
    }
    let consumer = match queue {
        Recipe::PriorityQueue => builder.build_priority().map(|queue| queue.consumer()),
        _ => builder.build().map(|queue| queue.consumer()),
    };
    let mut consumer = match consumer {
        Ok(consumer) => consumer.prefetch(1),
        Err(err) => {
            log.event('E', queue, &consumer_name, &format!("making the consumer: {err}"));
            return;
        }
    };
    loop {
        let next = tokio::select! {
            next = consumer.next() => next,
            _ = stop.wait_for(|stopped| *stopped) => break,
        };
        let delivery = match next {
            Some(Ok(delivery)) => delivery,
            Some(Err(err)) => {
                log.event('E', queue, &consumer_name, &err.to_string());
                continue;
            }
            None => break,
        };
        let items = delivery.items().to_vec();
        for item in &items {
            log.event('C', queue, &consumer_name, item);
        }
        tokio::time::sleep(config.process).await;
        for item in &items {
            log.event('W', queue, &consumer_name, item);
        }
        match delivery.ack().await {
            Ok(()) => {
                for item in &items {
                    log.event('K', queue, &consumer_name, item);
                }
            }
            Err(err) => {
                for item in &items {
                    log.event('N', queue, &consumer_name, &format!("{item} {err}"));
                }
            }
        }
    }
    drop(consumer);
    framework.close().await;
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
}

/// How one acquire goes.
#[derive(Debug, Clone, Copy)]
enum Attempt {
    /// Waits up to [`ACQUIRE_TIMEOUT`].
    Patient,
    /// Gives up after this deadline (the acquire's own timeout).
    Deadline(Duration),
    /// Dropped this long after it started, wherever it is then.
    DroppedAfter(Duration),
}

/// Why an acquire returned no hold.
enum NotAcquired {
    /// It gave up early, as its [`Attempt`] said.
    GaveUp(String),
    /// It failed (a timeout of a patient acquire, a lost session, ...).
    Failed(String),
}

/// The lock object of one session, made once.
enum Lock {
    Mutex(Mutex),
    SemaphoreMutex(SemaphoreMutex),
    Semaphore(Semaphore),
    RwLock(RwLock),
    Latch,
    /// The selector hands each leadership over this channel and keeps it until told it is done.
    Selector {
        selector: LeaderSelector,
        turns: tokio::sync::Mutex<mpsc::Receiver<Turn>>,
    },
    Off,
}

/// One leadership of a selector: it lasts until `done` is sent (or dropped).
type Turn = (Leadership, oneshot::Sender<()>);

/// One hold: what a write is guarded by and what says it was lost.
enum Hold {
    Mutex(MutexGuard),
    Lease(Lease),
    Read(RwLockReadGuard),
    Write(RwLockWriteGuard),
    Latch { latch: LeaderLatch, node: String, events: tokio::sync::Mutex<LeadershipEvents> },
    Selector { leadership: Leadership, done: oneshot::Sender<()> },
    Off,
}

/// A write of the protocol.
enum Op {
    CreateEphemeral(String),
    SetData(String, Vec<u8>, i32),
    Delete(String),
}

/// How a write ended.
enum Outcome {
    Ok,
    /// Our lock node is gone (checked in the same transaction): nothing was written.
    Lost,
    /// The write itself failed; nothing was written.
    Failed(zookeeper_client::Error),
    /// Unknown (connection loss, timeout).
    Unknown(String),
}

/// Why a critical section ended early.
enum Abort {
    Lost,
    Unknown(String),
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
            if ended_early {
                tokio::time::sleep(BACKOFF).await;
            }
        }
        if let Lock::Selector { selector, .. } = &lock {
            let _ = selector.close().await;
        }
    }

    fn make_lock(&self) -> Result<Lock, String> {
        if !self.config.locking {
            return Ok(Lock::Off);
        }
        let path = self.recipe.lock_path(&self.config.lock_root);
        Ok(match self.recipe {
            Recipe::Mutex => Lock::Mutex(Mutex::new(&self.framework, &path).map_err(|err| err.to_string())?),
            Recipe::SemaphoreMutex => Lock::SemaphoreMutex(
                SemaphoreMutex::new(&self.framework, &path).map_err(|err| err.to_string())?,
            ),
            Recipe::Semaphore => Lock::Semaphore(
                Semaphore::new(&self.framework, &path, self.recipe.allowed_holders() as u32)
                    .map_err(|err| err.to_string())?,
            ),
            Recipe::Batch(_) => {
                Lock::Mutex(Mutex::new(&self.framework, &path).map_err(|err| err.to_string())?)
            }
            Recipe::ZooKeeperLock => Lock::Mutex(
                Mutex::with_layout(&self.framework, &path, LockLayout::ZooKeeperRecipe)
                    .map_err(|err| err.to_string())?,
            ),
            Recipe::KazooLock => Lock::Mutex(
                Mutex::with_layout(&self.framework, &path, LockLayout::Kazoo)
                    .map_err(|err| err.to_string())?
                    .node_data(self.prefix.clone()),
            ),
            Recipe::Queue | Recipe::PriorityQueue => return Err("a queue is not a lock".to_owned()),
            Recipe::Latch => Lock::Latch,
            Recipe::RwLock => {
                Lock::RwLock(RwLock::new(&self.framework, &path).map_err(|err| err.to_string())?)
            }
            Recipe::Selector => {
                let (sender, turns) = mpsc::channel::<Turn>(1);
                let selector = LeaderSelector::builder(&self.framework, &path)
                    .id(self.prefix.clone())
                    .auto_requeue(true)
                    .build(move |leadership: Leadership| {
                        let sender = sender.clone();
                        async move {
                            let (done, finished) = oneshot::channel();
                            let handed = tokio::select! {
                                sent = sender.send((leadership.clone(), done)) => sent.is_ok(),
                                _ = leadership.cancelled() => false,
                            };
                            if handed {
                                let _ = finished.await;
                            }
                        }
                    })
                    .map_err(|err| err.to_string())?;
                selector.start().map_err(|err| err.to_string())?;
                Lock::Selector { selector, turns: tokio::sync::Mutex::new(turns) }
            }
        })
    }

    /// Acquires as `attempt` says and returns the hold with its fencing token (0 without
    /// locking). Only a mutex gives up early; the other recipes are always patient.
    async fn acquire(&self, lock: &Lock, holder: &str, attempt: Attempt) -> Result<(Hold, i64), NotAcquired> {
        let Lock::Mutex(mutex) = lock else {
            return self.acquire_patiently(lock, holder).await.map_err(NotAcquired::Failed);
        };
        let locked = match attempt {
            Attempt::Patient => mutex.lock_timeout(ACQUIRE_TIMEOUT).await,
            Attempt::Deadline(deadline) => match mutex.lock_timeout(deadline).await {
                Err(err) if err.is_timeout() => {
                    return Err(NotAcquired::GaveUp(format!("deadline {}us", deadline.as_micros())));
                }
                locked => locked,
            },
            Attempt::DroppedAfter(after) => tokio::select! {
                locked = mutex.lock_timeout(ACQUIRE_TIMEOUT) => locked,
                () = tokio::time::sleep(after) => {
                    return Err(NotAcquired::GaveUp(format!("dropped after {}us", after.as_micros())));
                }
            },
        };
        let guard = locked.map_err(|err| NotAcquired::Failed(err.to_string()))?;
        let token = guard.fencing_token();
        Ok((Hold::Mutex(guard), token))
    }

    /// Acquires, waiting up to [`ACQUIRE_TIMEOUT`].
    async fn acquire_patiently(&self, lock: &Lock, holder: &str) -> Result<(Hold, i64), String> {
        match lock {
            Lock::Mutex(mutex) => {
                let guard = mutex.lock_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                let token = guard.fencing_token();
                Ok((Hold::Mutex(guard), token))
            }
            Lock::SemaphoreMutex(mutex) => {
                let lease = mutex.lock_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                self.lease_hold(lease).await
            }
            Lock::Semaphore(semaphore) => {
                let lease =
                    semaphore.acquire_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                self.lease_hold(lease).await
            }
            Lock::RwLock(lock) => {
                if is_writer(holder) {
                    let guard = lock.write_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                    let token = guard.fencing_token();
                    Ok((Hold::Write(guard), token))
                } else {
                    let guard = lock.read_timeout(ACQUIRE_TIMEOUT).await.map_err(|err| err.to_string())?;
                    let token = guard.fencing_token();
                    Ok((Hold::Read(guard), token))
                }
            }
            Lock::Latch => {
                let path = self.recipe.lock_path(&self.config.lock_root);
                let latch =
                    LeaderLatch::new(&self.framework, &path, holder).map_err(|err| err.to_string())?;
                let events = latch.subscribe();
                latch.start().map_err(|err| err.to_string())?;
                let token = match latch.await_leadership_timeout(ACQUIRE_TIMEOUT).await {
                    Ok(token) => token,
                    Err(err) => {
                        let _ = latch.close(CloseMode::Silent).await;
                        return Err(err.to_string());
                    }
                };
                let Some(node) = latch.our_node_path() else {
                    let _ = latch.close(CloseMode::Silent).await;
                    return Err("leader without a node".to_owned());
                };
                Ok((Hold::Latch { latch, node, events: tokio::sync::Mutex::new(events) }, token))
            }
            Lock::Selector { turns, .. } => {
                let mut turns = turns.lock().await;
                match tokio::time::timeout(ACQUIRE_TIMEOUT, turns.recv()).await {
                    Ok(Some((leadership, done))) => {
                        let token = leadership.fencing_token();
                        Ok((Hold::Selector { leadership, done }, token))
                    }
                    Ok(None) => Err("the selector is closed".to_owned()),
                    Err(_) => Err(format!("no leadership within {ACQUIRE_TIMEOUT:?}")),
                }
            }
            Lock::Off => Ok((Hold::Off, 0)),
        }
    }

    /// A lease's fencing token: its node's creation zxid (what the Curator contender uses too).
    async fn lease_hold(&self, lease: Lease) -> Result<(Hold, i64), String> {
        let stat = self
            .framework
            .exists(lease.node_path(), Deadline::after(STEP_TIMEOUT))
            .await
            .map_err(|err| err.to_string())?;
        let token = stat.map(|stat| stat.czxid).unwrap_or(0);
        Ok((Hold::Lease(lease), token))
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

impl Hold {
    /// Commits `op` only while this hold's node exists (one multi with a check of it, on the
    /// session that owns it); without locking, a plain one-op transaction.
    async fn write(&self, framework: &Framework, op: Op) -> Outcome {
        let deadline = Deadline::after(STEP_TIMEOUT);
        let guarded = match &op {
            Op::CreateEphemeral(path) => {
                TransactionOp::Create { path: path.clone(), data: Vec::new(), mode: CreateMode::Ephemeral }
            }
            Op::SetData(path, data, version) => {
                TransactionOp::SetData { path: path.clone(), data: data.clone(), version: Some(*version) }
            }
            Op::Delete(path) => TransactionOp::Delete { path: path.clone(), version: None },
        };
        let locked = match self {
            Hold::Mutex(guard) => guard.write_guarded(&[guarded], deadline).await.map(drop),
            Hold::Read(guard) => guard.write_guarded(&[guarded], deadline).await.map(drop),
            Hold::Write(guard) => guard.write_guarded(&[guarded], deadline).await.map(drop),
            Hold::Lease(lease) => lease.write_guarded(&[guarded], deadline).await.map(drop),
            Hold::Selector { leadership, .. } => {
                let check = framework.transaction().check(leadership.node_path().to_owned(), None);
                return transaction_outcome(op.into_transaction(check).deadline(deadline).await, 1);
            }
            Hold::Latch { node, .. } => {
                return transaction_outcome(
                    op.into_transaction(framework.transaction().check(node.clone(), None))
                        .deadline(deadline)
                        .await,
                    1,
                );
            }
            Hold::Off => {
                return transaction_outcome(
                    op.into_transaction(framework.transaction()).deadline(deadline).await,
                    0,
                );
            }
        };
        match locked {
            Ok(()) => Outcome::Ok,
            Err(LockError::NodeLost { .. }) => Outcome::Lost,
            Err(LockError::GuardedWriteFailed { source, .. }) => Outcome::Failed(source),
            Err(err) => Outcome::Unknown(err.to_string()),
        }
    }

    /// Resolves when this hold can no longer be trusted (never without locking).
    async fn lost(&self) {
        match self {
            Hold::Mutex(guard) => {
                guard.lost().await;
            }
            Hold::Lease(lease) => {
                lease.lost().await;
            }
            Hold::Read(guard) => {
                guard.lost().await;
            }
            Hold::Write(guard) => {
                guard.lost().await;
            }
            Hold::Latch { events, .. } => {
                let mut events = events.lock().await;
                loop {
                    match events.next().await {
                        Some(LeadershipEvent::IsLeader { .. }) => {}
                        Some(_) | None => return,
                    }
                }
            }
            Hold::Selector { leadership, .. } => {
                leadership.cancelled().await;
            }
            Hold::Off => std::future::pending().await,
        }
    }

    async fn release(self) {
        // Errors (NodeLost after an expiry, ...) are expected under chaos; the checkers look at
        // what happened, not at what release says.
        match self {
            Hold::Mutex(guard) => drop(guard.release().await),
            Hold::Lease(lease) => drop(lease.release().await),
            Hold::Read(guard) => drop(guard.release().await),
            Hold::Write(guard) => drop(guard.release().await),
            Hold::Latch { latch, .. } => drop(latch.close(CloseMode::Silent).await),
            Hold::Selector { done, .. } => drop(done.send(())),
            Hold::Off => {}
        }
    }
}

impl Op {
    fn into_transaction(
        self,
        transaction: zk_recipes_framework::Transaction,
    ) -> zk_recipes_framework::Transaction {
        match self {
            Op::CreateEphemeral(path) => transaction.create(path, Vec::new(), CreateMode::Ephemeral),
            Op::SetData(path, data, version) => transaction.set_data(path, data, Some(version)),
            Op::Delete(path) => transaction.delete(path, None),
        }
    }
}

/// A transaction's outcome; `first_op` is the index of our write (after a check, 1).
fn transaction_outcome<T>(result: Result<T, FrameworkError>, first_op: usize) -> Outcome {
    match result {
        Ok(_) => Outcome::Ok,
        Err(FrameworkError::TransactionFailed { index, .. }) if index < first_op => Outcome::Lost,
        Err(FrameworkError::TransactionFailed { source, .. }) => Outcome::Failed(source),
        Err(FrameworkError::NodeLost { .. }) => Outcome::Lost,
        Err(err) => Outcome::Unknown(err.to_string()),
    }
}

fn join(names: &[&String]) -> String {
    names.iter().map(|name| name.as_str()).collect::<Vec<_>>().join(",")
}
