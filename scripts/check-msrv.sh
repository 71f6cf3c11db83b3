#!/usr/bin/env bash
# The workspace's `rust-version` must be the true floor: at least the highest `rust-version` that
# any package in Cargo.lock declares. Fails when a lockfile change raises the floor above it.
set -euo pipefail
cd "$(dirname "$0")/.."
declared=$(sed -n 's/^rust-version = "\([0-9.]*\)"/\1/p' Cargo.toml | head -n 1)
[[ -n "$declared" ]] || { echo "error: no rust-version in Cargo.toml's [workspace.package]" >&2; exit 1; }
# Every package the lockfile resolves, for every platform (a Mac build needs its own deps too).
metadata=$(cargo metadata --format-version 1 --locked)
highest=$(grep -o '"name":"[^"]*","version":"[^"]*"\|"rust_version":"[0-9.]*"' <<<"$metadata" \
    | awk -F'"' '/"name"/ { package = $4 " " $8 } /rust_version/ { print $4, package }' \
    | sort -V | tail -n 1)
floor=${highest%% *}
normalise() { local version=$1; while [[ $(tr -cd . <<<"$version" | wc -c) -lt 2 ]]; do version="$version.0"; done; echo "$version"; }
if [[ "$(printf '%s\n%s\n' "$(normalise "$floor")" "$(normalise "$declared")" | sort -V | tail -n 1)" != "$(normalise "$declared")" ]]; then
    echo "error: Cargo.lock needs Rust $floor (${highest#* }), but Cargo.toml declares rust-version = \"$declared\"" >&2
    echo "       raise rust-version (and the README's MSRV) or pin the dependency lower" >&2
    exit 1
fi
echo "msrv: rust-version $declared covers every locked dependency (highest: ${highest#* } needs $floor)"
