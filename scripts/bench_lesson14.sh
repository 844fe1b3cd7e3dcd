#!/usr/bin/env bash
# scripts/bench_lesson14.sh: lesson 14's full-size record and figures.
#
#   scripts/bench_lesson14.sh           every part at its default size (about 5 minutes on 2 idle cores)
#   QUICK=1 scripts/bench_lesson14.sh   the parts' --quick sizes (a dry run; the record is marked quick)
#
# Runs nnlab lesson14 --json docs/benchmarks/lesson14.json (its output in docs/benchmarks/lesson14.txt)
# on Tiny Shakespeare when ../shared/data/tinyshakespeare.txt or data/tinyshakespeare.txt is there,
# then scripts/make_figures.py draws docs/figures/lesson14-*.png from the record. The timings are
# this machine's: run it on an idle machine (another build or test run halves the 2-rank numbers).
# Environment: QUICK, BIN (default build/release/bin), REPEATS (default 5), STEPS (default 60).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/release/bin}
[[ -x "$BIN/nnlab" ]] || { echo "bench_lesson14: $BIN/nnlab is not built (cmake --preset release && cmake --build build/release)" >&2; exit 2; }
data=()
for d in ../shared/data/tinyshakespeare.txt data/tinyshakespeare.txt; do
  [[ -f $d ]] && { data=(--data "$d"); break; }
done
quick=()
[[ -n "${QUICK:-}" ]] && quick=(--quick)
mkdir -p out/lesson14
"$BIN/nnlab" lesson14 "${quick[@]}" "${data[@]}" --repeats "${REPEATS:-5}" --steps "${STEPS:-60}" --out-dir out/lesson14 \
  --json docs/benchmarks/lesson14.json 2>&1 | tee docs/benchmarks/lesson14.txt
/usr/bin/python3 scripts/make_figures.py --only lesson14
