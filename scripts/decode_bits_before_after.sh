#!/usr/bin/env bash
# Issue 21 (grouped-query attention_decode): moving to NKV key/value heads must not change
# a bit of attention_decode's results when NKV = NH. Builds scripts/decode_bits_before_after.cpp
# against kernels/decode.cpp of BEFORE (default ccf97b7) and of the working tree, runs both
# on 1 and 2 threads and compares the hashes.
#   scripts/decode_bits_before_after.sh [BEFORE]
set -euo pipefail
cd "$(dirname "$0")/.."
before="${1:-ccf97b7}"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/old"
git archive "$before" kernels | tar -x -C "$tmp/old"
flags=(-O3 -DNDEBUG -march=native -fno-tree-slp-vectorize -fopenmp -std=c++20)
c++ "${flags[@]}" -DOLD -I"$tmp/old" scripts/decode_bits_before_after.cpp "$tmp/old/kernels/decode.cpp" \
  "$tmp/old/kernels/memory.cpp" -o "$tmp/old_bin"
c++ "${flags[@]}" -I. scripts/decode_bits_before_after.cpp kernels/decode.cpp kernels/memory.cpp -o "$tmp/new_bin"
status=0
for t in 1 2; do
  OMP_NUM_THREADS=$t "$tmp/old_bin" > "$tmp/old$t"
  OMP_NUM_THREADS=$t "$tmp/new_bin" > "$tmp/new$t"
  if grep -v " v3 " "$tmp/new$t" | diff - "$tmp/old$t" > /dev/null; then
    echo "$t thread(s): v1 and v2 give the same bits as $before ($(wc -l < "$tmp/old$t") cases)"
  else
    echo "$t thread(s): v1 or v2 CHANGED against $before:"; grep -v " v3 " "$tmp/new$t" | diff - "$tmp/old$t" || true; status=1
  fi
  if diff <(grep " v2 " "$tmp/new$t" | sed 's/ v2 / v /') <(grep " v3 " "$tmp/new$t" | sed 's/ v3 / v /') > /dev/null; then
    echo "$t thread(s): v3 gives v2's bits"
  else
    echo "$t thread(s): v3 DIFFERS from v2"; status=1
  fi
done
exit $status
