#!/usr/bin/env bash
# Runs the zk-recipes tour. Installs what is missing first (ZooKeeper, Java, Curator's jars).
# Uses the ZooKeeper at $ZK_CONNECT, or starts an embedded one when it is unset.
set -euo pipefail
cd "$(dirname "$0")/.."
echo "== demo: checking ZooKeeper, Java and Curator's jars (installs what is missing)"
bash scripts/install-deps.sh
command -v cargo >/dev/null || { echo "error: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
echo "== demo: building the tour (the first build takes a few minutes; cargo shows its progress)"
cargo build -p zk-recipes --example tour
echo "== demo: running the tour"
exec cargo run --quiet -p zk-recipes --example tour
