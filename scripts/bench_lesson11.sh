#!/usr/bin/env bash
# scripts/bench_lesson11.sh: lesson 11's "what the modern block buys", measured and recorded:
#   docs/benchmarks/lesson11-compare.json  every run (model x seed) and its validation curve
#                                           (what the notebook plots; schema in compare_part.h)
#   docs/benchmarks/lesson11-compare.md    the machine, the command, the table and the
#                                           conclusion computed from it
#   out/bench-lesson11/compare.log         the program's whole output
# Three models trained under one wall-clock budget each on Tiny Shakespeare (lesson11 --part
# compare): char-gpt2 (lesson 08's: 4 layers, 4 heads, 128 wide, context 64 characters),
# bpe-gpt2 (the same block on BPE tokens, vocabulary 1024 trained on the train split, context
# ~64 characters in tokens) and bpe-llama (the llama block, same width and depth, 2 key/value
# heads), scored in bits per character of the WHOLE validation split.
#
# Default: 180 s of training per model x 2 seeds = 18 minutes of training, plus evaluation
# (~1-2 minutes per run on 2 idle cores): ~25-30 minutes. Run it on a quiet machine (the
# record states the load average at the start and the end). Knobs (environment):
#   BUDGET=180 SEEDS=1,2 VOCAB=1024 THREADS=0 (0: all cores) DATA=<corpus> CURVE_BYTES=16384
#   EXTRA="--n-kv-head 1"   more flags for lesson11
# A short trial: BUDGET=30 SEEDS=1 bash scripts/bench_lesson11.sh (writes the same files).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake --preset release >/dev/null
cmake --build --preset release --target lesson11 >/dev/null
bin=./build/release/bin
out=out/bench-lesson11
data="${DATA:-}"
if [[ -z "$data" ]]; then
  for f in data/tinyshakespeare/input.txt data/tinyshakespeare.txt ../shared/data/tinyshakespeare.txt \
           ../../shared/data/tinyshakespeare.txt; do
    [[ -f "$f" ]] && data="$f" && break
  done
fi
[[ -n "$data" ]] || { echo "bench_lesson11: Tiny Shakespeare not found (python3 scripts/fetch_data.py tinyshakespeare)" >&2; exit 1; }
mkdir -p "$out" docs/benchmarks
echo "bench_lesson11: load average now: $(cat /proc/loadavg 2>/dev/null || echo unknown)"
# shellcheck disable=SC2086  # EXTRA is a list of flags
"$bin/lesson11" --part compare --data "$data" --vocab-size "${VOCAB:-1024}" \
  --budget-s "${BUDGET:-180}" --seeds "${SEEDS:-1,2}" \
  --n-layer 4 --n-head 4 --n-embd 128 --char-context 64 --batch-size 12 \
  --val-bytes 0 --curve-bytes "${CURVE_BYTES:-16384}" --curve-points 8 \
  --compare-threads "${THREADS:-0}" ${EXTRA:-} \
  --compare-json docs/benchmarks/lesson11-compare.json --compare-md docs/benchmarks/lesson11-compare.md \
  2>&1 | tee "$out/compare.log"
