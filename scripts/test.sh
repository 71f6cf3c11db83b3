#!/usr/bin/env bash
# Runs every zk-recipes test against real ZooKeeper servers. Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
bash scripts/install-deps.sh
command -v cargo >/dev/null || { echo "error: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
cargo test --workspace --all-targets --no-fail-fast "$@"
cargo test --workspace --doc "$@"
echo "test suite wall time: $(( $(date +%s) - started )) s"
