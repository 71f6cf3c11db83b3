//! ZooKeeper's four-letter-word admin commands (`ruok`, `srvr`, `mntr`, `wchc`, …) and parsers
//! for their answers.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::error::{Result, TestingError};

/// Deadline used by the servers' four-letter-word helpers: 5 s for connect, send and answer.
pub const DEFAULT_FOUR_LETTER_TIMEOUT: Duration = Duration::from_secs(5);

/// The `Mode:` line of `srvr`: what role a server plays.
///
/// # Example
/// ```
/// use zk_recipes_testing::{parse_srvr_mode, ServerMode};
///
/// assert_eq!(parse_srvr_mode("Mode: standalone\n"), Some(ServerMode::Standalone));
/// assert_eq!(parse_srvr_mode("Mode: observer\n"), Some(ServerMode::Observer));
/// match parse_srvr_mode("Mode: leader\n") {
///     Some(mode) if mode.is_quorum_member() => println!("serves as {mode:?}"),
///     other => println!("not a voting member: {other:?}"),
/// }
/// ```
#[non_exhaustive]
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ServerMode {
    /// A single server without an ensemble.
    Standalone,
    /// The ensemble's leader.
    Leader,
    /// A voting follower.
    Follower,
    /// A non-voting observer.
    Observer,
    /// A read-only server (partitioned from its quorum).
    ReadOnly,
    /// Something else, verbatim.
    Other(String),
}

impl ServerMode {
    /// True for [`ServerMode::Leader`] and [`ServerMode::Follower`]: an ensemble member that serves.
    ///
    /// # Example
    /// ```
    /// use zk_recipes_testing::ServerMode;
    /// assert!(ServerMode::Leader.is_quorum_member());
    /// assert!(!ServerMode::Standalone.is_quorum_member());
    /// ```
    pub fn is_quorum_member(&self) -> bool {
        matches!(self, ServerMode::Leader | ServerMode::Follower)
    }
}

/// Sends a four-letter word to `address` and returns the whole answer (read until the server
/// closes the connection), all within `timeout`.
///
/// The answer is returned verbatim, including "This ZooKeeper instance is not currently serving
/// requests" from a server that is still starting.
///
/// # Errors
/// [`TestingError::FourLetterWord`] if the connection fails, the command is not in the server's
/// `4lw.commands.whitelist`, or the command is not four ASCII letters; [`TestingError::Timeout`]
/// when `timeout` passes.
///
/// # Example
/// ```no_run
/// # async fn demo(server: &zk_recipes_testing::TestingServer) -> Result<(), zk_recipes_testing::TestingError> {
/// use std::time::Duration;
/// let answer = zk_recipes_testing::four_letter_word(server.address(), "ruok", Duration::from_secs(1)).await?;
/// assert_eq!(answer, "imok");
/// # Ok(()) }
/// ```
///
/// # Cancel safety
/// Cancel safe: dropping the future closes the connection.
pub async fn four_letter_word(address: SocketAddr, command: &str, timeout: Duration) -> Result<String> {
    if command.len() != 4 || !command.bytes().all(|byte| byte.is_ascii_alphabetic()) {
        return Err(TestingError::InvalidArgument(format!("`{command}` is not a four-letter word")));
    }
    let failed = |reason: String| TestingError::FourLetterWord {
        command: command.to_owned(),
        address: address.to_string(),
        reason,
    };
    let exchange = async {
        let mut stream =
            TcpStream::connect(address).await.map_err(|err| failed(format!("connect: {err}")))?;
        stream.write_all(command.as_bytes()).await.map_err(|err| failed(format!("send: {err}")))?;
        let mut answer = Vec::new();
        stream.read_to_end(&mut answer).await.map_err(|err| failed(format!("read: {err}")))?;
        Ok::<_, TestingError>(String::from_utf8_lossy(&answer).into_owned())
    };
    let answer = tokio::time::timeout(timeout, exchange)
        .await
        .map_err(|_| TestingError::Timeout { what: format!("`{command}` to {address}"), timeout })??;
    if answer.contains("is not executed because it is not in the whitelist") {
        return Err(failed(answer.trim().to_owned()));
    }
    Ok(answer)
}

/// Parses `mntr` output (`key<TAB>value` lines) into a map.
///
/// # Example
/// ```
/// let stats = zk_recipes_testing::parse_mntr("zk_version\t3.8.0\nzk_znode_count\t5\n");
/// assert_eq!(stats["zk_znode_count"], "5");
/// ```
pub fn parse_mntr(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|line| {
            let (key, value) = line.split_once('\t')?;
            Some((key.trim().to_owned(), value.trim().to_owned()))
        })
        .collect()
}

/// Parses `wchc` output into watched paths per session id (`0x…`).
///
/// A session appears once per watch kind (data and child watches are dumped separately); its
/// paths are merged here, so a path watched both ways appears twice.
///
/// # Example
/// ```
/// let watches = zk_recipes_testing::parse_wchc("0x1000\n\t/a\n\t/b\n0x2000\n\t/a\n");
/// assert_eq!(watches["0x1000"], vec!["/a", "/b"]);
/// assert_eq!(watches.values().map(Vec::len).sum::<usize>(), 3);
/// ```
pub fn parse_wchc(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut sessions: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        if line.trim().is_empty() {
            continue;
        }
        if line.starts_with(char::is_whitespace) {
            if let Some(session) = &current {
                sessions.entry(session.clone()).or_default().push(line.trim().to_owned());
            }
        } else {
            let session = line.trim().to_owned();
            sessions.entry(session.clone()).or_default();
            current = Some(session);
        }
    }
    sessions
}

/// Parses the `Mode:` line of `srvr` (or `stat`) output; `None` if there is none (e.g. the server
/// is not serving yet).
///
/// # Example
/// ```
/// use zk_recipes_testing::{parse_srvr_mode, ServerMode};
/// assert_eq!(parse_srvr_mode("Zookeeper version: 3.8.0\nMode: follower\n"), Some(ServerMode::Follower));
/// ```
pub fn parse_srvr_mode(text: &str) -> Option<ServerMode> {
    let mode = text.lines().find_map(|line| line.strip_prefix("Mode:"))?.trim();
    Some(match mode {
        "standalone" => ServerMode::Standalone,
        "leader" => ServerMode::Leader,
        "follower" => ServerMode::Follower,
        "observer" => ServerMode::Observer,
        "read-only" => ServerMode::ReadOnly,
        other => ServerMode::Other(other.to_owned()),
    })
}

/// The helpers shared by servers and cluster members.
pub(crate) async fn mode_of(address: SocketAddr) -> Result<ServerMode> {
    let answer = four_letter_word(address, "srvr", DEFAULT_FOUR_LETTER_TIMEOUT).await?;
    parse_srvr_mode(&answer).ok_or_else(|| TestingError::FourLetterWord {
        command: "srvr".to_owned(),
        address: address.to_string(),
        reason: format!("no `Mode:` line in {:?}", answer.trim()),
    })
}

pub(crate) async fn mntr_of(address: SocketAddr) -> Result<BTreeMap<String, String>> {
    let answer = four_letter_word(address, "mntr", DEFAULT_FOUR_LETTER_TIMEOUT).await?;
    let stats = parse_mntr(&answer);
    if stats.is_empty() {
        return Err(TestingError::FourLetterWord {
            command: "mntr".to_owned(),
            address: address.to_string(),
            reason: format!("no statistics in {:?}", answer.trim()),
        });
    }
    Ok(stats)
}

pub(crate) async fn znode_count_of(address: SocketAddr) -> Result<u64> {
    let stats = mntr_of(address).await?;
    stats.get("zk_znode_count").and_then(|count| count.parse().ok()).ok_or_else(|| {
        TestingError::FourLetterWord {
            command: "mntr".to_owned(),
            address: address.to_string(),
            reason: "no numeric zk_znode_count".to_owned(),
        }
    })
}

pub(crate) async fn watches_of(address: SocketAddr) -> Result<BTreeMap<String, Vec<String>>> {
    let answer = four_letter_word(address, "wchc", DEFAULT_FOUR_LETTER_TIMEOUT).await?;
    if answer.contains("not currently serving") {
        return Err(TestingError::FourLetterWord {
            command: "wchc".to_owned(),
            address: address.to_string(),
            reason: answer.trim().to_owned(),
        });
    }
    Ok(parse_wchc(&answer))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wchc_merges_watch_kinds_and_ignores_blank_lines() {
        let text = "0x100000a\n\t/lock/a\n\n0x100000b\n\t/lock/b\n0x100000a\n\t/lock\n";
        let watches = parse_wchc(text);
        assert_eq!(watches.len(), 2);
        assert_eq!(watches["0x100000a"], vec!["/lock/a", "/lock"]);
        assert_eq!(watches.values().map(Vec::len).sum::<usize>(), 3);
        assert!(parse_wchc("").is_empty());
    }

    #[test]
    fn srvr_modes() {
        assert_eq!(parse_srvr_mode("Mode: standalone\n"), Some(ServerMode::Standalone));
        assert_eq!(parse_srvr_mode("Mode: leader\n"), Some(ServerMode::Leader));
        assert_eq!(parse_srvr_mode("Mode: read-only\n"), Some(ServerMode::ReadOnly));
        assert_eq!(parse_srvr_mode("Mode: weird\n"), Some(ServerMode::Other("weird".to_owned())));
        assert_eq!(parse_srvr_mode("This ZooKeeper instance is not currently serving requests\n"), None);
    }

    #[test]
    fn mntr_splits_on_tabs() {
        let stats = parse_mntr("zk_version\t3.8.0-abc, built on x\nzk_server_state\tleader\ngarbage\n");
        assert_eq!(stats.len(), 2);
        assert_eq!(stats["zk_server_state"], "leader");
    }

    #[tokio::test]
    async fn rejects_words_that_are_not_four_letters() {
        let address = SocketAddr::from(([127, 0, 0, 1], 9));
        let err =
            four_letter_word(address, "ruok\n", Duration::from_millis(10)).await.expect_err("five bytes");
        assert!(matches!(err, TestingError::InvalidArgument(_)), "{err}");
    }
}
