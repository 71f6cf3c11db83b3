#!/usr/bin/env bash
# Installs what zk-recipes' tests need to run real ZooKeeper servers and Curator interop tests:
# Debian's `zookeeper` (3.8) and `libcurator-recipes-java` (5.4) packages and a JDK (java + javac),
# the `openssl` command line (the TLS test server's throwaway CA and certificates), and kazoo 2.11
# from PyPI in a virtualenv (/opt/zk-recipes-venv, or ZK_RECIPES_VENV).
#
# Idempotent and fast: when everything is present it makes no apt call. Runs apt as root, or
# through sudo when not root. Fails loudly (non-zero exit) if anything is still missing afterwards.
#
# ZOOKEEPER_CLASSPATH, if set, replaces the ZooKeeper server jars (as in zk-recipes-testing), so
# they are not checked. JAVA, if set, names the java binary to check; OPENSSL the openssl binary.
set -euo pipefail

JAR_DIR=/usr/share/java
ZOOKEEPER_JARS=(
  zookeeper.jar zookeeper-jute.jar slf4j-api.jar metrics-core.jar commons-cli.jar snappy-java.jar
  netty-buffer.jar netty-common.jar netty-handler.jar netty-transport.jar netty-resolver.jar
  netty-codec.jar netty-transport-native-epoll.jar netty-transport-native-unix-common.jar
)
# One of these slf4j bindings (zk-recipes-testing prefers the first).
SLF4J_BINDINGS=(slf4j-simple.jar slf4j-nop.jar)
CURATOR_JARS=(curator-recipes.jar curator-framework.jar curator-client.jar guava.jar)
PACKAGES=(zookeeper libcurator-recipes-java default-jdk-headless openssl)

log() { printf 'install-deps: %s\n' "$*"; }
die() { printf 'install-deps: ERROR: %s\n' "$*" >&2; exit 1; }

java_bin() {
  if [[ -n "${JAVA:-}" ]]; then printf '%s\n' "$JAVA"; else printf 'java\n'; fi
}

# Prints one line per missing item; prints nothing when everything is there.
missing() {
  local jar found
  if [[ -n "${ZOOKEEPER_CLASSPATH:-}" ]]; then
    :
  else
    for jar in "${ZOOKEEPER_JARS[@]}"; do
      [[ -f "$JAR_DIR/$jar" ]] || printf '%s\n' "$JAR_DIR/$jar"
    done
    found=no
    for jar in "${SLF4J_BINDINGS[@]}"; do
      [[ -f "$JAR_DIR/$jar" ]] && found=yes
    done
    [[ $found == yes ]] || printf '%s\n' "$JAR_DIR/${SLF4J_BINDINGS[0]} (or ${SLF4J_BINDINGS[1]})"
  fi
  for jar in "${CURATOR_JARS[@]}"; do
    [[ -f "$JAR_DIR/$jar" ]] || printf '%s\n' "$JAR_DIR/$jar"
  done
  "$(java_bin)" -version >/dev/null 2>&1 || printf '%s\n' "a working java ($(java_bin) -version)"
  javac -version >/dev/null 2>&1 || printf '%s\n' "a working javac (javac -version)"
  "${OPENSSL:-openssl}" version >/dev/null 2>&1 || printf '%s\n' "a working openssl (${OPENSSL:-openssl} version)"
}

as_root() {
  if [[ $(id -u) -eq 0 ]]; then
    "$@"
  elif command -v sudo >/dev/null 2>&1; then
    sudo "$@"
  else
    die "not root and no sudo: cannot run '$*'"
  fi
}

if [[ -n "${ZOOKEEPER_CLASSPATH:-}" ]]; then
  log "ZOOKEEPER_CLASSPATH is set; not checking the ZooKeeper server jars"
fi

mapfile -t absent < <(missing)
if [[ ${#absent[@]} -eq 0 ]]; then
  log "everything is present; nothing to do"
else
  log "missing:"
  printf '  %s\n' "${absent[@]}"
  command -v apt-get >/dev/null 2>&1 || die "apt-get not found; install ${PACKAGES[*]} (or equivalents) by hand"
  log "apt-get update"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
  log "apt-get install -y ${PACKAGES[*]}"
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${PACKAGES[@]}"

  mapfile -t absent < <(missing)
  if [[ ${#absent[@]} -ne 0 ]]; then
    printf 'install-deps: ERROR: still missing after installing %s:\n' "${PACKAGES[*]}" >&2
    printf '  %s\n' "${absent[@]}" >&2
    exit 1
  fi
  log "installed ${PACKAGES[*]}"
fi

# kazoo 2.11 from PyPI, in a virtualenv (Debian's python3-kazoo is 2.8, older than the read-write
# lock fix kazoo#649), for the kazoo interop tests (tests/interop_layouts.rs, tests/python/).
VENV=${ZK_RECIPES_VENV:-/opt/zk-recipes-venv}
KAZOO_SPEC='kazoo==2.11.*'
kazoo_ok() {
  "$VENV/bin/python3" -c 'import kazoo.version, sys; sys.exit(0 if kazoo.version.__version__.startswith("2.11.") else 1)' \
    >/dev/null 2>&1
}
if kazoo_ok; then
  log "kazoo 2.11 is present in $VENV"
else
  if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
    command -v apt-get >/dev/null 2>&1 || die "python3's venv module is missing; install python3-venv by hand"
    log "apt-get install -y python3-venv"
    as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
    as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-venv
  fi
  log "making the virtualenv $VENV with $KAZOO_SPEC"
  as_root python3 -m venv "$VENV"
  as_root "$VENV/bin/pip" install --quiet --disable-pip-version-check "$KAZOO_SPEC"
  kazoo_ok || die "kazoo 2.11 still does not import from $VENV"
  log "installed $KAZOO_SPEC into $VENV"
fi

log "$("$(java_bin)" -version 2>&1 | head -n 1)"
log "$(javac -version 2>&1 | head -n 1)"
