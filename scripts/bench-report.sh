#!/usr/bin/env bash
# The benchmark report: runs the lock, read-write lock, leader, queue, counter, double-barrier,
# service-discovery, cache and metrics benches (benches/*.rs)
# with fixed settings against one embedded ZooKeeper server and Curator, each appending JSON lines,
# then renders docs/benchmarks.md and the SVG plots in docs/img/ (crates/bench-report).
#
#   scripts/bench-report.sh            the full run (about 30 to 40 minutes on 2 cores): writes docs/
#   scripts/bench-report.sh --quick    a pipeline check (a few minutes, tiny settings): writes
#                                      target/bench-report-quick/ and leaves docs/ alone
#   scripts/bench-report.sh --out DIR  write the report and plots under DIR instead
#
# Run it on a quiet machine: every figure is a median of interleaved rounds and every ratio
# compares figures of the same run, but a busy machine still moves them. The raw JSON lines and
# each bench's log stay in target/bench-report-<mode>/.
set -euo pipefail
cd "$(dirname "$0")/.."

all_args="$*"
mode=full
out=
while (($#)); do
    case "$1" in
        --quick) mode=quick ;;
        --out) out=${2:?--out needs a directory}; shift ;;
        -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
        *) echo "bench-report: unknown argument $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

sh scripts/install-deps.sh
command -v cargo >/dev/null || { echo "error: cargo (Rust) is required: https://rustup.rs" >&2; exit 1; }
if [[ -n "${ZK_CONNECT:-}" ]]; then
    echo "bench-report: unsetting ZK_CONNECT: the report runs against its own embedded server" >&2
    unset ZK_CONNECT
fi
unset ZKR_BENCH_JSON

# Fixed settings. Full: 5 interleaved rounds per bench (medians of 5), about 30 to 40 minutes on a
# 2-core machine (2,397 s at 7311d72, the locks bench 1,886 s of it; its scale part, run once,
# about 3 minutes). Each distinct-locks point runs at least 20,000 timed cycles: with 3,000 the
# 1,000-lock point lasted about half a second, shorter than this machine's stalls. The counter
# and double-barrier benches and the queue and leader floors came later; their full
# settings are sized for under 5 minutes each, but the queues': with 3,000 items a take lasted
# 0.1 s per round and its rounds spread from 0.56 to 1.05 of the floor (report of 08f879e); with
# 10,000 items a queues-only run took 366 s and every ours / floor read 0.90 or more.
if [[ $mode == quick ]]; then
    locks=(--rounds 1 --cycles 200 --warm-up-cycles 200 --contended-ms 600 --warm-up-ms 300
        --sessions 1,2,8,32 --distinct-locks 10,100,1000 --distinct-cycles 2 --distinct-min-total 300 --distinct-warm-up-total 300
        --waiters 10,100,1000 --held 10000)
    rwlock=(--rounds 1 --secs 1 --warm-up-secs 1)
    leader=(--rounds 1 --hand-overs 20 --warm-up-hand-overs 50 --session-ms 2000)
    queues=(--rounds 1 --items 1000)
    counters=(--rounds 1 --clients 8 --per-client 30)
    barriers=(--rounds 1 --barrier-rounds 5)
    discovery=(--rounds 1 --instances 100 --secs 3)
    cache=(CACHE_BENCH_CHILDREN=2000 CACHE_BENCH_TREE=4000 CACHE_BENCH_ROUNDS=1 CACHE_BENCH_RATE=500
        CACHE_BENCH_FOLLOW_CHILDREN=500)
    metrics=(--rounds 3 --cycles 50)
    [[ -n $out ]] || out=target/bench-report-quick
else
    locks=(--rounds 5 --cycles 2000 --warm-up-cycles 3000 --contended-secs 2 --warm-up-secs 2
        --sessions 1,2,8,32,128 --distinct-locks 10,100,1000,10000 --distinct-cycles 3 --distinct-min-total 20000
        --curator-max-threads 10000 --waiters 10,100,1000,10000 --held 100000)
    rwlock=(--rounds 5 --secs 2 --warm-up-secs 1)
    leader=(--rounds 5 --hand-overs 60 --warm-up-hand-overs 500 --session-ms 2000)
    queues=(--rounds 5 --items 10000)
    counters=(--rounds 5 --clients 8 --per-client 300)
    barriers=(--rounds 5 --barrier-rounds 60)
    discovery=(--rounds 3 --instances 1000 --secs 20)
    # The cache bench's defaults but a follow rate the single server keeps up with (at 10,000
    # sets/s it queues the writes itself and every follower sees its seconds of lag).
    cache=(CACHE_BENCH_CHILDREN=100000 CACHE_BENCH_TREE=300000 CACHE_BENCH_ROUNDS=3 CACHE_BENCH_RATE=2000
        CACHE_BENCH_FOLLOW_CHILDREN=10000)
    metrics=(--rounds 41 --cycles 300)
    [[ -n $out ]] || out=docs
fi

work_dir=$PWD/target/bench-report-$mode  # absolute: cargo runs each bench in its package directory
results=$work_dir/results.jsonl
rm -rf "$work_dir"
mkdir -p "$work_dir"

json_string() { # a JSON string literal of "$1"
    local text=${1//\\/\\\\}
    text=${text//\"/\\\"}
    text=${text//$'\t'/ }
    printf '"%s"' "${text//$'\n'/ }"
}
package_version() { dpkg-query -W -f='${Version}' "$1" 2>/dev/null || echo unknown; }

settings=$(printf '{"locks":%s,"rwlock":%s,"leader":%s,"queues":%s,"counters":%s,"barriers":%s,"cache":%s,"discovery":%s,"metrics":%s}' \
    "$(json_string "${locks[*]}")" "$(json_string "${rwlock[*]}")" \
    "$(json_string "${leader[*]}")" "$(json_string "${queues[*]}")" \
    "$(json_string "${counters[*]}")" "$(json_string "${barriers[*]}")" "$(json_string "${cache[*]} (environment)")" \
    "$(json_string "${discovery[*]}")" "$(json_string "${metrics[*]}")")
cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1)
memory=$(awk '/^MemTotal:/ { printf "%.1f GiB", $2 / 1048576 }' /proc/meminfo)
command_line="scripts/bench-report.sh${all_args:+ $all_args}"
{
    printf '{"bench":"meta","date":%s,"mode":%s,"command":%s,"commit":%s,' \
        "$(json_string "$(date -u '+%Y-%m-%d %H:%M')")" "$(json_string "$mode")" \
        "$(json_string "$command_line")" \
        "$(json_string "$(git rev-parse --short HEAD 2>/dev/null || echo unknown)$(git diff --quiet 2>/dev/null || echo ' (modified)')")"
    printf '"cpu":%s,"nproc":%s,"memory":%s,"kernel":%s,' \
        "$(json_string "${cpu:-unknown}")" "$(nproc)" "$(json_string "$memory")" "$(json_string "$(uname -sr)")"
    printf '"zookeeper":%s,"curator":%s,"java":%s,"rustc":%s,"settings":%s}\n' \
        "$(json_string "$(package_version zookeeper) (Debian package zookeeper)")" \
        "$(json_string "$(package_version libcurator-recipes-java) (Debian package libcurator-recipes-java)")" \
        "$(json_string "$(java -version 2>&1 | head -1)")" "$(json_string "$(rustc --version)")" "$settings"
} >"$results"

started=$(date +%s)
echo "== building the benches and the renderer"
cargo bench -q -p zk-recipes-benches --no-run --bench locks --bench rwlock --bench leader --bench queues \
    --bench counters --bench barriers --bench discovery --bench cache --bench metrics
cargo build -q -p zk-recipes-bench-report

run_bench() { # name, settings... (with $bench_env: VAR=value words for the bench's environment)
    local name=$1 begun
    shift
    echo "== bench $name ${bench_env:-}${bench_env:+ }$*"
    begun=$(date +%s)
    # shellcheck disable=SC2086 # bench_env is VAR=value words, split on purpose
    env ${bench_env:-} cargo bench -q -p zk-recipes-benches --bench "$name" -- "$@" --json "$results" 2>&1 \
        | tee "$work_dir/$name.log"
    printf '{"bench":"timing","name":"%s","secs":%s}\n' "$name" "$(($(date +%s) - begun))" >>"$results"
}
run_bench locks "${locks[@]}"
run_bench rwlock "${rwlock[@]}"
run_bench leader "${leader[@]}"
run_bench queues "${queues[@]}"
run_bench counters "${counters[@]}"
run_bench barriers "${barriers[@]}"
run_bench discovery "${discovery[@]}"
bench_env="${cache[*]}" run_bench cache
run_bench metrics "${metrics[@]}"

echo "== rendering"
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
"$target_dir/debug/zkr-bench-report" --input "$results" --markdown "$out/benchmarks.md" --img-dir "$out/img"
echo "bench-report ($mode): $(($(date +%s) - started)) s wall time; JSON lines and logs in $work_dir"
