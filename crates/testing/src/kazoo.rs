//! kazoo (the Python ZooKeeper client) on the other side of an interop test: small scripts in this
//! crate's `python/` (embedded at build time, written out once per process), run with the
//! virtualenv `scripts/install-deps.sh` makes, and driven line by line like the Curator driver
//! ([`CuratorProcess`]).

use std::path::PathBuf;
use std::process::Command;

use crate::curator::CuratorProcess;
use crate::error::{Result, TestingError};
use crate::venv::{DEFAULT_VENV, KAZOO_VERSION, VENV_ENV};

/// The kazoo scripts (file name, text), embedded so that a published copy of this crate carries
/// them.
const KAZOO_SCRIPTS: &[(&str, &str)] = &[("kazoo_driver.py", include_str!("../python/kazoo_driver.py"))];

/// Writes `script` (one of [`KAZOO_SCRIPTS`]) to a directory of this process's, once; its path.
fn script_path(script: &str) -> Result<PathBuf> {
    let Some((_, text)) = KAZOO_SCRIPTS.iter().find(|(name, _)| *name == script) else {
        return Err(TestingError::io(
            format!("no kazoo script {script:?} in zk-recipes-testing"),
            std::io::Error::from(std::io::ErrorKind::NotFound),
        ));
    };
    let dir = std::env::temp_dir().join(format!("zk-recipes-kazoo-{}", std::process::id()));
    let path = dir.join(script);
    if !path.is_file() {
        std::fs::create_dir_all(&dir)
            .map_err(|err| TestingError::io(format!("creating {}", dir.display()), err))?;
        // Written aside and renamed: a concurrent caller never runs half a script.
        let staging = dir.join(format!(".{script}.{:?}", std::thread::current().id()));
        std::fs::write(&staging, text)
            .and_then(|()| std::fs::rename(&staging, &path))
            .map_err(|err| TestingError::io(format!("writing {}", path.display()), err))?;
    }
    Ok(path)
}

/// The Python of the kazoo virtualenv, once kazoo imports there at [`KAZOO_VERSION`].
///
/// # Errors
/// [`TestingError::KazooNotFound`] (naming the install command) if the virtualenv's Python is
/// missing, kazoo does not import, or its version is not [`KAZOO_VERSION`].x.
///
/// # Example
/// ```no_run
/// let python = zk_recipes_testing::kazoo_python()?;
/// println!("kazoo runs on {}", python.display());
/// # Ok::<(), zk_recipes_testing::TestingError>(())
/// ```
pub fn kazoo_python() -> Result<PathBuf> {
    let venv = std::env::var_os(VENV_ENV).map_or_else(|| PathBuf::from(DEFAULT_VENV), PathBuf::from);
    let python = venv.join("bin").join("python3");
    let not_found = |found: String| TestingError::KazooNotFound { venv: venv.clone(), found };
    let output = Command::new(&python)
        .args(["-c", "import kazoo.version; print(kazoo.version.__version__)"])
        .output()
        .map_err(|err| not_found(format!("{}: {err}", python.display())))?;
    let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    if !output.status.success() {
        return Err(not_found(String::from_utf8_lossy(&output.stderr).trim().to_owned()));
    }
    if !version.starts_with(&format!("{KAZOO_VERSION}.")) {
        return Err(not_found(format!("kazoo {version}")));
    }
    Ok(python)
}

impl CuratorProcess {
    /// Runs the kazoo script `<script>` (this crate's `python/kazoo_driver.py`) with `args` on the
    /// kazoo virtualenv's Python
    /// ([`kazoo_python`]), driven as the Curator driver is: lines on stdout, commands on stdin,
    /// stderr to a log quoted in errors; SIGKILLed when dropped.
    ///
    /// # Errors
    /// [`TestingError::KazooNotFound`]; [`TestingError::Io`] for an unknown script, or if it cannot
    /// be written out or spawned.
    ///
    /// # Example
    /// ```no_run
    /// # async fn demo(connect: &str) -> Result<(), zk_recipes_testing::TestingError> {
    /// use std::time::Duration;
    /// let mut kazoo = zk_recipes_testing::CuratorProcess::spawn_kazoo("kazoo_driver.py", ["hold", connect, "/app/lock", "k1"])?;
    /// kazoo.expect_line("HELD", Duration::from_secs(30)).await?;
    /// # Ok(()) }
    /// ```
    pub fn spawn_kazoo<I, S>(script: &str, args: I) -> Result<CuratorProcess>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<std::ffi::OsStr>,
    {
        let python = kazoo_python()?;
        let script = script_path(script)?;
        let mut command = Command::new(python);
        command.arg("-u").arg(script).args(args);
        CuratorProcess::launch(command, "kazoo")
    }
}
