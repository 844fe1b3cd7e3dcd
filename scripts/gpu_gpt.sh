#!/usr/bin/env bash
# scripts/gpu_gpt.sh: the GPT on the GPU, end to end, in one command (issue 7). It
#   1. runs scripts/gpu_bench.sh: refuses without an NVIDIA GPU and nvcc, builds build/gpu for
#      the GPU that is there, runs the device tests (every kernel version validated on the
#      GPU, and tests/test_gpt_cuda.cpp's "gpu" case: the cuda backend against the cpu
#      backend on the same weights and batch, logits, loss, gradients and 10 AdamW steps, at
#      fp32, tf32 and bf16) and the kernel benchmark (docs/benchmarks/cuda-<gpu>.*);
#   2. times a training step of nanoGPT's Shakespeare character model (6 layers, 6 heads,
#      384 wide, context 256, batch 64, dropout 0.2, no biases): ours at fp32, tf32 and bf16
#      against PyTorch eager and torch.compile at the same precisions, on the same GPU in the
#      same run, with MFU against the peak measured now, and where our step's time goes op
#      by op (--profile) -> docs/benchmarks/gpt-cuda-<gpu>.{json,md};
#   3. trains that model for 5000 iterations (gpt/configs/shakespeare_char_gpu.toml) at each
#      precision in TRAIN_PRECISIONS and records the best validation loss (goal: <= 1.47,
#      nanoGPT's 1.4697), tokens/s and MFU -> docs/benchmarks/gpt-cuda-train-<gpu>.md, logs
#      in out/gpu-gpt/<precision>/log.jsonl (the notebook 09-gpu-training plots them);
#   4. runs lesson 10's kv, law and quant parts with --backend cuda (issue 8): decoding with
#      the KV cache and the dequantising matvec kernels on the GPU, tokens/s against the GPU's
#      bytes of weights -> docs/benchmarks/lesson10-<part>-cuda.json.
# Knobs: everything scripts/gpu_bench.sh takes (SKIP_BUILD, SKIP_TESTS, QUICK, ...), and
#   SKIP_KERNEL_BENCH=1          step 1 without the kernel benchmark (OPS= not needed)
#   SKIP_LESSON10=1              without step 4 (lesson 10's kv, law and quant parts on the GPU)
#   SKIP_GPT_BENCH=1             without steps 2 and 2b (the one-step benches)
#   SKIP_LLAMA=1                 without step 2b (lesson 11's llama block, one profiled step)
#   TRAIN_PRECISIONS="bf16 fp32" the training runs of step 3 (default: bf16 fp32)
#   MAX_ITERS=5000               shorter runs to check the pipeline
#   DATA=path/to/input.txt       Tiny Shakespeare (default: nnlab's own search, see io/text.h)
#   TORCH_PYTHON=/usr/bin/python3  a Python with PyTorch+CUDA for the peer (passed to nnlab as
#                                $NNLAB_TORCH_PYTHON; default: `python3` on PATH when its torch
#                                sees a GPU, else the one CMake found; without one the PyTorch
#                                rows are skipped, said so)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build/gpu}
logs=out/gpu-gpt
mkdir -p "$logs" docs/benchmarks
say() { printf '\n== %s\n' "$*"; }

# ---- 1. build, device tests, kernel bench ---------------------------------------------------------
status=0
if [[ -n "${SKIP_KERNEL_BENCH:-}" ]]; then
  OPS=${OPS:-adamw} QUICK=1 bash scripts/gpu_bench.sh || status=$?
else
  bash scripts/gpu_bench.sh || status=$?
fi
[[ $status -eq 2 ]] && exit 2  # refused: no GPU, no nvcc, build failed
nnlab="$build/bin/nnlab"
gpu=$("$nnlab" cuda info | sed -n '/^GPU found/,/^$/s/^  name  *//p' | head -1)
slug=$(tr '[:upper:]' '[:lower:]' <<<"${gpu:-unknown-gpu}" | sed -E 's/[^a-z0-9]+/-/g; s/^-+//; s/-+$//')
if [[ -n "${TORCH_PYTHON:-}" ]]; then
  export NNLAB_TORCH_PYTHON="$TORCH_PYTHON"
elif python3 -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' >/dev/null 2>&1; then
  export NNLAB_TORCH_PYTHON="$(command -v python3)"  # a GPU image's PyTorch, wherever it lives
fi
echo "PyTorch peer: ${NNLAB_TORCH_PYTHON:-the Python CMake found}"
model=(--n-layer 6 --n-head 6 --n-embd 384 --block-size 256 --batch-size 64 --dropout 0.2 --bias false)

# ---- 2. one training step: ours vs PyTorch, and where the time goes --------------------------------
if [[ -z "${SKIP_GPT_BENCH:-}" ]]; then
say "nnlab gpt bench: cuda fp32/tf32/bf16 vs PyTorch eager and torch.compile on $gpu"
"$nnlab" gpt bench "${model[@]}" --backends cuda:fp32,cuda:tf32,cuda:bf16 --profile --iters "${ITERS:-30}" \
  --warmup 10 --json "docs/benchmarks/gpt-cuda-$slug.json" --markdown "$logs/bench.md" 2>&1 | tee "$logs/bench.txt"
{
  cat "$logs/bench.md"
  echo
  echo "Produced by \`bash scripts/gpu_gpt.sh\` on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), device: $gpu."
  echo
  echo '```'
  grep -E "x PyTorch eager" "$logs/bench.txt" || echo "(no PyTorch comparison: see $logs/bench.txt)"
  echo '```'
} > "docs/benchmarks/gpt-cuda-$slug.md"

# ---- 2b. lesson 11's llama block on the GPU: the same shape with RMSNorm, RoPE, SwiGLU and
# grouped-query flash attention (3 KV heads for 6 query heads), one step at fp32 and bf16 with
# the per-op profile (no PyTorch peer: the bench's is nanoGPT's gpt2) ---------------------------
if [[ -z "${SKIP_LLAMA:-}" ]]; then
  say "nnlab gpt bench --arch llama: cuda fp32/bf16 on $gpu"
  "$nnlab" gpt bench "${model[@]}" --arch llama --n-kv-head 3 --backends cuda:fp32,cuda:bf16 \
    --profile --iters "${ITERS:-30}" --warmup 10 --json "docs/benchmarks/gpt-cuda-llama-$slug.json" \
    --markdown "$logs/bench-llama.md" 2>&1 | tee "$logs/bench-llama.txt" || { echo "gpu_gpt: llama bench FAILED" >&2; status=1; }
  [[ -f "$logs/bench-llama.md" ]] && {
    cat "$logs/bench-llama.md"
    echo
    echo "Produced by \`bash scripts/gpu_gpt.sh\` (step 2b) on $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), device: $gpu."
  } > "docs/benchmarks/gpt-cuda-llama-$slug.md"
fi

fi  # SKIP_GPT_BENCH

# ---- 3. the nanoGPT Shakespeare run ------------------------------------------------------------------
train_md="docs/benchmarks/gpt-cuda-train-$slug.md"
{
  echo "# nanoGPT's Shakespeare character config on $gpu"
  echo
  echo "\`nnlab gpt train --backend cuda --config gpt/configs/shakespeare_char_gpu.toml\`, $(date -u +%Y-%m-%d), commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown). Goal: best val loss <= 1.47 (nanoGPT: 1.4697 on an A100)."
  echo
  echo "| precision | steps | best val loss | goal | minutes | median tokens/s | median MFU |"
  echo "|---|---:|---:|---|---:|---:|---:|"
} > "$train_md"
for prec in ${TRAIN_PRECISIONS:-bf16 fp32}; do
  out="$logs/$prec"
  rm -rf "$out"
  say "train at $prec -> $out"
  args=(gpt train --backend cuda --precision "$prec" --config gpt/configs/shakespeare_char_gpu.toml --out-dir "$out"
        --sample-tokens 300 --prompt "ROMEO:")
  [[ -n "${MAX_ITERS:-}" ]] && args+=(--max-iters "$MAX_ITERS" --lr-decay-iters "$MAX_ITERS")
  [[ -n "${DATA:-}" ]] && args+=(--data "$DATA")
  start=$(date +%s)
  if ! "$nnlab" "${args[@]}" 2>&1 | tee "$out.txt"; then
    echo "gpu_gpt: training at $prec FAILED (log: $out.txt)" >&2
    status=1
    continue
  fi
  minutes=$(( ($(date +%s) - start + 30) / 60 ))
  python3 - "$out/log.jsonl" "$prec" "$minutes" >> "$train_md" <<'PY'
import json, statistics, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
train = [r for r in recs if r.get("split") == "train"]
evals = [r for r in recs if r.get("split") == "eval" and r["step"] > 0]
best = min(r["val_loss"] for r in evals) if evals else float("nan")
tok = statistics.median(r["tok_s"] for r in train) if train else 0
mfu = statistics.median(r["mfu"] for r in train) if train else 0
goal = "met" if best <= 1.47 else "NOT met"
print(f"| {sys.argv[2]} | {train[-1]['step'] if train else 0} | {best:.4f} | {goal} | {sys.argv[3]} | {tok:,.0f} | {100 * mfu:.1f}% |")
PY
done
echo >> "$train_md"
echo "Logs: out/gpu-gpt/<precision>/log.jsonl; the full output of each run: out/gpu-gpt/<precision>.txt." >> "$train_md"
# ---- 4. lesson 10 on the GPU: the KV cache, the bandwidth law and quantisation ---------------------
# The same parts as on the CPU (scripts/bench_lesson10.sh), with --backend cuda; JSON beside the
# CPU's as docs/benchmarks/lesson10-<part>-cuda.json, output in out/gpu-gpt/lesson10-<part>.txt.
if [[ -z "${SKIP_LESSON10:-}" ]]; then
  for part in kv law quant; do
    say "lesson10 --part $part --backend cuda"
    args=(lesson10 --part "$part" --backend cuda --out-dir out/gpu-gpt/lesson10 --json-dir docs/benchmarks)
    [[ -n "${DATA:-}" ]] && args+=(--data "$DATA")
    "$nnlab" "${args[@]}" 2>&1 | tee "$logs/lesson10-$part.txt" || { echo "gpu_gpt: lesson10 --part $part FAILED" >&2; status=1; }
  done
fi

say "records"
echo "  docs/benchmarks/gpt-cuda-$slug.{json,md}   one step: ours vs PyTorch, per-op profile"
echo "  $train_md                                  the 5000-step runs"
echo "  docs/benchmarks/lesson10-{kv,law,quant}-cuda.json   lesson 10 on the GPU"
cat "$train_md"
exit $status
