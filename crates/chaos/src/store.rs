//! A fenced store: what a lock holder's effects land on outside ZooKeeper, the way a user's
//! database or file server would take them. It keeps, per resource, the highest fencing token it
//! has accepted and refuses a write with a lower one. The run serves one per phase on loopback;
//! every exclusive holder of the Rust contenders writes to it once per hold, with its token.
//!
//! Protocol, one line each way: `write <resource> <holder> <token>` answered `ok` or
//! `stale <highest>`. The store logs every write it answered (`store.log` beside the contenders'
//! logs: `<epoch µs> <resource> <holder> <token> ok|stale`), and the checker
//! ([`check_store`]) reads that log beside the contenders' events.
//!
//! The negative control's store is *unfenced*: it accepts every write, as a store that ignores
//! tokens would, and the checker must then find stale tokens accepted.

use std::collections::{BTreeMap, HashMap};
use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};

use crate::events::{epoch_micros, Event};

/// How long a contender waits for the store's answer.
const ANSWER_TIMEOUT: Duration = Duration::from_secs(5);

/// The store's state: the highest token accepted per resource, and its log.
struct State {
    highest: HashMap<String, i64>,
    log: std::fs::File,
}

/// A fenced store served on loopback until dropped.
pub struct FencedStore {
    address: SocketAddr,
    server: tokio::task::JoinHandle<()>,
}

impl FencedStore {
    /// Serves a store on 127.0.0.1 (a free port), logging to `log`; `fenced: false` makes it
    /// accept every write (the negative control).
    pub async fn start(log: PathBuf, fenced: bool) -> Result<FencedStore, String> {
        let listener = TcpListener::bind("127.0.0.1:0").await.map_err(|err| format!("the store: {err}"))?;
        let address = listener.local_addr().map_err(|err| format!("the store: {err}"))?;
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|err| format!("opening {}: {err}", log.display()))?;
        let state = Arc::new(Mutex::new(State { highest: HashMap::new(), log: file }));
        let server = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = state.clone();
                tokio::spawn(serve(stream, state, fenced));
            }
        });
        Ok(FencedStore { address, server })
    }

    /// Where contenders reach it (`--store`).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for FencedStore {
    fn drop(&mut self) {
        self.server.abort();
    }
}

/// Answers one connection's writes until it closes.
async fn serve(stream: TcpStream, state: Arc<Mutex<State>>, fenced: bool) {
    let (read, mut write) = stream.into_split();
    let mut lines = BufReader::new(read).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let answer = match line.split_whitespace().collect::<Vec<_>>()[..] {
            ["write", resource, holder, token] => match token.parse::<i64>() {
                Ok(token) => decide(&state, resource, holder, token, fenced),
                Err(_) => "error bad token".to_owned(),
            },
            _ => "error bad request".to_owned(),
        };
        if write.write_all(format!("{answer}\n").as_bytes()).await.is_err() {
            break;
        }
    }
}

/// Accepts or refuses one write, and logs it.
fn decide(state: &Mutex<State>, resource: &str, holder: &str, token: i64, fenced: bool) -> String {
    let Ok(mut state) = state.lock() else { return "error poisoned".to_owned() };
    let highest = state.highest.get(resource).copied().unwrap_or(i64::MIN);
    let accepted = !fenced || token >= highest;
    if accepted {
        state.highest.insert(resource.to_owned(), highest.max(token));
    }
    let outcome = if accepted { "ok" } else { "stale" };
    let _ = writeln!(state.log, "{} {resource} {holder} {token} {outcome}", epoch_micros());
    if accepted {
        "ok".to_owned()
    } else {
        format!("stale {highest}")
    }
}

/// A contender's connection to the store.
pub struct StoreClient {
    address: String,
    connection: tokio::sync::Mutex<
        Option<(BufReader<tokio::net::tcp::OwnedReadHalf>, tokio::net::tcp::OwnedWriteHalf)>,
    >,
}

impl StoreClient {
    /// A client of the store at `address` (connects on first use).
    pub fn new(address: String) -> StoreClient {
        StoreClient { address, connection: tokio::sync::Mutex::new(None) }
    }

    /// Writes `holder`'s effect on `resource` with its fencing token: `Ok(true)` accepted,
    /// `Ok(false)` refused as stale.
    pub async fn write(&self, resource: &str, holder: &str, token: i64) -> Result<bool, String> {
        let mut connection = self.connection.lock().await;
        if connection.is_none() {
            let stream =
                TcpStream::connect(&self.address).await.map_err(|err| format!("the store: {err}"))?;
            let (read, write) = stream.into_split();
            *connection = Some((BufReader::new(read), write));
        }
        let Some((read, write)) = connection.as_mut() else {
            return Err("the store: not connected".to_owned());
        };
        let exchange = async {
            write.write_all(format!("write {resource} {holder} {token}\n").as_bytes()).await?;
            let mut answer = String::new();
            read.read_line(&mut answer).await?;
            Ok::<String, std::io::Error>(answer)
        };
        let answer = match tokio::time::timeout(ANSWER_TIMEOUT, exchange).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(err)) => {
                *connection = None;
                return Err(format!("the store: {err}"));
            }
            Err(_) => {
                *connection = None;
                return Err("the store did not answer".to_owned());
            }
        };
        match answer.split_whitespace().next() {
            Some("ok") => Ok(true),
            Some("stale") => Ok(false),
            _ => Err(format!("the store answered {:?}", answer.trim())),
        }
    }
}

/// One write the store answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreWrite {
    /// When the store answered (epoch µs, the contenders' clock).
    pub micros: i64,
    /// The lock recipe's name.
    pub resource: String,
    /// The hold that wrote.
    pub holder: String,
    /// Its fencing token.
    pub token: i64,
    /// Whether the store accepted it (else it refused it as stale).
    pub accepted: bool,
}

impl StoreWrite {
    /// Parses a line of `store.log`.
    pub fn parse(line: &str) -> Option<StoreWrite> {
        let mut fields = line.split_whitespace();
        Some(StoreWrite {
            micros: fields.next()?.parse().ok()?,
            resource: fields.next()?.to_owned(),
            holder: fields.next()?.to_owned(),
            token: fields.next()?.parse().ok()?,
            accepted: fields.next()? == "ok",
        })
    }
}

/// Every write in a store log.
pub fn read_store_log(path: &Path) -> Vec<StoreWrite> {
    std::fs::read_to_string(path).unwrap_or_default().lines().filter_map(StoreWrite::parse).collect()
}

/// What the store saw, per resource (the lock recipe's name).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StoreReport {
    /// Writes the store accepted.
    pub accepted: u64,
    /// Writes the store refused as stale: a paused or cut-off holder's effect, fenced off.
    pub refused: u64,
    /// Overlap of effect: accepted writes with a token below one accepted before, or accepted
    /// after another holder of the same lock had acquired with a higher token (the writer's lock
    /// node was gone by then). Must be empty.
    pub effect_overlaps: Vec<String>,
}

/// Checks the store's log against the contenders' acquisitions: no stale token accepted, no
/// write accepted after its lock had passed to a higher token.
pub fn check_store(writes: &[StoreWrite], events: &[Event]) -> BTreeMap<String, StoreReport> {
    // Per recipe, the acquisitions (time, token) in time order.
    let mut acquired: HashMap<&str, Vec<(i64, i64, &str)>> = HashMap::new();
    for event in events.iter().filter(|event| event.kind == 'A') {
        let Some(token) = event.rest.first().and_then(|token| token.parse().ok()) else { continue };
        acquired.entry(event.recipe.name()).or_default().push((event.micros, token, &event.holder));
    }
    for list in acquired.values_mut() {
        list.sort_unstable();
    }
    let mut writes: Vec<&StoreWrite> = writes.iter().collect();
    writes.sort_by_key(|write| write.micros);
    let mut reports: BTreeMap<String, StoreReport> = BTreeMap::new();
    let mut highest: HashMap<&str, (i64, &str)> = HashMap::new();
    for write in writes {
        let report = reports.entry(write.resource.clone()).or_default();
        if !write.accepted {
            report.refused += 1;
            continue;
        }
        report.accepted += 1;
        if let Some((token, holder)) = highest.get(write.resource.as_str()) {
            if write.token < *token {
                report.effect_overlaps.push(format!(
                    "stale token accepted: {} wrote with {:#x} after {holder} had written with {token:#x}",
                    write.holder, write.token
                ));
            }
        }
        let newer = acquired.get(write.resource.as_str()).and_then(|list| {
            list.iter().find(|(micros, token, holder)| {
                *micros < write.micros && *token > write.token && *holder != write.holder
            })
        });
        if let Some((micros, token, holder)) = newer {
            report.effect_overlaps.push(format!(
                "accepted after its lock had passed: {} wrote with {:#x} at {}, {holder} had acquired with {token:#x} at {micros}",
                write.holder, write.token, write.micros
            ));
        }
        let entry = highest.entry(write.resource.as_str()).or_insert((write.token, &write.holder));
        if write.token >= entry.0 {
            *entry = (write.token, &write.holder);
        }
    }
    reports
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(line: &str) -> StoreWrite {
        StoreWrite::parse(line).expect("write")
    }

    fn event(line: &str) -> Event {
        Event::parse(line).expect("event")
    }

    /// A store refuses a token below the highest it accepted, and the checker counts the refusal
    /// as fenced off, not as an effect.
    #[tokio::test]
    async fn the_store_refuses_a_stale_token_and_the_checker_counts_it_fenced_off() {
        let dir = std::env::temp_dir().join(format!("zkr-chaos-store-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("dir");
        let log = dir.join("store.log");
        let _ = std::fs::remove_file(&log);
        let store = FencedStore::start(log.clone(), true).await.expect("store");
        let client = StoreClient::new(store.address().to_string());
        let deadline = Duration::from_secs(10);
        assert_eq!(
            tokio::time::timeout(deadline, client.write("mutex", "r0x1-0-1", 5)).await.expect("answer"),
            Ok(true)
        );
        assert_eq!(
            tokio::time::timeout(deadline, client.write("mutex", "r0x1-1-1", 7)).await.expect("answer"),
            Ok(true)
        );
        assert_eq!(
            tokio::time::timeout(deadline, client.write("mutex", "r0x1-0-1", 5)).await.expect("answer"),
            Ok(false)
        );
        assert_eq!(
            tokio::time::timeout(deadline, client.write("latch", "r0x1-0-1", 1)).await.expect("answer"),
            Ok(true)
        );
        let writes = read_store_log(&log);
        assert_eq!(writes.len(), 4);
        let reports = check_store(&writes, &[]);
        assert_eq!(reports["mutex"], StoreReport { accepted: 2, refused: 1, effect_overlaps: Vec::new() });
        drop(store);
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The negative control: a store that ignores tokens accepts a stale one, and the checker
    /// must catch it, as it must catch a write accepted after the lock passed to a higher token.
    #[test]
    fn stale_effects_are_caught() {
        let writes = [
            write("10 mutex r0x1-0-1 5 ok"),
            write("20 mutex r0x1-1-1 7 ok"),
            write("30 mutex r0x1-0-1 5 ok"),
        ];
        let reports = check_store(&writes, &[]);
        assert_eq!(reports["mutex"].effect_overlaps.len(), 1, "{reports:?}");
        assert!(reports["mutex"].effect_overlaps[0].starts_with("stale token accepted"));
        // The lock passed to token 7 at 15; the holder of 5 (paused) writes at 16, before the
        // new holder wrote: the store cannot know, the checker does.
        let events = [event("A mutex r0x1-0-1 1 5"), event("A mutex j0x1-0-1 15 7")];
        let late = [write("16 mutex r0x1-0-1 5 ok"), write("17 mutex j0x1-0-1 7 ok")];
        let reports = check_store(&late, &events);
        assert_eq!(reports["mutex"].effect_overlaps.len(), 1, "{reports:?}");
        assert!(reports["mutex"].effect_overlaps[0].starts_with("accepted after its lock had passed"));
        let in_order = [write("2 mutex r0x1-0-1 5 ok"), write("17 mutex j0x1-0-1 7 ok")];
        assert!(check_store(&in_order, &events)["mutex"].effect_overlaps.is_empty());
    }
}
