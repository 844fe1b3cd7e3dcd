#!/usr/bin/env bash
# scripts/bench_lesson10.sh: lesson 10's figures, measured and recorded with the machine:
#   docs/benchmarks/lesson10-<part>.json   what `lesson10 --part <part> --json-dir` writes
#                                           (the notebook plots these)
#   docs/benchmarks/lesson10-inference.md  the machine, the commands and every part's output
# Parts: kv (KV cache vs recompute), law (tokens/s vs bytes of weights, batch > 1), quant
# (fp32/bf16/int8/int4 of the trained target), speculative (drafts x k), prune (sparsity
# sweep with fine-tune, dense vs 2:4 speed). The target and draft models are trained on
# Tiny Shakespeare first (out/bench-lesson10/<role>; reused when there: delete to retrain).
# Takes ~40-60 minutes on 2 cores, most of it training the 4.8M-parameter target. Run it on a
# quiet machine. PARTS="law quant" runs only those; REPORT_ONLY=1 rewrites the markdown.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${REPORT_ONLY:-}" ]]; then
  cmake --preset release >/dev/null
  cmake --build --preset release --target lesson10 >/dev/null
fi
bin=./build/release/bin
out=out/bench-lesson10
parts="${PARTS:-kv law quant speculative prune}"
data="${DATA:-}"
if [[ -z "$data" ]]; then
  for f in data/tinyshakespeare/input.txt data/tinyshakespeare.txt ../shared/data/tinyshakespeare.txt; do
    [[ -f "$f" ]] && data="$f" && break
  done
fi
[[ -n "$data" ]] || { echo "bench_lesson10: Tiny Shakespeare not found (python3 scripts/fetch_data.py tinyshakespeare)" >&2; exit 1; }
mkdir -p "$out" docs/benchmarks
if [[ -z "${REPORT_ONLY:-}" ]]; then
  for p in $parts; do
    echo "+ lesson10 --part $p --data $data --out-dir $out --json-dir docs/benchmarks"
    $bin/lesson10 --part "$p" --data "$data" --out-dir "$out" --json-dir docs/benchmarks 2>&1 | tee "$out/$p.txt"
  done
fi

cpu=$(lscpu 2>/dev/null | sed -n 's/^Model name:[[:space:]]*//p' | head -1)
{
  echo "# Lesson 10: inference on the CPU (KV cache, the bandwidth law, quantization, speculative decoding, pruning)"
  echo
  echo "Produced by \`bash scripts/bench_lesson10.sh\` on $(date -u +%Y-%m-%d); the JSON beside this file"
  echo "(\`lesson10-<part>.json\`) holds the same numbers for notebooks/10-inference.ipynb."
  echo
  echo "- machine: ${cpu:-unknown CPU}, $(nproc) cores, $(free -g 2>/dev/null | awk '/^Mem:/{print $2 " GiB"}'), load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
  echo "- build: release preset, $(c++ --version | head -1); OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-unset (libgomp default)}"
  echo "- data: $data"
  echo
  for p in kv law quant speculative prune; do
    [[ -f "$out/$p.txt" ]] || continue
    echo "## Part $p"
    echo
    echo "\`lesson10 --part $p --data $data --out-dir $out --json-dir docs/benchmarks\`:"
    echo
    grep -v '^wrote \|^train \|^step ' "$out/$p.txt" | sed 's/^/    /'
    echo
  done
} > docs/benchmarks/lesson10-inference.md
echo "wrote docs/benchmarks/lesson10-inference.md"
