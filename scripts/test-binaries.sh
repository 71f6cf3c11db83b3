#!/usr/bin/env bash
# Builds every test target of the workspace once, then runs the test binaries several at a time,
# each into its own log; prints one line per binary as it ends and a failed binary's log in full.
# What `cargo test --workspace --all-targets --no-fail-fast` runs, in less wall time: inside one
# binary the testing crate still runs one ZooKeeper server (or cluster) at a time, so a binary's
# tests see the same load as under `cargo test`; binaries run beside each other.
#
#   bash scripts/test-binaries.sh [CARGO TEST ARGS] [-- TEST BINARY ARGS]
#
#   ZK_RECIPES_TEST_JOBS   how many binaries run at once (default 3: on two cores three binaries
#                          keep the cores busy while one waits for a server, and every session
#                          expiry and suspension bound of the tests holds)
#   ZK_RECIPES_TEST_LOGS   where the logs go (default target/test-logs)
#
# Exit 0 only when every binary passed. Called by scripts/test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# One binary: --run-one LOG_DIR [TEST ARGS...] NAME PACKAGE_DIR EXECUTABLE (xargs appends the last three).
if [[ "${1:-}" == --run-one ]]; then
    shift
    log_dir=$1
    shift
    args=("$@")
    name=${args[${#args[@]} - 3]} dir=${args[${#args[@]} - 2]} executable=${args[${#args[@]} - 1]}
    set -- "${args[@]:0:${#args[@]} - 3}"
    started=$(date +%s)
    status=0
    # As cargo runs a test binary: from its package's folder, with its manifest folder set.
    (cd "$dir" && CARGO_MANIFEST_DIR="$dir" "$executable" "$@") >"$log_dir/$name.log" 2>&1 || status=$?
    seconds=$(($(date +%s) - started))
    if ((status == 0)); then
        printf 'ok     %4d s  %s\n' "$seconds" "$name"
    else
        echo "$name" >>"$log_dir/failed"
        printf 'FAILED %4d s  %s (exit %d); its log (%s):\n' "$seconds" "$name" "$status" "$log_dir/$name.log"
        sed 's/^/    | /' "$log_dir/$name.log"
    fi
    # A failure is reported above and in the list; the other binaries keep running.
    exit 0
fi

cargo_args=()
while (($# > 0)) && [[ "$1" != -- ]]; do
    cargo_args+=("$1")
    shift
done
(($# > 0)) && shift
test_args=("$@")

jobs=${ZK_RECIPES_TEST_JOBS:-3}
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
log_dir=${ZK_RECIPES_TEST_LOGS:-$target_dir/test-logs}
rm -rf "$log_dir"
mkdir -p "$log_dir"

echo "== building the test binaries"
cargo test --workspace --all-targets --no-run --message-format=json-render-diagnostics \
    ${cargo_args[@]+"${cargo_args[@]}"} >"$log_dir/build.json"

# Each test executable: its log name (package, kind and target), its package folder, its path.
# One JSON object a line; the fields read here hold no quotes or commas of their own.
list=$log_dir/binaries
# Only what cargo built as a test (`profile.test`): not the plain binaries built beside for the
# integration tests.
grep '"reason":"compiler-artifact"' "$log_dir/build.json" | grep '"profile":{[^}]*"test":true' |
    grep -v '"executable":null' |
    while IFS= read -r line; do
        executable=$(sed -n 's/.*"executable":"\([^"]*\)".*/\1/p' <<<"$line")
        manifest=$(sed -n 's/.*"manifest_path":"\([^"]*\)".*/\1/p' <<<"$line")
        kind=$(sed -n 's/.*"target":{"kind":\["\([^"]*\)".*/\1/p' <<<"$line")
        target=$(sed -n 's/.*"target":{[^}]*"name":"\([^"]*\)".*/\1/p' <<<"$line")
        package=$(basename "$(dirname "$manifest")")
        printf '%s\0%s\0%s\0' "$package-$kind-$target" "$(dirname "$manifest")" "$executable"
    done >"$list"
count=$(tr -cd '\0' <"$list" | wc -c)
count=$((count / 3))
if ((count == 0)); then
    echo "error: no test binaries in cargo's build output ($log_dir/build.json)" >&2
    exit 1
fi

echo "== running $count test binaries, $jobs at a time (logs in $log_dir)"
started=$(date +%s)
xargs -0 -n 3 -P "$jobs" bash "$0" --run-one "$log_dir" ${test_args[@]+"${test_args[@]}"} <"$list" ||
    { echo "error: running the test binaries failed" >&2; exit 1; }
echo "== $count test binaries in $(($(date +%s) - started)) s"
if [[ -s "$log_dir/failed" ]]; then
    echo "error: $(wc -l <"$log_dir/failed") test binaries failed (logs above and in $log_dir):" >&2
    sed 's/^/    /' "$log_dir/failed" >&2
    exit 1
fi
