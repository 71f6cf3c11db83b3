//! A server JVM behind a watchdog shell, so that it never outlives the test process.
//!
//! `prctl(PR_SET_PDEATHSIG)` fires when the *thread* that forked dies, and tokio/test threads come
//! and go, so it cannot be used. Instead we spawn `/bin/sh` with a pipe as its stdin; the shell
//! starts java in the background, prints java's pid, and blocks reading the pipe. When our
//! process dies (even by SIGKILL) the kernel closes our end, the shell reads EOF and SIGKILLs
//! java. While the shell is blocked in `read` it does not reap java, so java's pid stays valid
//! (a zombie at worst) until we close the pipe ourselves: signals never hit a recycled pid. After
//! killing java the shell reaps it, so no zombie is left to an init that might not reap.
//!
//! The shell ignores SIGINT/SIGQUIT/SIGHUP (set after java is started, so java keeps its own
//! dispositions): a Ctrl-C to the whole process group kills the test process, and the shell
//! survives long enough to see EOF and kill java — which, as a background job of a
//! non-interactive shell, ignores SIGINT itself.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use crate::error::{Result, TestingError};
use crate::sys::{send_signal, Signal};

/// `$1` is the log file, `$2` the temp dir to delete if our process dies, the rest is the java
/// command line. We write `keep` before closing stdin on an orderly stop (the data dir is kept
/// for a restart and deleted by its `TempDir`); plain EOF means our process died.
const WATCHDOG_SCRIPT: &str = r#"log=$1; cleanup=$2; shift 2
"$@" </dev/null >>"$log" 2>&1 &
pid=$!
trap '' INT QUIT HUP
echo "$pid"
exec >/dev/null
keep=
while read -r line; do [ "$line" = keep ] && keep=1; done
kill -KILL "$pid" 2>/dev/null
wait "$pid" 2>/dev/null
if [ -z "$keep" ]; then
  case "$cleanup" in */zk-recipes-*) rm -rf -- "$cleanup" 2>/dev/null ;; esac
fi
"#;

/// The line that tells the watchdog our process is alive and keeps the temp dir.
const KEEP_LINE: &[u8] = b"keep\n";

/// How long we wait for the watchdog to report java's pid.
const PID_TIMEOUT: Duration = Duration::from_secs(10);
/// How long we wait for a SIGKILLed JVM to be gone.
const KILL_TIMEOUT: Duration = Duration::from_secs(10);
/// How long we wait for the watchdog shell to exit once its stdin is closed.
const WATCHDOG_EXIT_TIMEOUT: Duration = Duration::from_secs(2);
/// Poll period for process state.
const POLL: Duration = Duration::from_millis(5);

/// One running (or dead but not yet cleaned up) server JVM.
#[derive(Debug)]
pub(crate) struct JvmProcess {
    watchdog: Child,
    watchdog_stdin: Option<ChildStdin>,
    java_pid: u32,
    finished: bool,
}

impl JvmProcess {
    /// Starts `java args…` with stdout and stderr appended to `log`, behind the watchdog, which
    /// deletes `cleanup_dir` (a `zk-recipes-*` temp dir) if our process dies without dropping us.
    pub(crate) async fn spawn(
        java: &Path,
        args: Vec<OsString>,
        log: &Path,
        cleanup_dir: &Path,
        cwd: &Path,
    ) -> Result<Self> {
        let mut watchdog = Command::new("/bin/sh")
            .arg("-c")
            .arg(WATCHDOG_SCRIPT)
            .arg("zk-recipes-watchdog")
            .arg(log)
            .arg(cleanup_dir)
            .arg(java)
            .args(args)
            .current_dir(cwd)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| TestingError::io("spawning the watchdog shell /bin/sh", err))?;
        let watchdog_stdin = watchdog.stdin.take();
        let stdout = watchdog.stdout.take();
        let read_pid = tokio::task::spawn_blocking(move || {
            let mut line = String::new();
            if let Some(stdout) = stdout {
                BufReader::new(stdout).read_line(&mut line)?;
            }
            Ok::<_, std::io::Error>(line)
        });
        let pid = match tokio::time::timeout(PID_TIMEOUT, read_pid).await {
            Ok(Ok(Ok(line))) => line.trim().parse::<u32>().ok(),
            _ => None,
        };
        match pid {
            Some(java_pid) => Ok(JvmProcess { watchdog, watchdog_stdin, java_pid, finished: false }),
            None => {
                if let Some(mut stdin) = watchdog_stdin {
                    let _ = stdin.write_all(KEEP_LINE);
                }
                let _ = watchdog.kill();
                let _ = watchdog.wait();
                Err(TestingError::io(
                    "reading the java pid from the watchdog shell",
                    std::io::Error::other("the watchdog did not report a pid"),
                ))
            }
        }
    }

    /// The JVM's process id.
    pub(crate) fn pid(&self) -> u32 {
        self.java_pid
    }

    /// True while the JVM runs (or is stopped by SIGSTOP); false once it is a zombie or gone.
    pub(crate) fn is_alive(&self) -> bool {
        !self.finished && pid_is_alive(self.java_pid)
    }

    /// Sends `signal` to the JVM.
    pub(crate) fn signal(&self, signal: Signal) -> Result<()> {
        if !self.is_alive() {
            return Err(TestingError::NotRunning);
        }
        send_signal(self.java_pid, signal)
            .map_err(|err| TestingError::io(format!("sending {signal:?} to pid {}", self.java_pid), err))
    }

    /// Waits until the JVM is dead (zombie or gone); false if still alive after `timeout`.
    pub(crate) async fn wait_dead(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        loop {
            if !pid_is_alive(self.java_pid) {
                return true;
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// SIGTERM, wait up to `grace`, then SIGKILL; finally reaps the watchdog.
    pub(crate) async fn terminate(mut self, grace: Duration) -> Result<()> {
        if pid_is_alive(self.java_pid) {
            let _ = send_signal(self.java_pid, Signal::Term);
            // A paused JVM only acts on SIGTERM once it runs again.
            let _ = send_signal(self.java_pid, Signal::Cont);
            if !self.wait_dead(grace).await {
                let _ = send_signal(self.java_pid, Signal::Kill);
            }
        }
        self.finish().await
    }

    /// SIGKILL, wait until the JVM is gone, reap the watchdog.
    pub(crate) async fn kill(mut self) -> Result<()> {
        if pid_is_alive(self.java_pid) {
            let _ = send_signal(self.java_pid, Signal::Kill);
        }
        self.finish().await
    }

    async fn finish(&mut self) -> Result<()> {
        let dead = self.wait_dead(KILL_TIMEOUT).await;
        self.release_watchdog();
        let deadline = Instant::now() + WATCHDOG_EXIT_TIMEOUT;
        while Instant::now() < deadline {
            if !matches!(self.watchdog.try_wait(), Ok(None)) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        self.reap_watchdog_blocking();
        if dead {
            Ok(())
        } else {
            Err(TestingError::Timeout {
                what: format!("waiting for JVM pid {} to die", self.java_pid),
                timeout: KILL_TIMEOUT,
            })
        }
    }

    /// Synchronous SIGKILL-and-reap for `Drop`: needs no runtime.
    fn kill_blocking(&mut self) {
        if pid_is_alive(self.java_pid) {
            let _ = send_signal(self.java_pid, Signal::Kill);
        }
        let deadline = Instant::now() + KILL_TIMEOUT;
        while pid_is_alive(self.java_pid) && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        self.release_watchdog();
        let deadline = Instant::now() + WATCHDOG_EXIT_TIMEOUT;
        while matches!(self.watchdog.try_wait(), Ok(None)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        self.reap_watchdog_blocking();
    }

    /// Tells the watchdog to keep the temp dir and closes its stdin: it kills java (already dead
    /// here) and exits.
    fn release_watchdog(&mut self) {
        if let Some(mut stdin) = self.watchdog_stdin.take() {
            // A few bytes into an empty pipe never block.
            let _ = stdin.write_all(KEEP_LINE);
        }
    }

    fn reap_watchdog_blocking(&mut self) {
        if matches!(self.watchdog.try_wait(), Ok(None)) {
            let _ = self.watchdog.kill();
            let _ = self.watchdog.wait();
        }
        self.finished = true;
    }
}

impl Drop for JvmProcess {
    fn drop(&mut self) {
        if !self.finished {
            self.kill_blocking();
        }
    }
}

/// The state letter of `/proc/PID/stat` (`R`, `S`, `T`, `Z`, …), `None` if there is no such process.
#[cfg(target_os = "linux")]
pub(crate) fn process_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after_name = stat.rfind(')')?;
    stat[after_name + 1..].trim_start().chars().next()
}

/// The state letter `ps` shows (`R`, `S`, `T`, `Z`, …), `None` if there is no such process: where
/// there is no `/proc` (macOS, the BSDs).
#[cfg(not(target_os = "linux"))]
pub(crate) fn process_state(pid: u32) -> Option<char> {
    let output =
        std::process::Command::new("ps").args(["-o", "stat=", "-p", &pid.to_string()]).output().ok()?;
    String::from_utf8_lossy(&output.stdout).trim().chars().next()
}

/// Whether a zombie `pid` still has live threads (which keep its sockets open). Only Linux shows
/// a zombie's threads; elsewhere a zombie counts as dead.
fn zombie_has_threads(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    return std::fs::read_dir(format!("/proc/{pid}/task")).map(|tasks| tasks.count() > 1).unwrap_or(false);
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        false
    }
}

/// True until `pid` is completely dead (gone, or a zombie without live threads).
///
/// A SIGKILLed JVM's main thread turns into a zombie ('Z') while its other threads are still
/// being torn down, and its sockets stay open until the last thread has exited, so a zombie
/// leader with more than one entry in `/proc/PID/task` still counts as alive.
pub(crate) fn pid_is_alive(pid: u32) -> bool {
    match process_state(pid) {
        None => false,
        Some('Z' | 'X' | 'x') => zombie_has_threads(pid),
        Some(_) => true,
    }
}

/// Length of `path` now, so that a later [`log_tail`] shows only what was written since.
pub(crate) fn log_len(path: &Path) -> u64 {
    std::fs::metadata(path).map(|meta| meta.len()).unwrap_or(0)
}

/// The last `lines` lines written to `path` after byte `from`.
pub(crate) fn log_tail(path: &Path, from: u64, lines: usize) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        let len = file.metadata().map(|meta| meta.len()).unwrap_or(0);
        // Never read more than the last 64 KiB.
        let start = from.max(len.saturating_sub(64 * 1024));
        if file.seek(SeekFrom::Start(start)).is_ok() {
            let mut bytes = Vec::new();
            let _ = file.read_to_end(&mut bytes);
            text = String::from_utf8_lossy(&bytes).into_owned();
        }
    }
    let all: Vec<&str> = text.lines().collect();
    let tail = &all[all.len().saturating_sub(lines)..];
    if tail.is_empty() {
        format!("(nothing in {})", path.display())
    } else {
        tail.join("\n")
    }
}

/// True if the log written since `from` shows a failed bind.
pub(crate) fn log_shows_address_in_use(path: &Path, from: u64) -> bool {
    log_tail(path, from, 400).contains("Address already in use")
}
