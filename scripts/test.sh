#!/usr/bin/env bash
# Runs every zk-recipes test against real ZooKeeper servers. Installs what is missing first.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
sh scripts/install-deps.sh
command -v cargo >/dev/null || { echo "error: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
cargo test --workspace --all-targets --no-fail-fast "$@"
cargo test --workspace --doc "$@"
# SASL (DIGEST-MD5) against a server configured for it: behind the framework's `sasl` feature.
cargo test -p zk-recipes-framework --features sasl --test sasl "$@"
# TLS against a server with a TLS client port (a throwaway CA made with openssl): behind the
# framework's `tls` feature.
cargo test -p zk-recipes-framework --features tls --test tls "$@"
# The guides' blocks that connect with TLS or SASL (docs/security.md): behind the same features.
cargo test -p zk-recipes-doc-check --features tls,sasl --doc "$@"
# Every example runs to completion (each starts an embedded ZooKeeper unless ZK_CONNECT is set).
for example in tour job_locks semaphore_pool leader_service queue_worker connection_states metrics discovery sharded_workers; do
    echo "== example $example"
    timeout 180 cargo run -q -p zk-recipes-examples --example "$example" -- >/dev/null
done
echo "test suite wall time: $(( $(date +%s) - started )) s"
