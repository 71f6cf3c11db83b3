//! What the run tells a contender process on its stdin, one command a line: `freeze` (stop
//! changing things, keep what you hold), `check <file>` (compare your view with the server's tree
//! in `<file>`), `stop` (release, close, exit 0). End of input means the run is gone: the process
//! exits at once (status 3), as a crashed client would.

use std::path::PathBuf;

use tokio::io::AsyncBufReadExt;
use tokio::sync::watch;

/// The commands received so far, each a watch the process's tasks wait on.
pub struct Commands {
    /// `true` once `freeze` came.
    pub freeze: watch::Receiver<bool>,
    /// The file of the last `check`.
    pub check: watch::Receiver<Option<PathBuf>>,
    /// `true` once `stop` came.
    pub stop: watch::Receiver<bool>,
}

/// Reads stdin in a task of its own from now on.
pub fn listen() -> Commands {
    let (freeze_sender, freeze) = watch::channel(false);
    let (check_sender, check) = watch::channel(None::<PathBuf>);
    let (stop_sender, stop) = watch::channel(false);
    tokio::spawn(async move {
        let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
        loop {
            match lines.next_line().await {
                Ok(Some(line)) if line.trim() == "freeze" => {
                    let _ = freeze_sender.send(true);
                }
                Ok(Some(line)) if line.starts_with("check ") => {
                    let _ = check_sender.send(Some(PathBuf::from(line["check ".len()..].trim())));
                }
                Ok(Some(line)) if line.trim() == "stop" => {
                    let _ = stop_sender.send(true);
                }
                Ok(Some(_)) => {}
                Ok(None) | Err(_) => std::process::exit(3),
            }
        }
    });
    Commands { freeze, check, stop }
}
