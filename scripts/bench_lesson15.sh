#!/usr/bin/env bash
# scripts/bench_lesson15.sh: lesson 15's full-size record and figures.
#
#   scripts/bench_lesson15.sh           every part at its default size (about 25 minutes on 2 idle
#                                       cores, most of it the bitnet part's four training runs and,
#                                       the first time, the kv part's long-context model)
#   QUICK=1 scripts/bench_lesson15.sh   the parts' --quick sizes (a dry run; the record is marked quick)
#
# Runs nnlab lesson15 --json docs/benchmarks/lesson15.json (its output in docs/benchmarks/lesson15.txt)
# on Tiny Shakespeare when ../shared/data/tinyshakespeare.txt or data/tinyshakespeare.txt is there,
# then scripts/make_figures.py draws docs/figures/lesson15-*.png from the record. Lesson 10's trained
# model (out/lesson10/target) is reused, or trained first. The timings are this machine's: run it
# on an idle machine. Environment: QUICK, BIN (default build/release/bin), STEPS (bitnet, default 1000).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/release/bin}
[[ -x "$BIN/nnlab" ]] || { echo "bench_lesson15: $BIN/nnlab is not built (cmake --preset release && cmake --build build/release)" >&2; exit 2; }
data=()
for d in ../shared/data/tinyshakespeare.txt data/tinyshakespeare.txt; do
  [[ -f $d ]] && { data=(--data "$d"); break; }
done
quick=()
[[ -n "${QUICK:-}" ]] && quick=(--quick)
"$BIN/nnlab" lesson15 "${quick[@]}" "${data[@]}" --bitnet-steps "${STEPS:-1000}" --out-dir out/lesson10 \
  --bitnet-dir out/lesson15 --json docs/benchmarks/lesson15.json 2>&1 | tee docs/benchmarks/lesson15.txt
/usr/bin/python3 scripts/make_figures.py --only lesson15
