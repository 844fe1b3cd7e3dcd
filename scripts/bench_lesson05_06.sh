#!/usr/bin/env bash
# scripts/bench_lesson05_06.sh: run lessons 05 and 06 with their defaults and record the
# figures (validation losses, time per iteration, samples, plant RMSE per model and dead
# time) with the machine they ran on in docs/benchmarks/lesson05-06-rnn-lstm.md.
# Takes ~12 minutes on 2 cores. Needs Tiny Shakespeare for the figures to mean what the
# lesson texts say (python3 scripts/fetch_data.py tinyshakespeare, or ../shared/data).
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${REPORT_ONLY:-}" ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release >/dev/null
fi
bin=./build/release/bin
out=out/bench-lesson05-06
run() {  # run <log name> <command...>: show it, keep it
  echo "+ ${*:2}"
  "${@:2}" | tee "$out/$1.txt"
}
if [[ -z "${REPORT_ONLY:-}" ]]; then
rm -rf "$out"
mkdir -p "$out"
run rnn_chars $bin/nnlab lesson05 --part chars --out-dir "$out/l05"
run lstm_chars $bin/nnlab lesson06 --part chars --out-dir "$out/l06"
run rnn_plant $bin/nnlab lesson05 --part plant --out-dir "$out/l05"
run lstm_plant $bin/nnlab lesson06 --part plant --out-dir "$out/l06"
run gradients $bin/nnlab lesson06 --part gradients --out-dir "$out/l06"
run compare $bin/nnlab lesson06 --part compare --out-dir "$out/compare"
fi

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
section() {  # the lines of a log from the first line matching $2 to the end of the block
  sed -n "/$2/,/^wrote/p" "$out/$1.txt" | grep -v '^train ' | sed 's/^/    /'
}
mkdir -p docs/benchmarks
cat > docs/benchmarks/lesson05-06-rnn-lstm.md <<MD
# Lessons 05 and 06: RNN and LSTM, default runs

Produced by \`bash scripts/bench_lesson05_06.sh\` on $(date -u +%Y-%m-%d).

- machine: ${cpu:-unknown CPU}, $(nproc) cores, $(free -g 2>/dev/null | awk '/^Mem:/{print $2 " GiB"}')
- build: release preset, $(c++ --version | head -1)
- corpus: $(sed -n 's/^corpus *//p' "$out/rnn_chars.txt" | head -1)

## Characters, default runs (2000 iterations each)

\`nnlab lesson05 --part chars\` (vanilla RNN):

$(section rnn_chars '^model')

\`nnlab lesson06 --part chars\` (LSTM):

$(section lstm_chars '^model')

## Characters, the same time budget (\`nnlab lesson06 --part compare\`)

$(grep -A2 '^summary' "$out/compare.txt" | sed 's/^/    /')

| cell | iterations | seconds | train loss | validation loss |
|---|---|---|---|---|
$(tail -n +2 "$out/compare/compare_chars.csv" | awk -F, '{printf "| %s | %s | %.1f | %.4f | %.4f |\n", $1, $2, $3, $4, $5}')

## The plant, dead time 20 (default runs)

$(section rnn_plant '^scores')

$(section lstm_plant '^scores')

## The plant at several dead times (from the compare run)

$(sed -n '/plant, level RMSE/,/^wrote/p' "$out/compare.txt" | grep -v '^wrote' | sed 's/^          //; s/^/    /')

## Gradient vs distance in time (fresh layers, H = 64)

$(section gradients 'at distance d')
MD
echo "wrote docs/benchmarks/lesson05-06-rnn-lstm.md"
