#!/usr/bin/env bash
# scripts/bench_lesson13.sh: lesson 13's full-size figures (docs/benchmarks/lesson13-*).
#
#   scripts/bench_lesson13.sh              every part at its default (full) size
#   PARTS="mpc faults" scripts/bench_lesson13.sh   only those parts
#   QUICK=1 scripts/bench_lesson13.sh      the parts' --quick sizes (a dry run; records marked quick)
#
# For each part P of soft-sensor, mpc, faults, export:
#   nnlab lesson13 --part P --json docs/benchmarks/lesson13-P.json --out-dir out/lesson13
# with its printed output in docs/benchmarks/lesson13-P.txt; the mpc part also writes the
# linearised-plant cross-check (--linear-check docs/benchmarks/lesson13-linear-check.json)
# and scripts/control_peer.py redoes it with python-control and CasADi into
# docs/benchmarks/lesson13-linear-check.txt (skipped, said so, without the .venv's packages:
# bash scripts/setup.sh installs them). The step logs the figures plot (out/lesson13/
# mpc_<scenario>.csv, soft_sensor_test.csv) are copied to docs/benchmarks/lesson13/, then
# scripts/make_figures.py draws lesson 13's figures from those records.
# Environment: PARTS, QUICK, THREADS (default 0: the default), BIN (default build/release/bin),
# PEER_PYTHON (default .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/release/bin}
OUT=docs/benchmarks
PARTS=${PARTS:-soft-sensor mpc faults export}
PEER_PYTHON=${PEER_PYTHON:-.venv/bin/python}
quick=()
[[ -n "${QUICK:-}" ]] && quick=(--quick)
[[ -x "$BIN/nnlab" ]] || { echo "bench_lesson13: $BIN/nnlab is not built (cmake --preset release && cmake --build build/release)" >&2; exit 2; }
mkdir -p "$OUT/lesson13" out/lesson13
for part in $PARTS; do
  extra=()
  [[ $part == mpc ]] && extra=(--linear-check "$OUT/lesson13-linear-check.json")
  echo "== lesson13 --part $part"
  "$BIN/nnlab" lesson13 --part "$part" "${quick[@]}" --threads "${THREADS:-0}" --out-dir out/lesson13 \
    --json "$OUT/lesson13-$part.json" "${extra[@]}" 2>&1 | tee "$OUT/lesson13-$part.txt"
  if [[ $part == mpc ]]; then
    if "$PEER_PYTHON" -c 'import control, casadi' 2>/dev/null; then
      "$PEER_PYTHON" scripts/control_peer.py "$OUT/lesson13-linear-check.json" 2>&1 | tee "$OUT/lesson13-linear-check.txt"
    else
      echo "skipped: $PEER_PYTHON cannot import control and casadi (bash scripts/setup.sh installs them)" |
        tee "$OUT/lesson13-linear-check.txt"
    fi
    cp out/lesson13/mpc_*.csv "$OUT/lesson13/"
  fi
  [[ $part == soft-sensor && -f out/lesson13/soft_sensor_test.csv ]] && cp out/lesson13/soft_sensor_test.csv "$OUT/lesson13/"
done
/usr/bin/python3 scripts/make_figures.py --only lesson13
