#!/bin/sh
# Runs the zk-recipes tour (examples/tour.rs): every recipe family in about a minute.
#
#   ZK_CONNECT=host:port scripts/demo.sh   against your ZooKeeper: needs only cargo; installs
#                                          nothing and writes nothing outside the checkout
#   scripts/demo.sh                        starts an embedded ZooKeeper first, installing what it
#                                          needs if missing (ZooKeeper's jars and a java)
set -eu
cd "$(dirname "$0")/.."
command -v cargo >/dev/null 2>&1 || { echo "error: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
if [ -n "${ZK_CONNECT:-}" ]; then
    echo "== demo: using the ZooKeeper at $ZK_CONNECT"
else
    echo "== demo: checking what an embedded ZooKeeper needs (installs what is missing)"
    sh scripts/install-deps.sh --server-only
fi
echo "== demo: building the tour (the first build takes a few minutes; cargo shows its progress)"
cargo build -p zk-recipes-examples --example tour
echo "== demo: running the tour"
exec cargo run --quiet -p zk-recipes-examples --example tour
