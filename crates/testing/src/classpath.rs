//! Where the ZooKeeper (and Curator) jars and the `java` binary are.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::{Result, TestingError};

/// Environment variable that replaces the ZooKeeper server classpath (`:`-separated, used as is).
pub const ZOOKEEPER_CLASSPATH_ENV: &str = "ZOOKEEPER_CLASSPATH";

/// Environment variable that replaces the whole Curator interop classpath (used as is).
pub const CURATOR_CLASSPATH_ENV: &str = "CURATOR_CLASSPATH";

/// Environment variable naming the `java` binary to run.
pub const JAVA_ENV: &str = "JAVA";

/// Where Debian's `zookeeper`, `libcurator-recipes-java` and `libcurator-discovery-java` packages
/// (and the Jackson 2 jars the latter depends on) put their jars.
pub const DEBIAN_JAR_DIR: &str = "/usr/share/java";

/// Jars the server needs, besides the slf4j binding (see [`zookeeper_classpath`]).
const SERVER_JARS: &[&str] = &[
    "zookeeper.jar",
    "zookeeper-jute.jar",
    "slf4j-api.jar",
    "metrics-core.jar",
    "commons-cli.jar",
    "snappy-java.jar",
    "netty-buffer.jar",
    "netty-common.jar",
    "netty-handler.jar",
    "netty-transport.jar",
    "netty-resolver.jar",
    "netty-codec.jar",
    "netty-transport-native-epoll.jar",
    "netty-transport-native-unix-common.jar",
];

/// slf4j bindings in order of preference: the simple one logs to the server's log file (its
/// tail goes into start-up errors); the no-op one is a fallback.
const SLF4J_BINDINGS: &[&str] = &["slf4j-simple.jar", "slf4j-nop.jar"];

/// Jars a Curator client needs on top of the ZooKeeper ones: the recipes, and service discovery
/// (`curator-x-discovery`, whose `JsonInstanceSerializer` is Jackson 2: `jackson-databind` and the
/// `jackson-core` and `jackson-annotations` it needs, as the discovery jar's manifest and POM name).
const CURATOR_JARS: &[&str] = &[
    "curator-recipes.jar",
    "curator-framework.jar",
    "curator-client.jar",
    "guava.jar",
    "curator-x-discovery.jar",
    "jackson-databind.jar",
    "jackson-core.jar",
    "jackson-annotations.jar",
];

/// Jars added to the Curator classpath when present.
const CURATOR_OPTIONAL_JARS: &[&str] = &["failureaccess.jar"];

/// The classpath that runs a ZooKeeper server.
///
/// `$ZOOKEEPER_CLASSPATH` if set (taken as is), otherwise these jars from `/usr/share/java`:
/// `zookeeper.jar zookeeper-jute.jar slf4j-api.jar slf4j-simple.jar metrics-core.jar
/// commons-cli.jar snappy-java.jar netty-{buffer,common,handler,transport,resolver,codec}.jar
/// netty-transport-native-epoll.jar netty-transport-native-unix-common.jar`.
/// The slf4j binding is `slf4j-simple.jar` (the server log goes to a file in the server's temp
/// dir), or `slf4j-nop.jar` when only that one is installed.
///
/// # Errors
/// [`TestingError::MissingJar`] naming the first missing jar.
///
/// # Example
/// ```no_run
/// let classpath = zk_recipes_testing::zookeeper_classpath()?;
/// assert!(classpath.contains("zookeeper"));
/// # Ok::<(), zk_recipes_testing::TestingError>(())
/// ```
pub fn zookeeper_classpath() -> Result<String> {
    if let Some(classpath) = non_empty_env(ZOOKEEPER_CLASSPATH_ENV) {
        return Ok(classpath);
    }
    zookeeper_classpath_in(Path::new(DEBIAN_JAR_DIR))
}

/// The classpath for a Java Curator client (interop tests): the ZooKeeper server classpath plus
/// `curator-recipes.jar curator-framework.jar curator-client.jar guava.jar
/// curator-x-discovery.jar jackson-databind.jar jackson-core.jar jackson-annotations.jar` (and
/// `failureaccess.jar` when present) from `/usr/share/java`: Debian's `libcurator-recipes-java`
/// and `libcurator-discovery-java`, which `scripts/install-deps.sh` installs.
///
/// `$CURATOR_CLASSPATH`, if set, replaces the whole result; it must then hold Curator 5.x's
/// client, framework, recipes and `curator-x-discovery` jars, guava and Jackson 2 (the Curator
/// driver is compiled against all of them).
///
/// # Errors
/// [`TestingError::MissingJar`] naming the first missing jar.
///
/// # Example
/// ```no_run
/// let classpath = zk_recipes_testing::curator_classpath()?;
/// assert!(classpath.contains("curator-recipes"));
/// # Ok::<(), zk_recipes_testing::TestingError>(())
/// ```
pub fn curator_classpath() -> Result<String> {
    if let Some(classpath) = non_empty_env(CURATOR_CLASSPATH_ENV) {
        return Ok(classpath);
    }
    let zookeeper = zookeeper_classpath()?;
    let curator = curator_jars_in(Path::new(DEBIAN_JAR_DIR))?;
    Ok(format!("{zookeeper}:{curator}"))
}

/// The `java` binary: `$JAVA` if set, else `java` on `PATH`, else `$JAVA_HOME/bin/java`.
///
/// # Errors
/// [`TestingError::JavaNotFound`] listing what was tried.
///
/// # Example
/// ```no_run
/// let java = zk_recipes_testing::java_binary()?;
/// println!("using {}", java.display());
/// # Ok::<(), zk_recipes_testing::TestingError>(())
/// ```
pub fn java_binary() -> Result<PathBuf> {
    let mut tried = Vec::new();
    if let Some(java) = std::env::var_os(JAVA_ENV).filter(|value| !value.is_empty()) {
        let java = PathBuf::from(java);
        if is_executable(&java) {
            return Ok(java);
        }
        tried.push(format!("$JAVA={}", java.display()));
    }
    if let Some(path) = std::env::var_os("PATH") {
        for dir in std::env::split_paths(&path) {
            let candidate = dir.join("java");
            if is_executable(&candidate) {
                return Ok(candidate);
            }
        }
        tried.push("java on PATH".to_owned());
    }
    if let Some(home) = std::env::var_os("JAVA_HOME") {
        let candidate = PathBuf::from(home).join("bin").join("java");
        if is_executable(&candidate) {
            return Ok(candidate);
        }
        tried.push(format!("{}", candidate.display()));
    }
    Err(TestingError::JavaNotFound { tried: tried.join(", ") })
}

pub(crate) fn zookeeper_classpath_in(dir: &Path) -> Result<String> {
    let mut jars = Vec::with_capacity(SERVER_JARS.len() + 1);
    for jar in SERVER_JARS {
        jars.push(require(dir, jar, "ZooKeeper server")?);
    }
    let binding = SLF4J_BINDINGS.iter().map(|jar| dir.join(jar)).find(|path| path.is_file());
    match binding {
        Some(binding) => jars.push(binding),
        None => {
            return Err(TestingError::MissingJar {
                path: dir.join(SLF4J_BINDINGS[0]),
                what: "ZooKeeper server",
            })
        }
    }
    Ok(join(&jars))
}

fn curator_jars_in(dir: &Path) -> Result<String> {
    let mut jars = Vec::with_capacity(CURATOR_JARS.len() + CURATOR_OPTIONAL_JARS.len());
    for jar in CURATOR_JARS {
        jars.push(require(dir, jar, "Curator client")?);
    }
    jars.extend(CURATOR_OPTIONAL_JARS.iter().map(|jar| dir.join(jar)).filter(|path| path.is_file()));
    Ok(join(&jars))
}

fn require(dir: &Path, jar: &str, what: &'static str) -> Result<PathBuf> {
    let path = dir.join(jar);
    if path.is_file() {
        Ok(path)
    } else {
        Err(TestingError::MissingJar { path, what })
    }
}

fn join(jars: &[PathBuf]) -> String {
    jars.iter().map(|jar| jar.display().to_string()).collect::<Vec<_>>().join(":")
}

fn non_empty_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|value| !value.trim().is_empty())
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path)
        .map(|meta| meta.is_file() && meta.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// How a JVM started by this crate compiles its hot code.
///
/// ```no_run
/// # async fn demo() -> zk_recipes_testing::Result<()> {
/// use zk_recipes_testing::{Jit, TestingServer};
///
/// // A benchmark measures the server as it runs in production, not as it starts.
/// let server = TestingServer::builder().jit(Jit::Full).start().await?;
/// # Ok(()) }
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Jit {
    /// Only the quick compiler (`-XX:TieredStopAtLevel=1`): the JVM starts sooner and runs
    /// slower. The default, for tests.
    #[default]
    QuickStart,
    /// The JVM's full tiered compilation, as a production JVM runs. For benchmarks.
    Full,
}

impl Jit {
    pub(crate) fn flags(self) -> &'static [&'static str] {
        match self {
            Jit::QuickStart => &["-XX:TieredStopAtLevel=1"],
            Jit::Full => &[],
        }
    }
}

/// The JVM arguments shared by every server we start (before `-cp`).
pub(crate) fn jvm_flags(
    container_check_interval_ms: u128,
    jit: Jit,
    extended_types: bool,
    heap_mib: u32,
) -> Vec<OsString> {
    let jit_flags = jit.flags().iter().map(|flag| (*flag).to_owned());
    [format!("-Xmx{heap_mib}m"), "-XX:+UseSerialGC".to_owned(), "-XX:-UsePerfData".to_owned()]
        .into_iter()
        .chain(jit_flags)
        .chain([
            "-XX:+ExitOnOutOfMemoryError".to_owned(),
            "-Djava.net.preferIPv4Stack=true".to_owned(),
            "-Dzookeeper.admin.enableServer=false".to_owned(),
            format!("-Dzookeeper.extendedTypesEnabled={extended_types}"),
            "-Dzookeeper.preAllocSize=1024".to_owned(),
            "-Dzookeeper.jmx.log4j.disable=true".to_owned(),
            format!("-Dznode.container.checkIntervalMs={container_check_interval_ms}"),
            "-Dorg.slf4j.simpleLogger.showDateTime=true".to_owned(),
            "-Dorg.slf4j.simpleLogger.dateTimeFormat=HH:mm:ss.SSS".to_owned(),
        ])
        .map(OsString::from)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_jar_is_named_with_the_install_script() {
        let empty = tempfile::tempdir().expect("temp dir");
        let err = zookeeper_classpath_in(empty.path()).expect_err("no jars in an empty dir");
        let message = err.to_string();
        assert!(message.contains("zookeeper.jar"), "{message}");
        assert!(message.contains("scripts/install-deps.sh"), "{message}");
    }

    #[test]
    fn classpath_lists_every_jar_with_a_binding() {
        let dir = tempfile::tempdir().expect("temp dir");
        for jar in SERVER_JARS.iter().chain(["slf4j-nop.jar"].iter()) {
            std::fs::write(dir.path().join(jar), b"").expect("write jar");
        }
        let classpath = zookeeper_classpath_in(dir.path()).expect("complete dir");
        assert_eq!(classpath.split(':').count(), SERVER_JARS.len() + 1);
        assert!(classpath.ends_with("slf4j-nop.jar"));

        std::fs::write(dir.path().join("slf4j-simple.jar"), b"").expect("write jar");
        let classpath = zookeeper_classpath_in(dir.path()).expect("complete dir");
        assert!(classpath.ends_with("slf4j-simple.jar"), "simple is preferred: {classpath}");
    }

    #[test]
    fn curator_jars_include_discovery_and_jackson() {
        let dir = tempfile::tempdir().expect("temp dir");
        for jar in CURATOR_JARS.iter().filter(|jar| **jar != "curator-x-discovery.jar") {
            std::fs::write(dir.path().join(jar), b"").expect("write jar");
        }
        let err = curator_jars_in(dir.path()).expect_err("no discovery jar");
        assert!(err.to_string().contains("curator-x-discovery.jar"), "{err}");

        std::fs::write(dir.path().join("curator-x-discovery.jar"), b"").expect("write jar");
        let classpath = curator_jars_in(dir.path()).expect("complete dir");
        for jar in
            ["curator-x-discovery.jar", "jackson-databind.jar", "jackson-core.jar", "jackson-annotations.jar"]
        {
            assert!(classpath.split(':').any(|path| path.ends_with(jar)), "{jar} in {classpath}");
        }
    }
}
