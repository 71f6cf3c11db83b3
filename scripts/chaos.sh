#!/usr/bin/env bash
# The chaos suite (crates/chaos): Rust, Curator, ZooKeeper-recipe (Java) and kazoo contenders on a real 3-node ZooKeeper ensemble
# through server crashes, pauses, session expiry, partitions and contender crashes. Starts with a
# negative control (locking off) that must report violations. Exit 0 only when the run is clean.
#
#   scripts/chaos.sh            the default run (about 30 minutes)
#   scripts/chaos.sh --quick    the CI run (about 3 minutes)
#   scripts/chaos.sh --quick --seed 1234   replay a fault schedule (the seed is always printed)
#   scripts/chaos.sh --soak HOURS          the whole mix with faults for HOURS (fractions allowed),
#                                          a progress table every ten minutes
#
# Event logs and summary.json go to target/chaos-quick/, target/chaos-default/ or target/chaos-soak/ (see
# docs/reliability.md).
set -euo pipefail
cd "$(dirname "$0")/.."
sh scripts/install-deps.sh
command -v cargo >/dev/null || { echo "error: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
mode=default
for arg in "$@"; do
    [[ "$arg" == --quick ]] && mode=quick
    [[ "$arg" == --soak || "$arg" == --soak=* ]] && mode=soak
done
# The default run builds optimised contenders (as users run them), so the two cores go to the
# servers and the contenders' work rather than to debug code; the quick run reuses the test build.
profile=debug
if [[ "$mode" != quick ]]; then
    profile=release
    echo "== building zkr-chaos (release)"
    cargo build -q --release -p zk-recipes-chaos
else
    cargo build -q -p zk-recipes-chaos
fi
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
out_dir="$target_dir/chaos-$mode"
rm -rf "$out_dir"
mkdir -p "$out_dir"
# A copy: a rebuild during the run must not replace the binary the run re-executes for contenders.
cp "$target_dir/$profile/zkr-chaos" "$out_dir/zkr-chaos"
exec "$out_dir/zkr-chaos" run --out-dir "$out_dir" "$@"
