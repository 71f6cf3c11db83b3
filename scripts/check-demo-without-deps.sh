#!/usr/bin/env bash
# With ZK_CONNECT set, `scripts/demo.sh` needs only cargo: it installs nothing and writes nothing
# outside the checkout. Checked against a server of its own (examples/zookeeper_server.rs), with
# every installer and runtime the demo must not touch (apt-get, sudo, java, javac, python3, pip)
# replaced on PATH by a trap that records the call, and a stamp file that anything written
# under /opt, /usr or /etc afterwards would be newer than.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/traps"
for tool in apt-get apt sudo java javac python3 pip pip3; do
    printf '#!/bin/sh\necho "%s $*" >> "%s/called"\nexit 1\n' "$tool" "$work" > "$work/traps/$tool"
    chmod +x "$work/traps/$tool"
done
cargo build -q -p zk-recipes-examples --example zookeeper_server --example tour
touch "$work/stamp"
# The server runs while its standard input (a pipe from this script) stays open.
exec 3> >(cargo run -q -p zk-recipes-examples --example zookeeper_server > "$work/server.out")
for _ in $(seq 1 600); do
    grep -q '^ZK_CONNECT=' "$work/server.out" 2>/dev/null && break
    sleep 0.1
done
connect=$(sed -n 's/^ZK_CONNECT=//p' "$work/server.out")
[[ -n "$connect" ]] || { echo "error: the ZooKeeper for the demo did not start" >&2; exit 1; }
echo "== demo with ZK_CONNECT=$connect and no installer or JVM on PATH"
if ! PATH="$work/traps:$PATH" ZK_CONNECT="$connect" sh scripts/demo.sh > "$work/demo.out" 2>&1; then
    cat "$work/demo.out" >&2
    echo "error: the demo failed with ZK_CONNECT set; it called: $(cat "$work/called" 2>/dev/null)" >&2
    exit 1
fi
exec 3>&-
grep -q "The tour is over" "$work/demo.out" || { cat "$work/demo.out"; echo "error: the tour did not finish" >&2; exit 1; }
if [[ -s "$work/called" ]]; then
    echo "error: with ZK_CONNECT set, the demo ran:" >&2
    cat "$work/called" >&2
    exit 1
fi
written=$(find /opt /usr /etc -xdev -newer "$work/stamp" 2>/dev/null | head -n 5 || true)
if [[ -n "$written" ]]; then
    echo "error: the demo wrote outside the checkout:" >&2
    echo "$written" >&2
    exit 1
fi
echo "demo without deps: the tour ran against $connect; nothing installed, nothing written outside the checkout"
