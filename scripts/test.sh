#!/usr/bin/env bash
# Runs every zk-recipes test against real ZooKeeper servers. Installs what is missing first.
#
#   bash scripts/test.sh [CARGO TEST ARGS] [-- TEST BINARY ARGS]
#
# The test binaries run several at a time (scripts/test-binaries.sh; ZK_RECIPES_TEST_JOBS says how
# many, default 3), then the doctests, the SASL and TLS tests and every example. Each phase prints
# its wall time.
set -euo pipefail
cd "$(dirname "$0")/.."
started=$(date +%s)
phase_started=$started
phase() {
    local now
    now=$(date +%s)
    echo "== $1: $((now - phase_started)) s"
    phase_started=$now
}
sh scripts/install-deps.sh
command -v cargo >/dev/null || { echo "error: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
jobs=${ZK_RECIPES_TEST_JOBS:-3}
export ZK_RECIPES_TEST_JOBS=$jobs
phase "test dependencies"

# What `cargo test --workspace --all-targets --no-fail-fast` runs, binaries side by side.
bash scripts/test-binaries.sh "$@"
phase "test binaries"

cargo_args=()
for arg in "$@"; do
    [[ "$arg" == -- ]] && break
    cargo_args+=("$arg")
done
cargo test --workspace --doc "$@"
phase "doctests"

# SASL (DIGEST-MD5) against a server configured for it, and TLS against a server with a TLS client
# port (a throwaway CA made with openssl): behind the framework's `sasl` and `tls` features, built
# once for both.
cargo test -p zk-recipes-framework --features sasl,tls --test sasl --test tls "$@"
# The guides' blocks that connect with TLS or SASL (docs/security.md): behind the same features.
cargo test -p zk-recipes-doc-check --features tls,sasl --doc "$@"
phase "sasl and tls tests"

# Every example runs to completion (each starts an embedded ZooKeeper unless ZK_CONNECT is set),
# several at a time, each into its own log; a failed example's log is printed in full.
examples=(tour job_locks semaphore_pool leader_service queue_worker connection_states metrics discovery sharded_workers)
cargo build -q -p zk-recipes-examples --examples ${cargo_args[@]+"${cargo_args[@]}"}
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
log_dir=$target_dir/example-logs
rm -rf "$log_dir"
mkdir -p "$log_dir"
# shellcheck disable=SC2016 # expanded by the inner shell
# xargs appends the example's name: $1 is the log folder, $2 the target folder, $3 the example.
printf '%s\0' "${examples[@]}" | xargs -0 -n 1 -P "$jobs" sh -c '
    example=$3 log="$1/$3.log"
    if timeout 180 "$2/debug/examples/$example" >"$log" 2>&1; then
        echo "ok     example $example"
    else
        echo "FAILED example $example (exit $?); its log ($log):"
        sed "s/^/    | /" "$log"
        echo "$example" >>"$1/failed"
    fi' sh "$log_dir" "$target_dir"
if [[ -s "$log_dir/failed" ]]; then
    echo "error: examples failed: $(tr '\n' ' ' <"$log_dir/failed")" >&2
    exit 1
fi
phase "examples"
echo "test suite wall time: $(($(date +%s) - started)) s"
