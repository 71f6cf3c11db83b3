//! Apache Curator in a JVM, driven line by line from Rust interop tests.
//!
//! The driver program is `java/CuratorDriver.java` (in this crate) (embedded here at build time). It runs
//! Curator 5.4 recipes (`InterProcessMutex`, `InterProcessSemaphoreV2`,
//! `InterProcessSemaphoreMutex`, `Revoker`) on command-line arguments, prints machine-readable
//! lines (`NODE <path>`, `HELD <micros>`, `DONE acquisitions=N violations=M`, …) to stdout, reads
//! commands (`release`, `go`) from stdin, and exits as soon as its stdin closes. See the Java file's
//! header for every command; the other files in `java/` add commands for more recipes (each
//! file's header lists its own), and `CuratorDiscovery.java`'s service-discovery commands are typed
//! by `CuratorDiscovery` in the workspace's unpublished `zk-recipes-interop` crate.

use std::collections::hash_map::DefaultHasher;
use std::ffi::{OsStr, OsString};
use std::hash::{Hash, Hasher};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use tokio::sync::mpsc;

use crate::classpath::{curator_classpath, java_binary, Jit};
use crate::error::{Result, TestingError};
use crate::process::log_tail;

/// The driver's sources (file name, text), compiled together on first use by
/// [`curator_driver_classes`]. `CuratorDriver.java` holds `main` and the shared helpers; each
/// other file is an extension class with its recipes' commands, listed in its `EXTENSIONS`.
pub(crate) const CURATOR_DRIVER_SOURCES: &[(&str, &str)] = &[
    ("CuratorDriver.java", include_str!("../java/CuratorDriver.java")),
    ("CuratorNodes.java", include_str!("../java/CuratorNodes.java")),
    ("CuratorCounters.java", include_str!("../java/CuratorCounters.java")),
    ("CuratorBarriers.java", include_str!("../java/CuratorBarriers.java")),
    ("ZkRecipeLocks.java", include_str!("../java/ZkRecipeLocks.java")),
    ("CuratorChaos.java", include_str!("../java/CuratorChaos.java")),
    ("CuratorDiscovery.java", include_str!("../java/CuratorDiscovery.java")),
];

/// Payload classes the driver's commands write, compiled with it (file name, text): stand-ins with
/// the names and properties of other frameworks' classes, in those frameworks' packages, so that
/// the JSON Curator writes names the same `@class` (Spring Cloud Zookeeper's `ZookeeperInstance`,
/// for the discovery interop driver).
pub(crate) const PAYLOAD_STAND_IN_SOURCES: &[(&str, &str)] =
    &[("ZookeeperInstance.java", include_str!("../java/ZookeeperInstance.java"))];

/// The driver's main class.
pub const CURATOR_DRIVER_CLASS: &str = "zkrecipes.interop.CuratorDriver";

/// Environment variable naming the `javac` binary (otherwise the one next to [`java_binary`], then
/// `javac` on `PATH`, then `$JAVA_HOME/bin/javac`).
pub const JAVAC_ENV: &str = "JAVAC";

/// JVM flags for the driver (besides the [`Jit`] ones): small heap, Curator's and ZooKeeper's INFO
/// logs off.
const DRIVER_JVM_FLAGS: &[&str] = &[
    "-Xmx192m",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-XX:+ExitOnOutOfMemoryError",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
    "-Dorg.slf4j.simpleLogger.showDateTime=true",
    "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS",
];

/// stderr lines quoted in errors.
const LOG_TAIL_LINES: usize = 30;
/// Poll period while waiting for the driver to exit.
const EXIT_POLL: Duration = Duration::from_millis(10);

/// Compiles the driver (`java/*.java` in this crate) once per process (and once per source, classpath and `javac`,
/// across processes) and returns the directory holding its classes.
///
/// The classes go next to the running executable (for a test: `target/<profile>/curator-driver/
/// <hash>/`), compiled into a temporary directory and renamed into place, so concurrent test
/// processes never see half-written classes. The first call blocks for the compile (≈ 2–3 s).
///
/// # Errors
/// [`TestingError::MissingJar`] when Curator is not installed; [`TestingError::JavaNotFound`]
/// when there is no `javac`; [`TestingError::Io`] when writing the source fails or `javac` fails
/// (with its output).
///
/// # Example
/// ```no_run
/// let classes = zk_recipes_testing::curator_driver_classes()?;
/// assert!(classes.join("zkrecipes/interop/CuratorDriver.class").is_file());
/// # Ok::<(), zk_recipes_testing::TestingError>(())
/// ```
pub fn curator_driver_classes() -> Result<PathBuf> {
    static COMPILED: parking_lot::Mutex<Option<PathBuf>> = parking_lot::const_mutex(None);
    let mut compiled = COMPILED.lock();
    if let Some(classes) = compiled.as_ref() {
        return Ok(classes.clone());
    }
    let classpath = curator_classpath()?;
    let javac = javac_binary()?;
    let mut hasher = DefaultHasher::new();
    (CURATOR_DRIVER_SOURCES, PAYLOAD_STAND_IN_SOURCES, &classpath, &javac).hash(&mut hasher);
    let root = driver_root();
    let classes = root.join(format!("{:016x}", hasher.finish()));
    if !is_complete(&classes) {
        compile_into(&root, &classes, &javac, &classpath)?;
    }
    *compiled = Some(classes.clone());
    Ok(classes)
}

fn is_complete(classes: &Path) -> bool {
    classes.join("zkrecipes").join("interop").join("CuratorDriver.class").is_file()
}

/// `target/<profile>/curator-driver` for a test executable in `target/<profile>/deps/`, else the
/// system temp dir.
fn driver_root() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().and_then(Path::parent).map(Path::to_path_buf))
        .unwrap_or_else(std::env::temp_dir)
        .join("curator-driver")
}

fn compile_into(root: &Path, classes: &Path, javac: &Path, classpath: &str) -> Result<()> {
    std::fs::create_dir_all(root)
        .map_err(|err| TestingError::io(format!("creating {}", root.display()), err))?;
    let nanos =
        SystemTime::now().duration_since(UNIX_EPOCH).map(|elapsed| elapsed.subsec_nanos()).unwrap_or(0);
    let staging = root.join(format!(".staging-{}-{nanos}", std::process::id()));
    let outcome = compile_staged(&staging, javac, classpath).and_then(|()| {
        match std::fs::rename(staging.join("classes"), classes) {
            Ok(()) => Ok(()),
            // Another process renamed its copy into place first: use that one.
            Err(_) if is_complete(classes) => Ok(()),
            Err(err) => {
                Err(TestingError::io(format!("moving the driver classes to {}", classes.display()), err))
            }
        }
    });
    let _ = std::fs::remove_dir_all(&staging);
    outcome
}

fn compile_staged(staging: &Path, javac: &Path, classpath: &str) -> Result<()> {
    let output_dir = staging.join("classes");
    std::fs::create_dir_all(&output_dir)
        .map_err(|err| TestingError::io(format!("creating {}", output_dir.display()), err))?;
    let mut sources = Vec::with_capacity(CURATOR_DRIVER_SOURCES.len() + PAYLOAD_STAND_IN_SOURCES.len());
    for (name, text) in CURATOR_DRIVER_SOURCES.iter().chain(PAYLOAD_STAND_IN_SOURCES) {
        let source = staging.join(name);
        std::fs::write(&source, text)
            .map_err(|err| TestingError::io(format!("writing {}", source.display()), err))?;
        sources.push(source);
    }
    let output = Command::new(javac)
        .arg("-nowarn")
        .arg("-encoding")
        .arg("UTF-8")
        .arg("-cp")
        .arg(classpath)
        .arg("-d")
        .arg(&output_dir)
        .args(&sources)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| TestingError::io(format!("running {}", javac.display()), err))?;
    if output.status.success() {
        Ok(())
    } else {
        let diagnostics = String::from_utf8_lossy(&output.stderr);
        Err(TestingError::io(
            format!("compiling the Curator driver with {} ({})", javac.display(), output.status),
            std::io::Error::other(diagnostics.trim().to_owned()),
        ))
    }
}

/// `$JAVAC`, else `javac` next to [`java_binary`] (also after resolving its symlinks), else on
/// `PATH`, else `$JAVA_HOME/bin/javac`.
fn javac_binary() -> Result<PathBuf> {
    let mut candidates = Vec::new();
    if let Some(javac) = std::env::var_os(JAVAC_ENV).filter(|value| !value.is_empty()) {
        candidates.push(PathBuf::from(javac));
    }
    if let Ok(java) = java_binary() {
        if let Some(dir) = java.parent() {
            candidates.push(dir.join("javac"));
        }
        if let Some(dir) = std::fs::canonicalize(&java).ok().as_deref().and_then(Path::parent) {
            candidates.push(dir.join("javac"));
        }
    }
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("javac")));
    }
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        candidates.push(PathBuf::from(home).join("bin").join("javac"));
    }
    candidates.iter().find(|candidate| is_executable(candidate)).cloned().ok_or_else(|| {
        TestingError::JavaNotFound {
            tried: format!(
                "javac: $JAVAC, next to java, on PATH, $JAVA_HOME/bin ({} candidates)",
                candidates.len()
            ),
        }
    })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// A running `CuratorDriver` JVM: Curator on the other side of an interop test.
///
/// Its stdout is read line by line ([`expect_line`](Self::expect_line),
/// [`lines_until`](Self::lines_until)); its stdin takes commands ([`send_line`](Self::send_line));
/// its stderr (Curator's warnings, the driver's log) goes to a file quoted in every error.
///
/// The JVM never outlives its `CuratorProcess`: dropping it SIGKILLs the JVM and reaps it
/// (synchronously, no runtime needed), and the driver exits by itself when its stdin closes, so it
/// also dies with a test process that is SIGKILLed.
///
/// # Example
/// ```no_run
/// # async fn demo(connect: &str) -> Result<(), zk_recipes_testing::TestingError> {
/// use std::time::Duration;
/// use zk_recipes_testing::CuratorProcess;
///
/// let mut curator = CuratorProcess::spawn(["hold", "mutex", connect, "/app/lock"])?;
/// let node = curator.expect_line("NODE ", Duration::from_secs(30)).await?;
/// println!("Curator holds {node}");
/// curator.send_line("release").await?;
/// curator.expect_line("RELEASED", Duration::from_secs(10)).await?;
/// assert!(curator.wait(Duration::from_secs(10)).await?.success());
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CuratorProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<String>,
    log_path: PathBuf,
    exit_status: Option<ExitStatus>,
    // Last: deleted after the JVM is gone.
    _log_dir: tempfile::TempDir,
}

impl CuratorProcess {
    /// Starts `java … zkrecipes.interop.CuratorDriver <args>` (compiling the driver first if this
    /// process has not yet: see [`curator_driver_classes`]). Returns once the JVM is spawned; use
    /// [`expect_line`](Self::expect_line) to wait for what it prints.
    ///
    /// Global options go before the command, e.g. `["--session-timeout-ms", "2000", "hold", …]`.
    ///
    /// # Errors
    /// As [`curator_driver_classes`]; [`TestingError::JavaNotFound`]; [`TestingError::Io`] if the
    /// JVM cannot be spawned.
    pub fn spawn<I, S>(args: I) -> Result<CuratorProcess>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::spawn_with_jit(Jit::QuickStart, args)
    }

    /// As [`spawn_with_jit`](Self::spawn_with_jit), with more JVM options after the driver's own
    /// (so `-Xmx1g` replaces its 192 MiB heap, as a benchmark of a large cache needs).
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn).
    pub fn spawn_with_jvm_options<I, S>(jit: Jit, jvm_options: &[&str], args: I) -> Result<CuratorProcess>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::start(jit, jvm_options, args)
    }

    /// As [`spawn`](Self::spawn), with the JVM compiling as `jit` says: benchmarks use
    /// [`Jit::Full`], so that Curator runs as it does in production.
    ///
    /// # Errors
    /// As [`spawn`](Self::spawn).
    pub fn spawn_with_jit<I, S>(jit: Jit, args: I) -> Result<CuratorProcess>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::start(jit, &[], args)
    }

    fn start<I, S>(jit: Jit, jvm_options: &[&str], args: I) -> Result<CuratorProcess>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let classes = curator_driver_classes()?;
        let classpath = curator_classpath()?;
        let java = java_binary()?;
        let mut full_classpath = OsString::from(classes.as_os_str());
        full_classpath.push(":");
        full_classpath.push(&classpath);
        let mut command = Command::new(&java);
        command
            .args(DRIVER_JVM_FLAGS)
            .args(jit.flags())
            .args(jvm_options)
            .arg("-cp")
            .arg(full_classpath)
            .arg(CURATOR_DRIVER_CLASS)
            .args(args);
        Self::launch(command, "curator-driver")
    }

    /// Spawns `command` as a line-driven helper: stdin and stdout piped, stderr to a log file named
    /// after `name` (quoted in errors). Used for Curator's JVM and for kazoo scripts
    /// ([`CuratorProcess::spawn_kazoo`]).
    pub(crate) fn launch(mut command: Command, name: &str) -> Result<CuratorProcess> {
        let log_dir = tempfile::Builder::new()
            .prefix(&format!("zk-recipes-{name}-"))
            .tempdir()
            .map_err(|err| TestingError::io("creating a temp dir for the driver's log", err))?;
        let log_path = log_dir.path().join(format!("{name}.log"));
        let log = std::fs::File::create(&log_path)
            .map_err(|err| TestingError::io(format!("creating {}", log_path.display()), err))?;
        let program = command.get_program().to_owned();
        let mut child =
            command.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(log).spawn().map_err(|err| {
                TestingError::io(format!("spawning {}", Path::new(&program).display()), err)
            })?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        let (sender, lines) = mpsc::unbounded_channel();
        if let Some(stdout) = stdout {
            let spawned =
                std::thread::Builder::new().name("curator-driver-stdout".to_owned()).spawn(move || {
                    for line in BufReader::new(stdout).lines() {
                        let Ok(line) = line else { break };
                        if sender.send(line).is_err() {
                            break;
                        }
                    }
                });
            if let Err(err) = spawned {
                let _ = child.kill();
                let _ = child.wait();
                return Err(TestingError::io("starting the driver's stdout reader thread", err));
            }
        }
        Ok(CuratorProcess { child, stdin, lines, log_path, exit_status: None, _log_dir: log_dir })
    }

    /// The JVM's process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The file the driver's stderr goes to.
    pub fn log_path(&self) -> &Path {
        &self.log_path
    }

    /// The last `lines` lines of the driver's stderr.
    pub fn log_tail(&self, lines: usize) -> String {
        log_tail(&self.log_path, 0, lines)
    }

    /// The next stdout line, `Ok(None)` once stdout is closed (the driver exited).
    ///
    /// # Errors
    /// [`TestingError::Timeout`] (quoting the driver's stderr) if no line comes within `timeout`.
    ///
    /// # Cancel safety
    /// Cancel safe: no line is lost.
    pub async fn next_line(&mut self, timeout: Duration) -> Result<Option<String>> {
        match tokio::time::timeout(timeout, self.lines.recv()).await {
            Ok(line) => Ok(line),
            Err(_) => Err(self.timeout_error("waiting for a line from the Curator driver", timeout)),
        }
    }

    /// Reads stdout until a line starting with `prefix` and returns the rest of that line (after
    /// the prefix, with surrounding whitespace trimmed); earlier lines are discarded (see
    /// [`lines_until`](Self::lines_until) to keep them).
    ///
    /// # Errors
    /// As [`lines_until`](Self::lines_until).
    ///
    /// # Cancel safety
    /// Not cancel safe: lines read before the cancellation are lost.
    pub async fn expect_line(&mut self, prefix: &str, timeout: Duration) -> Result<String> {
        let (_, line) = self.lines_until(prefix, timeout).await?;
        Ok(line[prefix.len()..].trim().to_owned())
    }

    /// Reads stdout until a line starting with `prefix`; returns the lines before it and that
    /// (whole) line.
    ///
    /// # Errors
    /// [`TestingError::Timeout`] if no such line comes within `timeout`; [`TestingError::Io`]
    /// if the driver prints `ERROR …` or exits first. Every error quotes the driver's stderr.
    ///
    /// # Cancel safety
    /// Not cancel safe: lines read before the cancellation are lost.
    pub async fn lines_until(&mut self, prefix: &str, timeout: Duration) -> Result<(Vec<String>, String)> {
        let deadline = Instant::now() + timeout;
        let mut before = Vec::new();
        loop {
            let remaining = deadline.saturating_duration_since(Instant::now());
            let line = match tokio::time::timeout(remaining, self.lines.recv()).await {
                Ok(Some(line)) => line,
                Ok(None) => {
                    return Err(self.failure(
                        &format!("the Curator driver exited before printing `{prefix}`"),
                        std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "stdout closed"),
                    ))
                }
                Err(_) => {
                    return Err(self
                        .timeout_error(&format!("waiting for `{prefix}` from the Curator driver"), timeout))
                }
            };
            if line.starts_with(prefix) {
                return Ok((before, line));
            }
            if let Some(message) = line.strip_prefix("ERROR ") {
                return Err(self.failure(
                    &format!("the Curator driver failed while we waited for `{prefix}`"),
                    std::io::Error::other(message.to_owned()),
                ));
            }
            before.push(line);
        }
    }

    /// Writes `line` and a newline to the driver's stdin.
    ///
    /// # Errors
    /// [`TestingError::Io`] if stdin is closed or the write fails (the driver exited);
    /// [`TestingError::Timeout`] if the write blocks for 10 s (the JVM is frozen).
    ///
    /// # Cancel safety
    /// Not cancel safe: a cancelled write may still be delivered, and stdin is then closed.
    pub async fn send_line(&mut self, line: &str) -> Result<()> {
        const WRITE_TIMEOUT: Duration = Duration::from_secs(10);
        let Some(mut stdin) = self.stdin.take() else {
            return Err(self.failure(
                "writing to the Curator driver",
                std::io::Error::new(std::io::ErrorKind::BrokenPipe, "stdin is closed"),
            ));
        };
        let bytes = format!("{line}\n").into_bytes();
        let write = tokio::task::spawn_blocking(move || {
            let outcome = stdin.write_all(&bytes).and_then(|()| stdin.flush());
            (stdin, outcome)
        });
        match tokio::time::timeout(WRITE_TIMEOUT, write).await {
            Ok(Ok((stdin, Ok(())))) => {
                self.stdin = Some(stdin);
                Ok(())
            }
            Ok(Ok((_, Err(err)))) => {
                Err(self.failure(&format!("writing `{line}` to the Curator driver"), err))
            }
            Ok(Err(join)) => Err(self.failure("writing to the Curator driver", std::io::Error::other(join))),
            Err(_) => {
                Err(self.timeout_error(&format!("writing `{line}` to the Curator driver"), WRITE_TIMEOUT))
            }
        }
    }

    /// Closes the driver's stdin: it closes its Curator clients (their sessions and ephemeral
    /// nodes end at once) and exits with status 3, unless it finished first.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// Waits until the JVM exits and returns its status.
    ///
    /// # Errors
    /// [`TestingError::Timeout`] if it still runs after `timeout` (it is left running);
    /// [`TestingError::Io`] if its status cannot be read.
    ///
    /// # Cancel safety
    /// Cancel safe: it only polls the JVM's status; the JVM runs on.
    pub async fn wait(&mut self, timeout: Duration) -> Result<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.try_wait()? {
                return Ok(status);
            }
            if Instant::now() >= deadline {
                return Err(self.timeout_error("waiting for the Curator driver to exit", timeout));
            }
            tokio::time::sleep(EXIT_POLL).await;
        }
    }

    /// The exit status if the JVM has exited, without waiting.
    ///
    /// # Errors
    /// [`TestingError::Io`] if its status cannot be read.
    pub fn try_wait(&mut self) -> Result<Option<ExitStatus>> {
        if self.exit_status.is_none() {
            self.exit_status = self.child.try_wait().map_err(|err| {
                TestingError::io(format!("waiting for the Curator driver {}", self.child.id()), err)
            })?;
        }
        Ok(self.exit_status)
    }

    /// SIGKILLs the JVM (a crash: its sessions are not closed, so its ephemeral nodes live until
    /// the server expires them) and reaps it. Killing an exited driver does nothing.
    ///
    /// # Errors
    /// [`TestingError::Io`] if the signal or the reaping fails.
    pub fn kill(&mut self) -> Result<()> {
        if self.try_wait()?.is_some() {
            return Ok(());
        }
        let pid = self.child.id();
        self.child
            .kill()
            .map_err(|err| TestingError::io(format!("SIGKILLing the Curator driver {pid}"), err))?;
        let status = self
            .child
            .wait()
            .map_err(|err| TestingError::io(format!("reaping the Curator driver {pid}"), err))?;
        self.exit_status = Some(status);
        Ok(())
    }

    fn failure(&self, context: &str, source: std::io::Error) -> TestingError {
        TestingError::Io {
            context: format!(
                "{context} (pid {}); last stderr lines:\n{}",
                self.child.id(),
                self.log_tail(LOG_TAIL_LINES)
            ),
            source,
        }
    }

    fn timeout_error(&self, what: &str, timeout: Duration) -> TestingError {
        TestingError::Timeout {
            what: format!(
                "{what} (pid {}); last stderr lines:\n{}",
                self.child.id(),
                self.log_tail(LOG_TAIL_LINES)
            ),
            timeout,
        }
    }
}

impl Drop for CuratorProcess {
    fn drop(&mut self) {
        self.stdin = None;
        let _ = self.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_sources_declare_the_main_class_and_one_class_each() {
        let (package, class) = CURATOR_DRIVER_CLASS.rsplit_once('.').expect("qualified name");
        let (_, main) = CURATOR_DRIVER_SOURCES[0];
        assert!(main.contains(&format!("public final class {class} ")));
        for (name, text) in CURATOR_DRIVER_SOURCES {
            assert!(text.contains(&format!("package {package};")), "{name} is in the driver's package");
            let stem = name.strip_suffix(".java").expect("a .java file");
            assert!(text.contains(&format!("final class {stem} ")), "{name} declares {stem}");
            if *name != "CuratorDriver.java" {
                assert!(main.contains(&format!("{stem}::run")), "{stem} is listed in EXTENSIONS");
            }
        }
        for (name, text) in PAYLOAD_STAND_IN_SOURCES {
            assert!(
                !text.contains(&format!("package {package};")),
                "{name} is a stand-in in its own package"
            );
            let stem = name.strip_suffix(".java").expect("a .java file");
            assert!(text.contains(&format!("public final class {stem} ")), "{name} declares {stem}");
        }
    }

    #[test]
    fn public_types_are_send_and_sync() {
        fn assert_send_sync<T: Send + Sync>() {}
        assert_send_sync::<CuratorProcess>();
    }
}
