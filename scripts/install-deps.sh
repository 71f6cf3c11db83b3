#!/bin/sh
# Installs what zk-recipes' tests need to run real ZooKeeper servers and the interop tests:
# Debian's `zookeeper` (3.8), `libcurator-recipes-java` and `libcurator-discovery-java` (5.4, with
# Jackson 2 for curator-x-discovery's JsonInstanceSerializer) packages and a JDK (java + javac),
# the `openssl` command line (the TLS test server's throwaway CA and certificates), iproute2's `ip`
# and `tc` (partitionable clusters: a network namespace per member; they also need root, and
# python3, which the kazoo virtualenv brings, to slow links where the kernel has no netem), and
# kazoo 2.11 from PyPI in a virtualenv.
#
#   sh scripts/install-deps.sh                 everything the tests need
#   sh scripts/install-deps.sh --server-only   only what an embedded ZooKeeper needs (the demo):
#                                              ZooKeeper's jars and a java
#
# Idempotent and fast: when everything is present it makes no apt call and needs no root. What is
# missing is installed with apt-get, as root or through sudo; on a system without apt-get, or
# without root and sudo, it stops with one message naming what to install. Fails loudly (non-zero
# exit) if anything is still missing afterwards. POSIX sh (no bash needed; macOS's /bin/sh is fine).
#
# Overrides (each also read by the testing crate; a given one is used as it is and never installed):
#   ZOOKEEPER_CLASSPATH  the ZooKeeper server's jars (e.g. "$ZOOKEEPER_HOME/lib/*" of a tarball)
#   CURATOR_CLASSPATH    Curator's jars (curator-recipes, -framework, -client, -x-discovery, guava,
#                        jackson-databind, -core, -annotations)
#   JAVA, JAVAC          the java and javac binaries
#   OPENSSL              the openssl binary
#   ZK_RECIPES_VENV      where kazoo's virtualenv lives (default /opt/zk-recipes-venv; a given path
#                        is made without root when its parent is writable, and nothing is written
#                        under /opt)
set -eu

server_only=no
for arg in "$@"; do
  case "$arg" in
    --server-only) server_only=yes ;;
    *) printf 'install-deps: unknown argument %s\n' "$arg" >&2; exit 2 ;;
  esac
done

JAR_DIR=/usr/share/java
ZOOKEEPER_JARS="zookeeper.jar zookeeper-jute.jar slf4j-api.jar metrics-core.jar commons-cli.jar snappy-java.jar
  netty-buffer.jar netty-common.jar netty-handler.jar netty-transport.jar netty-resolver.jar
  netty-codec.jar netty-transport-native-epoll.jar netty-transport-native-unix-common.jar"
CURATOR_JARS="curator-recipes.jar curator-framework.jar curator-client.jar guava.jar"
# curator-x-discovery and the Jackson jars its manifest and Maven POM name (databind needs core),
# each as <jar>:<Debian package>.
DISCOVERY_JARS="curator-x-discovery.jar:libcurator-discovery-java jackson-databind.jar:libjackson2-databind-java
  jackson-core.jar:libjackson2-core-java jackson-annotations.jar:libjackson2-annotations-java"
JAVA_BIN=${JAVA:-java}
JAVAC_BIN=${JAVAC:-javac}
OPENSSL_BIN=${OPENSSL:-openssl}

log() { printf 'install-deps: %s\n' "$*"; }
die() { printf 'install-deps: ERROR: %s\n' "$*" >&2; exit 1; }

# Prints one line per missing item; prints nothing when everything is there.
missing() {
  if [ -z "${ZOOKEEPER_CLASSPATH:-}" ]; then
    for jar in $ZOOKEEPER_JARS; do
      [ -f "$JAR_DIR/$jar" ] || printf '%s\n' "$JAR_DIR/$jar (Debian package zookeeper)"
    done
    # One slf4j binding (zk-recipes-testing prefers the first).
    [ -f "$JAR_DIR/slf4j-simple.jar" ] || [ -f "$JAR_DIR/slf4j-nop.jar" ] \
      || printf '%s\n' "$JAR_DIR/slf4j-simple.jar (or slf4j-nop.jar)"
  fi
  "$JAVA_BIN" -version >/dev/null 2>&1 || printf '%s\n' "a working java ($JAVA_BIN -version)"
  [ "$server_only" = yes ] && return 0
  if [ -z "${CURATOR_CLASSPATH:-}" ]; then
    for jar in $CURATOR_JARS; do
      [ -f "$JAR_DIR/$jar" ] || printf '%s\n' "$JAR_DIR/$jar (Debian package libcurator-recipes-java)"
    done
    for item in $DISCOVERY_JARS; do
      [ -f "$JAR_DIR/${item%%:*}" ] || printf '%s\n' "$JAR_DIR/${item%%:*} (Debian package ${item#*:})"
    done
  fi
  "$JAVAC_BIN" -version >/dev/null 2>&1 || printf '%s\n' "a working javac ($JAVAC_BIN -version)"
  "$OPENSSL_BIN" version >/dev/null 2>&1 || printf '%s\n' "a working openssl ($OPENSSL_BIN version)"
  have_ip || printf '%s\n' "iproute2's ip (Debian package iproute2)"
  return 0
}

# iproute2's `ip`, on PATH or in the sbin directories a non-login shell may lack.
have_ip() {
  command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || [ -x /sbin/ip ]
}

# The Debian packages that provide what `missing` lists (an override given is not installed).
packages() {
  list=""
  [ -n "${ZOOKEEPER_CLASSPATH:-}" ] || list=" zookeeper"
  if [ "$server_only" = yes ]; then
    [ -n "${JAVA:-}" ] || list="$list default-jre-headless"
  else
    if [ -z "${CURATOR_CLASSPATH:-}" ]; then
      list="$list libcurator-recipes-java"
      for item in $DISCOVERY_JARS; do list="$list ${item#*:}"; done
    fi
    [ -n "${JAVA:-}${JAVAC:-}" ] || list="$list default-jdk-headless"
    [ -n "${OPENSSL:-}" ] || list="$list openssl"
    have_ip || list="$list iproute2"
  fi
  printf '%s\n' "$list"
}

# Runs "$@" as root: directly, or through sudo; never prompts.
as_root() {
  if [ "$(id -u)" -eq 0 ]; then
    "$@"
  else
    sudo -n "$@"
  fi
}

can_install() {
  command -v apt-get >/dev/null 2>&1 || return 1
  [ "$(id -u)" -eq 0 ] && return 0
  command -v sudo >/dev/null 2>&1 && sudo -n true >/dev/null 2>&1
}

[ -z "${ZOOKEEPER_CLASSPATH:-}" ] || log "ZOOKEEPER_CLASSPATH is set; not checking the ZooKeeper server jars"
[ "$server_only" = yes ] || [ -z "${CURATOR_CLASSPATH:-}" ] || log "CURATOR_CLASSPATH is set; not checking Curator's jars"

absent=$(missing)
if [ -z "$absent" ]; then
  log "everything is present; nothing to do"
else
  log "missing:"
  printf '%s\n' "$absent" | sed 's/^/  /'
  wanted=$(packages)
  if ! can_install; then
    die "cannot install here (no apt-get, or neither root nor passwordless sudo). Install:$wanted
  (Debian/Ubuntu package names; elsewhere: ZooKeeper 3.8 and a JDK 17, e.g. 'brew install zookeeper openjdk@17',
  then point ZOOKEEPER_CLASSPATH at ZooKeeper's lib/*, CURATOR_CLASSPATH at Curator 5.x's jars (with
  curator-x-discovery, guava and Jackson 2), JAVA/JAVAC at the JDK)"
  fi
  log "apt-get update"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  log "apt-get install -y$wanted"
  # shellcheck disable=SC2086 # a list of package names
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $wanted
  absent=$(missing)
  if [ -n "$absent" ]; then
    printf 'install-deps: ERROR: still missing after installing%s:\n' "$wanted" >&2
    printf '%s\n' "$absent" | sed 's/^/  /' >&2
    exit 1
  fi
  log "installed$wanted"
fi

if [ "$server_only" = no ]; then
  # kazoo 2.11 from PyPI, in a virtualenv (Debian's python3-kazoo is 2.8, older than the
  # read-write lock fix kazoo#649), for the kazoo interop tests (tests/interop_layouts.rs).
  VENV=${ZK_RECIPES_VENV:-/opt/zk-recipes-venv}
  kazoo_ok() {
    "$VENV/bin/python3" -c 'import kazoo.version, sys; sys.exit(0 if kazoo.version.__version__.startswith("2.11.") else 1)' \
      >/dev/null 2>&1
  }
  if kazoo_ok; then
    log "kazoo 2.11 is present in $VENV"
  else
    # A virtualenv of the caller's own needs no root; the default one under /opt does.
    run_venv() { "$@"; }
    if [ -z "${ZK_RECIPES_VENV:-}" ] && [ "$(id -u)" -ne 0 ]; then
      can_install || die "making $VENV needs root; set ZK_RECIPES_VENV to a directory of yours"
      run_venv() { as_root "$@"; }
    fi
    if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
      can_install || die "python3's venv module is missing; install python3-venv (Debian) or a python3 with venv"
      log "apt-get install -y python3-venv"
      as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
      as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
    fi
    log "making the virtualenv $VENV with kazoo 2.11"
    run_venv python3 -m venv "$VENV"
    run_venv "$VENV/bin/pip" install --quiet --disable-pip-version-check 'kazoo==2.11.*'
    kazoo_ok || die "kazoo 2.11 still does not import from $VENV"
    log "installed kazoo 2.11 into $VENV"
  fi
  log "$("$JAVAC_BIN" -version 2>&1 | head -n 1)"
fi
log "$("$JAVA_BIN" -version 2>&1 | head -n 1)"
