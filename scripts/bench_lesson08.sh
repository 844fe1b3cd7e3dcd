#!/usr/bin/env bash
# scripts/bench_lesson08.sh: the lesson-08 GPT's two goals, measured and recorded with the
# machine in docs/benchmarks/lesson08-gpt.md:
#   quality  nanoGPT's CPU run (4 layers, 4 heads, 128 wide, context 64, batch 12, 2000
#            steps, lr 1e-3 -> 1e-4, dropout 0) on Tiny Shakespeare; then the best
#            checkpoint evaluated on 500 batches (the 20-batch estimate during training
#            is noisy to about +-0.02)
#   speed    `nnlab gpt bench`: ms per training step of the cpu backend vs PyTorch eager
#            (same model, same machine, same run; PyTorch's fastest thread setting)
# Takes ~5-10 minutes on 2 cores. Run it on a quiet machine: timings of a shared one are not
# worth recording. REPORT_ONLY=1 rewrites the markdown from the last logs; BENCH_ONLY=1
# re-runs only the speed part.
set -euo pipefail
cd "$(dirname "$0")/.."
# OMP_WAIT_POLICY is left as the caller has it (unset: libgomp spins a while, then sleeps).
# Do NOT run this with OMP_WAIT_POLICY=passive on a quiet machine: every OpenMP region then
# pays a futex wake-up, measured here: 124 ms/step instead of 50 for the cpu backend on 2
# threads (scripts/test.sh sets passive because its tests share the cores).
if [[ -z "${REPORT_ONLY:-}" ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release >/dev/null
fi
bin=./build/release/bin
out=out/bench-lesson08
data="${DATA:-}"
if [[ -z "$data" ]]; then
  for f in data/tinyshakespeare/input.txt ../shared/data/tinyshakespeare.txt; do
    [[ -f "$f" ]] && data="$f" && break
  done
fi
[[ -n "$data" ]] || { echo "bench_lesson08: Tiny Shakespeare not found (python3 scripts/fetch_data.py tinyshakespeare)" >&2; exit 1; }
if [[ -z "${REPORT_ONLY:-}" ]]; then
  [[ -n "${BENCH_ONLY:-}" ]] || rm -rf "$out"
  mkdir -p "$out"
  echo "+ nnlab gpt bench --naive"
  $bin/nnlab gpt bench --naive --iters 30 --json "$out/bench.json" | tee "$out/bench.txt"
fi
if [[ -z "${REPORT_ONLY:-}" && -z "${BENCH_ONLY:-}" ]]; then
  echo "+ nnlab gpt train --data $data (nanoGPT CPU configuration)"
  $bin/nnlab gpt train --data "$data" --out-dir "$out/run" --sample-tokens 500 > "$out/train.txt"
  grep -v '^train ' "$out/train.txt" | tail -30
  $bin/nnlab gpt eval --checkpoint "$out/run/best.safetensors" --data "$data" --eval-iters 500 | tee "$out/eval.txt"
fi

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
mkdir -p docs/benchmarks
{
  echo "# Lesson 08: the GPT on the CPU, quality and speed"
  echo
  echo "Produced by \`bash scripts/bench_lesson08.sh\` on $(date -u +%Y-%m-%d)."
  echo
  echo "- machine: ${cpu:-unknown CPU}, $(nproc) cores, $(free -g 2>/dev/null | awk '/^Mem:/{print $2 " GiB"}'), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- build: release preset, $(c++ --version | head -1); OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset (libgomp default)}"
  echo
  echo "## Speed: one training step (forward, backward, clip, AdamW), nanoGPT's CPU configuration"
  echo
  grep -v '^running PyTorch' "$out/bench.txt" | sed 's/^/    /' | sed 's/^    |/|/'
  echo
  echo "## Quality: nanoGPT's CPU run, 2000 steps"
  echo
  echo "\`nnlab gpt train --data $data\` (defaults = the nanoGPT CPU configuration):"
  echo
  grep -v '^train ' "$out/train.txt" | grep -v '^$' | sed -n '1,/^trained/p' | sed 's/^/    /'
  echo
  echo "The best checkpoint on 500 batches per split (\`nnlab gpt eval --eval-iters 500\`):"
  echo
  sed 's/^/    /' "$out/eval.txt"
  echo
  echo "A sample (temperature 0.8):"
  echo
  sed -n '/^---- sample/,/^----$/p' "$out/train.txt" | sed 's/^/    /'
} > docs/benchmarks/lesson08-gpt.md
echo "wrote docs/benchmarks/lesson08-gpt.md"
