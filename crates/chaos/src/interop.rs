//! The other side of the busy-session rows besides our own contenders: a Java client of
//! ZooKeeper's own lock recipe (`crates/chaos/java/ZkRecipeChaos.java`, compiled here against Debian's
//! ZooKeeper jars) and kazoo 2.11 (`crates/chaos/python/kazoo_chaos.py`, on the kazoo virtualenv's
//! Python). Both are OS processes driven like a Rust contender: `stop` on stdin ends them (exit 0),
//! EOF kills them at once. The sources are built into `zkr-chaos` and written to the run's output
//! directory, so a run uses the contenders it was built with.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use tokio::process::Command;
use zk_recipes_testing::{curator_classpath, java_binary, kazoo_python, zookeeper_classpath};

/// The ZooKeeper-recipe contender's source and main class.
const ZOOKEEPER_RECIPE_SOURCE: &str = include_str!("../java/ZkRecipeChaos.java");
const ZOOKEEPER_RECIPE_CLASS: &str = "zkrecipes.chaos.ZkRecipeChaos";
/// The Curator mix contender's source and main class (`crate::counters`, `crate::barriers`).
const CURATOR_COUNTER_SOURCE: &str = include_str!("../java/CuratorMixChaos.java");
const CURATOR_COUNTER_CLASS: &str = "zkrecipes.chaos.CuratorMixChaos";
/// The kazoo contender's source.
const KAZOO_SOURCE: &str = include_str!("../python/kazoo_chaos.py");

/// JVM flags of the ZooKeeper-recipe contender: small heap, quick start, the client's INFO logs
/// off.
const JVM_FLAGS: &[&str] = &[
    "-Xmx96m",
    "-XX:+UseSerialGC",
    "-XX:-UsePerfData",
    "-XX:TieredStopAtLevel=1",
    "-XX:+ExitOnOutOfMemoryError",
    "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
];

/// What both contenders take after `contend`.
#[derive(Debug, Clone)]
pub struct InteropArgs<'a> {
    pub connect: &'a str,
    pub recipe: &'a str,
    pub clients: usize,
    pub tag: &'a str,
    pub log: &'a Path,
    pub locking: bool,
    pub lock_root: &'a str,
    pub check_root: &'a str,
    pub hold_ms: u128,
    pub session_timeout_ms: u128,
}

impl InteropArgs<'_> {
    fn to_vec(&self) -> Vec<String> {
        vec![
            "contend".to_owned(),
            self.connect.to_owned(),
            self.recipe.to_owned(),
            self.clients.to_string(),
            self.tag.to_owned(),
            self.log.display().to_string(),
            if self.locking { "on" } else { "off" }.to_owned(),
            self.lock_root.to_owned(),
            self.check_root.to_owned(),
            self.hold_ms.to_string(),
            self.session_timeout_ms.to_string(),
        ]
    }
}

/// How to start the other side's contenders of this run.
#[derive(Debug, Default)]
pub struct Launchers {
    /// `java` and the classpath (our classes first).
    java: Option<(PathBuf, String)>,
    /// kazoo's Python and the script.
    kazoo: Option<(PathBuf, PathBuf)>,
    /// `java` and the Curator counter contender's classpath (its classes first).
    curator_counters: Option<(PathBuf, String)>,
}

impl Launchers {
    /// Compiles the ZooKeeper-recipe contender into `out_dir/java` (when `zookeeper_recipe`) and
    /// finds kazoo's Python, writing the script to `out_dir` (when `kazoo`).
    ///
    /// # Errors
    /// A missing `java`, `javac`, ZooKeeper jar or kazoo (with what to install), or `javac`'s
    /// diagnostics.
    pub fn prepare(out_dir: &Path, zookeeper_recipe: bool, kazoo: bool) -> Result<Launchers, String> {
        let mut launchers = Launchers::default();
        if zookeeper_recipe {
            let classpath = zookeeper_classpath().map_err(|err| format!("ZooKeeper's jars: {err}"))?;
            let java = java_binary().map_err(|err| err.to_string())?;
            let classes = compile(out_dir, "ZkRecipeChaos", ZOOKEEPER_RECIPE_SOURCE, &java, &classpath)?;
            launchers.java = Some((java, format!("{}:{classpath}", classes.display())));
        }
        if kazoo {
            let python = kazoo_python().map_err(|err| err.to_string())?;
            let script = out_dir.join("kazoo_chaos.py");
            std::fs::write(&script, KAZOO_SOURCE)
                .map_err(|err| format!("writing {}: {err}", script.display()))?;
            launchers.kazoo = Some((python, script));
        }
        Ok(launchers)
    }

    /// Compiles the Curator mix contender (counters, barriers) into `out_dir/curator-counters/java` against Curator's jars.
    ///
    /// # Errors
    /// A missing `java`, `javac` or Curator jar, or `javac`'s diagnostics.
    pub fn prepare_curator_counters(&mut self, out_dir: &Path) -> Result<(), String> {
        let classpath = curator_classpath().map_err(|err| format!("Curator's jars: {err}"))?;
        let java = java_binary().map_err(|err| err.to_string())?;
        let classes = compile(
            &out_dir.join("curator-counters"),
            "CuratorMixChaos",
            CURATOR_COUNTER_SOURCE,
            &java,
            &classpath,
        )?;
        self.curator_counters = Some((java, format!("{}:{classpath}", classes.display())));
        Ok(())
    }

    /// The Curator mix contender's command (stdin piped): `contend-counters ...` or
    /// `contend-barrier ...` (see `crates/chaos/java/CuratorMixChaos.java`).
    pub fn curator_counters(&self, args: &[String]) -> Result<Command, String> {
        let (java, classpath) =
            self.curator_counters.as_ref().ok_or("the Curator mix contender was not prepared")?;
        let mut command = Command::new(java);
        command.args(JVM_FLAGS).arg("-cp").arg(classpath).arg(CURATOR_COUNTER_CLASS).args(args);
        command.stdin(Stdio::piped()).kill_on_drop(true);
        Ok(command)
    }

    /// The ZooKeeper-recipe contender's command (stdin piped, stdout and stderr as given).
    pub fn zookeeper_recipe(&self, args: &InteropArgs<'_>) -> Result<Command, String> {
        let (java, classpath) =
            self.java.as_ref().ok_or("the ZooKeeper-recipe contender was not prepared")?;
        let mut command = Command::new(java);
        command.args(JVM_FLAGS).arg("-cp").arg(classpath).arg(ZOOKEEPER_RECIPE_CLASS).args(args.to_vec());
        command.stdin(Stdio::piped()).kill_on_drop(true);
        Ok(command)
    }

    /// The kazoo contender's command (stdin piped).
    pub fn kazoo(&self, args: &InteropArgs<'_>) -> Result<Command, String> {
        let (python, script) = self.kazoo.as_ref().ok_or("the kazoo contender was not prepared")?;
        let mut command = Command::new(python);
        command.arg("-u").arg(script).args(args.to_vec());
        command.stdin(Stdio::piped()).kill_on_drop(true);
        Ok(command)
    }
}

/// Writes `source` (class `name`) to `out_dir/java/src` and compiles it into `out_dir/java/classes`.
fn compile(out_dir: &Path, name: &str, text: &str, java: &Path, classpath: &str) -> Result<PathBuf, String> {
    let sources = out_dir.join("java").join("src");
    let classes = out_dir.join("java").join("classes");
    for dir in [&sources, &classes] {
        std::fs::create_dir_all(dir).map_err(|err| format!("creating {}: {err}", dir.display()))?;
    }
    let source = sources.join(format!("{name}.java"));
    std::fs::write(&source, text).map_err(|err| format!("writing {}: {err}", source.display()))?;
    let javac = javac(java)?;
    let output = std::process::Command::new(&javac)
        .args(["-nowarn", "-encoding", "UTF-8", "-cp", classpath, "-d"])
        .arg(&classes)
        .arg(&source)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("running {}: {err}", javac.display()))?;
    if !output.status.success() {
        return Err(format!(
            "compiling {} with {} ({}): {}",
            source.display(),
            javac.display(),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    Ok(classes)
}

/// `$JAVAC`, else `javac` next to `java` (also after resolving its symlinks), else on `PATH`.
fn javac(java: &Path) -> Result<PathBuf, String> {
    let mut candidates: Vec<PathBuf> =
        std::env::var_os("JAVAC").filter(|value| !value.is_empty()).map(PathBuf::from).into_iter().collect();
    candidates.extend(java.parent().map(|dir| dir.join("javac")));
    candidates
        .extend(std::fs::canonicalize(java).ok().and_then(|java| java.parent().map(|dir| dir.join("javac"))));
    if let Some(path) = std::env::var_os("PATH") {
        candidates.extend(std::env::split_paths(&path).map(|dir| dir.join("javac")));
    }
    candidates.into_iter().find(|candidate| candidate.is_file()).ok_or_else(|| {
        "javac not found ($JAVAC, next to java, on PATH): install a JDK (bash scripts/install-deps.sh)"
            .to_owned()
    })
}
