#!/usr/bin/env bash
# The library crates, the testing crate, `zkr` and the benches must build on macOS (Intel and Apple
# silicon): `cargo check` for both targets. Installs the targets' standard library with rustup when
# it can; where it cannot (no rustup, no network), says so and skips that target.
set -euo pipefail
cd "$(dirname "$0")/.."
packages=(-p zk-recipes -p zk-recipes-framework -p zk-recipes-lock-internals -p zk-recipes-mutex
    -p zk-recipes-semaphore -p zk-recipes-rwlock -p zk-recipes-leader -p zk-recipes-queue
    -p zk-recipes-cache -p zk-recipes-nodes -p zk-recipes-counter -p zk-recipes-barrier -p zk-recipes-discovery
    -p zk-recipes-testing -p zk-recipes-cli)
for target in x86_64-apple-darwin aarch64-apple-darwin; do
    if ! rustup target list --installed 2>/dev/null | grep -qx "$target"; then
        if ! rustup target add "$target"; then
            echo "note: the $target standard library cannot be installed here; its check is skipped" >&2
            continue
        fi
    fi
    echo "== cargo check --target $target"
    cargo check -q --target "$target" "${packages[@]}" --lib --bins
    cargo check -q --target "$target" -p zk-recipes-benches --benches
done
