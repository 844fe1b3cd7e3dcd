#!/usr/bin/env bash
# scripts/bench_lesson15_models.sh: lesson 15's model parts on the course's other models.
#
#   scripts/bench_lesson15_models.sh          the full record (about 15 minutes on 2 idle cores)
#   QUICK=1 scripts/bench_lesson15_models.sh  tiny models and sizes (a dry run into out/, not the record)
#
# The models:
#   lesson08        lesson 08's GPT: nanoGPT's CPU configuration (4 layers, 4 heads, C 128, context
#                   64), `nnlab gpt train` at its defaults on Tiny Shakespeare
#   lesson11-llama  lesson 11's block (RMSNorm, RoPE, SwiGLU, 2 key/value heads, no biases), the
#                   same size and training
#   lesson12        lesson 12's real shapes (GPT-2 124M, SmolLM-135M) with random weights: decode
#                   speed in W8A8 next to fp32, int8 and int4 (`nnlab lesson12 --part speed`). The
#                   weights cannot be fetched on an offline machine; with real ones (scripts/fetch_model.py,
#                   then `nnlab lesson12 --part speed --speed-models <dir> --speed-formats fp32,int8,w8a8,int4`)
#                   the same part measures their perplexity in each format too.
# Both trained models are kept in out/lesson15-models/<name>/best.safetensors (trained on first use),
# then lesson 15's parts w8a8, gptq, kv and energy run on each with --checkpoint. Every run's JSON and
# output are merged into docs/benchmarks/lesson15-models.{json,txt} with the machine.
# Environment: QUICK, BIN (default build/release/bin), STEPS (training steps, default 2000: lesson 08's).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/release/bin}
[[ -x "$BIN/nnlab" ]] || { echo "bench_lesson15_models: $BIN/nnlab is not built (cmake --preset release && cmake --build build/release)" >&2; exit 2; }
data=
for d in ../shared/data/tinyshakespeare.txt data/tinyshakespeare.txt; do
  [[ -f $d ]] && { data=$d; break; }
done
[[ -n $data ]] || { echo "bench_lesson15_models: Tiny Shakespeare not found (../shared/data or data/; scripts/fetch_data.sh fetches it)" >&2; exit 2; }
steps=${STEPS:-2000}
out=out/lesson15-models
record=docs/benchmarks/lesson15-models
quick=()
shapes=gpt2-124m,smollm-135m
if [[ -n "${QUICK:-}" ]]; then
  quick=(--quick)
  steps=${STEPS:-60}
  out=out/lesson15-models-quick
  record=$out/record
  shapes=tiny-gpt2-wide,tiny-llama
fi
# the kv part's long-context model: lesson 15's own (scripts/bench_lesson15.sh trains it), reused
kvdir=out/lesson15
[[ -n "${QUICK:-}" ]] && kvdir=$out
mkdir -p "$out" "$(dirname "$record")"
txt=$record.txt
: > "$txt"

train() {  # name, extra flags: trains into $out/name unless its best checkpoint is there
  local name=$1; shift
  if [[ -f $out/$name/best.safetensors ]]; then
    echo "== $name: reusing $out/$name/best.safetensors" | tee -a "$txt"
    return
  fi
  echo "== $name: nnlab gpt train --max-iters $steps $*" | tee -a "$txt"
  "$BIN/nnlab" gpt train --data "$data" --max-iters "$steps" --out-dir "$out/$name" --overwrite "$@" \
    > "$out/$name.train.log" 2>&1 || { tail -20 "$out/$name.train.log" >&2; exit 1; }
  grep -E "best val|val loss" "$out/$name.train.log" | tail -2 | tee -a "$txt"
}

small=()
[[ -n "${QUICK:-}" ]] && small=(--n-layer 2 --n-embd 64 --eval-iters 2 --eval-interval 30)
train lesson08 "${small[@]}"
train lesson11-llama --arch llama --n-kv-head 2 --bias false "${small[@]}"

jsons=()
for name in lesson08 lesson11-llama; do
  for part in w8a8 gptq kv energy; do
    j=$out/$name-$part.json
    echo "== $name, part $part" | tee -a "$txt"
    "$BIN/nnlab" lesson15 "${quick[@]}" --part "$part" --checkpoint "$out/$name/best.safetensors" --data "$data" \
      --bitnet-dir "$kvdir" --json "$j" 2>&1 | tee -a "$txt"
    jsons+=("$name:$j")
  done
done

echo "== lesson12 shapes, part speed" | tee -a "$txt"
"$BIN/nnlab" lesson12 "${quick[@]}" --part speed --data "$data" --speed-shapes "$shapes" \
  --speed-formats fp32,int8,w8a8,int4 --spec-target "" --json "$out/lesson12-speed.json" 2>&1 | tee -a "$txt"
jsons+=("lesson12:$out/lesson12-speed.json")

/usr/bin/python3 - "$record.json" "${jsons[@]}" <<'EOF'
import json, sys
# one record: the machine of the first run, then each model's parts as the lessons wrote them
out, runs = sys.argv[1], sys.argv[2:]
rec = {"schema": "nnlab-lesson15-models/1", "machine": None, "quick": None, "models": {}}
for item in runs:
    name, path = item.split(":", 1)
    with open(path) as f:
        d = json.load(f)
    rec["machine"] = rec["machine"] or d.get("machine")
    rec["quick"] = d.get("quick") if rec["quick"] is None else rec["quick"]
    rec["models"].setdefault(name, {}).update(d.get("parts", {}))
with open(out + ".tmp", "w") as f:
    json.dump(rec, f, indent=1)
import os
os.replace(out + ".tmp", out)
print("bench_lesson15_models: wrote", out)
EOF
echo "bench_lesson15_models: output in $txt"
