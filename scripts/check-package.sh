#!/usr/bin/env bash
# Every published crate packages, and builds from its `.crate` alone (nothing outside it): what
# `cargo package --workspace` checks, in a fraction of its time.
#
#   bash scripts/check-package.sh
#
# `cargo package` verifies each `.crate` with a build of its own in a cold target directory, one
# crate after another. Here the crates are packaged without that build, unpacked side by side into
# a workspace of their own (their dependencies on each other point at the unpacked copies, never
# at this checkout), and each is built alone (`cargo build -p`, so no other crate's features help
# it) with the dependencies' artifacts of this checkout's target directory reused (cargo's
# `build-dir`); a build script that writes into its crate's sources fails the check, as it fails
# `cargo package`.
set -euo pipefail
cd "$(dirname "$0")/.."

# Only what is published: a `publish = false` member (the chaos suite, the models, the test
# helpers, the benches, ...) is never a `.crate`, and may depend on another one by path alone.
unpublished=()
published=()
for manifest in crates/*/Cargo.toml tests/Cargo.toml benches/Cargo.toml examples/Cargo.toml; do
    name=$(sed -n 's/^name = "\(.*\)"/\1/p' "$manifest" | head -n 1)
    if grep -q '^publish = false' "$manifest"; then
        unpublished+=(--exclude "$name")
    else
        published+=("$name")
    fi
done
# cargo unpacks each packaged crate into a registry folder named after the target directory's
# path (to resolve the crates' dependencies on each other) and never unpacks a name and version
# again: an earlier run from the same path would leave that run's sources there. Our crates come
# from nowhere else, so their copies go first.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/zk-recipes-*
echo "== cargo package: the ${#published[@]} published members (not the $((${#unpublished[@]} / 2)) unpublished ones)"
cargo package --workspace --no-verify "${unpublished[@]}"

target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
version=$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)
check=$target_dir/package-check
rm -rf "$check"
mkdir -p "$check"
members=""
patches=""
for name in "${published[@]}"; do
    crate=$target_dir/package/$name-$version.crate
    [[ -f "$crate" ]] || { echo "error: cargo package made no $crate" >&2; exit 1; }
    tar -xzf "$crate" -C "$check"
    members+="\"$name-$version\", "
    patches+="$name = { path = \"$name-$version\" }"$'\n'
done
cat >"$check/Cargo.toml" <<EOF
# The published crates as unpacked from their .crate files (made by scripts/check-package.sh).
[workspace]
resolver = "2"
members = [${members%, }]

[patch.crates-io]
$patches
EOF
# The versions this checkout tested with (the packaged crates' own dependencies are among them).
cp Cargo.lock "$check/Cargo.lock"
sources_before=$(cd "$check" && find . -path ./target -prune -o -type f ! -name Cargo.lock -print0 | sort -z | xargs -0 cksum)

# The build directory is this checkout's: dependencies already built with the same features are
# reused; the crates' own final artifacts (the `zkr` binary, ...) go to a folder of their own.
for name in "${published[@]}"; do
    echo "== building $name from its .crate"
    CARGO_BUILD_BUILD_DIR=$target_dir cargo build --manifest-path "$check/Cargo.toml" \
        --target-dir "$check/target" -p "$name"
done

sources_after=$(cd "$check" && find . -path ./target -prune -o -type f ! -name Cargo.lock -print0 | sort -z | xargs -0 cksum)
if [[ "$sources_before" != "$sources_after" ]]; then
    echo "error: building the packaged crates changed their sources:" >&2
    diff <(echo "$sources_before") <(echo "$sources_after") >&2 || true
    exit 1
fi
echo "package: ${#published[@]} crates build from their .crate files alone"
