#!/usr/bin/env bash
# Fails when tracked text (code, comments, docs, scripts) speaks of anything but the product: a
# reference into a tracker of its own (the word for a tracker entry followed by its number, or a
# bare hash and number), or talk of how the work was done (who did it, on which machine, in which
# sitting).
#
#   bash scripts/check-product-text.sh
#
# References into other projects' trackers are fine when they name the project: CURATOR-123,
# ZOOKEEPER-123, GH-1290 (Curator's), apache/curator#1290, kazoo#386 (and a bare "#298" on a line
# that names such a reference: "kazoo#257 and #298"). ZooKeeper sessions ("this session",
# "the previous session") are the product's business and never match.
set -euo pipefail
cd "$(dirname "$0")/.."

self=scripts/check-product-text.sh
# Phrases that are never about the product (case-insensitive, extended regular expressions).
talk_of_work=(
    '\bissues? ?#?[0-9]+\b'
    '\bengineers?\b'
    '\bworktrees?\b'
    '\b(work|working|coding|pairing|chat|agent) sessions?\b'
    '\bsessions? of work\b'
    "\\b(this|previous|earlier|last|prior|next|another) session('s)? (work|commits?|changes|fix|report|brief|notes)\\b"
    '\bhelper (agent|session|engineer)s?\b'
    '\b(a|the|another|our|my) helpers? (wrote|found|did|said|added|measured|reported|ran|noticed)\b'
    '\bthe (brief|prompt)\b'
    '\b(my|our|whose) machine\b'
    '\b(claude|chatgpt|llm)\b'
)
# A bare "#123" after a space or an opening bracket, on a line naming no project's reference.
bare_number='(^|[[:space:](\[])#[0-9]+\b'
named_reference='[A-Za-z0-9_.-]#[0-9]+'

files=()
while IFS= read -r -d '' file; do
    case "$file" in
        "$self" | Cargo.lock | *.svg | *.png | *.jpg) continue ;;
    esac
    files+=("$file")
done < <(git ls-files -z)

found=0
for pattern in "${talk_of_work[@]}"; do
    if hits=$(grep -nHIiE -- "$pattern" "${files[@]}"); then
        printf '%s\n' "$hits"
        found=1
    fi
done
if hits=$(grep -nHIE -- "$bare_number" "${files[@]}" | grep -vE -- "$named_reference"); then
    printf '%s\n' "$hits"
    found=1
fi
if ((found)); then
    echo "error: the lines above speak of something other than the product (a tracker number of" >&2
    echo "our own, or how the work was done); say what the code does and why instead" >&2
    exit 1
fi
echo "product text: ${#files[@]} files speak of the product only"
